"""Assertions made inside a tf.cond branch, checked before the branch.

A branch's ``Janus>Assert`` would run only on the taken side and after the
ops before the cond; where its inputs exist outside the branch, the check is
made there too (before any state change) and the branch's copy marked as
hoisted (``HOISTED``).  Needs a ``TraceContext``; used by ``cond.py``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from janus.graph import effects
from janus.graph import ops as janus_ops
from janus.control.common import in_traced_region
from janus.graph.graph_analysis import first_state_change, graph_of
from janus.graph.ops import CHECK_OPS

if TYPE_CHECKING:
    from janus.heap.shadow_heap import Checkpoint
    from janus.trace.trace_context import TraceContext


HOISTED = '_janus_hoisted_asserts'   # on a branch graph: names of its asserts checked outside


def hoist_assertions(ctx: TraceContext, init: Any, set_state: Callable[[Any], object],
                     base: Checkpoint, branches: Sequence[Callable[[], Any]]) -> list[int] | None:
    """Assertions a tf.cond's branches would make, checked before the cond instead.

    The cond's test depends on a state change made earlier in the call, so an
    assertion inside a branch (a dynamic scalar's range check: ``self.logged +=
    1``) would run after that change, and a failure could not leave state
    untouched.  Each branch is traced once in a scratch graph; every assertion it
    makes whose condition can be recomputed here from the branch's inputs is
    added here, unconditionally, before the cond (a check that fails when its
    branch would not have run only sends that call to the imperative re-run).
    Returns how many assertions each branch makes (the real trace's copies are
    then redundant, ``mark_hoisted``), or None when some cannot be hoisted (the
    tracer then refuses, as before)."""
    from tensorflow.python.framework import func_graph
    heap = ctx.heap
    graphs = []
    for fn in branches:
        with func_graph.FuncGraph('janus_dry_run').as_default() as graph:
            set_state(init)
            heap.restore(base)
            region = heap.open_region()
            try:
                in_traced_region(fn)
            except Exception:  # noqa: BLE001 - the real trace meets it again
                return None
            finally:
                heap.close_region(region)
                heap.restore(base)
                set_state(init)
        graphs.append(graph)
    found: list[Any] = [_branch_asserts(graph) for graph in graphs]
    if any(ops is None for ops in found):
        return None
    conditions = []
    for ops in found:
        for op in ops:
            condition = _rematerialize(op.inputs[0], {})
            if condition is None:
                return None
            conditions.append((op, condition))
    for op, condition in conditions:
        _check_outside(ctx, op, condition)
    return [len(ops) for ops in found]


def _check_outside(ctx: TraceContext, op: tf.Operation, condition: tf.Tensor) -> None:
    """The assertion ``op`` of a branch, checked in the graph built now."""
    outer = tf.compat.v1.get_default_graph()
    if ctx.soft_conditions is not None and outer is ctx.top_graph:
        # A distributed step: checked by every rank together (library/distributed.py).
        ctx.soft_conditions.append(tf.reshape(tf.cast(condition, tf.bool), []))
        return
    message = op.get_attr('message')
    message = message.decode() if isinstance(message, bytes) else message
    check = janus_ops.janus_assert(condition, op.get_attr('assumption_id'), message)
    if outer is ctx.top_graph:
        ctx.assert_ops.append(check)


def hoist_beside_changes(ctx: TraceContext, graphs: Sequence[tf.Graph]) -> None:
    """A tf.cond whose branches both change state (a variable update) and assert (a
    dynamic scalar's range check): every state change waits for every assertion,
    so the cond would wait for itself.  Likewise a cond that only reads a variable
    the call changed before it (``v.assign_add(..)``, then ``print(v)`` on one
    side): TF orders it after that change, which waits for its assertions.  Its
    assertions are checked again before it, unconditionally (their conditions
    recomputed here from the branches' inputs), and the copies inside do not
    count.  Only for a cond that reads a resource (TF then orders it by that
    resource, not after the checks made later in program order)."""
    found: list[Any] = [_branch_asserts(graph) for graph in graphs]
    if any(ops is None for ops in found) or not any(found):
        return
    if not any(effects.changes_state(op) for graph in graphs for op in graph.get_operations()
               if op.type not in CHECK_OPS)\
            and first_state_change(tf.compat.v1.get_default_graph()) is None:
        return
    if not any(t.dtype == tf.resource for graph in graphs for t, _ in graph.captures):
        return
    checks = []
    for ops in found:
        for op in ops:
            condition = _rematerialize(op.inputs[0], {})
            if condition is None:
                return
            checks.append((op, condition))
    for op, condition in checks:
        _check_outside(ctx, op, condition)
    mark_hoisted(graphs, [len(ops) for ops in found])


def _branch_asserts(graph: tf.Graph, depth: int = 0) -> list[tf.Operation] | None:
    """The Janus>Assert ops a branch graph runs, its nested tf.conds' included, in a
    fixed order; None when one sits where janus cannot recompute its condition (a
    loop body, a function call) or is a CheckedIdentity."""
    found = []
    for op in graph.get_operations():
        if op.type == 'Janus>CheckedIdentity':
            return None
        if op.type == 'Janus>Assert':
            found.append(op)
            continue
        called = effects.called_graphs(op)
        if not called:
            continue
        inner: list[Any] | None = [_branch_asserts(g, depth + 1) for g in called] if op.type in (
            'If', 'StatelessIf') and depth < 8 else None
        if inner is None or any(ops is None for ops in inner):
            if any(o.type in CHECK_OPS for g in called for o in g.get_operations()):
                return None
            continue
        for ops in inner:
            found.extend(ops)
    return found


def mark_hoisted(graphs: Sequence[tf.Graph], counts: Sequence[int]) -> None:
    """The real branches' assertions are the hoisted checks' copies: the tracer does
    not count them (``HOISTED``).  Only when the real trace made as many as the
    scratch one (the same code traced twice makes the same checks)."""
    found: list[Any] = [_branch_asserts(graph) for graph in graphs]
    if any(ops is None for ops in found) or [len(ops) for ops in found] != counts:
        return
    for ops in found:
        for op in ops:
            names = getattr(op.graph, HOISTED, None)
            if names is None:
                names = set()
                setattr(op.graph, HOISTED, names)
            names.add(op.name)


def _rematerialize(tensor: tf.Tensor, memo: dict[int, tf.Tensor | None],
                   depth: int = 0) -> tf.Tensor | None:
    """``tensor``, of a branch graph being traced (or nested in one), recomputed in
    the graph being built now from the outer tensors the branch captured; None
    when it needs anything else (a stateful op, a function, a control input)."""
    outer = tf.compat.v1.get_default_graph()
    graph = graph_of(tensor)
    enclosing = outer
    while enclosing is not None:   # the graph built now and the ones around it
        if graph is enclosing:
            return tensor
        enclosing = getattr(enclosing, 'outer_graph', None)
    if graph is None or not hasattr(graph, 'captures'):
        return None
    if id(tensor) in memo:
        return memo[id(tensor)]
    memo[id(tensor)] = None
    op = tensor.op
    result = None
    if depth > 256:
        pass
    elif op.type == 'Placeholder':
        captured = {id(inner): outer_tensor for outer_tensor, inner in graph.captures}
        if id(tensor) in captured:
            result = _rematerialize(captured[id(tensor)], memo, depth + 1)
    elif not op._is_stateful and not op.control_inputs and not effects.called_graphs(op)\
            and op.type not in effects.CALL_OPS:
        inputs = [_rematerialize(t, memo, depth + 1) for t in op.inputs]
        if all(t is not None for t in inputs):
            attrs = {key: value for key, value in op.node_def.attr.items()}
            copy = outer._create_op_internal(
                op.type, inputs, dtypes=[t.dtype for t in op.outputs], attrs=attrs,
                name='janus_hoisted_' + op.name.split('/')[-1])
            result = copy.outputs[tensor.value_index]
    memo[id(tensor)] = result
    return result
