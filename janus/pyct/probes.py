"""Puts probes into a function's own bytecode at the AST sites ``pyct.sites`` numbered.

Runs after ``sites.number_sites`` annotated the function's parsed tree (the
tree the generator numbers the same way).  ``instrument_code`` returns a
copy of the code object (and of the code objects nested in it: lambdas,
comprehensions, inner ``def``s) with extra instructions that call *hooks*
(``Hooks``: the profiler's recorder methods, reached as code constants, never
as names) and otherwise run exactly the original instructions, with the
original positions, names, locals and exception table.

Which instructions belong to which site is read from ``code.co_positions()``
(CPython 3.11 keeps each instruction's source span):

* a branch test (``if``, ``while``, conditional expression, and the
  ``assert`` / comprehension-``if`` tests holding ``and``/``or``) is compiled
  in *jump context*: ``not``, ``and``, ``or`` and conditional expressions in it
  become jumps, one conditional jump per *leaf* (any other expression).  A
  leaf's jump follows the instruction that ends the leaf's evaluation (its
  span ends where the leaf ends); ``x is None`` leaves compile to
  ``POP_JUMP_*_IF_NONE`` after ``x``.  What a leaf's truth decides (this
  ``and`` operand's truth, that ``if``'s outcome) is worked out from the tree
  (``_leaf_records``), so the recorder sees the same observations the test's
  value would give;
* an ``and``/``or`` in value context is such a tree too (its leaves are its
  operands; ``JUMP_IF_*_OR_POP`` jumps keep the value);
* a ``for`` loop's ``GET_ITER`` carries the ``for`` statement's span;
* a call's ``CALL`` (or ``CALL_FUNCTION_EX``) ends where the call ends; a
  method call's ``LOAD_METHOD`` ends where its attribute ends;
* ``break`` / ``continue`` / ``return``: the first instruction inside the
  statement's span (a ``NOP`` the compiler keeps for its line when nothing
  else is).

Two sites compile to several instructions at one position, told apart by
their order: a chained comparison as a test (``a < b < c``: one jump per
comparison, all but the last taken only when false), and a call as
decorator (``@dec(x)``: the call, then the application of its result).

A site the code does not show unambiguously (constant-folded tests mixed
with others, chained comparisons as ``and``/``or`` operands, dead code,
positions missing) raises ``Unmapped``: the function is then profiled
without probes rather than with observations pinned to the wrong site.

The probe sequences use the stack only (``COPY``/``SWAP`` and the 3.11
calling convention ``[callable, arg] PRECALL 0; CALL 0``, which calls
``callable(arg)``); every truth test is taken once, by the builtin ``bool``
called from the user's frame, and the jump then tests that ``bool``.
"""
from __future__ import annotations
import dataclasses
import sys
import typing
import types

import bytecode as bc
import gast

from janus.pyct import anno, parser

_TRUTH_JUMPS = {'POP_JUMP_FORWARD_IF_FALSE', 'POP_JUMP_FORWARD_IF_TRUE',
                'POP_JUMP_BACKWARD_IF_FALSE', 'POP_JUMP_BACKWARD_IF_TRUE'}
_NONE_JUMPS = {'POP_JUMP_FORWARD_IF_NONE', 'POP_JUMP_FORWARD_IF_NOT_NONE',
               'POP_JUMP_BACKWARD_IF_NONE', 'POP_JUMP_BACKWARD_IF_NOT_NONE'}
_OR_POP_JUMPS = {'JUMP_IF_FALSE_OR_POP': 'POP_JUMP_FORWARD_IF_FALSE',
                 'JUMP_IF_TRUE_OR_POP': 'POP_JUMP_FORWARD_IF_TRUE'}


# Code objects of expressions: no break / continue / return of the tree is theirs, though
# their instructions lie inside such a statement's span (``return [f(x) for x in xs]``).
_EXPRESSION_SCOPES = frozenset({'<listcomp>', '<setcomp>', '<dictcomp>', '<genexpr>', '<lambda>'})


class Unmapped(parser.NoSource):
    """A site's instructions cannot be told with certainty: no probes at all."""


