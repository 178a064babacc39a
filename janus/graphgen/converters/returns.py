"""Pass: early returns inside ``if`` statements become one return at the end.

Runs after ``unsupported`` and before ``control``.  ``if t: ...; return a``
followed by more code is rewritten so the code after the ``if`` moves into
its other branch and each ``return e`` becomes ``__janus_return = e``, with a
single ``return __janus_return`` at the end.  The meaning is unchanged, and
the ``if`` no longer contains a ``return``, so it can become a real
``tf.cond`` when its outcome varies.  A ``return`` nested deeper
(``if a: if b: return 1``) gets the code after the outer ``if`` copied into
every path that falls through (``common.fold_jumps``), so each path still
ends in exactly one assignment of the result.  Returns inside loops are left
alone (those statements keep their Python shape: Python-valued or assumed
outcomes).
"""
from __future__ import annotations

import gast

from janus.graphgen.converters import common

RESULT = '__janus_return'
_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)


def _contains_return(node: gast.AST) -> bool:
    if isinstance(node, gast.Return):
        return True
    if isinstance(node, _SCOPES):
        return False
    return any(_contains_return(child) for child in gast.iter_child_nodes(node))


def _assign_result(value: gast.expr | None, like: gast.AST) -> gast.Assign:
    assign = gast.Assign([gast.Name(RESULT, gast.Store(), None, None)],
                         value if value is not None else common.const(None), None)
    return gast.copy_location(assign, like)


def _lower_return(stmt: gast.stmt) -> list[gast.stmt] | None:
    return [_assign_result(stmt.value, stmt)] if isinstance(stmt, gast.Return) else None


def _needs_lowering(fn: gast.FunctionDef) -> bool:
    return any(isinstance(stmt, gast.If) and _contains_return(stmt) for stmt in fn.body)


class LowerReturns(common.Pass):

    def visit_FunctionDef(self, node: gast.FunctionDef) -> gast.FunctionDef:
        if not _needs_lowering(node):
            return node
        try:
            body, _ = common.fold_jumps(list(node.body), _contains_return, _lower_return)
        except common.CannotFold:
            return node   # a return inside a loop or with: left as is
        start = _assign_result(None, node.body[0])
        end = gast.copy_location(gast.Return(common.load(RESULT)), node.body[-1])
        node.body = [start] + body + [end]
        return node
