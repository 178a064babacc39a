"""Data-parallel training with Horovod and janus.DistributedOptimizer.

Every rank trains the same MLP on its share of each global batch; the
gradients are averaged inside each step's janus graph.  Rank 0 prints the
throughput (global samples/s, median of timed windows).

    horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_mlp.py [--steps 200]
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import horovod.tensorflow as hvd  # noqa: E402
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))
import janus  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=200)
    parser.add_argument('--batch', type=int, default=256, help='global batch size')
    args = parser.parse_args(argv)
    hvd.init()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation='relu'),
                              keras.layers.Dense(256, activation='relu'), keras.layers.Dense(10)])
    janus.broadcast_variables(model.weights, root_rank=0)
    opt = janus.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    share = args.batch // hvd.size()
    rates, started, loss = [], time.perf_counter(), None
    for step in range(args.steps):
        x = tf.random.stateless_normal([share, 64], seed=[step, hvd.rank()])
        y = tf.random.stateless_uniform([share], seed=[step, 7], maxval=10, dtype=tf.int32)
        loss = opt.minimize(lambda: loss_fn(y, model(x, training=True)), model.trainable_variables)
        if (step + 1) % 25 == 0:
            now = time.perf_counter()
            rates.append(25 * args.batch / (now - started))
            started = now
    if hvd.rank() == 0:
        print('%d process(es): %.0f samples/s (median of %d windows, first dropped), '
              'loss %.3f; %s' % (hvd.size(), statistics.median(rates[1:] or rates), len(rates),
                                 float(loss), janus.stats(opt)))


if __name__ == '__main__':
    main()
