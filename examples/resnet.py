"""A small ResNet with batch normalization, evaluated between training steps
by flipping a ``training`` attribute (CNN, the paper's Table 2, batch 64).

The imperative program keeps a Python flag on the trainer object and one
``run_batch`` method for both phases: it trains when ``self.training`` is
true and only computes the loss (batch norm in inference mode, moving
statistics untouched) when it is false.  Every ``eval_every`` steps the
program flips the flag to evaluate a held-out batch, then flips it back —
exactly the case where a trace-based converter silently keeps the first
trace (the paper, §6.2).  janus guards the flag by value and keeps one graph
per phase.  Training counts its steps in Python (``self.global_step += 1``)
and sets a cosine learning-rate schedule computed with ``math.cos`` from
that count; evaluation logs its loss and tracks the best one for early
stopping (``if loss < self.best_loss: ... else: self.wait += 1``).

``symbolic`` is the hand-written ``tf.function``: the flag is an explicit
graph input (both phases in one graph), the counter a ``tf.Variable`` with
the schedule computed from it in the graph, early stopping outside the graph.

    python examples/resnet.py --mode eager|janus|symbolic [--steps 70] [--explain]
"""
import math

import keras
import numpy as np
import tensorflow as tf

import common

BATCH, EXAMPLES, CLASSES, SIZE = 64, 1000, 10, 16


class ResidualBlock(keras.layers.Layer):
    """conv-bn-relu-conv-bn plus the (projected, when strided) shortcut."""

    def __init__(self, filters, stride):
        super().__init__()
        self.conv1 = keras.layers.Conv2D(filters, 3, stride, padding='same', use_bias=False)
        self.bn1 = keras.layers.BatchNormalization()
        self.conv2 = keras.layers.Conv2D(filters, 3, padding='same', use_bias=False)
        self.bn2 = keras.layers.BatchNormalization()
        self.project = (keras.layers.Conv2D(filters, 1, stride, use_bias=False)
                        if stride != 1 else None)

    def call(self, x, training=False):
        h = tf.nn.relu(self.bn1(self.conv1(x), training=training))
        h = self.bn2(self.conv2(h), training=training)
        shortcut = self.project(x) if self.project is not None else x
        return tf.nn.relu(h + shortcut)


class SmallResNet(keras.Model):
    def __init__(self):
        super().__init__()
        self.stem = keras.layers.Conv2D(16, 3, padding='same', use_bias=False)
        self.stem_bn = keras.layers.BatchNormalization()
        self.blocks = [ResidualBlock(16, 1), ResidualBlock(32, 2), ResidualBlock(64, 2)]
        self.head = keras.layers.Dense(CLASSES)

    def call(self, x, training=False):
        h = tf.nn.relu(self.stem_bn(self.stem(x), training=training))
        for block in self.blocks:
            h = block(h, training=training)
        return self.head(tf.reduce_mean(h, axis=[1, 2]))


def images(seed, count):
    """Noisy class templates (CIFAR-sized colour images, generated in code)."""
    rng = np.random.default_rng(seed)
    templates = rng.normal(size=(CLASSES, SIZE, SIZE, 3)).astype('float32')
    labels = rng.integers(0, CLASSES, size=count).astype('int32')
    pictures = templates[labels] + 2.0 * rng.normal(size=(count, SIZE, SIZE, 3)).astype('float32')
    return [(tf.constant(pictures[i:i + BATCH]), tf.constant(labels[i:i + BATCH]))
            for i in range(0, count, BATCH)]


class ResNet(common.Workload):
    name, category, unit = 'ResNet', 'CNN', 'images'
    steps, warmup = 70, 10     # 80 training steps, 16 evaluations: 96 calls
    eval_every = 5             # steps between evaluations (self.training = False)
    base_lr = 0.05
    decay_steps = 100          # cosine decay of the learning rate to 0 over this many steps
    patience = 3               # evaluations without a better loss before stopping is flagged

    def __init__(self, mode, seed=0):
        super().__init__(mode, seed)
        self.model = SmallResNet()
        self.model(tf.zeros([1, SIZE, SIZE, 3]))
        self.optimizer = keras.optimizers.SGD(self.base_lr, momentum=0.9)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.train_data = images(seed, EXAMPLES)
        self.eval_data = images(seed + 1, BATCH)[0]
        self.training = True
        self.global_step = 0            # training steps taken
        self.eval_losses = []
        self.best_loss = float('inf')   # early stopping on the evaluation loss
        self.wait = 0
        self.stop_training = False      # a training loop would stop here; the benchmark goes on
        self.position = 0
        self.compiled_batch = self.compile(self.run_batch, self.symbolic())

    def run_batch(self, pictures, labels):
        """The imperative program: trains or evaluates, by ``self.training``."""
        if self.training:
            self.global_step += 1
            progress = min(self.global_step, self.decay_steps) / self.decay_steps
            self.optimizer.learning_rate.assign(
                0.5 * self.base_lr * (1 + math.cos(math.pi * progress)))
        with tf.GradientTape() as tape:
            logits = self.model(pictures, training=self.training)
            loss = self.loss_fn(labels, logits)
        if self.training:
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        else:
            self.note_eval_loss(loss)
        return loss

    def note_eval_loss(self, loss):
        """Early stopping on the evaluation loss, as a Keras callback does."""
        self.eval_losses.append(loss)
        if loss < self.best_loss:
            self.best_loss = loss
            self.wait = 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stop_training = True

    def symbolic(self):
        """The same program for ``tf.function``: the phase is a graph input, both
        phases in one graph (``tf.cond``); the step counter is a ``tf.Variable`` and
        the cosine schedule is computed from it in the graph; early stopping looks
        at the evaluation loss outside the graph, as a Keras callback does."""
        counter = tf.Variable(0, dtype=tf.int64, trainable=False)

        @tf.function(input_signature=[tf.TensorSpec([None, SIZE, SIZE, 3]),
                                      tf.TensorSpec([None], tf.int32), tf.TensorSpec([], tf.bool)])
        def graph(pictures, labels, training):
            def train():
                step = counter.assign_add(1)
                progress = (tf.cast(tf.minimum(step, self.decay_steps), tf.float64)
                            / self.decay_steps)
                self.optimizer.learning_rate.assign(tf.cast(
                    0.5 * self.base_lr * (1 + tf.cos(math.pi * progress)), tf.float32))
                with tf.GradientTape() as tape:
                    loss = self.loss_fn(labels, self.model(pictures, training=True))
                grads = tape.gradient(loss, self.model.trainable_variables)
                self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
                return loss

            def evaluate():
                return self.loss_fn(labels, self.model(pictures, training=False))
            return tf.cond(training, train, evaluate)

        def run_batch(pictures, labels):
            loss = graph(pictures, labels, tf.constant(self.training))
            if not self.training:
                self.note_eval_loss(loss)   # outside the graph
            return loss
        return run_batch

    def step(self):
        units = 0
        if self.position % self.eval_every == 0:   # evaluate before training, like users do
            self.training = False
            self.compiled_batch(*self.eval_data)
            self.training = True
            units += BATCH
        pictures, labels = self.train_data[self.position % len(self.train_data)]
        self.position += 1
        return self.compiled_batch(pictures, labels), units + int(pictures.shape[0])


if __name__ == '__main__':
    common.main(ResNet)
