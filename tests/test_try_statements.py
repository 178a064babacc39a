"""``try`` statements traced into the graph (``control/exceptions.py``).

Differential tests on fresh objects (``conftest.differential``): returns,
exceptions, stdout and state after every call, with calls that take the
handler at trace time, calls whose graph op fails at run time (the handler
runs in the imperative re-run), and exceptions janus must never hand to a
handler (a graph-construction error, its own refusals).

PYTEST_DONT_REWRITE: a user ``assert`` inside a converted function must stay one.
"""
import tensorflow as tf

import janus
from tests.conftest import differential, outcome


def _graph_runs(jf):
    return janus.stats(jf)['graph_calls']


class Stepper:
    """A training helper as users write one: counters on ``self``."""

    def __init__(self):
        self.w = tf.Variable([[1.0], [2.0]])
        self.depth = 0
        self.skipped = 0
        self.steps = 0


def test_a_raise_caught_in_the_call_runs_its_handler_in_the_graph(strict):
    """A batch-size check that raises and is caught: the path each batch size takes
    is traced, counters written back, one graph per shape."""
    def make():
        s = Stepper()

        def step(x):
            s.depth += 1
            try:
                if x.shape[0] < 2:
                    raise ValueError('batch of %d is too small' % x.shape[0])
                y = tf.reduce_sum(tf.matmul(x, s.w))
                s.steps += 1
            except ValueError:
                y = tf.constant(0.0)
                s.skipped += 1
            finally:
                s.depth -= 1
            return y
        return step, s

    sizes = [4, 4, 1, 4, 1, 3, 1, 4, 3, 1]
    calls = [lambda n=n: ((tf.ones([n, 2]) * n,), {}) for n in sizes]
    jf = differential(make, calls, state=lambda s: (s.depth, s.skipped, s.steps))
    assert _graph_runs(jf) >= 5


def test_try_finally_with_a_return_in_the_body_runs_as_one_graph(strict):
    def make():
        s = Stepper()

        def forward(x):
            s.depth += 1
            try:
                h = tf.matmul(x, s.w)
                return tf.nn.relu(h) * 2.0
            finally:
                s.depth -= 1
                s.steps += 1
        return forward, s

    calls = [lambda i=i: ((tf.fill([3, 2], float(i - 4)),), {}) for i in range(8)]
    jf = differential(make, calls, state=lambda s: (s.depth, s.steps))
    assert _graph_runs(jf) == 5


def test_an_op_failing_at_run_time_runs_the_handler_as_eagerly():
    """``tf.gather`` past the end raises InvalidArgumentError eagerly, caught; the graph
    run fails instead, after a variable update it undoes, and the call re-runs."""
    def make():
        table = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        seen = tf.Variable(0.0)
        log = []

        def lookup(i):
            seen.assign_add(1.0)
            try:
                row = tf.gather(table, i)
                log.append('hit')
            except tf.errors.InvalidArgumentError:
                row = tf.zeros([2])
                log.append('miss')
            return row * seen
        return lookup, (seen, log)

    picks = [0, 1, 2, 1, 7, 0, 2, 9, 1, 1]
    calls = [lambda i=i: ((tf.constant(i),), {}) for i in picks]
    jf = differential(make, calls, state=lambda s: (s[0].numpy(), list(s[1])))
    assert _graph_runs(jf) >= 4


def test_a_graph_construction_error_is_not_handed_to_a_handler():
    """Traced, ``tf.reshape`` of 4 values to [3] fails with ValueError; eagerly it is an
    InvalidArgumentError, which ``except ValueError`` does not catch."""
    def make():
        s = Stepper()

        def flatten(x):
            try:
                y = tf.reshape(x, [3])
            except ValueError:
                s.skipped += 1
                y = tf.zeros([3])
            return y
        return flatten, s

    calls = [lambda n=n: ((tf.ones([n]),), {}) for n in [3, 3, 4, 3, 4, 3, 3]]
    differential(make, calls, state=lambda s: s.skipped)
    # Every call of shape [4]: the trace itself meets the ValueError, and refuses it.
    jf = differential(make, [lambda: ((tf.ones([4]),), {})] * 5, state=lambda s: s.skipped)
    assert 'catches ValueError raised by' in janus.explain(jf)


