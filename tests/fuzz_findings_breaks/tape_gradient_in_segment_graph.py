"""Finding 6 (fixed on branch wt-fuzz in graphgen/segments.py: what a ``with`` cut by a
break binds is read in Python only; the converter may want the general fix below): a
break inside a
``GradientTape`` body (``print(y.numpy())``, the Keras train-step idiom).  The tape is
bound in the skeleton and recorded the segments' graph calls, right; but the statement
``g = tape.gradient(loss, W)`` after the ``with`` lands in a segment of its own that
takes ``tape`` and ``loss`` as inputs, and janus converts it: traced in that segment's
graph, ``loss`` is a placeholder with no path to ``W`` and the gradient is None.  The
segment's graph is guarded on the tape's identity (a new tape every call), so every
other call misses and re-profiles (right), and each call that builds a graph runs it
(gradient None): janus returns None where eager returns the gradient.  With the
gradient used in the same segment (``w.assign_sub(0.01 * g)``) janus raised
``RuntimeError: A non-persistent GradientTape can only be used to compute one set of
gradients`` instead (tests/test_graph_breaks.py test_a_break_inside_a_gradient_tape_body).

General fix (a tape passed in as an argument, or reached through an object, is the same
case without a break): the converter refuses ``tape.gradient``/``jacobian`` on a tape not
entered in the trace (calls.py), so the statement becomes a break of its own and runs
in Python on the real tape.  Found by reading segments.py (``with`` bodies) while the
soak ran; the fuzzer's break features did not put a break inside a tape body.
"""
from _common import janus, run, tf

W = tf.Variable([1.0, 2.0])


def f(x):
    with tf.GradientTape() as tape:
        y = x * W
        print('y', y.numpy())
        loss = tf.reduce_sum(y * y)
    g = tape.gradient(loss, W)
    return loss, g


jf = janus.function(f)
diffs = []
for i in range(10):
    e, j = run(f, (tf.constant([1.0, float(i)]),)), run(jf, (tf.constant([1.0, float(i)]),))
    if e != j:
        diffs.append((i, e[0], j[0]))
for i, e, j in diffs[:2]:
    print('call %d: eager %s | janus %s' % (i, e, j))
print('VERDICT:', 'reproduced' if diffs else 'not reproduced')
