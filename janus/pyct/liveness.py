"""Which local names a statement reads and binds, and which are bound where.

Runs on a parsed gast function (``frontend``).  The graph-break splitter
(``graphgen/segments.py``) passes a function's locals between the parts it
cuts the function into; what crosses a cut comes from here:

* ``reads``/``binds``: the names a statement (or a run of statements) loads,
  stores or deletes in the function's own scope (nested functions and
  comprehensions count where they read the function's names);
* ``Bound``: a forward analysis of which names are *surely* bound at a point
  (every path binds them, none deletes them after) and which *may* be.  It
  errs one way only: a name it calls surely bound is bound on every path.
"""
import dataclasses
import typing

import gast

from janus.pyct import scopes

_COMPOUND = (gast.If, gast.For, gast.While, gast.With, gast.Try, gast.AsyncFor,
             gast.AsyncWith, gast.Match)


def _own_nodes(node):
    """``node`` and its descendants in the same scope, plus the free reads of the nested
    scopes in it (a comprehension or lambda reads the function's locals)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is not node and isinstance(current, scopes.SCOPE_NODES):
            yield from _nested_reads(current)
            continue
        stack.extend(gast.iter_child_nodes(current))


def _nested_reads(scope):
    """Name loads of a nested scope that are not its own locals, as Load nodes."""
    own = scopes.bound_names(scope)
    if isinstance(scope, (gast.FunctionDef, gast.AsyncFunctionDef)):
        for expr in list(scope.decorator_list) + list(scope.args.defaults) + [
                d for d in scope.args.kw_defaults if d is not None]:
            yield from _own_nodes(expr)
    for inner in gast.walk(scope):
        if isinstance(inner, gast.Name) and isinstance(inner.ctx, gast.Load) \
                and inner.id not in own:
            yield inner


def reads(nodes):
    """Names the statements ``nodes`` read (loads, and the targets of ``x += 1``)."""
    found = set()
    for stmt in nodes:
        for node in _own_nodes(stmt):
            if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Load, gast.Del)):
                found.add(node.id)
            elif isinstance(node, gast.AugAssign) and isinstance(node.target, gast.Name):
                found.add(node.target.id)
    return found


def binds(nodes):
    """Names the statements ``nodes`` store or delete in the function's scope."""
    found = set()
    for stmt in nodes:
        stack = [stmt]
        while stack:
            node = stack.pop()
            if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Store, gast.Del)):
                found.add(node.id)
            elif isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, (gast.Import, gast.ImportFrom)):
                found |= {(a.asname or a.name).split('.')[0] for a in node.names}
            if node is not stmt and isinstance(node, scopes.SCOPE_NODES):
                if isinstance(node, (gast.ListComp, gast.SetComp, gast.DictComp,
                                     gast.GeneratorExp)):
                    found |= _walrus_targets(node)
                continue
            stack.extend(gast.iter_child_nodes(node))
    return found


def _walrus_targets(comprehension):
    """``(y := ...)`` inside a comprehension binds ``y`` in the enclosing function."""
    return {n.target.id for n in gast.walk(comprehension)
            if isinstance(n, gast.NamedExpr) and isinstance(n.target, gast.Name)}


def deletes(nodes):
    """Names a ``del`` among ``nodes`` may unbind."""
    return {n.id for stmt in nodes for n in gast.walk(stmt)
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Del)}


@dataclasses.dataclass(frozen=True)
class Bound:
    """Names surely and possibly bound at one point of a function."""
    surely: frozenset
    maybe: frozenset

    def after(self, stmt):
        """What is bound after ``stmt`` runs (and falls through) from this point."""
        return self.after_all([stmt])

    def after_all(self, stmts):
        state = self
        for stmt in stmts:
            state = state._after_one(stmt)
        return state

    def _after_one(self, stmt):
        bound, gone = binds([stmt]), deletes([stmt])
        maybe = frozenset(self.maybe | bound)
        if isinstance(stmt, gast.If):
            body, orelse = self.after_all(stmt.body), self.after_all(stmt.orelse)
            return Bound(body.surely & orelse.surely, maybe)
        if isinstance(stmt, _COMPOUND) and not isinstance(stmt, (gast.With, gast.AsyncWith)):
            return Bound(self.surely - gone, maybe)   # loops may not run; try may stop early
        if isinstance(stmt, (gast.With, gast.AsyncWith)):
            inside = Bound(self.surely | _with_targets(stmt), maybe)
            return Bound(inside.after_all(stmt.body).surely, maybe)
        return Bound(frozenset((self.surely | bound) - gone), maybe)


def _with_targets(stmt):
    return binds([item.optional_vars for item in stmt.items if item.optional_vars is not None])


def at_entry(fn_node):
    """What is bound when ``fn_node`` (a gast FunctionDef) starts: its parameters."""
    params = scopes.bound_names(gast.FunctionDef('_', fn_node.args, [], [], None, None, []))
    return Bound(frozenset(params), frozenset(params))


def exposed_reads(stmts) -> typing.Set[str]:
    """Names ``stmts`` may read before they surely bound them themselves (a read and
    a bind in one statement count as the read first: ``x = x + 1``)."""
    exposed, bound = set(), Bound(frozenset(), frozenset())
    for stmt in stmts:
        exposed |= reads([stmt]) - bound.surely
        bound = bound.after(stmt)
    return exposed
