"""Finding 5 (fixed on branch wt-fuzz, graphgen/segments.py _Cutter._segment): a name
bound before a segment (here a parameter) that the segment does not read but binds
only on one path (in an ``if``) was returned by the segment as if bound in it, because
"surely bound after the run" was computed from the skeleton's point of view.  When the
branch does not run the segment raises UnboundLocalError (eagerly: the old value).
The fix computes what is bound after the run inside the segment (its inputs and what
it binds); such a name comes back UNDEFINED and the skeleton keeps its own.

Fuzzer: seed 1900, program 123 (there through a second break inside a segment: the
inner split's skeleton has the segment's parameters bound).
"""
from _common import janus, run, tf


def f(x, msg='none'):
    if x[0] > 0.5:
        msg = 'big'
    print(msg, x.numpy())
    return x * 2.0


jf = janus.function(f)
diffs = []
for i, v in enumerate([1.0] * 7 + [0.25, 1.0, 0.25]):
    e, j = run(f, (tf.constant([v]),)), run(jf, (tf.constant([v]),))
    if e != j:
        diffs.append((i, e, j))
for i, e, j in diffs[:2]:
    print('call %d: eager %s | janus %s' % (i, e, j))
print('VERDICT:', 'reproduced' if diffs else 'not reproduced')
