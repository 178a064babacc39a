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
    held_by = program if isinstance(program, dict) else getattr(program, "__dict__", {})
    found = []
    for i, value in enumerate(values):
        for name, held in sorted(held_by.items()):
            if value is held and not isinstance(value, (int, float, str, bool, type(None))):
                found.append((i, name))
    return found


def converts(fn):
    """The janus function ran graphs and refused nothing (calls after a cache miss
    may still be profiled imperatively before the next graph)."""
    assert janus.stats(fn)['graph_calls'] > 0 and not reasons(fn), janus.explain(fn)


def reasons(fn):
    """The reasons of the refusals ``fn`` recorded."""
    return {event.reason for event in fn.__janus_function__.events if event.reason is not None}


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


# -- 2. ord, chr, math and NumPy on Python constants at trace time -------------------

class Text:
    def __init__(self):
        self.c, self.n, self.tags = 'a', 3, []

    def step(self, x):
        code = ord(self.c)
        self.tag = chr(self.n + 65) + hex(code)
        self.tags.append(chr(code + 1))
        return x * code, self.tag


def test_ord_and_chr_of_constants(strict):
    def make():
        program = Text()
        return program.step, program

    def other(p):
        p.c = 'z'
    steps = [(None, lambda p: ((c(1.0),), {}))] * 5 + [(other, lambda p: ((c(2.0),), {}))] \
        + [(None, lambda p: ((c(1.0),), {}))] * 2
    jf = run_both(make, steps, lambda p: (p.c, p.tag, list(p.tags)))
    converts(jf)


def test_chr_of_a_changing_number_is_specialized():
    """``chr`` needs its number's value: a relaxed (changing) one is pinned, a graph per
    value, never a wrong character."""
    def make():
        program = Text()
        return program.step, program

    def count(p):
        p.n += 1
    steps = [(count, lambda p: ((c(1.0),), {}))] * 8
    jf = run_both(make, steps, lambda p: (p.n, p.tag, list(p.tags)))
    assert janus.stats(jf)['graph_calls'] >= 1, janus.explain(jf)


class Schedule:
    def __init__(self):
        self.d, self.step_count = 16.0, 0

    def lr(self, x):
        warm = math.sqrt(self.d) + math.log(self.d) - math.exp(-self.d) + math.pi
        steps = math.floor(self.d / 3) + math.ceil(self.d / 5)
        self.last = (warm, steps)
        return x * warm, steps


@pytest.mark.parametrize('relax_scalars', [True, False])
def test_math_of_outside_numbers(strict, relax_scalars):
    """Constant: computed while tracing, behind a VALUE_MATCH guard; changing: a graph input
    (math in the graph, ``floor`` still an int) or, without relaxation, a graph per value."""
    def make():
        program = Schedule()
        return program.lr, program

    def grow(p):
        p.d += 1.5
    steps = [(None, lambda p: ((c(1.0),), {}))] * 5 + [(grow, lambda p: ((c(1.0),), {}))] * 4
    with janus.config.patch(relax_scalars=relax_scalars):
        jf = run_both(make, steps, lambda p: (p.d, p.last))
    converts(jf)


class Normalizer:
    def __init__(self):
        self.var, self.lr, self.eps = 16.0, 0.5, 1e-3

    def step(self, x):
        std = np.sqrt(self.var) + self.eps         # a NumPy float64, as eagerly
        self.std = std
        scale = np.float32(self.lr) / np.exp(np.log(std))
        bounded = np.clip(self.lr * 10, 0.0, 2.0)
        mean = np.mean([self.var, self.lr, 2.0])
        if np.isfinite(std) and int(np.round(std)) > 3:
            print('std', std, f'{std:.2f}', np.float32(self.lr))
        return x * scale + std * x, std, bounded, mean, np.floor(self.var) == 16.0


def _normalizer_state(p):
    return (p.var, p.lr, p.std, type(p.std))


def test_numpy_of_constants_keeps_numpy_types(strict):
    def make():
        program = Normalizer()
        return program.step, program

    def rate(p):
        p.lr = 0.25
    steps = [(None, lambda p: ((c([1.0, 2.0]),), {}))] * 5 \
        + [(rate, lambda p: ((c([1.0, 2.0]),), {}))] + [(None, lambda p: ((c([3.0, 1.0]),), {}))] * 2
    jf = run_both(make, steps, _normalizer_state)
    converts(jf)


def test_numpy_raising_on_a_new_value_raises_as_eagerly():
    """A value NumPy rejects on a later call: the guard misses, the new trace meets
    NumPy's own exception, and the call raises it as eagerly."""
    def make():
        program = Normalizer()
        return program.step, program

    def text(p):
        p.var = 'sixteen'
    steps = [(None, lambda p: ((c([1.0, 2.0]),), {}))] * 5 \
        + [(text, lambda p: ((c([1.0, 2.0]),), {}))] \
        + [(lambda p: setattr(p, 'var', 4.0), lambda p: ((c([1.0, 2.0]),), {}))] * 2
    run_both(make, steps, lambda p: (p.var, p.std))


