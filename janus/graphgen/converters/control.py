"""Pass: control flow, loop iterables, context managers and ``assert`` go through the runtime.

Runs right after ``unsupported``, on the parsed tree.  At trace time the
runtime decides, per evaluation, whether a test is a Python value (plain
Python, guarded), an assumed outcome (that path only + ``Janus>Assert``), or
dynamic (real ``tf.cond`` / ``tf.while_loop``).  So that every choice is
possible, ``if``/``while``/``for`` statements without ``return``/``break``/
``continue`` in them are *functionalized*::

    if t: body            def __true_7(): nonlocal x; body
    else: orelse    →     def __false_7(): nonlocal x; orelse
                          ...get/set state of x...
                          __jr.if_stmt(__ns, 7, t, __true_7, __false_7, __get_7, __set_7)

where ``x`` are the names the statement assigns and code outside it reads
(loops: also names carried from one iteration to the next).  Statements with
``return``/``break``/``continue`` keep their Python shape with a runtime
test (``if __jr.test(__ns, 7, t):``), which supports Python values and
assumed outcomes, not dynamic ones.  Conditional expressions and ``and``/
``or`` go through ``__jr.ifexp`` / ``__jr.boolop``; ``with m`` through
``__jr.enter``; ``assert t, msg`` through ``__jr.assert_``.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import gast

from janus.graphgen.converters import common
from janus.pyct import anno, scopes

_NESTED_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)


def _walk_scope(node: gast.AST) -> Iterator[gast.AST]:
    """Nodes under ``node`` without entering nested function/class scopes."""
    stack = list(gast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        yield child
        if not isinstance(child, _NESTED_SCOPES):
            stack.extend(gast.iter_child_nodes(child))


def _statements_scope(stmts: Iterable[gast.stmt]) -> Iterator[gast.AST]:
    for stmt in stmts:
        yield stmt
        if not isinstance(stmt, _NESTED_SCOPES):
            yield from _walk_scope(stmt)


def _has_jump(stmts: Iterable[gast.stmt]) -> bool:
    """Whether ``stmts`` return, yield (a generator's own statements), or break/continue
    out of the region itself: a region function could not do that for them."""
    for stmt in stmts:
        if isinstance(stmt, _NESTED_SCOPES):
            continue
        if _jumps(stmt) or any(_jumps(n) for n in _walk_scope(stmt)):
            return True
        if _breaks_out(stmt):
            return True
    return False


def _jumps(node: gast.AST) -> bool:
    return isinstance(node, (gast.Return, gast.Yield))


def _breaks_out(node: gast.AST) -> bool:
    """A break/continue in ``node`` that is not inside a loop nested in ``node``."""
    if isinstance(node, (gast.Break, gast.Continue)):
        return True
    if isinstance(node, _NESTED_SCOPES):
        return False
    if isinstance(node, (gast.For, gast.While)):
        return any(_breaks_out(s) for s in node.orelse)
    return any(_breaks_out(c) for c in gast.iter_child_nodes(node))


MUTATING_METHODS = frozenset((
    'append', 'extend', 'insert', 'pop', 'remove', 'clear', 'update', 'setdefault', 'popitem',
    'sort', 'reverse', 'add', 'discard', '__setitem__', '__delitem__', '__iadd__'))


def _root_name(node: gast.AST) -> str | None:
    while isinstance(node, (gast.Attribute, gast.Subscript)):
        node = node.value
    return node.id if isinstance(node, gast.Name) else None


def _stored(stmts: Iterable[gast.stmt]) -> set[str]:
    """Names the statements bind in their own scope (comprehension targets excluded),
    and names of containers they change in place (``xs.append(v)``, ``d[k] = v``):
    a region that changes a container must hand it on like a reassigned variable."""
    nodes = list(_statements_scope(stmts))
    private = {id(n) for c in nodes if isinstance(c, gast.comprehension)
               for n in gast.walk(c.target)}
    names = {n.id for n in nodes if isinstance(n, gast.Name) and id(n) not in private
             and isinstance(n.ctx, (gast.Store, gast.Del))}
    return names | _changed_in_place(stmts)


def _changed_in_place(stmts: Iterable[gast.stmt]) -> set[str]:
    """Names of containers the statements change in place (``xs.append(v)``, ``d[k] = v``)."""
    names: set[Any] = set()   # (None: no root name; discarded)
    for node in _statements_scope(stmts):
        if (isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute)
                and node.func.attr in MUTATING_METHODS):
            names.add(_root_name(node.func.value))
        elif isinstance(node, gast.Subscript) and isinstance(node.ctx, (gast.Store, gast.Del)):
            names.add(_root_name(node.value))
    names.discard(None)
    return names


def _loaded(nodes: Iterable[gast.AST]) -> set[str]:
    return {n.id for node in nodes for n in [node] + list(_walk_all(node))
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load)}


def _walk_all(node: gast.AST) -> Iterator[gast.AST]:
    return gast.walk(node)


_LATE_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef,
                gast.GeneratorExp)


def _captured(stmts: Iterable[gast.stmt]) -> set[str]:
    """Names read by functions, lambdas and generator expressions made in ``stmts``:
    they read the variable when called, maybe after the region (``fns.append(lambda:
    i)`` in a loop sees the last ``i``, eagerly), so the region must share it with the
    enclosing function, not bind its own."""
    return {name for stmt in stmts for node in gast.walk(stmt) if isinstance(node, _LATE_SCOPES)
            for name in _loaded([node])}


def _carried(body: Sequence[gast.stmt], assigned_first: Iterable[str] = ()) -> set[str]:
    """Names a loop body reads before it surely assigns them (carried across iterations).

    ``assigned_first``: names bound before the body runs each iteration (a for target).
    """
    assigned, carried = set(assigned_first), set[str]()
    _scan_carried(body, assigned, carried)
    # A container the body changes in place (``d['n'] = ...``, ``xs.append(v)``) is
    # handed on like a variable the loop rebinds, even when the body binds it first.
    return carried | _changed_in_place(body)


def _scan_carried(body: Iterable[gast.stmt], assigned: set[str], carried: set[str]) -> None:
    """``_carried``'s walk: adds to ``carried`` what ``body`` reads before ``assigned``
    has it, and to ``assigned`` what it surely binds (a ``with`` body always runs; an
    ``if`` binds what both of its branches bind)."""
    for stmt in body:
        if isinstance(stmt, gast.With):
            for item in stmt.items:
                carried |= _loaded([item.context_expr]) - assigned
                if item.optional_vars is not None:
                    assigned |= {n.id for n in gast.walk(item.optional_vars)
                                 if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}
            _scan_carried(stmt.body, assigned, carried)
        elif isinstance(stmt, gast.If):
            carried |= _loaded([stmt.test]) - assigned
            sides = []
            for branch in (stmt.body, stmt.orelse):
                side = set(assigned)
                _scan_carried(branch, side, carried)
                sides.append(side)
            assigned |= sides[0] & sides[1]
        elif isinstance(stmt, gast.Assign):
            carried |= _loaded([stmt.value]) - assigned
            for target in stmt.targets:
                carried |= _loaded([target]) - assigned
                assigned |= {n.id for n in gast.walk(target)
                             if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}
        elif isinstance(stmt, gast.AugAssign):
            carried |= (_loaded([stmt.value]) | {n.id for n in gast.walk(stmt.target)
                                                 if isinstance(n, gast.Name)}) - assigned
            if isinstance(stmt.target, gast.Name):
                assigned.add(stmt.target.id)
        elif isinstance(stmt, (gast.For, gast.While)):
            # An inner loop may not run: it surely binds nothing after it.  Its body reads
            # a name before binding it (in this outer iteration) only as it reads it
            # before binding it in its own first iteration, its target bound.
            head = stmt.iter if isinstance(stmt, gast.For) else stmt.test
            carried |= _loaded([head]) - assigned
            inner = set(assigned)
            if isinstance(stmt, gast.For):
                inner |= {n.id for n in gast.walk(stmt.target) if isinstance(n, gast.Name)}
                carried |= _loaded([stmt.target]) - inner
            _scan_carried(stmt.body, inner, carried)
            _scan_carried(stmt.orelse, set(assigned), carried)
        else:
            carried |= _loaded([stmt]) - assigned


def _negations_in_test(test: gast.expr) -> gast.expr:
    """``not x`` where only its truth matters (a test, or an operand of an and/or
    test) becomes ``__jr.not_(x)``, which also negates a tensor; elsewhere
    ``not`` keeps Python's meaning (a Python bool)."""
    if isinstance(test, gast.UnaryOp) and isinstance(test.op, gast.Not):
        return common.runtime_call('not_', [_negations_in_test(test.operand)], like=test)
    if isinstance(test, gast.BoolOp):
        test.values = [_negations_in_test(v) for v in test.values]
    return test


def _define(name: str, args: gast.arguments, body: list[gast.stmt],
            like: gast.AST) -> gast.FunctionDef:
    fn = gast.FunctionDef(name, args, body or [gast.Pass()], [], None, None, [])
    for node in gast.walk(fn):
        if not hasattr(node, 'lineno') or node.lineno is None:
            gast.copy_location(node, like)
    return fn


def _no_args() -> gast.arguments:
    return gast.arguments([], [], None, [], [], None, [])


def _args(*names: str) -> gast.arguments:
    return gast.arguments([gast.Name(n, gast.Param(), None, None) for n in names],
                          [], None, [], [], None, [])


def _lambda(body: gast.expr) -> gast.Lambda:
    return gast.Lambda(_no_args(), body)


class RouteControl(common.Pass):

    def __init__(self, ctx: common.PassContext) -> None:
        super().__init__(ctx)
        # per enclosing FunctionDef: [(name, node)] of all loads
        self.loads_by_function: list[list[tuple[str, gast.Name]]] = []
        # per enclosing FunctionDef: the names it binds
        self.locals_by_function: list[set[str]] = []
        self.generated = 0            # numbers regions the profiler never saw (no site id)

    # -- scopes ----------------------------------------------------------
    def visit_FunctionDef(self, node: gast.FunctionDef) -> gast.AST:
        # All loads, nested lambdas/defs included: over-approximating what is
        # read outside a region only adds state variables, never drops one.
        self.loads_by_function.append([(n.id, n) for n in gast.walk(node)
                                       if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load)])
        self.locals_by_function.append(scopes.bound_names(node))
        try:
            return self.generic_visit(node)
        finally:
            self.loads_by_function.pop()
            self.locals_by_function.pop()

    def _loaded_outside(self, region: gast.AST) -> set[str]:
        inside = {id(n) for n in gast.walk(region)}
        return {name for name, node in self.loads_by_function[-1] if id(node) not in inside}

    def _site(self, node: gast.AST) -> gast.Constant:
        return common.const(anno.get(node, anno.Key.SITE))

    def _key(self, site: int | None) -> int | str:
        """Name suffix of a region's helper defs: its site id, or a fresh g<n>."""
        if site is not None:
            return site
        self.generated += 1
        return 'g%d' % self.generated

    def _state(self, names: Iterable[str], key: int | str,
               like: gast.AST) -> tuple[list[gast.stmt], list[str]]:
        """Defs of ``__get_<key>`` / ``__set_<key>`` and the stub binding the names.

        Only the enclosing function's own locals: a global list changed in place
        stays a global (and is refused at trace time: outside state).
        """
        names = sorted(set(names) & self.locals_by_function[-1])
        reads = gast.Tuple([common.runtime_call('read_local', [_lambda(common.load(n))]) for n in names],
                           gast.Load())
        getter = _define('__get_%s' % key, _no_args(), [gast.Return(reads)], like)
        setter_body = []
        if names:
            setter_body.append(gast.Nonlocal(names))
            targets = gast.Tuple([gast.Name(n, gast.Store(), None, None) for n in names],
                                 gast.Store())
            setter_body.append(gast.Assign([targets], common.load('__vals'), None))
        setter = _define('__set_%s' % key, _args('__vals'), setter_body, like)
        # `if False: x = None` binds the names in the enclosing function without
        # running anything, so the defs' `nonlocal` finds them.
        stub = gast.If(common.const(False), [gast.Assign(
            [gast.Name(n, gast.Store(), None, None)], common.const(None), None) for n in names]
            or [gast.Pass()], [])
        stub = gast.copy_location(stub, like)
        for sub in gast.walk(stub):
            gast.copy_location(sub, like)
        return [stub, getter, setter], names

    def _nonlocal(self, names: Sequence[str], body: list[gast.stmt]) -> list[gast.stmt]:
        return ([gast.Nonlocal(list(names))] if names else []) + body

    def _region_call(self, op: str, site: int | None, key: int | str, head: gast.expr,
                     defs: Sequence[gast.FunctionDef], names: Sequence[str],
                     like: gast.AST) -> gast.Expr:
        """``__jr.<op>(__ns, site, head, *defs, __get_<key>, __set_<key>, names)``."""
        args = ([common.load(common.NAMESPACE), common.const(site), head]
                + [common.load(d.name) for d in defs]
                + [common.load('__get_%s' % key), common.load('__set_%s' % key),
                   common.const(tuple(names))])
        call = common.runtime_call(op, args, like=like)
        return gast.copy_location(gast.Expr(call), like)

    def _python_shaped(self, node: gast.AST, field: str, op: str) -> gast.AST:
        """A statement with return/break/continue inside keeps its shape; only its
        test (or iterable) goes through the runtime: Python values or assumed outcomes."""
        value = getattr(node, field)
        setattr(node, field, common.runtime_call(op, [common.load(common.NAMESPACE),
                                                      self._site(node), value], like=value))
        return node

    # -- statements --------------------------------------------------------
    def visit_If(self, node: gast.If) -> gast.AST | list[gast.stmt]:
        node.test = _negations_in_test(node.test)
        site = anno.get(node, anno.Key.SITE)
        stored = _stored(node.body + node.orelse)
        # Read outside, or read inside before the branch assigns it (the value
        # from before the `if`): either way the branch must share the variable.
        outside = (self._loaded_outside(node) | _carried(node.body) | _carried(node.orelse)
                   | _loaded([node.test]) | _captured(node.body + node.orelse))
        functionalize = not _has_jump(node.body + node.orelse)
        node = self.generic_visit(node)
        if not functionalize:
            return self._python_shaped(node, 'test', 'test')
        key = self._key(site)
        state, names = self._state(stored & outside, key, node)
        true_fn = _define('__true_%s' % key, _no_args(), self._nonlocal(names, node.body), node)
        false_fn = _define('__false_%s' % key, _no_args(),
                           self._nonlocal(names, node.orelse), node)
        call = self._region_call('if_stmt', site, key, node.test, [true_fn, false_fn], names, node)
        return state + [true_fn, false_fn, call]

    def visit_While(self, node: gast.While) -> gast.AST | list[gast.stmt]:
        node.test = _negations_in_test(node.test)
        site = anno.get(node, anno.Key.SITE)
        stored = _stored(node.body)
        loop_vars = stored & (self._loaded_outside(node) | _loaded([node.test])
                              | _carried(node.body) | _captured(node.body))
        functionalize = not node.orelse and not _has_jump(node.body)
        node = self.generic_visit(node)
        if not functionalize:
            return self._python_shaped(node, 'test', 'test')
        key = self._key(site)
        state, names = self._state(loop_vars, key, node)
        test_fn = _define('__test_%s' % key, _no_args(), [gast.Return(node.test)], node)
        body_fn = _define('__body_%s' % key, _no_args(), self._nonlocal(names, node.body), node)
        call = self._region_call('while_stmt', site, key, common.load(test_fn.name), [body_fn],
                                 names, node)
        return state + [test_fn, body_fn, call]

    def visit_For(self, node: gast.For) -> gast.AST | list[gast.stmt]:
        site = anno.get(node, anno.Key.SITE)
        targets = _stored([gast.Assign([node.target], node.iter, None)])
        stored = _stored(node.body) | targets
        loop_vars = stored & (self._loaded_outside(node) | _carried(node.body, targets)
                              | _captured(node.body))
        functionalize = not node.orelse and not _has_jump(node.body)
        node = self.generic_visit(node)
        if not functionalize:
            return self._python_shaped(node, 'iter', 'iter')
        key = self._key(site)
        state, names = self._state(loop_vars, key, node)
        bind_target = gast.copy_location(gast.Assign([node.target], common.load('__item'), None),
                                         node)
        body_fn = _define('__body_%s' % key, _args('__item'),
                          self._nonlocal(names, [bind_target] + node.body), node)
        call = self._region_call('for_stmt', site, key, node.iter, [body_fn], names, node)
        flag = anno.get(node, anno.Key.BREAK_FLAG)
        if flag is not None:   # the loop stops on its break flag (``jumps``)
            call.value.args.append(_lambda(common.load(flag)))
        return state + [body_fn, call]

    # -- expressions -------------------------------------------------------
    def visit_comprehension(self, node: gast.comprehension) -> gast.comprehension:
        node = self.generic_visit(node)
        node.iter = common.runtime_call('iter', [common.load(common.NAMESPACE), common.const(None),
                                                 node.iter], like=node.iter)
        return node

    def visit_IfExp(self, node: gast.IfExp) -> gast.expr:
        node.test = _negations_in_test(node.test)
        site = self._site(node)
        node = self.generic_visit(node)
        return common.runtime_call('ifexp', [common.load(common.NAMESPACE), site, node.test,
                                             _lambda(node.body), _lambda(node.orelse)], like=node)

    def visit_BoolOp(self, node: gast.BoolOp) -> gast.expr:
        site = self._site(node)
        node = self.generic_visit(node)
        is_and = common.const(isinstance(node.op, gast.And))
        return common.runtime_call('boolop', [common.load(common.NAMESPACE), site, is_and]
                                   + [_lambda(v) for v in node.values], like=node)

    def visit_With(self, node: gast.With) -> gast.With:
        node = self.generic_visit(node)
        for item in node.items:
            item.context_expr = common.runtime_call('enter', [item.context_expr],
                                                    like=item.context_expr)
        return node

    def visit_Assert(self, node: gast.Assert) -> gast.Expr:
        node = self.generic_visit(node)
        msg = node.msg if node.msg is not None else common.const(None)
        call = common.runtime_call('assert_', [node.test, common.const(node.lineno), _lambda(msg)],
                                   like=node)
        return gast.copy_location(gast.Expr(call), node)
