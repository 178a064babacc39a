"""Loops over a list, tuple or range iterator from outside the call: the items
unrolled behind guards on the iterator's sequence and position, and the position
the loop leaves written back after the run (``control/outside_iterators.py``).

Differential tests on fresh objects (``conftest.differential``): returns and the
iterators' state (``__reduce__``: what is left, exhausted or not) after every call,
including a call whose assertion fails after the loop, and iterators the caller
advanced, exhausted or replaced between calls.

PYTEST_DONT_REWRITE: a user ``assert`` inside a converted function must stay one.
"""
import tensorflow as tf

import janus
from tests.conftest import differential


class Feed:
    """A training feed as users keep one: an iterator over a list of batches."""

    def __init__(self, batches):
        self.batches = batches
        self.it = iter(batches)


def _state(feed):
    return feed.it.__reduce__()[1:]


def _graph_runs(jf):
    return janus.stats(jf)['graph_calls']


def test_two_loops_over_iterators_passed_in_run_as_a_graph_and_exhaust_them(strict):
    """AutoGraph's ``successive_for_loops`` with a list and a tuple iterator passed in."""
    def successive(l1, l2):
        s = 0
        for i in l1:
            s = s * 10 + i
        for i in l2:
            s = s * 10 + i
        return s

    jf = janus.function(successive)
    for _ in range(5):
        for fn in (successive, jf):
            a, b = iter([1, 2]), iter((3, 4, 5))
            assert fn(a, b) == 12345
            assert (a.__reduce__()[1:], b.__reduce__()[1:]) == ((([],),), (((),),))
    assert _graph_runs(jf) == 2


def test_a_break_leaves_the_iterator_after_the_item_and_a_second_loop_resumes():
    def make():
        feed = Feed([tf.constant(1.0), tf.constant(2.0), tf.constant(3.0), tf.constant(4.0)])

        def warmup_then_train(w, steps):
            total = tf.constant(0.0)
            for i, x in enumerate(feed.it):
                total += w * x
                if i + 1 == steps:
                    break
            for x in feed.it:
                total -= x
            return total
        return warmup_then_train, feed

    def reset(feed, advance=0):
        feed.it = iter(feed.batches)
        for _ in range(advance):
            next(feed.it)

    calls = []
    for k in range(9):
        def call(k=k):
            return (tf.constant(2.0), 2 if k < 6 else 1), {}
        calls.append(call)
    # The iterator is reset by the state check's caller between calls: both sides.
    eager_fn, eager_feed = make()
    plain_fn, janus_feed = make()
    jf = janus.function(plain_fn)
    for k, call in enumerate(calls):
        for feed in (eager_feed, janus_feed):
            reset(feed, advance=1 if k == 7 else 0)
        args, _ = call()
        expected = eager_fn(*args)
        args, _ = call()
        actual = jf(*args)
        assert float(expected) == float(actual), k
        assert _state(eager_feed) == _state(janus_feed), k
    assert _graph_runs(jf) >= 3


def test_an_assertion_failing_after_the_loop_leaves_the_iterator_as_eager_does():
    def make():
        feed = Feed([0.5, 1.5, 2.5])

        def step(limit):
            total = tf.constant(0.0)
            for x in feed.it:
                total += x
            assert total < limit, 'too large'
            return total
        return step, feed

    def call(limit):
        return lambda: ((tf.constant(limit),), {})
    calls = [call(10.0)] * 4 + [call(1.0), call(10.0)]
    feeds = []

    def state(feed):
        feeds.append(feed)
        s = _state(feed)
        feed.it = iter(feed.batches)   # a fresh epoch on both sides
        return s
    jf = differential(make, calls, state=state)
    assert _graph_runs(jf) >= 1
    assert janus.stats(jf)['fallbacks'] == 1


def test_the_caller_changing_the_list_or_passing_an_exhausted_iterator():
    def make():
        data = [1.0, 2.0]

        def total(it, w):
            s = w
            for x in it:
                s = s + x * w
            return s
        return total, data

    calls = []
    for k in range(8):
        items = [1.0, 2.0] if k < 4 else ([1.0, 2.0, 3.0] if k < 6 else [])
        exhausted = k == 7

        def call(items=items, exhausted=exhausted):
            it = iter(list(items))
            if exhausted:
                list(it)
            return (it, tf.constant(2.0)), {}
        calls.append(call)
    jf = differential(make, calls)
    assert _graph_runs(jf) >= 1


def test_a_loop_the_graph_would_break_or_repeat_runs_in_python():
    """A break under a tensor test, and a loop over the iterator inside a tensor
    loop: the graph could not tell how far the iterator went."""
    def make():
        feed = Feed([1.0, 5.0, 2.0])

        def until_big(x):
            for v in feed.it:
                x = x + v
                if x > 4.0:
                    break
            return x
        return until_big, feed

    def state(feed):
        s = _state(feed)
        feed.it = iter(feed.batches)
        return s
    calls = [lambda: ((tf.constant(0.0),), {})] * 5
    differential(make, calls, state=state)

    def make_nested():
        feed = Feed([1.0, 2.0])

        def nested(x):
            while x < 3.0:
                for v in feed.it:
                    x = x + v
                x = x + 1.0
            return x
        return nested, feed
    differential(make_nested, [lambda: ((tf.constant(0.0),), {}), lambda: ((tf.constant(2.5),), {}),
                               lambda: ((tf.constant(-4.0),), {})] * 2, state=state)


def test_a_list_passed_in_with_an_iterator_over_it_is_one_object():
    """``f(batches, iter(batches))``: the iterator walks the argument list itself (its
    tensors re-read each call, its appends seen by the loop), as eagerly."""
    def make():
        def consume(batches, it, x):
            for v in it:
                if len(batches) < 3:
                    batches.append(v + 10.0)
                x = x + v
            return x
        return consume, None

    def call(k):
        def fresh():
            batches = [tf.constant(float(k)), tf.constant(2.0)]
            return (batches, iter(batches), tf.constant(1.0)), {}
        return fresh
    jf = differential(make, [call(k) for k in range(7)])
    assert _graph_runs(jf) >= 3
