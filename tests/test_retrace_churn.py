"""No retrace churn: call shapes that alternate or cycle build their graphs once.

Differential tests (every call's result, output and state equal eager's) that
count the graphs built once the program's inputs have all been seen: two
alternating input shapes, two alternating values of a Python number, and a
split function whose segment is specialized per value of a number from
``.numpy()`` cycling through more values than the cache holds (the graphs that
serve must not evict each other: ``cache.py`` grows the cache instead).  A number
used in a shape (``tf.reshape(h, (rows, -1))``) is a graph input too: one graph
serves every value, and a later read of the dimension it decides pins it.
"""
import numpy as np
import tensorflow as tf

import janus
from conftest import differential


def _graphs(jf):
    """Graphs the function and its segments built so far."""
    parts = [p for split in jf.state.splits.values() for p in split.slots
             if isinstance(p, janus.api.JanusFunction)]
    return janus.stats(jf)['graphs_built'] + sum(janus.stats(p)['graphs_built'] for p in parts)


class Encoder:
    def __init__(self):
        self.w = tf.Variable(tf.reshape(tf.range(64, dtype=tf.float32), (8, 8)) / 64.0)
        self.calls = 0

    def encode(self, x, heads):
        self.calls += 1
        h = tf.reshape(tf.matmul(x, self.w), (heads, -1))
        return tf.reduce_sum(tf.tanh(h) * 2.0, axis=1)


def _encoder():
    encoder = Encoder()
    return encoder.encode, encoder


def _built_after_warmup(jf, calls, warmup):
    built = []
    for args in calls:
        jf(*args)
        built.append(_graphs(jf))
    return built[-1] - built[warmup - 1]


def test_two_alternating_shapes_build_at_most_two_graphs():
    calls = [lambda i=i: ((tf.ones((4 if i % 2 else 6, 8)), 2), {}) for i in range(24)]
    jf = differential(_encoder, calls, lambda e: e.calls)
    assert _graphs(jf) <= 2
    assert _built_after_warmup(jf, [(tf.ones((4 if i % 2 else 6, 8)), 2) for i in range(20)],
                               1) == 0


def test_two_alternating_numbers_build_at_most_two_graphs():
    calls = [lambda i=i: ((tf.ones((6, 8)), 2 if i % 2 else 3), {}) for i in range(24)]
    jf = differential(_encoder, calls, lambda e: e.calls)
    assert _graphs(jf) <= 2
    assert _built_after_warmup(jf, [(tf.ones((6, 8)), 2 if i % 2 else 3) for i in range(20)],
                               1) == 0


class Heads:
    """A size read with ``.numpy()`` (a graph break) shapes the rest of the step."""

    def __init__(self):
        self.w = tf.Variable(tf.ones((8, 8)) / 8.0)
        self.sizes = []

    def step(self, x):
        rows = int(x.numpy().shape[0])
        self.sizes.append(rows)
        h = tf.reshape(tf.matmul(x, self.w), (rows, -1))
        return tf.reduce_sum(tf.tanh(h) * 2.0 + 1.0, axis=1)


def test_a_cycle_of_sizes_longer_than_the_cache_stops_building():
    rng = np.random.RandomState(0)
    sizes = [int(s) for s in rng.randint(3, 9, size=60)]   # six sizes, cache of four

    def make():
        heads = Heads()
        return heads.step, heads
    calls = [lambda s=s: ((tf.ones((s, 8)),), {}) for s in sizes]
    with janus.config.patch(cache_size_limit=4):
        jf = differential(make, calls, lambda h: list(h.sizes))
        built = _built_after_warmup(jf, [(tf.ones((s, 8)),) for s in sizes * 2], 1)
    assert built == 0


def test_a_size_from_numpy_used_as_a_shape_is_one_graph_for_every_size():
    rng = np.random.RandomState(1)
    sizes = [int(s) for s in rng.randint(3, 12, size=40)]   # nine sizes

    def make():
        heads = Heads()
        return heads.step, heads
    calls = [lambda s=s: ((tf.ones((s, 8)),), {}) for s in sizes]
    jf = differential(make, calls, lambda h: list(h.sizes))
    assert _graphs(jf) <= 2, janus.explain(jf)


class Rows:
    """A number shapes a tensor whose dimension the code then reads as a Python int."""

    def __init__(self):
        self.w = tf.Variable(tf.ones((4, 4)) / 4.0)

    def step(self, x, rows):
        h = tf.reshape(tf.matmul(x, self.w), (rows, -1))
        if h.shape[0] > 2:
            h = h * 2.0
        return tf.zeros((rows, 3)) + tf.reduce_sum(h), tf.tile(h[:1], (rows, 1))


def test_numbers_in_shapes_alternating_and_their_dimensions_read():
    def make():
        rows = Rows()
        return rows.step, rows
    calls = [lambda r=r: ((tf.ones((6, 4)), r), {}) for r in (2, 3, 6, 2, 3, 6, 12, 2)]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] > 0, janus.explain(jf)


def test_a_number_in_a_shape_that_does_not_fit_raises_as_eagerly():
    def make():
        rows = Rows()
        return rows.step, rows
    calls = [lambda r=r: ((tf.ones((6, 4)), r), {}) for r in (2, 3, 2, 3, 5, 2, 4)]
    differential(make, calls)


class Shapes:
    def __init__(self):
        self.calls = 0

    def make(self, x, n):
        self.calls += 1
        return tf.zeros((n, 2)) + tf.reduce_sum(x)


def test_shapes_eager_rejects_raise_as_eagerly():
    """A float, a bool or a dimension of 2**31 or more in a shape: eager raises, a
    graph would build it (a float or bool as its int, a size past 2**63 wrapped to
    zero); janus raises eager's error."""
    def make():
        shapes = Shapes()
        return shapes.make, shapes
    values = [2, 3, 4, 2.0, 3, True, 5, 2 ** 62, 2, -2, 3]
    calls = [lambda n=n: ((tf.ones([2]), n), {}) for n in values]
    differential(make, calls, lambda s: s.calls)
