"""Writes to Python state under tensor-dependent control flow (issue 11, parts 2-3).

A write made inside a ``tf.cond`` branch reaches Python only on the path the
run took, in program order with every other write and print; a location
written inside a ``tf.while_loop`` is carried and its final value written
back; a decision on a value a state change made earlier in the same call
(``self.step.assign_add(1); if self.step % 10 == 0``) is real control flow.
Every test runs the program eagerly and under janus on fresh objects and
compares returns, state and stdout per call (``conftest.differential``).
"""
import contextlib
import io

import numpy as np
import pytest
import tensorflow as tf

import janus
from conftest import assert_same, differential, outcome


def v(*values):
    return tf.constant(list(values), tf.float32)


def _ops(jf):
    return [op.type for op in jf.cache.newest().concrete.graph.get_operations()]


class Tracker:
    def __init__(self):
        self.best = float('inf')
        self.wait = 0
        self.stopped = False
        self.history = []


LOSSES = [5.0, 3.0, 4.0, 4.5, 2.0, 2.5, 2.6, 2.7, 1.0, 3.0] * 4


def test_best_loss_and_early_stopping_counter(strict):
    def make():
        tracker = Tracker()

        def step(self, x):
            loss = tf.reduce_sum(x * x)
            if loss < self.best:
                self.best = loss
                self.wait = 0
            else:
                self.wait += 1
            if self.wait >= 3:          # reads the merged counter
                self.stopped = True
            return loss
        return (lambda x: step(tracker, x)), tracker

    calls = [((v(np.sqrt(loss)),), {}) for loss in LOSSES]
    jf = differential(make, calls, state=lambda t: (t.best, t.wait, t.stopped))
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['imperative_calls'] <= 5, janus.explain(jf)
    assert stats['graph_calls'] >= 30
    assert 'If' in _ops(jf) or 'StatelessIf' in _ops(jf)


class Trainer:
    def __init__(self):
        self.step = tf.Variable(0, dtype=tf.int64)
        self.w = tf.Variable([1.0, -1.0])
        self.log = []


def test_every_n_steps_append_and_print_with_a_variable_counter(strict):
    def make():
        trainer = Trainer()

        def train_step(self, x):
            self.step.assign_add(1)
            loss = tf.reduce_sum(self.w * x)
            self.w.assign_sub(0.1 * x)
            if self.step % 4 == 0:      # on the value the assign_add made: a tf.cond
                self.log.append(loss)
                print('step', self.step, 'loss', loss)
            return loss
        return (lambda x: train_step(trainer, x)), trainer

    calls = [((v(float(i), 1.0),), {}) for i in range(33)]
    jf = differential(make, calls, state=lambda t: (t.step, t.w, t.log))
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1 and stats['fallbacks'] == 0, janus.explain(jf)
    assert stats['graph_calls'] == 30
    assert 'depends on a state change' not in janus.explain(jf)


def test_a_decision_on_a_changed_variable_is_never_assumed(strict):
    """Profiled calls always take one side; the test reads the variable after the
    update, so it cannot be asserted before it: a tf.cond, no fallback ever."""
    def make():
        counter = tf.Variable(0.0)
        seen = []

        def f(x):
            counter.assign_add(x)
            if counter > 10.0:
                seen.append(counter.read_value())
                counter.assign(0.0)
            return counter * 1.0
        return f, (counter, seen)

    calls = [((tf.constant(float(i % 5)),), {}) for i in range(30)]
    jf = differential(make, calls, state=lambda s: s)
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 0 and stats['graphs_built'] == 1, janus.explain(jf)


BEST = float('inf')


def _run_with_global(fn, box, *args):
    """Calls ``fn`` with the module global BEST set to this side's value."""
    global BEST
    BEST = box[0]
    try:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            result = outcome(fn, *args)
        return result, printed.getvalue()
    finally:
        box[0] = BEST
        BEST = float('inf')


