"""Replay of a graph's host program: its checks and Python calls, run before the graph.

Needs a ``HostProgram`` that ``graphgen/hostcheck.py`` built when the graph was
traced.  Per call, ``HostProgram.run`` recomputes the host region in Python,
op for op with TF's CPU semantics (the functions below: int64 wraps, float64
results below the normal range flush to zero, ``DivNoNan``'s zero, ``Cast``'s
rounding), raises ``AssertionBroke`` for a failed check or ``GraphError`` for a
raising Python call (nothing ran yet), and leaves the values the graph is fed
(``fed_value``) in this thread until ``clear``.
"""
from __future__ import annotations
import dataclasses
import math
import random
import threading
import typing

import numpy as np
import tensorflow as tf

from janus.replay.executor import AssertionBroke, GraphError

INT64_MIN, _INT64_MAX = -2 ** 63, 2 ** 63 - 1
_TWO64 = 2 ** 64
NORMAL = 2.2250738585072014e-308   # float64's smallest normal number

_local = threading.local()   # the host values of the run in progress (fed inputs)


class HostRaised(Exception):
    """An op of the host region raised (Python's own error, or TF's for an integer
    division by zero): the graph would have failed there, before any state change."""


def wrap(v: int) -> int:
    """An int64 result as TF's kernels leave it (two's complement wrap)."""
    if INT64_MIN <= v <= _INT64_MAX:
        return v
    return (v - INT64_MIN) % _TWO64 + INT64_MIN


def ftz(v: float) -> float:
    """A float64 result as TF's CPU kernels leave it: below the normal range, zero."""
    if -NORMAL < v < NORMAL and v != 0.0:
        return math.copysign(0.0, v)
    return v


