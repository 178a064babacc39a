"""Paper-style programs, eager vs janus on fresh objects: an LSTM language model
carrying ``self.state`` (a list of tensors) across batches, a GAN (two optimizer
steps per iteration) and a small ResNet whose batch-norm flag flips for
evaluation.  Returns and all weights compared after every call."""
import keras
import tensorflow as tf

import janus
from conftest import assert_same


def weights_of(*objects):
    return [tf.convert_to_tensor(v) for o in objects for v in o.weights]


class LanguageModel:
    def __init__(self):
        keras.utils.set_random_seed(4)
        self.emb = keras.layers.Embedding(40, 8)
        self.emb.build((None,))
        self.cell = keras.layers.LSTMCell(16)
        self.cell.build((None, 8))
        self.out = keras.layers.Dense(40)
        self.out.build((None, 16))
        self.state = [tf.zeros([4, 16]), tf.zeros([4, 16])]
        self.opt = keras.optimizers.Adam(1e-2)

    def step(self, tokens):
        variables = (self.emb.trainable_variables + self.cell.trainable_variables
                     + self.out.trainable_variables)
        with tf.GradientTape() as tape:
            state = self.state
            loss = 0.0
            for t in range(tokens.shape[1] - 1):
                h, state = self.cell(self.emb(tokens[:, t]), state)
                loss += tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
                    tokens[:, t + 1], self.out(h), from_logits=True))
            loss = loss / (tokens.shape[1] - 1)
        self.opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        self.state = [tf.stop_gradient(s) for s in state]
        return loss


def test_lstm_language_model_carries_state_in_one_graph(strict):
    eager, model = LanguageModel(), LanguageModel()
    jf = janus.function(LanguageModel.step)
    for i in range(8):
        tokens = tf.random.stateless_uniform([4, 7], seed=[i, 0], maxval=40, dtype=tf.int32)
        assert_same(eager.step(tokens), jf(model, tokens))
        assert_same(eager.state, model.state)
        assert_same(weights_of(eager.emb, eager.cell, eager.out),
                    weights_of(model.emb, model.cell, model.out))
    assert janus.stats(jf)['graphs_built'] == 1 and janus.stats(jf)['graph_calls'] == 5


def make_gan():
    keras.utils.set_random_seed(6)
    g = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation='relu'),
                          keras.layers.Dense(2)])
    d = keras.Sequential([keras.Input((2,)), keras.layers.Dense(8, activation='relu'),
                          keras.layers.Dense(1)])
    gopt, dopt = keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3)
    bce = keras.losses.BinaryCrossentropy(from_logits=True)

    def step(real, z):
        with tf.GradientTape() as tape:
            fake = g(z, training=True)
            d_loss = bce(tf.ones_like(real[:, :1]), d(real)) + bce(tf.zeros_like(real[:, :1]),
                                                                   d(fake))
        dopt.apply_gradients(zip(tape.gradient(d_loss, d.trainable_variables),
                                 d.trainable_variables))
        with tf.GradientTape() as tape:
            g_loss = bce(tf.ones_like(real[:, :1]), d(g(z, training=True)))
        gopt.apply_gradients(zip(tape.gradient(g_loss, g.trainable_variables),
                                 g.trainable_variables))
        return d_loss, g_loss
    return step, (g, d)


def test_gan_two_optimizer_steps_in_one_graph(strict):
    eager_step, eager_nets = make_gan()
    plain, nets = make_gan()
    jf = janus.function(plain)
    for i in range(8):
        real = tf.random.stateless_normal([16, 2], seed=[i, 1])
        z = tf.random.stateless_normal([16, 4], seed=[i, 2])
        assert_same(eager_step(real, z), jf(real, z))
        assert_same(weights_of(*eager_nets), weights_of(*nets))
    assert janus.stats(jf)['graphs_built'] == 1 and janus.stats(jf)['graph_calls'] == 5


class Block(keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.conv = keras.layers.Conv2D(4, 3, padding='same')
        self.bn = keras.layers.BatchNormalization()

    def call(self, x, training=False):
        return tf.nn.relu(x + self.bn(self.conv(x), training=training))


class ResNet(keras.Model):
    def __init__(self):
        super().__init__()
        self.stem = keras.layers.Conv2D(4, 3, padding='same')
        self.blocks = [Block(), Block()]
        self.head = keras.layers.Dense(3)

    def call(self, x, training=False):
        h = self.stem(x)
        for block in self.blocks:
            h = block(h, training=training)
        return self.head(tf.reduce_mean(h, axis=[1, 2]))


def test_resnet_trains_and_evaluates_with_the_batch_norm_flag(strict):
    def build():
        keras.utils.set_random_seed(8)
        net = ResNet()
        net(tf.zeros([2, 6, 6, 3]), training=True)
        return net
    eager_net, net = build(), build()
    eager_opt = keras.optimizers.SGD(0.01)
    opt = janus.Optimizer(keras.optimizers.SGD(0.01))
    evaluate = janus.function(lambda x: net(x, training=False))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for i in range(7):
        x = tf.random.stateless_normal([4, 6, 6, 3], seed=[i, 3])
        y = tf.random.stateless_uniform([4], seed=[i, 4], maxval=3, dtype=tf.int32)
        with tf.GradientTape() as tape:
            expected = loss(y, eager_net(x, training=True))
        eager_opt.apply_gradients(zip(tape.gradient(expected, eager_net.trainable_variables),
                                      eager_net.trainable_variables))
        actual = opt.minimize(lambda: loss(y, net(x, training=True)), net.trainable_variables)
        assert_same(expected, actual)
        assert_same(eager_net(x, training=False), evaluate(x))
        assert_same(weights_of(eager_net), weights_of(net))   # moving statistics included
    assert janus.stats(opt._minimize)['graph_calls'] == 4
    assert janus.stats(evaluate)['graph_calls'] == 4
