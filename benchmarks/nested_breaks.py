"""Breaks nest into Keras layers (issue #37's first target), side by side in one process.

A small convolutional model whose ``call()`` draws a noise scale from Python's own
``random.Random`` (a line no graph can hold), trained with a tape and Adam, every
step timed from the first, the modes taking turns step by step:

* **eager**, as written;
* **janus, the line in call()**, as written: the draw runs in Python, the model's
  ``call`` around it in graphs of its own (``graphgen/nested.py``), the tape's
  gradient through those graphs, the update in a graph;
* **janus, the line moved out**: the step draws the scale and passes it in
  (``self.model(x, training=True, scale=scale)``), one graph for the step;
* **tf.function, the line moved out**: the hand-written version, the scale passed
  as a tensor (a Python float would retrace per value).

Total time over all steps (warm-up included) against eager, and the median step of
the second half.

    .venv/bin/python benchmarks/nested_breaks.py [--steps 60]
"""
import argparse
import os
import random
import statistics
import time
import warnings

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import tensorflow as tf  # noqa: E402

import janus  # noqa: E402


class Net(tf.keras.Model):
    def __init__(self, seed):
        super().__init__()
        self.rng = random.Random(seed)
        self.convs = [tf.keras.layers.Conv2D(32, 3, padding='same', activation='relu')
                      for _ in range(3)]
        self.pool = tf.keras.layers.GlobalAveragePooling2D()
        self.head = tf.keras.layers.Dense(10)

    def call(self, x, training=False, scale=None):
        h = self.convs[0](x)
        if scale is None:
            scale = self.rng.uniform(0.9, 1.1) if training else 1.0
        h = h * scale
        for conv in self.convs[1:]:
            h = conv(h)
        return self.head(self.pool(h))


class Trainer:
    def __init__(self, seed=0):
        tf.keras.utils.set_random_seed(seed)
        self.model = Net(seed)
        self.rng = random.Random(seed)
        self.opt = tf.keras.optimizers.Adam(1e-3)
        self.loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = self.loss_fn(y, self.model(x, training=True))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss

    def train_step_scaled(self, x, y, scale):
        with tf.GradientTape() as tape:
            loss = self.loss_fn(y, self.model(x, training=True, scale=scale))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--steps', type=int, default=60)
    args = parser.parse_args()
    warnings.filterwarnings('ignore')
    x = tf.random.stateless_normal([32, 16, 16, 3], seed=[1, 2])
    y = tf.random.stateless_uniform([32], seed=[3, 4], maxval=10, dtype=tf.int32)
    eager, inside, outside, hand = Trainer(), Trainer(), Trainer(), Trainer()
    inside_fn = janus.function(inside.train_step)
    outside_fn = janus.function(outside.train_step_scaled)
    hand_fn = tf.function(hand.train_step_scaled)
    modes = {
        'eager': lambda: eager.train_step(x, y),
        'janus, the line in call()': lambda: inside_fn(x, y),
        'janus, the line moved out': lambda: outside_fn(x, y, outside.rng.uniform(0.9, 1.1)),
        'tf.function, the line moved out': lambda: hand_fn(
            x, y, tf.constant(hand.rng.uniform(0.9, 1.1))),
    }
    times = {name: [] for name in modes}
    names = list(modes)
    for i in range(args.steps):
        for name in names[i % len(names):] + names[:i % len(names)]:
            started = time.perf_counter()
            modes[name]()
            times[name].append(time.perf_counter() - started)
    base, half = times['eager'], args.steps // 2
    print('a Keras model with one refused line in call(), %d steps:' % args.steps)
    for name, t in times.items():
        print('  %-32s total %8.1f ms (%5.2fx eager), steady %7.2f ms a step (%5.2fx)' % (
            name, sum(t) * 1e3, sum(base) / sum(t), statistics.median(t[half:]) * 1e3,
            statistics.median(base[half:]) / statistics.median(t[half:])))
    inside_t, outside_t = times['janus, the line in call()'], times['janus, the line moved out']
    print('  the line in call() / moved out, janus: %.2fx steady' % (
        statistics.median(outside_t[half:]) / statistics.median(inside_t[half:])))
    nested = [jf for _, jf in inside_fn.state.routes.functions()]
    print('  janus: %d layer call%s run through janus of their own' % (
        len(nested), '' if len(nested) == 1 else 's'))


if __name__ == '__main__':
    main()
