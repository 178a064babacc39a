"""Default-deny by allowlist: only the Python types janus models are observed.

``janus/pytypes.py`` is the one table of the Python types janus models
(constants, Enum members, list, tuple, dict, deque, set and the subclasses it
names).  An outside set or deque is guarded by exactly what the trace
observed (its truth, length, membership, items) and its writes are replayed;
any other container-like type (a Counter's items, ``UserList``, a list
subclass that redefines iteration, your class with ``__len__``) is refused.
Library functions whose answer differs while tracing (``tf.executing_eagerly``,
``tf.get_static_value``, ``hasattr(t, 'numpy')``) answer as eagerly or refuse,
and a float zero converted to a tensor gets the sign eager's conversion cache
gives it.  Each test runs a program eagerly and under janus on fresh objects,
changes its state from outside mid-way, and compares returns, stdout and state
after every call.

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import collections
import math

import numpy as np
import pytest
import tensorflow as tf

import janus
from test_outside_values import Box, c, converted, imperative, plan, run_both


def signs(value):
    """A result with every float's sign of zero visible (``assert_same`` compares
    tensors with a tolerance, under which 0.0 equals -0.0)."""
    if isinstance(value, tf.Tensor):
        return (value.dtype.name, [repr(float(v)) for v in value.numpy().flat])
    if isinstance(value, float):
        return ('float', repr(value))
    if isinstance(value, (list, tuple)):
        return [signs(v) for v in value]
    return value


def items(container):
    """A container's items as comparable values (tensors as lists)."""
    return [v.numpy().tolist() if isinstance(v, tf.Tensor) else v for v in container]


# ---------------------------------------------------------------------------
# Sets and deques: guarded by what the trace observed
# ---------------------------------------------------------------------------

class Agent:
    """A replay agent: ids it has seen, a bounded buffer of recent observations."""

    def __init__(self, maxlen=3):
        self.seen = set()
        self.buffer = collections.deque(maxlen=maxlen)

    def act(self, x):
        y = x * 1.0
        if self.seen:
            y = y + 100.0
        if self.buffer:
            y = y * 2.0
        return y


def test_truth_of_an_outside_set_and_deque_is_guarded(strict):
    def fill(agent):
        agent.seen.add('episode-1')
        agent.buffer.append(1)

    jf = run_both(lambda: (Agent.act, Agent()),
                  plan(lambda a, i: ((a, c([float(i), 1.0])), {}), 10,
                       {5: fill, 8: lambda a: a.seen.clear()}),
                  state=lambda a: (sorted(a.seen), list(a.buffer)))
    converted(jf)
    assert 'TRUTH_MATCH' in janus.explain(jf)


def test_frozenset_membership_set_length_equality_and_sorted(strict):
    class Tagger:
        def __init__(self):
            self.frozen = frozenset()
            self.tags = {1}

        def step(self, x):
            y = x * float(len(self.tags))
            if 'encoder' in self.frozen:
                y = tf.stop_gradient(y) * 0.5
            if self.tags == {1, 2}:
                y = y + 10.0
            for tag in sorted(self.tags):
                y = y + float(tag)
            return y

    def freeze(t):
        t.frozen = t.frozen | {'encoder'}

    jf = run_both(lambda: (Tagger.step, Tagger()),
                  plan(lambda t, i: ((t, c([float(i)])), {}), 11,
                       {4: lambda t: t.tags.add(2), 6: freeze, 8: lambda t: t.tags.add(7)}),
                  state=lambda t: (sorted(t.frozen), sorted(t.tags)))
    converted(jf)
    report = janus.explain(jf)
    assert 'CONTAINS_MATCH' in report and 'SET_MATCH' in report


def test_set_add_and_deque_append_are_written_back(strict):
    class Replay(Agent):
        def observe(self, step, x):
            self.seen.add(step % 4)
            self.buffer.append(x * 2.0)
            total = tf.zeros_like(x)
            for item in self.buffer:
                total = total + item
            return total * float(len(self.seen)), len(self.buffer)

    def widen(agent):   # a longer buffer from outside: its maxlen is guarded
        agent.buffer = collections.deque(agent.buffer, maxlen=5)

    jf = run_both(lambda: (Replay.observe, Replay()),
                  plan(lambda a, i: ((a, i, c([float(i)])), {}), 12, {7: widen}),
                  state=lambda a: (sorted(a.seen), items(a.buffer), a.buffer.maxlen))
    converted(jf)


