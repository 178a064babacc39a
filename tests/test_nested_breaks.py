"""Breaks nest into Keras layers and user functions (``graphgen/nested.py``): a line
janus refuses inside a layer's own ``call()`` (or a function the step calls) runs in
Python, and the rest of that ``call`` in graphs.

Differential tests on fresh objects: a training step with a tape and an optimizer
around a subclassed model whose ``call()`` logs a value it reads with ``.numpy()`` (a
line no graph can hold) and draws from a stdlib ``random.Random`` (made on the host
before the run: ``trace/host_draws.py``), blocks of one class called in a loop, a
refused line two layers deep, and assumptions broken inside the nested call.
"""
import random

import numpy as np

import tensorflow as tf

import janus
from conftest import differential


class Jitter(tf.keras.Model):
    """Scales its hidden activations by a factor drawn with Python's own RNG."""

    def __init__(self, seed):
        super().__init__()
        self.rng = random.Random(seed)
        self.first = tf.keras.layers.Dense(8, activation='relu')
        self.second = tf.keras.layers.Dense(8, activation='tanh')
        self.head = tf.keras.layers.Dense(3)
        self.norms = []

    def call(self, x, training=False):
        h = self.first(x)
        if training:
            self.norms.append(round(float(tf.norm(h).numpy()), 3))   # refused: a read
        scale = self.rng.uniform(0.9, 1.1) if training else 1.0
        h = self.second(h * scale)
        return self.head(h)


class Trainer:
    def __init__(self, model):
        self.model = model
        self.model(tf.zeros([1, 4]))
        self.opt = tf.keras.optimizers.SGD(0.05)
        self.loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.steps = 0

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = self.loss_fn(y, self.model(x, training=True))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
        self.steps += 1
        if self.steps % 4 == 0:
            print('step', self.steps, 'loss', float(loss))
        return loss


def _batch(i):
    x = tf.random.stateless_normal([6, 4], seed=[i, 1])
    y = tf.random.stateless_uniform([6], seed=[i, 2], maxval=3, dtype=tf.int32)
    return (x, y), {}


def _state(trainer):
    return ([v.numpy() for v in trainer.model.trainable_variables], trainer.steps,
            trainer.model.rng.random() if hasattr(trainer.model, 'rng') else None,
            list(getattr(trainer.model, 'norms', ())))


def _nested(jf):
    return [nested for _, nested in jf.state.routes.functions()]


def test_a_refused_line_in_a_models_call_breaks_there_not_at_the_step():
    def make():
        tf.keras.utils.set_random_seed(0)
        trainer = Trainer(Jitter(5))
        return trainer.train_step, trainer
    calls = [lambda i=i: _batch(i) for i in range(12)]
    jf = differential(make, calls, _state)
    nested = _nested(jf)
    assert len(nested) == 1, janus.explain(jf)
    (split,) = nested[0].state.splits.values()
    parts = [p for p in split.slots if isinstance(p, janus.api.JanusFunction)]
    assert sum(janus.stats(p)['graph_calls'] for p in parts) > 0, janus.explain(jf)
    assert 'runs through janus of its own' in janus.explain(jf)


class NoisyBlock(tf.keras.layers.Layer):
    def __init__(self, units, seed):
        super().__init__()
        self.dense = tf.keras.layers.Dense(units, activation='relu')
        self.rng = random.Random(seed)
        self.peaks = []

    def build(self, shape):
        self.dense.build(shape)

    def call(self, x, training=False):
        if training:
            self.peaks.append(int(tf.argmax(tf.reduce_max(x, 0)).numpy()))   # refused
        noise = self.rng.gauss(0.0, 0.01) if training else 0.0
        return x + self.dense(x) + noise


class Stack(tf.keras.Model):
    """Blocks of one class called in a loop; the refusal is two layers deep."""

    def __init__(self, seed):
        super().__init__()
        self.inp = tf.keras.layers.Dense(8)
        self.blocks = [NoisyBlock(8, seed + i) for i in range(3)]
        self.head = tf.keras.layers.Dense(3)

    def call(self, x, training=False):
        h = self.inp(x)
        for block in self.blocks:
            h = block(h, training=training)
        if tf.reduce_mean(h) > 100.0:   # never true: assumed, and broken below
            h = h / 100.0
        return self.head(h)


