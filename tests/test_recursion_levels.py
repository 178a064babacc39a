"""A recursive function over a structure run level by level (every node of a depth
at once, ``recursion_levels.py``), against eager on every call: a deeper structure
than the graph's levels, a node no call reaches that fails, a class no call
reaches, state changed between two recursions in one call, and the cap beyond
which each node is a call of its own.
"""
import numpy as np
import pytest
import tensorflow as tf

import janus
from janus import config


class N:
    def __init__(self, value=None, left=None, right=None):
        self.value, self.left, self.right = value, left, right


def chain(depth, value=1):
    """A left spine ``depth`` nodes deep, each right child a leaf."""
    node = N(value=value)
    for i in range(depth - 1):
        node = N(left=node, right=N(value=(i % 4) + 1))
    return node


def balanced(rng, n):
    if n == 1:
        return N(value=int(rng.integers(0, 5)))
    k = int(rng.integers(1, n))
    return N(left=balanced(rng, k), right=balanced(rng, n - k))


class Model:
    def __init__(self):
        self.embedding = tf.Variable(tf.reshape(tf.range(20.0), [5, 4]) / 10)
        self.w = tf.Variable(tf.random.stateless_normal([8, 4], seed=[5, 6]))

    def encode(self, node):
        if node.left is None:
            return tf.nn.embedding_lookup(self.embedding, [node.value])
        return tf.tanh(tf.matmul(tf.concat([self.encode(node.left),
                                            self.encode(node.right)], 1), self.w))

    def roots(self, trees):
        out = []
        for tree in trees:
            out.append(self.encode(tree))
        return tf.concat(out, 0)


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def _text(fn):
    return ' '.join(janus.explain(fn).split())


def test_a_structure_deeper_than_the_graphs_levels_gets_a_graph_with_more():
    model = Model()
    fn = janus.function(model.roots)
    rng = np.random.default_rng(0)
    with config.patch(strict=True):
        for _ in range(5):   # at most 3 deep: the graph computes 5 levels
            trees = [balanced(rng, int(rng.integers(1, 4))) for _ in range(2)]
            _close(fn(trees), model.roots(trees))
        assert 'level by level' in _text(fn)
        for depth in (9, 4, 9):   # 9 deep: the guard misses; a graph with more levels
            trees = [chain(depth), balanced(rng, 3)]
            _close(fn(trees), model.roots(trees))
    stats = janus.stats(fn)
    assert stats['graphs_built'] == 2 and stats['fallbacks'] == 0
    assert stats['imperative_calls'] == 0   # the deeper call's graph is built at once
    assert 'a structure 9 nodes deep (the graph computes' in _text(fn)


def test_beyond_the_level_cap_each_node_is_a_call():
    model = Model()
    fn = janus.function(model.roots)
    with config.patch(strict=True, recursion_max_levels=4):
        for depth in (5, 7, 6, 7):
            trees = [chain(depth), chain(2)]
            _close(fn(trees), model.roots(trees))
    text = _text(fn)
    assert 'Model.encode(node) as janus_rec_encode' in text
    assert 'Model.encode(node) level by level' not in text
    assert 'not level by level: structures up to' in text
    assert janus.stats(fn)['graph_calls'] >= 1


def test_a_node_no_call_reaches_is_not_computed():
    """Only nodes a recursive call may reach are computed (the roots, and what the
    columns the calls descend through reach): here the right children, whose value
    is only read, are not.  An out-of-range id there would fail the graph's lookup,
    and a zero one would give the gradient 0 * inf = NaN through log."""
    emb = tf.Variable(tf.constant([[0.0, 0.0]] + [[1.0 + i, 2.0] for i in range(4)]))

    def spine(node):
        if node.left is None:
            return tf.reduce_sum(tf.math.log(tf.nn.embedding_lookup(emb, [node.value])))
        return spine(node.left) + tf.cast(node.right.value, tf.float32)

    def step(trees):
        with tf.GradientTape() as tape:
            out = []
            for t in trees:
                out.append(spine(t))
            loss = tf.add_n(out)
        return loss, tf.convert_to_tensor(tape.gradient(loss, emb))
    fn = janus.function(step)

    def tree(depth, right):
        node = N(value=1 + depth % 2)
        for _ in range(depth):
            node = N(left=node, right=N(value=right))   # never recursed into
        return node
    with config.patch(strict=True):
        for i in range(8):
            trees = [tree(1 + i % 3, 9 if i == 5 else 0), tree(2, 0)]
            got, want = fn(trees), step(trees)
            _close(got[0], want[0])
            _close(got[1], want[1])
    stats = janus.stats(fn)
    assert stats['imperative_calls'] == 0 and stats['graph_calls'] == 5
    assert 'spine(node) level by level' in _text(fn)


