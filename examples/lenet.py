"""LeNet-5 on synthetic MNIST-like digits (CNN, the paper's Table 2, batch 50).

The imperative program: a Keras ``Sequential`` LeNet, SGD with momentum, one
``train_step`` per batch.  The data set (1010 28x28 images: a noisy template
per class) does not divide by the batch size, so every epoch ends with a
batch of 10 — janus relaxes that dimension instead of building a graph per
batch size.  ``symbolic`` is the same step as a ``tf.function`` with a
``None`` batch dimension.

    python examples/lenet.py --mode eager|janus|symbolic [--steps 60]
"""
import keras
import numpy as np
import tensorflow as tf

import common

BATCH, EXAMPLES, CLASSES = 50, 1010, 10


def digits(seed, count=EXAMPLES):
    """Noisy class templates: learnable, generated in code, no download."""
    rng = np.random.default_rng(seed)
    templates = rng.normal(size=(CLASSES, 28, 28, 1)).astype('float32')
    labels = rng.integers(0, CLASSES, size=count).astype('int32')
    images = templates[labels] + 1.5 * rng.normal(size=(count, 28, 28, 1)).astype('float32')
    return images, labels


def batches(images, labels, batch):
    """One epoch's batches, in order; the last one is short."""
    return [(tf.constant(images[i:i + batch]), tf.constant(labels[i:i + batch]))
            for i in range(0, len(images), batch)]


def lenet():
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(6, 5, padding='same', activation='relu'),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(16, 5, activation='relu'),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(120, activation='relu'),
        keras.layers.Dense(84, activation='relu'),
        keras.layers.Dense(CLASSES)])


class LeNet(common.Workload):
    name, category, unit = 'LeNet', 'CNN', 'images'
    steps, warmup = 60, 10

    def __init__(self, mode, seed=0):
        super().__init__(mode, seed)
        self.model = lenet()
        self.optimizer = keras.optimizers.SGD(0.01, momentum=0.9)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.data = batches(*digits(seed), BATCH)
        self.position = 0
        symbolic = tf.function(self.train_step, input_signature=[
            tf.TensorSpec([None, 28, 28, 1], tf.float32), tf.TensorSpec([None], tf.int32)])
        self.compiled_step = self.compile(self.train_step, symbolic)

    def train_step(self, images, labels):
        with tf.GradientTape() as tape:
            logits = self.model(images, training=True)
            loss = self.loss_fn(labels, logits)
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss

    def step(self):
        images, labels = self.data[self.position % len(self.data)]
        self.position += 1
        return self.compiled_step(images, labels), int(images.shape[0])


if __name__ == '__main__':
    common.main(LeNet)
