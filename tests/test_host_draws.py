"""Draws from Python's random generators made on the host before the run
(``trace/host_draws.py``): ``self.rng.uniform(0.9, 1.1)`` in a model's ``call`` no
longer breaks the step; the graph is fed the number the generator itself draws.

Differential tests on fresh objects, the generators' states compared after every
call: stdlib ``random.Random`` (and the module's own functions), NumPy ``RandomState``
and ``Generator``; a draw past a threshold raising the user's exception; an
assertion failing after the draws (the states are put back before the imperative
re-run); a draw whose value a trace needs (a break at the draw instead); a draw under
a tensor ``if``; a generator replaced or reseeded from outside; arguments that are
relaxed numbers; draws in a loop, in program order.
"""
import random

import numpy as np
import tensorflow as tf

import janus
from tests.conftest import differential


def _stats(jf):
    return janus.stats(jf)


class Jitter(tf.keras.Model):
    def __init__(self, seed):
        super().__init__()
        self.rng = random.Random(seed)
        self.first = tf.keras.layers.Dense(8, activation='relu')
        self.head = tf.keras.layers.Dense(3)

    def call(self, x, training=False):
        h = self.first(x)
        scale = self.rng.uniform(0.9, 1.1) if training else 1.0
        if scale > 1.095:
            raise ValueError('scale %.4f too large' % scale)
        return self.head(h * scale)


class Trainer:
    def __init__(self, model):
        self.model = model
        model(tf.zeros([1, 4]))
        self.opt = tf.keras.optimizers.SGD(0.05)
        self.steps = 0

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
        self.steps += 1
        return loss


def _batch(i):
    x = tf.random.stateless_normal([6, 4], seed=[i, 1])
    y = tf.random.stateless_uniform([6], seed=[i, 2], maxval=3, dtype=tf.int32)
    return (x, y), {}


def _trainer_state(trainer):
    return ([v.numpy() for v in trainer.model.trainable_variables], trainer.steps,
            trainer.model.rng.getstate())


def test_a_draw_in_a_models_call_keeps_the_step_one_graph():
    def make():
        tf.keras.utils.set_random_seed(0)
        trainer = Trainer(Jitter(3))
        return trainer.train_step, trainer
    draws = random.Random(3)
    assert any(draws.uniform(0.9, 1.1) > 1.095 for _ in range(40))   # some calls raise
    calls = [lambda i=i: _batch(i) for i in range(40)]
    jf = differential(make, calls, _trainer_state)
    stats = _stats(jf)
    # (the calls that raise take the other path of the ``if``: they run split)
    assert stats['graph_calls'] >= 25 and stats['split_calls'] <= 3, janus.explain(jf)
    assert 'draw' in janus.explain(jf)


class Sampler:
    def __init__(self):
        self.rng = random.Random(1)
        self.legacy = np.random.RandomState(2)
        self.gen = np.random.default_rng(3)
        self.low = 0.0
        self.v = tf.Variable(0.0)

    def step(self, x):
        a = self.rng.gauss(0.0, 1.0)
        b = self.rng.randint(1, 6)
        c = self.legacy.normal(0.0, 0.5)
        d = self.legacy.randint(0, 10)
        e = self.gen.uniform(self.low, self.low + 1.0)   # a relaxed number argument
        f = random.random() + np.random.uniform(0.0, 0.1)
        self.v.assign_add(1.0)
        total = x
        for k in range(3):   # unrolled: three draws, in program order
            total = total + self.rng.random() * k
        self.low += 1.0
        return total * a + b + c + d + e + f


def _sampler_state(sampler):
    return (sampler.rng.getstate(), str(sampler.legacy.get_state()),
            sampler.gen.bit_generator.state, float(sampler.v), sampler.low)