def test_numpy_of_a_changing_number_pins_it():
    """``np.sqrt`` of a number that changes every call: its value is needed (a graph per
    value), the results stay NumPy's."""
    def make():
        program = Normalizer()
        return program.step, program

    def drift(p):
        p.var += 9.0
    steps = [(drift, lambda p: ((c([1.0, 2.0]),), {}))] * 8
    jf = run_both(make, steps, _normalizer_state)
    assert janus.stats(jf)['graph_calls'] >= 1, janus.explain(jf)


class Stored:
    def __init__(self):
        self.scale = np.float32(2.0)
        self.steps = 0

    def step(self, x):
        self.scale = self.scale * np.float32(1.0)   # a NumPy scalar read back next call
        grid = np.arange(3.0) * float(self.scale)   # an array the call made of constants
        self.grid = grid
        return x + grid, grid


def test_numpy_scalars_and_arrays_made_by_the_call(strict):
    """A NumPy scalar stored and read back is a constant (VALUE_MATCH); an array the call
    made is a new array on every call, the same object where it is stored and returned."""
    def make():
        program = Stored()
        return program.step, program
    returned = []

    def fresh(p):   # last call's array is not this call's (eager makes a new one)
        returned.append(p.__dict__.get('grid'))

    def rescale(p):
        p.scale = np.float32(3.0)
    steps = [(fresh, lambda p: ((c([1.0, 1.0, 1.0]),), {}))] * 5 \
        + [(rescale, lambda p: ((c([1.0, 1.0, 1.0]),), {}))] \
        + [(fresh, lambda p: ((c([1.0, 1.0, 1.0]),), {}))] * 2
    jf = run_both(make, steps, lambda p: (p.scale, type(p.scale), p.grid))
    converts(jf)
    kept = [a for a in returned if a is not None]
    assert len({id(a) for a in kept}) == len(kept)


def test_numpy_array_mutated_by_the_caller_after_return(strict):
    """The array returned is the caller's to change: the next call's is unaffected."""
    def make():
        program = Stored()
        return program.step, program

    def scribble(p):
        if hasattr(p, 'grid'):
            p.grid[0] = 99.0
    steps = [(scribble, lambda p: ((c([1.0, 1.0, 1.0]),), {}))] * 7
    jf = run_both(make, steps, lambda p: p.grid)
    converts(jf)


def test_numpy_on_a_tensor_is_refused():
    """NumPy needs a tensor's value, which only the run has: the call runs imperatively
    (NUMPY_IN_GRAPH), with eager's results."""
    from janus.reasons import Reason

    def step(x):
        return np.sqrt(x), float(np.mean(x))

    def make():
        return step, None
    steps = [(None, lambda p: ((c([4.0, 9.0]),), {}))] * 5
    jf = run_both(make, steps, lambda p: None)
    assert reasons(jf) == {Reason.NUMPY_IN_GRAPH}
    assert janus.stats(jf)['graph_calls'] == 0


class Tools:
    def __init__(self):
        self.double = np.vectorize(lambda v: v * 2.0)
        self.table = np.arange(3.0)


def _ufunc_method(p, x):
    return x * np.add.reduce([1.0, 2.0])


def _vectorized(p, x):
    return x * p.double(3.0)


def _view_stored(p, x):
    p.view = np.arange(6.0).reshape(2, 3)
    return x


def _empty(p, x):
    return x, np.empty(3).shape


def _out(p, x):
    a = np.zeros(2)
    np.add(a, 1.0, out=a)
    return x * float(a[0])


@pytest.mark.parametrize('program', [_ufunc_method, _vectorized, _view_stored, _empty, _out])
def test_numpy_beyond_pure_functions_is_refused_with_a_reason(program):
    """NumPy that is not a pure function of known values (a ufunc's methods, a
    vectorized Python function, ``np.empty``, ``out=``, an array view stored) runs
    imperatively with a named reason, never a janus error."""
    from janus.reasons import Reason

    def make():
        tools = Tools()

        def step(x):
            return program(tools, x)
        return step, tools
    steps = [(None, lambda p: ((c(1.0),), {}))] * 5
    jf = run_both(make, steps, lambda p: p.__dict__.get('view'))
    found = reasons(jf)
    assert found and found <= {Reason.CUSTOM_ATTRIBUTE, Reason.NUMPY_GLOBAL, Reason.UNCONVERTED_CALL,
                               Reason.RETURN_VALUE}, janus.explain(jf)
