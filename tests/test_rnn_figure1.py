"""The paper's Figure 1 RNN loop (without the self.state write, issue #4).

A fixed sequence length unrolls (the length is guarded before the run); a
new length re-profiles and relaxes to a tf.while_loop whose outputs list is a
TensorArray; a length that is only known at run time is assumed in-graph
(TRIP_COUNT) and relaxed when it breaks.
"""
import tensorflow as tf

import janus
from conftest import differential
from test_control_flow import assumptions, has_while

W = tf.Variable(tf.random.stateless_normal([8, 8], seed=[1, 2]) * 0.3)
U = tf.Variable(tf.random.stateless_normal([4, 8], seed=[3, 4]) * 0.3)


def rnn_cell(state, item):
    return tf.tanh(tf.matmul(state, W) + tf.matmul(item, U[:, :8]))


def compute_loss(outputs):
    return tf.reduce_mean(tf.stack(outputs) ** 2) + tf.add_n(outputs)[0, 0] * 0.0


class RNNModel:
    def __init__(self):
        self.state = tf.zeros([2, 8])

    def __call__(self, sequence):
        state = self.state
        outputs = []
        for item in sequence:
            state = rnn_cell(state, item)
            outputs += [state]
        return compute_loss(outputs)


def seq(length, seed=0):
    return tf.random.stateless_normal([length, 2, 4], seed=[length, seed])


def test_fixed_length_unrolls_then_relaxes_to_a_while_loop(strict):
    def make():
        model = RNNModel()
        return (lambda sequence: model(sequence)), model
    lengths = [10] * 6 + [12, 12, 7, 10, 30]
    jf = differential(make, [((seq(n, i),), {}) for i, n in enumerate(lengths)])
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 2 and stats['fallbacks'] == 0
    assert stats['imperative_calls'] == 1          # the first length-12 call re-profiles
    assert stats['graph_calls'] == 3 + 4            # lengths 12, 7, 10, 30 share the relaxed graph
    assert has_while(jf)                            # the relaxed graph: tf.while_loop + TensorArray
    first = jf.cache.entries()[0]
    assert 'sequence: float32(10, 2, 4)' in first.describe_guards()
    assert not any(op.type in ('While', 'StatelessWhile')
                   for op in first.concrete.graph.get_operations())


def test_run_time_length_is_asserted_and_relaxed_when_it_changes(strict):
    def make():
        model = RNNModel()

        def f(padded, mask):
            return model(tf.boolean_mask(padded, mask))
        return f, model
    padded = tf.random.stateless_normal([8, 2, 4], seed=[9, 9])
    five = tf.constant([True] * 5 + [False] * 3)
    six = tf.constant([True] * 6 + [False] * 2)
    calls = [((padded * (i + 1), five), {}) for i in range(5)] + [((padded, six), {})]
    calls += [((padded * 2, six), {}), ((padded, five), {})]
    jf = differential(make, calls)
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 1 and stats['graphs_built'] == 2
    assert has_while(jf) and 'TRIP_COUNT' not in assumptions(jf)
    assert 'TRIP_COUNT' in janus.explain(jf) or 'relaxed' in janus.explain(jf)


def test_list_grown_in_a_dynamic_loop_refuses_len_with_a_reason():
    def make():
        def f(xs):
            outputs = []
            for x in xs:
                outputs.append(x * 2.0)
            return len(outputs)
        return f, None
    jf = differential(make, [((tf.ones([n, 3]),), {}) for n in [2, 3, 4, 5, 6, 7]])
    # The relaxed (None, 3) graph would need len() of a run-time length: janus
    # says so and builds exact-length (unrolled) graphs instead.
    assert 'run-time length' in janus.explain(jf)
    assert all('xs: float32(None' not in g for e in jf.cache.entries()
               for g in e.describe_guards())
