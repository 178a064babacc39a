"""Graph breaks: a function cut into Python statements and graph segments.

Needs the function's front end (``pyct/frontend.py``) and the lines janus
could not convert (the *breaks*).  ``split(fn, lines)`` returns a ``Split``:

* the **skeleton**, a plain Python function with ``fn``'s signature, defaults,
  globals and closure cells: the statements at the break lines run in it as
  written, and so do the loops, branches, ``with`` and ``try`` statements
  around them (*structural* statements, whose bodies are cut in turn);
* the **segments**: every maximal run of other statements becomes a function
  of the locals it reads, returning the locals it binds that are read
  elsewhere.  The janus function runs each segment through a janus function
  of its own (``cuts.py`` makes them), so a segment is profiled, guarded,
  cached, relaxed and falls back exactly like a whole function.

Values cross a cut only as real values: a segment's results are the graph's
outputs, materialized.  A name that may be unbound at a cut crosses as
``UNDEFINED`` and is unbound again on the other side.  A ``return`` ends a
segment (the skeleton returns what the segment returns); a statement that
may leave a segment otherwise (a ``return`` inside an ``if``, a ``break``
of a loop outside the segment) is structural or runs in Python.

Segments are registered with the front end (their trees are the code they
were compiled from), so the profiler and the generator treat them as any
function.  DESIGN.md ("Graph breaks") states the invariants.
"""
import ast
import builtins
import copy
import dataclasses
import types
import typing

import gast

from janus.graphgen import hoist, nested
from janus.pyct import anno, frontend, liveness, mangling, recompile, scopes, sites
from janus.control import common

SEGMENTS = '__janus_segments'    # the skeleton's list of segment callables (a closure)
HELPERS = '__jr'                 # read_local / UNDEFINED, as converted code names them
_INPUT = '__janus_in_'           # the skeleton's copy of a maybe-unbound input
_RESULT = '__janus_out'          # the skeleton's tuple of a segment's results
_SKELETON = '__janus_skeleton'   # the skeleton's name in the factory (then the function's)


class CannotSplit(Exception):
    """``fn`` cannot be cut at these lines without changing what it means."""


class ScopeMismatch(Exception):
    """janus's answer on which names are whose differs from Python's ``symtable``: a
    janus error, not a refusal (the caller records it as one; the function is not cut)."""


class NothingToCut(CannotSplit):
    """Cut at these lines, ``fn`` would have no statement left for a graph."""


class _Helpers:
    """What plain segment code reads as ``__jr`` (converted code gets the operators)."""
    read_local = staticmethod(common.read_local)
    UNDEFINED = common.UNDEFINED
    routed = staticmethod(nested.routed)


class _RoutedCalls(gast.NodeTransformer):
    """``f(...)`` in a statement that runs in Python becomes ``__jr.routed(f)(...)``: a
    callee a break was refused in runs through janus of its own (``nested.py``).  The
    callee expression is evaluated first, then the arguments, as before; code the
    statement defines (a ``def``, ``lambda`` or ``class``) is left as written."""

    def visit_Call(self, node):
        self.generic_visit(node)
        wrapped = gast.Call(gast.Attribute(_name(HELPERS), 'routed', gast.Load()),
                            [node.func], [])
        node.func = gast.copy_location(wrapped, node.func)
        return node

    def _left_as_written(self, node):
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _left_as_written
    visit_ClassDef = _left_as_written


@dataclasses.dataclass(eq=False)
class Segment:
    """One run of statements compiled as a function of the locals it reads."""
    function: types.FunctionType
    first_line: int
    last_line: int
    inputs: tuple          # parameter names, in order
    outputs: tuple         # names returned (empty when the segment returns for the function)
    returns: bool          # ends with the function's ``return``
    # Its definition as compiled, positions included: equal keys in two cuts of one
    # function are the same code on the same names (a cut made again reuses it).
    key: str = ''
    in_loop: bool = False  # the skeleton may run it more than once per call


@dataclasses.dataclass(eq=False)
class Split:
    """A function cut at its breaks (see the module docstring)."""
    skeleton: types.FunctionType
    segments: typing.List[Segment]
    python_lines: typing.Tuple[int, ...]   # first lines of the statements run in Python
    slots: list                            # the skeleton's segment callables, by index
    hoisted: frozenset = frozenset()       # break lines whose tensor work was hoisted out
    source: str = ''                       # the skeleton's code, for ``janus.to_code``