def test_a_global_and_a_nonlocal_written_in_a_branch(strict):
    def make():
        improvements = 0

        def f(x):
            nonlocal improvements
            global BEST
            loss = tf.reduce_mean(x)
            if loss < BEST:
                BEST = loss
                improvements += 1
                print('new best', loss)
            return loss - BEST
        return f, (lambda: improvements)

    eager_fn, eager_count = make()
    plain, janus_count = make()
    jf = janus.function(plain)
    eager_box, janus_box = [float('inf')], [float('inf')]
    for number, loss in enumerate(LOSSES):
        expected, e_out = _run_with_global(eager_fn, eager_box, v(loss, loss))
        actual, a_out = _run_with_global(jf, janus_box, v(loss, loss))
        assert expected[0] == actual[0] == 'ok', (number, expected, actual)
        assert_same(expected[1], actual[1], 'call %d' % number)
        assert e_out == a_out, (number, e_out, a_out)
        assert_same(eager_box[0], janus_box[0], 'call %d BEST' % number)
        assert eager_count() == janus_count(), number
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 30, janus.explain(jf)


def test_prints_in_both_branches_keep_program_order(strict):
    def make():
        calls = [0]

        def f(x):
            print('start', x)
            total = tf.reduce_sum(x)
            if total > 1.0:
                print('big', total)
                calls.append(total)
                print('still big')
            else:
                print('small', f'{total:.2f}')
            print('end', total * 2.0)
            return total
        return f, calls

    values = [3.0, 0.5, 2.0, -1.0, 0.0, 4.0, 1.5, 0.2] * 4
    jf = differential(make, [((v(x, 0.5),), {}) for x in values], state=lambda c: c)
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 2 and stats['graph_calls'] >= 28, janus.explain(jf)


def test_an_item_and_nested_branches(strict):
    def make():
        stats = {'best': tf.constant(0.0), 'count': 0}

        def f(x):
            score = tf.reduce_max(x)
            if score > stats['best']:
                stats['best'] = score
                if score > 5.0:
                    stats['count'] = stats['count'] + 1
                    print('high', score)
            return stats['best'] + 0.0
        return f, stats

    values = [1.0, 2.0, 0.5, 6.0, 3.0, 7.0, 9.0, 8.0, 10.0, 1.0] * 3
    jf = differential(make, [((v(x, 0.0),), {}) for x in values], state=lambda s: dict(s))
    assert janus.stats(jf)['graphs_built'] <= 3, janus.explain(jf)


def test_a_branch_taken_only_after_the_profiled_calls(strict):
    """The profile never took the branch: assumed not taken, the assumption breaks
    mid-way (that run changed nothing and re-ran imperatively), then a tf.cond."""
    def make():
        tracker = Tracker()

        def f(x):
            loss = tf.reduce_sum(x)
            if loss > 100.0:
                tracker.history.append(loss)
                tracker.stopped = True
                print('diverged', loss)
            tracker.best = loss
            return loss
        return f, tracker

    values = [1.0, 2.0, 3.0, 4.0, 5.0, 200.0, 6.0, 300.0] + [7.0, 400.0, 8.0] * 8
    jf = differential(make, [((v(x),), {}) for x in values],
                      state=lambda t: (t.history, t.stopped, t.best))
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 1 and stats['graphs_built'] == 2, janus.explain(jf)
    assert stats['graph_calls'] >= 28


class Accumulator:
    def __init__(self):
        self.total = tf.constant(0.0)
        self.steps = 0


def test_writes_in_a_dynamic_while_loop(strict):
    def make():
        acc = Accumulator()

        def f(x):
            while tf.reduce_sum(x) > 1.0:
                x = x / 2.0
                acc.total = acc.total + tf.reduce_sum(x)
                acc.steps = acc.steps + 1
            return x
        return f, acc

    values = [5.0, 3.0, 40.0, 1.0, 0.5, 100.0, 7.0] * 5
    jf = differential(make, [((v(x),), {}) for x in values],
                      state=lambda a: (a.total, a.steps))
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 30, janus.explain(jf)
    assert 'While' in _ops(jf) or 'StatelessWhile' in _ops(jf)


