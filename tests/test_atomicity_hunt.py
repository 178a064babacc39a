"""Bug hunt (issue 17 siblings): errors after state changes, writes and formats
Python rejects, modelled containers changed by the caller, trace-time-only
behaviour, signed zeros.

Each test runs a program eagerly and under janus on fresh objects, with an
assumption broken mid-way, and compares returns, exceptions, stdout and state
after every call.
"""
import tensorflow as tf

import janus
from conftest import differential


def c(value, dtype=tf.float32):
    return tf.constant(value, dtype)


# -- NumPy scalars are values: no provenance needed ------------------------------------

class StaticCheck:
    def __init__(self):
        self.steps = tf.Variable(0.0)
        self.log = []

    def step(self, x):
        self.steps.assign_add(1.0)
        if tf.get_static_value(tf.constant(2)) == 2:   # an np.bool_ in a truth test
            x = x * 1.5
        k = tf.get_static_value(tf.constant([3, 1]))[0]
        if k > 1:                                      # an np.int32 compared
            self.log.append(int(k))
        return x


def test_numpy_scalar_from_static_value_in_a_truth_test():
    def make():
        obj = StaticCheck()
        return obj.step, obj
    calls = [((c([1.0, 2.0]),), {})] * 4 + [((c([1.0]),), {})] + [((c([1.0, 2.0]),), {})] * 3
    jf = differential(make, calls, state=lambda o: (o.steps, o.log))
    assert janus.stats(jf)['graph_calls'] > 0
