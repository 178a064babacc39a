"""A training epoch that iterates a ``tf.data`` dataset inside the function (issue #20).

The TF guide's custom loop as users write it: ``for x, y in ds:`` with a
GradientTape step per batch and Python-float accumulators for the mean loss,
in one function called once per epoch.  Side by side in one process, each
mode on a fresh model from the same seed, taking turns epoch by epoch:
eager, janus (one ``tf.while_loop`` over the dataset: ``control/
datasets.py``), and the same code under ``tf.function`` (written the same
way but for ``batches = 0.0``: AutoGraph needs one dtype for the count and
the loss).  Prints the median epoch time of each mode, the ratios, and
whether janus's losses and weights equal eager's.

    python benchmarks/dataset_loop.py [--epochs 15] [--batches 8]
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import janus  # noqa: E402


def make_trainer(mode):
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.layers.Dense(64, activation='relu'),
                                 tf.keras.layers.Dense(10)])
    model.build((None, 32))
    opt = tf.keras.optimizers.SGD(0.05)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def train_epoch(ds):
        total = 0.0
        batches = 0 if mode != 'tf.function' else 0.0
        for x, y in ds:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            total += loss
            batches += 1
        return total / batches

    if mode == 'janus':
        return janus.function(train_epoch), model
    if mode == 'tf.function':
        return tf.function(train_epoch), model
    return train_epoch, model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--epochs', type=int, default=15)
    parser.add_argument('--batches', type=int, default=8)
    args = parser.parse_args(argv)
    rng = np.random.RandomState(0)
    xs = rng.rand(32 * args.batches, 32).astype(np.float32)
    ys = rng.randint(0, 10, size=32 * args.batches)
    ds = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(32)
    modes = ('eager', 'janus', 'tf.function')
    trainers = {m: make_trainer(m) for m in modes}
    times = {m: [] for m in modes}
    losses = {m: [] for m in modes}
    warmup = 4   # janus's profiled calls and its trace; tf.function's trace
    for epoch in range(warmup + args.epochs):
        for mode in modes:
            fn, _ = trainers[mode]
            started = time.perf_counter()
            losses[mode].append(float(fn(ds)))
            if epoch >= warmup:
                times[mode].append(time.perf_counter() - started)
    median = {m: 1000 * statistics.median(times[m]) for m in modes}
    for mode in modes:
        print('%-12s %8.1f ms per epoch' % (mode, median[mode]))
    print('janus/eager %.2fx, janus/tf.function %.2fx' % (
        median['eager'] / median['janus'], median['tf.function'] / median['janus']))
    same = losses['janus'] == losses['eager'] and all(
        np.array_equal(a, b) for a, b in zip(trainers['janus'][1].weights,
                                             trainers['eager'][1].weights))
    print('janus losses and weights equal eager\'s: %s; janus: %s' % (
        same, {k: v for k, v in janus.stats(trainers['janus'][0]).items() if v}))


if __name__ == '__main__':
    main()
