"""Main demo: one imperative training step, run eagerly, under janus, and as a
hand-written tf.function, side by side in one process.

Each mode trains its own copy of the same model (same initial weights, same
synthetic batches); the demo checks that the losses agree step by step, then
prints throughput (median of timed windows) and the ratios janus/eager and
janus/tf.function, plus what janus did (the first lines of ``janus.explain``).

    python examples/demo_mlp.py [--model mlp|cnn] [--steps 300] [--batch 64]
"""
import argparse
import os
import statistics
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import janus  # noqa: E402


def build_model(kind):
    if kind == 'cnn':  # LeNet-like
        return keras.Sequential([
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(6, 5, activation='relu'), keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(16, 5, activation='relu'), keras.layers.MaxPooling2D(),
            keras.layers.Flatten(), keras.layers.Dense(120, activation='relu'),
            keras.layers.Dense(84, activation='relu'), keras.layers.Dense(10)])
    return keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation='relu'),
                             keras.layers.Dense(128, activation='relu'), keras.layers.Dense(10)])


def synthetic_batches(kind, steps, batch, seed=0):
    rng = np.random.default_rng(seed)
    shape = (batch, 28, 28, 1) if kind == 'cnn' else (batch, 64)
    return [(tf.constant(rng.normal(size=shape).astype('float32')),
             tf.constant(rng.integers(0, 10, size=(batch,)).astype('int32')))
            for _ in range(steps)]


def make_trainer(kind, weights):
    """The imperative program: a model, an optimizer and a train step."""
    model = build_model(kind)
    model.set_weights(weights)
    optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return train_step, model


def run(step, batches, window):
    """Runs every batch; returns (losses, per-window steps/s)."""
    losses, rates = [], []
    started = time.perf_counter()
    for i, (x, y) in enumerate(batches, 1):
        losses.append(float(step(x, y)))
        if i % window == 0:
            now = time.perf_counter()
            rates.append(window / (now - started))
            started = now
    return losses, rates


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--model', choices=['mlp', 'cnn'], default='mlp')
    parser.add_argument('--steps', type=int, default=300)
    parser.add_argument('--batch', type=int, default=64)
    parser.add_argument('--window', type=int, default=25)
    args = parser.parse_args(argv)

    keras.utils.set_random_seed(0)
    weights = build_model(args.model).get_weights()
    batches = synthetic_batches(args.model, args.steps, args.batch)

    eager_step, _ = make_trainer(args.model, weights)
    janus_plain, _ = make_trainer(args.model, weights)
    janus_step = janus.function(janus_plain)
    graph_plain, _ = make_trainer(args.model, weights)
    graph_step = tf.function(graph_plain)

    results = {}
    for name, step in (('eager', eager_step), ('janus', janus_step), ('tf.function', graph_step)):
        results[name] = run(step, batches, args.window)

    eager_losses = np.array(results['eager'][0])
    for name in ('janus', 'tf.function'):
        diff = np.abs(np.array(results[name][0]) - eager_losses)
        print('%-12s |loss - eager loss|: first step %.1e, max over %d steps %.1e (rel %.1e)'
              % (name, diff[0], args.steps, diff.max(), (diff / np.abs(eager_losses)).max()))
        # Graph kernels (fused conv+bias+relu) round differently from eager ones;
        # anything beyond float noise is a bug.
        if diff[0] > 1e-5 or (diff / np.abs(eager_losses)).max() > 1e-2:
            raise SystemExit('%s losses differ from eager' % name)

    # Median over windows, skipping the first (profiling, tracing, warm-up).
    medians = {name: statistics.median(rates[1:] or rates)
               for name, (_, rates) in results.items()}
    print('\n%s, batch %d, %d steps (median of %d-step windows, first window dropped)'
          % (args.model.upper(), args.batch, args.steps, args.window))
    for name, rate in medians.items():
        print('  %-12s %8.1f steps/s' % (name, rate))
    print('  janus / eager       = %.2fx' % (medians['janus'] / medians['eager']))
    print('  janus / tf.function = %.2fx' % (medians['janus'] / medians['tf.function']))
    # explain's story: what ran where, the time a call, what to change (the guards follow)
    print('\n' + janus.explain(janus_step).split('\n  counters')[0])
    return medians


if __name__ == '__main__':
    main()
