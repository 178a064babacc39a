"""One rank of the Horovod tests (run by test_horovod.py through horovodrun).

Each rank trains with janus.DistributedOptimizer on its half of every batch;
it also trains a reference model eagerly, in this process, on the whole
batch.  Averaged half-batch gradients equal the whole-batch gradient, so the
weights must match.  Writes what it saw to <outdir>/rank<r>.json.

    horovodrun -np 2 -H localhost:2 --gloo python tests/horovod_worker.py OUTDIR SCENARIO
"""
import json
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import horovod.tensorflow as hvd  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))
import janus  # noqa: E402

STEPS = 12


def model():
    keras.utils.set_random_seed(1)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(6, activation='tanh'),
                          keras.layers.Dense(1)])
    return m


def batch(step, scenario):
    x = tf.random.stateless_normal([8, 4], seed=[step, 1])
    y = tf.random.stateless_normal([8, 1], seed=[step, 2])
    if scenario == 'breaks-on-one-rank' and step == 7:
        x = tf.concat([x[:4], x[4:] + 10.0], 0)   # only rank 1's half trips the branch
    return x, y


def loss_of(m, x, y):
    pred = m(x, training=True)
    if tf.reduce_mean(x) > 2.0:      # profiled False everywhere: assumed, checked in-graph
        pred = pred * 0.5
    return tf.reduce_mean((pred - y) ** 2)


def main(outdir, scenario):
    import faulthandler
    faulthandler.dump_traceback_later(int(os.environ.get("JANUS_TEST_HANG_S", "120")), exit=True)   # a hang fails the test, with stacks
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    reference, trained = model(), model()
    janus.broadcast_variables(trained.weights, root_rank=0)
    ref_opt = keras.optimizers.SGD(0.1, momentum=0.5)
    opt = janus.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.5))
    losses = []
    for step in range(STEPS):
        x, y = batch(step, scenario)
        half = slice(rank * 8 // size, (rank + 1) * 8 // size)
        xs, ys = x[half], y[half]
        losses.append(float(opt.minimize(lambda: loss_of(trained, xs, ys),
                                         trained.trainable_variables)))
        # The reference: whole batch, eagerly, the averaged loss of the halves.
        with tf.GradientTape() as tape:
            parts = [loss_of(reference, x[k * 8 // size:(k + 1) * 8 // size],
                             y[k * 8 // size:(k + 1) * 8 // size]) for k in range(size)]
            ref_loss = tf.add_n(parts) / size
        grads = tape.gradient(ref_loss, reference.trainable_variables)
        ref_opt.apply_gradients(zip(grads, reference.trainable_variables))
    weights = [np.array(v) for v in trained.weights]
    result = dict(rank=rank, stats=janus.stats(opt._minimize), losses=losses,
                  weights=[w.tolist() for w in weights],
                  max_diff_to_reference=max(float(np.max(np.abs(a - np.array(b))))
                                            for a, b in zip(weights, reference.weights)),
                  explain=janus.explain(opt._minimize))
    with open(os.path.join(outdir, 'rank%d.json' % rank), 'w') as f:
        json.dump(result, f)


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
