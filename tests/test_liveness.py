"""Names crossing a graph break: the scope and definite-assignment analyses.

``pyct/scopes.py`` says which names are whose, ``pyct/liveness.py`` which are
surely bound where, and ``graphgen/segments.py`` passes locals across a cut
from both.  Two kinds of test:

* the forms that were wrong once (a lambda's defaults, a walrus in a
  comprehension or under ``and``/``or``, ``match`` patterns, a suppressing
  ``with``, ``except ... as``, ``del`` in a loop), each stated on the analysis;
* a property test over generated functions holding every such form: each is
  cut at random statements (``segments.split``, plain segment functions, no
  TensorFlow), and the cut function must print, return and raise exactly what
  the function does, for inputs that take different paths.  Statements that
  read ``box(...).numpy()`` at a cut have their receiver hoisted out
  (``graphgen/hoist.py``); the prints of ``box`` and ``numpy`` show the order.  The cut checks
  janus's scopes against Python's ``symtable`` itself (``ScopeMismatch``), and
  a name the cut claims surely bound but is not would raise early or differ.
"""
import contextlib
import importlib.util
import io
import random
import re
import textwrap

import gast
import pytest

from janus.graphgen import segments
from janus.pyct import anno, liveness, scopes


def _fn(source):
    return gast.parse(textwrap.dedent(source)).body[0]


def _surely_after(source, **quiet):
    fn = _fn(source)
    for node in gast.walk(fn):
        if isinstance(node, gast.With):
            anno.set(node, anno.Key.NEVER_SUPPRESSES, quiet.get('with_quiet', False))
    return liveness.at_entry(fn).after_all(fn.body).surely


# -- the forms, one by one ------------------------------------------------------------

def test_a_lambda_default_is_read_by_the_enclosing_function():
    stmt = _fn('''
        def f(x):
            g = lambda t, k=k, *, s=s: t * k * s * x
    ''').body[0]
    assert liveness.reads([stmt]) == {'k', 's', 'x'}


def test_a_nested_functions_defaults_and_decorators_are_read_where_it_is_defined():
    stmt = _fn('''
        def f():
            @deco(w)
            def h(t, k=k) -> r:
                return t + q
    ''').body[0]
    assert liveness.reads([stmt]) == {'deco', 'w', 'k', 'r', 'q'}
    assert liveness.binds([stmt]) == {'h'}


def test_a_walrus_in_a_comprehension_binds_in_the_function():
    fn = _fn('''
        def f(xs):
            total = [(m := x * 2) for x in xs if (n := x)]
            return m + n
    ''')
    assert liveness.binds(fn.body[:1]) == {'total', 'm', 'n'}
    assert {'m', 'n'} <= scopes.local_names(fn)
    assert scopes.symtable_disagreement(fn) is None
    # the comprehension may run no time: m and n are only maybe bound after it
    assert liveness.at_entry(fn).after(fn.body[0]).surely == {'xs', 'total'}


def test_a_comprehension_whose_iterable_shares_its_variable_reads_the_functions():
    stmt = _fn('''
        def f():
            x = [x * 2 for x in x]
    ''').body[0]
    assert liveness.reads([stmt]) == {'x'}


def test_match_patterns_bind_their_names():
    fn = _fn('''
        def f(cfg):
            match cfg:
                case {'scale': scale, **rest}:
                    pass
                case [first, *others]:
                    pass
                case (a as b):
                    pass
            return scale
    ''')
    assert liveness.binds(fn.body[:1]) == {'scale', 'rest', 'first', 'others', 'a', 'b'}
    assert {'scale', 'rest', 'first', 'others', 'a', 'b'} <= scopes.local_names(fn)
    # no case may match: nothing is surely bound by the match
    assert liveness.at_entry(fn).after(fn.body[0]).surely == {'cfg'}


@pytest.mark.parametrize('expression', [
    'c > 0 and (y := 1)', 'c > 0 or (y := 1)', '(y := 1) if c else 0', '1 if c else (y := 1)',
    '[(y := v) for v in range(c)]', 'lambda: (y := 1)'])
def test_a_walrus_that_may_not_run_binds_maybe(expression):
    fn = _fn('def f(c):\n    t = %s\n' % expression)
    state = liveness.at_entry(fn).after(fn.body[0])
    assert 'y' not in state.surely
    assert ('y' in state.maybe) == ('lambda' not in expression)


