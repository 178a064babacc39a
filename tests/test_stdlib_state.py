"""Standard-library code that keeps Python state is library code: a ``random.Random``
draw runs in Python, in program order (a graph break), never converted into
``random.py`` (``whitelist.refuse_stateful_stdlib``)."""
import random

import tensorflow as tf

import janus
from tests.conftest import differential


def test_a_python_rng_draw_is_a_break_in_program_order():
    def make():
        rng = random.Random(7)
        drawn = []

        def augment(x):
            y = tf.nn.relu(x * 2.0 - 1.0) + tf.reduce_mean(x)
            k = rng.randint(0, 3)
            drawn.append(k)
            z = tf.roll(y, shift=k, axis=0) * tf.reduce_sum(y) + tf.square(y)
            return z - tf.reduce_max(z)
        return augment, (rng, drawn)
    calls = [lambda: ((tf.range(6.0),), {})] * 8
    jf = differential(make, calls, state=lambda s: (s[0].getstate(), list(s[1])))
    text = janus.explain(jf)
    assert 'random.Random.randint' in text and 'random.py' not in text, text
    assert janus.stats(jf)['graph_part_calls'] >= 1, text