@dataclasses.dataclass(frozen=True)
class Record:
    """One observation a leaf's truth makes: ``outcome`` at ``site``; ``own_value``
    when the site's test value is the leaf's value itself (not through ``not``)."""
    site: int
    outcome: bool
    own_value: bool


@dataclasses.dataclass(frozen=True)
class Hooks:
    """Makers of the callables the probes call, each given a site id (or records)."""
    branch: typing.Callable     # ((records if False, records if True)) -> f(value, truth) -> truth
    is_none: typing.Callable    # ((records...), is_none_test) -> f(value) -> value
    loop: typing.Callable       # (site) -> f(iterable) -> per-item counter
    mark: typing.Callable       # (site) -> f()
    callee: typing.Callable     # (site) -> f(callee) -> what to call instead
    returned: typing.Callable   # (site) -> f(result) -> result


def instrument_code(code: types.CodeType, tree: gast.AST, hooks: Hooks) -> types.CodeType:
    """``code`` (compiled from ``tree``, its sites numbered) with probes; raises Unmapped."""
    if sys.version_info[:2] != (3, 11):
        raise Unmapped('the probes are written for CPython 3.11 bytecode, not %d.%d'
                       % sys.version_info[:2])
    index = _SiteIndex(tree)
    found = set()
    made = _instrument(code, index, hooks, found)
    missing = index.required - found
    if missing:
        node = min(missing, key=lambda n: (n.lineno, n.col_offset))
        raise Unmapped('no unambiguous instructions for the %s at line %d; profiled without '
                       'probes' % (type(node).__name__, node.lineno))
    return made


def _instrument(code: types.CodeType, index: _SiteIndex, hooks: Hooks,
                found: set) -> types.CodeType:
    nested = {}
    for const in code.co_consts:
        if isinstance(const, type(code)):
            nested[id(const)] = _instrument(const, index, hooks, found)
    program = bc.Bytecode.from_code(code)
    holds_statements = code.co_name not in _EXPRESSION_SCOPES
    program[:] = _Rewriter(program, index, hooks, found, holds_statements).rewritten()
    for instr in program:
        if isinstance(instr, bc.Instr) and instr.name == 'LOAD_CONST' \
                and id(instr.arg) in nested:
            instr.arg = nested[id(instr.arg)]
    return program.to_code()


def _span(node: gast.AST) -> tuple[int, int, int, int]:
    return (node.lineno, node.end_lineno, node.col_offset, node.end_col_offset)


def _end(node: gast.AST) -> tuple[int, int]:
    return (node.end_lineno, node.end_col_offset)


def _last_end(node: gast.AST) -> tuple[int, int]:
    """Where the last instruction evaluating ``node`` ends: a ``(name := value)``
    ends by storing ``name``, located at the name."""
    if isinstance(node, gast.NamedExpr):
        return _end(node.target)
    return _end(node)


def _starts_inside(location: bc.instr.InstrLocation, node: gast.AST) -> bool:
    return (node.lineno, node.col_offset) <= (location.lineno, location.col_offset)


