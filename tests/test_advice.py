"""Advice that works: each test takes a program showing a reason, applies what
``explain`` says to change, and checks the break or fallback is gone with the
program's meaning unchanged (eager and janus side by side, fresh objects).  And
advice that says nothing is to change asks for no change.

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import math
import re

import numpy as np
import pytest
import tensorflow as tf

import janus
from janus.reasons import NOTHING, Reason

# A clause telling the user to do something: an imperative verb opening the advice
# or a clause of it.
_ORDER = re.compile(r'(?:^|[;:(]\s*|,\s*(?:or|and)\s+)(pass|use|move|decorate|call|keep|'
                    r'replace|define|make|remove|put|wrap|change|write)\b')


def test_advice_that_changes_nothing_asks_for_no_change():
    for reason in Reason:
        if reason.change:
            continue
        text = reason.advice[len(NOTHING):]
        assert not _ORDER.search(text), (reason.name, reason.advice)


class Trainer:
    """A hand-written step: a counter in ``self.step``, the loss logged every 10th."""

    def __init__(self, log):
        self.w = tf.Variable(tf.linspace(-1.0, 1.0, 8)[:, None])
        self.step = 0
        self.log = log

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(x @ self.w - y))
        self.w.assign_sub(0.05 * tape.gradient(loss, self.w))
        self.step += 1
        if self.step % 10 == 0:
            self.log(self, loss)
        return loss


def _print_numpy(trainer, loss):        # what explain says to change
    print('step', trainer.step, 'loss', loss.numpy())


def _tf_print(trainer, loss):           # its advice applied, self.step in the message
    tf.print('step', trainer.step, 'loss', loss)


def _tf_print_loss(trainer, loss):      # its advice applied, the loss alone
    tf.print('loss', loss)


def _run_both(capfd, log, steps=35):
    """Eager and janus on fresh trainers; their losses, weights and printed text."""
    x = tf.random.stateless_normal([16, 8], seed=[1, 2])
    y = tf.random.stateless_normal([16, 1], seed=[3, 4])
    sides = []
    for wrap in (lambda f: f, janus.function):
        trainer = Trainer(log)
        step = wrap(trainer.train_step)
        capfd.readouterr()
        losses = [float(step(x, y)) for _ in range(steps)]
        out, err = capfd.readouterr()
        sides.append((losses, trainer.w.numpy().tolist(), trainer.step, out + err, step))
    (e_losses, e_w, e_step, e_text, _), (j_losses, j_w, j_step, j_text, jf) = sides
    assert np.allclose(e_losses, j_losses, rtol=1e-6), (e_losses, j_losses)
    assert np.allclose(e_w, j_w, rtol=1e-6) and e_step == j_step
    assert e_text == j_text, (e_text, j_text)
    return jf


def test_print_of_numpy_breaks_and_tf_print_applied_runs_whole_graphs(capfd):
    before = janus.stats(_run_both(capfd, _print_numpy))
    assert before['split_calls'] > 0, before   # the advice's premise: a graph break
    for log in (_tf_print, _tf_print_loss):
        jf = _run_both(capfd, log)
        stats = janus.stats(jf)
        assert stats['split_calls'] == 0 and stats['imperative_calls'] == 0, janus.explain(jf)
        assert stats['graph_calls'] >= 30, janus.explain(jf)


def test_numpy_argument_advice_applied_runs_graphs():
    def scale(x):
        return tf.reduce_sum(x * 2.0)

    values = [np.full([3], i, np.float32) for i in range(8)]
    plain = janus.function(scale)
    for v in values:
        plain(v)
    assert janus.stats(plain)['graph_calls'] == 0, janus.explain(plain)   # the premise
    fixed = janus.function(scale)
    for v in values:   # the advice: tf.convert_to_tensor(value)
        assert float(fixed(tf.convert_to_tensor(v))) == float(scale(v))
    assert janus.stats(fixed)['graph_calls'] >= 4, janus.explain(fixed)
    assert janus.stats(fixed)['imperative_calls'] == 0, janus.explain(fixed)


# -- each documented refusal (test_reasons.DOCUMENTED) with its advice applied -----------

FIXED_V = tf.Variable(1.0)
FIXED_GROWN = []
FIXED_COUNT = 0
FIXED_SCALES = {1.5, 2.5}
NOISE = tf.random.Generator.from_seed(1)


def try_statement(x, act):   # the try/except around the call: `act` looked up before it
    return act(x)


def numpy_value(x):
    tf.print(x)
    return x * 2.0


def recursive(x, scales):   # the recursion as a loop
    for scale in scales:
        x = x * scale
    return x


def _doubled(x):
    yield x * 2.0


def generator(x):   # the function doing the tensor work decorated, not the generator
    return next(_doubled(x))


def print_object(x):
    print('shown')
    return x + 1.0


def global_tuple_write(x):
    global FIXED_COUNT
    FIXED_COUNT = FIXED_COUNT + 1
    y = x
    return y


def numpy_argument(x):
    return x * 2.0


def numpy_on_an_array(x, a):
    b = tf.constant(a) * 2.0
    return x * b


def outside_append(x):
    i = tf.constant(0)
    found = []
    while i < tf.cast(tf.reduce_sum(x), tf.int32):
        found.append(i)
        i += 1
    FIXED_GROWN.append(tf.stack(found))
    return i


def state_then_assert(x):
    assert x > 0.0
    FIXED_V.assign(x)
    return FIXED_V * 2.0


def custom_getattr(x, scale):
    return x * scale


def random_op(x):
    return x + NOISE.uniform([])


def inline_import(x):
    return x * math.pi


def delete_item(x):
    d = {'a': x}
    d['a'] = None
    return x


def branch_types(x):
    if tf.reduce_sum(x) > 0:
        y = x
    else:
        y = -x
    return y


def unconverted_with(x):
    y = x * 2.0
    return y


def fails_when_traced(x):
    return tf.identity(x) * 2.0


def loop_over_a_set(x):
    for scale in sorted(FIXED_SCALES):
        x = x * scale
    return x


def _ones(n):
    return [((tf.constant(1.0),), {})] * n


FIXED = {
    Reason.TRY_STATEMENT: (try_statement, [((tf.constant(1.0), tf.nn.relu), {})] * 4),
    Reason.NUMPY_IN_GRAPH: (numpy_value, _ones(4)),
    Reason.RECURSION: (recursive, [((tf.constant(1.0), [2.0, 3.0]), {})] * 4),
    Reason.GENERATOR: (generator, _ones(4)),
    Reason.PRINT_OF_OBJECT: (print_object, _ones(4)),
    Reason.DECLARED_WRITE: (global_tuple_write, _ones(4)),
    Reason.NUMPY_ARGUMENT: (numpy_argument,
                            [((tf.convert_to_tensor(np.array([1 + 2j])),), {})] * 4),
    Reason.NUMPY_ARRAY: (numpy_on_an_array, [((tf.ones([2]), np.ones(2, np.float32)), {})] * 4),
    Reason.OUTSIDE_APPEND_IN_LOOP: (outside_append,
                                    [((tf.constant([float(i)]),), {}) for i in range(6)]),
    Reason.CHECK_AFTER_STATE_CHANGE: (state_then_assert,
                                      [((tf.constant(float(i + 1)),), {}) for i in range(4)]),
    Reason.CUSTOM_ATTRIBUTE: (custom_getattr, [((tf.constant(1.0), tf.constant(2.0)), {})] * 4),
    Reason.RANDOM_OPS: (random_op, _ones(4)),
    Reason.INLINE_IMPORT: (inline_import, _ones(4)),
    Reason.DELETE: (delete_item, _ones(4)),
    Reason.BRANCH_TYPES: (branch_types,
                          [((tf.constant([float(i % 2 * 2 - 1)]),), {}) for i in range(6)]),
    Reason.UNCONVERTED_CALL: (unconverted_with, _ones(4)),
    Reason.TRACE_FAILED: (fails_when_traced, _ones(4)),
    Reason.SET_ORDER: (loop_over_a_set, _ones(4)),
}


def test_every_documented_fix_has_its_advice_applied_here():
    from test_reasons import DOCUMENTED
    fixes = {reason for _, _, reason in DOCUMENTED if reason.change}
    assert fixes - set(FIXED) == set(), fixes - set(FIXED)


@pytest.mark.parametrize('reason', sorted(FIXED, key=lambda r: r.name), ids=lambda r: r.name)
def test_the_advice_applied_removes_the_refusal(reason, capfd):
    fn, calls = FIXED[reason]
    jf = janus.function(fn)
    for args, kwargs in calls:
        jf(*args, **kwargs)
    capfd.readouterr()
    events = jf.__janus_function__.events
    assert reason not in [e.reason for e in events], janus.explain(jf)
    stats = janus.stats(jf)
    assert stats['graph_calls'] + stats['graph_part_calls'] > 0, janus.explain(jf)


def test_a_refusal_found_on_the_finished_graph_names_the_line_that_made_its_op():
    """Checks and state changes are ordered on the whole graph, after the trace: the
    refusal names the line of the op (the assert), not the function's ``def``."""
    def update_then_check(x):
        FIXED_V.assign(x)
        assert FIXED_V.read_value() > 0.0
        return FIXED_V * 2.0

    jf = janus.function(update_then_check)
    for i in range(5):
        jf(tf.constant(float(i + 1)))
    line = update_then_check.__code__.co_firstlineno + 2
    events = [e for e in jf.__janus_function__.events
              if e.reason is Reason.CHECK_AFTER_STATE_CHANGE]
    assert events and all(e.where.endswith(':%d' % line) for e in events), janus.explain(jf)