def test_a_walrus_that_always_runs_binds_surely():
    assert 'y' in _surely_after('''
        def f(c):
            t = (y := c + 1) and c
    ''')
    assert 'y' in _surely_after('''
        def f(c):
            if (y := c):
                pass
    ''')


def test_an_assert_binds_maybe():
    assert 'y' not in _surely_after('''
        def f(c):
            assert (y := c) is not None
    ''')


def test_a_with_that_may_suppress_binds_its_body_maybe():
    source = '''
        def f(d):
            with contextlib.suppress(KeyError):
                y = d['k']
    '''
    assert 'y' not in _surely_after(source)
    assert 'y' in _surely_after(source, with_quiet=True)


def test_the_cut_trusts_only_managers_it_resolves_to_known_never_suppressing_ones():
    import tensorflow as tf
    GradientTape = tf.GradientTape   # noqa: F841 - resolved by name below

    def f(x, d, tape_maker):
        with tf.GradientTape() as tape:
            y = x * 2
        with tape_maker():
            z = d['k']
        return tape, y, z
    tree = _fn(__import__('inspect').getsource(f))
    segments._mark_quiet_withs(tree, f, scopes.local_names(tree))
    withs = [n for n in gast.walk(tree) if isinstance(n, gast.With)]
    assert [anno.get(w, anno.Key.NEVER_SUPPRESSES) for w in withs] == [True, False]


def test_an_except_name_is_unbound_after_its_handler():
    fn = _fn('''
        def f(e):
            try:
                pass
            except KeyError as e:
                pass
    ''')
    assert liveness.deletes(fn.body) == {'e'}
    assert 'e' not in liveness.at_entry(fn).after_all(fn.body).surely


def test_a_try_finally_binds_what_its_finally_binds():
    assert 'z' in _surely_after('''
        def f(d):
            try:
                y = d['k']
            finally:
                z = 1
    ''')


def test_the_symtable_check_finds_a_disagreement(monkeypatch):
    fn = _fn('''
        def f(x):
            match x:
                case [a]:
                    pass
    ''')
    assert scopes.symtable_disagreement(fn) is None
    monkeypatch.setattr(scopes, 'pattern_names', lambda node: set())
    assert 'locals' in scopes.symtable_disagreement(fn)


# -- the property: a function cut anywhere means what it meant -------------------------

_MODULE_HEADER = '''\
import contextlib

# module globals sharing the locals' names: a read the cut loses finds these
k = 1000
m = 2000
y = 3000
s = 4000
scale = 5000
a = 6000
rest = 7000


class Boxed:
    """Stands in for a tensor: ``.numpy()`` reads its value."""
    def __init__(self, value):
        self.value = value

    def numpy(self):
        print('read', self.value)
        return self.value


def box(value):
    print('box', value)
    return Boxed(value)


class Quiet:
    """A manager that swallows KeyError (janus cannot know it does)."""
    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is KeyError

'''
_INTS = ('k', 'm', 'y', 's', 'scale', 'a', 't')
_ALL = _INTS + ('ls', 'rest', 'g', 'e')


