"""Shadow-heap benchmark: in-graph Janus>PyGetAttr/PySetAttr vs hoisted inputs/outputs.

The paper's Figure 1 model, whole (``self.state`` read at the start of each
call and written at the end, a training step inside), run eagerly and under
janus on both heap paths, side by side in one process; medians of repeated
timed calls and the ratios.

    python benchmarks/shadow_heap.py [--repeats 300]
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))
import janus  # noqa: E402


class RNNModel:
    def __init__(self, hidden=32):
        keras.utils.set_random_seed(3)
        self.cell = keras.layers.SimpleRNNCell(hidden)
        self.cell.build((None, 16))
        self.opt = keras.optimizers.SGD(0.01)
        self.state = tf.zeros([8, hidden])

    def __call__(self, sequence):
        with tf.GradientTape() as tape:
            state = self.state
            outputs = []
            for item in sequence:
                _, states = self.cell(item, [state])
                state = states[0]
                outputs += [state]
            loss = tf.reduce_mean(tf.stack(outputs) ** 2)
        grads = tape.gradient(loss, self.cell.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.cell.trainable_variables))
        self.state = tf.stop_gradient(state)
        return loss


def median_call(fn, sequence, repeats):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn(sequence)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=300)
    args = parser.parse_args(argv)
    sequence = tf.random.stateless_normal([10, 8, 16], seed=[1, 2])
    rows = {}
    eager_model = RNNModel()
    rows['eager'] = median_call(eager_model, sequence, max(20, args.repeats // 10))
    for name, ops in (('janus hoisted', False), ('janus heap ops', True)):
        model = RNNModel()
        with janus.config.patch(heap_ops=ops):
            jf = janus.function(lambda s, model=model: model(s))
            for _ in range(5):
                jf(sequence)
            rows[name] = median_call(jf, sequence, args.repeats)
            assert janus.stats(jf)['graphs_built'] == 1
    print('Figure 1 RNN step (10 steps, batch 8, hidden 32), median ms per call:')
    for name, seconds in rows.items():
        print('  %-16s %7.3f ms' % (name, seconds * 1e3))
    print('  heap ops - hoisted = %+.1f us per call (1 read + 1 write of self.state)'
          % ((rows['janus heap ops'] - rows['janus hoisted']) * 1e6))
    print('  hoisted / eager = %.1fx throughput' % (rows['eager'] / rows['janus hoisted']))


if __name__ == '__main__':
    main()
