"""An op that may fail runs even when nothing uses its result (FINDINGS 8).

Eagerly every line runs, so ``peek = tf.gather(x, i)`` past the end raises
even if ``peek`` is never read.  TF prunes a stateless op no output needs,
and lowers tf.cond / tf.while_loop so that only their data outputs count; a
graph would return normally and janus would then make the Python writes the
call made after that line.  janus keeps such ops running
(``runtime/fallible.py``): in the top graph, in tf.cond branches and in
tf.while_loop bodies.
"""
import tensorflow as tf

import janus
from conftest import differential


class Loader:
    """A cursor over a batch, with a debugging look-ahead nobody reads."""

    def __init__(self):
        self.cursor = tf.Variable(0)
        self.rows = 0

    def next_row(self, x):
        self.cursor.assign_add(1)
        peek = tf.gather(x, self.cursor % 4)   # left over from debugging: unused
        self.rows += 1
        return x * 2.0


def _state(loader):
    return int(loader.cursor.numpy()), loader.rows


def _calls(n, sign=None):
    def call(i):
        s = 1.0 if sign is None else sign(i)
        return lambda: ((tf.constant([1.0, 2.0, 3.0]) * s,), {})
    return [call(i) for i in range(n)]


def test_an_unused_gather_past_the_end_raises_as_eagerly():
    def make():
        loader = Loader()
        return loader.next_row, loader
    jf = differential(make, _calls(9), state=_state)
    assert janus.stats(jf)['graph_calls'] > 0


def test_an_unused_gather_in_a_tensor_dependent_branch_raises_as_eagerly():
    def make():
        state = Loader()

        def step(x):
            state.cursor.assign_add(1)
            if tf.reduce_sum(x) > 0:
                peek = tf.gather(x, state.cursor % 5)   # unused
                x = x * 2.0
            state.rows += 1
            return x
        return step, state
    jf = differential(make, _calls(12, sign=lambda i: 1.0 if i % 2 else -1.0), state=_state)
    assert janus.stats(jf)['graph_calls'] > 0


def test_an_unused_gather_in_a_tensor_dependent_loop_raises_as_eagerly():
    def make():
        state = Loader()

        def step(x, n):
            state.cursor.assign_add(1)
            total = tf.zeros([])
            i = tf.constant(0)
            while i < n:
                peek = tf.gather(x, i + state.cursor % 3)   # unused: fails past the end
                total += tf.reduce_sum(x)
                i += 1
            state.rows += 1
            return total
        return step, state
    calls = [(lambda i=i: ((tf.constant([1.0, 2.0, 3.0]), tf.constant(1 + i % 2)), {}))
             for i in range(8)]
    jf = differential(make, calls, state=_state)
    assert janus.stats(jf)['graph_calls'] > 0


def test_only_the_users_unused_ops_that_may_fail_are_kept():
    from tensorflow.python.framework import func_graph
    from janus.runtime import fallible
    graph = func_graph.FuncGraph('probe')
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        janus_own = tf.gather(x, tf.constant(2))      # not made in a user's call: not kept
        with fallible.made_by_the_user():
            y = x * 2.0
            _ = tf.tanh(x)                            # unused, cannot fail: not kept
            bad = tf.gather(x, tf.constant(1))        # unused, may fail: kept
            used = tf.gather(x, tf.constant(0))       # may fail, but an output needs it
            with fallible.made_by_janus():
                inner = tf.gather(x, tf.constant(2))  # janus's own inside the call: not kept
        assert fallible.keep_unused(graph, [y, used]) == 1
        assert graph.control_outputs == [bad.op]
        assert janus_own.op not in graph.control_outputs and inner.op not in graph.control_outputs