def split(fn, break_lines, whole=(), routing=False):
    """``fn`` cut so that the statements at ``break_lines`` run in Python; raises
    ``CannotSplit``.  The skeleton calls ``Split.slots[i]`` for segment i: plain
    segment functions until the caller puts janus functions there.  The tensor
    work a statement hands to ``.numpy()`` is hoisted out of it into the segment
    before (``hoist.py``), except at the lines in ``whole``.  ``routing``: a break
    statement calls user code that runs through janus of its own (``nested.py``), so
    a skeleton with no segment is still worth having (else ``NothingToCut``)."""
    parsed = frontend.front_end(fn)
    tree = parsed.tree
    if not isinstance(tree, gast.FunctionDef):
        raise CannotSplit('a lambda is one expression')
    tree = mangling.mangle(copy.deepcopy(tree), mangling.owner_class(fn))
    hoisted = hoist.hoist(tree, set(break_lines) - set(whole))
    cutter = _Cutter(fn, tree, set(break_lines))
    skeleton_body = cutter.block(tree.body, liveness.at_entry(tree), _Where(0, False))
    if not cutter.segments and not routing:
        raise NothingToCut('no statement is left to convert')
    made = _compile(fn, tree, parsed, cutter, skeleton_body)
    made.hoisted = frozenset(hoisted)
    return made


# -- finding what runs in Python ------------------------------------------------

def _blocks(stmt):
    """The statement lists directly inside a compound statement janus cuts through."""
    if isinstance(stmt, (gast.If, gast.For, gast.While)):
        return [stmt.body, stmt.orelse]
    if isinstance(stmt, gast.With):
        return [stmt.body]
    if isinstance(stmt, gast.Try):
        return [stmt.body] + [h.body for h in stmt.handlers] + [stmt.orelse, stmt.finalbody]
    return []


def _first_line(stmt):
    decorators = getattr(stmt, 'decorator_list', ())
    return min([stmt.lineno] + [d.lineno for d in decorators])


def _innermost(stmts, line, path):
    """The path of statements (outermost first) down to the innermost one at ``line``
    (not a statement janus hoisted out of it: that one is the segment's)."""
    for stmt in stmts:
        if anno.get(stmt, anno.Key.HOISTED):
            continue
        if _first_line(stmt) <= line <= stmt.end_lineno:
            for block in _blocks(stmt):
                found = _innermost(block, line, path + [stmt])
                if found:
                    return found
            return path + [stmt]
    return None


_DYNAMIC_SCOPE = ('locals', 'vars', 'eval', 'exec', 'dir')


@dataclasses.dataclass(frozen=True)
class _Where:
    """Where a block is: inside how many loops the skeleton runs, and whether an
    exception leaving a statement there may be caught inside the function (a ``try``
    body, a ``with`` whose manager may suppress it)."""
    loops: int
    guarded: bool


def _never_suppressing_managers():
    """Callables whose context managers never end a ``with`` body early: their
    ``__exit__`` returns a false value whatever the exception."""
    import builtins
    import tensorflow as tf
    return (tf.GradientTape, tf.name_scope, tf.device, tf.control_dependencies, builtins.open)


def _resolve(expr, fn, local_names):
    """The object a dotted name (``tf.GradientTape``) names in ``fn``'s globals,
    closure cells or builtins, looking into modules only (no user code runs); None
    where it names a local, a non-module attribute or nothing."""
    path = []
    while isinstance(expr, gast.Attribute):
        path.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, gast.Name) or expr.id in local_names:
        return None
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    try:
        value = (cells[expr.id].cell_contents if expr.id in cells
                 else fn.__globals__[expr.id] if expr.id in fn.__globals__
                 else vars(builtins)[expr.id])
        for attr in reversed(path):
            if not isinstance(value, types.ModuleType):
                return None
            value = getattr(value, attr)
    except (KeyError, ValueError, AttributeError):
        return None
    return value


