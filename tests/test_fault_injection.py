"""janus's own failures never reach the user: fault injection at every stage.

Each test makes one janus internal raise (pytest's monkeypatch) while a
program with tensor state, an outside list, printing, a tensor branch and a
callee runs eagerly and under janus, call by call.  Returns, raised
exceptions, object state and stdout must be eager's; ``janus.explain``
must show the internal error; user code must never run twice in a call
(the outside list counts the runs).
"""
import pytest
import tensorflow as tf

import janus
from janus import profiler
from janus.trace import call_signature
from janus.graphgen import generator, tracer
from janus.replay import entry
from conftest import assert_same, outcome

FAULT = 'injected fault'


def fail(*args, **kwargs):
    raise RuntimeError(FAULT)


class Program:
    """What the function reads and writes: a tensor attribute and a run log."""

    def __init__(self):
        self.total = tf.zeros([2])
        self.runs = []

    def step(self, x):
        h = helper(x)
        if tf.reduce_sum(h) > 0:
            h = h + 1.0
        self.total = self.total + h
        self.runs.append(1)
        print('step done')
        return h


def helper(x):
    return x * 2.0


def state(program):
    return program.total, list(program.runs)


def batches(n=8):
    signs = [1.0, 1.0, 1.0, 1.0, -1.0, 1.0, 1.0, 1.0]
    return [tf.constant([signs[i % 8] * (i + 1.0), 2.0]) for i in range(n)]


def run_both(capsys, inject=None, at_call=0, calls=8):
    """Eager and janus on fresh Programs; ``inject()`` breaks janus from call ``at_call``."""
    eager, program = Program(), Program()
    if inject is not None and at_call < 0:
        inject(None)   # before janus.function: at construction
    jf = janus.function(program.step)
    for number, x in enumerate(batches(calls)):
        if inject is not None and number == at_call:
            inject(jf)
        expected = outcome(eager.step, x)
        eager_out = capsys.readouterr().out
        actual = outcome(jf, x)
        janus_out = capsys.readouterr().out
        where = 'call %d' % number
        assert expected[0] == actual[0], '%s: eager %s, janus %s' % (where, expected, actual)
        if expected[0] == 'ok':
            assert_same(expected[1], actual[1], where)
        else:
            assert expected[1:] == actual[1:], where
        assert_same(state(eager), state(program), where + ' state')
        assert eager_out == janus_out, where + ' stdout'
    return jf


def test_without_faults_the_program_builds_a_graph(capsys):
    jf = run_both(capsys)
    assert janus.stats(jf)['graph_calls'] >= 3
    assert 'internal error' not in janus.explain(jf)


STAGES = {
    'signature binding': (lambda mp, jf: mp.setattr(jf, '_bind', fail), 0),
    'recording arguments': (lambda mp, jf: mp.setattr(profiler.Profile, 'record_arguments',
                                                      fail), 0),
    'instrumenting': (lambda mp, jf: mp.setattr(profiler, 'instrument', fail), -1),
    'instrumenting a callee': (lambda mp, jf: mp.setattr(profiler.Recorder, '_copy_of',
                                                         fail), 0),
    'Recorder.test': (lambda mp, jf: mp.setattr(profiler.Recorder, '_observe', fail), 0),
    'Recorder.call bookkeeping': (lambda mp, jf: mp.setattr(profiler, '_callee_name', fail), 1),
    'Signature construction': (lambda mp, jf: mp.setattr(call_signature, 'Signature', fail), 0),
    'generator.convert': (lambda mp, jf: mp.setattr(generator, 'convert', fail), 0),
    'tracer.trace': (lambda mp, jf: mp.setattr(tracer, 'trace', fail), 0),
    'GraphEntry.check': (lambda mp, jf: mp.setattr(entry.GraphEntry, 'check', fail), 5),
    'flattening arguments': (lambda mp, jf: mp.setattr(call_signature.Signature, 'flatten',
                                                       fail), 5),
    'GraphEntry.run write-back': (lambda mp, jf: mp.setattr(entry, 'rebuild', fail), 5),
}


@pytest.mark.parametrize('stage', sorted(STAGES))
def test_internal_error_runs_the_call_as_plain_python(stage, capsys, monkeypatch):
    patch, at_call = STAGES[stage]
    jf = run_both(capsys, lambda jf: patch(monkeypatch, jf), at_call)
    report = janus.explain(jf)
    assert 'internal error' in report and FAULT in report, report
    assert 'RuntimeError' in report   # with the traceback


def test_a_graph_tf_cannot_instantiate_runs_the_call_as_plain_python(capsys, monkeypatch):
    """A graph with a cycle (janus's control dependencies) fails before anything ran:
    the call runs as plain Python and the graph is dropped, never a TF error."""
    def cyclic(*args, **kwargs):
        raise tf.errors.InvalidArgumentError(None, None, '3 nodes in a cycle [Op:x] ' + FAULT)
    jf = run_both(capsys, lambda jf: monkeypatch.setattr(entry.GraphEntry, 'run', cyclic), 5)
    report = janus.explain(jf)
    assert 'internal error' in report and 'in a cycle' in report, report
    assert janus.stats(jf)['imperative_calls'] >= 3


def test_profiling_stops_instrumenting_after_a_hook_failed(capsys, monkeypatch):
    jf = run_both(capsys, lambda jf: monkeypatch.setattr(profiler.Recorder, '_observe', fail))
    assert 'stopped instrumenting' in janus.explain(jf)
    assert janus.stats(jf)['graph_calls'] >= 3   # graphs still build, from what was seen


def test_strict_mode_raises_for_an_internal_error_before_user_code(monkeypatch):
    monkeypatch.setattr(generator, 'convert', fail)
    program = Program()
    jf = janus.function(program.step, profile_calls=0)
    with janus.config.patch(strict=True):
        with pytest.raises(janus.StrictModeError, match=FAULT):
            jf(tf.constant([1.0, 2.0]))
    assert program.runs == []


def test_write_back_failure_after_a_state_change_never_runs_the_call_twice(monkeypatch):
    """The one case janus cannot hide: the graph already updated a variable, so the
    call cannot be re-run; janus says so instead of updating it twice."""
    var = tf.Variable(0.0)

    def bump(x):
        var.assign_add(x)
        return var * 1.0
    jf = janus.function(bump, profile_calls=1)
    jf(tf.constant(1.0))
    jf(tf.constant(1.0))
    assert janus.stats(jf)['graph_calls'] == 1
    monkeypatch.setattr(entry, 'rebuild', fail)
    with pytest.raises(janus.JanusError, match='cannot be re-run'):
        jf(tf.constant(1.0))
    assert float(var) == 3.0
    assert FAULT in janus.explain(jf)


def test_user_exceptions_pass_through_unchanged():
    def raising(x):
        if x.shape[0] > 1:
            raise ValueError('user says no: %d' % x.shape[0])
        return x

    jf = janus.function(raising)
    for n in (1, 1, 1, 2, 1, 3):
        x = tf.zeros([n])
        expected, actual = outcome(raising, x), outcome(jf, x)
        assert expected[0] == actual[0]
        if expected[0] == 'raised':
            assert expected[1:] == actual[1:]
    assert 'internal error' not in janus.explain(jf)
