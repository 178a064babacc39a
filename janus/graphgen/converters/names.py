"""Pass: free-name reads (globals, closure cells, builtins) go through the runtime.

Runs after every pass that creates new nodes, last.  ``x`` becomes
``__jr.load(__ns, 'x')`` where ``x`` is bound by no enclosing scope inside
the converted function, so the runtime can record where the value came from
and guard it (its identity, type or Python value) before the graph runs.
"""
from __future__ import annotations

import gast

from janus.graphgen.converters import common
from janus.pyct import scopes


class ResolveFreeNames(common.Pass):

    def __init__(self, ctx: common.PassContext) -> None:
        super().__init__(ctx)
        self.scope_stack: list[set[str]] = []

    def _visit_scope(self, node: gast.AST) -> gast.AST:
        self.scope_stack.append(scopes.bound_names(node))
        try:
            return self.generic_visit(node)
        finally:
            self.scope_stack.pop()

    visit_FunctionDef = _visit_scope
    visit_Lambda = _visit_scope
    visit_ListComp = _visit_scope
    visit_SetComp = _visit_scope
    visit_DictComp = _visit_scope
    visit_GeneratorExp = _visit_scope

    def visit_Name(self, node: gast.Name) -> gast.expr:
        if not isinstance(node.ctx, gast.Load) or node.id in common.RESERVED:
            return node
        if any(node.id in bound for bound in self.scope_stack):
            return node
        return common.runtime_call('load', [common.load(common.NAMESPACE),
                                            common.const(node.id)], like=node)
