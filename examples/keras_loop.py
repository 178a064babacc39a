"""A plain Keras-style custom training loop over ``tf.data``, wrapped with janus.

What a Keras user writes when ``fit()`` is not enough (the Keras guide
"writing a training loop from scratch"): a small ``keras.Model`` subclass
with a ``train_step(self, x, y)`` method (``tf.GradientTape``, a Keras
optimizer, ``keras.metrics.Mean`` and ``SparseCategoricalAccuracy``), a
Python step counter on the model and a progress print every
``print_every`` steps, driven by a ``for x, y in dataset`` loop over a
shuffled, batched ``tf.data.Dataset``; at the end of each epoch the loop
prints the epoch's metrics and resets them.  The only janus line is

    train_step = janus.function(model.train_step)

The data (2000 points around 10 class centres in 32 dimensions, generated in
code) does not divide by the batch size: every epoch ends with a batch of 16.

``symbolic`` is the same loop as a TF expert writes it for ``tf.function``:
the graph does the update and the metrics, the counter and the progress
print live in the Python loop outside it.

    python examples/keras_loop.py              # eager, janus and tf.function side by side:
                                               # progress, then the comparison
    python examples/keras_loop.py --mode eager|janus|symbolic [--steps 80] [--explain]
"""
import argparse
import contextlib
import io
import statistics
import sys
import time

import keras
import numpy as np
import tensorflow as tf

import common
import janus

BATCH, EXAMPLES, FEATURES, CLASSES = 64, 2000, 32, 10


def make_dataset(seed, count=EXAMPLES):
    """Noisy points around class centres, shuffled each epoch (seeded), batched."""
    rng = np.random.default_rng(seed)
    centres = 2.0 * rng.normal(size=(CLASSES, FEATURES))
    labels = rng.integers(0, CLASSES, size=count)
    points = centres[labels] + 1.5 * rng.normal(size=(count, FEATURES))
    return (tf.data.Dataset.from_tensor_slices((points.astype('float32'), labels.astype('int32')))
            .shuffle(count, seed=seed).batch(BATCH))


class Classifier(keras.Model):
    """A small MLP classifier that knows how to train itself, one batch at a time."""

    def __init__(self, print_every=50):
        super().__init__()
        self.hidden1 = keras.layers.Dense(128, activation='relu')
        self.hidden2 = keras.layers.Dense(64, activation='relu')
        self.classify = keras.layers.Dense(CLASSES)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.optimizer = keras.optimizers.Adam(1e-3)
        self.loss_metric = keras.metrics.Mean(name='loss')
        self.accuracy_metric = keras.metrics.SparseCategoricalAccuracy(name='accuracy')
        self.print_every = print_every
        self.step = 0

    def call(self, x, training=False):
        return self.classify(self.hidden2(self.hidden1(x)))

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            logits = self(x, training=True)
            loss = self.loss_fn(y, logits)
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        self.loss_metric.update_state(loss)
        self.accuracy_metric.update_state(y, logits)
        self.step += 1
        if self.step % self.print_every == 0:
            print(f"step {self.step}: loss {self.loss_metric.result():.4f}, "
                  f"accuracy {self.accuracy_metric.result():.4f}")
        return loss


