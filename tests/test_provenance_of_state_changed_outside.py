"""Bug hunt on issue 17's root causes: siblings found by probes and the fuzzer.

Each test runs a program eagerly and under janus on fresh objects, changes the
program's state from outside between calls so an assumption breaks mid-way, and
compares returns, stdout, state and the identities the program relies on after
every call.

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import tensorflow as tf

import janus
from test_outside_values import Box, c, plan, run_both  # noqa: F401


# ---------------------------------------------------------------------------
# `is` on tensors a tensor-dependent loop carries
# ---------------------------------------------------------------------------

class LoopMemo:
    """Counts repeats of the same input tensor, checked once per loop round."""

    def __init__(self):
        self.last = None
        self.hits = 0
        self.ts = [tf.constant(0.5), tf.constant(1.5)]

    def step(self, t, rounds):
        w = 0
        while w < rounds:             # rounds: a dynamic int after a few values
            w += 1
            if t is self.last:
                self.hits += 1
            else:
                self.last = t
        return t * 2.0


def test_identity_of_a_tensor_kept_inside_a_dynamic_loop():
    def call(m, i):
        return (m, m.ts[(i // 2) % 2], i % 4), {}

    jf = run_both(lambda: (LoopMemo.step, LoopMemo()), plan(call, 12),
                  state=lambda m: (m.hits,),
                  same=lambda m, r: (m.last is m.ts[0], m.last is m.ts[1]))
    assert janus.stats(jf)['calls'] == 12


class LoopPick:
    """A local a tensor-dependent loop rebinds, compared by identity after it."""

    def __init__(self):
        self.xs = [tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0])]
        self.same = 0

    def step(self, x, n):
        y = x
        i = 0
        while i < n:
            i += 1
            y = y * 2.0
        if y is x:
            self.same += 1
        return y


def test_identity_of_a_loop_result_against_its_start():
    jf = run_both(lambda: (LoopPick.step, LoopPick()),
                  plan(lambda m, i: ((m, m.xs[i % 2], [1, 0, 2, 0, 3, 0, 1, 0, 2, 0][i]), {}),
                       10),
                  state=lambda m: (m.same,))
    assert janus.stats(jf)['calls'] == 10


class LoopBest:
    """Keeps the input tensor through a tensor-dependent loop, then stores it."""

    def __init__(self):
        self.best = None
        self.hits = 0
        self.ts = [tf.constant(0.5), tf.constant(1.5)]

    def step(self, t, rounds):
        best = t * 0.0
        i = 0
        while i < rounds:
            i += 1
            best = t
        if self.best is not None and self.best is t:
            self.hits += 1
        self.best = best
        return t * 2.0


def test_an_input_kept_by_a_dynamic_loop_then_stored_is_that_tensor():
    jf = run_both(lambda: (LoopBest.step, LoopBest()),
                  plan(lambda m, i: ((m, m.ts[(i // 2) % 2], i % 4), {}), 12),
                  state=lambda m: (m.hits,),
                  same=lambda m, r: (m.best is m.ts[0], m.best is m.ts[1]))
    assert janus.stats(jf)['calls'] == 12


def fib(a, b, n):
    i = 0
    while i < n:
        i += 1
        a, b = b, a + b
    return a


def test_a_loop_passing_arguments_between_locals_still_converts(strict):
    jf = run_both(lambda: (fib, None),
                  plan(lambda p, i: ((c(1.0), c(1.0), i % 4), {}), 10))
    assert janus.stats(jf)['graph_calls'] > 0


class Flipper:
    """Swaps two tensors it keeps, once per round of a tensor-dependent loop."""

    def __init__(self):
        self.a = tf.constant([1.0])
        self.b = tf.constant([2.0])
        self.first = (self.a, self.b)

    def flip(self, x, rounds):
        i = 0
        while i < rounds:
            i += 1
            self.a, self.b = self.b, self.a
        return self.a + x


def test_tensors_swapped_in_a_dynamic_loop_stay_the_same_tensors():
    jf = run_both(lambda: (Flipper.flip, Flipper()),
                  plan(lambda m, i: ((m, c([1.0]), [1, 2, 0, 3][i % 4]), {}), 12),
                  state=lambda m: (m.a, m.b),
                  same=lambda m, r: (m.a is m.first[0], m.b is m.first[1]))
    assert janus.stats(jf)['calls'] == 12


class CondFlipper:
    """Swaps two tensors it keeps when the input is large (a tensor-dependent if)."""

    def __init__(self):
        self.a = tf.constant([1.0])
        self.b = tf.constant([2.0])
        self.first = (self.a, self.b)

    def flip(self, x):
        if tf.reduce_sum(x) > 1.0:
            self.a, self.b = self.b, self.a
        same = self.a is self.first[0]
        return self.a + x + (1.0 if same else 0.0)


def test_tensors_swapped_in_a_tensor_if_stay_the_same_tensors(strict):
    jf = run_both(lambda: (CondFlipper.flip, CondFlipper()),
                  plan(lambda m, i: ((m, c([float(i % 3)])), {}), 12),
                  state=lambda m: (m.a, m.b),
                  same=lambda m, r: (m.a is m.first[0], m.b is m.first[1]))
    assert janus.stats(jf)['graph_calls'] > 0


class Keeper:
    """Keeps (and returns) tensors it holds, only on one side of a tensor-dependent if."""

    def __init__(self):
        self.a = tf.constant([1.0])
        self.b = tf.constant([2.0])
        self.kept = []

    def pick(self, x):
        if tf.reduce_sum(x) > 1.0:
            y = self.a
            self.kept.append(self.b)
        else:
            y = x
        return y


def test_outside_tensors_kept_or_returned_from_a_branch_are_those_tensors(strict):
    jf = run_both(lambda: (Keeper.pick, Keeper()),
                  plan(lambda m, i: ((m, c([float(i % 3)])), {}), 12),
                  state=lambda m: (m.kept,),
                  same=lambda m, r: (r is m.a, [t is m.b for t in m.kept]))
    assert janus.stats(jf)['graph_calls'] > 0


class NestedPick:
    """Keeps one of its tensors chosen by two nested tensor-dependent ifs."""

    def __init__(self):
        self.a = tf.constant([1.0])
        self.b = tf.constant([2.0])
        self.keep = None

    def pick(self, x):
        if tf.reduce_sum(x) > 0.5:
            if tf.reduce_sum(x) > 1.5:
                y = self.a
            else:
                y = self.b
            self.inner = y
        else:
            y = x
        self.keep = y
        return x + 0.0


def test_a_tensor_chosen_by_nested_ifs_and_stored_is_the_chosen_tensor():
    jf = run_both(lambda: (NestedPick.pick, NestedPick()),
                  plan(lambda m, i: ((m, c([float(i % 3)])), {}), 12),
                  state=lambda m: (m.keep,),
                  same=lambda m, r: (m.keep is m.a, m.keep is m.b,
                                     getattr(m, 'inner', None) is m.a))
    assert janus.stats(jf)['calls'] == 12


# ---------------------------------------------------------------------------
# Class attributes written through `type(self)`, read through a subclass
# ---------------------------------------------------------------------------

class Stepper:
    count = 0
    lr = 1.0

    def step(self, x):
        if tf.reduce_sum(x) > 3.0:
            type(self).count = type(self).count + 1
            self.__class__.lr = self.lr * 0.5
        return x * self.lr + float(self.count)


def _classes():
    base = type('Base', (Stepper,), {})
    sub = type('Sub', (base,), {})
    program = Box(base=base, sub=sub, objs=[base(), sub()])
    return (lambda x: program.objs[0].step(x) + program.objs[1].step(x)), program


def _class_state(p):
    return [(vars(k).get('count'), vars(k).get('lr')) for k in (p.base, p.sub)]


def test_subclass_attribute_deleted_mid_way_reads_the_base_written_before():
    def forget(p):
        del p.sub.count                  # the subclass now inherits Base.count

    jf = run_both(_classes,
                  plan(lambda p, i: ((c([float(i % 5), 1.0]),), {}), 13,
                       {6: forget, 9: lambda p: setattr(p.base, 'lr', 4.0)}),
                  state=_class_state)
    assert janus.stats(jf)['graph_calls'] > 0


class Counted:
    n = 0

    @classmethod
    def bump(cls, v):
        cls.n = cls.n + 1
        return v * float(cls.n)

    def step(self, x):
        return self.bump(x)


def test_classmethod_counter_through_a_subclass_and_the_base(strict):
    def make():
        base = type('Base', (Counted,), {'n': 0})
        sub = type('Sub', (base,), {})
        program = Box(base=base, sub=sub, objs=[sub(), base()])
        return (lambda x: program.objs[0].step(x) + program.objs[1].step(x)
                + program.sub.bump(x)), program

    def forget(p):
        del p.sub.n

    jf = run_both(make, plan(lambda p, i: ((c([float(i), 1.0]),), {}), 12,
                             {5: lambda p: setattr(p.base, 'n', 50), 8: forget}),
                  state=lambda p: [vars(k).get('n') for k in (p.base, p.sub)])
    assert janus.stats(jf)['graph_calls'] > 0