class _Gen:
    """Random function bodies holding the forms a cut must pass names across."""

    def __init__(self, rng):
        self.rng = rng

    def name(self):
        return self.rng.choice(_INTS)

    def expr(self):
        r = self.rng.random()
        if r < 0.4:
            return '%s + %d' % (self.name(), self.rng.randint(1, 9))
        if r < 0.7:
            return '%s * 2 - %s' % (self.name(), self.name())
        return 'len(ls) + %s' % self.name()

    def simple(self):
        n, e = self.name(), self.expr()
        forms = [
            '%s = %s' % (n, e),
            '%s += 1' % n,
            'print(%r, %s)' % (n, n),
            'ls = [(m := v * 2 + %s) for v in range(c)]' % self.name(),
            't = c > 1 and (y := %s)' % e,
            't = c > 2 or (k := %s)' % e,
            't = (s := %s) if c %% 2 else 0' % e,
            'g = lambda v, k=k: v * k + %s' % self.name(),
            'ls = [ls + 1 for ls in ls]',
            't = g(%s)' % self.name(),
            'print(sorted(d), len(ls))',
            'ls = ls + [%s]' % self.name(),
            '%s = box(%s).numpy()' % (n, e),
            "print('v', box(%s).numpy(), %s)" % (e, self.name()),
            '%s = box(box(%s).numpy() + 1).numpy()' % (n, e),
        ]
        return [self.rng.choice(forms)]

    def compound(self, depth):
        body = lambda: self.block(depth + 1)   # noqa: E731
        kind = self.rng.randrange(9)
        if kind == 0:
            return ['if (a := c - %d) > 0:' % self.rng.randint(0, 3)] + _ind(body()) + [
                'else:'] + _ind(body())
        if kind == 1:
            return ['for i in range(c):'] + _ind(body())
        if kind == 2:
            return ['match cfg:', "    case {'scale': scale, **rest}:"] + _ind(body(), 8) + [
                '    case [a, *rest]:'] + _ind(body(), 8) + ['    case _:', '        pass']
        if kind == 3:
            return ['with contextlib.suppress(KeyError):', "    y = d['k'] + %s" % self.name()
                    ] + _ind(body())
        if kind == 4:
            return ['with Quiet():'] + _ind(body()) + ["    s = d['s'] * 2"] + _ind(body())
        if kind == 5:
            return ['try:', "    m = d['m'] + %s" % self.name()] + _ind(body()) + [
                'except KeyError as e:', "    print('missing', e)"] + _ind(body())
        if kind == 6:
            return ['if c %% 2 == %d:' % self.rng.randint(0, 1), '    del %s' % self.name()]
        if kind == 7:
            return ['def h(v, s=s):', '    return v + s + k', 't = h(%s)' % self.name()]
        return ['while c > len(ls):', '    ls = ls + [%s]' % self.name()] + _ind(body())

    def block(self, depth):
        out = []
        for _ in range(self.rng.randint(1, 3)):
            out += self.compound(depth) if depth < 2 and self.rng.random() < 0.35 \
                else self.simple()
        return out

    def function(self, name):
        body = ['ls = [c]', 'g = abs'] + [
            '%s = %d' % (n, i) for i, n in enumerate(_INTS) if self.rng.random() < 0.5]
        for _ in range(self.rng.randint(3, 6)):
            body += self.block(0)
        # every name's final value, or that it is unbound
        body += ['out = []'] + [line for n in _ALL for line in (
            'try:', '    out.append(%s)' % n, 'except NameError:', "    out.append('unbound')")]
        body.append('return out')
        return ['def %s(c, d, cfg):' % name] + _ind(body)


def _ind(lines, n=4):
    return [' ' * n + line for line in lines]


_INPUTS = [(0, {}, {}), (1, {'k': 3}, {'scale': 2}), (2, {'k': 5, 's': 1, 'm': 4}, [7, 8]),
           (3, {'s': 2}, (1,)), (4, {'m': 1}, {'scale': 3, 'x': 1}), (5, {'k': 1}, [])]


def _outcome(fn, args):
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            result = ('ok', re.sub(' at 0x[0-9a-f]+', '', repr(fn(*args))))
    except Exception as error:   # noqa: BLE001 - compared, as raised
        result = ('raised', type(error).__name__, str(error))
    return result, out.getvalue()


def _simple_lines(tree):
    return sorted({n.lineno for n in gast.walk(tree) if isinstance(n, gast.stmt)
                   and not hasattr(n, 'body') and n is not tree})


def test_a_function_cut_at_random_statements_means_what_it_meant(tmp_path):
    rng = random.Random(35)
    programs, cuts = 150, 0
    for index in range(programs):
        source = _MODULE_HEADER + '\n'.join(_Gen(rng).function('f')) + '\n'
        path = tmp_path / ('gen_%d.py' % index)
        path.write_text(source)
        spec = importlib.util.spec_from_file_location('gen_%d' % index, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = module.f
        lines = _simple_lines(gast.parse(source).body[-1])
        for _ in range(3):
            chosen = sorted(rng.sample(lines, rng.randint(1, min(3, len(lines)))))
            try:
                made = segments.split(fn, chosen)
            except segments.CannotSplit:
                continue
            cuts += 1
            for args in _INPUTS:
                expected = _outcome(fn, args)
                assert _outcome(made.skeleton, args) == expected, (
                    'program %d cut at lines %s, inputs %r:\n%s' % (index, chosen, args, source))
    assert cuts > programs   # most cuts are made: the test exercises the splitter


def test_the_symtable_check_reads_a_closures_nonlocal_names():
    fn = _fn('''
        def step(x):
            nonlocal count
            count += 1
            helper = lambda: count + x
            return helper()
    ''')
    assert scopes.symtable_disagreement(fn) is None
    assert scopes.local_names(fn) == {'x', 'helper'}
