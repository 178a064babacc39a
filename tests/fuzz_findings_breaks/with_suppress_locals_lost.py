"""Finding 7 (open, a narrower cousin of finding 4): a context manager that suppresses
an exception (``contextlib.suppress``) around a graph break.  The statements after the
break in the ``with`` body run as one segment; when its second statement raises, the
exception is suppressed but the segment's locals are lost: eager returns ``acc``
doubled, janus returns it as before the body.  Try bodies are cut one statement per
segment since finding 4's fix; ``with`` bodies are not (that would cut every
GradientTape body with a break inside apart).  Found by reading segments.py.
"""
import contextlib

from _common import janus, run, tf

T = {}


def f(x):
    acc = x * 1.0
    with contextlib.suppress(KeyError):
        print('acc', acc.numpy())
        acc = acc * 2.0
        acc = acc + T['missing']
    return acc


jf = janus.function(f)
diffs = []
for i in range(8):
    e, j = run(f, (tf.constant([1.0 + i]),)), run(jf, (tf.constant([1.0 + i]),))
    if e != j:
        diffs.append((i, e[0], j[0]))
for i, e, j in diffs[:2]:
    print('call %d: eager %s | janus %s' % (i, e, j))
print('VERDICT:', 'reproduced' if diffs else 'not reproduced')
