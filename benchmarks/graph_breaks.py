"""What a graph break costs, side by side in one process (issue #19's targets).

* **Per-break overhead**: a chain of 40 element-wise ops with one ``.numpy()``
  in the middle (a break: two segments and a Python statement) against the
  same chain without it (one graph), in janus; the difference is the break's
  cost, also given in eager ops (the chain's eager time per op).
* **Logging step**: a Keras training step printing ``loss.numpy()`` every 10
  steps inside the function, under eager and janus, against the same step
  with the print moved out of the function, under janus and under
  ``tf.function`` (the hand-written version: the log line moved out, the
  rest unchanged).
* **NumPy metrics step**: the same step computing NumPy accuracy from
  ``logits.numpy()`` every step; janus against eager and against
  ``tf.function`` with the metric moved out.
* **Detection step** (FasterRCNN-style): a small convolutional backbone and box
  head whose ground-truth boxes are cut to the longest count in the batch, a size
  read with ``int(....numpy())`` in the middle of the step; janus against eager,
  with the size cycling through 4 values (shapes repeat) and with a new size
  almost every step (1 to 40).

Medians of timed windows after warm-up (profiling, tracing and the breaks'
discovery), modes taking turns window by window.

    python benchmarks/graph_breaks.py [--windows 7] [--steps 60]
"""
import argparse
import contextlib
import io
import os
import statistics
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import janus  # noqa: E402

CHAIN = 40


def chain(x):
    for _ in range(CHAIN // 2):
        x = x * 1.0001
        x = x + 0.5
    return x


def with_break(x):
    y = chain(x)
    print_value = float(y.numpy().sum())   # the break
    z = chain(y)
    return z, print_value


def without_break(x):
    y = chain(x)
    z = chain(y)
    return z, tf.reduce_sum(y)


class Model:
    def __init__(self):
        tf.keras.utils.set_random_seed(0)
        self.dense1 = tf.keras.layers.Dense(64, activation='relu')
        self.dense2 = tf.keras.layers.Dense(10)
        self.opt = tf.keras.optimizers.SGD(0.01)
        self.step = 0
        self.accuracy = []

    def _loss_and_update(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.dense2(self.dense1(x))
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                y, logits, from_logits=True))
        variables = self.dense1.trainable_variables + self.dense2.trainable_variables
        self.opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss, logits

    def logging_step(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.dense2(self.dense1(x))
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                y, logits, from_logits=True))
        variables = self.dense1.trainable_variables + self.dense2.trainable_variables
        self.opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        self.step += 1
        if self.step % 10 == 0:
            print('step', self.step, 'loss', loss.numpy())
        return loss

    def quiet_step(self, x, y):   # the log line moved out (the caller prints)
        loss, _ = self._loss_and_update(x, y)
        self.step += 1
        return loss

    def metrics_step(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.dense2(self.dense1(x))
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                y, logits, from_logits=True))
        variables = self.dense1.trainable_variables + self.dense2.trainable_variables
        self.opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        self.accuracy.append(float(np.mean(np.argmax(logits.numpy(), 1) == y.numpy())))
        return loss

    def metrics_outside(self, x, y):   # for tf.function: the metric computed by the caller
        return self._loss_and_update(x, y)


def interleaved(runners, windows, steps):
    """Median seconds per step of each runner, windows taking turns."""
    times = {name: [] for name in runners}
    for _ in range(windows):
        for name, step in runners.items():
            started = time.perf_counter()
            for _ in range(steps):
                step()
            times[name].append((time.perf_counter() - started) / steps)
    return {name: statistics.median(t) for name, t in times.items()}


def warmed(step, calls=30):
    for _ in range(calls):
        step()
    return step


def break_overhead(windows, steps):
    x = tf.ones([64])
    broken, whole = janus.function(with_break), janus.function(without_break)
    runners = {'eager chain': warmed(lambda: without_break(x)),
               'janus, no break': warmed(lambda: whole(x)),
               'janus, one break': warmed(lambda: broken(x))}
    t = interleaved(runners, windows, steps)
    per_op = t['eager chain'] / (2 * CHAIN)
    cost = t['janus, one break'] - t['janus, no break']
    print('per-break overhead: %.0f us (janus with the break %.0f us, without %.0f us); '
          'eager %.1f us per op: a break costs %.0f eager ops'
          % (cost * 1e6, t['janus, one break'] * 1e6, t['janus, no break'] * 1e6,
             per_op * 1e6, cost / per_op))
    assert janus.stats(broken)['graph_part_calls'] > 0, janus.explain(broken)


