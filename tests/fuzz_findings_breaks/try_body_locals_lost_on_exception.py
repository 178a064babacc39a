"""Finding 4 (fixed on branch wt-fuzz, graphgen/segments.py _Cutter.block ``guarded``):
a ``try`` body runs as one segment; when its second statement raises (KeyError here),
the segment returns none of the locals its first statement bound, so the handler and
the code after the ``try`` see ``acc`` from before the body: janus [0.5], eager [1.5]
on every call from the split on.  The fix makes each statement of a try body a segment
of its own (a compound one stays in Python, its bodies cut in turn).

Found by reading segments.py while the fuzzer's break_try feature (which generates this
idiom) ran; seed 1900 did not hit it in its first 100 programs.
"""
from _common import janus, run, tf

T = {}


def f(x, p):
    acc = x * 1.0
    try:
        acc = acc * 2.0
        acc = acc + T['k%d' % p]
    except KeyError:
        acc = acc - 0.5
        T['k%d' % p] = float(len(T))
    return acc


jf = janus.function(f)
diffs = []
for p in range(8):
    T.clear()
    e = run(f, (tf.constant([1.0]), p))
    T.clear()
    j = run(jf, (tf.constant([1.0]), p))
    if e != j:
        diffs.append((p, e, j))
for p, e, j in diffs[:2]:
    print('call %d: eager %s | janus %s' % (p, e[0], j[0]))
print('VERDICT:', 'reproduced' if diffs else 'not reproduced')
