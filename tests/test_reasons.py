"""Reasons are data: every refusal names a ``Reason``, every ``Reason`` has advice, and
``explain`` shows the right advice for the refusals a user meets (read off the
event's fields, never off its message).

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import ast
import contextlib
import pathlib

import numpy as np
import pytest
import tensorflow as tf

import janus
from janus.errors import ConversionError, Unsupported
from janus.graphgen import tracer
from janus.reasons import FIX, NOTHING, Reason

JANUS = pathlib.Path(janus.__file__).resolve().parent


# -- (a) every refusal names a Reason ----------------------------------------------------

# What raises or records a refusal, and the position of its Reason argument.
_REFUSERS = {'Unsupported': 0, 'ConversionError': 0, 'ConversionDeferred': 0,
             'UnsupportedArgument': 0, 'ScalarValueNeeded': 1, 'refuse_values': 0,
             'unsupported': 1, 'poison': 1, '_refuse': 1}
# A reason passed on from where it was named (the refusal re-raised with a new line, a
# refusal recorded earlier, a pair of (Reason, message)): reviewed, each of them.
_FORWARDS = {'reason', 'e.reason', 'error.reason', 'self.reason', 'self.REASON',
             '*self.poisoned[key]', '*self.pending.poisoned[id(obj)]', '*ctx.refusals[0]',
             '*self.target.reason', '*why', '_trace_failure(e)'}


def _refusal_calls():
    """(path, line, callee, reason argument's source) of every refusal janus makes."""
    found = []
    for path in sorted(JANUS.rglob('*.py')):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, 'id', None)
            if name not in _REFUSERS or name == '_refuse' and not node.args:
                continue   # (CheckedShape._refuse() names its own reason)
            at = _REFUSERS[name]
            argument = node.args[at] if len(node.args) > at else None
            text = ast.get_source_segment(source, argument) if argument is not None else None
            found.append((path.relative_to(JANUS.parent), node.lineno, name, text))
    return found


def test_every_refusal_site_names_a_reason():
    calls = _refusal_calls()
    assert len(calls) > 150, len(calls)   # the scan sees them all
    named = [c for c in calls if c[3] and c[3].startswith('Reason.')]
    for path, line, name, text in named:
        assert text[len('Reason.'):] in Reason.__members__, (path, line, text)
    unnamed = [c for c in calls if c not in named and c[3] not in _FORWARDS]
    assert not unnamed, '\n'.join('%s:%d %s(%s, ...)' % c for c in unnamed)


def test_a_refusal_without_a_reason_is_a_janus_bug():
    with pytest.raises(AssertionError, match='names a Reason'):
        ConversionError('janus does not convert something', 'at this line')
    with pytest.raises(AssertionError, match='names a Reason'):
        ConversionError('janus does not convert something')
    error = Unsupported(Reason.TRY_STATEMENT, 'janus does not convert a try statement',
                        'f.py', 3, '    try:\n')
    assert error.reason is Reason.TRY_STATEMENT
    assert str(error) == 'janus does not convert a try statement (at f.py:3: try:)'


def test_library_code_rewrapping_a_refusal_keeps_its_reason():
    """Keras re-raises ``e.__class__(message)`` with the call's arguments added."""
    try:
        try:
            raise Unsupported(Reason.PRINT_OF_OBJECT, 'janus does not convert print() of a T')
        except Unsupported as e:
            raise type(e)('Exception encountered when calling Layer.call(): %s' % e) from None
    except Unsupported as wrapped:
        assert wrapped.reason is Reason.PRINT_OF_OBJECT
        assert str(wrapped).startswith('Exception encountered')


def test_reasons_import_nothing_from_janus():
    tree = ast.parse((JANUS / 'reasons.py').read_text())
    imported = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert all('janus' not in ast.dump(n) for n in imported)


def test_explain_reads_fields_not_messages():
    source = (JANUS / 'explain.py').read_text()
    assert '_IMPERATIVE_ADVICE' not in source
    assert 're.search(' not in source and 're.match(' not in source


# -- (b) every Reason has advice --------------------------------------------------------------

