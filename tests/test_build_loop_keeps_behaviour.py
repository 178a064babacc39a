"""Review of the bounded build loop (issue 18, ``graphgen/build.py``) against the
retry loop it replaced (``api.JanusFunction._generate`` at f124665): behaviour
it was meant to keep.  Only the public API is used, so the same file runs on
either version.

* A ``relaxed shapes failed`` event says the graph was built with exact shapes
  instead: only when a graph was built (the old nested exact-shape retry
  recorded it after that retry succeeded, never when it failed too).
* A failed trace that reads a number the function rewrites (``self.step += 1``)
  makes that number dynamic and traces again with the relaxed shapes: the graph
  it settles on serves every shape of the relaxed family, as before (the build
  loop used to ask for exact shapes first, for the rest of the build, so a
  trace failure that relaxing the number fixed left an exact-shape graph: a
  cache miss and a new graph per shape).
"""
import pytest
import tensorflow as tf

import janus
from conftest import differential


def _kinds(jf):
    return [str(event.kind) for event in jf.events]


def test_no_exact_shapes_event_when_the_exact_trace_fails_too():
    def make():
        def f(x):
            y = x.numpy()   # refused with relaxed and with exact shapes alike
            return x * 2.0 + float(y[0])
        return f, None

    calls = [lambda n=n: ((tf.ones([n]),), {}) for n in (2, 3, 4, 5)]
    jf = differential(make, calls, profile_calls=2)
    assert janus.stats(jf)['graphs_built'] == 0
    assert 'relaxed shapes failed' not in _kinds(jf), janus.explain(jf)
    assert 'built with exact shapes instead' not in janus.explain(jf)


def test_exact_shapes_event_when_the_exact_graph_is_built():
    def make():
        def f(x):
            return tf.reshape(x, [x.shape[0] // 2, 2]) * 2.0   # needs a known dimension
        return f, None

    calls = [lambda n=n: ((tf.ones([n]),), {}) for n in (2, 4, 6, 6)]
    jf = differential(make, calls, profile_calls=2)
    assert janus.stats(jf)['graphs_built'] == 1
    assert _kinds(jf).count('relaxed shapes failed') == 1, janus.explain(jf)


class _Counter:
    def __init__(self):
        self.step = 0


def _counter_state(counter):
    return counter.step


@pytest.mark.usefixtures('without_graph_breaks')   # with them: a break at the 2nd break
def test_a_rewritten_number_made_dynamic_keeps_the_relaxed_shapes():
    """Every 4th step takes a branch janus does not convert; the first trace (step 4)
    takes it statically and fails.  Made dynamic, the step's test is a tf.cond whose
    other side is assumed instead: one graph with the relaxed shape (None,) serves
    every length."""
    def make():
        counter = _Counter()

        def f(x):
            counter.step += 1
            if counter.step % 4 == 0:
                r = x + float(x.numpy()[0])
            else:
                r = x + 1.0
            return r * 2.0
        return f, counter

    calls = [lambda n=n: ((tf.ones([n]),), {}) for n in range(2, 14)]
    jf = differential(make, calls, state=_counter_state, profile_calls=3)
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1 and stats['cache_misses'] == 0, janus.explain(jf)
    assert stats['graph_calls'] == 6, stats
    assert 'relaxed shapes failed' not in _kinds(jf), janus.explain(jf)


def test_a_janus_bug_making_the_plan_refuses_the_call_shape(monkeypatch):
    """As a bug in the tracer does: one internal error, the call shape runs imperatively
    from then on (it used to be traced again, and fail again, on every call)."""
    from janus.graphgen import plan
    attempts = []

    def broken(self, *args, **kwargs):
        attempts.append(1)
        raise RuntimeError('injected fault')
    monkeypatch.setattr(plan.Plan, '__init__', broken)

    def make():
        def f(x):
            return x * 2.0
        return f, None

    jf = differential(make, [((tf.ones([2]),), {})] * 5, profile_calls=1)
    assert len(attempts) == 1
    assert _kinds(jf).count('internal error') == 1, janus.explain(jf)
    assert 'injected fault' in janus.explain(jf)


class _Reader:
    """Draws from a dataset iterator (a change no rollback undoes), counts its reads in
    a Python number (read and rewritten: the trace's ``evolving``), then gathers."""

    def __init__(self):
        self.reads = 0
        self.cursor = tf.Variable(0)
        self.buffer = tf.constant([10.0, 11.0, 12.0, 13.0, 14.0, 15.0])
        self.stream = iter(tf.data.Dataset.range(1000).map(lambda i: tf.cast(i, tf.float32)))

    def read(self):
        offset = self.stream.get_next()
        self.reads += 1
        self.cursor.assign_add(1)
        return tf.gather(self.buffer, self.cursor) + offset


def test_a_refusal_made_after_the_trace_relaxes_no_number():
    def make():
        reader = _Reader()
        return reader.read, reader

    jf = differential(make, [((), {})] * 4, state=lambda r: (r.reads, int(r.cursor.numpy())))
    assert 'cannot undo' in janus.explain(jf)
    assert 'number relaxed' not in _kinds(jf), janus.explain(jf)
    assert not jf.scalars.dynamic
