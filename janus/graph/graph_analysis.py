"""What a graph being traced has done so far: its first state change, whether a
tensor depends on it, and what ops need.

Needs a ``TraceContext`` (``tracing.current()``: its shadow heap keeps
the incremental scan).  Used by control flow (``control/``), the
tracer's ordering of checks and state changes (``graphgen/tracer.py``) and
dynamic scalars (``values/scalars.py``), which cannot assume an outcome whose
check would have to run before a change it depends on.
"""
from __future__ import annotations
import typing
import tensorflow as tf
from janus.graph import effects
from janus.graph.ops import CHECK_OPS
from janus.trace.tracing import current


def first_state_change(graph: tf.Graph) -> int | None:
    """The id of the first op of ``graph`` that changes state (by its definition,
    ``effects.py``; tf.cond/while/calls by what they run), or None.  Scanned
    incrementally: ops are only ever added."""
    scanned = current().heap.scanned
    entry = scanned.get(id(graph))
    count, first = (entry[1], entry[2]) if entry is not None and entry[0] is graph else (0, None)
    if first is None:
        ops = graph.get_operations()
        memo = {}
        for op in ops[count:]:
            if effects.changes_state(op, memo):
                first = op._id
                break
        scanned[id(graph)] = (graph, len(ops), first)
    return first


def depends_on_state_change(tensor: tf.Tensor) -> tf.Operation | None:
    """The op through which ``tensor`` depends on a state change made earlier in the
    trace (the change itself, or a stateful op created after it: TF's automatic
    control dependencies order every such op after the change, a variable read),
    or None."""
    graph = graph_of(tensor)
    if graph is None:
        return None
    first = first_state_change(graph)
    if first is None:
        return None
    seen, stack = set(), [tensor.op]
    while stack:
        op = stack.pop()
        if op in seen or op._id < first:
            continue   # created before the first change: so was everything it reads
        seen.add(op)
        if op._is_stateful and op.type not in CHECK_OPS:
            return op
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return None


def graph_of(tensor: typing.Any) -> tf.Graph | None:
    try:
        return tensor.graph
    except AttributeError:   # an eager tensor
        return None


def has_checks(graph: tf.Graph, depth: int = 0) -> bool:
    for op in graph.get_operations():
        if op.type in CHECK_OPS:
            return True
        if depth < 8 and any(has_checks(g, depth + 1) for g in effects.called_graphs(op)):
            return True
    return False


def ancestors(ops: typing.Iterable[tf.Operation]) -> set[tf.Operation]:
    """``ops`` and every op they need, through data and control inputs."""
    seen, stack = set(), list(ops)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return seen