@pytest.mark.parametrize('reason', list(Reason), ids=lambda r: r.name)
def test_every_reason_has_advice(reason):
    prefix = FIX if reason.change else NOTHING
    assert reason.advice.startswith(prefix)
    assert len(reason.advice) > len(prefix) + 10


def test_every_reason_is_used():
    sources = ''.join(p.read_text() for p in JANUS.rglob('*.py') if p.name != 'reasons.py')
    unused = [r.name for r in Reason if 'Reason.%s' % r.name not in sources]
    assert not unused, unused


# -- (c) the advice for each documented refusal ------------------------------------------------

V = tf.Variable(1.0)
GROWN = []
COUNT = 0
SCALES = {1.5, 2.5}


class _Dynamic:
    def __getattribute__(self, name):   # runs on every read (a __getattr__ converts)
        if name == 'scale':
            return tf.constant(2.0)
        return object.__getattribute__(self, name)


class _Shown:
    def __repr__(self):
        return 'shown'


DYNAMIC, SHOWN = _Dynamic(), _Shown()


def try_statement(x, activation='swishy'):
    try:   # Keras raises ValueError for an unknown name: janus cannot vouch for it
        act = tf.keras.activations.get(activation)
    except ValueError:
        act = tf.nn.relu
    return act(x)


def numpy_value(x):
    print(x.numpy())
    return x * 2.0


def recursive(x, scales):
    if not scales:
        return x
    return recursive(x * scales[0], scales[1:])   # over a list: not unrolled


def generator(x):
    yield x * 2.0


def print_object(x):
    print(SHOWN)
    return x + 1.0


def global_tuple_write(x):
    global COUNT
    COUNT, y = COUNT + 1, x
    return y


def numpy_argument(x):
    return x * 2.0   # a complex array: janus feeds arrays of ints, floats and bools only


def numpy_on_an_array(x, a):
    b = a * 2.0   # NumPy on an array fed to the graph: that statement runs in Python
    return x * tf.constant(b)


def outside_append(x):
    i = tf.constant(0)
    while i < tf.cast(tf.reduce_sum(x), tf.int32):
        GROWN.append(i)
        i += 1
    return i


def state_then_assert(x):
    V.assign(x)
    assert V.read_value() > 0.0
    return V * 2.0


def custom_getattr(x):
    return x * DYNAMIC.scale


def random_op(x):
    return x + tf.random.uniform([])


def inline_import(x):
    import math
    return x * math.pi


def delete_item(x):
    d = {'a': x}
    del d['a']
    return x


def branch_types(x):
    if tf.reduce_sum(x) > 0:
        y = x
    else:
        y = 'negative'
    return y


def unconverted_with(x):
    with contextlib.suppress(ValueError):
        y = x * 2.0
    return y


def fails_when_traced(x):
    return tf.constant(x) * 2.0   # eagerly a copy; a graph tensor is no constant


def loop_over_a_set(x):
    for scale in SCALES:
        x = x * scale
    return x


def _ones(n):
    return [((tf.constant(1.0),), {})] * n


def _alternating(n):
    return [((tf.constant([float(i % 2 * 2 - 1)]),), {}) for i in range(n)]


DOCUMENTED = [
    (try_statement, _ones(4), Reason.TRY_STATEMENT),
    (numpy_value, _ones(4), Reason.NUMPY_IN_GRAPH),
    (recursive, [((tf.constant(1.0), [2.0, 3.0]), {})] * 4, Reason.RECURSION),
    (generator, _ones(3), Reason.GENERATOR),
    (print_object, _ones(4), Reason.PRINT_OF_OBJECT),
    (global_tuple_write, _ones(4), Reason.DECLARED_WRITE),
    (numpy_argument, [((np.array([1 + 2j]),), {})] * 4, Reason.NUMPY_ARGUMENT),   # complex
    (numpy_on_an_array, [((tf.ones([2]), np.ones(2, np.float32)), {})] * 4, Reason.NUMPY_ARRAY),
    (outside_append, [((tf.constant([float(i)]),), {}) for i in range(6)],
     Reason.OUTSIDE_APPEND_IN_LOOP),
    (state_then_assert, [((tf.constant(float(i + 1)),), {}) for i in range(4)],
     Reason.CHECK_AFTER_STATE_CHANGE),
    (custom_getattr, _ones(4), Reason.CUSTOM_ATTRIBUTE),
    (random_op, _ones(4), Reason.RANDOM_OPS),
    (inline_import, _ones(4), Reason.INLINE_IMPORT),
    (delete_item, _ones(4), Reason.DELETE),
    (branch_types, _alternating(6), Reason.BRANCH_TYPES),
    (unconverted_with, _ones(4), Reason.UNCONVERTED_CALL),
    (fails_when_traced, _ones(4), Reason.TRACE_FAILED),
    (loop_over_a_set, _ones(4), Reason.SET_ORDER),
]


