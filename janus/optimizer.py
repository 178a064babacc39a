"""``janus.Optimizer``: a drop-in wrapper that makes a whole training step one graph.

Needs nothing run before it.  ``minimize(loss_fn, var_list)`` runs the
forward pass (``loss_fn()``, typically a new lambda each step capturing that
step's batch), the gradients and the wrapped Keras optimizer's update as one
janus function: profiled first, then one guarded graph, with the same
speculation, guards and fallback as ``@janus.function``.  The lambda is
guarded by its code, and what it captures (the batch) is read afresh on every
run, so a new lambda per step reuses the graph.  The update happens only
after every assertion of the step passed (deferred updates).  Everything
else (``learning_rate``, ``iterations``, slots, schedules) is the wrapped
optimizer's own.
"""
from __future__ import annotations
import typing
import tensorflow as tf

from janus.advising import caller_line
from janus.api import JanusFunction
from janus.errors import JanusUsageError


def _minimize_step(optimizer: typing.Any, loss_fn: typing.Callable[[], tf.Tensor],
                   var_list: list) -> tf.Tensor:
    with tf.GradientTape() as tape:
        loss = loss_fn()
    grads = tape.gradient(loss, var_list)
    optimizer.apply_gradients(zip(grads, var_list))
    return loss


def _apply_step(optimizer: typing.Any, grads: typing.Sequence, var_list: typing.Sequence) -> None:
    optimizer.apply_gradients(zip(grads, var_list))


class Optimizer:
    """Wraps a Keras optimizer: ``janus.Optimizer(keras.optimizers.SGD(0.1))``."""

    _minimize_step = staticmethod(_minimize_step)
    _apply_step = staticmethod(_apply_step)
    _distributed = False

    def __init__(self, optimizer: typing.Any, profile_calls: int | None = None,
                 strict: bool | None = None) -> None:
        if not callable(getattr(optimizer, 'apply_gradients', None)):
            raise JanusUsageError('janus.Optimizer wraps a Keras optimizer (something with '
                                  'apply_gradients); got %r' % (optimizer,))
        self._optimizer = optimizer
        options = dict(profile_calls=profile_calls, strict=strict, distributed=self._distributed)
        self._minimize = JanusFunction(self._minimize_step, **options)
        self._apply = JanusFunction(self._apply_step, **options)
        # explain/logs name the optimizer and where your code made it, not janus's step.
        made_at = caller_line()
        for jf, method in ((self._minimize, 'minimize'), (self._apply, 'apply_gradients')):
            jf.name = 'janus.%s(%s).%s' % (type(self).__name__, type(optimizer).__name__, method)
            jf.defined_at = made_at   # type: ignore[attr-defined]

    def __janus_functions__(self) -> list[JanusFunction]:
        """Its janus functions (``minimize``'s and ``apply_gradients``'s steps), for
        ``janus.explain(opt)`` / ``stats`` / ``to_code`` (also ``opt.minimize``)."""
        return [self._minimize, self._apply]

    @property
    def optimizer(self) -> typing.Any:
        """The wrapped Keras optimizer."""
        return self._optimizer

    def minimize(self, loss: typing.Any, var_list: typing.Any,
                 tape: tf.GradientTape | None = None) -> typing.Any:
        """One training step: ``loss()`` under a tape, its gradients, the update."""
        if not callable(loss):
            if tape is None:
                raise JanusUsageError('minimize() needs a callable loss (e.g. `lambda: '
                                      'loss_fn(model(x), y)`), or a tensor loss with the '
                                      '`tape` that recorded it')
            grads = tape.gradient(loss, list(var_list))
            return self.apply_gradients(zip(grads, var_list))
        if callable(var_list):
            var_list = var_list()
        return self._minimize(self._optimizer, loss, list(var_list))

    def apply_gradients(self, grads_and_vars: typing.Iterable[tuple]) -> typing.Any:
        grads_and_vars = list(grads_and_vars)
        grads = [g for g, _ in grads_and_vars]
        variables = [v for _, v in grads_and_vars]
        self._apply(self._optimizer, grads, variables)
        return self._optimizer.iterations

    def __getattr__(self, name: str) -> typing.Any:
        # learning_rate, iterations, variables, get_config...: the wrapped optimizer's.
        return getattr(self._optimizer, name)