class _SiteIndex:
    """The tree's sites, indexed by what their instructions' positions show."""

    def __init__(self, tree: gast.AST) -> None:
        self.leaves = {}        # leaf end -> (leaf, (records if False, records if True))
        self.none_leaves = {}   # end of x in `x is None` -> (leaf, records, is_none_test)
        self.loops = {}         # span -> For
        self.calls = {}         # end -> Call
        self.methods = {}       # end of a call's attribute -> Call
        self.marks = []         # Break / Continue / Return
        self.decorators = set()  # calls whose result decorates a nested def or class
        self.required = set()   # nodes that must be found in the code
        self._parents = {}      # jump-context node -> (parent, role)
        outside = _outside_the_code(tree)
        inside = [node for node in gast.walk(tree) if node not in outside]
        for node in inside:
            self._add(node)
        for node in inside:   # and/or in value context (after every test claimed its own)
            if isinstance(node, gast.BoolOp) and node not in self._parents:
                self._add_test(node, None, value_context=True)

    def _add(self, node: gast.AST) -> None:
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
            self.decorators.update(d for d in node.decorator_list if isinstance(d, gast.Call))
        for test, owner in _jump_context_tests(node):
            self._add_test(test, owner)
        if isinstance(node, gast.For):
            self.loops[_span(node)] = node
            self.required.add(node)
        elif isinstance(node, gast.Call):
            self.calls[_end(node)] = node
            if isinstance(node.func, gast.Attribute):
                self.methods[_end(node.func)] = node
            self.required.add(node)
        elif isinstance(node, (gast.Break, gast.Continue, gast.Return)):
            self.marks.append(node)
            self.required.add(node)

    def _add_test(self, test: gast.AST, owner: gast.AST | None,
                  value_context: bool = False) -> None:
        """Indexes the leaves of ``test`` (compiled as jumps) whose truth decides something."""
        leaves = []
        self._descend(test, owner, 'root', leaves, value_context)
        observed = [(leaf, (self._records(leaf, False), self._records(leaf, True)))
                    for leaf in leaves]
        observed = [(leaf, records) for leaf, records in observed if records[0] or records[1]]
        if value_context and any(_chained(leaf) for leaf, _ in observed):
            # its own JUMP_IF_FALSE_OR_POP follows a COMPARE_OP located at the whole
            # comparison: it would read as the operand's test
            raise Unmapped('a chained comparison as an and/or operand at line %d' % test.lineno)
        constant = [leaf for leaf, _ in observed if isinstance(leaf, gast.Constant)]
        if constant and len(constant) < len(observed):
            raise Unmapped('a test mixing constants and other operands at line %d' % test.lineno)
        if constant:
            return   # folded away by the compiler: nothing runs, nothing is observed
        for leaf, records in observed:
            self._add_leaf(leaf, records)

    def _add_leaf(self, leaf: gast.AST, records: tuple) -> None:
        self.required.add(leaf)
        none_test = _none_test(leaf)
        if none_test is not None:
            self.none_leaves[_last_end(leaf.left)] = (leaf, records, none_test)
        if _last_end(leaf) in self.leaves:
            raise Unmapped('two test operands end at line %d' % leaf.end_lineno)
        self.leaves[_last_end(leaf)] = (leaf, records)

    def _descend(self, node: gast.AST, parent: gast.AST, role: str, leaves: list,
                 value_context: bool) -> None:
        """Walks a test's ``and``/``or`` (and, in jump context, ``not`` and conditional
        expressions: CPython compiles them as jumps too) down to its leaves."""
        self._parents[node] = (parent, role)
        if isinstance(node, gast.BoolOp):
            for value in node.values:
                self._descend(value, node, 'operand', leaves, value_context)
        elif value_context:
            leaves.append(node)
        elif isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.Not):
            self._descend(node.operand, node, 'not', leaves, value_context)
        elif isinstance(node, gast.IfExp):
            self._descend(node.body, node, 'branch', leaves, value_context)
            self._descend(node.orelse, node, 'branch', leaves, value_context)
        else:
            leaves.append(node)

    def _records(self, leaf: gast.AST, truth: bool) -> tuple[Record, ...]:
        """What deciding ``leaf`` as ``truth`` decides, up to the test's owner."""
        records, node, own_value = [], leaf, True
        while True:
            parent, role = self._parents[node]
            if role == 'not':
                truth, own_value = not truth, False
            elif role == 'operand':
                last = node is parent.values[-1]
                if not last:
                    records.append(Record(anno.get(parent, anno.Key.SITE), truth, own_value))
                if not last and truth != isinstance(parent.op, gast.Or):
                    return tuple(records)   # the next operand decides
            elif role == 'root':
                if parent is not None:
                    records.append(Record(anno.get(parent, anno.Key.SITE), truth, own_value))
                return tuple(records)
            node = parent


