"""The profiler's probes live in your function's own bytecode (``pyct/probes.py``).

A profiled call runs a twin of your function whose code object is the
original's with probes added: same file, lines, columns, names and locals.
These tests check, on fresh objects, that a profiled call behaves exactly
as plain Python does (result, stdout, exceptions, state, how often
``__bool__`` runs), that tracebacks, ``locals()`` and frames show your code
only, and that the sites record what the source-copy profiler recorded
(pinned below per site: kind, line within the function, observations).

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import contextlib
import functools
import inspect
import io
import sys
import traceback

import pytest
import tensorflow as tf

import janus
from conftest import differential
from janus import profiler
from janus.pyct import probes
from janus.pyct import probes


def helper(v):
    if v > 2:
        return v * 2
    return v


def gen(n):
    for i in range(n):
        yield i


class Acc:
    def __init__(self):
        self.total = 0

    def add(self, v):
        if v:
            self.total += v
        return self.total

    def __call__(self, v):
        return self.add(v) + 1


class Truthy:
    """Truth that changes on every ``bool()``: counts how often Python asks."""

    def __init__(self):
        self.asked = 0

    def __bool__(self):
        self.asked += 1
        return self.asked % 2 == 0


class Ctx:
    def __init__(self):
        self.log = []

    def __enter__(self):
        self.log.append('enter')
        return self

    def __exit__(self, *exc):
        self.log.append('exit')
        return False


def p_if(a, b, c):
    if a and (b or not c):
        r = 1
    elif not a or c:
        r = 2
    else:
        r = 3
    if a is None or b is not None:
        r += 10
    return r


def p_loops(n, xs):
    out = 0
    for i in range(n):
        if i == 1:
            continue
        if i == 4:
            break
        out += i
    else:
        out += 100
    while n > 0:
        n -= 1
        if n == 2 and out:
            break
    for x in xs:
        for y in xs:
            out += x * y
    return out


def p_calls(xs):
    acc = Acc()
    total = sum(helper(x) for x in xs)
    lst = [helper(x) for x in xs if x and x > 1]
    m = {k: helper(k) for k in xs}
    f = lambda q, w=2: helper(q) + w  # noqa: E731
    r = acc(3) + acc.add(4) + f(5) + len(lst) + len(m)
    r += sum(gen(len(xs)))
    r += max(xs, key=lambda z: -z) if xs else 0
    return total, r, sorted(m)


def p_value_bool(a, b, c):
    x = a and b or c
    y = a or b and c
    z = (a or b) and (b or c)
    w = not a and b
    return x, y, z, w, [v for v in (a, b, c) if v or a]


def p_try(a):
    out = []
    try:
        if a > 2:
            raise ValueError(a)
        out.append(helper(a))
    except ValueError as e:
        out.append(str(e))
        if a > 5:
            return out
    finally:
        out.append('f')
    for i in range(3):
        try:
            if i == a:
                break
            if i == 1:
                continue
            out.append(i)
        finally:
            out.append('g')
    return out


def p_with(ctx, a):
    with ctx:
        if a:
            return helper(a)
        for i in range(2):
            if i:
                break
    return 0


def p_tensor(x, n):
    if tf.reduce_sum(x) > 0:
        x = x * 2
    for row in x:
        if row[0] > 1.0:
            n += 1
    while n < 3:
        n += 1
    return x, n


def p_ifexp(a, xs):
    r = helper(a) if a else -1
    s = [(1 if x % 2 else 2) for x in xs]
    return r, s, (a if a and xs else None)


def p_nested(a):
    def inner(b):
        if b > a:
            return b
        return a
    t = 0
    for i in range(a):
        t += inner(i)
    return t, inner(a + 1)


def p_starred(*args, **kw):
    r = helper(*args)
    return dict(**kw), helper(kw.get('v', 1)), r, print(*args, sep='-')


def p_truthy(t):
    out = []
    if t:
        out.append(1)
    x = t and 5
    while t:
        out.append(2)
        if len(out) > 4:
            break
    return out, x


def p_raise(a):
    if a:
        return helper(a) / 0
    return 1


def p_assert(a, b):
    assert a or b, 'nope'
    assert a
    return [i for i in range(a) if i or b]


def p_multiline(acc, v):
    r = (acc
         .add(v))
    s = acc.add(
        v + 1)
    return r + s


def p_generator_callee(n):
    return sum(gen(n)) + len([x for x in gen(n) if x])


def p_chain(a, xs):
    out = []
    while 0 < a < 5:
        a += 1
        out.append(a)
    if 0 <= a <= 3 or a > 100:
        out.append('in')

    def wrap(f):
        @functools.wraps(f)
        def w(*args):
            return f(*args)
        return w

    @functools.lru_cache()
    def square(v):
        return v * v
    g = wrap(square)
    return out, [g(x) for x in xs if 1 < x < 9]


def p_walrus(d, xs):
    out = []
    if (n := len(xs)) > 2:
        out.append(n)
    if (missing := d.get('a')) is None:
        out.append(missing)
    if found := d.get('b'):
        out.append(found)
    while (k := len(out)) < 5 and (q := k):
        out.append(q)
    return out


class Base:
    def scale(self, x):
        return x + 1


class Derived(Base):
    def scale(self, x):
        if x:
            return super().scale(x) * 2   # zero-argument super(): the probed frame's cells
        return self.__private()

    def __private(self):
        return 0


def p_super(x):
    d = Derived()
    return d.scale(x) + d.scale(0)


# name -> (function, calls: a function returning fresh argument tuples)
PROGRAMS = {
    'if': (p_if, lambda: [(1, 0, 0), (0, 1, 1), (1, None, 1), (None, 2, 0)]),
    'loops': (p_loops, lambda: [(6, [1, 2]), (2, []), (5, [3])]),
    'calls': (p_calls, lambda: [([1, 2, 3],), ([],)]),
    'value_bool': (p_value_bool, lambda: [(0, 1, 2), (1, 0, 2), (1, 2, 0), (0, 0, 0)]),
    'try': (p_try, lambda: [(1,), (3,), (7,), (0,)]),
    'with': (p_with, lambda: [(Ctx(), 0), (Ctx(), 3)]),
    'tensor': (p_tensor, lambda: [(tf.constant([[1.0, 2.0], [3.0, 4.0]]), 0),
                                  (tf.constant([[-1.0, 0.0]]), 5)]),
    'ifexp': (p_ifexp, lambda: [(0, [1, 2]), (3, []), (4, [5])]),
    'nested': (p_nested, lambda: [(3,), (0,)]),
    'starred': (p_starred, lambda: [(2,), (1, 2)]),
    'truthy': (p_truthy, lambda: [(Truthy(),), (Truthy(),), (0,)]),
    'raise': (p_raise, lambda: [(0,), (3,)]),
    'assert': (p_assert, lambda: [(2, 0), (0, 1), (0, 0)]),
    'multiline': (p_multiline, lambda: [(Acc(), 1)]),
    'generator_callee': (p_generator_callee, lambda: [(3,), (0,)]),
    'chain': (p_chain, lambda: [(1, [1, 2, 3]), (-1, [10]), (2, [])]),
    'walrus': (p_walrus, lambda: [({'b': 3}, [1, 2, 3]), ({'a': 1}, [])]),
    'super': (p_super, lambda: [(1,), (0,)]),
}


def outcome(fn, args):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            result = ('ok', fn(*args))
        except Exception as e:  # noqa: BLE001 - compared with plain Python's
            result = ('raise', type(e).__name__, str(e))
    return result, printed.getvalue()


def comparable(value):
    """Tensors as numpy values, argument objects as their observable state."""
    if isinstance(value, tf.Tensor):
        return ('tensor', value.dtype.name, value.numpy().tolist())
    if isinstance(value, (list, tuple)):
        return type(value)(comparable(v) for v in value)
    if isinstance(value, Truthy):
        return ('Truthy', value.asked)
    if isinstance(value, (Acc, Ctx)):
        return (type(value).__name__, vars(value))
    return value


def profiled(name):
    """Runs the program plainly and probed on fresh arguments: (plain, probed, profile)."""
    fn, calls = PROGRAMS[name]
    profile = profiler.Profile()
    recorder = profiler.Recorder(profile)
    twin = profiler.instrument(fn, recorder)
    plain, probed = [], []
    for args, twin_args in zip(calls(), calls()):
        plain.append((comparable(outcome(fn, args)), comparable(args)))
        recorder.begin_call()
        probed.append((comparable(outcome(twin, twin_args)), comparable(twin_args)))
        recorder.end_call()
    assert recorder.broken is None, recorder.broken
    return plain, probed, profile


def observations(fn, profile):
    """{'Kind line (n)': what the site recorded}, lines counted from the def's."""
    seen, named = {}, {}
    first = fn.__code__.co_firstlineno
    for (code, site_id), site in sorted(profile.sites.items(), key=lambda kv: kv[0][1]):
        if code is not fn.__code__:
            continue
        info = profile.site_info[(code, site_id)]
        where = '%s %d' % (info.kind, info.lineno - first)
        named[where] = named.get(where, 0) + 1
        key = '%s (%d)' % (where, named[where])
        facts = {}
        if site.sequences:
            facts['sequences'] = sorted(site.sequences.items(), key=repr)
        if site.callees:
            facts['callees'] = sorted((c.rsplit('.', 1)[-1], n) for c, n in site.callees.items())
        if site.returns:
            facts['returns'] = sorted(site.returns.items())
        if site.taken:
            facts['taken'] = site.taken
        if site.tensor:
            facts['tensor'] = True
        seen[key] = facts
    return seen