def test_blocks_called_in_a_loop_each_run_through_janus():
    def make():
        tf.keras.utils.set_random_seed(0)
        trainer = Trainer(Stack(3))
        return trainer.train_step, trainer

    def state(trainer):
        return ([v.numpy() for v in trainer.model.trainable_variables], trainer.steps,
                [b.rng.random() for b in trainer.model.blocks],
                [list(b.peaks) for b in trainer.model.blocks])
    calls = [lambda i=i: _batch(i) for i in range(10)]
    calls.append(lambda: ((tf.fill([6, 4], 500.0), tf.zeros([6], tf.int32)), {}))
    calls += [lambda i=i: _batch(i) for i in range(11, 14)]
    jf = differential(make, calls, state)
    text = janus.explain(jf)
    assert 'NoisyBlock.call runs through janus of its own' in text, text


def test_a_plain_call_of_the_model_outside_training_is_unchanged():
    """The same model called with training=False: no refused line, one graph."""
    def make():
        tf.keras.utils.set_random_seed(0)
        model = Jitter(1)
        model(tf.zeros([1, 4]))

        def predict(x):
            return tf.argmax(model(x, training=False), axis=1)
        return predict, model
    calls = [lambda i=i: ((tf.random.stateless_normal([5, 4], seed=[i, 9]),), {})
             for i in range(6)]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] > 0
    assert not _nested(jf)


def test_nested_functions_keep_the_floor_and_the_users_exceptions():
    class Checked(Jitter):
        def call(self, x, training=False):
            h = self.first(x)
            self.norms.append(round(float(tf.norm(h).numpy()), 3))
            scale = self.rng.uniform(0.9, 1.1) if training else 1.0
            if scale > 1.06:
                raise ValueError('scale %.3f too large' % scale)
            return self.head(self.second(h * scale))

    def make():
        tf.keras.utils.set_random_seed(0)
        trainer = Trainer(Checked(8))
        return trainer.train_step, trainer
    draws = random.Random(8)
    assert any(draws.uniform(0.9, 1.1) > 1.06 for _ in range(16))   # some calls raise
    calls = [lambda i=i: _batch(i) for i in range(16)]
    jf = differential(make, calls, _state)
    assert _nested(jf), janus.explain(jf)


# -- plain functions and methods of the user's ------------------------------------------

class LossTrainer(Trainer):
    """The loss in a method of its own, which draws a label-smoothing factor from
    Python's RNG (made on the host) and counts the confident logits with ``.numpy()``
    (the refused line) between the forward pass and the loss."""

    def __init__(self, model, seed):
        super().__init__(model)
        self.rng = random.Random(seed)
        self.smooth_calls = 0
        self.confident = []

    def compute_loss(self, x, y):
        logits = self.model(x, training=True)
        smoothing = self.rng.uniform(0.0, 0.1)
        self.smooth_calls += 1
        self.confident.append(int(tf.reduce_sum(tf.cast(logits > 1.0, tf.int32)).numpy()))
        labels = tf.one_hot(y, 3) * (1.0 - smoothing) + smoothing / 3.0
        return tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels, logits))

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = self.compute_loss(x, y)
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
        self.steps += 1
        return loss


def _loss_state(trainer):
    return ([v.numpy() for v in trainer.model.trainable_variables], trainer.steps,
            trainer.smooth_calls, trainer.rng.random(), list(trainer.confident))


def _dense_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation='relu'),
                                 tf.keras.layers.Dense(3)])
    model.build((None, 4))
    return model


def test_a_refused_line_in_a_method_breaks_there_not_at_the_step():
    def make():
        tf.keras.utils.set_random_seed(0)
        trainer = LossTrainer(_dense_model(), 4)
        return trainer.train_step, trainer
    calls = [lambda i=i: _batch(i) for i in range(12)]
    jf = differential(make, calls, _loss_state)
    (nested,) = _nested(jf)
    assert janus.stats(nested)['graph_part_calls'] > 0, janus.explain(jf)
    text = janus.explain(jf)
    assert 'LossTrainer.compute_loss runs through janus of its own' in text, text
    assert 'function LossTrainer.compute_loss' in text, text


def scaled_loss(model, x, y, sizes):
    """A module-level function whose refused line sizes a later tensor (``.numpy()``)."""
    logits = model(x, training=True)
    k = int(tf.reduce_sum(tf.cast(y > 0, tf.int32)).numpy())
    sizes.append(k)
    weights = tf.concat([tf.ones([k]), tf.zeros([tf.shape(y)[0] - k])], 0)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.sort(y, direction='DESCENDING'),
                                                            logits)
    return tf.reduce_sum(losses * weights) / (k + 1.0)


