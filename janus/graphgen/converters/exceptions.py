"""Pass: ``try`` statements run as Python at trace time, watched by the runtime.

Runs last, after ``names`` (what it adds must not be routed again).  Each
``try`` keeps its shape; its body is wrapped in ``with __jr.try_body(line,
types, has_finally)`` (the ops the body makes are the statement's region;
``types`` a thunk of the handlers' exception types, converted as they are
in the handlers, a bare ``except`` as None), a first handler lets
janus's own signals through (``except __jr.TRACE_SIGNALS: raise``), and every
handler of yours starts with ``__jr.caught(line)``, which refuses an
exception eager might not raise there (``control/exceptions.py``
says which).  ``unsupported`` has already refused what this cannot keep:
``except*`` and a ``try`` in a generator's own body.  A ``finally`` that
returns, breaks or continues starts with ``__jr.finally_may_swallow(line)``:
the exception it would end must be one a handler could see, and janus's own
signals go on.
"""
from __future__ import annotations

import copy
from typing import Any

import gast

from janus.graphgen.converters import common
from janus.pyct import scopes


def _with_region(node: gast.Try) -> list[gast.stmt]:
    """``with __jr.try_body(line, lambda: (handler types...), has_finally): body``; the
    thunk is None unless every type is a name or attribute read (reading them when
    eager would not must not run your code: a call, a property)."""
    types = [copy.deepcopy(h.type) if h.type is not None else common.const(None)
             for h in node.handlers]
    thunk = common.const(None)
    if all(_is_plain_read(t) for t in types):
        thunk = gast.Lambda(gast.arguments([], [], None, [], [], None, []),
                            gast.Tuple(types, gast.Load()))
    call = common.runtime_call('try_body', [common.const(node.lineno), thunk,
                                            common.const(bool(node.finalbody))], like=_first_line(node))
    return [gast.copy_location(gast.With([gast.withitem(call, None)], node.body, None), node)]


def _first_line(node: gast.AST) -> gast.AST:
    """A node located at the statement's first line only (janus's calls there, so a
    refusal names the ``try`` line, where the graph break goes)."""
    marker = gast.Pass()
    marker.lineno, marker.col_offset = node.lineno, node.col_offset
    marker.end_lineno, marker.end_col_offset = node.lineno, node.col_offset + 3
    return marker


_READS = ('load', 'attr')   # the runtime's free-name and attribute reads


def _is_plain_read(node: Any) -> bool:
    """A converted ``ValueError`` / ``tf.errors.OpError`` / tuple of them / None: free
    names and attributes of them (never of a local, whose class may run a property)."""
    if isinstance(node, gast.Constant):
        return node.value is None
    if isinstance(node, gast.Tuple):
        return all(_is_plain_read(e) for e in node.elts)
    if not (common.is_runtime_call(node) and node.func.attr in _READS and not node.keywords
            and all(isinstance(a, gast.Constant) for a in node.args[1:])):
        return False
    first = node.args[0]
    if node.func.attr == 'load':
        return isinstance(first, gast.Name) and first.id == common.NAMESPACE
    return _is_plain_read(first)


def _signals_pass(node: gast.Try) -> gast.ExceptHandler:
    handler = gast.ExceptHandler(common.runtime_attr('TRACE_SIGNALS'), None,
                                 [gast.copy_location(gast.Raise(None, None), node)])
    return gast.copy_location(handler, node)


def _types_read(handler: gast.ExceptHandler) -> gast.ExceptHandler:
    """``except E`` with ``E`` through ``__jr.exception_types``: Python reads the classes
    of a tuple in C, so a tuple from outside (``except self.retry_on``) is guarded whole."""
    if handler.type is not None:
        handler.type = common.runtime_call('exception_types', [handler.type], like=handler.type)
    return handler


def _checked(handler: gast.ExceptHandler, node: gast.Try) -> gast.ExceptHandler:
    check = gast.Expr(common.runtime_call('caught', [common.const(node.lineno)], like=_first_line(node)))
    handler.body = [gast.copy_location(check, _first_line(node))] + handler.body
    return handler


def _may_swallow(node: gast.Try) -> list[gast.stmt]:
    """A ``finally`` that jumps ends the exception in flight: it must be one janus may
    let end (``__jr.finally_may_swallow``), never janus's own signal."""
    check = gast.Expr(common.runtime_call('finally_may_swallow', [common.const(node.lineno)],
                                          like=_first_line(node)))
    return [gast.copy_location(check, _first_line(node))] + node.finalbody


class RouteTry(common.Pass):

    def visit_Try(self, node: gast.Try) -> gast.AST:
        node = self.generic_visit(node)
        node.body = _with_region(node)
        if node.handlers:
            node.handlers = [_signals_pass(node)] + [_checked(_types_read(h), node)
                                                     for h in node.handlers]
        if any(scopes.jumps_out(stmt) for stmt in node.finalbody):
            node.finalbody = _may_swallow(node)
        return node