@pytest.mark.parametrize('name', sorted(PROGRAMS))
def test_a_probed_call_does_what_plain_python_does(name):
    plain, probed, _ = profiled(name)
    assert plain == probed


def test_bool_is_asked_as_often_as_plain_python_asks():
    plain, probed, profile = profiled('truthy')
    assert [args for _, args in probed] == [(('Truthy', 3),), (('Truthy', 3),), (0,)]
    assert plain == probed



# What each site recorded: the source-copy profiler (before the probes) recorded the same,
# except in 'truthy', where it asked bool() more often than plain Python (a While saw
# ((True, False), 2) there, and the calls after it ran again), and in 'super', where it
# could not instrument a method using zero-argument super() (it recorded no site of it).
EXPECTED = {'assert': {'BoolOp 1 (1)': {'sequences': [((False,), 2), ((True,), 1)]},
            'BoolOp 3 (1)': {'sequences': [((False, True), 1)]},
            'Call 3 (1)': {'callees': [('range', 1)], 'returns': [('range', 1)]},
            'Return 3 (1)': {'taken': 1}},
 'calls': {'BoolOp 3 (1)': {'sequences': [((True, True, True), 1)]},
           'Call 1 (1)': {'callees': [('Acc', 2)], 'returns': [('Acc', 2)]},
           'Call 2 (1)': {'callees': [('sum', 2)], 'returns': [('int', 2)]},
           'Call 2 (2)': {'callees': [('helper', 3)], 'returns': [('int', 3)]},
           'Call 3 (1)': {'callees': [('helper', 2)], 'returns': [('int', 2)]},
           'Call 4 (1)': {'callees': [('helper', 3)], 'returns': [('int', 3)]},
           'Call 5 (1)': {'callees': [('helper', 2)], 'returns': [('int', 2)]},
           'Call 6 (1)': {'callees': [('len', 2)], 'returns': [('int', 2)]},
           'Call 6 (2)': {'callees': [('len', 2)], 'returns': [('int', 2)]},
           'Call 6 (3)': {'callees': [('<lambda>', 2)], 'returns': [('int', 2)]},
           'Call 6 (4)': {'callees': [('Acc instance', 2)], 'returns': [('int', 2)]},
           'Call 6 (5)': {'callees': [('add', 2)], 'returns': [('int', 2)]},
           'Call 7 (1)': {'callees': [('sum', 2)], 'returns': [('int', 2)]},
           'Call 7 (2)': {'callees': [('gen', 2)], 'returns': [('generator', 2)]},
           'Call 7 (3)': {'callees': [('len', 2)], 'returns': [('int', 2)]},
           'Call 8 (1)': {'callees': [('max', 1)], 'returns': [('int', 1)]},
           'Call 9 (1)': {'callees': [('sorted', 2)], 'returns': [('list', 2)]},
           'IfExp 8 (1)': {'sequences': [((False,), 1), ((True,), 1)]},
           'Return 9 (1)': {'taken': 2}},
 'chain': {'BoolOp 5 (1)': {'sequences': [((False,), 3)]},
           'Call 11 (1)': {'callees': [('square', 2)], 'returns': [('int', 2)]},
           'Call 14 (1)': {'callees': [('lru_cache', 3)], 'returns': [('function', 3)]},
           'Call 17 (1)': {'callees': [('wrap', 3)], 'returns': [('function', 3)]},
           'Call 18 (1)': {'callees': [('square', 2)], 'returns': [('int', 2)]},
           'Call 4 (1)': {'callees': [('append', 7)], 'returns': [('NoneType', 7)]},
           'Call 9 (1)': {'callees': [('wraps', 3)], 'returns': [('partial', 3)]},
           'If 5 (1)': {'sequences': [((False,), 3)]},
           'Return 11 (1)': {'taken': 2},
           'Return 12 (1)': {'taken': 3},
           'Return 16 (1)': {'taken': 2},
           'Return 18 (1)': {'taken': 3},
           'While 2 (1)': {'sequences': [((False,), 1),
                                         ((True, True, True, False), 1),
                                         ((True, True, True, True, False), 1)]}},
 'generator_callee': {'Call 1 (1)': {'callees': [('sum', 2)], 'returns': [('int', 2)]},
                      'Call 1 (2)': {'callees': [('len', 2)], 'returns': [('int', 2)]},
                      'Call 1 (3)': {'callees': [('gen', 2)], 'returns': [('generator', 2)]},
                      'Call 1 (4)': {'callees': [('gen', 2)], 'returns': [('generator', 2)]},
                      'Return 1 (1)': {'taken': 2}},
 'if': {'BoolOp 1 (1)': {'sequences': [((False,), 2), ((True,), 2)]},
        'BoolOp 1 (2)': {'sequences': [((False,), 2)]},
        'BoolOp 3 (1)': {'sequences': [((False,), 1), ((True,), 2)]},
        'BoolOp 7 (1)': {'sequences': [((False,), 3), ((True,), 1)]},
        'If 1 (1)': {'sequences': [((False,), 3), ((True,), 1)]},
        'If 3 (1)': {'sequences': [((True,), 3)]},
        'If 7 (1)': {'sequences': [((False,), 1), ((True,), 3)]},
        'Return 9 (1)': {'taken': 4}},
 'ifexp': {'BoolOp 3 (1)': {'sequences': [((False,), 1), ((True,), 2)]},
           'Call 1 (1)': {'callees': [('helper', 2)], 'returns': [('int', 2)]},
           'IfExp 1 (1)': {'sequences': [((False,), 1), ((True,), 2)]},
           'IfExp 2 (1)': {'sequences': [((True, False), 1), ((True,), 1)]},
           'IfExp 3 (1)': {'sequences': [((False,), 2), ((True,), 1)]},
           'Return 3 (1)': {'taken': 3}},
 'loops': {'BoolOp 12 (1)': {'sequences': [((False, False), 1),
                                           ((False, False, False, True), 1),
                                           ((False, False, True), 1)]},
           'Break 13 (1)': {'taken': 2},
           'Break 6 (1)': {'taken': 2},
           'Call 2 (1)': {'callees': [('range', 3)], 'returns': [('range', 3)]},
           'Continue 4 (1)': {'taken': 3},
           'For 14 (1)': {'sequences': [((0,), 1), ((1,), 1), ((2,), 1)]},
           'For 15 (1)': {'sequences': [((1,), 1), ((2, 2), 1)]},
           'For 2 (1)': {'sequences': [((2,), 1), ((5,), 2)]},
           'If 12 (1)': {'sequences': [((False, False), 1),
                                       ((False, False, False, True), 1),
                                       ((False, False, True), 1)]},
           'If 3 (1)': {'sequences': [((False, True), 1), ((False, True, False, False, False), 2)]},
           'If 5 (1)': {'sequences': [((False, False, False, True), 2), ((False,), 1)]},
           'Return 17 (1)': {'taken': 3},
           'While 10 (1)': {'sequences': [((True, True, False), 1),
                                          ((True, True, True), 1),
                                          ((True, True, True, True), 1)]}},
 'multiline': {'Call 1 (1)': {'callees': [('add', 1)], 'returns': [('int', 1)]},
               'Call 3 (1)': {'callees': [('add', 1)], 'returns': [('int', 1)]},
               'Return 5 (1)': {'taken': 1}},
 'nested': {'Call 6 (1)': {'callees': [('range', 2)], 'returns': [('range', 2)]},
            'Call 7 (1)': {'callees': [('inner', 3)], 'returns': [('int', 3)]},
            'Call 8 (1)': {'callees': [('inner', 2)], 'returns': [('int', 2)]},
            'For 6 (1)': {'sequences': [((0,), 1), ((3,), 1)]},
            'If 2 (1)': {'sequences': [((False, False, False, True), 1), ((True,), 1)]},
            'Return 3 (1)': {'taken': 2},
            'Return 4 (1)': {'taken': 3},
            'Return 8 (1)': {'taken': 2}},
 'raise': {'Call 2 (1)': {'callees': [('helper', 1)], 'returns': [('int', 1)]},
           'If 1 (1)': {'sequences': [((False,), 1), ((True,), 1)]},
           'Return 2 (1)': {'taken': 1},
           'Return 3 (1)': {'taken': 1}},
 'starred': {'Call 1 (1)': {'callees': [('helper', 2)], 'returns': [('int', 1)]},
             'Call 2 (1)': {'callees': [('dict', 1)], 'returns': [('dict', 1)]},
             'Call 2 (2)': {'callees': [('helper', 1)], 'returns': [('int', 1)]},
             'Call 2 (3)': {'callees': [('print', 1)], 'returns': [('NoneType', 1)]},
             'Call 2 (4)': {'callees': [('get', 1)], 'returns': [('int', 1)]},
             'Return 2 (1)': {'taken': 1}},
 'super': {'Call 1 (1)': {'callees': [('Derived', 2)], 'returns': [('Derived', 2)]},
           'Call 2 (1)': {'callees': [('scale', 2)], 'returns': [('int', 2)]},
           'Call 2 (2)': {'callees': [('scale', 2)], 'returns': [('int', 2)]},
           'Return 2 (1)': {'taken': 2}},
 'tensor': {'Call 1 (1)': {'callees': [('reduce_sum', 2)], 'returns': [('EagerTensor', 2)]},
            'For 3 (1)': {'sequences': [((1,), 1), ((2,), 1)], 'tensor': True},
            'If 1 (1)': {'sequences': [((False,), 1), ((True,), 1)], 'tensor': True},
            'If 4 (1)': {'sequences': [((False,), 1), ((True, True), 1)], 'tensor': True},
            'Return 8 (1)': {'taken': 2},
            'While 6 (1)': {'sequences': [((False,), 1), ((True, False), 1)]}},
 'truthy': {'BoolOp 4 (1)': {'sequences': [((False,), 1), ((True,), 2)]},
            'If 2 (1)': {'sequences': [((False,), 3)]},
            'Return 9 (1)': {'taken': 3},
            'While 5 (1)': {'sequences': [((False,), 3)]}},
 'try': {'Break 15 (1)': {'taken': 2},
         'Call 11 (1)': {'callees': [('append', 4)], 'returns': [('NoneType', 4)]},
         'Call 12 (1)': {'callees': [('range', 3)], 'returns': [('range', 3)]},
         'Call 18 (1)': {'callees': [('append', 3)], 'returns': [('NoneType', 3)]},
         'Call 20 (1)': {'callees': [('append', 6)], 'returns': [('NoneType', 6)]},
         'Call 4 (1)': {'callees': [('ValueError', 2)], 'returns': [('ValueError', 2)]},
         'Call 5 (1)': {'callees': [('append', 2)], 'returns': [('NoneType', 2)]},
         'Call 5 (2)': {'callees': [('helper', 2)], 'returns': [('int', 2)]},
         'Call 7 (1)': {'callees': [('append', 2)], 'returns': [('NoneType', 2)]},
         'Call 7 (2)': {'callees': [('str', 2)], 'returns': [('str', 2)]},
         'Continue 17 (1)': {'taken': 1},
         'For 12 (1)': {'sequences': [((1,), 1), ((2,), 1), ((3,), 1)]},
         'If 14 (1)': {'sequences': [((False, False, False), 1), ((False, True), 1), ((True,), 1)]},
         'If 16 (1)': {'sequences': [((False, True, False), 1), ((False,), 1)]},
         'If 3 (1)': {'sequences': [((False,), 2), ((True,), 2)]},
         'If 8 (1)': {'sequences': [((False,), 1), ((True,), 1)]},
         'Return 21 (1)': {'taken': 3},
         'Return 9 (1)': {'taken': 1}},
 'value_bool': {'BoolOp 1 (1)': {'sequences': [((False,), 3), ((True,), 1)]},
                'BoolOp 1 (2)': {'sequences': [((False,), 2), ((True,), 2)]},
                'BoolOp 2 (1)': {'sequences': [((False,), 2), ((True,), 2)]},
                'BoolOp 2 (2)': {'sequences': [((False,), 1), ((True,), 1)]},
                'BoolOp 3 (1)': {'sequences': [((False,), 1), ((True,), 3)]},
                'BoolOp 3 (2)': {'sequences': [((False,), 2), ((True,), 2)]},
                'BoolOp 3 (3)': {'sequences': [((False,), 1), ((True,), 2)]},
                'BoolOp 4 (1)': {'sequences': [((False,), 2), ((True,), 2)]},
                'BoolOp 5 (1)': {'sequences': [((False, False, False), 1),
                                               ((False, True, True), 1),
                                               ((True, False, True), 1),
                                               ((True, True, False), 1)]},
                'Return 5 (1)': {'taken': 4}},
 'walrus': {'BoolOp 8 (1)': {'sequences': [((True, True, False), 1), ((True,), 1)]},
            'Call 2 (1)': {'callees': [('len', 2)], 'returns': [('int', 2)]},
            'Call 3 (1)': {'callees': [('append', 1)], 'returns': [('NoneType', 1)]},
            'Call 4 (1)': {'callees': [('get', 2)], 'returns': [('NoneType', 1), ('int', 1)]},
            'Call 5 (1)': {'callees': [('append', 1)], 'returns': [('NoneType', 1)]},
            'Call 6 (1)': {'callees': [('get', 2)], 'returns': [('NoneType', 1), ('int', 1)]},
            'Call 7 (1)': {'callees': [('append', 1)], 'returns': [('NoneType', 1)]},
            'Call 8 (1)': {'callees': [('len', 4)], 'returns': [('int', 4)]},
            'Call 9 (1)': {'callees': [('append', 2)], 'returns': [('NoneType', 2)]},
            'If 2 (1)': {'sequences': [((False,), 1), ((True,), 1)]},
            'If 4 (1)': {'sequences': [((False,), 1), ((True,), 1)]},
            'If 6 (1)': {'sequences': [((False,), 1), ((True,), 1)]},
            'Return 10 (1)': {'taken': 2},
            'While 8 (1)': {'sequences': [((False,), 1), ((True, True, False), 1)]}},
 'with': {'Break 6 (1)': {'taken': 1},
          'Call 3 (1)': {'callees': [('helper', 1)], 'returns': [('int', 1)]},
          'Call 4 (1)': {'callees': [('range', 1)], 'returns': [('range', 1)]},
          'For 4 (1)': {'sequences': [((2,), 1)]},
          'If 2 (1)': {'sequences': [((False,), 1), ((True,), 1)]},
          'If 5 (1)': {'sequences': [((False, True), 1)]},
          'Return 3 (1)': {'taken': 1},
          'Return 7 (1)': {'taken': 1}}}