def _mark_quiet_withs(tree, fn, local_names):
    """Marks each ``with`` whose every manager is made by a call of a known
    never-suppressing callable (anno.Key.NEVER_SUPPRESSES): its body surely runs to
    its end when the statement completes."""
    known = _never_suppressing_managers()
    for node in gast.walk(tree):
        if isinstance(node, gast.With):
            anno.set(node, anno.Key.NEVER_SUPPRESSES, all(
                isinstance(item.context_expr, gast.Call) and any(
                    _resolve(item.context_expr.func, fn, local_names) is k for k in known)
                for item in node.items))


def _loop_target(stmt):
    return [stmt.target] if isinstance(stmt, gast.For) else []


def _has_blocks_or_body(stmt):
    return bool(_blocks(stmt)) or isinstance(stmt, (gast.Match, gast.AsyncFor, gast.AsyncWith))


class _Cutter:
    """Cuts blocks into skeleton statements and segment functions."""

    def __init__(self, fn, tree, lines):
        self.fn, self.tree = fn, tree
        self.declared = _declared(tree)
        self.locals = scopes.local_names(tree)
        disagreement = scopes.symtable_disagreement(tree)
        if disagreement is not None:
            raise ScopeMismatch("janus's scope analysis of %s differs from Python's (%s)"
                                % (fn.__qualname__, disagreement))
        _mark_quiet_withs(tree, fn, self.locals)
        self.python, self.structural, broken = set(), set(), set()
        for line in lines:
            path = _innermost(tree.body, line, [])
            if path is None:
                raise CannotSplit('line %d is not a statement of %s' % (line, fn.__qualname__))
            *outer, stmt = path
            (self.structural if _blocks(stmt) else self.python).add(id(stmt))
            self.structural |= {id(s) for s in outer}
            broken.add(id(stmt))
        # The refused statements (a loop or branch refused at its header runs in Python
        # around its cut body).
        self.python_lines = sorted(_first_line(s) for s in gast.walk(tree) if id(s) in broken)
        _refuse_dynamic_scope(tree)
        _refuse_escaping_closures(tree, self.locals)
        self.segments = []      # (FunctionDef, first, last, inputs, outputs, returns, in_loop)

    def block(self, stmts, bound, where):
        """The skeleton statements for ``stmts``, run from ``bound`` (liveness.Bound)."""
        out, run = [], []
        for stmt in stmts:
            kind = self._kind(stmt, where)
            if kind == 'segment':
                run.append(stmt)
                if isinstance(stmt, gast.Return) or where.guarded:
                    out += self._segment(run, bound, where)
                    bound, run = bound.after_all(run), []
                continue
            out += self._segment(run, bound, where)
            bound, run = bound.after_all(run), []
            if kind == 'structural':
                out.append(self._structural(stmt, bound, where))
            elif id(stmt) in self.python:
                out.append(_RoutedCalls().visit(copy.deepcopy(stmt)))
            elif not isinstance(stmt, (gast.Global, gast.Nonlocal)):
                out.append(stmt)
            bound = bound.after(stmt)
        return out + self._segment(run, bound, where)

    def _kind(self, stmt, where):
        if id(stmt) in self.structural:
            return 'structural'
        if id(stmt) in self.python or isinstance(stmt, (gast.Global, gast.Nonlocal)):
            return 'python'
        if isinstance(stmt, gast.Return):
            return 'segment'
        if scopes.jumps_out(stmt) or (where.guarded and _has_blocks_or_body(stmt)):
            # Guarded: a segment that raised half-way would lose the locals it bound
            # before, which the handler sees; one simple statement binds all or none.
            return 'structural' if _blocks(stmt) else 'python'
        return 'segment'

    def _structural(self, stmt, bound, where):
        """``stmt`` kept in the skeleton, its bodies cut in turn."""
        stmt = copy.copy(stmt)
        if isinstance(stmt, (gast.For, gast.While)):
            header = bound.after_expr(stmt.test if isinstance(stmt, gast.While) else stmt.iter)
            # a later iteration (and ``else``) starts after whatever the body bound or deleted
            looped = liveness.Bound(header.surely, header.maybe | liveness.binds(
                stmt.body) | liveness.binds(_loop_target(stmt)))
            looped = looped.without(liveness.deletes(stmt.body))
            start = looped.after_all([gast.Assign([stmt.target], gast.Constant(None, None))]
                                     if isinstance(stmt, gast.For) else [])
            inner = dataclasses.replace(where, loops=where.loops + 1)
            stmt.body = self.block(stmt.body, start, inner) or [gast.Pass()]
            stmt.orelse = self.block(stmt.orelse, looped, where)
        elif isinstance(stmt, gast.If):
            start = bound.after_expr(stmt.test)
            stmt.body = self.block(stmt.body, start, where) or [gast.Pass()]
            stmt.orelse = self.block(stmt.orelse, start, where)
        elif isinstance(stmt, gast.With):
            quiet = anno.get(stmt, anno.Key.NEVER_SUPPRESSES)
            inner = where if quiet else dataclasses.replace(where, guarded=True)
            stmt.body = self.block(stmt.body, bound.entering(stmt), inner) or [gast.Pass()]
        elif isinstance(stmt, gast.Try):
            # a handler, ``else`` or ``finally`` may start after any part of the body
            maybe = liveness.Bound(bound.surely, bound.maybe | liveness.binds([stmt]))
            maybe = maybe.without(liveness.deletes([stmt]))
            guarded = dataclasses.replace(where, guarded=True)
            stmt.body = self.block(stmt.body, bound, guarded) or [gast.Pass()]
            stmt.handlers = [self._handler(h, maybe, where) for h in stmt.handlers]
            stmt.orelse = self.block(stmt.orelse, maybe, where)
            stmt.finalbody = self.block(stmt.finalbody, maybe, where)
        for field in ('body', 'orelse', 'finalbody'):
            if getattr(stmt, field, None):
                for node in getattr(stmt, field):
                    _locate_missing(node, stmt)
        return stmt

    def _handler(self, handler, bound, where):
        handler = copy.copy(handler)
        start = bound if handler.name is None else liveness.Bound(
            bound.surely | {handler.name.id}, bound.maybe | {handler.name.id})
        handler.body = self.block(handler.body, start, where) or [gast.Pass()]
        return handler

    def _segment(self, run, bound, where):
        """The skeleton statements calling a new segment for ``run`` (none for none)."""
        if not run:
            return []
        if not any(_does_work(s) for s in run):
            return list(run)   # moves names around only: cheaper as Python
        returns = isinstance(run[-1], gast.Return)
        inputs, maybe_unbound = self._inputs(run, bound)
        outputs = () if returns else self._outputs(run, where.loops)
        # what is bound after the run *in the segment*: its inputs and what it binds (a
        # name the skeleton has bound but the segment neither reads nor surely binds is
        # not bound there: it comes back UNDEFINED and the skeleton keeps its own)
        after = liveness.Bound(frozenset(inputs) - maybe_unbound,
                               frozenset(inputs)).after_all(run)
        index = len(self.segments)
        name = '%s_lines_%d_%d' % (self.tree.name, _first_line(run[0]), run[-1].end_lineno)
        if any(d.name == name for d, *_ in self.segments):
            # two runs on the same lines (a segment cut again: its prologue and its
            # return share its first and last lines); the parts are found by name
            name = '%s_%d' % (name, index)
        definition = self._definition(name, run, inputs, maybe_unbound, outputs, after)
        self.segments.append((definition, _first_line(run[0]), run[-1].end_lineno,
                              inputs, outputs, returns, where.loops > 0))
        return _call_statements(index, run, inputs, maybe_unbound, outputs, after,
                                liveness.deletes(run), returns)

    def _inputs(self, run, bound):
        """The segment's parameters (``fn``'s own first, in its order) and those of them
        that may be unbound when it starts."""
        exposed = liveness.exposed_reads(run) & self.locals
        written = liveness.binds(run)
        inputs = {n for n in exposed if n in bound.maybe or n not in written}
        params = [a.id for a in self.tree.args.posonlyargs + self.tree.args.args]
        ordered = [n for n in params if n in inputs] + sorted(inputs - set(params))
        return tuple(ordered), frozenset(n for n in ordered if n not in bound.surely)

    def _outputs(self, run, loops):
        """The locals ``run`` binds that code outside it reads (in a loop, also those
        ``run`` reads before it binds them: the next iteration's run reads them)."""
        elsewhere = _reads_outside(self.tree, run)
        if loops:
            elsewhere |= liveness.exposed_reads(run)
        return tuple(sorted(liveness.binds(run) & self.locals & elsewhere))

    def _definition(self, name, run, inputs, maybe_unbound, outputs, after):
        """The segment's FunctionDef: declarations, unbinding prologue, ``run``, results."""
        first, last = run[0], run[-1]
        params = gast.arguments([gast.Name(n, gast.Param(), None, None) for n in inputs],
                                [], None, [], [], None, [])
        body = _declarations(self.declared, self.tree, first)
        for n in sorted(maybe_unbound):
            body.append(_at(gast.If(gast.Compare(_name(n), [gast.Is()], [_undefined()]),
                                    [gast.Delete([_name(n, gast.Del())])], []), first, start=True))
        body += copy.deepcopy(run)
        if outputs:
            values = [_name(n) if n in after.surely else _read_local(n) for n in outputs]
            body.append(_at(gast.Return(gast.Tuple(values, gast.Load())), last, start=False))
        definition = gast.FunctionDef(name, params, body, [], None, None, [])
        return _at(definition, first, start=True)


