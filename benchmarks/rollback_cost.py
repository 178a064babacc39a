"""Per-step cost of restoring variables after a failed run (``config.restore_on_error``).

A graph keeps the variables it updates (``graphgen/rollback.py``) only when an
op that may fail runs after an update.  Three Keras training steps (an MLP,
64-128-128-10, SGD with momentum, batches of 64), each built three ways in one
process: janus with the rollback (the default), janus with
``restore_on_error=False``, and janus with the tracer's ordering as it was
before reads of unchanged variables could run ahead of a state change
(``--old-order``'s variant: every stateful op created after the first change
counted as after it).  Calls are interleaved (one of each, repeatedly, each
variant first in turn) so drifts hit all alike; medians of per-call times.

* ``plain``: forward, gradients, optimizer step: nothing after the update can
  fail, so no variable is kept (the cost should be nil);
* ``lr-step``: a step-decay learning rate assigned first (``opt.learning_rate =
  ...`` every step), then the step: with the old ordering the whole forward
  pass ran after that update;
* ``eval-after``: the step, then the loss of the *updated* model on batches of
  varying size (relaxed shapes): a MatMul of unknown batch size runs after the
  update, so every updated variable is kept (the worst case).

    python benchmarks/rollback_cost.py [--calls 400]
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))
import janus  # noqa: E402
from janus.graphgen import tracer  # noqa: E402


def make_step(kind, weights):
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation='relu'),
                              keras.layers.Dense(128, activation='relu'),
                              keras.layers.Dense(10)])
    model.set_weights(weights)
    opt = keras.optimizers.SGD(0.05, momentum=0.9)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    state = {'step': 0}

    def step(x, y):
        if kind == 'lr-step':
            state['step'] += 1
            opt.learning_rate = 0.05 * 0.5 ** (state['step'] // 100)
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        if kind == 'eval-after':
            return loss_fn(y, model(x))
        return loss
    return step


def _old_late_stateful(ops, mutating, first_change):
    return [op for op in ops if op._id > first_change and op._is_stateful]


def build(kind, variant, weights, batches):
    """A warmed-up janus function of ``kind``'s step, traced as ``variant`` says."""
    jf = janus.function(make_step(kind, weights))
    saved = tracer._late_stateful
    if variant == 'old order, no rollback':
        tracer._late_stateful = _old_late_stateful
    try:
        with janus.config.patch(restore_on_error=variant == 'rollback'):
            for x, y in batches[:12]:
                jf(x, y)
    finally:
        tracer._late_stateful = saved
    kept = [len(e.rollback) if e.rollback else 0 for e in jf.cache.entries()]
    return jf, kept


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--calls', type=int, default=400)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    weights = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128),
                                keras.layers.Dense(128), keras.layers.Dense(10)]).get_weights()
    variants = ('rollback', 'no rollback', 'old order, no rollback')
    print('%-11s %-24s %5s %10s %8s' % ('step', 'janus', 'kept', 'median us', 'vs last'))
    for kind in ('plain', 'lr-step', 'eval-after'):
        sizes = [64, 32] if kind == 'eval-after' else [64]
        batches = [(tf.constant(rng.normal(size=(n, 64)).astype('float32')),
                    tf.constant(rng.integers(0, 10, size=(n,)).astype('int32')))
                   for n in sizes * 8]
        built = {v: build(kind, v, weights, batches) for v in variants}
        times = {v: [] for v in variants}
        for i in range(args.calls):
            x, y = batches[i % len(batches)]
            for v in variants[i % 3:] + variants[:i % 3]:   # no variant always first
                started = time.perf_counter()
                built[v][0](x, y)
                times[v].append(time.perf_counter() - started)
        base = statistics.median(times[variants[-1]])
        for v in variants:
            median = statistics.median(times[v])
            print('%-11s %-24s %5s %10.0f %+7.1f%%' % (kind, v, max(built[v][1]), median * 1e6,
                                                       100 * (median - base) / base))
    return 0


if __name__ == '__main__':
    sys.exit(main())
