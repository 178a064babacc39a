"""Pass: every remaining way code looks at a value goes through the runtime.

Runs after ``attributes`` and before ``calls``.  Comparisons (``in``, ``==``,
``<``, ``is``), arithmetic and unary operators, ``x op= v`` on names,
``not x``, comprehension filters, tuple unpacking, ``*``/``**`` spreading
and f-strings become ``__jr.compare``/``binop``/``unary``/``inplace``/
``not_value``/``truth``/``unpack``/``join_text``/``format_value`` calls
(``trace/observe.py``), so an outside value observed by any of them is
guarded or refused, and a user class's operator methods are converted, never
run unconverted at trace time.  Runtime calls other passes made are left alone.
"""
from __future__ import annotations

from typing import Any

import gast

from janus.graphgen.converters import common


def _op(node: gast.AST) -> gast.Constant:
    return common.const(type(node).__name__)


def _attribute_is_none(node: gast.Compare) -> bool:
    """``<converted obj.name> is None`` or ``is not None``."""
    return (len(node.ops) == 1 and isinstance(node.ops[0], (gast.Is, gast.IsNot))
            and isinstance(node.comparators[0], gast.Constant)
            and node.comparators[0].value is None
            and common.is_runtime_call(node.left) and node.left.func.attr == 'attr'
            and len(node.left.args) == 2 and not node.left.keywords)


def _thunk(expr: gast.expr) -> gast.Lambda:
    args = gast.arguments([], [], None, [], [], None, [])
    return gast.copy_location(gast.Lambda(args, expr), expr)


def _is_unpacking_target(target: gast.AST) -> bool:
    return isinstance(target, (gast.Tuple, gast.List))


def _shape(target: gast.AST) -> str | tuple[Any, ...] | None:
    """A target's nesting for ``__jr.unpack``: None for a name, '*' for a starred one,
    a tuple per tuple/list level (``a, (b, c)`` → ``(None, (None, None))``)."""
    if isinstance(target, gast.Starred):
        return '*'
    if _is_unpacking_target(target):
        return tuple(_shape(t) for t in target.elts)
    return None


def _unpack_args(value: gast.expr, target: gast.AST) -> list[gast.expr]:
    """``unpack``'s arguments: the value and the target's shape (a list node in a
    recursion unpacks into as many items as the target has)."""
    return [value, common.const(_shape(target))]


class RouteObservations(common.Pass):

    def visit_Compare(self, node: gast.Compare) -> gast.expr:
        node = self.generic_visit(node)
        if _attribute_is_none(node):   # `obj.name is None`: a test, not a use, of the value
            read = node.left
            return common.runtime_call('attr_is_none', list(read.args) + [_op(node.ops[0])],
                                       like=node)
        if len(node.ops) == 1:
            return common.runtime_call('compare', [_op(node.ops[0]), node.left,
                                                   node.comparators[0]], like=node)
        ops = gast.Tuple([_op(op) for op in node.ops], gast.Load())
        thunks = [_thunk(value) for value in [node.left] + node.comparators]
        return common.runtime_call('compare_chain', [ops] + thunks, like=node)

    def visit_BinOp(self, node: gast.BinOp) -> gast.expr:
        node = self.generic_visit(node)
        return common.runtime_call('binop', [_op(node.op), node.left, node.right], like=node)

    def visit_UnaryOp(self, node: gast.UnaryOp) -> gast.expr:
        node = self.generic_visit(node)
        if isinstance(node.op, gast.Not):
            return common.runtime_call('not_value', [node.operand], like=node)
        return common.runtime_call('unary', [_op(node.op), node.operand], like=node)

    def visit_AugAssign(self, node: gast.AugAssign) -> gast.AST:
        node = self.generic_visit(node)
        if not isinstance(node.target, gast.Name):
            return node   # attributes and items: rewritten by the attributes pass
        read = gast.Name(node.target.id, gast.Load(), None, None)
        value = common.runtime_call('inplace', [_op(node.op), read, node.value], like=node)
        return gast.copy_location(gast.Assign([node.target], value, None), node)

    def visit_Assign(self, node: gast.Assign) -> gast.Assign:
        node = self.generic_visit(node)
        targets = [t for t in node.targets if _is_unpacking_target(t)]
        if targets:
            args = _unpack_args(node.value, targets[0]) if len(node.targets) == 1 \
                else [node.value]
            node.value = common.runtime_call('unpack', args, like=node.value)
        return node

    def visit_For(self, node: gast.For) -> gast.For:
        # A loop that keeps its Python shape (``return``/``break`` in it): its target
        # unpacks each item through the runtime (functionalized loops bind it by an
        # assignment, above).
        node = self.generic_visit(node)
        return self._unpacked_items(node)

    def visit_comprehension(self, node: gast.comprehension) -> gast.comprehension:
        node = self.generic_visit(node)
        node.ifs = [common.runtime_call('truth', [test], like=test) for test in node.ifs]
        return self._unpacked_items(node)

    def _unpacked_items(self, node: gast.AST) -> gast.AST:
        if _is_unpacking_target(node.target):
            node.iter = common.runtime_call('each', [node.iter, common.const(_shape(node.target))],
                                            like=node.iter)
        return node

    def visit_Starred(self, node: gast.Starred) -> gast.Starred:
        node = self.generic_visit(node)
        if isinstance(node.ctx, gast.Load):
            node.value = common.runtime_call('unpack', [node.value], like=node.value)
        return node

    def visit_Call(self, node: gast.Call) -> gast.Call:
        node = self.generic_visit(node)
        for keyword in node.keywords:
            if keyword.arg is None:   # f(**kwargs)
                keyword.value = common.runtime_call('unpack', [keyword.value],
                                                    like=keyword.value)
        return node

    def visit_Dict(self, node: gast.Dict) -> gast.Dict:
        node = self.generic_visit(node)
        node.values = [common.runtime_call('unpack', [v], like=v) if k is None else v
                       for k, v in zip(node.keys, node.values)]   # {**d}
        return node

    def visit_JoinedStr(self, node: gast.JoinedStr) -> gast.expr:
        node = self.generic_visit(node)
        return common.runtime_call('join_text', node.values, like=node)

    def visit_FormattedValue(self, node: gast.FormattedValue) -> gast.expr:
        node = self.generic_visit(node)
        spec = node.format_spec if node.format_spec is not None else common.const(None)
        return common.runtime_call('format_value', [node.value, common.const(node.conversion),
                                                    spec], like=node)
