"""Recursion that Python numbers decide, unrolled into the graph behind guards on
those numbers (``inlining._refuse_recursion``, ``config.max_recursion_unroll``): a
matrix power by squaring, mutual recursion, a recursive method writing ``self``
state, a ``raise`` deep in the recursion; and what stays in Python: recursion
over objects (a tree of nodes: a graph per structure would not pay), recursion
under a tensor-dependent condition, recursion deeper than the limit.

Differential tests on fresh objects (``conftest.differential``): returns,
exceptions and state after every call, with the deciding numbers changing.
"""
import tensorflow as tf

import janus
from tests.conftest import differential


def _graph_runs(jf):
    return janus.stats(jf)['graph_calls']


class Powers:
    """Repeated squaring, as a recursive method that counts its multiplications."""

    def __init__(self):
        self.multiplications = 0

    def power(self, m, n):
        if n < 0:
            raise ValueError('negative exponent %d' % n)
        if n == 0:
            return tf.eye(m.shape[0])
        half = self.power(m, n // 2)
        self.multiplications += 1
        if n % 2:
            self.multiplications += 1
            return half @ half @ m
        return half @ half


def test_a_matrix_power_by_squaring_is_unrolled_per_exponent(strict):
    def make():
        p = Powers()
        return p.power, p

    m = [[1.0, 1.0], [0.0, 1.0]]
    exponents = [5, 5, 5, 5, 7, 7, 5, 12, 12, 7]
    calls = [lambda n=n, i=i: ((tf.constant(m) * (1.0 + i / 10.0), n), {})
             for i, n in enumerate(exponents)]
    jf = differential(make, calls, state=lambda p: p.multiplications)
    assert _graph_runs(jf) >= 4


def test_mutual_recursion_and_a_raise_deep_inside(strict):
    """``even``/``odd`` call each other; a negative count raises from the bottom of the
    recursion and the caller's ``except`` handles it, in the graph."""
    def make():
        log = []

        def even(x, n):
            if n == 0:
                return x
            if n < 0:
                raise ValueError('negative depth')
            return odd(x * 2.0, n - 1)

        def odd(x, n):
            return even(x + 1.0, n - 1)

        def run(x, n):
            try:
                return even(x, n)
            except ValueError as e:
                log.append(str(e))
                return -x
        return run, log

    counts = [4, 4, 4, 3, 3, 6, 4, 3]
    calls = [lambda n=n: ((tf.constant([1.0, 2.0]), n), {}) for n in counts]
    jf = differential(make, calls, state=list)
    assert _graph_runs(jf) >= 3


class Leaf:
    def __init__(self, value):
        self.value = value


class Pair:
    def __init__(self, left, right):
        self.left, self.right = left, right


def test_recursion_over_objects_holding_tensors_is_one_recursive_graph():
    """Unrolled, each tree would be a graph of its own: the recursion is one graph
    function instead, its leaves' tensors fed stacked (tests/test_recursive_graphs.py)."""
    def make():
        w = tf.Variable([[0.5, -0.5], [0.25, 1.0]])

        def encode(node):
            if isinstance(node, Leaf):
                return node.value
            return tf.tanh((encode(node.left) + encode(node.right)) @ w)

        def step(tree, scale):
            return tf.reduce_sum(encode(tree)) * scale
        return step, w

    def tree(i):
        leaf = Leaf(tf.fill([1, 2], float(i)))
        return Pair(leaf, Pair(Leaf(tf.ones([1, 2])), leaf)) if i % 2 else Pair(leaf, leaf)

    calls = [lambda i=i: ((tree(i), tf.constant(2.0)), {}) for i in range(6)]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] == 3 and 'STRUCTURE_MATCH' in janus.explain(jf)


def test_recursion_under_a_tensor_condition_and_past_the_limit_run_in_python():
    def make():
        def fact(n):
            if n <= 1:
                return tf.constant(1.0)
            return tf.cast(n, tf.float32) * fact(n - 1)

        def countdown(x, n):
            if n == 0:
                return x
            return countdown(x + 1.0, n - 1)
        return (lambda t, n: fact(t) + countdown(tf.cast(t, tf.float32), n)), None

    calls = [lambda i=i: ((tf.constant(3 + i % 3), 6), {}) for i in range(7)]
    with janus.config.patch(max_recursion_unroll=4):
        jf = differential(make, calls)
    report = ' '.join(janus.explain(jf).split())
    assert 'under a tensor-dependent condition' in report or 'fact' in report
    assert 'at most 4 calls deep' in report
