"""Pass: ``break`` and ``continue`` become flags and folded branches.

Runs after ``returns`` and before ``control``.  In a loop body,
``if t: ...; continue`` followed by more code moves that code into the
``if``'s other branch; ``break`` becomes ``__janus_break_<n> = True`` the
same way, the loop also stops on the flag (``while``: ``not flag and test``;
``for``: the body runs only while the flag is down, no item is taken once it
is up (``anno.Key.BREAK_FLAG``: a dataset, an iterator or a generator must not be
pulled past the break), and ``for ... else``
runs its ``else`` only if the flag stayed down).  The loop then has no jump
left, so it and its branches can become ``tf.while_loop`` / ``tf.cond`` when
their outcomes vary.  Loops the folding cannot express keep their shape.
"""
from __future__ import annotations

from collections.abc import Callable

import gast

from janus.graphgen.converters import common
from janus.pyct import anno

_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)


def _jumps(node: gast.AST) -> bool:
    """Whether ``node`` breaks/continues its own loop (nested loops not counted)."""
    if isinstance(node, (gast.Break, gast.Continue)):
        return True
    if isinstance(node, _SCOPES + (gast.For, gast.While)):
        return False
    return any(_jumps(child) for child in gast.iter_child_nodes(node))


def _flag_set(flag: str, like: gast.AST) -> gast.Assign:
    assign = gast.Assign([gast.Name(flag, gast.Store(), None, None)], common.const(True), None)
    return gast.copy_location(assign, like)


def _lowering(flag: str) -> Callable[[gast.stmt], list[gast.stmt] | None]:
    def lower(stmt: gast.stmt) -> list[gast.stmt] | None:
        if isinstance(stmt, gast.Continue):
            return []
        if isinstance(stmt, gast.Break):
            return [_flag_set(flag, stmt)]
        return None
    return lower


def _not_flag(flag: str, like: gast.AST) -> gast.expr:
    test = gast.UnaryOp(gast.Not(), common.load(flag))  # `control` makes it __jr.not_ (a test)
    return gast.copy_location(test, like)


class LowerJumps(common.Pass):

    def __init__(self, ctx: common.PassContext) -> None:
        super().__init__(ctx)
        self.count = 0

    def _loop(self, node: gast.AST) -> gast.AST | list[gast.stmt]:
        node = self.generic_visit(node)   # inner loops first
        if not any(_jumps(stmt) for stmt in node.body):
            return node
        self.count += 1
        flag = '__janus_break_%d' % self.count
        try:
            body, _ = common.fold_jumps(list(node.body), _jumps, _lowering(flag))
        except common.CannotFold:
            return node
        breaks = any(isinstance(n, gast.Name) and n.id == flag for s in body for n in gast.walk(s))
        node.body = body or [gast.Pass()]
        if not breaks:
            return node
        start = gast.copy_location(gast.Assign([gast.Name(flag, gast.Store(), None, None)],
                                               common.const(False), None), node)
        return [start] + self._stop_on_flag(node, flag)

    def _stop_on_flag(self, node: gast.AST, flag: str) -> list[gast.stmt]:
        orelse, node.orelse = node.orelse, []
        if isinstance(node, gast.While):
            # No site id: the flag is no test the profiler saw (a tensor flag is dynamic).
            test = gast.BoolOp(gast.And(), [_not_flag(flag, node.test), node.test])
            node.test = gast.copy_location(test, node.test)
        else:
            item = flag.replace('break', 'item')
            bind = gast.copy_location(gast.Assign([node.target], common.load(item), None), node)
            guarded = gast.If(_not_flag(flag, node), [bind] + node.body, [])
            node.target = gast.Name(item, gast.Store(), None, None)
            node.body = [gast.copy_location(guarded, node)]
            anno.set(node, anno.Key.BREAK_FLAG, flag)   # no next item is taken once it is up
        after = [gast.copy_location(gast.If(_not_flag(flag, node), orelse, []), node)] if orelse else []
        return [node] + after

    visit_For = _loop
    visit_While = _loop
