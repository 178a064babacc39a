"""XLA for janus's graphs: ``config.jit_compile`` / ``janus.function(jit_compile=...)``.

Needs a traced ``GraphEntry`` (``replay/entry.py`` makes its caller here).
Settings: ``'off'`` (TF's own executor), ``'on'`` (every graph XLA can compile
whole runs compiled), ``'auto'`` (each such graph's first runs alternate both
ways, ``AUTO_RUNS`` timed runs each after one untimed run, and the faster
median is kept: ``explain`` names the choice and both medians).

A graph compiles whole with ``jit_compile=True`` around the traced function,
its flat inputs and captured values (variables, hoisted reads) passed as
arguments.  One holding an op XLA has no kernel for is run as it is and says
why: janus's own ops (``Janus>Assert`` and friends: a graph that speculates
keeps TF's executor), ``py_function``, string ops, random draws (XLA draws
another stream).  A compile failure on the first compiled run changed nothing
(XLA compiles before it runs): that graph runs as it is from then on, and the
failed run is redone that way.

``'on'`` opts into XLA's semantics as ``tf.function(jit_compile=True)`` does:
float results may differ in their last bits (fusions), an out-of-range index
is clamped and an integer division by zero gives a number where TF raises.
``'auto'`` is janus's choice, so it never compiles a graph holding an op whose
errors XLA drops (``graphgen/effects.xla_blockers``); last-bit float
differences remain XLA's.
"""
from __future__ import annotations
import statistics
import time
import typing

import tensorflow as tf

SETTINGS = ('off', 'on', 'auto')
AUTO_RUNS = 5   # timed runs each way before 'auto' chooses


def setting(value: bool | str) -> str:
    """A jit_compile setting, from a bool or one of ``SETTINGS``."""
    if value is True:
        return 'on'
    if value is False or value is None:
        return 'off'
    if value not in SETTINGS:
        raise ValueError('jit_compile must be True, False or one of %s, got %r'
                         % (', '.join(SETTINGS), value))
    return value


class XlaCaller:
    """Calls one graph plainly or compiled, as ``mode`` decides (see the module)."""

    def __init__(self, concrete: typing.Any, plain: typing.Callable[[list], typing.Any], mode: str,
                 blocker: str | None) -> None:
        self.concrete, self.plain, self.mode = concrete, plain, mode
        self.reason = blocker   # why not XLA (graphgen/effects.xla_blockers), or None
        self.use_xla = self.reason is None and mode == 'on'
        self.decided = self.reason is not None or mode == 'on'
        self.times = {True: [], False: []}
        self._compiled: typing.Any = None   # the XLA function, compiled on first use

    def __call__(self, flat: list) -> typing.Any:
        if self.decided:
            return self._compiled_call(flat) if self.use_xla else self.plain(flat)
        compiled = len(self.times[True]) <= len(self.times[False])
        started = time.perf_counter()
        outputs = self._compiled_call(flat) if compiled else self.plain(flat)
        if self.reason is None:
            self.times[compiled].append(time.perf_counter() - started)
            self._choose()
        return outputs

    def _compiled_call(self, flat: list) -> typing.Any:
        first = self._compiled is None
        if first:
            self._compiled = _compile(self.concrete)
        captured = getattr(self.plain, 'captured_inputs', None)
        captured = captured() if captured is not None else self.concrete.captured_inputs
        try:
            return self._compiled(*flat, *captured)
        except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError,
                tf.errors.NotFoundError) as e:
            if not first or not _is_compile_error(e):
                raise
            self.reason = 'XLA could not compile it (%s)' % str(e).strip().split('\n')[0][:160]
            self.use_xla, self.decided = False, True
            return self.plain(flat)   # nothing ran: XLA compiles before it runs

    def _choose(self) -> None:
        # One untimed run each way first (tracing, compiling, warming caches).
        runs = {k: v[1:] for k, v in self.times.items()}
        if min(len(runs[True]), len(runs[False])) < AUTO_RUNS:
            return
        self.use_xla = statistics.median(runs[True]) < statistics.median(runs[False])
        self.decided = True

    def describe(self) -> str | None:
        """The note ``explain`` gives the graph (None when XLA is off)."""
        if self.mode == 'off':
            return None
        if self.reason is not None:
            return 'not XLA: %s' % self.reason
        if self.mode == 'on':
            return 'XLA'
        if not self.decided:
            return 'XLA or not: timing (%d runs so far)' % len(self.times[True] + self.times[False])
        medians = ['%.3g ms' % (1000 * statistics.median(self.times[k][1:])) for k in (True, False)]
        return ('auto chose %s (median %s compiled, %s not)'
                % ('XLA' if self.use_xla else 'no XLA', medians[0], medians[1]))


def _compile(concrete: typing.Any) -> typing.Callable:
    n_inputs = len(concrete.graph.inputs) - len(concrete.captured_inputs)

    def whole(*tensors: tf.Tensor) -> typing.Any:
        return concrete._call_flat(list(tensors[:n_inputs]), list(tensors[n_inputs:]))
    return tf.function(whole, jit_compile=True, autograph=False, reduce_retracing=True)


def _is_compile_error(error: BaseException) -> bool:
    text = str(error)
    return any(word in text for word in ('XLA', 'xla', 'compil', 'OpKernel'))