def _jump_context_tests(node: gast.AST) -> typing.Iterator[tuple[gast.AST, gast.AST | None]]:
    """(test, owner site node or None) of the tests CPython compiles as jumps."""
    if isinstance(node, (gast.If, gast.While, gast.IfExp)):
        yield node.test, node
    elif isinstance(node, gast.Assert):
        yield node.test, None
    elif isinstance(node, gast.comprehension):
        for test in node.ifs:
            yield test, None
    elif (isinstance(node, getattr(gast, 'match_case', ()))
          and node.guard is not None):   # type: ignore[union-attr]
        yield node.guard, None   # type: ignore[union-attr]


def _chained(node: gast.AST) -> bool:
    return isinstance(node, gast.Compare) and len(node.ops) > 1


def _none_test(leaf: gast.AST) -> bool | None:
    """True for ``x is None``, False for ``x is not None``, else None."""
    if (isinstance(leaf, gast.Compare) and len(leaf.ops) == 1
            and isinstance(leaf.ops[0], (gast.Is, gast.IsNot))
            and isinstance(leaf.comparators[0], gast.Constant)
            and leaf.comparators[0].value is None):
        return isinstance(leaf.ops[0], gast.Is)
    return None


def _outside_the_code(tree: gast.AST) -> set[gast.AST]:
    """Nodes of ``tree`` its code object does not run: the definition's own
    decorators, defaults and annotations, and every annotation."""
    roots = []
    if isinstance(tree, (gast.FunctionDef, gast.AsyncFunctionDef)):
        roots += tree.decorator_list + [tree.returns]
    args = tree.args
    roots += args.defaults + args.kw_defaults
    for node in gast.walk(tree):
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef)):
            roots.append(node.returns)
        if isinstance(node, gast.arguments):
            roots += [a.annotation for a in node.posonlyargs + node.args + node.kwonlyargs]
            roots += [a.annotation for a in (node.vararg, node.kwarg) if a is not None]
        if isinstance(node, gast.AnnAssign):
            roots.append(node.annotation)
    return {n for root in roots if root is not None for n in gast.walk(root)}


def _instr(name: str, arg: object = bc.UNSET,
           location: bc.instr.InstrLocation | None = None) -> bc.Instr:
    return bc.Instr(name, arg, location=location)


