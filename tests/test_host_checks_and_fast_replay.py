"""Bug hunt on host checks (graphgen/hostcheck.py), compiled guards and fast replay
(commit b0163b9): differential programs compared bit for bit with eager, every call
on fresh objects both sides.  The two bugs it found are fixed (.bughunt/repro_host_*.py)."""
import math
import struct

import numpy as np
import pytest
import tensorflow as tf

import janus


def _canon(v):
    if isinstance(v, tf.Variable):
        v = tf.convert_to_tensor(v)
    if isinstance(v, tf.Tensor):
        return ('T', v.dtype.name, tuple(v.shape), v.numpy().tobytes())
    if isinstance(v, float):
        return ('float', 'nan' if math.isnan(v) else struct.pack('<d', v))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_canon(x) for x in v))
    if isinstance(v, dict):
        return ('dict', tuple((k, _canon(x)) for k, x in v.items()))
    return (type(v).__name__, v if isinstance(v, (bool, int, str, type(None))) else repr(v))


def _outcome(fn, args):
    try:
        return ('ok', _canon(fn(*args)))
    except Exception as e:  # noqa: BLE001 - compared with eager's
        return ('raised', type(e).__name__, str(e))


def bit_differential(make, steps, state=lambda s: None):
    """steps: list of mutate-or-None; each step mutates both sides' state, then calls
    fn(tf.constant([1.0, 2.0])).  Returns the janus function."""
    e_fn, e_s = make()
    plain, j_s = make()
    j_fn = janus.function(plain)
    for number, mutate in enumerate(steps):
        sides = []
        for fn, s in ((e_fn, e_s), (j_fn, j_s)):
            if mutate is not None:
                mutate(s)
            sides.append((_outcome(fn, (tf.constant([1.0, 2.0]),)), _canon(state(s))))
        assert sides[0] == sides[1], 'call %d: eager %r, janus %r' % (number, *sides)
    return j_fn


class S:
    pass


def _set(name, value):
    return lambda s: setattr(s, name, value)


# -- open bugs ----------------------------------------------------------------------

def test_float_chain_on_a_relaxed_number_is_not_reassociated():
    """Found by review: with its checks moved to the host, a float chain on a relaxed
    number had one consumer and grappler reassociated it ((a * 3.0) * 7.0 -> a * 21.0);
    the host now feeds the float results the graph uses."""
    def make():
        s = S()
        s.a = 0.6

        def step(x):
            s.y = s.a * 3.0 * 7.0
            s.z = (s.a + 0.1) + 0.2
            return x
        return step, s
    values = [0.6, 0.7, 0.1, 0.3, 1.1, 2.9, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85]
    bit_differential(make, [_set('a', v) for v in values], lambda s: (s.a, s.y, s.z))


def _container_program(initial, body):
    def make():
        s = S()
        s.c = initial

        def step(x):
            return x * 2.0, body(s)
        return step, s
    return make


def _keys(s):
    out = []
    for k, v in s.c.items():
        out.append(k)
    return out


@pytest.mark.parametrize('initial,changed,body', [
    ({'a': 1.0, 'b': 2.0}, {'b': 2.0, 'a': 1.0}, _keys),
    ({'a': 1.0, 'b': 2.0}, {'a': 1, 'b': 2}, lambda s: list(s.c.values())),
    ([0.0, 1.0], [-0.0, 1.0], lambda s: [math.copysign(1.0, v) for v in s.c]),
], ids=['dict-order', 'dict-value-types', 'signed-zero'])
def test_equals_guard_misses_python_visible_changes(initial, changed, body):
    """Found by review: EQUALS_MATCH compared with ==, blind to a dict's key order,
    value types and signed zeros (a stale graph ran)."""
    bit_differential(_container_program(initial, body),
                     [None] * 4 + [_set('c', changed), None])


# -- passing: relaxed numbers through host checks and Python calls ------------------

def test_schedule_with_pow_cos_round_is_bit_exact():
    def make():
        s = S()
        s.step, s.base, s.decay = 0, 0.002, 0.5
        s.w = tf.Variable([1.0, 2.0])

        def step(x):
            s.step += 1
            lr = s.base * s.decay ** (s.step / 100)
            c = 0.5 * (1 + math.cos(math.pi * s.step / 7))
            s.w.assign_add(x * lr * c)
            return lr, c, round(lr * 1000, 2)
        return step, s
    jf = bit_differential(make, [None] * 16, lambda s: (s.step, s.w))
    assert janus.stats(jf)['graph_calls'] >= 10


def test_temperature_decaying_into_the_subnormal_range():
    def make():
        s = S()
        s.temp = 1e-300

        def step(x):
            s.temp = s.temp * 0.1
            return x, s.temp / 3.0, s.temp - 1e-305
        return step, s
    bit_differential(make, [None] * 14, lambda s: s.temp)


def test_divisor_set_from_outside_to_zero_negative_bool_float():
    def make():
        s = S()
        s.n, s.k = 100, 7

        def step(x):
            s.n += 1
            return x + 1.0, s.n // s.k, s.n % s.k, divmod(s.n, s.k), s.n / s.k
        return step, s
    steps = [None] * 4 + [_set('k', v) for v in (0, -3, -1, 3, True, 2.5, -0.0, 0.0, 7)]
    bit_differential(make, steps, lambda s: (s.n, s.k))


def test_counter_crossing_two_to_the_62_and_type_changes():
    def make():
        s = S()
        s.n = 3

        def step(x):
            s.n = s.n + 1
            return x * 2.0, s.n * 2, s.n / 2
        return step, s
    steps = [None] * 4 + [_set('n', v) for v in (
        True, 2.5, False, math.nan, math.inf, -0.0, 5, 2 ** 62 - 2, -2 ** 62 + 1, 1e-310, 6)]
    bit_differential(make, steps, lambda s: s.n)


# -- passing: compiled guards see every change ----------------------------------------

def test_compiled_guards_attribute_type_and_tensor_changes():
    def make():
        s = S()
        s.k, s.b = 2, tf.constant([1.0, 2.0])

        def step(x):
            return x * s.k + tf.cast(s.b, tf.float32), s.k
        return step, s
    steps = [None] * 3 + [_set('k', 2.0), None, _set('k', True), None,
                          _set('b', tf.constant([1.0, 2.0], tf.float64)), None,
                          _set('b', tf.constant(3.0)), None, _set('k', np.float32(2.0)), None]
    bit_differential(make, steps, lambda s: s.k)


class _Model:
    def __init__(self):
        self.scale = 2.0

    def act(self, x):
        return x * self.scale


def test_compiled_guards_bound_method_replaced_and_deleted():
    def make():
        m = _Model()

        def step(x):
            return m.act(x)
        return step, m
    steps = [None] * 3 + [lambda m: setattr(m, 'act', lambda x: x + 100.0), None,
                          lambda m: delattr(m, 'act'), None]
    bit_differential(make, steps)
