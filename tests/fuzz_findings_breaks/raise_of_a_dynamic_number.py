"""Finding 9 (fixed): ``raise ValueError(v)`` of a number read with ``float(t)`` (a
dynamic number in the trace) under a tensor condition.  The trace fails at the raise;
janus wrote the failure's message with ``str()`` of the user's exception after the
trace had ended, and the dynamic number inside it needed the trace: an internal
``RuntimeError: janus converted code ran outside of a trace`` on every such call
(eager raises ValueError where the condition holds and returns otherwise).  Found by
soak ``soak19c``, program 241.
"""
from _common import internal_errors, janus, run, tf

SEEN = []


def f(x, p):
    acc = x * 1.0
    for _ in range(p):
        if tf.reduce_sum(x) > 0.0:
            v = float(tf.reduce_max(x))
            SEEN.append(v)
            if v > 2.875:
                raise ValueError(v)
            acc = tf.clip_by_value(acc + v * 0.1 + tf.reduce_sum(acc), -20.0, 20.0)
    return acc


jf = janus.function(f)
calls = [([0.5, 1.0], 1), ([1.0, 0.75], 1), ([-0.75, -0.25], 2), ([-0.25, 3.0], 2),
         ([1.0, 0.75], 1), ([2.0, 3.5], 1), ([1.0, 0.5], 2)]
diffs = []
for i, (values, p) in enumerate(calls):
    e, j = run(f, (tf.constant(values), p)), run(jf, (tf.constant(values), p))
    if e != j:
        diffs.append((i, e[0], j[0]))
for i, e, j in diffs[:2]:
    print('call %d: eager %s | janus %s' % (i, e, j))
errors = internal_errors(jf)
print('janus internal errors: %d' % len(errors))
print('VERDICT:', 'reproduced' if diffs or errors else 'not reproduced')
