"""janus.Optimizer: one graph per training step, the wrapped optimizer's behaviour.

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

import janus
from conftest import assert_same


def make_model():
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation='tanh'),
                              keras.layers.Dense(1)])
    return model


def batches(n):
    return [(tf.random.stateless_normal([16, 5], seed=[i, 1]),
             tf.random.stateless_normal([16, 1], seed=[i, 2])) for i in range(n)]


def loss_of(model, x, y):
    return tf.reduce_mean((model(x, training=True) - y) ** 2)


@pytest.mark.parametrize('make_optimizer', [
    lambda: keras.optimizers.SGD(0.1, momentum=0.9),
    lambda: keras.optimizers.Adam(keras.optimizers.schedules.ExponentialDecay(0.01, 3, 0.5)),
])
def test_minimize_matches_the_plain_optimizer_with_one_graph(strict, make_optimizer):
    eager_model, janus_model = make_model(), make_model()
    eager_opt = make_optimizer()
    opt = janus.Optimizer(make_optimizer())
    for x, y in batches(12):
        with tf.GradientTape() as tape:
            eager_loss = loss_of(eager_model, x, y)
        grads = tape.gradient(eager_loss, eager_model.trainable_variables)
        eager_opt.apply_gradients(zip(grads, eager_model.trainable_variables))
        loss = opt.minimize(lambda: loss_of(janus_model, x, y), janus_model.trainable_variables)
        assert_same(eager_loss, loss)
        for a, b in zip(eager_model.weights, janus_model.weights):
            assert_same(tf.convert_to_tensor(a), tf.convert_to_tensor(b))
        assert int(eager_opt.iterations) == int(opt.iterations)
    stats = janus.stats(opt._minimize)
    # A new lambda every step: guarded by its code, its batch read afresh.
    assert stats['graphs_built'] == 1 and stats['graph_calls'] == 9
    assert float(opt.learning_rate) == float(eager_opt.learning_rate)


def test_failing_assertion_in_the_step_updates_nothing(strict):
    model, eager_model = make_model(), make_model()
    opt, eager_opt = janus.Optimizer(keras.optimizers.SGD(0.1)), keras.optimizers.SGD(0.1)

    def checked_loss(model, x, y):
        loss = loss_of(model, x, y)
        assert loss < 50.0, 'diverged'
        return loss

    data = batches(6)
    data.insert(4, (data[0][0], data[0][1] * 100.0))
    for x, y in data:
        outcomes = []
        for m, o in ((eager_model, None), (model, opt)):
            try:
                if o is None:
                    with tf.GradientTape() as tape:
                        loss = checked_loss(m, x, y)
                    eager_opt.apply_gradients(zip(tape.gradient(loss, m.trainable_variables),
                                                  m.trainable_variables))
                else:
                    o.minimize(lambda: checked_loss(m, x, y), m.trainable_variables)
                outcomes.append('ok')
            except AssertionError as e:
                outcomes.append(str(e))
        assert outcomes[0] == outcomes[1]
        for a, b in zip(eager_model.weights, model.weights):
            assert_same(tf.convert_to_tensor(a), tf.convert_to_tensor(b))
    assert janus.stats(opt._minimize)['fallbacks'] == 1


def test_bad_use_says_what_to_do():
    with pytest.raises(janus.JanusUsageError, match='Keras optimizer'):
        janus.Optimizer(object())
    opt = janus.Optimizer(keras.optimizers.SGD(0.1))
    with pytest.raises(janus.JanusUsageError, match='callable loss'):
        opt.minimize(tf.constant(1.0), [])


def test_distributed_optimizer_says_what_is_missing(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, 'horovod.tensorflow', None)   # as if not installed
    with pytest.raises(janus.JanusUsageError, match='install_horovod'):
        janus.DistributedOptimizer(keras.optimizers.SGD(0.1))


def test_distributed_optimizer_needs_hvd_init():
    hvd = pytest.importorskip('horovod.tensorflow')
    if hvd.is_initialized():
        pytest.skip('horovod already initialized in this process')
    with pytest.raises(janus.JanusUsageError, match=r'hvd.init\(\)'):
        janus.DistributedOptimizer(keras.optimizers.SGD(0.1))


def test_none_gradients_and_non_scalar_losses_behave_as_eagerly(strict):
    """A variable the loss does not use (None gradient: Keras skips it, with a
    warning) and a vector loss (the tape sums it): the same weights as eagerly."""
    def build():
        model = make_model()
        unused = keras.Variable(tf.ones([3]), name='unused')
        return model, unused

    (eager_model, eager_unused), (model, unused) = build(), build()
    eager_opt = keras.optimizers.SGD(0.002, momentum=0.5)   # small: a summed loss is large
    opt = janus.Optimizer(keras.optimizers.SGD(0.002, momentum=0.5))
    for x, y in batches(8):
        with tf.GradientTape() as tape:
            vector_loss = (eager_model(x, training=True) - y) ** 2
        variables = eager_model.trainable_variables + [eager_unused]
        eager_opt.apply_gradients(zip(tape.gradient(vector_loss, variables), variables))
        opt.minimize(lambda: (model(x, training=True) - y) ** 2,
                     model.trainable_variables + [unused])
        for a, b in zip(eager_model.weights + [eager_unused], model.weights + [unused]):
            # The vector loss's summed gradient rounds differently in a graph.
            np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-4, atol=1e-5)
    assert np.array(unused).tolist() == [1.0, 1.0, 1.0]   # skipped, as eagerly
    assert janus.stats(opt._minimize)['graph_calls'] == 5
