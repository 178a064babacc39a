"""The measured floor (floor.py): janus never keeps a function slower than eager.

Differential tests with the floor on (``measured_floor`` marker; every other test
runs without it): every call's result, output and state equal eager's while the
floor decides, holds and changes its mind.  The programs are chosen so the
gap is wide (a graph call for one add is many times an eager add; sixty
unrolled ops are many times faster as a graph), so the decisions do not hang
on the machine's noise; the knobs shrink the windows so a test takes a few
hundred calls.
"""
import pytest
import tensorflow as tf

import janus
from conftest import differential
from janus.floor import CallKind, Floor, Verdict

pytestmark = pytest.mark.measured_floor

FAST_WINDOWS = dict(floor_window=4, floor_recheck=4, floor_eager_calls=2)


class Counter:
    """A step counter with a tensor update, light or heavy by the caller's flag."""

    def __init__(self):
        self.step = 0
        self.log = []

    def add(self, x, heavy):
        self.step += 1
        if self.step % 50 == 0:
            self.log.append(self.step)
        if heavy:
            for _ in range(60):
                x = tf.tanh(x) * 0.9 + 0.01
            return x
        return x + 1.0


def _make():
    counter = Counter()
    return counter.add, counter


def _state(counter):
    return (counter.step, list(counter.log))


def _decisions(jf):
    return list(jf.state.floor.decisions)


def test_a_function_slower_as_a_graph_runs_plainly():
    calls = [((tf.constant([1.0, 2.0]), False), {})] * 60
    with janus.config.patch(**FAST_WINDOWS):
        jf = differential(_make, calls, _state)
    decisions = _decisions(jf)
    assert decisions and decisions[0].verdict is Verdict.PLAIN, decisions
    assert janus.stats(jf)['imperative_calls'] > 30
    report = janus.explain(jf)
    assert 'measured floor' in report and 'runs plainly' in report
    assert any(line.startswith('  time a call: janus') for line in report.split('\n')[:4])


def test_a_function_that_becomes_faster_gets_its_graph_back():
    light = [((tf.constant([1.0, 2.0]), False), {})] * 40
    heavy = [((tf.constant([1.0, 2.0]), True), {})] * 160
    with janus.config.patch(**FAST_WINDOWS):
        jf = differential(_make, light + heavy, _state)
    decisions = _decisions(jf)
    assert decisions[0].verdict is Verdict.PLAIN, decisions
    assert decisions[-1].verdict is Verdict.KEEP, decisions
    before = janus.stats(jf)['graph_calls']
    with janus.config.patch(**FAST_WINDOWS):
        for _ in range(8):
            jf(tf.constant([1.0, 2.0]), True)
    assert janus.stats(jf)['graph_calls'] >= before + 6


def test_a_function_that_becomes_slower_runs_plainly_later():
    heavy = [((tf.constant([1.0, 2.0]), True), {})] * 30
    light = [((tf.constant([1.0, 2.0]), False), {})] * 400
    with janus.config.patch(floor_sampling_share=1.0, **FAST_WINDOWS):
        jf = differential(_make, heavy + light, _state)
    decisions = _decisions(jf)
    assert Verdict.KEEP in [d.verdict for d in decisions], decisions
    assert decisions[-1].verdict is Verdict.PLAIN, [d.describe() for d in decisions]


def test_an_exception_in_a_plain_call_is_eagers():
    class Model:
        def __init__(self):
            self.calls = 0

        def step(self, x, fail):
            self.calls += 1
            if fail:
                raise ValueError('bad batch %d' % self.calls)
            return x * 2.0

    def make():
        model = Model()
        return model.step, model
    calls = [((tf.constant(1.0), i % 17 == 16), {}) for i in range(70)]
    with janus.config.patch(**FAST_WINDOWS):
        differential(make, calls, lambda m: m.calls)


def test_the_floor_is_off_when_its_knob_is():
    with janus.config.patch(measured_floor=False):
        jf = differential(_make, [((tf.constant([1.0]), False), {})] * 40, _state)
    assert not _decisions(jf)
    assert janus.stats(jf)['graph_calls'] >= 30