@pytest.mark.parametrize('name', sorted(PROGRAMS))
def test_the_sites_record_what_the_source_copy_profiler_recorded(name):
    _, _, profile = profiled(name)
    assert observations(PROGRAMS[name][0], profile) == EXPECTED[name]


def test_a_callee_using_zero_argument_super_is_probed_too():
    _, _, profile = profiled('super')
    scale = {profile.site_info[key].kind: site for key, site in profile.sites.items()
             if key[0] is Derived.scale.__code__}
    assert scale['If'].sequences == {(True, False): 1, (False, False): 1}
    assert scale['Call'].callees   # super(), Base.scale or the private method


# -- what your frames show -----------------------------------------------------

def introspect(x, scale=2.0):
    offset = 1.0
    frame = sys._getframe()
    seen = {'locals': sorted(locals()), 'vars': sorted(vars()), 'dir': dir(),
            'f_locals': sorted(frame.f_locals),
            'current': inspect.currentframe().f_code.co_name,
            'qualname': frame.f_code.co_qualname, 'file': frame.f_code.co_filename,
            'varnames': frame.f_code.co_varnames, 'lambda': (lambda b: sorted(locals()))(1),
            'comprehension': [sorted(locals()) for _ in range(1)]}
    if x > 0:
        return x * scale + offset, seen
    return x, seen