def training_steps(windows, steps):
    x = tf.random.stateless_normal([32, 100], seed=[1, 2])
    y = tf.random.stateless_uniform([32], seed=[3, 4], maxval=10, dtype=tf.int32)

    def logged_outside(model, fn):
        def step():
            loss = fn(x, y)
            if model.step % 10 == 0:
                print('step', model.step, 'loss', loss.numpy())
        return step

    def metric_outside(model, fn):
        def step():
            _, logits = fn(x, y)
            model.accuracy.append(float(np.mean(np.argmax(logits.numpy(), 1) == y.numpy())))
        return step

    m = {k: Model() for k in ('eager', 'janus', 'janus_out', 'tf_out', 'e2', 'j2', 't2')}
    janus_log = janus.function(m['janus'].logging_step)
    janus_metrics = janus.function(m['j2'].metrics_step)
    runners = {
        'logging: eager': lambda: m['eager'].logging_step(x, y),
        'logging: janus': lambda: janus_log(x, y),
        'logging moved out: janus': logged_outside(m['janus_out'], janus.function(
            m['janus_out'].quiet_step)),
        'logging moved out: tf.function': logged_outside(m['tf_out'], tf.function(
            m['tf_out'].quiet_step)),
        'metrics: eager': lambda: m['e2'].metrics_step(x, y),
        'metrics: janus': lambda: janus_metrics(x, y),
        'metrics moved out: tf.function': metric_outside(m['t2'], tf.function(
            m['t2'].metrics_outside)),
    }
    with contextlib.redirect_stdout(io.StringIO()):
        for step in runners.values():
            warmed(step)
        t = interleaved(runners, windows, steps)
    for name, seconds in t.items():
        print('  %-34s %8.0f us/step' % (name, seconds * 1e6))
    print('logging step: janus %.2fx eager, %.2fx janus with the print moved out, %.2fx '
          'tf.function with it moved out' % (
              t['logging: eager'] / t['logging: janus'],
              t['logging moved out: janus'] / t['logging: janus'],
              t['logging moved out: tf.function'] / t['logging: janus']))
    print('NumPy metrics step: janus %.2fx eager, %.2fx tf.function with the metric moved out'
          % (t['metrics: eager'] / t['metrics: janus'],
             t['metrics moved out: tf.function'] / t['metrics: janus']))
    print('  janus stats, logging step: %s' % janus.stats(janus_log))
    print('  janus stats, metrics step: %s' % janus.stats(janus_metrics))


class Detector:
    """A FasterRCNN-style training step: padding size from ``.numpy()``."""

    def __init__(self):
        tf.keras.utils.set_random_seed(3)
        self.backbone = tf.keras.Sequential([
            tf.keras.layers.Conv2D(16, 3, strides=2, activation='relu'),
            tf.keras.layers.Conv2D(32, 3, strides=2, activation='relu'),
            tf.keras.layers.GlobalAveragePooling2D()])
        self.head = tf.keras.layers.Dense(4 * 48)
        self.opt = tf.keras.optimizers.SGD(0.01)
        self.steps = 0

    def step(self, images, boxes):
        counts = tf.reduce_sum(tf.cast(boxes[:, :, 0] > 0, tf.int32), axis=1)
        longest = int(tf.reduce_max(counts).numpy())   # the break: a size for the rest
        kept = boxes[:, :longest, :]
        with tf.GradientTape() as tape:
            features = self.backbone(images)
            predicted = tf.reshape(self.head(features), [-1, 48, 4])[:, :longest, :]
            loss = tf.reduce_mean(tf.square(predicted - kept))
        variables = self.backbone.trainable_variables + self.head.trainable_variables
        self.opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        self.steps += 1
        return loss


def _cycling(fn, images, batches):
    """A step calling ``fn`` on the next batch, round and round."""
    turn = [0]

    def step():
        fn(images, batches[turn[0] % len(batches)])
        turn[0] += 1
    return step


def detection_steps(windows, steps):
    rng = np.random.RandomState(0)
    images = tf.constant(rng.rand(4, 32, 32, 3).astype(np.float32))

    def batches(sizes):
        out = []
        for n in sizes:
            boxes = np.zeros([4, 48, 4], np.float32)
            boxes[0, :n] = rng.rand(n, 4) + 0.1
            boxes[1:, :1] = rng.rand(3, 1, 4) + 0.1
            out.append(tf.constant(boxes))
        return out
    regimes = {'sizes repeat (4 values)': batches([5, 9, 14, 20] * 16),
               'a new size almost every step (1-40)': batches(rng.randint(1, 41, 64))}
    for regime, data in regimes.items():
        eager_model, janus_model = Detector(), Detector()
        jf = janus.function(janus_model.step)
        runners = {'eager': _cycling(eager_model.step, images, data),
                   'janus': _cycling(jf, images, data)}
        for step in runners.values():
            warmed(step, calls=len(data) if 'repeat' in regime else 30)
        t = interleaved(runners, windows, steps)
        print('detection step, %s: eager %.0f us, janus %.0f us: janus %.2fx eager'
              % (regime, t['eager'] * 1e6, t['janus'] * 1e6, t['eager'] / t['janus']))
        print('  janus stats: %s' % janus.stats(jf))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--windows', type=int, default=7)
    parser.add_argument('--steps', type=int, default=60)
    args = parser.parse_args()
    break_overhead(args.windows, args.steps)
    training_steps(args.windows, args.steps)
    detection_steps(args.windows, args.steps)


if __name__ == '__main__':
    main()
