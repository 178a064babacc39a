"""Pass: loop iterables, context managers and ``assert`` go through the runtime.

``for x in it`` → ``for x in __jr.iter(it)`` (and in comprehensions) so the
runtime can guard what a loop over an outside list read; ``with m`` →
``with __jr.enter(m)`` so only whitelisted context managers (GradientTape)
are traced; ``assert t, msg`` → ``__jr.assert_(t, lineno, lambda: msg)``
which becomes a ``Janus>Assert`` when ``t`` is a tensor.  Branch and loop
speculation (issue #3) hooks in here.
"""
import gast

from janus.graphgen.converters import common


class RouteControl(common.Pass):

    def visit_For(self, node):
        node = self.generic_visit(node)
        node.iter = common.runtime_call('iter', [node.iter], like=node.iter)
        return node

    def visit_comprehension(self, node):
        node = self.generic_visit(node)
        node.iter = common.runtime_call('iter', [node.iter], like=node.iter)
        return node

    def visit_With(self, node):
        node = self.generic_visit(node)
        for item in node.items:
            item.context_expr = common.runtime_call('enter', [item.context_expr],
                                                    like=item.context_expr)
        return node

    def visit_Assert(self, node):
        node = self.generic_visit(node)
        msg = node.msg if node.msg is not None else common.const(None)
        no_args = gast.arguments([], [], None, [], [], None, [])
        thunk = gast.Lambda(no_args, msg)
        call = common.runtime_call('assert_', [node.test, common.const(node.lineno), thunk],
                                   like=node)
        return gast.copy_location(gast.Expr(call), node)
