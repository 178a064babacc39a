"""Pass: early returns inside ``if`` statements become one return at the end.

Runs after ``unsupported`` and before ``control``.  ``if t: ...; return a``
followed by more code is rewritten so the code after the ``if`` moves into
its other branch and each ``return e`` becomes ``__janus_return = e``, with a
single ``return __janus_return`` at the end.  The meaning is unchanged, and
the ``if`` no longer contains a ``return``, so it can become a real
``tf.cond`` when its outcome varies.  Returns inside loops are left alone
(those statements keep their Python shape: Python-valued or assumed outcomes).
"""
import gast

from janus.graphgen.converters import common

RESULT = '__janus_return'
_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)


class _CannotLower(Exception):
    pass


def _contains_return(node):
    if isinstance(node, gast.Return):
        return True
    if isinstance(node, _SCOPES):
        return False
    return any(_contains_return(child) for child in gast.iter_child_nodes(node))


def _assign_result(value, like):
    assign = gast.Assign([gast.Name(RESULT, gast.Store(), None, None)],
                         value if value is not None else common.const(None), None)
    return gast.copy_location(assign, like)


def _lower(block):
    """(statements, whether every path through them returns)."""
    out = []
    for index, stmt in enumerate(block):
        if isinstance(stmt, gast.Return):
            out.append(_assign_result(stmt.value, stmt))
            return out, True
        if isinstance(stmt, gast.If) and _contains_return(stmt):
            rest = block[index + 1:]
            body, body_returns = _lower(stmt.body)
            orelse, else_returns = _lower(stmt.orelse)
            if body_returns and not else_returns:
                orelse, else_returns = _lower(stmt.orelse + rest)
            elif else_returns and not body_returns:
                body, body_returns = _lower(stmt.body + rest)
            elif not (body_returns and else_returns):
                raise _CannotLower()
            stmt.body, stmt.orelse = body or [gast.Pass()], orelse
            out.append(stmt)
            return out, body_returns and else_returns
        if _contains_return(stmt):
            raise _CannotLower()   # a return inside a loop or with: left as is
        out.append(stmt)
    return out, False


def _needs_lowering(fn):
    return any(isinstance(stmt, gast.If) and _contains_return(stmt) for stmt in fn.body)


class LowerReturns(common.Pass):

    def visit_FunctionDef(self, node):
        if not _needs_lowering(node):
            return node
        try:
            body, _ = _lower(list(node.body))
        except _CannotLower:
            return node
        start = _assign_result(None, node.body[0])
        end = gast.copy_location(gast.Return(common.load(RESULT)), node.body[-1])
        node.body = [start] + body + [end]
        return node