class _Rewriter:
    """One code object's instructions with the probes of the sites it holds."""

    def __init__(self, program: bc.Bytecode, index: _SiteIndex, hooks: Hooks, found: set,
                 holds_statements: bool) -> None:
        self.program, self.index, self.hooks, self.found = list(program), index, hooks, found
        self.holds_statements = holds_statements
        self.before = {}      # position in program -> instructions inserted before it
        self.after = {}       # position in program -> instructions inserted after it
        self.replaced = {}    # position in program -> its replacement instructions
        self.occurrences = {}  # node -> instructions seen so far that belong to it

    def rewritten(self) -> list:
        self._plan()
        out = []
        for i, item in enumerate(self.program):
            out += self.before.get(i, [])
            out += self.replaced.get(i, [item])
            out += self.after.get(i, [])
        return out

    def _found(self, node: gast.AST) -> int:
        self.found.add(node)
        return anno.get(node, anno.Key.SITE)

    def _plan(self) -> None:
        previous = None            # index of the previous instruction (labels break it)
        for i, item in enumerate(self.program):
            if isinstance(item, bc.Label):
                previous = None
                continue
            if not isinstance(item, bc.Instr):
                continue           # TryBegin / TryEnd: not on the way
            self._plan_instruction(i, item, previous)
            previous = i
        if self.holds_statements:
            self._plan_marks()

    def _plan_instruction(self, i: int, instr: bc.Instr, previous: int | None) -> None:
        location = instr.location
        if location is None or location.lineno is None or location.col_offset is None:
            return
        name = instr.name
        if name in _TRUTH_JUMPS or name in _NONE_JUMPS or name in _OR_POP_JUMPS:
            self._plan_jump(i, instr, previous)
        elif name == 'GET_ITER':
            loop = self.index.loops.get(_location_span(location))
            if loop is not None:
                self.before[i] = _loop_probe(self.hooks.loop(self._found(loop)), location)
        elif name in ('CALL', 'CALL_FUNCTION_EX'):
            self._plan_call(i, instr)
        elif name == 'LOAD_METHOD':
            call = self.index.methods.get(_location_end(location))
            if call is None or not _starts_inside(location, call.func):
                raise Unmapped('a method call at line %d is no site' % location.lineno)
            # an attribute then a plain call: the callee is one value on the stack
            self.replaced[i] = [_instr('LOAD_ATTR', instr.arg, location),
                                _instr('PUSH_NULL', location=location),
                                _instr('SWAP', 2, location)]

    def _plan_jump(self, i: int, instr: bc.Instr, previous: int | None) -> None:
        """A conditional jump right after a test leaf's last instruction gets its probe."""
        name, location = instr.name, instr.location
        before = self.program[previous].location if previous is not None else None
        if before is None or before.end_lineno is None:
            return
        leaves = self.index.none_leaves if name in _NONE_JUMPS else self.index.leaves
        leaf = leaves.get(_location_end(before))
        if leaf is None or not _starts_inside(before, leaf[0]):
            return          # a jump of no site's (an except clause, a with's exit...)
        self.found.add(leaf[0])
        if name in _NONE_JUMPS:
            self.before[i] = _call_on_top(self.hooks.is_none(leaf[1], leaf[2]), location)
        elif name in _TRUTH_JUMPS:
            self.before[i] = _truth_probe(self.hooks.branch(self._chain_step(leaf)), location)
        else:   # keep the value for the jump's target, drop it when falling through
            self.before[i] = [_instr('COPY', 1, location)] + \
                _truth_probe(self.hooks.branch(leaf[1]), location)
            self.replaced[i] = [_instr(_OR_POP_JUMPS[name], instr.arg, location),
                                _instr('POP_TOP', location=location)]

    def _chain_step(self, leaf: tuple) -> tuple:
        """The records of this jump of a leaf.  A chained comparison ``a < b < c`` as a
        test compiles to one jump per comparison, in order (each copy of the test: a
        ``while`` test is compiled twice); all but the last only jump when false."""
        node, records = leaf
        comparisons = len(node.ops) if _chained(node) else 1
        seen = self.occurrences.get(node, 0)
        self.occurrences[node] = seen + 1
        if seen % comparisons < comparisons - 1:
            return (records[0], ())
        return records

    def _plan_call(self, i: int, instr: bc.Instr) -> None:
        location = instr.location
        call = self.index.calls.get(_location_end(location))
        if call is None or (location.lineno, location.col_offset) not in _call_starts(call):
            return   # (a generator expression's call, ending where its call ends)
        if call in self.index.decorators:
            # `@dec(x)` runs two calls located at it: dec(x), then its result on the def
            seen = self.occurrences.get(call, 0)
            self.occurrences[call] = seen + 1
            if seen % 2:
                return
        starred = any(isinstance(a, gast.Starred) for a in call.args) or \
            any(k.arg is None for k in call.keywords)
        if instr.name == 'CALL_FUNCTION_EX':
            if not starred:
                raise Unmapped('the call at line %d does not look like one' % location.lineno)
            depth, first = 2 + (instr.arg & 1), i
        else:
            first = self._call_start(i, instr, call, starred)
            depth = instr.arg + 1
        site = self._found(call)
        self.before[first] = self.before.get(first, []) + \
            _callee_probe(self.hooks.callee(site), depth, location)
        self.after[i] = _call_on_top(self.hooks.returned(site), location)

    def _call_start(self, i: int, instr: bc.Instr, call: gast.Call, starred: bool) -> int:
        """Where the probe of ``call``'s callee goes: before its KW_NAMES / PRECALL."""
        precall = self.program[i - 1] if i > 0 else None
        if (starred or not isinstance(precall, bc.Instr) or precall.name != 'PRECALL'
                or precall.arg != instr.arg or instr.arg != len(call.args) + len(call.keywords)):
            raise Unmapped('the call at line %d does not look like one' % call.lineno)
        first = i - 1
        kw_names = self.program[i - 2] if i > 1 else None
        if isinstance(kw_names, bc.Instr) and kw_names.name == 'KW_NAMES':
            first = i - 2
        return first

    def _plan_marks(self) -> None:
        """A probe before the first instruction of each run inside a break / continue /
        return statement's span (a copy of it in a ``finally`` is a run of its own)."""
        for node in self.index.marks:
            inside_before = False
            for i, item in enumerate(self.program):
                if not isinstance(item, bc.Instr):
                    continue
                inside = _location_inside(item.location, node)
                if inside and not inside_before:
                    hook = self.hooks.mark(self._found(node))
                    self.before[i] = _mark_probe(hook, item.location) + self.before.get(i, [])
                inside_before = inside


