"""Finding 2 (open; the fix is outside segments.py/liveness.py): a segment with an input
that may be unbound starts with ``if last is __jr.UNDEFINED: del last`` (segments.py
_definition).  In converted code ``__jr`` is ``janus.trace.operators``, which exports
``read_local`` but not ``UNDEFINED``: tracing the segment raises ``AttributeError: module
'janus.trace.operators' has no attribute 'UNDEFINED'``, so such a segment never gets a
graph (janus then cuts the segment again at that line, recursively, one level per
profile: results stay right, the tensor work runs eagerly).

Fix: export it, ``from janus.control import UNDEFINED`` in trace/operators.py
(with it, both segments below run graphs).  ``--fix`` here patches it in to show that.
"""
import sys

from _common import functions, janus, run, tf

if '--fix' in sys.argv:
    from janus import control
    from janus.trace import operators
    operators.UNDEFINED = control.UNDEFINED


def f(x, n):
    for _ in range(n):
        last = x * 2.0
    print('last', last.numpy())
    return last + 1.0


jf = janus.function(f)
same = True
for n in (2,) * 10:
    same &= run(f, (tf.constant([0.5, 1.0]), n)) == run(jf, (tf.constant([0.5, 1.0]), n))
parts = functions(jf)[1:]
print('segments (graph runs):', [(p.name, janus.stats(p)['graph_calls']) for p in parts])
stuck = [p for p in parts if len(functions(p)) == 1 and janus.stats(p)['graph_calls'] == 0]
for p in parts:
    for ev in p.events:
        if 'UNDEFINED' in str(ev.detail):
            print('  %s: %s' % (p.name, str(ev.detail)[:160]))
            break
print('eager and janus agree:', same)
print('VERDICT:', 'reproduced' if stuck or len(parts) > 2 else 'not reproduced')
