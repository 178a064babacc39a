"""Pass 1: rejects constructs the generator does not convert, naming the line.

Runs right after ``declared`` (which routes global/nonlocal writes and keeps
only the ``nonlocal`` statements of functions nested in the converted one).  A rejected function runs
imperatively (or raises in strict mode); it is not retried on later calls.
"""
from __future__ import annotations

from collections.abc import Iterable

import gast

from janus.reasons import Reason
from janus.graphgen.converters.common import Pass, PassContext
from janus.pyct import scopes

_REJECTED = {   # node type -> (Reason, what)
    gast.ClassDef: (Reason.INLINE_CLASS, 'an in-line class definition'),
    gast.Import: (Reason.INLINE_IMPORT, 'an in-line import'),
    gast.ImportFrom: (Reason.INLINE_IMPORT, 'an in-line import'),
    gast.Yield: (Reason.GENERATOR, 'a generator (`yield`)'),
    gast.YieldFrom: (Reason.GENERATOR, 'a generator (`yield from`)'),
    gast.Await: (Reason.GENERATOR, 'a coroutine (`await`)'),
    gast.AsyncFunctionDef: (Reason.GENERATOR, 'a coroutine (`async def`)'),
    gast.AsyncFor: (Reason.GENERATOR, 'a coroutine (`async for`)'),
    gast.AsyncWith: (Reason.GENERATOR, 'a coroutine (`async with`)'),
    gast.TryStar: (Reason.TRY_STATEMENT, 'an `except*` clause (exception groups)'),
    gast.Match: (Reason.MATCH_STATEMENT, 'a match statement'),
}


class RejectUnsupported(Pass):
    """In a generator function (``ctx.generator``) its own ``yield`` statements are
    kept (the generator is converted and runs inside the trace, ``calls.py``), but
    not a ``with`` (its exit would run when the generator is closed, maybe outside
    the call) nor a ``yield`` of a function nested in it."""

    def __init__(self, ctx: PassContext) -> None:
        super().__init__(ctx)
        self._depth = -1   # functions entered below the converted one (its own def: 0)

    def visit(self, node: gast.AST) -> gast.AST:
        if isinstance(node, gast.Yield) and self.ctx.generator and self._depth == 0:
            return self.generic_visit(node)
        if isinstance(node, gast.With) and self.ctx.generator and self._depth == 0:
            self.unsupported(node, Reason.GENERATOR, 'janus does not convert a `with` statement '
                             'in a generator (its exit would run when the generator is closed)')
        for kind, (reason, what) in _REJECTED.items():
            if isinstance(node, kind):
                self.unsupported(node, reason, 'janus does not convert %s' % what)
        return super().visit(node)

    def visit_BoolOp(self, node: gast.BoolOp) -> gast.AST:
        self._no_walrus(node, node.values)
        return self.generic_visit(node)

    def visit_IfExp(self, node: gast.IfExp) -> gast.AST:
        self._no_walrus(node, [node.body, node.orelse])
        return self.generic_visit(node)

    def visit_Assert(self, node: gast.Assert) -> gast.AST:
        self._no_walrus(node, [node.msg] if node.msg is not None else [])
        return self.generic_visit(node)

    def _no_walrus(self, node: gast.AST, operands: Iterable[gast.AST]) -> None:
        """The control-flow pass evaluates these operands lazily, each in a lambda of
        its own (``__jr.boolop``, ``ifexp``, ``assert_``): a walrus there would bind
        in the lambda, not in the function (one in a comprehension binds in the
        function around the comprehension: the lambda too)."""
        for operand in operands:
            for inner in scopes.walk_scope([operand]):
                walrus = inner if isinstance(inner, gast.NamedExpr) else None
                if isinstance(inner, scopes.COMPREHENSIONS) and \
                        scopes.comprehension_walrus_targets(inner):
                    walrus = inner
                if walrus is not None:
                    self.unsupported(walrus, Reason.LAZY_WALRUS, 'janus does not convert an '
                                     'assignment expression (:=) inside and/or, a conditional '
                                     'expression or an assert message')

    def visit_FunctionDef(self, node: gast.FunctionDef) -> gast.AST:
        self._depth += 1
        try:
            return self.generic_visit(node)
        finally:
            self._depth -= 1

    visit_Lambda = visit_FunctionDef

    def visit_Try(self, node: gast.Try) -> gast.AST:
        if self.ctx.generator and self._depth == 0:
            self.unsupported(node, Reason.GENERATOR, 'janus does not convert a try statement '
                             'in a generator (closing the generator would run its handlers '
                             'and finally, maybe outside the call)')
        return self.generic_visit(node)

    def visit_Attribute(self, node: gast.Attribute) -> gast.AST:
        if isinstance(node.ctx, gast.Del):
            self.unsupported(node, Reason.DELETE,
                             'janus does not convert deleting attributes (`del obj.%s`)'
                             % node.attr)
        return self.generic_visit(node)

    def visit_Delete(self, node: gast.Delete) -> gast.AST:
        for target in node.targets:
            if not isinstance(target, gast.Name):
                self.unsupported(node, Reason.DELETE,
                                 'janus does not convert `del` of attributes or items')
        return self.generic_visit(node)

    def visit_Name(self, node: gast.Name) -> gast.Name:
        if node.id in ('super', '__class__') and isinstance(node.ctx, gast.Load):
            self.unsupported(node, Reason.ZERO_ARGUMENT_SUPER,
                             'janus does not convert zero-argument super()')
        return node