def test_set_and_deque_changed_in_place_by_operators(strict):
    class Log:
        def __init__(self):
            self.seen, self.recent = set(), collections.deque(maxlen=2)

        def step(self, x, tag):
            self.seen |= {tag}
            self.recent += [tag]
            if 'b' in self.seen:
                x = x + 1.0
            return x * float(len(self.recent))

    jf = run_both(lambda: (Log.step, Log()),
                  plan(lambda g, i: ((g, c([1.0]), 'ab'[i // 4]), {}), 8),
                  state=lambda g: (sorted(g.seen), list(g.recent)))
    converted(jf)


def test_iterating_an_outside_set_runs_imperatively():
    """A set's order is Python's hashing, not something janus can reproduce."""
    def make():
        box = Box(names={'a', 'b'})

        def f(x):
            out = []
            for name in box.names:
                out.append(name)
            return x * float(len(out)), out
        return f, box
    jf = run_both(make, plan(lambda b, i: ((c([1.0]),), {}), 6,
                             {3: lambda b: b.names.add('c')}))
    imperative(jf, "order")


# ---------------------------------------------------------------------------
# Other container-like types: refused unless modelled
# ---------------------------------------------------------------------------

def test_counter_and_defaultdict_read_and_appended():
    class Stats:
        def __init__(self):
            self.counts = collections.Counter()
            self.history = collections.defaultdict(list)

        def step(self, x, tag):
            if self.counts:
                x = x + 1.0
            if tag in self.counts:
                x = x * 2.0
            self.counts.update([tag])
            self.history[tag].append(len(self.history))
            return x

    jf = run_both(lambda: (Stats.step, Stats()),
                  plan(lambda s, i: ((s, c([1.0]), 'ab'[i % 2]), {}), 8,
                       {5: lambda s: s.counts.clear()}),
                  state=lambda s: (dict(s.counts), dict(s.history)))
    imperative(jf, 'Counter')


def test_counter_truth_and_membership_convert_and_its_equality_is_refused(strict):
    def make():
        box = Box(counts=collections.Counter())

        def f(x):
            if box.counts:
                x = x + 1.0
            if 'a' in box.counts:
                x = x * 3.0
            return x * float(len(box.counts))
        return f, box
    jf = run_both(make, plan(lambda b, i: ((c([1.0]),), {}), 10,
                             {4: lambda b: b.counts.update('a'), 7: lambda b: b.counts.clear()}),
                  state=lambda b: dict(b.counts))
    converted(jf)

    def make_equality():
        box = Box(counts=collections.Counter())

        def f(x):
            if box.counts == {'a': 1}:
                x = x + 1.0
            return x
        return f, box
    with janus.config.patch(strict=False):
        jf = run_both(make_equality, plan(lambda b, i: ((c([1.0]),), {}), 8,
                                          {4: lambda b: b.counts.update('a')}))
    imperative(jf, 'Counter')


def test_a_list_subclass_that_redefines_iteration_is_not_a_list():
    class Newest(list):
        def __iter__(self):
            return iter(list(reversed(list(list.__iter__(self)))))

    def make():
        box = Box(history=Newest([1.0, 2.0]))

        def f(x):
            for value in box.history:   # eagerly: newest first
                return x * value
            return x
        return f, box
    jf = run_both(make, plan(lambda b, i: ((c([1.0]),), {}), 8,
                             {4: lambda b: b.history.append(5.0)}))
    imperative(jf, 'Newest')


def test_a_list_subclass_that_redefines_nothing_is_a_list(strict):
    class History(list):
        def last(self):
            return self[-1]

    class Trainer:
        def __init__(self):
            self.losses = History([0.0])

        def step(self, x):
            loss = tf.reduce_sum(x)
            self.losses.append(loss)
            if len(self.losses) > 3:
                return loss + self.losses.last()
            return loss

    jf = run_both(lambda: (Trainer.step, Trainer()),
                  plan(lambda t, i: ((t, c([float(i)])), {}), 8,
                       {5: lambda t: t.losses.clear() or t.losses.append(0.0)}),
                  state=lambda t: (type(t.losses).__name__, items(t.losses)))
    converted(jf)


@pytest.mark.parametrize('kind', ['user __len__', 'UserList'])
def test_truth_of_a_container_janus_does_not_model_runs_imperatively(kind):
    class Buffer:
        def __init__(self):
            self.items = []

        def __len__(self):
            return len(self.items)

    def make():
        box = Box(buffer=Buffer() if kind == 'user __len__' else collections.UserList())

        def f(x):
            if box.buffer:
                x = x + 1.0
            return x
        return f, box

    def add(box):
        (box.buffer.items if kind == 'user __len__' else box.buffer).append(1)
    jf = run_both(make, plan(lambda b, i: ((c([1.0]),), {}), 8, {4: add}))
    imperative(jf, 'Buffer' if kind == 'user __len__' else 'UserList')


# ---------------------------------------------------------------------------
# Trace-time-only behaviour answers as eagerly
# ---------------------------------------------------------------------------

def test_executing_eagerly_takes_the_eager_path(strict):
    def make():
        def step(x):
            if tf.executing_eagerly() and not tf.inside_function():
                return x + 1.0
            return x - 1.0
        return step, None
    jf = run_both(make, plan(lambda _, i: ((c([float(i), 1.0]),), {}), 8))
    converted(jf)


def test_printing_a_value_when_executing_eagerly_runs_imperatively(capsys):
    def make():
        def step(x):
            y = x * 2.0
            if tf.executing_eagerly():
                print(y.numpy())
            return y
        return step, None
    jf = run_both(make, plan(lambda _, i: ((c([float(i)]),), {}), 6), capsys=capsys)
    imperative(jf, 'numpy')


def test_get_static_value_of_a_tensor_as_eagerly(capsys):
    class Model:
        def __init__(self):
            self.static_hits = 0

        def step(self, x):
            total = tf.reduce_sum(x)
            known = tf.get_static_value(total)
            if known is not None:
                self.static_hits += 1
                print('static', known)
                return total * 2.0
            return total * 3.0

    jf = run_both(lambda: (Model.step, Model()),
                  plan(lambda m, i: ((m, c([float(i), 1.0])), {}), 7),
                  state=lambda m: m.static_hits, capsys=capsys)
    imperative(jf, 'get_static_value')

    def make():
        def scale(x):   # a value the graph knows for every call it serves: a graph
            return x * tf.get_static_value(tf.constant(2.0)) * float(tf.get_static_value(3))
        return scale, None
    with janus.config.patch(strict=True):
        converted(run_both(make, plan(lambda _, i: ((c([float(i)]),), {}), 6)))


def test_probes_of_a_tensor_answer_as_for_an_eager_tensor(strict):
    eager_tensor = type(tf.constant(0))

    def make():
        def step(x):
            y = x * 2.0
            if hasattr(y, 'numpy'):
                y = y + 1.0
            if isinstance(y, eager_tensor):
                y = y + 10.0
            if not tf.is_symbolic_tensor(y):
                y = y + 100.0
            return y, getattr(y, 'name', 'unnamed'), hasattr(y, 'op')
        return step, None
    converted(run_both(make, plan(lambda _, i: ((c([float(i)]),), {}), 6)))


# ---------------------------------------------------------------------------
# The sign of a float zero converted to a tensor is eager's conversion cache's
# ---------------------------------------------------------------------------

ZEROS = [1.0, 2.0, 0.0, -0.0, 0.0, -0.0, -0.0, 0.0, float('nan'), -0.0, float('nan'), 3.0, -0.0]


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_zero_float_argument_converts_as_eagerly(strict, dtype):
    """Eager converts Python numbers through a cache keyed by value (0.0 == -0.0):
    a zero gets the sign of the first zero converted for that dtype."""
    def make():
        def f(x, s):
            return (x * s, s * x, tf.maximum(x, s), tf.fill([2], s), math.copysign(1.0, s),
                    -s, s + 0.0)
        return f, None
    jf = run_both(make, plan(lambda _, i: ((c(np.array([1.0, -2.0], dtype)), ZEROS[i]), {}),
                             len(ZEROS)), view=signs)
    converted(jf)


def test_zero_float_attribute_and_computed_zero_convert_as_eagerly():
    class Layer:
        def __init__(self):
            self.scale = 1.0

        def call(self, x):
            return x * self.scale, x * (self.scale * -1.0)

    def set_scale(i):
        def change(layer):
            layer.scale = ZEROS[i]
        return change
    steps = [(set_scale(i), lambda layer: ((layer, c([1.0, -2.0])), {}))
             for i in range(len(ZEROS))]
    jf = run_both(lambda: (Layer.call, Layer()), steps, view=signs)
    assert janus.stats(jf)['graph_calls'] > 0, janus.explain(jf)
