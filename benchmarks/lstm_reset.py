"""An LSTM language model step with a Python bool ``reset`` flag (issue #20).

Truncated backpropagation through time as users write it: the recurrent state
lives in ``self.state`` across batches, and a ``reset`` argument, True at the
start of every ``--period``-th batch (a new document), zeroes it first.  Side by
side in one process, each mode on a fresh model from the same seed, taking
turns step by step: eager, janus (the flag relaxes to a graph input after its
second value: one graph serves both, ``relaxation.py``), and the same code
by hand under ``tf.function`` (the state passed in and out, one trace per flag
value).  Prints the median step time
of each mode, the ratios, the graphs janus built, and whether janus's losses
and weights equal eager's.

    python benchmarks/lstm_reset.py [--steps 60] [--period 8]
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

VOCAB, EMBED, HIDDEN, BATCH, STEPS = 200, 64, 128, 20, 20


class LanguageModel:
    def __init__(self):
        tf.keras.utils.set_random_seed(0)
        self.embedding = tf.keras.layers.Embedding(VOCAB, EMBED)
        self.cell = tf.keras.layers.LSTMCell(HIDDEN)
        self.decoder = tf.keras.layers.Dense(VOCAB)
        self.embedding.build((None,))
        self.cell.build((None, EMBED))
        self.decoder.build((None, HIDDEN))
        self.variables = (self.embedding.trainable_variables + self.cell.trainable_variables
                          + self.decoder.trainable_variables)
        self.optimizer = tf.keras.optimizers.Adam(2e-3)
        self.state = [tf.zeros([BATCH, HIDDEN]), tf.zeros([BATCH, HIDDEN])]

    def train_step(self, window, reset):
        if reset:
            self.state = [tf.zeros([BATCH, HIDDEN]), tf.zeros([BATCH, HIDDEN])]
        with tf.GradientTape() as tape:
            inputs = tf.unstack(self.embedding(window[:, :-1]), axis=1)   # time steps
            state, outputs = self.state, []
            for x in inputs:
                h, state = self.cell(x, state)
                outputs.append(h)
            logits = self.decoder(tf.stack(outputs, axis=1))
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                window[:, 1:], logits, from_logits=True))
        grads = tape.gradient(loss, self.variables)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        self.state = [tf.stop_gradient(s) for s in state]
        return loss

    def hand_written(self):
        """The same step for ``tf.function``: the state an input and an output (a
        tensor kept in ``self`` would leak out of the trace), the flag a Python bool
        (one trace per value)."""
        @tf.function
        def graph(window, h, c, reset):
            if reset:
                h, c = tf.zeros([BATCH, HIDDEN]), tf.zeros([BATCH, HIDDEN])
            with tf.GradientTape() as tape:
                inputs = tf.unstack(self.embedding(window[:, :-1]), axis=1)
                state, outputs = [h, c], []
                for x in inputs:
                    out, state = self.cell(x, state)
                    outputs.append(out)
                logits = self.decoder(tf.stack(outputs, axis=1))
                loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                    window[:, 1:], logits, from_logits=True))
            grads = tape.gradient(loss, self.variables)
            self.optimizer.apply_gradients(zip(grads, self.variables))
            return loss, state[0], state[1]

        def train_step(window, reset):
            loss, h, c = graph(window, *self.state, reset)
            self.state = [h, c]
            return loss
        return train_step


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--steps', type=int, default=60, help='timed steps per mode')
    parser.add_argument('--period', type=int, default=8, help='a reset every N batches')
    args = parser.parse_args(argv)
    rng = np.random.RandomState(0)
    warmup = 2 * args.period   # janus: profiled calls, both flag values, the relaxed trace
    windows = [tf.constant(rng.randint(0, VOCAB, size=(BATCH, STEPS + 1)).astype('int32'))
               for _ in range(warmup + args.steps)]
    modes = ('eager', 'janus', 'tf.function')
    models = {m: LanguageModel() for m in modes}
    steps = {'eager': models['eager'].train_step,
             'janus': janus.function(models['janus'].train_step),
             'tf.function': models['tf.function'].hand_written()}
    times = {m: [] for m in modes}
    losses = {m: [] for m in modes}
    for i, window in enumerate(windows):
        reset = i % args.period == 0
        for mode in modes:
            started = time.perf_counter()
            losses[mode].append(float(steps[mode](window, reset)))
            if i >= warmup:
                times[mode].append(time.perf_counter() - started)
    median = {m: 1000 * statistics.median(times[m]) for m in modes}
    for mode in modes:
        print('%-12s %8.2f ms per step' % (mode, median[mode]))
    print('janus/eager %.2fx, janus/tf.function %.2fx' % (
        median['eager'] / median['janus'], median['tf.function'] / median['janus']))
    stats = janus.stats(steps['janus'])
    same = losses['janus'] == losses['eager'] and all(
        np.array_equal(a, b) for a, b in zip(models['janus'].variables,
                                             models['eager'].variables))
    print('janus: %d graphs built, %d graph runs of %d calls (%d imperative); losses and '
          'weights equal eager\'s: %s' % (stats['graphs_built'], stats['graph_calls'],
                                          stats['calls'], stats['imperative_calls'], same))


if __name__ == '__main__':
    main()