def test_janus_refusals_pass_a_handler_that_catches_everything():
    """``.numpy()`` is a graph break for janus, never an exception the user's bare
    ``except`` may see: eagerly it works."""
    def make():
        s = Stepper()

        def report(x):
            loss = tf.reduce_mean(x * x)
            try:
                value = float(loss.numpy())
            except:  # noqa: E722 - what users write
                value = -1.0
                s.skipped += 1
            return value
        return report, s

    calls = [lambda i=i: ((tf.fill([4], float(i)),), {}) for i in range(7)]
    jf = differential(make, calls, state=lambda s: s.skipped)
    report = janus.explain(jf)   # the break is at the .numpy() line, for janus's own reason
    assert 'tensor.numpy' in report and 'cannot tell that eager raises' not in report


def test_a_raise_under_a_tensor_condition_is_assumed_not_taken():
    """``if loss > limit: raise``: a tensor test; the raising side is assumed not taken
    and checked in the graph; when it is taken the call re-runs and the handler runs."""
    def make():
        s = Stepper()

        def guarded(x):
            loss = tf.reduce_sum(x)
            try:
                if loss > 10.0:
                    raise FloatingPointError('loss diverged')
                s.steps += 1
                out = loss * 2.0
            except FloatingPointError as e:
                print('skipping:', e)
                s.skipped += 1
                out = tf.constant(0.0)
            return out
        return guarded, s

    values = [1.0, 2.0, 1.5, 9.0, 0.5, 3.0, 1.0, 0.2, 8.0, 1.0]
    calls = [lambda v=v: ((tf.fill([2], v),), {}) for v in values]
    jf = differential(make, calls, state=lambda s: (s.steps, s.skipped))
    assert _graph_runs(jf) >= 4


def test_the_caught_exception_printed_and_its_message_used(strict):
    def make():
        s = Stepper()
        messages = []

        def step(x, mode):
            try:
                if mode not in ('train', 'eval'):
                    raise KeyError(mode)
                y = x * 2.0 if mode == 'train' else x
            except KeyError as e:
                print('unknown mode', e)
                messages.append('bad mode %s' % e)
                y = x
            return y
        return step, messages

    modes = ['train', 'train', 'eval', 'test', 'train', 'test', 'eval']
    calls = [lambda m=m: ((tf.constant(3.0), m), {}) for m in modes]
    jf = differential(make, calls, state=lambda m: list(m))
    assert _graph_runs(jf) >= 3


def test_an_exception_kept_after_the_call_is_a_new_object_every_call():
    """``self.last_error = e`` keeps eager's object; janus cannot make a new one per
    run from a graph, so that statement runs in Python: a new object every call."""
    def make():
        class Keeper:
            last_error = None
        k = Keeper()
        kept = []

        def step(x, n):
            try:
                if n > 2:
                    raise ValueError('n=%d' % n)
                y = x + 1.0
            except ValueError as e:
                k.last_error = e
                kept.append(e)
                y = x
            return y
        return step, (k, kept)

    calls = [lambda n=n: ((tf.constant(1.0), n), {}) for n in [1, 3, 1, 3, 3, 1, 3]]
    differential(make, calls, state=lambda s: ([str(e) for e in s[1]],
                                               len({id(e) for e in s[1]})))


def test_continue_in_a_handler_inside_a_loop():
    def make():
        s = Stepper()

        def total(x, sizes):
            acc = tf.constant(0.0)
            for n in sizes:
                try:
                    if n == 0:
                        raise ZeroDivisionError('empty part')
                    acc += tf.reduce_sum(x[:n]) / n
                except ZeroDivisionError:
                    s.skipped += 1
                    continue
                s.steps += 1
            return acc
        return total, s

    calls = [lambda: ((tf.range(6.0), [2, 0, 3]), {}), lambda: ((tf.range(6.0), [2, 0, 3]), {}),
             lambda: ((tf.range(6.0), [1, 2, 0]), {}), lambda: ((tf.range(6.0), [2, 0, 3]), {}),
             lambda: ((tf.range(6.0), [2, 0, 3]), {}), lambda: ((tf.range(6.0), [0, 0, 4]), {})]
    differential(make, calls, state=lambda s: (s.steps, s.skipped))


