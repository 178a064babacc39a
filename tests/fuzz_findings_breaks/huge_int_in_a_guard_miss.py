"""Finding 10 (fixed): an outside int squared every call (``S.step = S.step * S.step + 1``)
passes 4,300 digits within a few calls; the guard miss described the new value with
``repr``, which Python refuses past that many digits (``ValueError: Exceeds the limit
(4300 digits) for integer string conversion``): an internal error while preparing
the call.  Not a graph break.  Found by soak ``soak19c``, program 553.
"""
from _common import internal_errors, janus, run, tf


class State:
    step = 5


S = State()


def f(x):
    acc = x * 1.0
    for e in x:
        acc = acc + e
        S.step = S.step * S.step + 1
    return acc


jf = janus.function(f)
diffs = []
for start in [5] * 6 + [10 ** 5000, 5]:   # a graph for small values; then a huge one
    S.step = start
    e = run(f, (tf.constant([1.0, 0.5, 0.25]),)), S.step
    S.step = start
    j = run(jf, (tf.constant([1.0, 0.5, 0.25]),)), S.step
    if e != j:
        diffs.append((start, e[0], j[0]))
errors = internal_errors(jf)
print('janus internal errors: %d' % len(errors))
print('VERDICT:', 'reproduced' if diffs or errors else 'not reproduced')