_WORK = (gast.Call, gast.BinOp, gast.UnaryOp, gast.Compare, gast.Subscript, gast.BoolOp,
         gast.AugAssign, gast.For, gast.While, gast.Attribute)


def _does_work(stmt):
    """Whether a statement computes anything (a call, an operator, an item): a run of
    statements that only move names and constants stays Python.  A ``def`` or
    ``lambda`` computes only its decorators and defaults (its body runs when called)."""
    todo = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, _WORK):
            return True
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)):
            arguments = node.args
            todo += list(getattr(node, 'decorator_list', ())) + list(arguments.defaults) + [
                d for d in arguments.kw_defaults if d is not None]
            continue
        todo += list(gast.iter_child_nodes(node))
    return False


def _reads_outside(tree, run):
    ids = {id(n) for stmt in run for n in gast.walk(stmt)}
    return {n.id for n in gast.walk(tree) if isinstance(n, gast.Name) and id(n) not in ids
            and isinstance(n.ctx, (gast.Load, gast.Del))} | {
        n.target.id for n in gast.walk(tree) if isinstance(n, gast.AugAssign)
        and isinstance(n.target, gast.Name) and id(n) not in ids}


def _declared(tree):
    """Names the function declares ``global`` or ``nonlocal`` (its own scope)."""
    glob, nonloc = scopes.declared(tree.body)
    return glob | nonloc


