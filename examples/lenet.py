"""LeNet-5 on synthetic MNIST-like digits (CNN, the paper's Table 2, batch 50).

The imperative program: a Keras ``Sequential`` LeNet, SGD with momentum, one
``train_step`` per batch, written the way training code is written: a Python
step counter (``self.global_step += 1``), a step-decay learning-rate schedule
in Python (``self.lr = self.lr * 0.5`` at the ``milestones``, set on the
optimizer) and the training accuracy appended to ``self.history`` every
``log_every`` steps.  The data set (1010 28x28 images: a noisy template per
class) does not divide by the batch size, so every epoch ends with a batch of
10 — janus relaxes that dimension instead of building a graph per batch size.

``symbolic`` is the same program written for ``tf.function`` (``None`` batch
dimension): the counter is a ``tf.Variable``, the schedule is computed from it
in the graph, and the logging decision is taken outside the graph.

    python examples/lenet.py --mode eager|janus|symbolic [--steps 80] [--explain]
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
    steps, warmup = 80, 20     # 100 training steps in all
    examples = EXAMPLES        # images in the data set
    base_lr = 0.01
    milestones = (40, 80)      # steps at which the learning rate is halved
    log_every = 10             # training accuracy appended to self.history every N steps

    def __init__(self, mode, seed=0):
        super().__init__(mode, seed)
        self.model = lenet()
        self.optimizer = keras.optimizers.SGD(self.base_lr, momentum=0.9)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.data = batches(*digits(seed, self.examples), BATCH)
        self.position = 0
        self.global_step = 0       # training steps taken (a Python int)
        self.lr = self.base_lr     # the learning rate in force (a Python float)
        self.history = []          # training accuracy, every log_every steps
        self.compiled_step = self.compile(self.train_step, self.symbolic())

    def train_step(self, images, labels):
        """The imperative program: step counter, step-decay schedule, logging."""
        self.global_step += 1
        if self.global_step in self.milestones:
            self.lr = self.lr * 0.5
            self.optimizer.learning_rate = self.lr
        with tf.GradientTape() as tape:
            logits = self.model(images, training=True)
            loss = self.loss_fn(labels, logits)
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        if self.global_step % self.log_every == 0:
            predictions = tf.argmax(logits, axis=1, output_type=tf.int32)
            self.history.append(tf.reduce_mean(tf.cast(predictions == labels, tf.float32)))
        return loss

    def symbolic(self):
        """The same program for ``tf.function``: the counter is a ``tf.Variable``, the
        schedule is computed from it in the graph, and the logging decision is
        taken outside the graph (the graph returns the accuracy every step)."""
        counter = tf.Variable(0, dtype=tf.int64, trainable=False)
        milestones = tf.constant(self.milestones, tf.int64)

        @tf.function(input_signature=[tf.TensorSpec([None, 28, 28, 1], tf.float32),
                                      tf.TensorSpec([None], tf.int32)])
        def graph(images, labels):
            step = counter.assign_add(1)
            halvings = tf.reduce_sum(tf.cast(step >= milestones, tf.float32))
            self.optimizer.learning_rate.assign(self.base_lr * tf.pow(0.5, halvings))
            with tf.GradientTape() as tape:
                logits = self.model(images, training=True)
                loss = self.loss_fn(labels, logits)
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
            predictions = tf.argmax(logits, axis=1, output_type=tf.int32)
            return loss, tf.reduce_mean(tf.cast(predictions == labels, tf.float32))

        def train_step(images, labels):
            loss, accuracy = graph(images, labels)
            self.global_step += 1   # the driver's own count, for the logging decision
            if self.global_step % self.log_every == 0:
                self.history.append(accuracy)
            return loss
        return train_step

    def step(self):
        images, labels = self.data[self.position % len(self.data)]
        self.position += 1
        return self.compiled_step(images, labels), int(images.shape[0])


if __name__ == '__main__':
    common.main(LeNet)
