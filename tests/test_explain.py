"""janus.explain/stats: any janus thing, short lines, and every reason says where and what to do.

Also lambdas told apart by their column position (pyct/parser.py).

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import contextlib
import io
import logging
import os
import re

import keras
import pytest
import tensorflow as tf

import janus
from conftest import assert_same, differential
from janus.pyct import parser

HERE = os.path.basename(__file__)
REASONS = ('ran imperatively', 'recompiled', 'fallback', 'relaxed', 'internal error',
           'graph error', 'recursive call', 'assumed instead', 'graph break')
WIDTH = 120


def event_blocks(report):
    """The entries of explain's events section: lists of lines, one list per entry."""
    blocks, inside = [], False
    for line in report.splitlines():
        if line.startswith('  events'):
            inside = True
        elif inside and re.match(r'    \d', line):
            blocks.append([line])
        elif inside and line.startswith('      ') and blocks:
            blocks[-1].append(line)
        elif not line.startswith('  '):
            inside = False
    return blocks


def assert_acts_on(report, filename=HERE):
    """Every line is short; every reason entry ends with `at FILE:LINE: fix:/nothing to change:`
    naming ``filename``."""
    long_lines = [line for line in report.splitlines() if len(line) > WIDTH]
    assert not long_lines, long_lines
    reasons = [b for b in event_blocks(report) if any(r in b[0] for r in REASONS)]
    assert reasons, report
    for block in reasons:
        text = ' '.join(line.strip() for line in block)
        tail = text[text.rindex(' at '):]
        assert re.match(r' at \S*%s:\d+: (fix|nothing to change): \S' % re.escape(filename),
                        tail), '%s\nin\n%s' % (tail, report)
    return reasons


# -- a recompile storm, a fallback and a NumPy argument, in one function ----------------------

def _mixed():
    @janus.function
    def step(x, mode):
        if tf.reduce_sum(x) > 0:
            y = x * 2.0
        else:
            y = x - 1.0
        return y + len(mode)
    return step


def test_storm_and_fallback_each_say_where_and_what(caplog):
    step = _mixed()
    pos, neg = tf.constant([1.0, 2.0]), tf.constant([-1.0, -2.0])
    with caplog.at_level(logging.INFO, logger='janus'), \
            janus.config.patch(recompile_limit=4, relax_scalars=True):
        for _ in range(4):
            step(pos, 'a')
        assert_same(step(neg, 'a'), neg - 1.0 + 1)   # the branch flips: a fallback
        for i in range(10):
            assert_same(step(pos, 'mode%d' % i), pos * 2.0 + len('mode%d' % i))
    report = janus.explain(step)
    reasons = assert_acts_on(report)
    kinds = ' '.join(b[0] for b in reasons)
    assert 'fallback' in kinds and 'recompiled' in kinds
    assert 'recompile limit reached' in report and 'janus.config.recompile_limit' in report
    assert "use a few distinct values" in report                   # the storm: what to change
    assert 'nothing to change' in report                           # the fallback relaxes
    # Guards are listed under their graph, grouped, once; events name graphs by number.
    assert 'assuming:' not in report and re.search(r'graph #\d+ built', report)
    assert '      arguments:' in report and '      ID_MATCH:' in report
    # Logged once, with the place and the advice.
    limit_logs = [r for r in caplog.records if 'recompile limit reached' in r.getMessage()]
    assert len(limit_logs) == 1
    for record in limit_logs:
        assert record.levelno == logging.WARNING
        assert HERE + ':' in record.getMessage() and 'fix: ' in record.getMessage()


def test_verbose_adds_the_profile_and_default_is_shorter():
    step = _mixed()
    for _ in range(5):
        step(tf.constant([1.0, 2.0]), 'a')
    short, verbose = janus.explain(step), janus.explain(step, verbose=True)
    assert 'profile (' not in short and 'profile (' in verbose
    assert len(short.splitlines()) < len(verbose.splitlines())
    assert all(len(line) <= WIDTH for line in verbose.splitlines())


