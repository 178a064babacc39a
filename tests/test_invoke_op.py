"""``Janus>Invoke`` (janus_ops/invoke_op.cc) and the recursive graph functions built on
it (``graph/recursive_functions.py``): a function that calls itself from inside its
own graph, its base case a real ``tf.cond``, at any depth, with gradients equal to
eager recursion's.
"""
import numpy as np
import pytest
import tensorflow as tf

from janus.graph import ops
from janus.graph.recursive_functions import RecursiveFunction

SCALAR_I64 = tf.TensorSpec([], tf.int64)
SCALAR_F32 = tf.TensorSpec([], tf.float32)


def _sumdown():
    def body(recurse, n):
        return tf.cond(n <= 0, lambda: tf.constant(0, tf.int64),
                       lambda: n + recurse(n - 1)[0])
    return RecursiveFunction('sumdown', body, [SCALAR_I64], [SCALAR_I64])


def test_a_function_calls_itself_eagerly_and_inside_a_graph_at_any_depth():
    sumdown = _sumdown()
    assert int(sumdown(tf.constant(100, tf.int64))[0]) == 5050

    @tf.function
    def twice(n):
        return 2 * sumdown(n)[0]
    for n in (0, 1, 7, 500):   # one trace of the body serves every depth
        assert int(twice(tf.constant(n, tf.int64))) == n * (n + 1)
    assert sumdown.traces == 2   # the forward and the gradient, once


def test_the_shape_function_gives_the_callee_shapes_and_checks_their_count():
    sumdown = _sumdown()

    @tf.function
    def shapes(n):
        out = sumdown(n)[0]
        assert out.shape == tf.TensorShape([])
        unknown = ops.janus_invoke(sumdown.name, [n], [tf.int64])[0]
        assert unknown.shape.rank is None
        return out
    shapes(tf.constant(3, tf.int64))
    with pytest.raises(ValueError, match='output_shapes'):
        tf.function(lambda n: ops.janus_invoke(sumdown.name, [n], [tf.int64],
                                               output_shapes=[[], []]))(
            tf.constant(3, tf.int64))


def test_an_error_inside_the_recursion_reaches_the_caller():
    def body(recurse, n):
        tf.debugging.assert_greater(n, tf.constant(-3, tf.int64), message='too deep')
        return tf.cond(n <= -100, lambda: n, lambda: recurse(n - 1)[0])
    down = RecursiveFunction('down', body, [SCALAR_I64], [SCALAR_I64])
    with pytest.raises(tf.errors.InvalidArgumentError, match='too deep'):
        down(tf.constant(5, tf.int64))