def test_stdlib_and_numpy_draws_are_eagers_numbers():
    def make():
        random.seed(5)
        np.random.seed(6)
        return Sampler().step, None

    eager_fn, _ = make()
    plain_fn, _ = make()
    eager_obj, janus_obj = eager_fn.__self__, plain_fn.__self__
    jf = janus.function(plain_fn)
    for i in range(10):
        random.seed(100 + i)
        np.random.seed(200 + i)
        expected = float(eager_fn(tf.constant(float(i))))
        random.seed(100 + i)
        np.random.seed(200 + i)
        got = float(jf(tf.constant(float(i))))
        assert expected == got, i
        assert str(_sampler_state(eager_obj)) == str(_sampler_state(janus_obj)), i
    assert _stats(jf)['graph_calls'] >= 5, janus.explain(jf)


class Gate:
    """The draws come before a speculated tensor branch that later goes the other way:
    the assertion fails after the host drew, and the imperative re-run draws again."""

    def __init__(self):
        self.rng = random.Random(4)
        self.drawn = []

    def step(self, x):
        noise = self.rng.uniform(-0.1, 0.1)
        self.drawn.append(noise)
        if tf.reduce_sum(x) > 10.0:
            x = x - 5.0
        return x + noise


def test_a_failed_assertion_puts_the_generator_back():
    def make():
        gate = Gate()
        return gate.step, gate
    calls = [lambda i=i: ((tf.constant([1.0, 2.0]) * (1.0 if i < 6 or i % 3 else 9.0),), {})
             for i in range(14)]
    jf = differential(make, calls, lambda g: (g.rng.getstate(), list(g.drawn)))
    assert _stats(jf)['graph_calls'] >= 3, janus.explain(jf)


def test_a_draw_whose_value_the_trace_needs_breaks_there():
    class Tiler:
        def __init__(self):
            self.rng = random.Random(2)

        def step(self, x):
            n = self.rng.randint(1, 3)
            scale = np.float32(self.rng.random())   # NumPy needs the value
            return tf.tile(x, [n]) * scale, n
    calls = [((tf.constant([1.0, 2.0]),), {})] * 10
    differential(lambda: (Tiler().step, None), calls)


def test_a_draw_under_a_tensor_if_and_a_generator_replaced_or_reseeded():
    class Model:
        def __init__(self):
            self.rng = random.Random(0)

        def step(self, x):
            if tf.reduce_mean(x) > 0.0:
                x = x * self.rng.random()   # the graph decides: drawn in Python
            return x + self.rng.uniform(0.0, 1.0)

    def make():
        model = Model()
        return model.step, model

    def call(i):
        def setup():
            return (tf.constant([float(i % 3) - 1.0, 1.0]),), {}
        return setup
    eager_fn, eager_model = make()
    plain_fn, janus_model = make()
    jf = janus.function(plain_fn)
    for i in range(14):
        if i == 6:
            eager_model.rng, janus_model.rng = random.Random(9), random.Random(9)
        if i == 10:
            eager_model.rng.seed(3)
            janus_model.rng.seed(3)
        (x,), _ = call(i)()
        assert float(tf.reduce_sum(eager_fn(x))) == float(tf.reduce_sum(jf(x))), i
        assert eager_model.rng.getstate() == janus_model.rng.getstate(), i


class CountingRandom(random.Random):
    """A subclass whose own ``random`` (which the stdlib's ``uniform`` calls) keeps
    state of its own and prints: drawn in Python, as written."""

    def __init__(self, seed):
        super().__init__(seed)
        self.inner = random.Random(seed + 1)
        self.count = 0

    def random(self):
        self.count += 1
        print('drawn', self.count)
        return self.inner.random()


def test_a_generator_subclass_draws_in_python_with_its_own_state_and_output():
    class Model:
        def __init__(self):
            self.rng = CountingRandom(4)

        def step(self, x):
            print('start')
            v = self.rng.uniform(0.0, 1.0)
            tf.debugging.assert_less(x, 7.0)   # fails at one call: a fallback
            return x * v

    def make():
        model = Model()
        return model.step, model
    calls = [((tf.constant(float(i)),), {}) for i in (0, 1, 2, 3, 4, 5, 6, 9, 1, 2, 3)]
    differential(make, calls, lambda m: (m.rng.count, m.rng.inner.getstate(),
                                         m.rng.getstate()))