def test_a_location_written_under_two_conditions_in_one_loop_body():
    # The body's first conditional write to best['epoch'] must not be hidden by a
    # second one under another condition (fuzzer seed s22d, program 1785): the
    # written-back flag is the OR of them.
    class Log:
        def __init__(self, best):
            self.best = best

    def make():
        def f(log, epochs):
            seen = 0
            epoch = 0
            while epoch < epochs:
                epoch += 1
                for _ in range(3):
                    seen += 1
                    if not log.best.get('epoch'):
                        log.best['epoch'] = seen
            return seen
        return f, None

    def call(best, epochs):
        return lambda: ((Log(dict(best)), epochs), {})
    calls = [call({'loss': 1}, 3)] * 4 + [call({'loss': 1, 'epoch': 0}, 2),
                                          call({'loss': 1, 'epoch': 0}, 4),
                                          call({'loss': 1, 'epoch': 5}, 1)]
    results = []

    def record(make_call):
        def wrapped():
            args, kwargs = make_call()
            results.append(args[0])
            return args, kwargs
        return wrapped
    jf = differential(make, [record(c) for c in calls])
    eager, janus_side = results[0::2], results[1::2]
    assert [log.best for log in eager] == [log.best for log in janus_side]
    assert janus.stats(jf)['graph_calls'] > 0


def test_writes_in_a_loop_over_a_tensor_of_unknown_length(strict):
    def make():
        acc = Accumulator()
        acc.best = tf.constant(100.0)

        def f(xs):
            for x in xs:
                acc.total = acc.total + x
                if x < acc.best:        # a branch inside the loop: carried all the same
                    acc.best = x
            return acc.total
        return f, acc

    lengths = [3, 5, 0, 7, 2, 9, 1] * 5
    calls = [((tf.constant(np.random.RandomState(i).rand(n).astype(np.float32) * 10),), {})
             for i, n in enumerate(lengths)]
    jf = differential(make, calls, state=lambda a: (a.total, a.best))
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 30, janus.explain(jf)


def test_appending_inside_a_dynamic_loop_is_refused():
    def make():
        out = []

        def f(xs):
            for x in xs:
                out.append(x)
            return xs
        return f, out

    calls = [((tf.range(n),), {}) for n in [2, 3, 4, 5, 6]]
    with janus.config.patch(max_unroll=0):   # every loop over a tensor is a tf.while_loop
        jf = differential(make, calls, state=lambda o: o)
    assert janus.stats(jf)['graph_calls'] == 0
    assert 'inside a tensor-dependent loop' in janus.explain(jf)


def test_sides_that_cannot_merge_are_refused_only_when_read_again():
    def program(read_after):
        def make():
            tracker = Tracker()

            def f(x):
                if tf.reduce_sum(x) > 0.0:
                    tracker.best = tf.reduce_sum(x)      # a tensor on one side
                else:
                    tracker.best = 'none yet'            # a string on the other
                if read_after:
                    return tracker.best
                return x
            return f, tracker
        return make

    values = [1.0, -1.0, 2.0, -3.0, 4.0, -5.0, 6.0]
    calls = [((v(x),), {}) for x in values]
    with janus.config.patch(strict=True):   # never read again: converts
        jf = differential(program(False), calls, state=lambda t: t.best)
    assert janus.stats(jf)['graph_calls'] == 4
    jf = differential(program(True), calls, state=lambda t: t.best)
    assert janus.stats(jf)['graph_calls'] == 0
    explained = janus.explain(jf)
    assert 'after the tensor-dependent if' in explained and 'tracker' in explained, explained