def test_long_guard_values_and_reasons_stay_within_the_width():
    big = {'k%d' % i: 'v' * 50 for i in range(30)}

    @janus.function
    def f(x, table):
        return x * len(table) + len(str(sorted(big)))
    for _ in range(5):
        f(tf.constant(1.0), {'key_' + 'x' * 200: 1})
    report = janus.explain(f, verbose=True)
    assert all(len(line) <= WIDTH for line in report.splitlines()), report


@pytest.mark.parametrize('make, reason, advice', [
    (lambda: _try_block, 'try statement', 'move the try/except out'),
    (lambda: _state_then_assert, 'depends on a state change', 'before the state change'),
    (lambda: _print_object, 'print()', 'tf.print'),
])
def test_conversion_reasons_name_the_line_and_what_to_change(make, reason, advice):
    fn, args = make()()
    jf = janus.function(fn)
    for _ in range(5):
        jf(*args)
    report = janus.explain(jf)
    assert jf.stats.graphs_built == 0, report
    assert reason in report and advice in report
    assert_acts_on(report)


def _try_block():
    def f(x, activation='swishy'):
        try:   # Keras raises ValueError for an unknown name: janus cannot vouch for it
            act = tf.keras.activations.get(activation)
        except ValueError:
            act = tf.nn.relu
        return act(x)
    return f, (tf.constant(1.0),)


def _state_then_assert():
    v = tf.Variable(1.0)

    def f(x):
        v.assign(x)
        assert v.read_value() > 0.0
        return v * 2.0
    return f, (tf.constant(2.0),)


class _Opaque:
    def __repr__(self):
        return 'opaque'


def _print_object():
    thing = _Opaque()

    def f(x):
        print(thing)
        return x + 1.0
    return f, (tf.constant(1.0),)


def test_every_event_kind_gets_a_place_and_advice():
    from janus.api import Event, EventKind
    from janus.advising import advise
    from janus.guards import GuardKind, Miss
    from janus.reasons import Reason
    step = _mixed()
    for _ in range(4):
        step(tf.constant([1.0]), 'a')
    jf = step.__janus_function__
    site = next(iter(jf.profile.site_info))
    payloads = {
        'fallback': dict(assumption='BRANCH', filename=__file__, lineno=3, sites=(site,)),
        'cache miss': dict(miss=Miss(GuardKind.VALUE_MATCH, 'mode', "'a'", "'b'")),
        'relaxed': dict(sites=(site,)),
        'graph dropped': dict(sites=(site,)),
        'assumed instead': dict(reason=Reason.LOOP_CARRY_TYPES, sites=(site,)),
        'imperative': dict(reason=Reason.TRY_STATEMENT),
    }
    for kind in EventKind:
        event = Event(1, kind, 'janus does not convert something', **payloads.get(str(kind), {}))
        where, advice = advise(jf, event)
        if kind is EventKind.GRAPH_BUILT:
            assert (where, advice) == (None, None)
            continue
        assert re.match(r'\S+:\d+$', where), (kind, where)
        assert advice.startswith(('fix: ', 'nothing to change: ')), (kind, advice)


# -- any janus thing ---------------------------------------------------------------------------

class Scaler:
    def __init__(self):
        self.factor = tf.Variable(2.0)

    @janus.function
    def scale(self, x):
        return x * self.factor

    def plain(self, x):
        return x


def test_bound_methods_classes_and_wrapped_methods():
    obj = Scaler()
    for _ in range(5):
        obj.scale(tf.constant(1.0))
    assert janus.stats(obj.scale)['graph_calls'] == 2
    assert janus.stats(Scaler.scale) == janus.stats(obj.scale) == janus.stats(obj)
    assert janus.explain(obj.scale) == janus.explain(obj) == janus.explain(Scaler)
    assert re.search(r'Scaler.scale \(\S*%s:\d+\)' % HERE, janus.explain(obj.scale))

    wrapped = janus.function(obj.plain)
    for _ in range(5):
        wrapped(tf.constant(1.0))
    assert janus.stats(wrapped)['graph_calls'] == 2 and janus.stats(wrapped.__call__)['calls'] == 5
    assert re.search(r'Scaler.plain \(\S*%s:\d+\)' % HERE, janus.explain(wrapped))