def _declarations(names, tree, like):
    """The function's ``global``/``nonlocal`` statements, first in a part of it."""
    kinds = {}
    for node in gast.walk(tree):
        if isinstance(node, (gast.Global, gast.Nonlocal)):
            for n in node.names:
                kinds[n] = type(node)
    out = []
    for kind in (gast.Global, gast.Nonlocal):
        chosen = sorted(n for n in names if kinds.get(n) is kind)
        if chosen:
            out.append(_at(kind(chosen), like, start=True))
    return out


def _refuse_dynamic_scope(tree):
    for node in gast.walk(tree):
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Name) \
                and node.func.id in _DYNAMIC_SCOPE and not (node.func.id == 'dir' and node.args):
            raise CannotSplit('line %d calls %s(), which sees the function\'s locals'
                              % (node.lineno, node.func.id))


def _bindings(tree):
    """(name, line) of every name ``tree`` binds or deletes."""
    for node in gast.walk(tree):
        names = scopes.names_bound_by(node)
        if isinstance(node, gast.ExceptHandler) and node.name is not None:
            names = {node.name.id}
        if names and hasattr(node, 'lineno'):
            for name in names:
                yield name, node.lineno


_LATER = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.GeneratorExp)


def _refuse_escaping_closures(tree, local_names):
    """A nested function, lambda or generator expression (its body runs later) that
    reads a local bound again after it (in source order, or anywhere in a loop around
    it) would see the cut's copy; one that writes a local would write the copy."""
    for node in gast.walk(tree):
        if node is tree or not isinstance(node, _LATER):
            continue
        written = set()
        if isinstance(node, gast.GeneratorExp):
            written = scopes.comprehension_walrus_targets(node)
        elif not isinstance(node, gast.Lambda):
            written = scopes.declared(node.body)[1]
        written &= local_names
        if written:
            raise CannotSplit('line %d: a nested scope writes %s (nonlocal or :=), which the '
                              'function reads' % (node.lineno, ', '.join(sorted(written))))
        captured = scopes.free_names(node) & local_names
        later = {name for name, line in _bindings(tree) if line > node.end_lineno}
        looped = set()
        for loop in gast.walk(tree):
            if isinstance(loop, (gast.For, gast.While)) and loop.lineno <= node.lineno \
                    <= loop.end_lineno:
                looped |= liveness.binds(loop.body)
        if captured & (later | looped):
            raise CannotSplit('line %d: a nested function reads %s, which the function binds '
                              'again later' % (node.lineno, ', '.join(sorted(captured & (later | looped)))))


