# janus fuzz repro: janus-internal divergence (python -m tests.fuzzing --seed ci --only 168)
# janus-internal [AssertionError@tracing] at step 3 (explain): eager no janus error | janus recovered: janus failed while tracing: AssertionError: janus built a graph with a cycle (ops on or after it: GatherV2_12, GatherV2_3, GatherV2_6, GatherV2_9, IteratorGetNextAsOptional, StatefulPartitionedCall, StatefulPartitionedCall_1, StatefulPartitionedCall_2)
# Minimized from 81 to 36 source lines, 16 to 4 steps.
# The program is exec'd twice: `jit` is the identity (eager) or janus.function.
# Call sequence:
#    0  f(tf.constant([1.0, 0.75], dtype=tf.float32), lv_forest(3, 4, 1), ITA6, 0)
#    1  f(tf.constant([0.75, 0.75], dtype=tf.float32), lv_forest(8, 4, 2), ITA6, 0)
#    2  f(tf.constant([1.0, 0.25], dtype=tf.float32), lv_forest(13, 4, 3), ITA6, 0)
#    3  f(tf.constant([0.25, 0.75], dtype=tf.float32), lv_forest(18, 4, 1), ITA6, 0)   # <-- diverges here
# janus traceback (last lines):
#     File "/work/main/janus/graphgen/build.py", line 113, in _trace_once
#       result = tracer.trace(run.fn, converted, bound, signature, plan,
#                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
#     File "/work/main/janus/graphgen/tracer.py", line 462, in trace
#       entry = _traced_entry(ctx, fn, converted, bound, signature, distributed, number,
#               ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
#     File "/work/main/janus/graphgen/tracer.py", line 511, in _traced_entry
#       _assert_acyclic(concrete.graph)
#     File "/work/main/janus/graphgen/tracer.py", line 721, in _assert_acyclic
#       assert done == len(ops), ('janus built a graph with a cycle (ops on or after it: %s)'
#              ^^^^^^^^^^^^^^^^
#   AssertionError: janus built a graph with a cycle (ops on or after it: GatherV2_12, GatherV2_3, GatherV2_6, GatherV2_9, IteratorGetNextAsOptional, StatefulPartitionedCall, StatefulPartitionedCall_1, StatefulPartitionedCall_2)
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
sys.path.insert(0, os.environ.get('JANUS_REPO', os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')))

PROGRAM = '''\
import tensorflow as tf

class LvTag:

    def __init__(self, scale):
        self.scale = scale

class LvNode:

    def __init__(self, tag, value=None, left=None, right=None):
        self.tag, self.value, self.left, self.right = (tag, value, left, right)

def lv_forest(seed, count, size):

    def build(seed, size):
        tag = LvTag(0.5 * (seed % 3 + 1))
        if size <= 1:
            return LvNode(tag, value=seed % 5)
    return [build(seed + 11 * j, max(1, size - j % 2)) for j in range(count)]

def lvrec2(node, t):
    if node.left is None:
        return t * (node.value + 1) * node.tag.scale
    return lvrec2(node.left, t) * node.right.tag.scale + t
ITA6 = iter(tf.data.Dataset.range(1000))

@jit
def f(x, lf1, itp7, p):
    for e_ in itp7:
        pass
    for j10, w_ in enumerate([0.5, 1.5]):
        w9 = 0
        acc = tf.clip_by_value(tf.abs(x), -20.0, 20.0)
    lvt3 = acc * 0.5
    for tr4 in lf1:
        acc = acc + lvrec2(tr4, lvt3)
'''

STEPS = [
    ('call', 'f', 'tf.constant([1.0, 0.75], dtype=tf.float32), lv_forest(3, 4, 1), ITA6, 0'),
    ('call', 'f', 'tf.constant([0.75, 0.75], dtype=tf.float32), lv_forest(8, 4, 2), ITA6, 0'),
    ('call', 'f', 'tf.constant([1.0, 0.25], dtype=tf.float32), lv_forest(13, 4, 3), ITA6, 0'),
    ('call', 'f', 'tf.constant([0.25, 0.75], dtype=tf.float32), lv_forest(18, 4, 1), ITA6, 0'),
]

if __name__ == '__main__':
    from tests.fuzzing.programs import Program
    from tests.fuzzing.runner import run_program
    result = run_program(Program('p_ci_168', PROGRAM, STEPS), verbose=True)
    d = result.divergence
    print('VERDICT:', 'CONFIRMED (%s)' % d.describe() if d else 'not reproduced')
