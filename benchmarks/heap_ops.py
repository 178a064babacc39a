"""Heap-op benchmark: what reading state through Janus>PyGetAttr costs.

Times small tf.functions (median per call over --repeats calls, after a
warm-up), all taking a [64,64] float32 value and adding 1:

1. input:    the value fed as a graph input (what hoisting the read gives);
2. get:      the value read inside the graph by one Janus>PyGetAttr;
3. get x10:  ten reads of ten objects, chained by tf.function's automatic
             control dependencies, and the same ten unchained (wrap_function)
             so they may run on several inter-op threads;
4. set:      one Janus>PySetAttr of the result (shadow write only), then the
             commit of that run, timed apart;
5. run bookkeeping: begin_run() + discard() around each call.

Needs the op library built (`pip install --no-build-isolation -e .`).

    python benchmarks/heap_ops.py [--repeats 1000]
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))
from janus.heap import heap  # noqa: E402

SHAPE = [64, 64]


class State:
    """A heap object with one [64,64] float32 attribute."""

    def __init__(self, seed):
        self.w = tf.random.stateless_normal(SHAPE, seed=[seed, 0])


def warm(call, count=50):
    for _ in range(count):
        call()


def median_us(call, repeats, warmup=50):
    warm(call, warmup)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def interleaved_medians_us(calls, repeats, rounds=10):
    """Median per call of each of ``calls``, timed in alternating rounds.

    Alternating cancels the machine's drift, which on a shared host is
    larger than the differences measured here.
    """
    for call in calls:
        warm(call)
    times = [[] for _ in calls]
    for _ in range(rounds):
        for call, bucket in zip(calls, times):
            for _ in range(max(1, repeats // rounds)):
                start = time.perf_counter()
                call()
                bucket.append(time.perf_counter() - start)
    return [statistics.median(bucket) * 1e6 for bucket in times]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=1000)
    repeats = parser.parse_args().repeats

    states = [State(i) for i in range(10)]
    handles = [heap.pin(s) for s in states]
    handle = handles[0]
    x = states[0].w
    run_id = heap.begin_run()  # one run for the read-only timings
    run = tf.constant(np.int64(run_id))

    @tf.function
    def from_input(value):
        return value + 1.0

    @tf.function
    def from_heap(run_id):
        return heap.py_get_attr(run_id, handle, 'w', tf.float32, SHAPE) + 1.0

    def ten_gets(run_id):
        return tf.add_n([heap.py_get_attr(run_id, h, 'w', tf.float32, SHAPE)
                         for h in handles]) + 1.0

    ten_chained = tf.function(ten_gets)
    ten_parallel = tf.compat.v1.wrap_function(ten_gets, [tf.TensorSpec([], tf.int64)])

    @tf.function
    def get_and_set(run_id):
        value = heap.py_get_attr(run_id, handle, 'w', tf.float32, SHAPE) + 1.0
        heap.py_set_attr(run_id, handle, 'w', value)
        return value

    labels = ['input  (value fed as graph input)', 'get    (one PyGetAttr in graph)',
              'get x10 chained (tf.function)', 'get x10 unchained (wrap_function)']
    medians = interleaved_medians_us(
        [lambda: from_input(x), lambda: from_heap(run), lambda: ten_chained(run),
         lambda: ten_parallel(run)], repeats)
    results = list(zip(labels, medians))
    heap.discard(run_id)

    def bookkeeping():
        heap.discard(heap.begin_run())

    def set_then_discard():
        rid = heap.begin_run()
        get_and_set(tf.constant(np.int64(rid)))
        heap.discard(rid)

    pending = []

    def set_only():
        rid = heap.begin_run()
        get_and_set(tf.constant(np.int64(rid)))
        pending.append(rid)

    def commit_one():
        heap.commit(pending.pop())

    results += [
        ('begin_run + discard (Python)', median_us(bookkeeping, repeats)),
        ('get+set graph, begin..discard', median_us(set_then_discard, repeats)),
    ]
    median_us(set_only, repeats, warmup=0)
    results.append(('commit of one [64,64] write', median_us(commit_one, repeats - 1, warmup=0)))

    print('median per call over %d calls (us), TF %s, %d CPUs'
          % (repeats, tf.__version__, os.cpu_count()))
    for label, value in results:
        print('  %-36s %8.1f' % (label, value))
    base, one = results[0][1], results[1][1]
    print('  one PyGetAttr costs %.1f us more than feeding the value' % (one - base))


if __name__ == '__main__':
    main()
