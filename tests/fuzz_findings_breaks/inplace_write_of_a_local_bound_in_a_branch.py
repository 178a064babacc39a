"""Finding 13 (fixed): a loop whose body binds a local to an outside dict under a
tensor ``if`` (after a ``continue``) and then changes it in place (``inner['n'] = ...``):
the loop-carry analysis learned that an ``if`` binding counts, so the local stopped
being carried, and the graph lost the in-place write (eager ``n`` 9, janus 5).
Found by soak ``soak20``, program 1674.  Fixed: a container the body changes in place
is carried like a rebound variable (``converters/control._carried``).
"""
# janus fuzz repro: state divergence (python -m tests.fuzzing --seed soak20 --only 1674)
# state at step 5 (S.nest2['w']['n']): eager 9 | janus 5
# Minimized from 44 to 20 source lines, 15 to 6 steps.
# The program is exec'd twice: `jit` is the identity (eager) or janus.function.
# Call sequence:
#    0  f(tf.constant([0.25, 1.0], dtype=tf.float32), 3)
#    1  f(tf.constant([0.5, 0.25], dtype=tf.float32), 3)
#    2  f(tf.constant([0.5, 0.5], dtype=tf.float32), 3)
#    3  f(tf.constant([0.25, 0.5], dtype=tf.float32), 3)
#    4  S.nest2['w'] = {'n': 5, 'flag': 1}
#    5  f(tf.constant([0.25, 0.25, 0.5], dtype=tf.float32), 2)   # <-- diverges here
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
sys.path.insert(0, os.environ.get('JANUS_REPO', os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))

PROGRAM = '''\
import tensorflow as tf

class State:

    def __init__(self):
        self.nest2 = {'w': {'n': 0}, 'b': {'n': 0}}
S = State()

@jit
def f(x, p):
    acc = x * 1.0
    for k_n, d_n in S.nest2.items():
        d_n['last'] = k_n
    w3 = 0
    while w3 < p:
        w3 += 1
        if tf.reduce_sum(acc) < -1.0:
            continue
        inner_n = S.nest2['w']
        inner_n['n'] = inner_n.get('n', 0) * 2 % 11
'''

STEPS = [
    ('call', 'f', 'tf.constant([0.25, 1.0], dtype=tf.float32), 3'),
    ('call', 'f', 'tf.constant([0.5, 0.25], dtype=tf.float32), 3'),
    ('call', 'f', 'tf.constant([0.5, 0.5], dtype=tf.float32), 3'),
    ('call', 'f', 'tf.constant([0.25, 0.5], dtype=tf.float32), 3'),
    ('do', "S.nest2['w'] = {'n': 5, 'flag': 1}"),
    ('call', 'f', 'tf.constant([0.25, 0.25, 0.5], dtype=tf.float32), 2'),
]

if __name__ == '__main__':
    from tests.fuzzing.programs import Program
    from tests.fuzzing.runner import run_program
    result = run_program(Program('p_soak20_1674', PROGRAM, STEPS), verbose=True)
    d = result.divergence
    print('VERDICT:', 'reproduced (%s)' % d.describe() if d else 'not reproduced')
