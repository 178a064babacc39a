"""Keras models inside converted functions and janus.Optimizer steps.

Your own subclassed models run through Keras's __call__ with their converted
``call`` (Python control flow included); functional and Sequential models
and ``training=`` flags behave as eagerly.
"""
import keras
import pytest
import tensorflow as tf

import janus
from conftest import assert_same, differential


class Gated(keras.Model):
    """A subclassed model whose call() branches on a tensor and on `training`."""

    def __init__(self):
        super().__init__()
        self.a = keras.layers.Dense(6, activation='tanh')
        self.b = keras.layers.Dense(6)
        self.norm = keras.layers.BatchNormalization()
        self.out = keras.layers.Dense(1)
        # Built up front: a layer first used on a later call would create its
        # variables then (janus runs such a call imperatively, as it must).
        for layer, width in ((self.a, 4), (self.b, 6), (self.norm, 6), (self.out, 6)):
            layer.build((None, width))

    def call(self, x, training=None):
        h = self.a(x)
        if tf.reduce_mean(h) > 0:
            h = self.b(h)
        else:
            h = -h
        if training:
            h = self.norm(h, training=True)
        return self.out(h)


def functional():
    inputs = keras.Input((4,))
    h = keras.layers.Dense(6, activation='relu')(inputs)
    h = keras.layers.Dropout(0.0)(h)
    return keras.Model(inputs, keras.layers.Dense(1)(h))


def make(builder):
    def build():
        keras.utils.set_random_seed(11)
        model = builder()
        model(tf.zeros([2, 4]))
        # SGD, not Adam: the dense bias before batch norm has a gradient that is
        # zero up to rounding, which Adam would amplify into float noise.
        opt = janus.Optimizer(keras.optimizers.SGD(0.05, momentum=0.9))
        plain = keras.optimizers.SGD(0.05, momentum=0.9)
        return model, opt, plain
    return build


def batch(i, sign=1.0):
    return (sign * tf.abs(tf.random.stateless_normal([8, 4], seed=[i, 3])),
            tf.random.stateless_normal([8, 1], seed=[i, 4]))


def weights(model):
    return [tf.convert_to_tensor(v) for v in model.weights]


def test_subclassed_model_with_control_flow_in_a_converted_function(strict):
    def make_fn():
        keras.utils.set_random_seed(5)
        model = Gated()
        model(tf.zeros([2, 4]))

        def predict(x, training):
            return model(x, training=training)
        return predict, model
    calls = [((batch(i)[0], False), {}) for i in range(5)]
    calls += [((batch(9, -1.0)[0], False), {}), ((batch(10)[0], True), {}),
              ((batch(11)[0], True), {}), ((batch(12, -1.0)[0], True), {})]
    jf = differential(make_fn, calls, state=weights)
    assert janus.stats(jf)['fallbacks'] >= 1 and janus.stats(jf)['graphs_built'] >= 2


def test_one_sided_variables_under_a_tape_are_not_a_tf_cond():
    def make_fn():
        keras.utils.set_random_seed(2)
        dense = keras.layers.Dense(3)
        dense.build((None, 3))

        def grads(x):
            with tf.GradientTape() as tape:
                h = dense(x) if tf.reduce_mean(x) > 0 else -x
                loss = tf.reduce_sum(h ** 2)
            return tape.gradient(loss, dense.trainable_variables)
        return grads, dense
    signs = [1, -1, 1, -1, 1, -1, 1]
    jf = differential(make_fn, [((tf.ones([2, 3]) * s,), {}) for s in signs])
    assert 'read different variables' in janus.explain(jf)


def _train(builder, signs):
    eager_model, _, eager_opt = make(builder)()
    model, opt, _ = make(builder)()
    loss_fn = keras.losses.MeanSquaredError()
    for i, sign in enumerate(signs):
        x, y = batch(i, sign)
        with tf.GradientTape() as tape:
            expected = loss_fn(y, eager_model(x, training=True))
        grads = tape.gradient(expected, eager_model.trainable_variables)
        eager_opt.apply_gradients(zip(grads, eager_model.trainable_variables))
        loss = opt.minimize(lambda: loss_fn(y, model(x, training=True)),
                            model.trainable_variables)
        assert_same(expected, loss, 'step %d loss' % i)
        for a, b in zip(weights(eager_model), weights(model)):
            assert_same(a, b, 'step %d weights' % i)
    return janus.stats(opt._minimize)


def test_subclassed_model_trains_with_janus_optimizer():
    stats = _train(Gated, [1.0] * 6 + [-1.0] + [1.0] * 3)
    # The branch flips at step 7: the step falls back. A tf.cond there would give
    # self.b zero gradients where eager gives None (momentum would still move it),
    # so the next graph assumes the usual outcome again (graphgen/plan.py): steps
    # 8-10 run it, and a step that takes the other path would run imperatively.
    assert stats['graph_calls'] == 6 and stats['fallbacks'] == 1


