"""What janus cannot convert runs imperatively, correctly, and says why.

Strict mode turns that into an error; a function that failed to convert is
not converted again on every call; user exceptions look the same on every path.
"""
import pytest
import tensorflow as tf

import janus
from conftest import differential
from janus.graphgen import generator


def t(*shape, seed=0):
    return tf.random.stateless_normal(shape, seed=[seed, 3])


class LoggedBox:
    """Custom __setattr__: janus does not shadow writes through it."""

    def __setattr__(self, name, value):
        object.__setattr__(self, 'log', getattr(self, 'log', []) + [name])
        object.__setattr__(self, name, value)


def _attr_write():
    box = LoggedBox()
    box.value = None

    def f(x):
        box.value = x * 2  # line the error names
        return x + 1
    return f, box


def _try_block():
    def f(x, activation='swishy'):
        try:   # Keras raises ValueError for an unknown name: janus cannot vouch for it
            return tf.keras.activations.get(activation)(x)
        except ValueError:
            return -x
    return f, None


def _foreign_call():
    import time

    def f(x):
        started = time.perf_counter()
        return x * 2, started > 0
    return f, None


@pytest.mark.parametrize('make, reason', [
    (_attr_write, 'custom __setattr__'),
    (_try_block, 'try statement'),
    (_foreign_call, "calls to 'perf_counter'"),
])
def test_unconvertible_runs_imperatively_with_reason_and_line(make, reason, capsys):
    jf = differential(make, [((t(3, seed=i),), {}) for i in range(6)],
                      state=lambda box: getattr(box, 'value', None))
    stats = janus.stats(jf)   # the refused statement runs in Python (a graph break)
    assert stats['graphs_built'] == 0 and stats['split_calls'] == 3
    report = janus.explain(jf)
    assert reason in report
    assert 'test_fallback.py:' in report  # names the user's line


@pytest.mark.usefixtures('without_graph_breaks')
def test_strict_mode_raises_naming_the_line():
    fn, _ = _attr_write()  # refused while tracing
    jf = janus.function(fn, profile_calls=1)
    with janus.config.patch(strict=True):
        jf(t(2))
        with pytest.raises(janus.StrictModeError, match=r'box.value = x \* 2'):
            jf(t(2))


def test_failed_conversion_is_not_retried(monkeypatch):
    calls = []
    real = generator._convert
    monkeypatch.setattr(generator, '_convert', lambda fn: calls.append(fn) or real(fn))
    fn, _ = _try_block()   # converted once; its try is refused when traced
    jf = janus.function(fn)
    for i in range(8):
        jf(t(2, seed=i))
    assert [c for c in calls if c is fn] == [fn]   # then its segments, once each
    assert janus.stats(jf)['split_calls'] == 5


def test_trace_failure_is_remembered_per_signature():
    def make():
        def f(x):
            # float(tensor) as a constant of a given shape: not modelled, the trace fails
            return x * 2 if x.shape[0] != 3 else tf.constant(float(x[0]), shape=[1])
        return f, None
    calls = [((t(3, seed=i),), {}) for i in range(5)] + [((t(4, seed=i),), {}) for i in range(4)]
    jf = differential(make, calls)
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1 and stats['imperative_calls'] == 2
    assert stats['graph_calls'] == 4


def test_a_constant_of_a_number_taken_from_a_tensor_converts():
    """``tf.constant(float(t))``: the number is the graph's, converted as eager's
    ``tf.constant`` converts a Python float (and for a dtype asked for)."""
    def make():
        def f(x):
            return tf.constant(float(x[0])) + tf.constant(int(x[1] * 4), tf.float32)
        return f, None
    calls = [((t(3, seed=i),), {}) for i in range(6)]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] == 3


def _raiser():
    def f(x, limit):
        if limit < 0:
            raise ValueError('limit must be >= 0, got %d' % limit)
        return tf.reshape(x, [limit, -1])
    return f, None


def test_user_exceptions_have_the_same_type_and_message_on_every_path(strict):
    calls = [((t(6, seed=i), 2), {}) for i in range(5)]
    calls += [((t(6), -1), {})]          # raised while tracing a new graph
    calls += [((t(6), 4), {})]           # TF error inside the graph: reshape 6 into 4 rows
    calls += [((t(6), 3), {})]
    with janus.config.patch(strict=False):
        differential(_raiser, calls)


def test_wrong_arity_and_keywords_raise_what_python_raises():
    def make():
        def f(x, y):
            return x + y
        return f, None
    calls = [((t(2), t(2)), {})] * 4 + [((t(2),), {}), ((t(2), t(2), t(2)), {}),
                                        ((t(2),), {'z': 1}), ((), {'x': t(2), 'y': t(2)})]
    differential(make, calls)


def test_numpy_arguments_run_imperatively_with_reason():
    import numpy as np

    def make():
        return (lambda x: x * 2), None
    jf = differential(make, [((np.ones(3),), {})] * 5)
    assert janus.stats(jf)['graphs_built'] == 0
    assert 'NumPy' in janus.explain(jf)


def test_a_trace_past_the_time_limit_runs_the_function_imperatively():
    """A trace running longer than ``config.trace_seconds_limit`` (nested tensor loops
    and branches over many iterations can take minutes) is abandoned: the function runs
    imperatively with eager's results, explain says why, and no call traces again."""
    def make():
        def f(x, n):
            acc = x
            for i in range(n):
                if tf.reduce_sum(acc) > float(i):
                    acc = acc * 0.5
                else:
                    acc = acc + 1.0
            return acc
        return f, None
    with janus.config.patch(trace_seconds_limit=1e-6):
        jf = differential(make, [((tf.constant([1.0, 2.0 + i]), 3 + i % 2), {})
                                 for i in range(8)])
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 0 and stats['imperative_calls'] == 5, stats
    text = janus.explain(jf)
    assert 'trace_seconds_limit' in text and 'graph break' not in text, text