def test_a_profiled_frame_shows_your_names_and_code_only():
    profile = profiler.Profile()
    recorder = profiler.Recorder(profile)
    twin = profiler.instrument(introspect, recorder)
    recorder.begin_call()
    probed = twin(3.0)
    recorder.end_call()
    assert probed == introspect(3.0)
    assert probed[1]['current'] == 'introspect'
    assert twin.__code__ is not introspect.__code__   # it did run probed code
    assert profile.sites   # and recorded
    assert twin.__code__.co_varnames == introspect.__code__.co_varnames
    assert twin.__code__.co_filename == introspect.__code__.co_filename


def failing(x):
    y = x + 1
    if y > 2:
        return helper(y) + undefined_name  # noqa: F821 - the NameError under test
    return y


def traceback_of(fn, *args):
    try:
        fn(*args)
    except NameError:
        return [(f.filename, f.lineno, f.name, f.line, f.colno, f.end_colno)
                for f in traceback.extract_tb(sys.exc_info()[2])[1:]]
    raise AssertionError('no NameError')


def test_a_traceback_in_a_profiled_call_shows_your_file_line_and_source():
    recorder = profiler.Recorder(profiler.Profile())
    twin = profiler.instrument(failing, recorder)
    recorder.begin_call()
    probed = traceback_of(twin, 5)
    recorder.end_call()
    assert probed == traceback_of(failing, 5)
    (filename, lineno, name, line, _, _), = probed
    assert (filename, name) == (__file__, 'failing')
    assert line == 'return helper(y) + undefined_name  # noqa: F821 - the NameError under test'
    assert lineno == failing.__code__.co_firstlineno + 3


