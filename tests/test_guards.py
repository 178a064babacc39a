"""Guards: a graph runs only while everything it assumed still holds.

Each test changes something the graph depends on between calls (an argument's
shape, dtype or Python value, a global, a closure cell, an attribute, a list)
and checks janus returns what eager returns, with the expected counters.
"""
import logging

import tensorflow as tf

import janus
from conftest import assert_same, differential
from janus import guards


def t(*shape, seed=0, dtype=tf.float32):
    return tf.cast(tf.random.stateless_normal(shape, seed=[seed, 2]) * 4, dtype)


def test_shape_relaxation_costs_one_extra_graph(strict, caplog):
    def make():
        def f(x):
            return tf.reduce_sum(x, axis=1) * 2.0
        return f, None
    shapes = [32] * 5 + [17] + [32, 9, 1, 17]
    with caplog.at_level(logging.INFO, logger='janus'):
        jf = differential(make, [((t(n, 8, seed=i),), {}) for i, n in enumerate(shapes)])
    stats = janus.stats(jf)
    # Call 6 (17 rows) misses and is re-profiled imperatively; call 8 (9 rows)
    # misses again and builds the relaxed graph, which serves every later size.
    assert stats['graphs_built'] == 2 and stats['graph_calls'] == 6
    assert stats['imperative_calls'] == 1 and stats['cache_misses'] == 2
    assert 'x: float32(None, 8)' in janus.to_code(jf)
    assert 'SHAPE_MATCH failed for x: expected (32, 8), got (17, 8)' in caplog.text


def test_profiled_calls_with_varying_shapes_give_a_relaxed_first_graph(strict):
    def make():
        return (lambda x: x + 1.0), None
    jf = differential(make, [((t(n, 3, seed=n),), {}) for n in (4, 5, 6, 7, 8)])
    assert janus.stats(jf)['graphs_built'] == 1
    assert 'x: float32(None, 3)' in janus.to_code(jf)


def test_dtype_change_builds_a_second_graph(strict):
    def make():
        def f(x):
            return x * 3 + 1
        return f, None
    calls = [((t(3, seed=i),), {}) for i in range(4)]
    calls += [((t(3, seed=9, dtype=tf.int32),), {}), ((t(3, seed=8, dtype=tf.int32),), {})]
    calls += [((t(3, seed=7),), {})]
    with janus.config.patch(reprofile_calls=0):
        jf = differential(make, calls)
    assert janus.stats(jf)['graphs_built'] == 2 and janus.stats(jf)['graph_calls'] == 4


GAIN = 2.0


def scaled(x):
    return x * GAIN


@janus.config.patch(reprofile_calls=0)
def test_rebinding_a_global_is_seen(strict):
    global GAIN
    jf = janus.function(scaled)
    x = t(3)
    try:
        for _ in range(5):
            assert_same(scaled(x), jf(x))
        GAIN = 5.0
        assert_same(x * 5.0, jf(x))
        assert janus.stats(jf)['graphs_built'] == 2
    finally:
        GAIN = 2.0


def test_reassigned_closure_cell_is_seen(strict):
    bias = tf.constant(1.0)

    def f(x):
        return x + bias
    jf = janus.function(f)
    for _ in range(4):
        assert_same(f(t(2)), jf(t(2)))
    bias = tf.constant(100.0)  # noqa: F841 - rebinding the cell f reads
    assert_same(f(t(2)), jf(t(2)))
    assert float(jf(t(2))[0]) > 50


class Config:
    def __init__(self):
        self.training = True
        self.rate = 0.5
        self.layers = [tf.constant(1.0), tf.constant(2.0)]


def test_attribute_values_and_list_contents_are_guarded(strict):
    def make():
        cfg = Config()

        def f(x, c):
            y = x * c.rate if c.training else x
            for w in c.layers:
                y = y + w
            return y
        return (lambda x: f(x, cfg)), cfg
    # The lambda wrapper is converted too: cfg is a closure cell of it.
    eager_fn, eager_cfg = make()
    plain, cfg = make()
    jf = janus.function(plain)
    changes = [lambda c: None] * 4 + [lambda c: setattr(c, 'training', False),
                                      lambda c: setattr(c, 'rate', 0.25),
                                      lambda c: c.layers.append(tf.constant(10.0)),
                                      lambda c: c.layers.__setitem__(0, tf.constant(-3.0)),
                                      lambda c: None]
    with janus.config.patch(strict=True, reprofile_calls=0):
        for change in changes:
            change(eager_cfg)
            change(cfg)
            x = t(2)
            assert_same(eager_fn(x), jf(x))
    stats = janus.stats(jf)
    # training flips (graph 2: the bool relaxed, its `if` a tf.cond whose true side
    # reads rate); rate changes (graph 3, rate relaxed too); append (graph 4, a new
    # length); an item replaced by another tensor: the list's tensors are re-read
    # every run, graph 4 runs.
    assert stats['graph_calls'] == 6 and stats['graphs_built'] == 4


def test_python_list_argument_length_and_items(strict):
    def make():
        def f(xs, k):
            return [x * k for x in xs]
        return f, None
    calls = [(([t(2, seed=i), t(2)], 2), {}) for i in range(4)]
    calls += [(([t(2), t(2), t(2, seed=3)], 2), {}), (([t(2), 1.0], 2), {})]
    with janus.config.patch(reprofile_calls=0):
        jf = differential(make, calls)
    assert janus.stats(jf)['graphs_built'] == 3


def test_a_miss_reprofiles_once_then_builds(strict):
    def make():
        return (lambda x, k: x * k), None
    ks = [1, 1, 1, 1, 2, 2, 2, 3, 1, 3]
    with janus.config.patch(relax_scalars=False):   # numbers specialized: a graph per k
        jf = differential(make, [((t(2), k), {}) for k in ks])
    stats = janus.stats(jf)
    # k=2: one re-profiled call, then a graph; k=3 likewise; k=1 still cached.
    assert stats['graphs_built'] == 3 and stats['imperative_calls'] == 2
    assert stats['graph_calls'] == 5 and stats['cache_misses'] == 4


def test_python_reads_of_relaxed_dimensions_get_exact_graphs(strict):
    def make():
        def f(x):
            if x.shape[0] == 2:           # Python reads the batch size: never None here
                return x * 2.0, x.shape
            return x - 1.0, x.shape[1]
        return f, None
    sizes = [2, 3, 4, 2, 3, 5, 2]
    jf = differential(make, [((t(n, 3, seed=n),), {}) for n in sizes])
    assert all('(None' not in line for e in jf.cache.entries() for line in e.describe_guards())
    assert 'relaxed shapes failed' in janus.explain(jf)


def test_a_guard_miss_on_an_int_past_python_s_text_limit_is_described():
    """Fuzz finding 10 (tests/fuzz_findings_breaks/): ``repr`` of an int past 4,300 digits
    raises; describing the miss of a guard on one was an internal error."""
    assert guards.describe_value(10 ** 5000) == 'an int of %d bits' % (10 ** 5000).bit_length()

    class Loud:
        def __repr__(self):
            raise RuntimeError('no text')
    assert guards.describe_value(Loud()) == 'a Loud'
