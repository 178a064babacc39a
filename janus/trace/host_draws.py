"""Draws from Python's own random number generators, made on the host before the run.

Needs a ``TraceContext`` (``tracing.current()``) whose tracer collects host functions
(``graphgen/tracer.py``); ``graphgen/hostcheck.py`` moves the draws into the graph's
host program, and ``replay/host.py`` runs them and restores the generators' states.

``scale = self.rng.uniform(0.9, 1.1)`` inside a model's ``call`` is a line no graph can
hold: the draw reads and advances a Python generator's state.  Broken there, the
forward pass and its gradient run as separate graphs around it, slower than one graph
of the whole step (a hand-written split costs the same).  But a draw needs nothing
the graph computes: its arguments are Python numbers, so it can be made before the
graph runs, in program order, and its value fed in, as a user moving the line out of
the step would do by hand.  So a draw from

* a ``random.Random`` itself, not a subclass (whose ``random``, which the stdlib's
  methods call, may be its own code), the ``random`` module's functions included
  (they are its hidden instance's methods), a NumPy ``RandomState``
  (``np.random.uniform``... included) or ``Generator``,
* whose generator is guarded by identity (it comes from a source, or it is the module's
  own), and whose arguments are Python numbers or relaxed ones (dynamic scalars),
* made in the top graph (not in a ``tf.cond`` branch or a loop body, which the graph
  decides),
* of a method that gives a Python ``float`` or ``int`` (no ``size``),

becomes a ``DynamicScalar`` fed from the host program: the graph sees one value per
run, made by the generator itself before the run (eager's numbers, in eager's order).
The host program saves each generator's state first; when the call does not complete
(a check or assertion fails, the graph raises) the state is put back before the call
re-runs imperatively, which then draws the same numbers, once.

A use that needs the drawn value at trace time (a shape, ``range``) pins the draw
(``relaxation``): the next trace refuses it, a graph break at the draw as before.
"""
from __future__ import annotations

import random
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from janus import guards
from janus.graph import fallible
from janus.values import scalars
from janus.values.protocol import graph_tensor, is_graph_number
from janus.trace.tracing import current

if TYPE_CHECKING:
    from janus.trace.trace_context import TraceContext

_RANDOM_FLOATS = frozenset((
    'random', 'uniform', 'gauss', 'normalvariate', 'lognormvariate', 'expovariate',
    'vonmisesvariate', 'gammavariate', 'betavariate', 'paretovariate', 'weibullvariate',
    'triangular'))
_RANDOM_INTS = frozenset(('randint', 'randrange', 'getrandbits'))
# NumPy's generators give a Python float (int) without ``size``; ``Generator.integers``
# gives a NumPy int64, not modelled.
_NUMPY_FLOATS = frozenset((
    'random_sample', 'random', 'rand', 'randn', 'uniform', 'normal', 'standard_normal',
    'exponential', 'standard_exponential', 'beta', 'gamma', 'lognormal', 'laplace',
    'logistic'))
_NUMPY_INTS = frozenset(('randint',))
_GENERATOR_FLOATS = frozenset(('random', 'uniform', 'normal', 'standard_normal',
                               'exponential', 'standard_exponential', 'beta', 'gamma',
                               'lognormal', 'laplace', 'logistic'))


def _kind(receiver: object, name: str) -> tuple[type[int] | type[float], str] | None:
    """(result type, family) of ``receiver.name(...)`` as a draw, or None."""
    if type(receiver) is random.Random:
        # (a subclass may override ``random`` or ``getrandbits``, which the stdlib's
        # methods call: its own code, state and output, drawn in Python as written)
        if name in _RANDOM_FLOATS:
            return float, 'random'
        if name in _RANDOM_INTS:
            return int, 'random'
        return None
    if type(receiver) is np.random.RandomState:
        if name in _NUMPY_FLOATS:
            return float, 'legacy'
        if name in _NUMPY_INTS:
            return int, 'legacy'
        return None
    if type(receiver) is np.random.Generator and name in _GENERATOR_FLOATS:
        return float, 'generator'
    return None


