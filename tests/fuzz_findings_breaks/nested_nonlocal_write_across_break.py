"""Finding 3 (fixed on branch wt-fuzz, graphgen/segments.py _refuse_escaping_closures):
a nested function writing a local of the cut function through ``nonlocal``.  The segment
before the break defines ``bump`` and ``tally``; ``bump``'s closure keeps that segment's
cell, so the calls after the break increment a cell nobody reads, and ``return tally``
reads the skeleton's copy: janus returns 0, eager 2 (from the first split call on).
The fix refuses the cut (CannotSplit: the function runs as before graph breaks).

Fuzzer: seed 1900, program 13 (kind return; features inner_fn + break_size).
"""
from _common import np, janus, run, tf


def f(x):
    tally = 0

    def bump():
        nonlocal tally
        tally += 1
    size = int(np.ceil(float(tf.reduce_sum(tf.abs(x))))) % 4
    for _ in range(2):
        bump()
    return tally, size


jf = janus.function(f)
diffs = []
for i in range(8):
    e = run(f, (tf.constant([1.0, -0.5 * i]),))
    j = run(jf, (tf.constant([1.0, -0.5 * i]),))
    if e != j:
        diffs.append((i, e, j))
for i, e, j in diffs[:2]:
    print('call %d: eager %s | janus %s' % (i, e[0], j[0]))
print('VERDICT:', 'reproduced' if diffs else 'not reproduced')