@pytest.mark.parametrize('thing', [len, lambda x: x, Scaler().plain, Scaler.plain, 3,
                                   keras.layers.Dense(2)])
def test_plain_things_are_refused_saying_what_to_do(thing):
    with pytest.raises(janus.JanusUsageError, match='janus.function') as error:
        janus.explain(thing)
    with pytest.raises(janus.JanusUsageError, match='not a janus function'):
        janus.stats(thing)
    assert 'janus.Optimizer' in str(error.value)


def _two_variables():
    return tf.Variable([1.0, -2.0]), tf.Variable(0.5)


def test_optimizer_explain_names_it_and_where_it_was_made():
    (a, b), (ea, eb) = _two_variables(), _two_variables()
    eager = keras.optimizers.SGD(0.1)
    made = '%s:%d)' % (HERE, _line() + 1)   # the next line makes the optimizer
    opt = janus.Optimizer(keras.optimizers.SGD(0.1))
    for i in range(6):
        x = tf.constant(float(i))
        loss = opt.minimize(lambda: tf.reduce_sum(a * a) * b + x, lambda: [a, b])
        with tf.GradientTape() as tape:
            expected = tf.reduce_sum(ea * ea) * eb + x
        eager.apply_gradients(zip(tape.gradient(expected, [ea, eb]), [ea, eb]))
        assert_same(expected, loss)
    assert_same(ea, a)
    assert_same(eb, b)
    report = janus.explain(opt)
    assert report == janus.explain(opt.minimize)
    first = report.splitlines()[0]
    assert first.startswith('janus function janus.Optimizer(SGD).minimize (')
    assert first.endswith(made)
    assert janus.stats(opt)['graph_calls'] == 3, report
    assert all(len(line) <= WIDTH for line in report.splitlines())


def _line():
    import inspect
    return inspect.currentframe().f_back.f_lineno


def test_distributed_optimizer_is_accepted(monkeypatch):
    """Made without Horovod (its check stubbed): explain/stats take it like janus.Optimizer."""
    from janus import distributed
    monkeypatch.setattr(distributed, 'horovod', lambda: None)
    opt = janus.DistributedOptimizer(keras.optimizers.SGD(0.1))
    assert janus.stats(opt)['calls'] == 0
    report = janus.explain(opt)
    assert re.search(r'janus.DistributedOptimizer\(SGD\).minimize \(\S*%s:\d+\)' % HERE, report)
    assert 'janus.DistributedOptimizer(SGD).apply_gradients' in report   # none used yet: both


def test_distributed_optimizer_with_horovod():
    hvd = pytest.importorskip('horovod.tensorflow', reason='Horovod is not installed here')
    if not hvd.is_initialized():   # hvd.init() belongs to a horovodrun rank, not to pytest
        pytest.skip('Horovod is not initialized in this process (tests/test_horovod.py '
                    'runs ranks under horovodrun)')
    var = tf.Variable([1.0, 2.0])
    opt = janus.DistributedOptimizer(keras.optimizers.SGD(0.1))
    for _ in range(5):
        opt.minimize(lambda: tf.reduce_sum(var * var), [var])
    assert janus.stats(opt)['calls'] == 5
    assert 'janus.DistributedOptimizer(SGD).minimize' in janus.explain(opt)


# -- lambdas by position --------------------------------------------------------------------------

def test_two_lambdas_on_one_line_parse_to_their_own_nodes():
    import gast
    f, g = (lambda x: x + 1.0), (lambda x: x * 2.0)
    outer = lambda: (lambda: 3.0)  # noqa: E731
    inner = outer()
    bodies = [gast.dump(parser.parse_function(fn)[0].body) for fn in (f, g, outer, inner)]
    assert 'Add' in bodies[0] and 'Mult' in bodies[1]
    assert bodies[2].startswith('Lambda') and bodies[3].startswith('Constant')


