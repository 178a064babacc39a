"""Bug hunt on issue 17's root causes: siblings found by probes and the fuzzer.

Each test runs a program eagerly and under janus on fresh objects, changes the
program's state from outside between calls so an assumption breaks mid-way, and
compares returns, stdout, state and the identities the program relies on after
every call.

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import tensorflow as tf

import janus
from test_outside_values import c, plan, run_both  # noqa: F401


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