def is_draw_method(receiver: object, name: str) -> bool:
    """Whether ``receiver.name`` is a draw method janus may make on the host (reading
    the bound method runs no code of the generator's)."""
    return _kind(receiver, name) is not None


def _module_generator(receiver: object) -> bool:
    """The ``random`` module's and NumPy's own hidden generators (``random.random()``,
    ``np.random.uniform()``): one per process, never replaced."""
    return receiver is getattr(random, '_inst', None) or \
        receiver is getattr(np.random.mtrand, '_rand', None)


def draw(callee: Any, args: Sequence[Any],
         kwargs: Mapping[str, Any]) -> scalars.DynamicScalar | None:
    """The dynamic scalar standing for the draw ``callee(*args, **kwargs)``, fed from the
    graph's host program, or None when janus does not make that draw on the host."""
    if not isinstance(callee, (types.MethodType, types.BuiltinMethodType)):
        return None
    receiver = getattr(callee, '__self__', None)
    if receiver is None or isinstance(receiver, types.ModuleType):
        return None
    kind = _kind(receiver, getattr(callee, '__name__', ''))
    if kind is None or 'size' in kwargs and kwargs['size'] is not None:
        return None
    ctx = current()
    if ctx.host.functions is None or ctx.host.draws is None or ctx.top_graph is None \
            or tf.compat.v1.get_default_graph() is not ctx.top_graph:
        return None   # no host program for this trace, or a branch the graph decides
    values = list(args) + list(kwargs.values())
    if not all(scalars.number_type(v) is not None for v in values):
        return None
    key = ('draw',) + _user_position(ctx) + (callee.__name__,)
    if key in ctx.plan.pinned:
        return None   # its value was needed at trace time: a break at the draw
    source = ctx.provenance.source_of(receiver)
    if source is None and not _module_generator(receiver):
        return None   # a generator the call made: drawn in Python, with the statement
    if source is not None:
        ctx.guards.add(guards.GuardKind.ID_MATCH, source, receiver)
    return _fed_draw(ctx, callee, receiver, args, kwargs, kind[0], key)


def _fed_draw(ctx: TraceContext, callee: Callable[..., Any], receiver: object, args: Sequence[Any],
              kwargs: Mapping[str, Any], result_type: type[int] | type[float],
              key: tuple[Any, ...]) -> scalars.DynamicScalar:
    positions = [i for i, v in enumerate(args) if is_graph_number(v)]
    names = [k for k, v in kwargs.items() if is_graph_number(v)]
    tensors = [graph_tensor(args[i]) for i in positions] + [graph_tensor(kwargs[k]) for k in names]
    dtype = scalars.DTYPES[result_type]

    def run(*values: np.ndarray) -> np.ndarray:
        values = [v.item() for v in values]  # type: ignore[assignment]
        call_args, call_kwargs = list(args), dict(kwargs)
        for i, value in zip(positions, values):
            call_args[i] = value
        for name, value in zip(names, values[len(positions):]):
            call_kwargs[name] = value
        result = callee(*call_args, **call_kwargs)
        if type(result) is not result_type or (
                result_type is int and not -scalars.INT_BOUND < result < scalars.INT_BOUND):
            raise TypeError('janus: %s gave %r, not a %s janus carries as a graph value'
                            % (callee.__name__, result, result_type.__name__))
        return np.asarray(result, dtype=dtype.as_numpy_dtype)
    with fallible.not_the_users():
        out = tf.numpy_function(run, tensors, dtype, stateful=False)
    name = '%s() at line %s' % (callee.__name__, key[2])
    ctx.host.functions[out.op] = (run, dtype)
    ctx.host.draws[out.op] = (receiver, (key, name))
    return scalars.DynamicScalar(scalars.as_scalar(out), result_type, {(key, name)})


def _user_position(ctx: TraceContext) -> tuple[str, int]:
    """(file, line) of the user code being traced: the draw's key across traces."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code in ctx.code_objects:
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back
    return '', 0