def test_two_lambdas_on_one_line_convert_and_equal_eager(strict):
    def make():
        scale, shift = (lambda v: v * 2.0), (lambda v: v + 1.0)

        def f(x):
            pick, drop = (lambda a, b: a), (lambda a, b: b)
            return scale(x) - shift(x), pick(x, 1.0) * 2.0 + drop(0.0, x)
        return f, None
    jf = differential(make, [((tf.constant([float(i), 1.0]),), {}) for i in range(6)])
    assert janus.stats(jf)['graph_calls'] == 3, janus.explain(jf)

    f, g = janus.function(lambda x: x * 3.0), janus.function(lambda x: x - 3.0)
    for i in range(5):
        x = tf.constant(float(i))
        assert_same(f(x), x * 3.0)
        assert_same(g(x), x - 3.0)
    assert janus.stats(f)['graph_calls'] == janus.stats(g)['graph_calls'] == 2


def test_optimizer_with_two_lambdas_on_one_line_runs_as_graphs(strict):
    """`opt.minimize(lambda: loss, lambda: vars)`: the loss lambda is found by its column,
    not refused ("cannot tell which lambda on its line")."""
    var, eager_var = tf.Variable([1.0, 2.0]), tf.Variable([1.0, 2.0])
    opt, eager = janus.Optimizer(keras.optimizers.SGD(0.1)), keras.optimizers.SGD(0.1)
    for _ in range(6):
        loss = opt.minimize(lambda: tf.reduce_sum(var * var), lambda: [var])
        with tf.GradientTape() as tape:
            expected = tf.reduce_sum(eager_var * eager_var)
        eager.apply_gradients(zip(tape.gradient(expected, [eager_var]), [eager_var]))
        assert_same(expected, loss)
        assert_same(eager_var, var)
    assert janus.stats(opt)['graph_calls'] == 3, janus.explain(opt)


def test_a_lambda_starting_mid_statement_converts(strict):
    var = tf.Variable([1.0, 2.0])
    opt = janus.Optimizer(keras.optimizers.SGD(0.1))
    for _ in range(5):
        opt.minimize(
            lambda: tf.reduce_sum(var * var * 3.0),
            [var])
    assert janus.stats(opt)['graph_calls'] == 2, janus.explain(opt)


def test_to_code_of_a_split_function_shows_its_skeleton_and_segments():
    class Trainer:
        def __init__(self):
            self.w = tf.Variable(2.0)
            self.step = 0

        def train_step(self, x):
            loss = tf.reduce_sum(x * self.w)
            self.step += 1
            print('step', self.step, 'loss', loss.numpy())   # every call: a graph break
            return loss * 2.0

    trainer = Trainer()
    jf = janus.function(trainer.train_step)
    with contextlib.redirect_stdout(io.StringIO()):
        for i in range(8):
            jf(tf.constant([1.0, float(i)]))
    assert janus.stats(jf)['graph_part_calls'] > 0, janus.explain(jf)
    code = janus.to_code(jf)
    first = Trainer.train_step.__code__.co_firstlineno
    assert 'split: line %d in Python' % (first + 3) in code, code
    assert 'def __janus_skeleton' in code, code
    assert "__jr.routed(print)('step'" in code, code             # the statement as it runs
    assert 'def train_step_lines_%d_%d' % (first + 1, first + 2) in code, code


def test_to_code_of_a_function_running_plain_python_says_why():
    def draws(x):
        return x * tf.random.uniform([])   # refused: a random op janus cannot replay

    jf = janus.function(draws)
    for _ in range(5):
        jf(tf.constant(1.0))
    assert janus.stats(jf)['graph_calls'] == janus.stats(jf)['graph_part_calls'] == 0   # premise
    with pytest.raises(janus.JanusUsageError, match='runs as plain Python, so it has no graph'):
        janus.to_code(jf)