def int_floordiv(a: int, b: int) -> int:
    if b == 0:
        raise HostRaised('Integer division by zero')
    return wrap(a // b)


def int_floormod(a: int, b: int) -> int:
    if b == 0:
        raise HostRaised('Integer division by zero')
    return wrap(a % b)


def div_no_nan(a: float, b: float) -> float:
    return 0.0 if b == 0.0 else ftz(a / b)


def reciprocal(a: float) -> float:
    if a == 0.0:
        return math.copysign(math.inf, a)
    return ftz(1.0 / a)


def integral(fn: typing.Callable[[float], float]) -> typing.Callable[[float], float]:
    """``Floor``/``Round`` of a float64: the sign of a zero result is the operand's."""
    def apply(a: float) -> float:
        if math.isinf(a) or math.isnan(a):
            return a
        r = float(fn(a))
        return math.copysign(0.0, a) if r == 0.0 else r
    return apply


def float_to_int(a: float) -> int:
    """``Cast`` float64 -> int64: truncation; NaN and out of range give INT64_MIN (x86)."""
    if math.isfinite(a) and -9.223372036854775808e18 <= a < 9.223372036854775808e18:
        return int(a)
    return INT64_MIN



@dataclasses.dataclass(frozen=True)
class HostStep:
    """One step of a host program: ``out = fn(*ins)`` (``template``: its source text,
    or None to call ``fn``), or, when ``assumption`` is set, a check that slot
    ``ins[0]`` holds (else the assumption broke)."""
    fn: typing.Optional[typing.Callable]
    out: typing.Optional[int]
    ins: tuple
    template: typing.Optional[str] = None
    assumption: typing.Any = None     # tracing.Assumption of a check

    @property
    def is_check(self) -> bool:
        return self.assumption is not None


class HostProgram:
    """The host region of one graph: per call, its values, checks and Python calls,
    compiled to one Python function (``source``)."""

    def __init__(self, constants: typing.Iterable[tuple[int, object]],
                 leaves: typing.Iterable[tuple[int, typing.Callable]],
                 steps: typing.Sequence, fed: typing.Sequence[int]) -> None:
        self.draws = []   # the generators its draws advance (trace/host_draws.py)
        self.checks = sum(1 for step in steps if step.is_check)
        self.checked = frozenset(step.assumption.id for step in steps if step.is_check)
        self.calls = len(fed)
        namespace: dict[str, typing.Any] = {'_wrap': wrap, '_ftz': ftz, '_Broke': AssertionBroke}
        names = {}
        for slot, value in constants:
            names[slot] = 'K%d' % slot
            namespace[names[slot]] = value
        lines = ['def run(arguments, flat):']
        for slot, reader in leaves:
            names[slot] = 'v%d' % slot
            namespace['R%d' % slot] = reader
            lines.append('    v%d = R%d(arguments, flat)' % (slot, slot))
        for number, step in enumerate(steps):
            fn, out, ins = step.fn, step.out, step.ins
            if step.is_check:
                namespace['A%d' % number] = step.assumption
                lines.append('    if not %s: raise _Broke(A%d)' % (names[ins[0]], number))
                continue
            operands = [names[i] for i in ins]
            template = step.template
            if template == '{0}':
                names[out] = operands[0]   # the same value: no code
                continue
            names[out] = 'v%d' % out
            if template is None:
                namespace['F%d' % number] = fn
                template = 'F%d(%s)' % (number, ', '.join('{%d}' % i for i in range(len(ins))))
            lines.append('    v%d = %s' % (out, template.format(*operands)))
        lines.append('    return (%s)' % ''.join(names[slot] + ', ' for slot in fed))
        self.source = '\n'.join(lines)
        exec(compile(self.source, '<janus host checks>', 'exec'), namespace)  # noqa: S102
        self._run = namespace['run']

    def run(self, arguments: typing.Mapping[str, typing.Any], flat: typing.Sequence) -> None:
        """Computes the region; raises AssertionBroke / GraphError (nothing ran yet)."""
        try:
            _local.values = self._run(arguments, flat)
        except HostRaised as e:
            raise GraphError(e) from None

    def saved_states(self) -> list[tuple[typing.Any, object]] | None:
        """The states of the generators its draws advance, before it runs (None when
        it draws nothing)."""
        if not self.draws:
            return None
        return [(generator, save_state(generator)) for generator in self.draws]

    @staticmethod
    def restore(saved: typing.Iterable[tuple[typing.Any, object]] | None) -> None:
        """Puts the generators back as ``saved_states`` found them: a call that did not
        complete re-runs imperatively and draws the same numbers, once."""
        for generator, state in saved or ():
            restore_state(generator, state)

    def describe(self) -> str:
        text = '%d checks, %d Python calls before the run' % (self.checks, self.calls)
        if self.draws:
            text += ' (%d draw%s from Python random generators)' % (
                len(self.draws), '' if len(self.draws) == 1 else 's')
        return text


def save_state(generator: typing.Any) -> typing.Any:
    """A random generator's whole state (``random.Random``, NumPy ``RandomState`` or
    ``Generator``: what ``trace/host_draws.py`` draws from), for ``restore_state``."""
    if isinstance(generator, random.Random):
        return generator.getstate()
    if type(generator) is np.random.RandomState:
        return generator.get_state()
    return generator.bit_generator.state


def restore_state(generator: typing.Any,
                  state: typing.Any) -> None:
    if isinstance(generator, random.Random):
        generator.setstate(state)
    elif type(generator) is np.random.RandomState:
        generator.set_state(state)
    else:
        generator.bit_generator.state = state


def clear() -> None:
    _local.values = None


def fed_value(position: int, numpy_type: type) -> typing.Callable[[], tf.Tensor]:
    def read_now() -> tf.Tensor:
        values = getattr(_local, 'values', None)
        if values is None:
            raise RuntimeError('janus: this graph takes values its host program computes; '
                               'run it through its janus function (GraphEntry.run)')
        return tf.constant(np.array(values[position], dtype=numpy_type))
    return read_now
