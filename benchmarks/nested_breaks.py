"""Refused lines inside a Keras model's ``call()`` (issue #37's first target), side by
side in one process.

Two small convolutional models, trained with a tape and Adam, every step timed from
the first, the modes taking turns step by step:

* **a draw**: ``call()`` draws a noise scale from Python's own ``random.Random``.  janus
  makes the draw on the host before the run and feeds it to the graph
  (``trace/host_draws.py``): the whole step stays one graph;
* **a size read with .numpy()**: ``call()`` reads the feature map's grid size with
  ``int(tf.shape(h)[1].numpy())`` to reshape it into cells.  The graph fixes that shape
  (``values/static_values.py``): read at trace time, the step stays one graph;
* **a log line**: every 10th call, ``call()`` prints the activations' mean read with
  ``.numpy()``, a line no graph holds.  The calls that skip it run the whole step's
  graph; the others run the model's ``call`` cut at that line, the rest of it in graphs
  of its own (``graphgen/nested.py``), the tape's gradient through those graphs.

Each against:

* **eager**, as written;
* **janus, the line moved out**: the step draws the scale (reads the size from the
  input's static shape; logs after the step, from the mean the model returns) and
  passes it in, one graph for the step;
* **tf.function, the line moved out**: the hand-written version, the scale passed as a
  tensor (a Python float would retrace per value).

Total time over all steps (warm-up included) against eager, and the median step of
the second half.

    .venv/bin/python benchmarks/nested_breaks.py [--steps 60] [--only draw,numpy,log]
"""
import argparse
import os
import random
import statistics
import warnings

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import tensorflow as tf  # noqa: E402

import janus  # noqa: E402
from never_slower import side_by_side  # noqa: E402 - the modes take turns step by step


class Net(tf.keras.Model):
    def __init__(self, seed, refused):
        super().__init__()
        self.refused = refused
        self.rng = random.Random(seed)
        self.convs = [tf.keras.layers.Conv2D(32, 3, padding='same', activation='relu',
                                             strides=2 if i == 0 else 1) for i in range(3)]
        self.pool = tf.keras.layers.GlobalAveragePooling2D()
        self.head = tf.keras.layers.Dense(10)
        self.calls = 0

    def call(self, x, training=False, scale=None, grid=None, log=True):
        h = self.convs[0](x)
        if self.refused == 'log':
            self.calls += 1
            if log and self.calls % 10 == 0:
                print('call', self.calls, 'activations', float(tf.reduce_mean(h).numpy()))
        if self.refused == 'draw':
            if scale is None:
                scale = self.rng.uniform(0.9, 1.1) if training else 1.0
            h = h * scale
        for conv in self.convs[1:]:
            h = conv(h)
        if self.refused == 'numpy':
            if grid is None:
                grid = int(tf.shape(h)[1].numpy())
            cells = tf.reshape(h, (-1, grid * grid, h.shape[-1]))
            return self.head(tf.reduce_max(cells, axis=1))
        return self.head(self.pool(h))


class Trainer:
    def __init__(self, refused, seed=0):
        tf.keras.utils.set_random_seed(seed)
        self.model = Net(seed, refused)
        self.rng = random.Random(seed)
        self.opt = tf.keras.optimizers.Adam(1e-3)
        self.loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = self.loss_fn(y, self.model(x, training=True))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss

    def train_step_moved_out(self, x, y, **moved):
        with tf.GradientTape() as tape:
            loss = self.loss_fn(y, self.model(x, training=True, **moved))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss


def run(refused, steps):
    x = tf.random.stateless_normal([32, 16, 16, 3], seed=[1, 2])
    y = tf.random.stateless_uniform([32], seed=[3, 4], maxval=10, dtype=tf.int32)
    eager, inside, outside, hand = (Trainer(refused) for _ in range(4))
    inside_fn = janus.function(inside.train_step)
    outside_fn = janus.function(outside.train_step_moved_out)
    hand_fn = tf.function(hand.train_step_moved_out)
    if refused == 'draw':
        title = 'a Keras model drawing from random.Random in call()'
        moved = lambda trainer, as_tensor: dict(   # noqa: E731
            scale=(tf.constant if as_tensor else float)(trainer.rng.uniform(0.9, 1.1)))
    elif refused == 'numpy':
        title = 'a Keras model reading a size with .numpy() in call()'
        moved = lambda trainer, as_tensor: dict(grid=x.shape[1] // 2)   # noqa: E731
    else:
        title = 'a Keras model printing a value read with .numpy() every 10th call()'
        moved = lambda trainer, as_tensor: dict(log=False)   # noqa: E731

    def logged_after(trainer, step):
        def run():
            loss = step()
            if refused == 'log' and trainer.model.calls % 10 == 0:
                print('call', trainer.model.calls, 'loss', float(loss))
        return run
    modes = {
        'eager': lambda: eager.train_step(x, y),
        'janus, the line in call()': lambda: inside_fn(x, y),
        'janus, the line moved out': logged_after(
            outside, lambda: outside_fn(x, y, **moved(outside, False))),
        'tf.function, the line moved out': logged_after(
            hand, lambda: hand_fn(x, y, **moved(hand, True))),
    }
    times = side_by_side({name: (lambda i, step=step: step()) for name, step in modes.items()},
                         steps)
    base, half = times['eager'], steps // 2
    print('%s, %d steps:' % (title, steps))
    for name, t in times.items():
        print('  %-32s total %8.1f ms (%5.2fx eager), steady %7.2f ms a step (%5.2fx)' % (
            name, sum(t) * 1e3, sum(base) / sum(t), statistics.median(t[half:]) * 1e3,
            statistics.median(base[half:]) / statistics.median(t[half:])))
    inside_t, outside_t = times['janus, the line in call()'], times['janus, the line moved out']
    print('  the line in call() / moved out, janus: %.2fx steady (median step), %.2fx mean '
          'step over the second half' % (
              statistics.median(outside_t[half:]) / statistics.median(inside_t[half:]),
              statistics.fmean(outside_t[half:]) / statistics.fmean(inside_t[half:])))
    nested = [jf for _, jf in inside_fn.state.routes.functions()]
    stats = janus.stats(inside_fn)
    print('  janus, the line in call(): %d whole-step graph runs, %d split calls, %d layer '
          'call%s run through janus of %s own' % (
              stats['graph_calls'], stats['split_calls'], len(nested),
              '' if len(nested) == 1 else 's', 'its' if len(nested) == 1 else 'their'))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--steps', type=int, default=60)
    parser.add_argument('--only', default='draw,numpy,log')
    args = parser.parse_args()
    warnings.filterwarnings('ignore')
    for refused in args.only.split(','):
        run(refused, args.steps)

if __name__ == '__main__':
    main()
