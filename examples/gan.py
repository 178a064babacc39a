"""A generative adversarial network on synthetic digits: two optimizer steps
per iteration, losses logged in Python lists (GAN, the paper's Table 2: AN
on MNIST, batch 128).

The imperative program: a fully connected generator and discriminator
(Keras ``Sequential``), one ``train_step`` that updates the discriminator on
real and generated images, then the generator through the discriminator,
and appends both losses to ``self.history`` for monitoring — a Python-state
write that janus defers until the graph's run succeeded.  Real images are
the noisy digit templates of ``lenet.py`` (1010 of them: the last batch of
every epoch is short).  ``symbolic`` is the same step as a ``tf.function``
with ``None`` batch dimensions, the history appended outside the graph.

    python examples/gan.py --mode eager|janus|symbolic [--steps 60]
"""
import keras
import numpy as np
import tensorflow as tf

import common
import lenet

BATCH, NOISE, PIXELS = 128, 32, 28 * 28


def generator():
    return keras.Sequential([keras.Input((NOISE,)), keras.layers.Dense(128),
                             keras.layers.LeakyReLU(0.2), keras.layers.Dense(256),
                             keras.layers.LeakyReLU(0.2),
                             keras.layers.Dense(PIXELS, activation='tanh')])


def discriminator():
    return keras.Sequential([keras.Input((PIXELS,)), keras.layers.Dense(256),
                             keras.layers.LeakyReLU(0.2), keras.layers.Dense(128),
                             keras.layers.LeakyReLU(0.2), keras.layers.Dense(1)])


def real_batches(seed):
    images, _ = lenet.digits(seed)
    flat = np.tanh(images.reshape(len(images), PIXELS) / 2)
    rng = np.random.default_rng(seed + 1)
    return [(tf.constant(flat[i:i + BATCH]),
             tf.constant(rng.normal(size=(min(BATCH, len(flat) - i), NOISE)).astype('float32')))
            for i in range(0, len(flat), BATCH)]


class GAN(common.Workload):
    name, category, unit = 'GAN', 'GAN', 'images'
    steps, warmup = 60, 10

    def __init__(self, mode, seed=0):
        super().__init__(mode, seed)
        self.generator, self.discriminator = generator(), discriminator()
        self.g_optimizer = keras.optimizers.Adam(2e-4, beta_1=0.5)
        self.d_optimizer = keras.optimizers.Adam(2e-4, beta_1=0.5)
        self.bce = keras.losses.BinaryCrossentropy(from_logits=True)
        self.history = []
        self.data = real_batches(seed)
        self.position = 0
        symbolic = tf.function(self.losses, input_signature=[
            tf.TensorSpec([None, PIXELS]), tf.TensorSpec([None, NOISE])])
        self.compiled_step = self.compile(self.train_step, self.log_history(symbolic))

    def losses(self, real, noise):
        """Discriminator step, then generator step; returns both losses."""
        with tf.GradientTape() as tape:
            fake = self.generator(noise, training=True)
            real_logits = self.discriminator(real, training=True)
            fake_logits = self.discriminator(fake, training=True)
            d_loss = (self.bce(tf.ones_like(real_logits), real_logits)
                      + self.bce(tf.zeros_like(fake_logits), fake_logits))
        d_vars = self.discriminator.trainable_variables
        self.d_optimizer.apply_gradients(zip(tape.gradient(d_loss, d_vars), d_vars))
        with tf.GradientTape() as tape:
            fake_logits = self.discriminator(self.generator(noise, training=True), training=True)
            g_loss = self.bce(tf.ones_like(fake_logits), fake_logits)
        g_vars = self.generator.trainable_variables
        self.g_optimizer.apply_gradients(zip(tape.gradient(g_loss, g_vars), g_vars))
        return d_loss, g_loss

    def train_step(self, real, noise):
        """The imperative program: both steps, then monitoring state in Python."""
        d_loss, g_loss = self.losses(real, noise)
        self.history.append((d_loss, g_loss))
        return d_loss + g_loss

    def log_history(self, graph):
        def step(real, noise):
            d_loss, g_loss = graph(real, noise)
            self.history.append((d_loss, g_loss))
            return d_loss + g_loss
        return step

    def step(self):
        real, noise = self.data[self.position % len(self.data)]
        self.position += 1
        return self.compiled_step(real, noise), int(real.shape[0])


if __name__ == '__main__':
    common.main(GAN)