class FunctionTrainer(Trainer):
    def __init__(self, model):
        super().__init__(model)
        self.sizes = []

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = scaled_loss(self.model, x, y, self.sizes)
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss


def test_a_refused_line_in_a_plain_function_breaks_there():
    def make():
        tf.keras.utils.set_random_seed(0)
        trainer = FunctionTrainer(_dense_model())
        return trainer.train_step, trainer

    def state(trainer):
        return [v.numpy() for v in trainer.model.trainable_variables], list(trainer.sizes)
    calls = [lambda i=i: _batch(i) for i in range(12)]
    jf = differential(make, calls, state)
    (nested,) = _nested(jf)
    assert janus.stats(nested)['graph_part_calls'] > 0, janus.explain(jf)


def test_a_function_reaching_a_layer_with_a_refused_line_routes_both():
    """The statement calls a method that calls a model whose call() is refused a line:
    the method runs through janus, and the model's call through janus of its own."""
    class Forward(Trainer):
        def forward(self, x, y):
            logits = self.model(x, training=True)
            return self.loss_fn(y, logits)

        def train_step(self, x, y):
            with tf.GradientTape() as tape:
                loss = self.forward(x, y)
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
            self.steps += 1
            return loss

    def make():
        tf.keras.utils.set_random_seed(0)
        trainer = Forward(Jitter(5))
        return trainer.train_step, trainer
    calls = [lambda i=i: _batch(i) for i in range(12)]
    jf = differential(make, calls, _state)
    (forward,) = _nested(jf)
    assert [type(layer).__name__ for layer, _ in forward.state.routes.functions()] == ['Jitter']


def test_a_routed_method_runs_per_instance_and_keeps_assumptions_and_exceptions():
    """Two trainers' methods share one code: each instance gets its own janus function.
    A Python branch inside the routed method flips mid-way (an assumption broken inside
    it), and a user exception raised from it passes unchanged."""
    class Gated(LossTrainer):
        def compute_loss(self, x, y):
            logits = self.model(x, training=True)
            smoothing = self.rng.uniform(0.0, 0.1)
            self.smooth_calls += 1
            self.confident.append(int(tf.reduce_sum(tf.cast(logits > 1.0, tf.int32)).numpy()))
            if self.smooth_calls > 7:
                logits = logits * 0.5
            if self.smooth_calls == 10:
                raise ValueError('bad batch at %d' % self.smooth_calls)
            labels = tf.one_hot(y, 3) * (1.0 - smoothing) + smoothing / 3.0
            return tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels, logits))

    class Pair:
        def __init__(self):
            tf.keras.utils.set_random_seed(0)
            self.a = Gated(_dense_model(), 1)
            self.b = Gated(_dense_model(), 2)

        def step(self, x, y):
            return self.a.train_step(x, y), self.b.train_step(x, y)

    def make():
        pair = Pair()
        return pair.step, pair

    def state(pair):
        return _loss_state(pair.a), _loss_state(pair.b)
    calls = [lambda i=i: _batch(i) for i in range(14)]
    jf = differential(make, calls, state)
    nested = _nested(jf)
    assert len(nested) == 2, janus.explain(jf)   # one per trainer
    for train_step in nested:
        (loss,) = _nested(train_step)
        assert janus.stats(loss)['graph_part_calls'] > 0, janus.explain(jf)


class Counted(tf.keras.Model):
    """A model counting its calls in Python, around a refused line in its call()."""

    def __init__(self):
        super().__init__()
        self.dense = tf.keras.layers.Dense(4)
        self.calls = 0

    def call(self, x):
        h = self.dense(x)
        print('norm', round(float(tf.norm(h).numpy()), 3))
        self.calls += 1
        return h * 2.0


def test_a_routed_models_counter_does_not_retrace_its_graphs():
    """The model's own counter (``self.calls += 1``) and janus's per-call ``call``
    dispatch are not Keras settings: the segments of the routed ``call`` keep their
    graphs (no LIBRARY_CONFIG miss per call)."""
    def make():
        tf.keras.utils.set_random_seed(1)
        model = Counted()
        model(tf.zeros([1, 3]))

        def step(x):
            return model(x)
        return step, model
    calls = [lambda i=i: ((tf.ones([2, 3]) * i,), {}) for i in range(12)]
    jf = differential(make, calls, lambda model: model.calls)
    (nested,) = _nested(jf)
    (split,) = nested.state.splits.values()
    parts = [p for p in split.slots if isinstance(p, janus.api.JanusFunction)]
    assert parts and all(janus.stats(p)['cache_misses'] == 0 for p in parts), janus.explain(jf)


