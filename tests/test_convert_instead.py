"""Statements janus converts instead of leaving to plain Python (issue 19, part 3).

Tuple-target attribute and item writes (``self.best, self.wait = loss, 0``,
swaps, nested and starred targets) keep Python's order: the right side whole,
then each target in turn, left to right, its object and key evaluated when it
is assigned.  ``ord``/``chr``, ``math.*`` and NumPy's functions on Python
constants run at trace time behind the guards of what they read (a relaxed
number is pinned: its value is needed); NumPy on a tensor is refused.  Each
test runs the program eagerly and under janus on fresh objects and compares
returns, exceptions, stdout, state and identity after every call, changing
state from outside so an assumption breaks mid-way.

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import contextlib
import io
import math

import numpy as np
import pytest
import tensorflow as tf

import janus
from conftest import assert_same, outcome


def c(value):
    return tf.constant(value)


def run_both(make, steps, state, **janus_options):
    """Runs ``make()``'s (fn, program) eagerly and under janus, step by step.

    Each step is ``(change, call)``: ``change(program)`` (or None) changes the
    program from outside before the call, on each side; ``call(program)``
    returns (args, kwargs).  After every call the outcome, stdout, identity of
    the result with the program's attributes and ``state(program)`` agree.
    Returns the janus function."""
    eager_fn, eager_program = make()
    plain, janus_program = make()
    janus_fn = janus.function(plain, **janus_options)
    for number, (change, call) in enumerate(steps):
        seen = []
        for fn, program in ((eager_fn, eager_program), (janus_fn, janus_program)):
            if change is not None:
                change(program)
            args, kwargs = call(program)
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                result = outcome(fn, *args, **kwargs)
            seen.append((result, printed.getvalue(), _identity(program, result),
                         state(program)))
        (expected, e_out, e_same, e_state), (actual, a_out, a_same, a_state) = seen
        where = 'call %d' % number
        assert expected[0] == actual[0], '%s: eager %s, janus %s' % (where, expected, actual)
        if expected[0] == 'ok':
            assert_same(expected[1], actual[1], where)
        else:
            assert expected[1:] == actual[1:], where
        assert e_out == a_out, '%s stdout: eager %r, janus %r' % (where, e_out, a_out)
        assert e_same == a_same, '%s identity: eager %s, janus %s' % (where, e_same, a_same)
        assert_same(e_state, a_state, where + ' state')
    return janus_fn


def _identity(program, result):
    """Which of the program's attributes a returned object (or item of one) is."""
    if result[0] != 'ok':
        return None
    values = result[1] if isinstance(result[1], (tuple, list)) else (result[1],)
    held_by = program if isinstance(program, dict) else vars(program)
    found = []
    for i, value in enumerate(values):
        for name, held in sorted(held_by.items()):
            if value is held and not isinstance(value, (int, float, str, bool, type(None))):
                found.append((i, name))
    return found


def converts(fn):
    """The janus function ran graphs and nothing imperatively."""
    stats = janus.stats(fn)
    assert stats['graph_calls'] > 0 and stats['imperative_calls'] == 0, janus.explain(fn)


class Box:
    def __init__(self, **values):
        self.__dict__.update(values)


# -- 1. tuple-target attribute and item writes -------------------------------------

class EarlyStopping:
    """The idiom: ``self.best, self.wait = loss, 0`` on improvement."""

    def __init__(self):
        self.best, self.wait, self.stopped = 1e9, 0, False

    def step(self, loss):
        value = float(loss)
        if value < self.best:
            self.best, self.wait = value, 0
        else:
            self.wait, self.stopped = self.wait + 1, self.wait + 1 >= 2
        return loss * 2.0


def _early_stopping_state(program):
    return (program.best, program.wait, program.stopped)


@pytest.mark.parametrize('heap_ops', [False, True])
def test_tuple_attribute_writes_convert(strict, heap_ops):
    def make():
        program = EarlyStopping()
        return program.step, program
    losses = [5.0, 4.0, 3.0, 2.0, 1.0, 0.5]
    steps = [(None, lambda p, v=v: ((c(v),), {})) for v in losses]
    with janus.config.patch(heap_ops=heap_ops):
        jf = run_both(make, steps, _early_stopping_state)
    converts(jf)


def test_tuple_attribute_writes_when_the_branch_changes():
    def make():
        program = EarlyStopping()
        return program.step, program
    losses = [5.0, 4.0, 3.0, 2.0, 3.0, 4.0, 5.0, 0.1, 0.2]   # improvement stops mid-way
    steps = [(None, lambda p, v=v: ((c(v),), {})) for v in losses]
    run_both(make, steps, _early_stopping_state)


