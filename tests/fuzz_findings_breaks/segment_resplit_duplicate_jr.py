"""Finding 1 (fixed on branch wt-fuzz, graphgen/segments.py _compile): a segment whose
input may be unbound (bound only in a loop that may run zero times) reads janus's helpers
through a closure cell ``__jr``.  When that segment fails to convert and is cut again (a
second break in it, or finding 2), the new split's factory function took ``__jr`` as a
parameter twice: ``SyntaxError: duplicate argument '__jr' in function definition``, an
internal error recorded on every call (results stay right: the call runs as Python).

Fuzzer: seed 900, programs 12, 16, 20 (kind janus-internal).
"""
from _common import functions, internal_errors, janus, run, tf


def f(x, n):
    for _ in range(n):
        last = x * 2.0
    print('a', last.numpy())
    z = last + 1.0
    print('b', z.numpy())
    return z * 2.0


jf = janus.function(f)
same = True
for n in (2, 2, 2, 2, 2, 0, 2):
    e = run(f, (tf.constant([0.5, 1.0]), n))
    j = run(jf, (tf.constant([0.5, 1.0]), n))
    same &= e == j
errors = internal_errors(jf)
for ev in errors[:1]:
    print('janus internal error:', str(ev.detail)[:200])
print('segments:', [(p.name, janus.stats(p)['graph_calls']) for p in functions(jf)[1:]])
print('eager and janus agree:', same)
print('VERDICT:', 'reproduced' if errors or not same else 'not reproduced')
