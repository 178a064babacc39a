"""Finding 8 (open; not a graph break: no statement here is refused): trace time that
grows exponentially with the number of unrolled iterations of a loop over a tensor
holding ``if <tensor>: break`` and Python attribute writes (``c_.n += 1``).  Once the
profile has seen the break taken and not taken, the graph's trace nests each later
iteration inside tensor-dependent ifs and spends its time re-analysing the nested
branch graphs (``effects.called_graphs``/``changes_state`` from ``hoist_beside_changes``
and ``first_state_change``, ``branch_writes._Merged.resolve`` chains): with
``len(x) * p`` = 4 iterations the fourth call takes about 1 s, 6 about 15-25 s, 12 about
100 s, and the fuzzer's program (4 cells, 12 iterations) more than 300 s while eager
takes milliseconds.  A budget on branches traced *again* (exports mismatch retries)
did not help (tried, reverted): the first attempts dominate.
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
