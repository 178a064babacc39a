"""Replay overhead: a janus call against the bare ConcreteFunction it runs.

A 20-argument function that reads attributes of an object (a Python float, a
tensor, a tf.Variable, a list of tensors) runs as one cached graph.  Per call,
janus binds the arguments, checks the argument signature and every source
guard, runs the graph and rebuilds the result; the bare call feeds the same
graph its 20 inputs directly (call-time captures included).  Calls alternate
(janus, bare, janus, ...) so the machine's drifts hit both alike; the result
is the ratio of medians.  janus feeds the graph through TF's flat call (its
signature check already did what ``__call__`` re-checks; the call-time inputs
read by janus's own closures, their guards having checked them), so the table
also shows that flat call alone: the floor, and janus's own overhead above it.
janus can be faster than the bare call: ``__call__`` re-checks every input and
every call-time input against its spec.  Also prints the guard count and the cost of a
2,000-item outside list read with ``len``/``in``/truthiness (guards O(1) per
container, not O(items)).

    python benchmarks/replay_overhead.py [--calls 3000]
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))
import janus  # noqa: E402

ARGS = 20


class Model:
    def __init__(self):
        self.scale = 0.5
        self.bias = tf.constant([1.0, 2.0, 3.0, 4.0])
        self.w = tf.Variable([0.1, 0.2, 0.3, 0.4])
        self.parts = [tf.constant([1.0] * 4), tf.constant([2.0] * 4)]
        self.vocab = list(range(2000))


def make_step(model):
    def step(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17,
             a18, a19):
        total = (a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13 + a14
                 + a15 + a16 + a17 + a18 + a19)
        first, second = model.parts
        return total * model.scale + model.bias + model.w + first - second
    return step


def make_lookup(model):
    def lookup(x, token):
        if model.vocab and token in model.vocab:
            return x * float(len(model.vocab))
        return x
    return lookup


def _medians(callables, calls):
    """Median seconds of each callable, called in turn so drifts hit all alike."""
    times = [[] for _ in callables]
    for _ in range(calls):
        for call, samples in zip(callables, times):
            started = time.perf_counter()
            call()
            samples.append(time.perf_counter() - started)
    return [statistics.median(samples) for samples in times]


def measure(fn, args, calls):
    """Median seconds of janus, the bare ConcreteFunction call and TF's flat
    call beneath it (the floor: no input re-check), and the guard count."""
    jf = janus.function(fn)
    for _ in range(jf.profile_calls + 2):
        jf(*args)
    entry = jf.cache.newest()
    assert entry is not None and janus.stats(jf)['graph_calls'] > 0, janus.explain(jf)
    bound = jf.signature.bind(*args)
    bound.apply_defaults()
    flat = entry.signature.flatten(bound.arguments)
    from janus.heap import shadow_heap

    from janus.replay import rewrites

    def bare():
        shadow_heap.set_call_arguments(bound.arguments)   # what call-time captures read
        # the same graph optimizations as janus's runs
        rewrites.call_with_janus_rewrites(entry.concrete, *flat)

    def floor():
        shadow_heap.set_call_arguments(bound.arguments)
        # janus's own flat call: TF's _call_flat fed the call-time inputs janus reads
        # itself (tracer._captured_reader), as a replay feeds them
        rewrites.call_with_janus_rewrites(entry._call_graph, flat)
    janus_s, bare_s, floor_s = _medians([lambda: jf(*args), bare, floor], calls)
    return janus_s, bare_s, floor_s, len(entry.describe_guards())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--calls', type=int, default=3000)
    options = parser.parse_args()
    model = Model()
    rows = [('20 arguments + attribute reads', make_step(model),
             [tf.constant([float(i)] * 4) for i in range(ARGS)]),
            ('2,000-item list: truthiness, in, len', make_lookup(model),
             [tf.constant([1.0, 2.0]), 7])]
    print('| function | janus call (us) | bare ConcreteFunction (us) | janus / bare '
          '| flat call (us) | janus / flat | guards |')
    print('|---|---|---|---|---|---|---|')
    for name, fn, args in rows:
        janus_s, bare_s, floor_s, guards = measure(fn, args, options.calls)
        print('| %s | %.1f | %.1f | %.3fx | %.1f | %.3fx | %d |' % (
            name, janus_s * 1e6, bare_s * 1e6, janus_s / bare_s, floor_s * 1e6,
            janus_s / floor_s, guards))


if __name__ == '__main__':
    main()