def test_a_list_appended_to_in_a_branch_is_not_read_again():
    def program(read_after):
        def make():
            log = []

            def f(x):
                if tf.reduce_sum(x) > 0.0:
                    log.append(x)
                log.append(x * 2.0)                      # more writes are fine
                return len(log) if read_after else x
            return f, log
        return make

    values = [1.0, -1.0, 2.0, -3.0, 4.0, -5.0, 6.0]
    calls = [((v(x),), {}) for x in values]
    with janus.config.patch(strict=True):
        jf = differential(program(False), calls, state=lambda log: log)
    assert janus.stats(jf)['graph_calls'] == 4
    jf = differential(program(True), calls, state=lambda log: log)
    assert janus.stats(jf)['graph_calls'] == 0
    assert 'changed in place' in janus.explain(jf)


def test_a_variable_updated_in_a_branch_waits_for_every_assertion(strict):
    def make():
        counter = tf.Variable(0.0)

        def f(x, y):
            if tf.reduce_sum(x) > 0.0:          # dynamic below: a tf.cond that assigns
                counter.assign_add(1.0)
            if tf.reduce_sum(y) > 0.0:          # always true when profiled: asserted
                return counter * 1.0
            return counter * 2.0
        return f, counter

    signs = [1.0, -1.0, 1.0, -1.0, 1.0, 1.0, -1.0, 1.0]
    calls = [((v(s), v(1.0)), {}) for s in signs]
    calls += [((v(1.0), v(-1.0)), {})]          # the assertion fails: no update twice
    calls += [((v(s), v(1.0)), {}) for s in signs]
    jf = differential(make, calls, state=lambda c: c)
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 1, janus.explain(jf)

    fn, _ = make()
    jf = janus.function(fn)
    for s in signs:
        jf(v(s), v(1.0))
    graph = jf.cache.newest().concrete.graph
    conds = [op for op in graph.get_operations() if op.type == 'If']
    asserts = [op for op in graph.get_operations() if op.type == 'Janus>Assert']
    assert conds and asserts
    assert all(a in cond.control_inputs for cond in conds for a in asserts)


def test_numbers_merged_after_a_branch_are_python_numbers(strict):
    def make():
        def f(x):
            scale = 2 if tf.reduce_sum(x) > 0.0 else 3      # an int on each side
            bonus = 0.5
            if tf.reduce_sum(x) > 1.0:
                bonus = 1.5
            return x * scale + bonus, scale, bonus
        return f, None

    values = [1.0, -1.0, 2.0, 0.5, -3.0, 4.0, 0.7] * 3
    jf = differential(make, [((v(x),), {}) for x in values])
    assert janus.stats(jf)['graphs_built'] == 1, janus.explain(jf)


@pytest.mark.parametrize('kind', ['attribute', 'cell'])
def test_counter_under_a_dynamic_branch_builds_few_graphs(strict, kind):
    """A Python counter incremented only on some calls, under a tensor test: at most
    three graphs over 40 calls (constant, relaxed, relaxed with a tf.cond)."""
    def make():
        tracker = Tracker()
        count = 0

        def f(x):
            nonlocal count
            if tf.reduce_sum(x) > 0.0:
                if kind == 'attribute':
                    tracker.wait = tracker.wait + 1
                else:
                    count += 1
            return x * 2.0
        return f, (lambda: (tracker.wait, count))

    values = [1.0, 1.0, -1.0, 2.0, -2.0, 3.0, 3.0, -4.0] * 5
    jf = differential(make, [((v(x),), {}) for x in values], state=lambda s: s())
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 34, janus.explain(jf)


def test_every_n_steps_on_a_python_counter(strict):
    """``self.count += 1; if self.count % 4 == 0: ...`` on a Python int: the counter
    becomes a dynamic int, its test a tf.cond once the assumed outcome breaks."""
    def make():
        tracker = Tracker()

        def f(x):
            tracker.wait += 1
            loss = tf.reduce_sum(x)
            if tracker.wait % 4 == 0:
                tracker.history.append(loss)
                print('every 4th', tracker.wait, loss)
            return loss
        return f, tracker

    values = [float(i % 3) * 0.5 for i in range(36)]
    jf = differential(make, [((v(x),), {}) for x in values],
                      state=lambda t: (t.wait, t.history))
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 30, janus.explain(jf)


