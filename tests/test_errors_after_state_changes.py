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


# -- a local a tensor-dependent if left unmerged, formatted with !r --------------------

class Logger:
    def __init__(self):
        self.lines = []

    def step(self, x, every):
        note = ''
        for _ in range(2):
            if every % 2 == 0:           # a relaxed number: a tf.cond once it changes
                note = 'half={}'.format(every // 2)
                x = x * 1.5
        self.lines.append(f'{every}:{note!r}')   # eagerly repr of the str; never janus's
        return x


def test_an_unmerged_local_formatted_with_repr_is_refused_not_shown():
    """`f'{note!r}'` of a local the two sides of a tf.cond left unmerged formatted
    janus's placeholder object into the text (fuzzer seed soak17, program 1460)."""
    def make():
        obj = Logger()
        return obj.step, obj
    calls = [((c([1.0, 2.0]), 0),), ((c([1.0, 2.0]), 2),), ((c([1.0, 2.0]), 4),),
             ((c([1.0, 2.0]), 1),), ((c([1.0, 2.0]), 6),), ((c([1.0, 2.0]), 3),),
             ((c([1.0, 2.0]), 8),), ((c([1.0, 2.0]), 5),)]
    differential(make, [(args, {}) for (args,) in calls], state=lambda o: list(o.lines))
