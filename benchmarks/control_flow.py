"""Control-flow benchmark: what speculation buys, and what it costs.

One process, side by side (medians of repeated timed runs, ratios printed):

1. RNN (the paper's Figure 1 loop, no state write-back) over a fixed-length
   sequence: janus's unrolled graph vs the same model as a hand-written
   tf.while_loop graph vs janus's own dynamic (relaxed) graph vs eager.
2. Profiler overhead: a profiled (instrumented) call vs a plain eager call.
3. Fallback cost: a call whose assumption fails in the graph (graph run,
   failure, imperative re-run) vs a plain eager call.

    python benchmarks/control_flow.py [--steps 20] [--repeats 200]
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

HIDDEN, INPUT, BATCH = 64, 32, 16
W = tf.Variable(tf.random.stateless_normal([HIDDEN, HIDDEN], seed=[1, 2]) * 0.1)
U = tf.Variable(tf.random.stateless_normal([INPUT, HIDDEN], seed=[3, 4]) * 0.1)


def rnn_cell(state, item):
    return tf.tanh(tf.matmul(state, W) + tf.matmul(item, U))


def compute_loss(outputs):
    return tf.reduce_mean(tf.stack(outputs) ** 2)


class RNNModel:
    """The paper's Figure 1, without the self.state write (that is the heap issue)."""

    def __init__(self):
        self.state = tf.zeros([BATCH, HIDDEN])

    def __call__(self, sequence):
        state = self.state
        outputs = []
        for item in sequence:
            state = rnn_cell(state, item)
            outputs += [state]
        return compute_loss(outputs)


@tf.function(input_signature=[tf.TensorSpec([None, BATCH, INPUT]), tf.TensorSpec([BATCH, HIDDEN])])
def symbolic_rnn(sequence, state):
    """The hand-written graph: tf.while_loop + TensorArray."""
    steps = tf.shape(sequence)[0]
    outputs = tf.TensorArray(tf.float32, size=steps)

    def body(i, state, outputs):
        state = rnn_cell(state, sequence[i])
        return i + 1, state, outputs.write(i, state)
    _, _, outputs = tf.while_loop(lambda i, *_: i < steps, body, (0, state, outputs))
    return tf.reduce_mean(outputs.stack() ** 2)


def median_seconds(fn, repeats):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def rnn_table(steps, repeats):
    model = RNNModel()
    sequence = tf.random.stateless_normal([steps, BATCH, INPUT], seed=[5, 6])
    unrolled = janus.function(RNNModel.__call__)
    dynamic = janus.function(RNNModel.__call__)
    for _ in range(4):
        unrolled(model, sequence)
    for n in (steps, steps + 1, steps + 2, steps + 3):   # varying lengths: a while loop
        dynamic(model, tf.random.stateless_normal([n, BATCH, INPUT], seed=[n, 6]))
    dynamic(model, sequence)
    eager = float(model(sequence))
    for name, fn in (('unrolled', unrolled), ('dynamic', dynamic)):
        assert abs(float(fn(model, sequence)) - eager) < 1e-5, name
    assert abs(float(symbolic_rnn(sequence, model.state)) - eager) < 1e-5
    rows = {
        'eager': median_seconds(lambda: model(sequence), max(10, repeats // 10)),
        'janus unrolled': median_seconds(lambda: unrolled(model, sequence), repeats),
        'janus dynamic (tf.while_loop)': median_seconds(lambda: dynamic(model, sequence), repeats),
        'hand-written tf.while_loop': median_seconds(lambda: symbolic_rnn(sequence, model.state),
                                                    repeats),
    }
    print('RNN, %d steps, batch %d, hidden %d (median seconds per call)' % (steps, BATCH, HIDDEN))
    for name, seconds in rows.items():
        print('  %-32s %8.3f ms  %7.1f calls/s' % (name, seconds * 1e3, 1 / seconds))
    print('  unrolled / hand-written while = %.2fx throughput'
          % (rows['hand-written tf.while_loop'] / rows['janus unrolled']))
    print('  unrolled / janus dynamic       = %.2fx throughput'
          % (rows['janus dynamic (tf.while_loop)'] / rows['janus unrolled']))
    print('  unrolled / eager               = %.2fx throughput'
          % (rows['eager'] / rows['janus unrolled']))
    assert janus.stats(unrolled)['fallbacks'] == 0
    return rows


def profiler_overhead(repeats):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'examples'))
    import demo_mlp
    import keras
    keras.utils.set_random_seed(0)
    weights = demo_mlp.build_model('mlp').get_weights()
    (x, y), = demo_mlp.synthetic_batches('mlp', 1, 64)
    plain, _ = demo_mlp.make_trainer('mlp', weights)
    profiled_fn, _ = demo_mlp.make_trainer('mlp', weights)
    with janus.config.patch(profile_calls=10 ** 9):   # every call stays a profiled call
        profiled = janus.function(profiled_fn)
        for _ in range(5):
            plain(x, y)
            profiled(x, y)
        eager_s = median_seconds(lambda: plain(x, y), repeats)
        profiled_s = median_seconds(lambda: profiled(x, y), repeats)
    print('\nProfiler overhead (demo MLP train step): eager %.2f ms, profiled %.2f ms, '
          'ratio %.2fx' % (eager_s * 1e3, profiled_s * 1e3, profiled_s / eager_s))
    return profiled_s / eager_s


def fallback_cost(repeats):
    def step(x):
        if tf.reduce_sum(x) > 0:
            return tf.tanh(tf.matmul(x, W[:INPUT, :INPUT]))
        return -x

    positive = tf.ones([BATCH, INPUT])
    negative = -positive
    eager_s = median_seconds(lambda: step(negative), repeats)
    costs = []
    for _ in range(max(5, repeats // 20)):
        jf = janus.function(step)
        for _ in range(4):
            jf(positive)      # graph assumes the positive branch
        started = time.perf_counter()
        jf(negative)          # the assumption fails: graph, failure, imperative re-run
        costs.append(time.perf_counter() - started)
        assert janus.stats(jf)['fallbacks'] == 1
    fallback_s = statistics.median(costs)
    print('Fallback cost: a call whose assertion fails %.2f ms vs eager %.2f ms (%.1fx)'
          % (fallback_s * 1e3, eager_s * 1e3, fallback_s / eager_s))
    return fallback_s / eager_s


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=20)
    parser.add_argument('--repeats', type=int, default=200)
    args = parser.parse_args(argv)
    rnn_table(args.steps, args.repeats)
    profiler_overhead(args.repeats)
    fallback_cost(args.repeats)


if __name__ == '__main__':
    main()