class Refusing:
    def __bool__(self):
        raise NameError('no truth here')


def refuses_truth(x):
    if x:
        return 1
    return 0


def test_a_bool_raising_in_a_probed_test_shows_your_frames_only():
    recorder = profiler.Recorder(profiler.Profile())
    twin = profiler.instrument(refuses_truth, recorder)
    recorder.begin_call()
    probed = traceback_of(twin, Refusing())
    recorder.end_call()
    assert probed == traceback_of(refuses_truth, Refusing())
    assert [name for _, _, name, _, _, _ in probed] == ['refuses_truth', '__bool__']


def make_introspecting_step():
    def step(x):
        names = sorted(locals())
        if tf.reduce_sum(x) > 0:
            print('positive', names, sys._getframe().f_code.co_name)
            return x * 2.0, dir()
        return x, dir()
    return step, None


def test_profiled_calls_under_janus_match_eager(capsys):
    calls = [((tf.constant(v),), {}) for v in (1.0, -2.0, 3.0, 4.0)]
    jf = differential(make_introspecting_step, calls, profile_calls=10 ** 9)
    assert janus.stats(jf)['profiled_calls'] == 4
    assert 'uninstrumented' not in janus.explain(jf)
    assert 'positive' in capsys.readouterr().out


# -- sites the code does not show unambiguously ----------------------------------

