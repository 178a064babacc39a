"""Never slower than eager (issue #36's targets): every step timed from the first.

Side by side in one process, each mode on fresh objects from the same seed,
the modes taking turns step by step (so the machine's noise falls on all of
them alike).  Nothing is dropped: profiling, tracing, the breaks' discovery,
the measured floor's eager samples and every fallback are in the totals.

* **Logging step**: a Keras training step printing ``loss.numpy()`` every
  10th step inside the step, against the same step with the print moved out
  (the caller prints), under janus and ``tf.function``; eager as written.
* **REINFORCE with a NumPy environment**, written per frame as users write it
  (``.numpy()`` of the policy's probabilities, a NumPy RNG draw, an episode
  length that varies, NumPy returns, ``np.stack``); janus against eager.
* **Alternating inputs**: a step alternating two input shapes, and one
  alternating two values of a Python number; graphs built after warm-up.
* **The examples** (``examples/``, ``--examples``): each example's step, eager
  against janus.

For each: total time over the steps (warm-up included) as a ratio to eager,
and the steady ratio (median step of the last half), with janus's graphs and
fallbacks.

    .venv/bin/python benchmarks/never_slower.py [--steps 100] [--only logging] [--examples lenet,reinforce]
"""
import argparse
import contextlib
import importlib
import io
import os
import statistics
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import janus  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def side_by_side(modes, steps):
    """{mode: [seconds of each step]}: ``modes`` maps a name to a step callable
    ``step(i)``; the modes take turns step by step, in an order that rotates (so no
    mode always runs right after the slow eager one), their output swallowed."""
    times = {name: [] for name in modes}
    names = list(modes)
    with contextlib.redirect_stdout(io.StringIO()):
        for i in range(steps):
            for name in names[i % len(names):] + names[:i % len(names)]:
                started = time.perf_counter()
                modes[name](i)
                times[name].append(time.perf_counter() - started)
    return times


def report(title, times, against='eager', stats=None):
    base = times[against]
    half = len(base) // 2
    print(title)
    for name, t in times.items():
        line = '  %-30s total %8.1f ms (%5.2fx %s), steady %7.3f ms a step (%5.2fx)' % (
            name, sum(t) * 1e3, sum(base) / sum(t), against,
            statistics.median(t[half:]) * 1e3,
            statistics.median(base[half:]) / statistics.median(t[half:]))
        print(line)
    for name, jf in (stats or {}).items():
        s = janus.stats(jf)
        print('  %-30s graphs %d (segments %d), fallbacks %d, split calls %d, plain %d' % (
            name, s['graphs_built'], _segment_graphs(jf), s['fallbacks'], s['split_calls'],
            s['imperative_calls']))


def _segment_graphs(jf):
    return sum(janus.stats(p)['graphs_built'] for split in jf.state.splits.values()
               for p in split.slots if isinstance(p, janus.api.JanusFunction))


# -- the logging step ------------------------------------------------------------------

class Trainer:
    def __init__(self, print_inside):
        tf.keras.utils.set_random_seed(0)
        self.model = tf.keras.Sequential([tf.keras.layers.Dense(64, activation='relu'),
                                          tf.keras.layers.Dense(10)])
        self.opt = tf.keras.optimizers.Adam(1e-3)
        self.loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.step = 0
        self.print_inside = print_inside

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = self.loss_fn(y, self.model(x, training=True))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.model.trainable_variables))
        self.step += 1
        if self.print_inside and self.step % 10 == 0:
            print('step', self.step, 'loss', loss.numpy())
        return loss


def logging_step(steps):
    """Two runs on fresh objects: janus against eager, then the janus step against the
    same step with the print moved out (and tf.function's) without eager steps in
    between (eager's garbage makes the next steps' collections slower, unevenly)."""
    x = tf.random.stateless_normal([64, 32], seed=[1, 2])
    y = tf.random.stateless_uniform([64], seed=[3, 4], maxval=10, dtype=tf.int32)

    def printed_outside(trainer, fn):
        def step(i):
            loss = fn(x, y)
            if trainer.step % 10 == 0:
                print('step', trainer.step, 'loss', loss.numpy())
        return step
    eager, inside = Trainer(True), Trainer(True)
    janus_inside = janus.function(inside.train_step)
    times = side_by_side({'eager': lambda i: eager.train_step(x, y),
                          'janus, print inside': lambda i: janus_inside(x, y)}, steps)
    report('logging step (print(loss.numpy()) every 10th step), %d steps:' % steps, times,
           stats={'janus, print inside': janus_inside})
    inside, outside, tf_outside = Trainer(True), Trainer(False), Trainer(False)
    janus_inside = janus.function(inside.train_step)
    janus_outside = janus.function(outside.train_step)
    times = side_by_side({
        'janus, print inside': lambda i: janus_inside(x, y),
        'janus, print moved out': printed_outside(outside, janus_outside),
        'tf.function, print moved out': printed_outside(tf_outside,
                                                        tf.function(tf_outside.train_step)),
    }, steps)
    report('  the same step against the print moved out (fresh objects, %d steps):' % steps,
           times, against='janus, print moved out',
           stats={'janus, print inside': janus_inside, 'janus, print moved out': janus_outside})
    inside_t, outside_t = times['janus, print inside'], times['janus, print moved out']
    half = steps // 2
    print('  print inside / moved out, janus: %.2fx over the last %d steps (mean step), '
          '%.2fx over all' % (statistics.fmean(outside_t[half:]) / statistics.fmean(
              inside_t[half:]), steps - half, sum(outside_t) / sum(inside_t)))


# -- REINFORCE with a NumPy environment ---------------------------------------------

