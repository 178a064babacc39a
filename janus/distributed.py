"""``janus.DistributedOptimizer``: Horovod data-parallel training steps as janus graphs.

Needs Horovod and ``hvd.init()`` (checked when the wrapper is made).  Like
``janus.Optimizer``, one training step (forward, gradients, update) is one
guarded janus graph; between the gradients and the update, the ranks agree
that every assumption held (``library.distributed.agree``) and average the
gradients with ``hvd.allreduce``, inside the same graph, so communication
overlaps computation.  The same code runs imperatively (profiling,
fallbacks) with the same collectives, so ranks on different paths never wait
for each other.  ``broadcast_variables`` starts every rank from rank 0's
weights.
"""
from __future__ import annotations
import typing
import tensorflow as tf

from janus.optimizer import Optimizer
from janus.library.distributed import agree, average_gradients, horovod


def _distributed_minimize_step(optimizer: typing.Any, loss_fn: typing.Callable[[], tf.Tensor],
                               var_list: list) -> tf.Tensor:
    with tf.GradientTape() as tape:
        loss = loss_fn()
    grads = tape.gradient(loss, var_list)
    agreement = agree('janus.agree.minimize')
    grads = average_gradients(grads, 'janus.grad', agreement)
    optimizer.apply_gradients(zip(grads, var_list))
    return loss


def _distributed_apply_step(optimizer: typing.Any, grads: typing.Sequence,
                            var_list: typing.Sequence) -> None:
    agreement = agree('janus.agree.apply')
    grads = average_gradients(grads, 'janus.grad', agreement)
    optimizer.apply_gradients(zip(grads, var_list))


class DistributedOptimizer(Optimizer):
    """``janus.DistributedOptimizer(keras.optimizers.SGD(0.1))``, as hvd.DistributedOptimizer."""

    _minimize_step = staticmethod(_distributed_minimize_step)
    _apply_step = staticmethod(_distributed_apply_step)
    _distributed = True

    def __init__(self, optimizer: typing.Any, profile_calls: int | None = None,
                 strict: bool | None = None) -> None:
        horovod()   # a clear error now if Horovod is missing or not initialized
        super().__init__(optimizer, profile_calls=profile_calls, strict=strict)


def broadcast_variables(variables: typing.Iterable, root_rank: int = 0) -> None:
    """Sets every rank's ``variables`` (tf or Keras) to rank ``root_rank``'s values.

    One named broadcast per variable, eagerly (hvd.broadcast_variables expects
    tf.Variables inside a tf.function, which Keras 3 variables are not)."""
    hvd = horovod()
    for index, variable in enumerate(variables):
        value = hvd.broadcast(tf.convert_to_tensor(variable), root_rank,
                              name='janus.broadcast.%d' % index)
        variable.assign(value)
