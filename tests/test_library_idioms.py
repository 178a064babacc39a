"""Idioms of real TF2 code janus used to refuse: range objects passed in, Python
bool flags that flip, sparse and ragged tensors made in the call and returned, Keras
weights sliced in a layer, cached properties and absl flags read as their values.

Differential tests on fresh objects (``conftest.differential``), each checking that
the idiom now runs graphs (the counters), not only that it is correct.
"""
import functools

import tensorflow as tf

import janus
from tests.conftest import differential


def _call(*args, **kwargs):
    return lambda: (args, kwargs)


def _stats(jf):
    return janus.stats(jf)


def test_a_range_passed_in_is_guarded_by_start_stop_and_step():
    def make():
        def f(steps, x):
            for i in steps:
                x = x * 0.5 + i
            return x
        return f, None
    x = tf.constant([1.0, 2.0])
    calls = [_call(range(3), x)] * 4 + [_call(range(1, 4), x), _call(range(0, 6, 2), x),
                                        _call(range(3), x), _call(range(5, 5), x),
                                        _call(range(0), x)]
    jf = differential(make, calls)
    assert _stats(jf)['graph_calls'] >= 2, janus.explain(jf)


def test_a_range_held_by_the_object_and_replaced():
    def make():
        class Schedule:
            def __init__(self):
                self.steps = range(2, 8, 2)

            def apply(self, x, new_steps=None):
                if new_steps is not None:
                    self.steps = new_steps
                for k in self.steps:
                    x = x + k
                return x
        s = Schedule()
        return s.apply, s
    x = tf.constant(1.0)
    calls = [_call(x)] * 4 + [_call(x, range(3)), _call(x), _call(x, range(2, 8, 2)), _call(x)]
    jf = differential(make, calls, state=lambda s: s.steps)
    assert _stats(jf)['graph_calls'] >= 2, janus.explain(jf)


def test_a_bool_flag_that_flips_relaxes_to_one_graph():
    """An LSTM-style step whose ``reset`` flag is true every 8th batch: after its
    second value the flag is a graph input and the ``if`` real control flow."""
    def make():
        class Stateful:
            def __init__(self):
                self.state = tf.Variable(tf.zeros([3]))
                self.batches = 0

            def step(self, x, reset=False):
                if reset:
                    self.state.assign(tf.zeros([3]))
                self.state.assign(self.state * 0.5 + x)
                self.batches += 1
                return tf.reduce_sum(self.state)
        m = Stateful()
        return m.step, m
    calls = [_call(tf.fill([3], float(i)), reset=(i % 8 == 0)) for i in range(24)]
    jf = differential(make, calls, state=lambda m: (m.state.numpy(), m.batches))
    stats = _stats(jf)
    assert stats['graphs_built'] <= 2 and stats['graph_calls'] == 21, janus.explain(jf)
    assert 'dynamic bool' in janus.explain(jf)


def test_a_relaxed_bool_keeps_python_meaning_where_the_value_is_needed():
    """Arithmetic on the flag needs its value: specialized again, never wrong."""
    def make():
        def f(x, flag):
            scale = 2 + flag   # int arithmetic on a bool
            if flag:
                x = -x
            return x * scale, flag
        return f, None
    calls = [_call(tf.constant(1.5), i % 3 == 0) for i in range(10)]
    differential(make, calls)


def test_sparse_and_ragged_tensors_made_in_the_call_are_returned():
    def make():
        def f(x, lengths):
            sparse = tf.sparse.from_dense(x * 2.0)
            ragged = tf.RaggedTensor.from_row_lengths(tf.reshape(x, [-1]), lengths)
            return sparse, ragged, {'same': ragged}
        return f, None
    calls = [_call(tf.constant([[0.0, 1.0], [2.0, 0.0]]), tf.constant([1, 3], tf.int64))] * 5
    calls.append(_call(tf.constant([[0.0, 0.0], [2.0, 5.0]]), tf.constant([2, 0, 2], tf.int64)))
    jf = differential(make, calls)
    assert _stats(jf)['graph_calls'] >= 2, janus.explain(jf)
    sparse, ragged, holder = jf(tf.constant([[1.0, 0.0], [0.0, 3.0]]),
                                tf.constant([2, 2], tf.int64))
    assert isinstance(sparse, tf.SparseTensor) and holder['same'] is ragged
    assert ragged.to_list() == [[1.0, 0.0], [0.0, 3.0]]


def test_range_of_a_tensor_is_a_graph_loop_counting_python_ints():
    """``for i in range(n)`` with a tensor ``n``: one tf.while_loop for every n, ``i`` a
    Python int as eagerly (arithmetic with floats, a Python counter, ``i`` after the
    loop); an empty range where the loop's first iteration was assumed re-runs the
    call imperatively (eager's UnboundLocalError)."""
    def make():
        def f(n, x):
            total = 0
            for i in range(1, n, 2):
                total += i
                x = x * 0.5 + i
            return x, total, i
        return f, None
    calls = [_call(tf.constant(n), tf.constant([1.0, 2.0])) for n in (7, 7, 7, 9, 4, 2, 1, 12)]
    jf = differential(make, calls)
    stats = _stats(jf)
    assert stats['graphs_built'] == 1 and stats['graph_calls'] >= 4, janus.explain(jf)


def test_len_of_a_tensor_whose_first_dimension_the_graph_knows():
    """``len(x)`` of a tensor argument (its shape guarded) or of one the call made is
    the Python int eager gives; a scalar raises eager's TypeError."""
    def make():
        def f(x):
            n = len(x)
            return list(range(n)), len(tf.concat([x, x], 0)) * 2, n
        return f, None
    calls = [_call(tf.constant([1, 2]))] * 4 + [_call(tf.constant([1, 2, 3])),
                                                _call(tf.zeros([0])), _call(tf.zeros([2, 3])),
                                                _call(tf.constant(1))]
    jf = differential(make, calls)
    assert _stats(jf)['graph_calls'] >= 1, janus.explain(jf)