# -- closures the step defines, called directly or by library code ----------------------

class StrategyTrainer(Trainer):
    """A step defining ``step_fn`` and running it with ``strategy.run`` (the default
    strategy), the refused line (a log read with ``.numpy()``) inside ``step_fn``."""

    def __init__(self, model):
        self.strategy = tf.distribute.get_strategy()
        with self.strategy.scope():
            super().__init__(model)
        self.logged = []

    def train_step(self, x, y):
        def step_fn(x, y):
            with tf.GradientTape() as tape:
                loss = self.loss_fn(y, self.model(x, training=True))
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
            self.steps += 1
            if self.steps % 3 == 0:
                self.logged.append(round(float(loss.numpy()), 4))
            return loss
        per_replica = self.strategy.run(step_fn, args=(x, y))
        return self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def counted_step(self, x, y):
        calls = 0

        def forward(x):
            nonlocal calls   # rebinds a cell: not routed, runs whole in Python
            calls += 1
            print('forward', float(tf.reduce_sum(x).numpy()))
            return self.model(x)
        logits = forward(x)
        return self.loss_fn(y, logits), calls


def _strategy_state(trainer):
    return [v.numpy() for v in trainer.model.trainable_variables], trainer.steps, \
        list(trainer.logged)


def test_a_closure_run_by_strategy_run_runs_through_janus():
    def make():
        tf.keras.utils.set_random_seed(0)
        trainer = StrategyTrainer(_dense_model())
        return trainer.train_step, trainer
    calls = [lambda i=i: _batch(i) for i in range(12)]
    jf = differential(make, calls, _strategy_state)
    (step_fn,) = _nested(jf)   # one janus function for every call's closure
    assert janus.stats(step_fn)['graph_calls'] >= 4, janus.explain(jf)
    assert 'step_fn runs through janus of its own' in janus.explain(jf)


def test_a_closure_rebinding_its_cells_runs_whole_in_python():
    def make():
        tf.keras.utils.set_random_seed(0)
        trainer = StrategyTrainer(_dense_model())
        return trainer.counted_step, trainer
    calls = [lambda i=i: _batch(i) for i in range(8)]
    jf = differential(make, calls)
    assert not _nested(jf), janus.explain(jf)


def test_a_map_fn_body_with_a_refused_line_is_not_routed():
    """``tf.map_fn`` converts its function with AutoGraph and traces it: handing it a
    janus function would only slow it down, so the body runs as map_fn runs it."""
    def make():
        log = []

        def body(row):
            h = tf.tanh(row * 2.0)
            log.append(round(float(tf.reduce_sum(h).numpy()), 4))
            return h * 3.0

        def f(x):
            return tf.reduce_sum(tf.map_fn(body, x))
        return f, log
    calls = [lambda i=i: ((tf.ones([3, 4]) * i,), {}) for i in range(8)]
    jf = differential(make, calls, list)
    assert not jf.state.routes.by_line, janus.explain(jf)


def test_a_local_def_with_defaults_and_no_cells_is_one_janus_function():
    class Smoother:
        def __init__(self):
            self.log = []

        def step(self, x, k):
            def smooth(y, m=k):
                h = tf.tanh(y) * m
                self.log.append(round(float(tf.reduce_sum(h).numpy()), 3))
                return h * 2.0
            return smooth(x)

    def make():
        smoother = Smoother()
        return smoother.step, smoother
    calls = [lambda i=i: ((tf.ones([3]) * i, 2.0 + i % 2), {}) for i in range(12)]
    jf = differential(make, calls, lambda s: list(s.log))
    assert len(_nested(jf)) == 1, janus.explain(jf)


def test_closures_routed_in_two_threads_keep_their_own_cells():
    """Two threads run the same cut step, each on its own trainer: each thread's
    closure proxy holds that thread's cells (no trainer reads the other's)."""
    import threading

    def make():
        tf.keras.utils.set_random_seed(0)
        return StrategyTrainer(_dense_model())
    eager = [make(), make()]
    converted = [make(), make()]
    shared = janus.function(StrategyTrainer.train_step)
    for trainer in eager:
        for i in range(8):
            trainer.train_step(*_batch(i)[0])
    errors = []

    def run(trainer):
        try:
            for i in range(8):
                shared(trainer, *_batch(i)[0])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=run, args=(t,)) for t in converted]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for e, c in zip(eager, converted):
        assert e.steps == c.steps == 8 and e.logged == c.logged
        for a, b in zip(e.model.trainable_variables, c.model.trainable_variables):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5)
