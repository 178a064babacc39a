"""Finding 11 (fixed): a function with a lambda and a ``try`` whose handler binds a
name (``except ZeroDivisionError as e_``) is cut at a break; the check for locals a
closure would see rebound later read ``lineno`` of every bound ``Name``, and the
handler's name has none in gast (``AttributeError: 'Name' object has no attribute
'lineno'``): an internal error while cutting (janus recovered, eager's results).
Found by soak ``soak19f``, program 1120.
"""
from _common import internal_errors, janus, run


def f():
    h5 = lambda y: y - 0.5  # noqa: E731,F841 - the fuzzer's program
    try:
        pass
    except ZeroDivisionError as e_:
        print('zero', e_)
        acc = acc * 0.5  # noqa: F821
    finally:
        pass


jf = janus.function(f)
diffs = [i for i in range(5) if run(f, ()) != run(jf, ())]
errors = internal_errors(jf)
print('janus internal errors: %d' % len(errors))
print('VERDICT:', 'reproduced' if diffs or errors else 'not reproduced')