def test_speculated_branches_train_as_graphs(strict):
    stats = _train(Gated, [1.0] * 10)
    assert stats['graphs_built'] == 1 and stats['graph_calls'] == 7


def test_functional_model_trains_with_one_graph(strict):
    stats = _train(functional, [1.0] * 10)
    assert stats['graphs_built'] == 1 and stats['graph_calls'] == 7


def _dense_head(**options):
    return keras.layers.Dense(1, name='head', **options)


def _sequential_head(**options):   # Keras 3: a Sequential has no input spec of its own
    return keras.Sequential([keras.layers.Dense(1, name='head', **options)], name='seq')


@pytest.mark.parametrize('make_head', [_dense_head, _sequential_head],
                         ids=['dense', 'sequential'])
def test_a_layer_input_spec_error_is_keras_own_in_a_relaxed_graph(make_head):
    """A probe whose head is replaced between calls (a new width), then called with
    the old width: eagerly Keras's input-spec check raises its ValueError before
    the MatMul.  A graph with relaxed shapes knows that width as None, where the
    check passes, and its MatMul raised TF's InvalidArgumentError after the call
    had pulled from an outside iterator (no re-run could undo that).  janus traces
    such a layer with exact shapes (tests/fuzz_findings_breaks/ finding 14)."""
    class Probe:
        def __init__(self):
            self.head = make_head(kernel_initializer='ones')
            self.batches = iter(tf.data.Dataset.range(100))

        def score(self, feats, batches):
            offset = tf.cast(next(batches), tf.float32) * 0.01
            return self.head(tf.reshape(feats + offset, [1, -1]))

        def replace_head(self):
            self.head = make_head(kernel_initializer='zeros', bias_initializer='ones')

    eager_probe, janus_probe = Probe(), Probe()
    eager_fn, janus_fn = eager_probe.score, janus.function(janus_probe.score)
    for step, (width, scale) in enumerate([(3, 1.0), (3, 0.5), (3, 2.0), (3, 1.5), (0, 0),
                                           (5, 1.0), (5, 0.5), (5, 0.25), (3, 1.0), (5, 2.0)]):
        if not width:   # a new head, for features of another width
            eager_probe.replace_head()
            janus_probe.replace_head()
            continue
        outcomes = []
        for fn, probe in ((eager_fn, eager_probe), (janus_fn, janus_probe)):
            try:
                outcomes.append(('ok', fn(tf.constant([scale] * width), probe.batches)
                                 .numpy().tolist()))
            except Exception as e:  # noqa: BLE001 - compared below
                outcomes.append((type(e).__name__, str(e)))
        assert outcomes[0] == outcomes[1], (step, outcomes, janus.explain(janus_fn))
    assert next(eager_probe.batches).numpy() == next(janus_probe.batches).numpy()
    assert janus.stats(janus_fn)['graph_calls'] > 0, janus.explain(janus_fn)


def test_a_flattened_input_keeps_one_relaxed_graph_for_every_batch_size():
    """``dense(tf.reshape(x, [tf.shape(x)[0], -1]))``: the Dense's input width is known
    only at run time in a graph with a relaxed batch size.  No call pulls from an
    outside iterator, so a wrong width would re-run imperatively and raise Keras's own
    error: the one relaxed graph stays (no graph per batch size)."""
    dense = keras.layers.Dense(2, kernel_initializer='ones')
    dense.build((None, 12))

    def head(x):
        return dense(tf.reshape(x, [tf.shape(x)[0], -1]))

    jf = janus.function(head)
    for n in [2, 3, 2, 4, 5, 2, 6, 3, 7, 8, 2, 9]:
        x = tf.ones([n, 4, 3])
        assert_same(head(x), jf(x), 'batch %d' % n)
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 2 and stats['graph_calls'] >= 7, janus.explain(jf)


class _Weightless(tf.keras.layers.Layer):
    def call(self, v):
        return v * 2.0


def test_a_layer_first_called_in_a_branch_that_does_not_run_stays_unbuilt():
    """Fuzz finding 44-1: eagerly a layer whose only call is in a branch never taken
    is never built; janus traced the branch, and Keras marked the layer built at
    trace time.  Now its first call in a branch is refused and the branch's outcome
    assumed; the call that takes the branch (call 8) runs imperatively and builds it."""
    def make():
        layer = _Weightless()

        def f(x, step):
            y = x + 1.0
            if step % 2 == 0:   # a relaxed number's test: a real tf.cond, and within it
                if tf.reduce_sum(x) < 100.0:   # every test is one too
                    y = y * 2.0
                else:
                    y = layer(x)
            return y
        return f, layer
    scales = [float(i) for i in range(8)] + [300.0, 1.0, 2.0, 400.0, 3.0]
    calls = [((tf.constant([s, 1.0]), 2 * i), {}) for i, s in enumerate(scales)]
    jf = differential(make, calls, state=lambda layer: layer.built)
    assert janus.stats(jf)['graph_calls'] >= 6
    assert 'is not built yet and its first call is inside a tensor-dependent branch' \
        in janus.explain(jf)
