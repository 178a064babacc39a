"""The README's first example: a Keras training step as users write it, with a step
counter in ``self.step`` and the loss printed with ``.numpy()`` every 50 steps, run
under janus; then the first lines of ``janus.explain``, which tell what ran where.

    python examples/quickstart.py [--steps 200] [--tf-print]
"""
import argparse
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import janus  # noqa: E402


class Trainer:
    def __init__(self):
        keras.utils.set_random_seed(0)
        self.model = keras.Sequential([keras.layers.Dense(64, activation='relu'),
                                       keras.layers.Dense(1)])
        self.optimizer = keras.optimizers.SGD(0.01)
        self.step = 0

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self.model(x) - y))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        self.step += 1
        if self.step % 50 == 0:
            print('step', self.step, 'loss', loss.numpy())
        return loss


class TfPrintTrainer(Trainer):
    """The same step with explain's advice applied: the loss printed with tf.print."""

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self.model(x) - y))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        self.step += 1
        if self.step % 50 == 0:
            tf.print('step', self.step, 'loss', loss)
        return loss


def main(steps=200, tf_print=False):
    trainer = TfPrintTrainer() if tf_print else Trainer()
    train_step = janus.function(trainer.train_step)
    x = tf.random.stateless_normal([32, 8], seed=[1, 2])
    y = tf.reduce_sum(x, axis=1, keepdims=True)
    for _ in range(steps):
        train_step(x, y)
    return train_step


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=200)
    parser.add_argument('--tf-print', action='store_true',
                        help="explain's advice applied: the loss printed with tf.print")
    args = parser.parse_args()
    step = main(args.steps, args.tf_print)
    print('\n'.join(janus.explain(step).split('\n')[:6]))