def test_and_of_a_dynamic_bool_and_a_tensor_as_a_test(strict):
    """``count > 2 and loss > 0.5`` is a Python bool on one path and a bool tensor
    on the other: only its truth is known, which is all an ``if`` needs."""
    def make():
        tracker = Tracker()

        def f(x, count):
            loss = tf.reduce_sum(x)
            if count > 2 and loss > 0.5:
                tracker.stopped = True
                tracker.history.append(loss)
            return loss
        return f, tracker

    counts = [3, 0, 4, 1, 5, 2] * 5
    calls = [((v(float(i % 3) * 0.5), count), {}) for i, count in enumerate(counts)]
    jf = differential(make, calls, state=lambda t: (t.stopped, t.history))
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 25, janus.explain(jf)


def test_a_dynamic_while_loop_counting_in_python_numbers(strict):
    def make():
        acc = Accumulator()

        def f(x):
            steps = 0
            while tf.reduce_max(x) > 1.0:
                x = x * 0.5
                steps += 1
                if tf.reduce_min(x) < 0.5:
                    acc.steps = acc.steps + 1
            return x, steps
        return f, acc

    values = [5.0, 3.0, 40.0, 1.0, 0.5, 100.0, 7.0] * 5
    jf = differential(make, [((v(x, x / 4.0),), {}) for x in values], state=lambda a: a.steps)
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 30, janus.explain(jf)


def test_a_python_counter_in_a_branch_on_a_changed_variable(strict):
    """The branch's own check (``logged + 1`` stays an int64) cannot run after the
    ``assign_add`` its test depends on: it is checked before it, for both paths."""
    def make():
        trainer = Trainer()
        trainer.logged = 0

        def train_step(self, x):
            self.step.assign_add(1)
            loss = tf.reduce_sum(x * x)
            if self.step % 5 == 0:
                self.log.append(loss)
                self.logged += 1
            return loss
        return (lambda x: train_step(trainer, x)), trainer

    calls = [((v(float(i), 0.5),), {}) for i in range(40)]
    jf = differential(make, calls, state=lambda t: (t.step, t.log, t.logged))
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 35, janus.explain(jf)
    assert 'depends on a state change' not in janus.explain(jf)


def test_a_branch_that_updates_a_variable_and_counts_in_python(strict):
    """``if loss < best: v.assign(loss) else: self.wait += 1``: the cond both updates a
    variable and checks the counter's range; the check also runs before it."""
    def make():
        tracker = Tracker()
        tracker.best = tf.Variable(100.0)

        def f(x):
            loss = tf.reduce_sum(x * x)
            if loss < tracker.best:
                tracker.best.assign(loss)
                tracker.wait = 0
            else:
                tracker.wait += 1
            return loss
        return f, tracker

    jf = differential(make, [((v(np.sqrt(loss)),), {}) for loss in LOSSES],
                      state=lambda t: (t.best, t.wait))
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 30, janus.explain(jf)


def test_conditional_tensor_writes_on_the_heap_ops_path(strict):
    """With ``config.heap_ops`` a tensor written in a branch is a shadow write with
    its path's condition too (Janus>PySet ops commit unconditionally)."""
    def make():
        tracker = Tracker()
        tracker.best = tf.constant(100.0)

        def f(x):
            loss = tf.reduce_sum(x * x)
            tracker.last = loss
            if loss < tracker.best:
                tracker.best = loss
            return loss
        return f, tracker

    with janus.config.patch(heap_ops=True):
        jf = differential(make, [((v(np.sqrt(loss)),), {}) for loss in LOSSES],
                          state=lambda t: (t.best, t.last))
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 30, janus.explain(jf)
