"""Pass: the objects converted code makes are registered as made by the call.

Runs right after ``unsupported``, on the user's own code only.  List, dict
and set displays and comprehensions become ``__jr.made(...)``, and a
function's own ``**kwargs`` dict and the list a starred target collects
(``first, *rest = parts``) are registered where they are bound, so the trace knows
positively which containers the call made (DESIGN.md, "Outside values carry
their source"): an object it meets with neither a source nor that record is
refused, never taken for the call's own.  Tuples need no record (they cannot
be written; their items are checked where they are used).
"""
from __future__ import annotations

from collections.abc import Iterable

import gast

from janus.graphgen.converters import common


class RegisterMade(common.Pass):

    def _made(self, node: gast.expr) -> gast.Call:
        node = self.generic_visit(node)
        return common.runtime_call('made', [node], like=node)

    visit_Dict = visit_Set = visit_ListComp = visit_DictComp = visit_SetComp = _made

    def visit_List(self, node: gast.List) -> gast.expr:
        if not isinstance(node.ctx, gast.Load):
            return self.generic_visit(node)   # an unpacking target
        return self._made(node)

    def visit_Assign(self, node: gast.Assign) -> gast.AST | list[gast.stmt]:
        node = self.generic_visit(node)
        registered = _register_starred(node.targets, node)
        return [node] + registered if registered else node

    def visit_For(self, node: gast.For) -> gast.For:
        node = self.generic_visit(node)
        node.body = _register_starred([node.target], node) + node.body
        return node

    def visit_Lambda(self, node: gast.Lambda) -> gast.Lambda:
        node = self.generic_visit(node)
        kwarg = node.args.kwarg
        if kwarg is not None:   # ``lambda **k: body`` → ``lambda **k: (k := made(k), body)[1]``
            register = gast.NamedExpr(gast.Name(kwarg.id, gast.Store(), None, None),
                                      common.runtime_call('made', [common.load(kwarg.id)]))
            pair = gast.Tuple([register, node.body], gast.Load())
            node.body = gast.Subscript(pair, common.const(1), gast.Load())
            for sub in gast.walk(node.body):
                if not hasattr(sub, 'lineno') or sub.lineno is None:
                    gast.copy_location(sub, node)
        return node

    def visit_FunctionDef(self, node: gast.FunctionDef) -> gast.FunctionDef:
        node = self.generic_visit(node)
        kwarg = node.args.kwarg
        if kwarg is not None:   # ``def f(**options)``: a new dict every call
            target = gast.Name(kwarg.id, gast.Store(), None, None)
            value = common.runtime_call('made', [common.load(kwarg.id)])
            node.body = [gast.Assign([target], value, None)] + node.body
            for sub in gast.walk(node.body[0]):
                gast.copy_location(sub, node)
        return node


def _register_starred(targets: Iterable[gast.expr], like: gast.AST) -> list[gast.stmt]:
    """``name = __jr.made(name)`` for each starred name among ``targets``."""
    names = [n.value.id for t in targets for n in gast.walk(t)
             if isinstance(n, gast.Starred) and isinstance(n.value, gast.Name)]
    statements = []
    for name in names:
        value = common.runtime_call('made', [common.load(name)])
        statement = gast.Assign([gast.Name(name, gast.Store(), None, None)], value, None)
        for sub in gast.walk(statement):
            gast.copy_location(sub, like)
        statements.append(statement)
    return statements