def mixed_constant_test(x):
    if x and True:
        return 1
    return 0


def chained_operand(a, b, c, d):
    return a < b < c or d


def dead_code(x):
    return x
    if x:   # never compiled
        return helper(x)


def constant_loop(n):
    while True:   # folded away: nothing to observe, nothing recorded
        n -= 1
        if n < 0:
            return n


@pytest.mark.parametrize('fn', [mixed_constant_test, chained_operand, dead_code])
def test_a_site_the_bytecode_does_not_show_leaves_the_function_unprobed(fn):
    with pytest.raises(probes.Unmapped):
        profiler.instrument(fn, profiler.Recorder(profiler.Profile()))


def test_an_unprobed_function_is_profiled_plainly():
    def make():
        return mixed_constant_test, None
    jf = differential(make, [((1,), {}), ((0,), {})], profile_calls=10 ** 9)
    assert 'uninstrumented' in janus.explain(jf)


def test_a_constant_test_records_nothing_and_the_rest_is_probed():
    profile = profiler.Profile()
    recorder = profiler.Recorder(profile)
    twin = profiler.instrument(constant_loop, recorder)
    recorder.begin_call()
    assert twin(2) == -1
    recorder.end_call()
    assert observations(constant_loop, profile) == {
        'If 3 (1)': {'sequences': [((False, False, True), 1)]},
        'Return 4 (1)': {'taken': 1}}
