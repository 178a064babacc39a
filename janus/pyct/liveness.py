"""Which local names a statement reads and binds, and which are bound where.

Runs on a parsed gast function (``frontend``); the scope rules are
``scopes``'.  The graph-break splitter (``graphgen/segments.py``) passes a
function's locals between the parts it cuts the function into; what crosses
a cut comes from here:

* ``reads``/``binds``: the names a statement (or a run of statements) loads,
  stores or deletes in the function's own scope (a nested scope reads the
  names it takes from the function; its defaults, decorators and first
  iterable run in the function; a walrus in a comprehension binds in it);
* ``Bound``: a forward analysis of which names are *surely* bound at a point
  (every path that reaches the point binds them and none deletes them after)
  and which *may* be.  ``surely`` may only miss names, never claim one: a
  binding that might not run (under ``and``/``or``, a conditional expression,
  a comprehension's body, an ``assert``, a loop, a ``try``, a ``match`` case, a
  ``with`` whose manager may suppress) is only *maybe*.  A statement form not
  analysed binds only *maybe*.  ``tests/test_liveness.py`` checks this against
  what a traced run of generated functions finds bound.
"""
from __future__ import annotations
import dataclasses
import typing

import gast

from janus.pyct import anno, scopes


def reads(nodes: typing.Sequence[gast.AST]) -> set[str]:
    """Names the statements ``nodes`` read (loads, the targets of ``x += 1``, and the
    names nested scopes take from the function)."""
    found = set()
    for node in scopes.walk_scope(nodes):
        if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Load, gast.Del)):
            found.add(node.id)
        elif isinstance(node, gast.AugAssign) and isinstance(node.target, gast.Name):
            found.add(node.target.id)
        elif isinstance(node, scopes.SCOPE_NODES):
            found |= scopes.free_names(node)
    return found


def binds(nodes: typing.Sequence[gast.AST]) -> set[str]:
    """Names the statements ``nodes`` store or delete in the function's scope."""
    found = set()
    for node in scopes.walk_scope(nodes):
        found |= scopes.names_bound_by(node)
    return found


def deletes(nodes: typing.Sequence[gast.AST]) -> set[str]:
    """Names the statements ``nodes`` may unbind: ``del``, and ``except ... as e``
    (Python deletes ``e`` when its handler ends)."""
    found = set()
    for node in scopes.walk_scope(nodes):
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Del):
            found.add(node.id)
        elif isinstance(node, gast.ExceptHandler) and node.name is not None:
            found.add(node.name.id)
    return found


def _surely_by(node: gast.AST) -> set[str]:
    """Names an expression or simple statement binds on every path that completes it
    (parts that may not run are left out: all but the first operand of ``and``/``or``,
    a conditional expression's branches, a comprehension past its first iterable, a
    lambda's body, an ``assert``, which ``python -O`` drops)."""
    if isinstance(node, gast.BoolOp):
        return _surely_by(node.values[0])
    if isinstance(node, gast.IfExp):
        return _surely_by(node.test)
    if isinstance(node, gast.Assert):
        return set()
    if isinstance(node, scopes.SCOPE_NODES):
        found = set().union(*[_surely_by(e) for e in scopes.enclosing_parts(node)])
        return found | (scopes.names_bound_by(node) if not isinstance(
            node, scopes.COMPREHENSIONS) else set())
    if isinstance(node, gast.Name):
        return {node.id} if isinstance(node.ctx, gast.Store) else set()
    found = scopes.names_bound_by(node)
    for child in gast.iter_child_nodes(node):
        found |= _surely_by(child)
    return found


@dataclasses.dataclass(frozen=True)
class Bound:
    """Names surely and possibly bound at one point of a function."""
    surely: frozenset
    maybe: frozenset

    def after(self, stmt: gast.AST) -> Bound:
        """What is bound after ``stmt`` runs (and falls through) from this point."""
        return self.after_all([stmt])

    def after_all(self, stmts: typing.Sequence[gast.AST]) -> Bound:
        state = self
        for stmt in stmts:
            state = state._after_one(stmt)
        return state

    def _after_one(self, stmt: gast.AST) -> Bound:
        maybe = frozenset(self.maybe | binds([stmt]))
        gone = deletes([stmt])
        if isinstance(stmt, gast.If):
            start = self.after_expr(stmt.test)
            body, orelse = start.after_all(stmt.body), start.after_all(stmt.orelse)
            return Bound(body.surely & orelse.surely, maybe)
        if isinstance(stmt, (gast.With, gast.AsyncWith)):
            start = self.entering(stmt)
            if anno.get(stmt, anno.Key.NEVER_SUPPRESSES):
                return Bound(start.after_all(stmt.body).surely, maybe)
            return Bound(start.surely - gone, maybe)   # a manager may end the body early
        if isinstance(stmt, (gast.Try, gast.TryStar)):
            # the body may stop anywhere; a ``finally`` runs to its end on the way out
            return Bound(Bound(self.surely - gone, maybe).after_all(stmt.finalbody).surely,
                         maybe)
        header = _HEADERS.get(type(stmt))
        if header is not None:   # loops may not run, a match may take no case
            return Bound(self.after_expr(getattr(stmt, header)).surely - gone, maybe)
        if hasattr(stmt, 'body'):   # a compound statement this pass does not know
            return Bound(self.surely - gone, maybe)
        return Bound(frozenset((self.surely | _surely_by(stmt)) - gone), maybe)

    def after_expr(self, expr: gast.AST) -> Bound:
        """What is bound once ``expr`` (a statement's header) has been evaluated."""
        return Bound(frozenset(self.surely | _surely_by(expr)),
                     frozenset(self.maybe | binds([expr])))

    def entering(self, with_stmt: gast.With) -> Bound:
        """What is bound when a ``with`` statement's body starts."""
        state = self
        for item in with_stmt.items:
            state = state.after_expr(item.context_expr)
            if item.optional_vars is not None:
                targets = binds([item.optional_vars])
                state = Bound(state.surely | targets, state.maybe | targets)
        return state

    def without(self, names: typing.AbstractSet[str]) -> Bound:
        """This point with ``names`` no longer surely bound (a ``del`` may have run)."""
        return Bound(frozenset(self.surely - names), self.maybe)


_HEADERS = {gast.While: 'test', gast.For: 'iter', gast.AsyncFor: 'iter', gast.Match: 'subject'}


def at_entry(fn_node: gast.AST) -> Bound:
    """What is bound when ``fn_node`` (a gast FunctionDef) starts: its parameters."""
    params = scopes.bound_names(gast.FunctionDef('_', fn_node.args, [], [], None, None, []))
    return Bound(frozenset(params), frozenset(params))


def exposed_reads(stmts: typing.Sequence[gast.AST]) -> typing.Set[str]:
    """Names ``stmts`` may read before they surely bound them themselves (a read and
    a bind in one statement count as the read first: ``x = x + 1``)."""
    exposed, bound = set(), Bound(frozenset(), frozenset())
    for stmt in stmts:
        exposed |= reads([stmt]) - bound.surely
        bound = bound.after(stmt)
    return exposed