def test_stop_iteration_of_an_iterator_passed_in_ends_the_epoch():
    """Keras's ``train_step(iterator)`` with ``except StopIteration``: the graph checks
    that an element was there; at the end of the data the call re-runs imperatively
    and the handler runs, the iterator left where eager leaves it."""
    data = tf.data.Dataset.from_tensor_slices(tf.reshape(tf.range(8.0), [4, 2]))

    def make():
        s = Stepper()

        def step(it):
            try:
                x = next(it)
            except StopIteration:
                s.skipped += 1
                return None
            s.steps += 1
            return tf.reduce_sum(x) * s.w[0, 0]
        return step, s

    eager_step, eager_s = make()
    plain_step, janus_s = make()
    janus_step = janus.function(plain_step)
    for epoch in range(3):
        eager_it, janus_it = iter(data), iter(data)
        for _ in range(5):
            expected, actual = eager_step(eager_it), janus_step(janus_it)
            assert (expected is None) == (actual is None)
            if expected is not None:
                assert float(expected) == float(actual)
            assert (eager_s.steps, eager_s.skipped) == (janus_s.steps, janus_s.skipped)
    assert _graph_runs(janus_step) >= 6


def test_a_finally_that_returns_ends_only_exceptions_janus_vouches_for():
    """A ``return`` in ``finally`` ends the exception in flight.  Your ``raise``: traced,
    one graph per path.  janus's own refusal (``.numpy()``): it goes on, a graph break
    at its line.  A graph-construction error (eagerly another error, also ended, but
    after the rest of the body ran): the try runs in Python."""
    def make():
        s = Stepper()

        def swallow(x, report=False):
            try:
                if x.shape[0] > 2:
                    raise ValueError('too long')
                if report:
                    print('sum', x.numpy().sum())
                y = tf.reshape(x, [2])
                s.skipped += 1
            finally:
                s.steps += 1
                return tf.reduce_sum(x)   # noqa: B012 - ends the exception, as written
        return swallow, s

    calls = [lambda n=n: ((tf.ones([n]),), {}) for n in [2, 3, 2, 3, 2, 2]]
    jf = differential(make, calls, state=lambda s: (s.steps, s.skipped))
    assert _graph_runs(jf) >= 2
    calls = [lambda: ((tf.ones([2]),), {'report': True})] * 5
    jf = differential(make, calls, state=lambda s: (s.steps, s.skipped))
    assert 'tensor.numpy' in janus.explain(jf)
    calls = [lambda: ((tf.ones([1]),), {})] * 5   # tf.reshape of 1 value to [2]
    jf = differential(make, calls, state=lambda s: (s.steps, s.skipped))
    assert 'the finally of line' in janus.explain(jf)


def test_a_failing_op_after_an_iterator_pull_breaks_at_the_try():
    """``next(it)`` cannot be undone: were the gather's error the graph's own, the
    handler would never run.  janus runs that try in Python (a graph break), the
    handler runs as eagerly, and the iterator moves once per call."""
    table = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    data = tf.data.Dataset.from_tensor_slices(tf.constant([0, 2, 7, 1, 9, 2, 0, 1, 5, 2, 1, 0]))

    def make():
        s = Stepper()

        def step(it):
            i = next(it)
            try:
                row = tf.gather(table, i)
            except tf.errors.InvalidArgumentError:
                s.skipped += 1
                row = tf.zeros([2])
            s.steps += 1
            return row
        return step, s

    eager_step, eager_s = make()
    plain_step, janus_s = make()
    janus_step = janus.function(plain_step)
    eager_it, janus_it = iter(data), iter(data)
    for _ in range(12):
        expected, actual = eager_step(eager_it), janus_step(janus_it)
        assert expected.numpy().tolist() == actual.numpy().tolist()
        assert (eager_s.steps, eager_s.skipped) == (janus_s.steps, janus_s.skipped)
    assert 'cannot undo' in janus.explain(janus_step)


class Cache:
    """A memo and a settings dict kept on an object, as users keep them."""

    def __init__(self):
        self.memo = {}
        self.settings = {'scale': '2.5'}
        self.misses = 0


