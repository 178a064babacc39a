"""Finding 8 (open; not a graph break: no statement here is refused): trace time that
grows about quadratically with the unrolled iterations of a loop over a tensor holding
``if <tensor>: break`` and Python attribute writes (``c_.n += 1``), times the objects
written.  Once the profile has seen the break taken and not taken, each iteration is an
``if not broke:`` tf.cond whose branches read ``c_.n``: a chain of merges
(``branch_writes._Merged``) one level longer per iteration, resolved again (``select``)
in every new branch graph, and the nested branch graphs analysed again at every join
(``hoist_beside_changes``, ``first_state_change``).  At 779f2e0 the graph-building call
took about 1.5 s for 4 iterations, 25 s for 6 (this file), 100 s for 12, and the
fuzzer's program (4 cells, 12 iterations) more than 300 s, eager milliseconds.  6f2601c
(effects.py caches) makes it 1.5-4x faster (this file: about 16 s; the fuzzer's
program: 348 s), not fast.  A budget on branches traced again after an exports
mismatch was tried and did not help (first attempts dominate).
Found by the soak ``bash scripts/fuzz.sh 2000 soak19b`` (chunk 0, program 243, kind
``hang``: janus ran past the fuzzer's 120 s limit).
"""
import time

from _common import janus, tf


class Cell:
    def __init__(self, k):
        self.k = k
        self.n = 0


CELLS = [Cell(0.5)]


def f(x, p):
    acc = x * 1.0
    for j3 in range(p):
        for e2 in x:
            if tf.reduce_sum(acc) < -1.0:
                break
            acc = acc + e2
            for c_ in CELLS:
                c_.n += 1
                acc = acc + c_.k
    return acc


LIMIT = 10.0   # seconds for the call that builds the graph (eager: milliseconds)
jf = janus.function(f)
for i in range(3):    # the profile sees the break taken (call 1) and not taken
    jf(tf.constant([0.25 if i != 1 else -0.5] * 3), 2)
started = time.time()
jf(tf.constant([0.25] * 3), 2)
took = time.time() - started
print('graph-building call: %.1f s (limit %.0f s)' % (took, LIMIT))
print('VERDICT:', 'reproduced' if took > LIMIT else 'not reproduced')
