"""Horovod inside janus graphs: the ranks agree before they communicate.

Needs Horovod (``pip install .[horovod]``; ``scripts/install_horovod.sh``)
and ``hvd.init()``.  A speculative assumption can break on one rank only (a
branch that depends on that rank's data).  If that rank's graph aborted, the
other ranks would wait forever in the next collective.  So in a distributed
step, assumptions are *collected* instead of checked one by one
(``TraceContext.soft_conditions``), and ``agree(name)`` — placed before the
gradient allreduce — allreduces "all my assumptions held" with Min: every
rank gets the same answer, every rank's graph passes or fails the same
``Janus>Assert`` (kind AGREEMENT), and on failure every rank re-runs the step
imperatively, where ``agree`` contributes a plain 1.  Both paths issue the
same collectives, with the same names, in the same order.
"""
from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from janus.errors import JanusUsageError
from janus.graph import ops
from janus.trace import tracing
from janus.trace.tracing import AssumptionKind

_INSTALL_HINT = ('janus.DistributedOptimizer needs Horovod with TensorFlow: install the extra '
                 '(`pip install --no-build-isolation .[horovod]`, which needs the recipe in '
                 '`bash scripts/install_horovod.sh`)')


def horovod() -> types.ModuleType:
    """``horovod.tensorflow``, initialized; a JanusUsageError saying what to do otherwise."""
    try:
        import horovod.tensorflow as hvd
    except ImportError as e:
        raise JanusUsageError('%s (%s)' % (_INSTALL_HINT, e)) from None
    if not hvd.is_initialized():
        raise JanusUsageError('call hvd.init() before using janus.DistributedOptimizer')
    return hvd


class _Agreement:
    """What ``agree`` returns: ``gate(t)`` lets ``t`` through only once all ranks agreed.

    Gradients are gated before their allreduce: if any rank's assumption
    broke, no rank enqueues the graph's allreduces (they would be left
    half-done, and the imperative re-run's allreduces of the same names would
    then wait forever)."""

    def __init__(self, held: tf.Tensor | None = None, assumption_id: Any = None) -> None:
        self.held, self.assumption_id = held, assumption_id

    def gate(self, tensor: tf.Tensor) -> tf.Tensor:
        if self.held is None:
            return tensor
        return ops.janus_checked_identity(self.held, tensor, self.assumption_id,
                                          'AGREEMENT: every rank held its assumptions')


_eager_collectives = {}


def allreduce(tensor: tf.Tensor, name: str, op: object) -> tf.Tensor:
    """``hvd.allreduce`` under exactly the name ``name``, in a graph or eagerly.

    Horovod matches ranks' collectives by op name.  Inside a janus graph the
    op is named ``name`` (name scopes ignored); run imperatively, it runs in a
    one-op tf.function whose op has that same name — so a rank re-running a
    step imperatively meets a rank running the graph in the same collective.
    """
    hvd = horovod()
    if not tf.executing_eagerly():
        return hvd.allreduce(tensor, op=op, name=name, ignore_name_scope=True)
    key = (name, op)
    if key not in _eager_collectives:
        _eager_collectives[key] = tf.function(
            lambda t: hvd.allreduce(t, op=op, name=name, ignore_name_scope=True),
            autograph=False)
    return _eager_collectives[key](tf.convert_to_tensor(tensor))


def agree(name: str) -> _Agreement:
    """Allreduces (Min) whether this rank's assumptions held; asserts all did."""
    hvd = horovod()
    ctx = tracing.current_or_none()
    if ctx is None or ctx.soft_conditions is None:     # running imperatively
        allreduce(tf.constant(1, tf.int32), name, hvd.Min)
        return _Agreement()
    conditions, ctx.soft_conditions = ctx.soft_conditions, None   # later checks are hard
    # Never a constant: grappler would constant-fold the allreduce of a constant
    # (running the collective once, while optimizing) and never run it again;
    # the output of a stateful op cannot be folded.
    true = tf.constant(True)
    held = ops.janus_checked_identity(true, true, -1, 'AGREEMENT: not folded')
    if conditions:
        held = tf.logical_and(held, tf.reduce_all(tf.stack(conditions)))
    agreed = tf.equal(allreduce(tf.cast(held, tf.int32), name, hvd.Min), 1)
    ctx.assume(None, AssumptionKind.AGREEMENT, agreed,
               'every rank held its assumptions (%d here)' % len(conditions))
    return _Agreement(agreed, ctx.assumptions[-1].id)


def average_gradients(grads: Sequence[tf.Tensor | None], prefix: str,
                      agreement: _Agreement) -> list[tf.Tensor | None]:
    """Allreduce (average) of each gradient, named by position so every path matches."""
    hvd = horovod()
    return [None if g is None else allreduce(agreement.gate(g), '%s.%d' % (prefix, i), hvd.Average)
            for i, g in enumerate(grads)]