def test_python_errors_of_guarded_values_run_their_handlers_in_the_graph(strict):
    """``self.memo[key]``'s KeyError (the key guarded absent), ``float(s)``'s ValueError
    on a setting, ``next()``'s StopIteration of your generator: eager's own, so the
    handlers are traced; changing the memo or the setting takes the other path."""
    def pairs(n):
        for i in range(n):
            yield i, float(i) / 2.0

    def make():
        c = Cache()

        def step(x, key):
            try:
                scale = float(c.settings['scale'])
            except (KeyError, ValueError):
                scale = 1.0
            try:
                base = c.memo[key]
            except KeyError:
                c.misses += 1
                base = 10.0
                c.memo[key] = base
            g = pairs(2)
            total = x * scale + base
            try:
                while True:
                    i, w = next(g)
                    total = total + w * i
            except StopIteration:
                pass
            return total
        return step, c

    def change(c, i):
        if i == 6:
            c.settings['scale'] = 'auto'
        if i == 8:
            del c.settings['scale']

    calls = []
    for i, key in enumerate(['a', 'a', 'b', 'a', 'b', 'c', 'a', 'c', 'a', 'b']):
        calls.append(lambda i=i, key=key: ((tf.constant(float(i)), key), {}))
    eager_fn, eager_c = make()
    plain_fn, janus_c = make()
    janus_fn = janus.function(plain_fn)
    for i, call in enumerate(calls):
        change(eager_c, i)
        change(janus_c, i)
        args, kwargs = call()
        expected, actual = eager_fn(*args), janus_fn(*args)
        assert float(expected) == float(actual), i
        assert (eager_c.misses, sorted(eager_c.memo)) == (janus_c.misses, sorted(janus_c.memo))
    assert _graph_runs(janus_fn) >= 4


def test_a_list_indexed_by_a_graph_tensor_is_no_exception_for_a_handler():
    """Traced, ``[1.0, 2.0, 4.0][i]`` of a graph tensor raises TypeError (it has no
    ``__index__``); eagerly the index works: the handler must not run."""
    def make():
        s = Stepper()

        def pick(i):
            try:
                w = [1.0, 2.0, 4.0][i]
            except TypeError:
                s.skipped += 1
                w = 0.0
            return tf.constant(w) * 2.0
        return pick, s

    calls = [lambda i=i: ((tf.constant(i % 3),), {}) for i in range(6)]
    differential(make, calls, state=lambda s: s.skipped)


class BatchTooSmall(Exception):
    """An exception class of the user's, as projects define them."""


def test_your_exception_class_and_the_caught_exception_read(strict):
    """``raise BatchTooSmall(n)`` (your class, no ``__init__`` of its own: made as
    Python makes it), then ``e.args`` and ``str(e)`` in the handler; and
    ``int(s)``'s ValueError read the same way (it came from Python, in the call)."""
    def make():
        log = []

        def step(x, size_text):
            try:
                n = int(size_text)
            except ValueError as e:
                log.append(('bad size', e.args))
                n = x.shape[0]
            try:
                if n < 2:
                    raise BatchTooSmall(n)
                y = tf.reduce_mean(x[:n])
            except BatchTooSmall as e:
                log.append(('too small', e.args[0], str(e)))
                y = tf.constant(0.0)
            return y
        return step, log

    sizes = ['3', '3', 'x', '1', '3', 'all', '1', '2']
    calls = [lambda s=s: ((tf.range(4.0), s), {}) for s in sizes]
    jf = differential(make, calls, state=list)
    assert _graph_runs(jf) >= 3


# -- found by the bug hunt (each failed before its fix) ----------------------------

def test_a_finally_raising_over_janus_signal_does_not_hand_it_to_a_handler():
    """``.numpy()`` stops the trace; the inner ``finally`` then raises the user's
    RuntimeError (its ``__context__`` is janus's signal): the outer handler must not
    run in the graph (it did: every graph call returned zeros and printed)."""
    def make():
        def report(x):
            done = False
            try:
                try:
                    value = float(x.numpy().sum())
                    done = True
                finally:
                    if not done:
                        raise RuntimeError('report failed')
            except RuntimeError:
                print('failed')
                value = 0.0
            return value
        return report, None

    differential(make, [lambda i=i: ((tf.fill([2], float(i)),), {}) for i in range(6)])