# -- the skeleton's side of a cut -------------------------------------------------

def _call_statements(index, run, inputs, maybe_unbound, outputs, after, deleted, returns):
    """``out = __janus_segments[i](ins)`` and the unpacking of ``out`` into locals."""
    first = run[0]
    out = []
    args = []
    for n in inputs:
        if n in maybe_unbound:
            copy_name = _INPUT + n
            out.append(_at(gast.Try([gast.Assign([_name(copy_name, gast.Store())], _name(n))],
                                    [gast.ExceptHandler(_name('NameError'), None, [gast.Assign(
                                        [_name(copy_name, gast.Store())], _undefined())])],
                                    [], []), first, start=True))
            args.append(_name(copy_name))
        else:
            args.append(_name(n))
    call = gast.Call(gast.Subscript(_name(SEGMENTS), gast.Constant(index, None), gast.Load()),
                     args, [])
    if returns:
        return out + [_at(gast.Return(call), first, start=True)]
    if not outputs:
        return out + [_at(gast.Expr(call), first, start=True)]
    out.append(_at(gast.Assign([_name(_RESULT, gast.Store())], call), first, start=True))
    for position, n in enumerate(outputs):
        value = gast.Subscript(_name(_RESULT), gast.Constant(position, None), gast.Load())
        assign = gast.Assign([_name(n, gast.Store())], value)
        if n in after.surely:
            out.append(_at(assign, first, start=True))
            continue
        unbind = [gast.Try([gast.Delete([_name(n, gast.Del())])], [gast.ExceptHandler(
            _name('NameError'), None, [gast.Pass()])], [], [])] if n in deleted else [gast.Pass()]
        out.append(_at(gast.If(gast.Compare(copy.deepcopy(value), [gast.IsNot()], [_undefined()]),
                               [assign], unbind), first, start=True))
    return out


def _name(identifier, ctx=None):
    return gast.Name(identifier, ctx or gast.Load(), None, None)


def _undefined():
    return gast.Attribute(_name(HELPERS), 'UNDEFINED', gast.Load())


def _read_local(n):
    thunk = gast.Lambda(gast.arguments([], [], None, [], [], None, []), _name(n))
    return gast.Call(gast.Attribute(_name(HELPERS), 'read_local', gast.Load()), [thunk], [])


def _at(node, like, start):
    """``node`` (and what it holds) at a zero-width position at the start or end of
    ``like``: no user node has that position, so the profiler's sites stay apart."""
    line, col = ((like.lineno, like.col_offset) if start
                 else (like.end_lineno, like.end_col_offset))
    for inner in gast.walk(node):
        if isinstance(inner, (gast.stmt, gast.expr, gast.excepthandler)) \
                and getattr(inner, 'lineno', None) is None:   # janus's own nodes only
            inner.lineno = inner.end_lineno = line
            inner.col_offset = inner.end_col_offset = col
    return node


def _locate_missing(node, like):
    _at(node, like, start=True)


# -- compiling -------------------------------------------------------------------

