"""Pass: writes to names declared ``global`` / ``nonlocal`` go through the runtime.

Runs first.  ``global step`` + ``step += 1`` becomes
``__jr.store(__ns, 'step', __jr.load(...) + 1)`` (the read is a free name,
resolved by ``names``), and the declaration is dropped: the write lands in
the shadow heap and reaches the module (or closure cell) only after a
successful run.  Other binding forms of a declared name (loop targets,
unpacking, ``with ... as``) are refused with the line.
"""
from __future__ import annotations

from collections.abc import Iterable

import gast

from janus.reasons import Reason
from janus.graphgen.converters import common
from janus.pyct import scopes


class RouteDeclaredNames(common.Pass):

    def __init__(self, ctx: common.PassContext) -> None:
        super().__init__(ctx)
        # per function: global/nonlocal names routed to the runtime
        self.declared: list[set[str]] = []
        # per function: nonlocal names of a function inside the converted one
        self.inner: list[set[str]] = []
        # per function: the names it binds itself (not declared)
        self.locals: list[set[str]] = []

    def visit_FunctionDef(self, node: gast.FunctionDef) -> gast.FunctionDef:
        names: set[str] = set()
        inner: set[str] = set()
        for stmt in gast.walk(node):
            if isinstance(stmt, (gast.Global, gast.Nonlocal)) and _owner(node, stmt):
                names.update(stmt.names)
                if isinstance(stmt, gast.Nonlocal):
                    # A variable of an enclosing function the call itself runs: a cell the
                    # call made, so plain Python (checked: not written in a traced-once region).
                    inner.update(n for n in stmt.names if any(n in own for own in self.locals))
        self.declared.append(names - inner)
        self.inner.append(inner)
        self.locals.append(scopes.bound_names(node) - names)
        try:
            node = self.generic_visit(node)
        finally:
            self.declared.pop()
            self.inner.pop()
            self.locals.pop()
        return node

    def _is_declared(self, name: str) -> bool:
        return bool(self.declared) and name in self.declared[-1]

    def visit_Global(self, node: gast.Global) -> None:
        return None

    def visit_Nonlocal(self, node: gast.Nonlocal) -> gast.Nonlocal | None:
        kept = [name for name in node.names if self.inner and name in self.inner[-1]]
        if not kept:
            return None
        node.names = kept
        return node

    def _inner_writes(self, node: gast.AST, targets: Iterable[gast.expr]) -> list[gast.stmt]:
        """``nonlocal n; n += 1`` in a function nested in the converted one: plain Python,
        after a check that the trace is not inside a tensor-dependent region."""
        written = [n.id for t in targets for n in gast.walk(t)
                   if isinstance(n, gast.Name) and self.inner and n.id in self.inner[-1]]
        checks = [gast.copy_location(gast.Expr(common.runtime_call(
            'closure_write', [common.const(name)], like=node)), node) for name in written]
        return checks

    def visit_Assign(self, node: gast.Assign) -> gast.AST | list[gast.AST]:
        checks = self._inner_writes(node, node.targets)
        if checks:
            return checks + [self.generic_visit(node)]
        return self._visit_assign(node)

    def _visit_assign(self, node: gast.Assign) -> gast.AST:
        declared = [t for t in node.targets if isinstance(t, gast.Name) and self._is_declared(t.id)]
        nested = [n for t in node.targets for n in gast.walk(t)
                  if isinstance(n, gast.Name) and self._is_declared(n.id)]
        if not nested:
            return self.generic_visit(node)
        if len(node.targets) != 1 or len(declared) != 1:
            self.unsupported(node, Reason.DECLARED_WRITE, 'janus converts writes to a '
                                   'global/nonlocal only as `name = value`')
        node.value = self.visit(node.value)
        return self._store(declared[0].id, node.value, node)

    def visit_AugAssign(self, node: gast.AugAssign) -> gast.AST | list[gast.AST]:
        checks = self._inner_writes(node, [node.target])
        if checks:
            return checks + [self.generic_visit(node)]
        if not (isinstance(node.target, gast.Name) and self._is_declared(node.target.id)):
            return self.generic_visit(node)
        node.value = self.visit(node.value)
        read = gast.copy_location(common.load(node.target.id), node)
        return self._store(node.target.id, gast.BinOp(read, node.op, node.value), node)

    def visit_Name(self, node: gast.Name) -> gast.Name:
        if isinstance(node.ctx, (gast.Store, gast.Del)) and self._is_declared(node.id):
            self.unsupported(node, Reason.DECLARED_WRITE, 'janus converts writes to a '
                                   'global/nonlocal only as `name = value` or `name op= value`')
        return node

    def _store(self, name: str, value: gast.expr, like: gast.AST) -> gast.Expr:
        call = common.runtime_call('store', [common.load(common.NAMESPACE), common.const(name),
                                             value], like=like)
        return gast.copy_location(gast.Expr(call), like)


def _owner(function: gast.AST, statement: gast.AST) -> bool:
    """Whether ``statement`` belongs to ``function`` itself, not a nested def."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        if node is statement:
            return True
        if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda,
                             gast.ClassDef)):
            continue
        stack.extend(gast.iter_child_nodes(node))
    return False
