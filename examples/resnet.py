"""A small ResNet with batch normalization, evaluated between training steps
by flipping a ``training`` attribute (CNN, the paper's Table 2, batch 64).

The imperative program keeps a Python flag on the trainer object and one
``run_batch`` method for both phases: it trains when ``self.training`` is
true and only computes the loss (batch norm in inference mode, moving
statistics untouched) when it is false.  Every ``eval_every`` steps the
program flips the flag to evaluate a held-out batch, then flips it back —
exactly the case where a trace-based converter silently keeps the first
trace (the paper, §6.2).  janus guards the flag by value and keeps one graph
per phase.  ``symbolic`` is the hand-written ``tf.function`` that takes the
flag as an explicit argument (one concrete graph per phase).

    python examples/resnet.py --mode eager|janus|symbolic [--steps 40]
"""
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
    steps, warmup = 40, 10
    eval_every = 5        # steps between evaluations (self.training = False)

    def __init__(self, mode, seed=0):
        super().__init__(mode, seed)
        self.model = SmallResNet()
        self.model(tf.zeros([1, SIZE, SIZE, 3]))
        self.optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.train_data = images(seed, EXAMPLES)
        self.eval_data = images(seed + 1, BATCH)[0]
        self.training = True
        self.eval_losses = []
        self.position = 0
        symbolic = tf.function(self.symbolic_batch, input_signature=[
            tf.TensorSpec([None, SIZE, SIZE, 3]), tf.TensorSpec([None], tf.int32),
            tf.TensorSpec([], tf.bool)])
        self.compiled_batch = self.compile(self.run_batch, self.compiled_symbolic(symbolic))

    def run_batch(self, pictures, labels):
        """The imperative program: trains or evaluates, by ``self.training``."""
        with tf.GradientTape() as tape:
            logits = self.model(pictures, training=self.training)
            loss = self.loss_fn(labels, logits)
        if self.training:
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss

    def compiled_symbolic(self, graph):
        return lambda pictures, labels: graph(pictures, labels, tf.constant(self.training))

    def symbolic_batch(self, pictures, labels, training):
        """Hand-written: the phase is a graph input, both phases in one graph (tf.cond)."""
        def train():
            with tf.GradientTape() as tape:
                loss = self.loss_fn(labels, self.model(pictures, training=True))
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
            return loss

        def evaluate():
            return self.loss_fn(labels, self.model(pictures, training=False))
        return tf.cond(training, train, evaluate)

    def step(self):
        units = 0
        if self.position % self.eval_every == 0:   # evaluate before training, like users do
            self.training = False
            self.eval_losses.append(float(self.compiled_batch(*self.eval_data)))
            self.training = True
            units += BATCH
        pictures, labels = self.train_data[self.position % len(self.train_data)]
        self.position += 1
        return self.compiled_batch(pictures, labels), units + int(pictures.shape[0])


if __name__ == '__main__':
    common.main(ResNet)