def _compile(fn, tree, parsed, cutter, skeleton_body):
    """The skeleton and the segment functions, with ``fn``'s globals and cells."""
    skeleton = copy.copy(tree)
    # Not the function's own name: inside the factory that would bind the skeleton,
    # and a recursive call (``fact(n - 1)``) would find it instead of the global.
    skeleton.name = _SKELETON
    skeleton.body = (_declarations(cutter.declared, tree, tree) + skeleton_body
                     + _keep_local(sorted(cutter.locals), tree))
    skeleton.decorator_list, skeleton.returns = [], None
    definitions = [skeleton] + [d for d, *_ in cutter.segments]
    freevars = fn.__code__.co_freevars
    # a segment cut again (a second break in it) already has __jr (and maybe the
    # segment list) among its cells: the new split's cells replace them
    params = [n for n in freevars if n not in (SEGMENTS, HELPERS)] + [SEGMENTS, HELPERS]
    factory = gast.FunctionDef('__janus_split', gast.arguments(
        [gast.Name(n, gast.Param(), None, None) for n in params], [], None, [], [], None, []),
        definitions + [gast.Return(gast.Constant(None, None))], [], None, None, [])
    _at(factory.body[-1], tree, start=True)
    factory = gast.copy_location(factory, tree)
    factory.end_lineno, factory.end_col_offset = tree.end_lineno, tree.end_col_offset
    module = ast.fix_missing_locations(gast.gast_to_ast(gast.Module([factory], [])))
    code = compile(module, fn.__code__.co_filename, 'exec', dont_inherit=True,
                   flags=recompile.future_flags(fn.__code__))
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    nested = {c.co_name: c for c in factory_code.co_consts if isinstance(c, types.CodeType)}
    slots = []
    cells = dict(zip(freevars, fn.__closure__ or ()))
    cells[SEGMENTS] = types.CellType(slots)
    cells[HELPERS] = types.CellType(_Helpers)
    skeleton_fn = _function(_as_fn(nested[_SKELETON], fn), fn, cells,
                            fn.__name__)
    skeleton_fn.__defaults__, skeleton_fn.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
    skeleton_fn.__qualname__ = fn.__qualname__
    segments = []
    for definition, first, last, inputs, outputs, returns, in_loop in cutter.segments:
        # Frames show the function's own name, as eagerly (code looking at its
        # caller's name sees it); the qualified name says which part it is.
        code = _as_fn(nested[definition.name], fn)
        function = _function(code, fn, cells, fn.__name__)
        function.__qualname__ = '%s (lines %d-%d)' % (fn.__qualname__, first, last)
        _register(function, definition, parsed)
        key = ast.dump(gast.gast_to_ast(definition), include_attributes=True)
        segments.append(Segment(function, first, last, inputs, outputs, returns, key, in_loop))
    slots.extend(s.function for s in segments)
    return Split(skeleton_fn, segments, tuple(cutter.python_lines), slots,
                 source=ast.unparse(gast.gast_to_ast(skeleton)))


def _as_fn(code, fn):
    """A part's code named as ``fn``'s: frames show the function's own name, and the
    functions, lambdas and classes it makes have the qualified names they have
    eagerly (``f.<locals>.<lambda>``, not the split's)."""
    old, new = code.co_qualname, fn.__code__.co_qualname

    def renamed(inner):
        consts = tuple(renamed(c) if isinstance(c, types.CodeType) else c
                       for c in inner.co_consts)
        qualname = new + inner.co_qualname[len(old):] if inner.co_qualname.startswith(
            old) else inner.co_qualname
        return inner.replace(co_consts=consts, co_qualname=qualname)
    return renamed(code).replace(co_name=fn.__code__.co_name)


def _keep_local(names, tree):
    """``if False: del a, b, ...``: every local of the function is a local of the
    skeleton too, though segments bind it, so a Python statement reading it before
    it is bound raises UnboundLocalError as eagerly, not reading a global."""
    if not names:
        return []
    never = gast.If(gast.Constant(False, None),
                    [gast.Delete([_name(n, gast.Del()) for n in names])], [])
    return [_at(never, tree, start=False)]


def _function(code, fn, cells, name):
    closure = tuple(cells[n] for n in code.co_freevars)
    made = types.FunctionType(code, fn.__globals__, name, None, closure)
    made.__module__ = fn.__module__
    return made


def _register(function, definition, parsed):
    """The segment's tree, as compiled, is its front end (its sites numbered anew)."""
    tree = copy.deepcopy(definition)
    frontend.register(function.__code__, frontend.FrontEnd(
        tree, parsed.filename, parsed.source_lines, parsed.first_lineno,
        sites.number_sites(tree, parsed.source_lines, parsed.first_lineno)))
