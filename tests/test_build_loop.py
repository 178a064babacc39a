"""The build loop (``graphgen/build.py``): each retrace request is honoured once,
a request that changes nothing leaves its error standing, and a loop that
would not settle stops at ``build.MAX_TRACES`` as a janus internal error (the
call runs as plain Python, with eager's result)."""
import tensorflow as tf

import janus
from janus.errors import ConversionError, ScalarValueNeeded
from janus.graphgen import build, retrace, tracer
from janus.reasons import Reason
from conftest import assert_same


def _step(x):
    if tf.reduce_sum(x) > 0:
        return x * 2.0
    return x - 1.0


def _calls(n=5):
    return [tf.constant([float(i) + 1.0, 2.0]) for i in range(n)]


def test_a_retrace_loop_that_never_settles_stops_at_the_bound(monkeypatch):
    traces = []

    def always_a_new_site(fn, converted, bound, signature, plan, *args, **kwargs):
        traces.append(plan)
        key = (fn.__code__, 1000 + len(traces))   # a fresh site each time: never settles
        raise retrace.AssumeInstead(ConversionError(Reason.TRACE_FAILED, 'cannot build'), frozenset(),
                                    {key: ((True,), Reason.TRACE_FAILED, 'cannot build')})
    monkeypatch.setattr(tracer, 'trace', always_a_new_site)
    jf = janus.function(_step, profile_calls=1)
    for x in _calls():
        assert_same(jf(x), _step(x))
    assert len(traces) == build.MAX_TRACES   # one build; later calls give up at once
    report = janus.explain(jf)
    assert 'internal error' in report and 'without settling' in report, report
    assert janus.stats(jf)['graph_calls'] == 0


def test_exact_shapes_are_asked_for_once(monkeypatch):
    requests = []

    def wants_exact_shapes(fn, converted, bound, signature, plan, heap_shapes=None,
                           *args, **kwargs):
        requests.append(heap_shapes)
        raise retrace.ExactShapes(ConversionError(Reason.TRACE_FAILED, 'a relaxed dimension broke it'))
    monkeypatch.setattr(tracer, 'trace', wants_exact_shapes)
    jf = janus.function(_step, profile_calls=1)
    for x in _calls(3):
        assert_same(jf(x), _step(x))
    assert len(requests) == 2 and requests[1] is None   # then its error stands
    assert 'a relaxed dimension broke it' in janus.explain(jf)


def test_a_request_that_changes_nothing_leaves_its_error_standing(monkeypatch):
    requests = []

    def needs_no_new_number(fn, converted, bound, signature, plan, *args, **kwargs):
        requests.append(plan)
        raise retrace.PinNumbers(ScalarValueNeeded((), Reason.TRACE_FAILED, 'needs a value it has already'))
    monkeypatch.setattr(tracer, 'trace', needs_no_new_number)
    jf = janus.function(_step, profile_calls=1)
    for x in _calls(3):
        assert_same(jf(x), _step(x))
    assert len(requests) == 1
    assert 'needs a value it has already' in janus.explain(jf)
