"""Pass: every call goes through ``__jr.call``.

At trace time the runtime inlines the user's own Python callees (converting
them with this same pipeline), lets whitelisted TF/Keras/builtin callees
build their ops, and rejects everything else with the call's source line.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from janus.graphgen.converters import common

if TYPE_CHECKING:
    import gast


class RouteCalls(common.Pass):

    def visit_Call(self, node: gast.Call) -> gast.Call:
        node = self.generic_visit(node)
        if common.is_runtime_call(node):
            return node
        return common.runtime_call('call', [node.func] + node.args, node.keywords, like=node)