class KerasLoop(common.Workload):
    name, category, unit = 'Keras loop', 'MLP (tf.data)', 'examples'
    steps, warmup = 80, 20     # 100 steps in all: three epochs and a bit
    print_every = 50
    examples = EXAMPLES

    def __init__(self, mode, seed=0):
        super().__init__(mode, seed)
        self.model = Classifier(self.print_every)
        self.model(tf.zeros([1, FEATURES]))   # weights now, from the seed, in every mode
        self.dataset = make_dataset(seed, self.examples)
        self.batches = iter(self.dataset)
        self.epoch = 1
        self.train_step = self.compile(self.model.train_step, self.symbolic())

    def symbolic(self):
        """The same loop written for ``tf.function``: update and metrics in the graph,
        the step counter and the progress print in the Python loop."""
        model = self.model

        @tf.function(input_signature=[tf.TensorSpec([None, FEATURES], tf.float32),
                                      tf.TensorSpec([None], tf.int32)])
        def graph(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = model.loss_fn(y, logits)
            grads = tape.gradient(loss, model.trainable_variables)
            model.optimizer.apply_gradients(zip(grads, model.trainable_variables))
            model.loss_metric.update_state(loss)
            model.accuracy_metric.update_state(y, logits)
            return loss

        def train_step(x, y):
            loss = graph(x, y)
            model.step += 1
            if model.step % model.print_every == 0:
                print(f"step {model.step}: loss {model.loss_metric.result():.4f}, "
                      f"accuracy {model.accuracy_metric.result():.4f}")
            return loss
        return train_step

    def step(self):
        """One iteration of ``for x, y in dataset``; at an epoch's end, its summary."""
        try:
            x, y = next(self.batches)
        except StopIteration:
            print(f"epoch {self.epoch}: loss {self.model.loss_metric.result():.4f}, "
                  f"accuracy {self.model.accuracy_metric.result():.4f}")
            self.model.loss_metric.reset_state()
            self.model.accuracy_metric.reset_state()
            self.epoch += 1
            self.batches = iter(self.dataset)
            x, y = next(self.batches)
        return self.train_step(x, y), int(x.shape[0])

    def observable_state(self):
        out = super().observable_state()
        out['model.step'] = self.model.step
        out['model.metrics'] = [v.numpy() for m in (self.model.loss_metric,
                                                    self.model.accuracy_metric)
                                for v in m.variables]
        out['model.optimizer'] = common.state_of(self.model.optimizer)
        return out


class Tee(io.TextIOBase):
    """Writes to the terminal and remembers what was written."""

    def __init__(self, stream):
        self.stream, self.text = stream, io.StringIO()

    def write(self, s):
        self.text.write(s)
        return self.stream.write(s)

    def flush(self):
        self.stream.flush()


def compare(steps, warmup):
    """Trains a fresh model per mode on the same data; checks janus against eager."""
    runs = {}
    for mode in common.MODES:
        print(f'--- {mode} ---')
        workload = KerasLoop(mode)
        tee, losses, seconds = Tee(sys.stdout), [], []
        with contextlib.redirect_stdout(tee):
            for k in range(warmup + steps):
                started = time.perf_counter()
                loss, _ = workload.step()
                losses.append(float(loss))
                if k >= warmup:
                    seconds.append(time.perf_counter() - started)
        runs[mode] = dict(workload=workload, losses=losses, printed=tee.text.getvalue(),
                          steps_per_s=1 / statistics.median(seconds))
    eager, converted = runs['eager'], runs['janus']
    weights_diff = max(float(np.max(np.abs(a - b))) for a, b in zip(
        eager['workload'].model.get_weights(), converted['workload'].model.get_weights()))
    same_state = _same(eager['workload'].observable_state(),
                       converted['workload'].observable_state())
    print('\n=== eager vs janus, %d steps ===' % (warmup + steps))
    print('losses identical at every step: %s' % (eager['losses'] == converted['losses']))
    print('printed output identical:       %s' % (eager['printed'] == converted['printed']))
    print('final weights: max |diff| %.3g; weights, optimizer, metrics and counter identical: %s'
          % (weights_diff, same_state))
    print('throughput (median step after %d warm-up steps): eager %.1f steps/s, janus %.1f, '
          'tf.function %.1f; janus/eager %.2fx, janus/tf.function %.2fx'
          % (warmup, eager['steps_per_s'], converted['steps_per_s'],
             runs['symbolic']['steps_per_s'], converted['steps_per_s'] / eager['steps_per_s'],
             converted['steps_per_s'] / runs['symbolic']['steps_per_s']))
    print('janus: %s' % janus.stats(converted['workload'].train_step.janus))
    return runs


def _same(a, b):
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b)
    return type(a) is type(b) and a == b


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--mode', choices=common.MODES)
    parser.add_argument('--steps', type=int, default=KerasLoop.steps)
    parser.add_argument('--warmup', type=int, default=KerasLoop.warmup)
    parser.add_argument('--explain', action='store_true')
    args, _ = parser.parse_known_args(argv)
    if args.mode:
        return common.main(KerasLoop, argv)
    runs = compare(args.steps, args.warmup)
    if args.explain:
        print(runs['janus']['workload'].explain())
    return runs


if __name__ == '__main__':
    main()