def _flat(text):
    return ' '.join(text.split())


@pytest.mark.parametrize('fn, calls, reason', DOCUMENTED, ids=lambda v: getattr(v, '__name__', ''))
def test_documented_refusals_get_their_reasons_advice(fn, calls, reason):
    jf = janus.function(fn)
    for args, kwargs in calls:
        result = jf(*args, **kwargs)
        if fn is generator:
            list(result)
    events = jf.__janus_function__.events
    assert reason in [e.reason for e in events], janus.explain(jf)
    report = janus.explain(jf)
    # (after the fix:/nothing to change: prefix: an outcome assumed instead of real control
    # flow says "calls that take the other path run imperatively; to keep them in graphs, ...")
    advice = reason.advice.split(': ', 1)[1]
    assert _flat(advice) in _flat(report), report
    shown = [e.advice for e in events if e.reason is reason]
    assert all(a.startswith(FIX if reason.change else NOTHING) for a in shown), shown


def step_with_a_printout(x, step):
    loss = tf.reduce_sum(x * V)
    if step % 10 == 0:
        print(loss.numpy())
    return loss


def test_numpy_inside_a_branch_says_what_happens_and_what_to_change(capsys):
    """``print(loss.numpy())`` every tenth step: the other steps run a graph that assumes
    the branch is not taken; once the tenth steps keep taking it, the print runs in
    Python (a graph break) and the rest in a segment (two ops here: less than a graph
    call costs, so it runs as plain Python).  The advice names ``.numpy()`` and
    ``tf.print``, and does not say there is nothing to change."""
    V.assign(1.0)
    jf = janus.function(step_with_a_printout)
    x = tf.constant([1.0, 2.0])
    for step in range(45):
        assert float(jf(x, step)) == 3.0
    assert capsys.readouterr().out.count('3.0') == 5   # steps 0, 10, ..., 40, as eagerly
    events = jf.__janus_function__.events
    about_it = [e for e in events if str(e.kind) in ('assumed instead', 'fallback',
                                                      'graph break')
                and e.reason is not None]   # not the note that a segment runs plainly
    stats = janus.stats(jf)   # a graph assuming no print; then the print runs in Python
    assert about_it and stats['graph_calls'] + stats['split_calls'] >= 35, stats
    assert any(str(e.kind) == 'graph break' for e in events)
    for event in about_it:
        assert event.advice.startswith(FIX), event
        assert '.numpy()' in event.advice and 'tf.print' in event.advice, event
        assert 'run imperatively' in event.advice or 'graph break' in event.advice, event
    assert any(e.reason is Reason.NUMPY_IN_GRAPH for e in about_it)


def test_the_recompile_limit_says_what_kept_changing():
    def scaled(x, mode):
        return x * len(mode)
    jf = janus.function(scaled)
    with janus.config.patch(recompile_limit=2, relax_scalars=False):
        for i in range(12):
            jf(tf.constant(1.0), 'mode%d' % i)
    events = jf.__janus_function__.events
    assert Reason.RECOMPILE_LIMIT in [e.reason for e in events]
    report = _flat(janus.explain(jf))
    assert 'kept changing' in report and 'mode' in report


def test_a_trace_failure_on_numpy_is_numpy_advice():
    with tf.Graph().as_default():
        try:
            tf.constant(1.0).numpy()
        except AttributeError as e:
            missing = e
    assert tracer._trace_failure(missing) is Reason.NUMPY_IN_GRAPH
    assert tracer._trace_failure(TypeError('x')) is Reason.TRACE_FAILED
