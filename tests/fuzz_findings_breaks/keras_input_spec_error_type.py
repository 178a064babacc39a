# janus fuzz repro: janus-error divergence (python -m tests.fuzzing --seed soak37 --only 749)
# janus-error [InvalidArgumentError@replay.entry.call] at step 4 (outcome): eager ValueError: Input 0 with name 'None' of layer 'kl3_d2' is incompatible with the layer: expected axis -1 of input shape to have value 5, but received input with shape (1, 3) | janus tensorflow.python.framework.errors_impl.InvalidArgumentError: Graph execution error:  Detected at node kl3_d2_1/MatMul defined at (most recent call last):   File "<frozen runpy>", line 198, in _run_module_as_main    File "<frozen runpy>", line 88, in _run_code    File "<repo>/tests/fuzzing/__ma...
# Minimized from 38 to 15 source lines, 16 to 5 steps.
# The program is exec'd twice: `jit` is the identity (eager) or janus.function.
# Call sequence:
#    0  f(tf.constant([1.0, 0.25, 1.0], dtype=tf.float32), ITA1)
#    1  f(tf.constant([0.25, 0.25, 0.25], dtype=tf.float32), itp2=ITA1)
#    2  KL3.blocks.append(tf.keras.layers.Dense(1, kernel_initializer='ones', name='kl3_d2'))
#    3  f(tf.constant([-1.25, -1.25, -1.75, -1.25, -1.75], dtype=tf.float32), ITA1)
#    4  f(tf.constant([1.0, 0.5, 0.25], dtype=tf.float32), itp2=ITA1)   # <-- diverges here
# janus traceback (last lines):
#     File "<repo>/janus/trace/calls.py", line 117, in call
#     File "<repo>/janus/trace/calls.py", line 872, in _call_library
#     File "<repo>/.venv/lib/python3.11/site-packages/keras/src/utils/traceback_utils.py", line 117, in error_handler
#     File "<repo>/.venv/lib/python3.11/site-packages/keras/src/layers/layer.py", line 1002, in __call__
#     File "<repo>/.venv/lib/python3.11/site-packages/keras/src/utils/traceback_utils.py", line 117, in error_handler
#     File "<repo>/.venv/lib/python3.11/site-packages/keras/src/ops/operation.py", line 63, in __call__
#     File "<repo>/.venv/lib/python3.11/site-packages/keras/src/utils/traceback_utils.py", line 156, in error_handler
#     File "<repo>/.venv/lib/python3.11/site-packages/keras/src/layers/core/dense.py", line 222, in call
#     File "<repo>/.venv/lib/python3.11/site-packages/keras/src/ops/numpy.py", line 5114, in matmul
#     File "<repo>/.venv/lib/python3.11/site-packages/keras/src/backend/tensorflow/numpy.py", line 620, in matmul
#   Matrix size-incompatible: In[0]: [1,3], In[1]: [5,1]
#   	 [[{{node kl3_d2_1/MatMul}}]] [Op:__inference_janus_f_516171]
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
sys.path.insert(0, os.environ.get('JANUS_REPO', os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')))

PROGRAM = '''\
import tensorflow as tf
ITA1 = iter(tf.data.Dataset.range(1000))

def make_keras_list_(name):
    m = tf.keras.layers.Layer(name=name)
    m.blocks = [tf.keras.layers.Dense(1, kernel_initializer='ones', name=name + '_d0'), tf.keras.layers.Dense(1, kernel_initializer='zeros', bias_initializer='ones', name=name + '_d1')]
    return m
KL3 = make_keras_list_('kl3')

@jit
def f(x, itp2):
    acc = x * 1.0
    e_ = next(itp2)
    acc = acc + tf.cast(e_, acc.dtype) * 0.01
    acc = acc + tf.cast(tf.reduce_sum(KL3.blocks[-1](tf.reshape(tf.cast(acc, tf.float32), [1, -1]))), acc.dtype) * 0.1
'''

STEPS = [
    ('call', 'f', 'tf.constant([1.0, 0.25, 1.0], dtype=tf.float32), ITA1'),
    ('call', 'f', 'tf.constant([0.25, 0.25, 0.25], dtype=tf.float32), itp2=ITA1'),
    ('do', "KL3.blocks.append(tf.keras.layers.Dense(1, kernel_initializer='ones', name='kl3_d2'))"),
    ('call', 'f', 'tf.constant([-1.25, -1.25, -1.75, -1.25, -1.75], dtype=tf.float32), ITA1'),
    ('call', 'f', 'tf.constant([1.0, 0.5, 0.25], dtype=tf.float32), itp2=ITA1'),
]

if __name__ == '__main__':
    from tests.fuzzing.programs import Program
    from tests.fuzzing.runner import run_program
    result = run_program(Program('p_soak37_749', PROGRAM, STEPS), verbose=True)
    d = result.divergence
    print('VERDICT:', 'CONFIRMED (%s)' % d.describe() if d else 'not reproduced')
