"""A generative adversarial network on synthetic digits: two optimizer steps
per iteration, losses logged in Python lists (GAN, the paper's Table 2: AN
on MNIST, batch 128).

The imperative program: a fully connected generator and discriminator
(Keras ``Sequential``), one ``train_step`` that updates the discriminator on
real and generated images, then the generator through the discriminator.
Around that, what GAN training code has: a Python step counter, both
learning rates decayed linearly to zero after ``decay_start`` steps (a
Python float, set on the optimizers), both losses appended to
``self.history`` every ``log_every`` steps, and the best generator loss and
its step remembered (where a checkpoint would be written).  Real images are
the noisy digit templates of ``lenet.py`` (1010 of them: the last batch of
every epoch is short).  ``symbolic`` is the same program as a
``tf.function`` with ``None`` batch dimensions, the counter a
``tf.Variable`` with the schedule computed from it in the graph, the
history and best loss kept outside the graph.

    python examples/gan.py --mode eager|janus|symbolic [--steps 80] [--explain]
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


def real_batches(seed, count=lenet.EXAMPLES):
    images, _ = lenet.digits(seed, count)
    flat = np.tanh(images.reshape(len(images), PIXELS) / 2)
    rng = np.random.default_rng(seed + 1)
    return [(tf.constant(flat[i:i + BATCH]),
             tf.constant(rng.normal(size=(min(BATCH, len(flat) - i), NOISE)).astype('float32')))
            for i in range(0, len(flat), BATCH)]


class GAN(common.Workload):
    name, category, unit = 'GAN', 'GAN', 'images'
    steps, warmup = 80, 20     # 100 training steps in all
    examples = lenet.EXAMPLES  # real images in the data set
    base_lr = 2e-4
    decay_start, decay_steps = 50, 200   # linear decay of both learning rates after decay_start
    log_every = 5                        # both losses appended to self.history every N steps

    def __init__(self, mode, seed=0):
        super().__init__(mode, seed)
        self.generator, self.discriminator = generator(), discriminator()
        self.g_optimizer = keras.optimizers.Adam(self.base_lr, beta_1=0.5)
        self.d_optimizer = keras.optimizers.Adam(self.base_lr, beta_1=0.5)
        self.bce = keras.losses.BinaryCrossentropy(from_logits=True)
        self.history = []
        self.global_step = 0
        self.lr = self.base_lr
        self.best_g_loss, self.best_step = float('inf'), 0   # where a checkpoint would be saved
        self.data = real_batches(seed, self.examples)
        self.position = 0
        self.compiled_step = self.compile(self.train_step, self.symbolic())

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
        """The imperative program: a step counter, a linearly decayed learning rate
        (a Python float), both steps, then monitoring state in Python."""
        self.global_step += 1
        if self.global_step > self.decay_start:
            self.lr = self.base_lr * max(
                0.0, 1.0 - (self.global_step - self.decay_start) / self.decay_steps)
            self.g_optimizer.learning_rate.assign(self.lr)
            self.d_optimizer.learning_rate.assign(self.lr)
        d_loss, g_loss = self.losses(real, noise)
        if self.global_step % self.log_every == 0:
            self.history.append((d_loss, g_loss))
        if g_loss < self.best_g_loss:
            self.best_g_loss = g_loss
            self.best_step = self.global_step
        return d_loss + g_loss

    def symbolic(self):
        """The same program for ``tf.function``: the counter is a ``tf.Variable`` and
        the schedule is computed from it in the graph; the history and the best
        loss are kept outside the graph (a tf.function cannot append to a list)."""
        counter = tf.Variable(0, dtype=tf.int64, trainable=False)

        @tf.function(input_signature=[tf.TensorSpec([None, PIXELS]), tf.TensorSpec([None, NOISE])])
        def graph(real, noise):
            step = counter.assign_add(1)
            decay = 1.0 - tf.cast(step - self.decay_start, tf.float64) / self.decay_steps
            lr = tf.cast(self.base_lr * tf.clip_by_value(decay, 0.0, 1.0), tf.float32)
            self.g_optimizer.learning_rate.assign(lr)
            self.d_optimizer.learning_rate.assign(lr)
            return self.losses(real, noise)

        def train_step(real, noise):
            d_loss, g_loss = graph(real, noise)
            self.global_step += 1   # the driver's own count, for the logging decision
            if self.global_step % self.log_every == 0:
                self.history.append((d_loss, g_loss))
            if g_loss < self.best_g_loss:
                self.best_g_loss = g_loss
                self.best_step = self.global_step
            return d_loss + g_loss
        return train_step

    def step(self):
        real, noise = self.data[self.position % len(self.data)]
        self.position += 1
        return self.compiled_step(real, noise), int(real.shape[0])


if __name__ == '__main__':
    common.main(GAN)
