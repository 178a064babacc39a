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
import tensorflow as tf

from janus.errors import JanusUsageError

_INSTALL_HINT = ('janus.DistributedOptimizer needs Horovod with TensorFlow: install the extra '
                 '(`pip install --no-build-isolation .[horovod]`, which needs the recipe in '
                 '`bash scripts/install_horovod.sh`)')


def horovod():
    """``horovod.tensorflow``, initialized; a JanusUsageError saying what to do otherwise."""
    try:
        import horovod.tensorflow as hvd
    except ImportError as e:
        raise JanusUsageError('%s (%s)' % (_INSTALL_HINT, e)) from None
    if not hvd.is_initialized():
        raise JanusUsageError('call hvd.init() before using janus.DistributedOptimizer')
    return hvd


def agree(name):
    """Allreduces (Min) whether this rank's assumptions held; asserts all did."""
    from janus.runtime import operators
    hvd = horovod()
    ctx = operators.current_or_none()
    if ctx is None or ctx.soft_conditions is None:     # running imperatively
        hvd.allreduce(tf.constant(1, tf.int32), op=hvd.Min, name=name)
        return
    conditions, ctx.soft_conditions = ctx.soft_conditions, None   # later checks are hard
    held = tf.reduce_all(tf.stack(conditions)) if conditions else tf.constant(True)
    agreed = hvd.allreduce(tf.cast(held, tf.int32), op=hvd.Min, name=name)
    ctx.assume(None, 'AGREEMENT', tf.equal(agreed, 1),
               'every rank held its assumptions (%d here)' % len(conditions))


def average_gradients(grads, prefix):
    """Allreduce (average) of each gradient, named by position so every path matches."""
    hvd = horovod()
    return [None if g is None else hvd.allreduce(g, op=hvd.Average, name='%s.%d' % (prefix, i))
            for i, g in enumerate(grads)]