class Swapper:
    def __init__(self):
        self.x, self.y, self.log = c(1.0), c(2.0), []
        self.n, self.m = 1, 2

    def swap(self, t):
        self.x, self.y = self.y, self.x     # the right side whole before any write
        self.n, self.m = self.m, self.n + self.m
        return self.x + t


def test_swap_reads_the_whole_right_side_first(strict):
    def make():
        program = Swapper()
        return program.swap, program
    steps = [(None, lambda p: ((c(1.0),), {}))] * 7
    jf = run_both(make, steps, lambda p: (p.x, p.y, p.n, p.m))
    converts(jf)


def test_swap_after_an_outside_change():
    def make():
        program = Swapper()
        return program.swap, program

    def rebind(p):
        p.x, p.n = c(10.0), 'ten'   # a str where the graph saw a number: the guard misses
    steps = [(None, lambda p: ((c(1.0),), {}))] * 5 + [(rebind, lambda p: ((c(1.0),), {}))] \
        + [(None, lambda p: ((c(1.0),), {}))] * 3
    run_both(make, steps, lambda p: (p.x, p.y, p.n, p.m))


class Nested:
    def __init__(self):
        self.a, self.b, self.inner = 0, 0, Box(v=0, items=[0, 0, 0])
        self.rest = []

    def nested(self, t, k):
        self.a, (self.b, c_) = t, (t + 1.0, k)
        self.inner.v, self.inner.items[k] = k * 2, t
        return c_ + 1

    def starred(self, t, k):
        self.a, *self.rest = t, k, t * 2.0
        first, *self.inner.items, last = [k, k + 1, k + 2, k + 3]
        return first + last

    def mixed(self, t):
        d = {}
        d['x'], self.a, [self.b, d['y']] = t, 1, (2, t + 1.0)
        return d


def _nested_state(p):
    return (p.a, p.b, p.inner.v, list(p.inner.items), list(p.rest))


@pytest.mark.parametrize('method', ['nested', 'starred'])
def test_nested_and_starred_targets(strict, method):
    def make():
        program = Nested()
        return getattr(program, method), program
    steps = [(None, lambda p, k=k: ((c(float(k)), k % 2), {})) for k in range(8)]
    jf = run_both(make, steps, _nested_state)
    converts(jf)


def test_starred_target_list_is_the_attributes_own():
    """The list a starred target collects is new on every call, stored as it is."""
    def make():
        program = Nested()
        return program.starred, program
    kept = []

    def keep(p):
        kept.append(p.rest)
    steps = [(keep if i else None, lambda p: ((c(1.0), 1), {})) for i in range(6)]
    run_both(make, steps, lambda p: (p.rest, [r is p.rest for r in kept[-1:]]))


def test_mixed_targets_in_one_statement(strict):
    def make():
        program = Nested()
        return program.mixed, program
    steps = [(None, lambda p, k=k: ((c(float(k)),), {})) for k in range(6)]
    jf = run_both(make, steps, _nested_state)
    converts(jf)


class Indexed:
    def __init__(self):
        self.i, self.slots = 0, [0] * 6

    def gotcha(self, t):
        # Python assigns self.i first, then indexes with the new self.i.
        self.i, self.slots[self.i] = self.i + 1, t
        return t * 2.0


def test_target_objects_are_evaluated_when_assigned():
    """The graph runs while the index is in range; then eager's IndexError, with
    ``self.i`` written before it, as eagerly."""
    def make():
        program = Indexed()
        return program.gotcha, program
    steps = [(None, lambda p, k=k: ((c(float(k)),), {})) for k in range(8)]
    jf = run_both(make, steps, lambda p: (p.i, list(p.slots)))
    assert janus.stats(jf)['graph_calls'] >= 1, janus.explain(jf)   # a graph per index value


def test_wrong_count_raises_as_eagerly():
    """A value of another length on a later call: eager's ValueError, no write."""
    class Program:
        def __init__(self):
            self.a, self.b, self.pair = 0, 0, [1, 2]

        def step(self, t):
            self.a, self.b = self.pair
            return t + self.a

    def make():
        program = Program()
        return program.step, program

    def lengthen(p):
        p.pair.append(3)
    steps = [(None, lambda p: ((c(1.0),), {}))] * 5 + [(lengthen, lambda p: ((c(1.0),), {}))] \
        + [(lambda p: p.pair.pop(), lambda p: ((c(1.0),), {}))] * 2
    run_both(make, steps, lambda p: (p.a, p.b, list(p.pair)))


def test_item_targets_of_an_argument(strict):
    def step(d, t):
        d['loss'], d['count'] = t, d['count'] + 1
        return t

    def make():
        state = {'loss': None, 'count': 0}
        return step, state

    steps = [(None, lambda d, k=k: ((d, c(float(k))), {})) for k in range(6)]
    jf = run_both(make, steps, lambda d: dict(d))
    converts(jf)