def test_results_read_again_under_a_new_tape_are_recorded_on_it():
    model, twin = Model(), Model()

    def grads(m, trees):
        first = m.roots(trees)              # no tape records this one
        with tf.GradientTape() as tape:
            second = m.roots(trees)
        with tf.GradientTape() as other:
            third = m.roots(trees)
        return (first, tape.gradient(second, m.w),
                tf.convert_to_tensor(other.gradient(third, m.embedding)))
    fn = janus.function(lambda trees: grads(model, trees))
    rng = np.random.default_rng(6)
    with config.patch(strict=True):
        for _ in range(6):
            trees = [balanced(rng, int(rng.integers(1, 6))) for _ in range(2)]
            got, want = fn(trees), grads(twin, trees)
            _close(got[0], want[0])
            _close(got[1], want[1])
            _close(got[2], want[2])
    assert janus.stats(fn)['graph_calls'] >= 3


class Meta:
    def __init__(self, scale):
        self.scale = scale


class MetaNode(N):
    def __init__(self, value=None, left=None, right=None, meta=None):
        super().__init__(value, left, right)
        self.meta = meta


def test_a_class_only_read_is_not_computed():
    """``node.meta`` is read, never recursed into: the Meta class's body would fail
    (it has no .left), so its nodes are not computed."""
    def weigh(node):
        if node.left is None:
            return float(node.value) * node.meta.scale
        return weigh(node.left) + weigh(node.right)

    def total(tree, x):
        return x * weigh(tree)
    fn = janus.function(total)
    rng = np.random.default_rng(3)
    with config.patch(strict=True):
        for _ in range(6):
            n = int(rng.integers(1, 6))
            leaves = [MetaNode(value=int(v), meta=Meta(float(s)))
                      for v, s in zip(rng.integers(0, 9, n), rng.integers(1, 4, n))]
            while len(leaves) > 1:
                leaves = [MetaNode(left=leaves[0], right=leaves[1])] + leaves[2:]
            x = tf.constant(2.0, tf.float64)
            assert float(fn(leaves[0], x)) == float(total(leaves[0], x))
    assert janus.stats(fn)['graph_calls'] >= 3
    assert 'weigh(node) level by level' in _text(fn)


def test_a_variable_changed_between_two_recursions_in_one_call():
    model = Model()

    def twice(trees):
        first = model.roots(trees)
        model.w.assign_add(tf.ones_like(model.w) * 0.1)
        return first, model.roots(trees)
    twin = Model()

    def eager_twice(trees):
        first = twin.roots(trees)
        twin.w.assign_add(tf.ones_like(twin.w) * 0.1)
        return first, twin.roots(trees)
    fn = janus.function(twice)
    rng = np.random.default_rng(4)
    with config.patch(strict=True):
        for _ in range(6):
            trees = [balanced(rng, int(rng.integers(1, 6))) for _ in range(2)]
            got, want = fn(trees), eager_twice(trees)
            _close(got[0], want[0])
            _close(got[1], want[1])
            _close(model.w, twin.w)
    assert janus.stats(fn)['graph_calls'] >= 3


@pytest.mark.parametrize('changed', [False, True], ids=['passed_on', 'changed'])
def test_a_tensor_a_recursive_call_passes_on_or_changes(changed):
    """A tensor every recursive call passes on unchanged is shared by every node
    (level by level); one a call changes decides the result per call (one call per
    node: the results of a node differ by the path that reaches it)."""
    def weigh(node, t):
        if node.left is None:
            return t * float(node.value + 1)
        return weigh(node.left, t * 2.0 if changed else t) + weigh(node.right, t)

    def total(trees, t):
        out = []
        for tree in trees:
            out.append(weigh(tree, t))
        return tf.stack(out)
    fn = janus.function(total)
    rng = np.random.default_rng(7)
    with config.patch(strict=True):
        for i in range(6):
            trees = [balanced(rng, int(rng.integers(1, 7))) for _ in range(3)]
            t = tf.constant(0.5 + i)
            _close(fn(trees, t), total(trees, t))
    assert janus.stats(fn)['graph_calls'] >= 3
    text = _text(fn)
    assert ('weigh(node, tensor) level by level' in text) is not changed
    if changed:
        assert 'a recursive call passes its tensors or numbers changed' in text