class Defaults(dict):
    """A dict subclass whose missing keys have a default (``__missing__``)."""

    def __missing__(self, key):
        return 1.0


def test_a_missing_key_of_a_dict_with_missing_is_its_default_not_a_key_error():
    def make():
        table = Defaults(a=2.0)
        misses = []

        def scale(x, key):
            try:
                factor = table[key]
            except KeyError:
                misses.append(key)
                factor = -2.0
            return x * factor
        return scale, misses

    calls = [lambda k=k: ((tf.constant(3.0), k), {}) for k in 'aabbab']
    differential(make, calls, state=list)


class Retrying:
    """Which exceptions a step retries on, and which inputs it accepts, set by the user."""

    def __init__(self):
        self.retry_on = (ValueError,)
        self.kinds = (int, float)


def test_a_tuple_of_classes_from_outside_is_guarded_in_except_and_isinstance():
    """``except self.retry_on`` and ``isinstance(v, self.kinds)`` read the tuple's
    classes in C: after the user changes the tuple, eager catches (or accepts) other
    classes; the graph had kept the old ones (guarded by the tuple's type only)."""
    def make():
        r = Retrying()

        def step(x, v):
            try:
                if not isinstance(v, r.kinds):
                    raise ValueError('bad value %r' % (v,))
                y = x * v
            except r.retry_on:
                y = -x
            return y
        return step, r

    eager_fn, eager_r = make()
    plain_fn, janus_r = make()
    janus_fn = janus.function(plain_fn)
    for i in range(12):
        if i == 5:   # 2.5 is no longer accepted: ValueError, still retried
            eager_r.kinds = janus_r.kinds = (int,)
        if i == 8:   # ValueError is no longer retried: it reaches the caller
            eager_r.retry_on = janus_r.retry_on = (KeyError,)
        args = (tf.constant(2.0), 2.5 if i % 2 else 3)
        expected, actual = outcome(eager_fn, *args), outcome(janus_fn, *args)
        assert expected[0] == actual[0], (i, expected, actual)
        if expected[0] == 'ok':
            assert float(expected[1]) == float(actual[1]), i
        else:
            assert expected[1:] == actual[1:], i


def test_a_handler_reading_the_traceback_runs_imperatively():
    """``traceback.format_exc()`` shows the frames that ran: a graph's (or a graph
    break's) are not eager's, so such a call runs as plain Python."""
    import traceback

    def make():
        log = []

        def step(x, k):
            try:
                if k:
                    raise ValueError('bad batch')
                y = x
            except ValueError as e:
                log.append(traceback.format_exc())
                log.append(e.__traceback__ is not None)
                y = -x
            return y
        return step, log

    calls = [lambda k=k: ((tf.constant(1.0), k), {}) for k in [1, 0, 1, 1, 0, 1, 1, 0]]
    jf = differential(make, calls, state=list)
    assert 'frames that ran' in janus.explain(jf)


def test_a_keras_value_error_under_a_handler_in_a_graph_that_cannot_undo():
    """Eagerly a wrong input width raises Keras's ValueError (caught); in a graph with
    relaxed widths the MatMul fails at run time, after a ``tf.print`` no rollback
    undoes: that try must run in Python, so the handler runs as eagerly."""
    import keras

    class Model:
        def __init__(self):
            self.bad = 0
            self.dense = keras.layers.Dense(2, kernel_initializer='ones')
            self.dense.build((None, 3))
            self.steps = tf.Variable(0.0)

        def step(self, x):
            tf.print('step')
            self.steps.assign_add(1.0)
            try:
                y = self.dense(x / self.steps)
            except ValueError:
                self.bad += 1
                y = tf.zeros([1, 2])
            return y

    def make():
        m = Model()
        return m.step, m

    calls = [lambda d=d: ((tf.ones([1, d]),), {}) for d in [3, 4, 3, 4, 5, 3, 4, 6, 3]]
    differential(make, calls, state=lambda m: (m.bad, float(m.steps.numpy())))