def test_an_invoke_without_a_gradient_function_says_so():
    sumdown = _sumdown()
    sumdown(tf.constant(1, tf.int64))
    x = tf.constant(2.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = ops.janus_invoke(sumdown.name, [tf.cast(x, tf.int64)], [tf.int64])[0]
        z = tf.cast(y, tf.float32) * x
    assert tape.gradient(z, x) is not None   # int path: no gradient asked of the op
    with pytest.raises(LookupError, match='no gradient function'):
        ops._invoke_grad(_FakeOp(), tf.constant(1.0))


class _FakeOp:
    name = 'fake'

    def get_attr(self, name):
        return {'grad_f': _Named(''), 'f': _Named('f')}[name]


class _Named:
    def __init__(self, name):
        self.name = name


def _tree_rnn_pieces(seed=0):
    rng = np.random.RandomState(seed)
    w = tf.Variable(rng.randn(8, 4).astype(np.float32) * 0.3, name='w')
    b = tf.Variable(rng.randn(4).astype(np.float32) * 0.1, name='b')
    emb = tf.Variable(rng.randn(10, 4).astype(np.float32), name='emb')
    return w, b, emb


def _random_tree(rng, leaves):
    """A binary tree as (left, right, word) arrays over node ids, root 0."""
    left, right, word = [], [], []

    def build(n):
        i = len(left)
        left.append(-1)
        right.append(-1)
        word.append(int(rng.randint(10)))
        if n > 1:
            split = int(rng.randint(1, n))
            left[i] = build(split)
            right[i] = build(n - split)
        return i
    build(leaves)
    return [tf.constant(a, tf.int32) for a in (left, right, word)]


def test_gradients_of_a_recursion_over_a_tree_equal_eager_recursion():
    """A TreeRNN cell folded over a tree: gradients for every variable it reads
    (captured by the recursive function, passed on by each recursive call)."""
    w, b, emb = _tree_rnn_pieces()

    def cell(l, r):
        return tf.tanh(tf.matmul(tf.concat([l, r], axis=1), w) + b)

    def body(recurse, node, left, right, word):
        return tf.cond(left[node] < 0,
                       lambda: tf.gather(emb, word[node:node + 1]),
                       lambda: cell(recurse(left[node], left, right, word)[0],
                                    recurse(right[node], left, right, word)[0]))
    vec = tf.TensorSpec([None], tf.int32)
    encode = RecursiveFunction('tree', body, [tf.TensorSpec([], tf.int32), vec, vec, vec],
                               [tf.TensorSpec([1, 4], tf.float32)])

    def eager_encode(node, left, right, word):
        if int(left[node]) < 0:
            return tf.gather(emb, word[node:node + 1])
        return cell(eager_encode(int(left[node]), left, right, word),
                    eager_encode(int(right[node]), left, right, word))

    @tf.function(autograph=False)
    def graph_loss(left, right, word):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(encode(tf.constant(0), left, right, word)[0] ** 2)
        return loss, tape.gradient(loss, [w, b, emb])

    rng = np.random.RandomState(1)
    for leaves in (1, 2, 5, 13):   # shapes change every call: one trace serves all
        tree = _random_tree(rng, leaves)
        with tf.GradientTape() as tape:
            expected = tf.reduce_sum(eager_encode(0, *tree) ** 2)
        expected_grads = tape.gradient(expected, [w, b, emb])
        loss, grads = graph_loss(*tree)
        assert all(g is not None for g in grads), grads
        np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-5)
        for g, e, v in zip(grads, expected_grads, [w, b, emb]):
            if e is None:   # a lone leaf reads no cell weights: eager says None, a graph zeros
                assert leaves == 1
                e = tf.zeros_like(v)
            np.testing.assert_allclose(tf.convert_to_tensor(g).numpy(),
                                       tf.convert_to_tensor(e).numpy(), rtol=1e-4, atol=1e-6)


def test_gradient_with_respect_to_a_float_argument():
    def body(recurse, x, n):   # x ** (n + 1), recursively
        return tf.cond(n <= 0, lambda: x, lambda: x * recurse(x, n - 1)[0])
    power = RecursiveFunction('power', body, [SCALAR_F32, SCALAR_I64], [SCALAR_F32])
    x = tf.constant(1.5)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = power(x, tf.constant(4, tf.int64))[0]
    np.testing.assert_allclose(y.numpy(), 1.5 ** 5, rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), 5 * 1.5 ** 4, rtol=1e-5)


def test_a_chain_of_a_thousand_calls_and_a_gradient_through_a_hundred():
    """Depth is data: one trace serves both.  The gradient function recomputes each
    call's forward (O(depth^2) calls for a chain), so the gradient runs at 100."""
    def body(recurse, x, n):   # x + x + ... (n + 1 times), one call per step
        return tf.cond(n <= 0, lambda: x, lambda: x + recurse(x, n - 1)[0])
    chain = RecursiveFunction('chain', body, [SCALAR_F32, SCALAR_I64], [SCALAR_F32])
    assert float(chain(tf.constant(0.5), tf.constant(1000, tf.int64))[0]) == 500.5
    x = tf.constant(0.5)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = chain(x, tf.constant(100, tf.int64))[0]
    assert float(tape.gradient(y, x)) == 101.0