def _call_starts(call: gast.Call) -> list[tuple[int, int]]:
    """Where a call's CALL starts: at the call, or for a method call whose attribute
    spans lines, at the method's name (CPython 3.11 locates it there)."""
    starts = [(call.lineno, call.col_offset)]
    if isinstance(call.func, gast.Attribute):
        func = call.func
        starts.append((func.end_lineno, func.end_col_offset - len(func.attr.encode())))
    return starts


def _location_span(location: bc.instr.InstrLocation) -> tuple[int, int, int, int]:
    return (location.lineno, location.end_lineno, location.col_offset, location.end_col_offset)


def _location_end(location: bc.instr.InstrLocation) -> tuple[int, int]:
    return (location.end_lineno, location.end_col_offset)


def _location_inside(location: bc.instr.InstrLocation | None, node: gast.AST) -> bool:
    if location is None or location.lineno is None or location.end_lineno is None \
            or location.col_offset is None:
        return False
    return ((node.lineno, node.col_offset) <= (location.lineno, location.col_offset)
            and (location.end_lineno, location.end_col_offset) <= _end(node))


# -- the probe sequences (stack comments: the top is on the right) ------------

def _call_on_top(hook: typing.Callable, location: bc.instr.InstrLocation) -> list[bc.Instr]:
    """[v] -> [hook(v)]."""
    return [_instr('LOAD_CONST', hook, location), _instr('SWAP', 2, location),
            _instr('PRECALL', 0, location), _instr('CALL', 0, location)]


def _truth_probe(hook: typing.Callable, location: bc.instr.InstrLocation) -> list[bc.Instr]:
    """[v] -> [hook(v, bool(v))]: the truth taken once, by ``bool`` in the user's frame."""
    return [_instr('LOAD_CONST', hook, location), _instr('SWAP', 2, location),
            _instr('COPY', 1, location),
            _instr('LOAD_CONST', bool, location), _instr('SWAP', 2, location),
            _instr('PRECALL', 0, location), _instr('CALL', 0, location),
            _instr('PRECALL', 1, location), _instr('CALL', 1, location)]


def _loop_probe(hook: typing.Callable, location: bc.instr.InstrLocation) -> list[bc.Instr]:
    """[it] -> [map(hook(it), it)]: ``map`` made in the user's frame counts the items."""
    return [_instr('LOAD_CONST', map, location), _instr('SWAP', 2, location),
            _instr('LOAD_CONST', hook, location), _instr('COPY', 2, location),
            _instr('PRECALL', 0, location), _instr('CALL', 0, location),
            _instr('SWAP', 2, location),
            _instr('PRECALL', 1, location), _instr('CALL', 1, location)]


def _callee_probe(hook: typing.Callable, depth: int,
                  location: bc.instr.InstrLocation) -> list[bc.Instr]:
    """[NULL, f, args...] -> [NULL, hook(f), args...] (``f`` is ``depth`` deep)."""
    swap = [_instr('SWAP', depth, location)] if depth > 1 else []
    return swap + _call_on_top(hook, location) + swap


def _mark_probe(hook: typing.Callable, location: bc.instr.InstrLocation) -> list[bc.Instr]:
    return [_instr('PUSH_NULL', location=location), _instr('LOAD_CONST', hook, location),
            _instr('PRECALL', 0, location), _instr('CALL', 0, location),
            _instr('POP_TOP', location=location)]
