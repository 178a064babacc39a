"""XLA for janus's graphs (``replay/xla.py``): ``jit_compile=True``/'auto' and the
``config.jit_compile`` knob; same results and state as eager, explain says how
each graph runs.  Timings are benchmarks' business: here only the choice is made."""
import pytest
import tensorflow as tf

import janus
from janus.replay import xla
from tests.conftest import differential


def _train_step():
    tf.keras.utils.set_random_seed(11)
    model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation='relu'),
                                 tf.keras.layers.Dense(4)])
    model.build((None, 8))
    opt = tf.keras.optimizers.SGD(0.05)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return step, model


def _batches(n):
    return [lambda i=i: ((tf.random.stateless_normal([6, 8], [i, 1]),
                          tf.random.stateless_normal([6, 4], [i, 2])), {}) for i in range(n)]


def _weights(model):
    """As tensors: compared to a relative 1e-5 (XLA's fusions round differently)."""
    return [tf.convert_to_tensor(w) for w in model.weights]


def _graph_notes(jf):
    return [line for line in janus.explain(jf).split('\n') if 'graph #' in line and '(runs' in line]


def test_a_training_step_compiled_with_xla_matches_eager():
    jf = differential(_train_step, _batches(8), state=_weights, jit_compile=True)
    assert janus.stats(jf)['graph_calls'] == 5
    notes = _graph_notes(jf)
    assert notes and notes[0].endswith(', XLA):'), notes


def test_auto_times_both_and_names_its_choice():
    jf = differential(_train_step, _batches(3 + 2 * (xla.AUTO_RUNS + 1) + 2), state=_weights,
                      jit_compile='auto')
    notes = _graph_notes(jf)
    assert notes and 'auto chose' in notes[0] and 'compiled' in notes[0], notes


def test_a_graph_that_checks_assumptions_is_not_compiled():
    def make():
        def f(x):
            if tf.reduce_sum(x) > 0.0:   # always true while profiled: assumed, checked
                return x * 2.0
            return x - 1.0
        return f, None
    calls = [((tf.constant([1.0, 2.0]),), {})] * 5
    with janus.config.patch(jit_compile='on'):
        jf = differential(make, calls)
    notes = _graph_notes(jf)
    assert notes and 'not XLA' in notes[0] and 'Janus>Assert' in notes[0], notes
    with janus.config.patch(jit_compile='on'):   # the assumption breaks: eager's answer
        assert jf(tf.constant([-3.0, 1.0])).numpy().tolist() == [-4.0, 0.0]


def test_misuse_of_jit_compile_says_what_to_pass():
    with pytest.raises(janus.JanusUsageError, match='auto'):
        janus.function(lambda x: x, jit_compile='fast')


def test_random_draws_stay_off_xla_and_auto_keeps_error_semantics():
    def make():
        gen = tf.random.Generator.from_seed(3)

        def noisy(x):
            return x + gen.normal([3])

        def lookup(table, i):
            return tf.gather(table, i) * 2.0
        return (noisy, lookup), gen

    (noisy, lookup), _ = make()
    jf = janus.function(noisy, jit_compile=True)
    for _ in range(5):
        jf(tf.zeros([3]))
    assert 'random numbers' in jf.cache.newest().xla.describe()
    auto = janus.function(lookup, jit_compile='auto')
    table = tf.constant([1.0, 2.0, 3.0])
    for _ in range(5):
        auto(table, tf.constant(1))
    assert 'drops the errors of GatherV2' in auto.cache.newest().xla.describe()
    with pytest.raises(tf.errors.InvalidArgumentError):   # eager's error, not a clamped value
        auto(table, tf.constant(7))
