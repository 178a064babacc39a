"""What a graph op does outside the graph: see ``janus/graph/effects.py``; and
what keeps a graph from compiling with XLA (``xla_blocker``, for ``replay/xla.py``).

The classification lives in the runtime (the runtime decides at trace time
whether a test depends on a state change made earlier in the call, and must
not import the generator); the tracer's deferred-update rule uses the same
definitions through this module.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from janus.graph.effects import (CALL_OPS, UNREPRODUCIBLE_RANDOM, Effect,  # noqa: F401
                                 called_graphs, effect, unreproducible_reason)

if TYPE_CHECKING:
    import tensorflow as tf


# Ops XLA has no kernel for (checked before compiling, with janus's own).
_NOT_COMPILABLE = frozenset(('PyFunc', 'EagerPyFunc', 'PyFuncStateless', 'PrintV2',
                             'StringFormat', 'AsString', 'StringJoin'))
# Ops whose compiled version raises no error where TF's does (an out-of-range index is
# clamped, an integer division by zero gives a number, a bad label a NaN): a graph with
# one is compiled only when the user asked for XLA ('on'), never by janus's own choice.
_ERRORS_DIFFER = frozenset(('Gather', 'GatherV2', 'GatherNd', 'ResourceGather',
                            'ResourceGatherNd', 'ScatterNd', 'TensorScatterUpdate',
                            'TensorScatterAdd', 'TensorScatterSub', 'UnsortedSegmentSum',
                            'UnsortedSegmentMax', 'UnsortedSegmentMin', 'SegmentSum',
                            'SparseSoftmaxCrossEntropyWithLogits', 'OneHot', 'CheckNumerics',
                            'Assert', 'StridedSlice', 'Slice'))
_INTEGER_ERRORS = frozenset(('FloorDiv', 'FloorMod', 'TruncateDiv', 'TruncateMod', 'Div',
                             'Mod', 'DivNoNan'))


def xla_blockers(graph: tf.Graph) -> tuple[str | None, str | None]:
    """(why no XLA at all, why not by janus's choice): each None when nothing stops it.

    The first: an op XLA cannot compile, janus's own ops, or random numbers (XLA
    draws another stream).  The second: an op whose errors XLA drops (``_ERRORS_DIFFER``,
    integer division)."""
    hard = soft = None
    todo, seen = [graph], set()
    while todo and hard is None:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for op in current.get_operations():
            hard = hard or _not_compiled(op)
            if soft is None and (op.type in _ERRORS_DIFFER or op.type in _INTEGER_ERRORS and any(
                    t.dtype.is_integer for t in op.inputs)):
                soft = 'XLA drops the errors of %s (janus chooses XLA only where it cannot change a result)' % op.type
            todo.extend(called_graphs(op))
    return hard, soft


def _not_compiled(op: tf.Operation) -> str | None:
    if op.type.startswith('Janus>'):
        return 'it checks janus\'s assumptions (%s)' % op.type
    if op.type in _NOT_COMPILABLE or op.type.startswith('Iterator') or 'Dataset' in op.type:
        return 'it holds %s, which XLA does not compile' % op.type
    if 'Random' in op.type or op.type.startswith(('Rng', 'Stateful')) \
            or op.type in UNREPRODUCIBLE_RANDOM:
        return 'it draws random numbers (%s): XLA draws another stream' % op.type
    return None