# -- the decisions, on a clock of our own --------------------------------------------

def test_a_far_faster_function_is_rechecked_rarely():
    floor = Floor()
    with janus.config.patch(**FAST_WINDOWS):
        for _ in range(3):
            floor.note(CallKind.PROFILED, 1.0, 0)
        for call in range(4):
            decision = floor.note(CallKind.JANUS, 0.1, call)
    # 2 eager samples cost 20 janus calls: 2% of 1,000 calls
    assert decision.verdict is Verdict.KEEP and decision.calls == 1000


def test_warm_up_is_not_counted_and_retraces_are():
    floor = Floor()
    with janus.config.patch(floor_sampling_share=10.0, **FAST_WINDOWS):
        for _ in range(3):
            floor.note(CallKind.PROFILED, 1.0, 0)
        floor.note(CallKind.WARMUP, 50.0, 3)
        for call in range(4):   # janus at a tenth of the profiled calls: kept, no sampling
            decision = floor.note(CallKind.JANUS, 0.1, 4 + call)
        assert decision is not None and decision.verdict is Verdict.KEEP
        assert not floor.plain_now()
        # a retrace every call: steady cost; eager is timed, then janus runs plainly
        for call in range(4):
            floor.note(CallKind.JANUS, 5.0, 8 + call)
        assert floor.plain_now()
        assert floor.note(CallKind.EAGER, 1.0, 12) is None
        assert floor.plain_now()
        decision = floor.note(CallKind.EAGER, 1.0, 13)
        assert decision.verdict is Verdict.PLAIN and decision.calls == 4
        assert [floor.plain_now() for _ in range(5)] == [True] * 4 + [False]


def test_a_repeated_decision_is_measured_again_less_often():
    floor = Floor()
    with janus.config.patch(**FAST_WINDOWS):
        floor.note(CallKind.EAGER, 1.0, 0)
        intervals = []
        for _ in range(4):
            while floor.plain_now():
                floor.note(CallKind.EAGER, 1.0, 0)
            decision = None
            while decision is None:
                decision = floor.note(CallKind.JANUS, 3.0, 0)
            intervals.append(decision.calls)
    assert intervals == [4, 8, 16, 32]


def test_one_eager_sample_far_slower_than_janus_ends_the_sampling():
    """A segment with no profiled calls (it took its owner's profile) is timed eagerly
    to decide; a first plain call 8x slower than janus decides at once instead of
    running the whole training step eagerly two more times."""
    floor = Floor()
    with janus.config.patch(**FAST_WINDOWS):
        for call in range(4):
            assert floor.note(CallKind.JANUS, 0.001, call) is None
        assert floor.plain_now()                 # sampling eager begins
        decision = floor.note(CallKind.EAGER, 0.05, 4)
        assert decision is not None and decision.verdict is Verdict.KEEP
        assert not floor.plain_now()             # no second eager sample


def test_one_slow_janus_call_in_the_window_is_not_steady_cost():
    """A graph's calls at a tenth of eager's, one of them paused by the machine (or a
    graph's first run on a new shape): janus keeps running.  Two slow calls out of
    four are steady cost: the function runs plainly."""
    floor = Floor()
    with janus.config.patch(**FAST_WINDOWS):
        for call, seconds in enumerate((0.1, 0.1, 8.0, 0.1)):
            floor.note(CallKind.JANUS, seconds, call)
        decision = None
        while decision is None and floor.plain_now():
            decision = floor.note(CallKind.EAGER, 1.0, 4)
        assert decision.verdict is Verdict.KEEP, decision
        floor = Floor()
        for call, seconds in enumerate((0.1, 8.0, 0.1, 8.0)):
            floor.note(CallKind.JANUS, seconds, call)
        decision = None
        while decision is None and floor.plain_now():
            decision = floor.note(CallKind.EAGER, 1.0, 4)
        assert decision.verdict is Verdict.PLAIN, decision