class CartEnv:
    """A cart-pole written in NumPy (its own RandomState)."""

    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        self.t = 0
        return self.state.astype(np.float32)

    def step(self, action):
        x, v, theta, omega = self.state
        force = 1.0 if action == 1 else -1.0
        omega = omega + 0.02 * (9.8 * np.sin(theta) - force * np.cos(theta))
        theta = theta + 0.02 * omega
        v = v + 0.02 * force
        x = x + 0.02 * v
        self.state = np.array([x, v, theta, omega])
        self.t += 1
        done = abs(theta) > 0.2 or abs(x) > 2.4 or self.t >= 100
        return self.state.astype(np.float32), 1.0, done


class Agent:
    def __init__(self):
        tf.keras.utils.set_random_seed(0)
        self.policy = tf.keras.Sequential([tf.keras.layers.Dense(32, activation='tanh'),
                                           tf.keras.layers.Dense(2)])
        self.opt = tf.keras.optimizers.Adam(1e-2)
        self.rng = np.random.RandomState(1)
        self.gamma = 0.99
        self.episodes = 0

    def run_episode(self, env):
        obs = env.reset()
        observations, actions, rewards = [], [], []
        done = False
        while not done:
            probs = tf.nn.softmax(self.policy(obs[None]))[0].numpy()
            action = int(self.rng.uniform() < probs[1])
            observations.append(obs)
            actions.append(action)
            obs, reward, done = env.step(action)
            rewards.append(reward)
        returns, g = [], 0.0
        for r in reversed(rewards):
            g = r + self.gamma * g
            returns.insert(0, g)
        returns = np.array(returns, dtype=np.float32)
        returns = (returns - returns.mean()) / (returns.std() + 1e-6)
        with tf.GradientTape() as tape:
            logp = tf.nn.log_softmax(self.policy(np.stack(observations)))
            chosen = tf.reduce_sum(logp * tf.one_hot(actions, 2), axis=1)
            loss = -tf.reduce_mean(chosen * returns)
        grads = tape.gradient(loss, self.policy.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.policy.trainable_variables))
        self.episodes += 1
        return len(rewards)


def reinforce(episodes):
    eager, agent = Agent(), Agent()
    envs = {'eager': CartEnv(0), 'janus': CartEnv(0)}
    jf = janus.function(agent.run_episode)
    lengths = {'eager': [], 'janus': []}

    def run(name, fn):
        return lambda i: lengths[name].append(fn(envs[name]))
    times = side_by_side({'eager': run('eager', eager.run_episode),
                          'janus': run('janus', jf)}, episodes)
    report('REINFORCE, NumPy environment, per frame, %d episodes (%d frames):'
           % (episodes, sum(lengths['eager'])), times, stats={'janus': jf})
    print('  same episodes as eager: %s' % (lengths['eager'] == lengths['janus']))


# -- alternating inputs -----------------------------------------------------------------

class Encoder:
    def __init__(self):
        self.w = tf.Variable(tf.reshape(tf.range(64 * 64, dtype=tf.float32), (64, 64)) / 4096.0)

    def encode(self, x, heads):
        h = x
        for _ in range(8):
            h = tf.tanh(tf.matmul(h, self.w)) + 0.1
        return tf.reduce_sum(tf.reshape(h, (heads, -1)), axis=1)


def alternating(steps):
    alternating_one('two input shapes', lambda i: (tf.ones((4 if i % 2 else 6, 64)), 2), steps)
    alternating_one('two values of a number', lambda i: (tf.ones((6, 64)), 2 if i % 2 else 3),
                    steps)


def alternating_one(title, args, steps):
    eager, model = Encoder(), Encoder()
    jf = janus.function(model.encode)
    built = []

    def janus_step(i):
        jf(*args(i))
        built.append(janus.stats(jf)['graphs_built'])
    times = side_by_side({'eager': lambda i: eager.encode(*args(i)), 'janus': janus_step},
                         steps)
    report('alternating %s, %d steps:' % (title, steps), times, stats={'janus': jf})
    print('  graphs built after step 10: %d' % (built[-1] - built[9]))


# -- the examples -----------------------------------------------------------------------

def examples(names, steps):
    sys.path.insert(0, os.path.join(ROOT, 'examples'))
    sys.path.insert(0, os.path.join(ROOT, 'benchmarks'))
    from paper_table import MODELS
    for name in names:
        module, cls = MODELS[name]
        workload = getattr(importlib.import_module(module), cls)
        runs = {mode: workload(mode, seed=0) for mode in ('eager', 'janus')}
        times = side_by_side({mode: (lambda i, w=w: w.step()) for mode, w in runs.items()},
                             steps)
        report('example %s, %d steps:' % (name, steps), times,
               stats=dict(zip(['janus'], runs['janus'].janus_functions())))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--steps', type=int, default=100)
    parser.add_argument('--episodes', type=int, default=60)
    parser.add_argument('--examples', default='',
                        help='comma-separated examples (paper_table.py names), or "all"')
    parser.add_argument('--only', default='logging,reinforce,alternating',
                        help='comma-separated parts: logging, reinforce, alternating')
    args = parser.parse_args()
    parts = args.only.split(',')
    if 'logging' in parts:
        logging_step(args.steps)
    if 'reinforce' in parts:
        reinforce(args.episodes)
    if 'alternating' in parts:
        alternating(args.steps)
    if args.examples:
        sys.path.insert(0, os.path.join(ROOT, 'benchmarks'))
        from paper_table import MODELS
        names = list(MODELS) if args.examples == 'all' else args.examples.split(',')
        examples(names, args.steps)


if __name__ == '__main__':
    main()