class PositionalEmbedding(tf.keras.layers.Layer):
    """An attention-style layer slicing its own weight (``self.pos[:n]``) by the
    sequence length, and writing a slice of a memory weight (``self.mem[1:3].assign``)."""

    def build(self, shape):
        self.pos = self.add_weight(name='pos', shape=(16, shape[-1]), initializer='glorot_uniform')
        self.mem = self.add_weight(name='mem', shape=(4, shape[-1]), initializer='zeros',
                                   trainable=False)

    def call(self, x):
        n = tf.shape(x)[1]
        self.mem[1:3].assign(x[0, :2])
        return x + self.pos[:n] + self.mem[1]


def test_keras_variable_subscripts_read_and_assign_in_the_graph():
    def make():
        tf.keras.utils.set_random_seed(3)
        layer = PositionalEmbedding()
        layer(tf.zeros([1, 5, 3]))
        return (lambda x: layer(x)), layer

    def state(layer):
        return layer.pos.numpy(), layer.mem.numpy()
    calls = [lambda i=i: ((tf.random.stateless_normal([2, 5 + i % 2, 3], seed=[i, 1]),), {})
             for i in range(8)]
    calls.append(lambda: ((tf.zeros([2, 20, 3]),), {}))   # longer than the weight: eager's error
    jf = differential(make, calls, state)
    assert _stats(jf)['graph_calls'] >= 3, janus.explain(jf)


class Settings:
    """A config object with a lazily computed value (``functools.cached_property``)."""

    def __init__(self, base):
        self.base = base
        self.computed = 0

    @functools.cached_property
    def factor(self):
        self.computed += 1
        return self.base * 3.0


def test_a_cached_property_computed_already_reads_as_its_value():
    """Read in a graph from the instance's dict; cleared from outside (``del``), the
    next read runs the getter again, as eagerly, and never at guard time."""
    def make():
        cfg = Settings(2.0)

        def f(x):
            return x * cfg.factor + cfg.base
        return f, cfg

    def state(cfg):
        return cfg.computed, cfg.__dict__.get('factor')

    def clear(cfg):
        cfg.base = 5.0
        cfg.__dict__.pop('factor', None)

    eager_fn, eager_cfg = make()
    plain_fn, janus_cfg = make()
    jf = janus.function(plain_fn)
    for i in range(8):
        if i == 5:
            clear(eager_cfg)
            clear(janus_cfg)
            assert state(eager_cfg) == state(janus_cfg)
        assert float(eager_fn(tf.constant(1.0))) == float(jf(tf.constant(1.0)))
        assert state(eager_cfg) == state(janus_cfg), i
    assert _stats(jf)['graph_calls'] >= 3, janus.explain(jf)


def test_absl_flags_read_as_their_values():
    from absl import flags
    values = flags.FlagValues()
    flags.DEFINE_float('scale', 0.5, 'a scale', flag_values=values)
    flags.DEFINE_bool('double', True, 'doubles', flag_values=values)
    values(['prog'])

    def make():
        def f(x):
            y = x * values.scale
            if values.double:
                y = y * 2.0
            return y
        return f, None
    calls = [_call(tf.constant(1.5))] * 4
    jf = differential(make, calls)
    assert _stats(jf)['graph_calls'] >= 1, janus.explain(jf)
    values.scale = 3.0   # set between calls: the guard sees it
    values.double = False
    jf2 = differential(make, calls)
    assert float(jf(tf.constant(1.0))) == 3.0
    del jf2


def test_numpy_of_shape_arithmetic_is_read_at_trace_time():
    """``int(tf.shape(h)[1].numpy())`` sizing a reshape, ``tf.shape(x).numpy()`` (a new
    array each call: written into, nothing changes), alternating shapes (a graph per
    shape), and a value-dependent ``.numpy()``, which still breaks."""
    def make():
        def f(x):
            h = tf.nn.relu(x)
            grid = int(tf.shape(h)[1].numpy())
            dims = tf.shape(x).numpy()
            dims[0] = -1
            half = (tf.shape(h)[0] // 2).numpy()
            cells = tf.reshape(h, (-1, grid * 2))
            active = int(tf.reduce_sum(tf.cast(h > 0.5, tf.int32)).numpy())
            return cells, half, type(half).__name__, dims, grid, active
        return f, None
    calls = [lambda i=i: ((tf.random.stateless_uniform([4, 6 if i % 3 else 8], seed=[i, 0]),), {})
             for i in range(12)]
    jf = differential(make, calls)
    assert _stats(jf)['graph_part_calls'] + _stats(jf)['graph_calls'] >= 4, janus.explain(jf)


def test_numpy_of_a_shape_alone_keeps_the_step_one_graph():
    def make():
        def f(x):
            n = int(tf.shape(x)[0].numpy())
            return tf.reshape(x, (n, -1)) * 2.0
        return f, None
    calls = [_call(tf.ones([3, 2, 2]))] * 6
    jf = differential(make, calls)
    assert _stats(jf)['graph_calls'] >= 3 and _stats(jf)['split_calls'] == 0, janus.explain(jf)


def test_the_type_of_a_static_numpy_value():
    def make():
        log = []

        def f(x):
            n = tf.shape(x)[0].numpy()
            log.append(str(type(n)))
            return x * 2.0
        return f, log
    jf = differential(make, [_call(tf.ones([2, 3]))] * 6, list)
    assert _stats(jf)['graph_calls'] >= 3, janus.explain(jf)
