"""Finding 12 (fixed): TF's grappler constant folding reassociates float arithmetic
with constants in janus's graphs; a value computed in a graph differs from eager's in
its last bit, and ``float()`` of it kept in a Python list (compared exactly) shows it:
``losses2[10]`` is 151.21324157714844 eagerly and 151.21322631835938 under janus.
Found by the CI slice (seed ``ci``, program 21) once the fuzzer gained ``ds_loop``;
the program has no dataset loop: janus at c8503ac diverges the same way.
Fixed by running janus's graphs with constant folding off (``replay/rewrites.py``).
"""
# janus fuzz repro: state divergence (python -m tests.fuzzing --seed ci --only 21)
# state at step 9 (f.<cell losses2>[10]): eager 151.21324157714844 | janus 151.21322631835938
# Minimized from 89 to 86 source lines, 15 to 10 steps.
# The program is exec'd twice: `jit` is the identity (eager) or janus.function.
# Call sequence:
#    0  f(tf.constant([0.75, 0.5, 0.5, 0.75], dtype=tf.float32), 3)
#    1  f(tf.constant([1.0, 0.5, 0.5, 1.0], dtype=tf.float32), 3)
#    2  f(tf.constant([1.0, 0.75, 0.25, 1.0], dtype=tf.float32), 3)
#    3  S.hist.clear()
#    4  f(tf.constant([1.0, 0.5, 0.75, 0.5], dtype=tf.float32), 3)
#    5  S.training = False
#    6  f(tf.constant([-0.5, -0.25, -0.75, -0.5], dtype=tf.float32), 4)
#    7  f(tf.constant([-1.0, -0.5, -0.5, -0.5], dtype=tf.float32), 4)
#    8  S.training = not S.training
#    9  f(tf.constant([0.75, 0.25, 0.75, 1.0], dtype=tf.float32), 3)   # <-- diverges here
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
sys.path.insert(0, os.environ.get('JANUS_REPO', os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))

PROGRAM = '''\
import enum
import math
import numpy as np
import tensorflow as tf

def scaled(t, k):
    for i in range(k):
        yield (t * (0.5 * (i + 1)))

def pairs(t):
    for i, v in enumerate(t.numpy().tolist()):
        yield (i, v)

def running(t, log):
    total = 0.0
    for v in t.numpy():
        total += float(v)
        log.append(round(total, 4))
        yield total
import statistics
import bisect
BOUNDS3 = [0.5, 2.0, 8.0]

class State:

    def __init__(self):
        self.totals1 = []
        self.state = (tf.zeros([]), tf.ones([]))
        self.training = True
        self.step = 0
        self.hist = []
S = State()
S2 = State()

def make():
    losses2 = []
    base6 = 1.5
    count7 = 0
    seen8 = []

    @jit
    def f(x, p):
        nonlocal count7
        acc = x * 1.0
        for v_, j_ in zip(scaled(acc, 3), range(p)):
            acc = tf.clip_by_value(acc + v_, -20.0, 20.0)
        i11 = tf.constant(0)
        while i11 < tf.cast(tf.reduce_max(tf.abs(x)) * 2.0, tf.int32):
            i11 = i11 + 1
            h4, c5 = S.state
            c5 = c5 + tf.cast(tf.reduce_mean(acc), tf.float32) * 0.5
            h4 = tf.tanh(c5) + h4 * 0.5
            S.state = (h4, c5)
            acc = acc + tf.cast(h4, acc.dtype)
            acc = acc + base6
            acc = tf.clip_by_value(acc, -20.0, 20.0)
        acc = acc + len(S.hist)
        if S.step % 2 == 0:
            acc = acc - 0.5
        seen8.append(count7)
        count7 += 1
        i10 = tf.constant(0)
        while i10 < tf.cast(tf.reduce_max(tf.abs(x)) * 2.0, tf.int32):
            i10 = i10 + 1
            if tf.reduce_sum(acc) < -1.0:
                break
            losses2.append(float(tf.reduce_mean(acc * acc)))
            if len(losses2) > 1 and statistics.pstdev(losses2) > 1.0:
                acc = acc * 0.5
            for i_, v_ in pairs(acc):
                if v_ > 1.0:
                    break
                acc = acc * 0.5 + v_
        S.step += 1
        S.hist.append(acc)
        if S.training:
            acc = acc * 0.5
        else:
            acc = acc + 1.0
        return [acc, S.totals1, tf.reduce_sum(acc), losses2, S.state, S.step, S.hist, len(seen8)]

    def set_base9(v):
        nonlocal base6
        base6 = v
    return (f, set_base9)
f, set_base9 = make()
'''

STEPS = [
    ('call', 'f', 'tf.constant([0.75, 0.5, 0.5, 0.75], dtype=tf.float32), 3'),
    ('call', 'f', 'tf.constant([1.0, 0.5, 0.5, 1.0], dtype=tf.float32), 3'),
    ('call', 'f', 'tf.constant([1.0, 0.75, 0.25, 1.0], dtype=tf.float32), 3'),
    ('do', 'S.hist.clear()'),
    ('call', 'f', 'tf.constant([1.0, 0.5, 0.75, 0.5], dtype=tf.float32), 3'),
    ('do', 'S.training = False'),
    ('call', 'f', 'tf.constant([-0.5, -0.25, -0.75, -0.5], dtype=tf.float32), 4'),
    ('call', 'f', 'tf.constant([-1.0, -0.5, -0.5, -0.5], dtype=tf.float32), 4'),
    ('do', 'S.training = not S.training'),
    ('call', 'f', 'tf.constant([0.75, 0.25, 0.75, 1.0], dtype=tf.float32), 3'),
]

if __name__ == '__main__':
    from tests.fuzzing.programs import Program
    from tests.fuzzing.runner import run_program
    result = run_program(Program('p_ci_21', PROGRAM, STEPS), verbose=True)
    d = result.divergence
    print('VERDICT:', 'reproduced (%s)' % d.describe() if d else 'not reproduced')
