"""Nothing can fail after state changed: eager's exception with eager's state.

A graph's state changes (variable updates) happen while it runs; Python writes
and prints are replayed after it.  Anything that may fail must therefore fail
before the first change, or be undone:

* text formatted after the run (``f'{loss:.3f}'``) is tried at trace time on
  samples of what the run can give (the tensor's dtype and rank): a format
  that can raise is refused, and the call runs imperatively;
* a write Python rejects (``__slots__``, a namedtuple field, a frozen
  dataclass, a read-only property, ``extend(3)``, an index past the end) is
  refused at trace time, never replayed after the graph ran;
* a TF error in an op that runs after a variable update (a gather at a cursor
  the call just advanced): the graph's ``Rollback`` restores the variables it
  updated and the call is re-run imperatively, so the counter, the print and
  the cursor are eager's, and so is the exception;
* a trace-time exception from the user's own code re-runs the call.

Each test runs a program eagerly and under janus on fresh objects with an
assumption broken mid-way (a shape, a value) and compares returns,
exceptions, stdout and state after every call.

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import collections
import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

import janus
from conftest import differential
from janus.graphgen import rollback
from janus.replay import entry


def c(value, dtype=tf.float32):
    return tf.constant(value, dtype)


def scalars_then_vectors(n_scalar=5, n_vector=3):
    calls = [((c(float(i)),), {}) for i in range(n_scalar)]
    calls += [((c([float(i), 1.0]),), {}) for i in range(n_vector)]
    return calls + [((c(6.0),), {})]


# -- text formatted after the run --------------------------------------------------

class Logger:
    def __init__(self):
        self.steps = tf.Variable(0.0)
        self.lines = []

    def fstring(self, x):
        msg = f'loss {x:.3f}'
        self.steps.assign_add(1.0)
        self.lines.append(msg)
        return self.steps.read_value()

    def printed(self, x):
        loss = tf.reduce_mean(x * 2.0, axis=-1)
        self.steps.assign_add(1.0)
        print(f'step loss {loss:.2f}')
        return loss

    def format_builtin(self, x):
        text = format(x, '.1f')
        self.steps.assign_add(1.0)
        return text

    def format_int_spec(self, x):
        text = '{:d}'.format(x)
        self.steps.assign_add(1.0)
        return text

    def char_of(self, x):
        text = f'{x:c}'
        self.steps.assign_add(1.0)
        return text


def _logger_state(logger):
    return (float(logger.steps.numpy()), list(logger.lines))


@pytest.mark.parametrize('method', ['fstring', 'printed', 'format_builtin'])
def test_a_format_that_fails_for_a_vector_raises_before_the_update(method):
    """repro 34: eager raises TypeError at the format, before the variable update;
    janus must not update it and then fail formatting after the run."""
    def make():
        logger = Logger()
        return getattr(logger, method), logger
    calls = scalars_then_vectors()
    if method == 'printed':   # the mean makes a scalar of a vector: a matrix is a vector
        calls = [((c([float(i), 1.0]),), {}) for i in range(5)]
        calls += [((c([[1.0, 2.0], [3.0, 4.0]]),), {}) for _ in range(3)]
        calls += [((c([6.0, 1.0]),), {})]
    jf = differential(make, calls, state=_logger_state)
    assert janus.stats(jf)['graph_calls'] >= 3
    assert 'janus failed' not in janus.explain(jf)


def test_an_int_format_of_a_float_tensor_runs_imperatively():
    """``'{:d}'.format(t)`` raises ValueError for every float: never after the update."""
    def make():
        logger = Logger()
        return logger.format_int_spec, logger
    calls = [((c(float(i)),), {}) for i in range(6)]
    calls += [((c(i, tf.int32),), {}) for i in range(4)]
    differential(make, calls, state=_logger_state)


def test_a_char_format_of_an_int_tensor_depends_on_its_value():
    """``f'{t:c}'`` raises for a negative int: tried on extreme values, refused."""
    def make():
        logger = Logger()
        return logger.char_of, logger
    calls = [((c(65 + i, tf.int32),), {}) for i in range(5)] + [((c(-1, tf.int32),), {})]
    calls += [((c(66, tf.int32),), {})]
    jf = differential(make, calls, state=_logger_state)
    assert 'would raise' in janus.explain(jf)


def test_a_format_that_always_works_still_converts(strict):
    def make():
        logger = Logger()
        return logger.fstring, logger
    jf = differential(make, [((c(float(i)),), {}) for i in range(6)], state=_logger_state)
    assert janus.stats(jf)['graph_calls'] == 3


# -- writes Python rejects ----------------------------------------------------------

Pair = collections.namedtuple('Pair', 'a b')


class Slotted:
    __slots__ = ('w',)

    def __init__(self):
        self.w = 1.0


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: float = 1.0


class ReadOnly:
    def __init__(self):
        self._a = 1.0

    @property
    def a(self):
        return self._a


class Named(tf.Module):
    pass


class Model:
    def __init__(self):
        self.v = tf.Variable(0.0)
        self.slotted, self.pair, self.frozen = Slotted(), Pair(1.0, 2.0), Frozen()
        self.read_only, self.module = ReadOnly(), Named(name='m')
        self.items, self.table, self.buffer = [1.0], {'k': 1.0}, [0.0, 0.0, 0.0]
        self.count = 0

    def step(self, x, which):
        self.count += 1
        self.v.assign_add(x)
        if which == 'slot':
            self.slotted.cache = x          # not a slot: AttributeError
        elif which == 'namedtuple':
            self.pair.a = x                 # a namedtuple field: AttributeError
        elif which == 'frozen':
            self.frozen.a = x               # a frozen dataclass: FrozenInstanceError
        elif which == 'property':
            self.read_only.a = x            # no setter: AttributeError
        elif which == 'library_property':
            self.module.name = 'other'      # tf.Module.name has no setter
        elif which == 'extend':
            self.items.extend(3)            # TypeError
        elif which == 'update':
            self.table.update([1])          # TypeError
        elif which == 'index':
            self.buffer[2] = 1.0            # IndexError once the buffer shrank
        return self.v.read_value()


def _model_state(model):
    return (float(model.v.numpy()), model.count, list(model.items), dict(model.table),
            list(model.buffer), model.slotted.w, tuple(model.pair), model.frozen.a)


@pytest.mark.parametrize('which', ['slot', 'namedtuple', 'frozen', 'property',
                                   'library_property', 'extend', 'update'])
def test_a_write_python_rejects_after_an_update_raises_at_its_line(which):
    """repro 35: the write fails eagerly after the variable update, before the
    counter's write-back; janus must not update and then fail writing back."""
    def make():
        model = Model()
        return model.step, model
    calls = [((c(1.0), 'none'), {}) for _ in range(4)]
    calls += [((c(1.0), which), {}) for _ in range(3)] + [((c(1.0), 'none'), {})]
    jf = differential(make, calls, state=_model_state)
    assert 'janus failed' not in janus.explain(jf)


def test_an_item_write_past_the_end_of_a_shrunk_list_raises_at_its_line():
    def make():
        model = Model()
        return model.step, model
    eager_fn, eager_model = make()
    plain_fn, janus_model = make()
    jf = janus.function(plain_fn)
    for i in range(8):
        if i == 5:
            eager_model.buffer[:] = janus_model.buffer[:] = [0.0]
        results = []
        for fn in (eager_fn, jf):
            try:
                results.append(('ok', float(fn(c(1.0), 'index').numpy())))
            except Exception as e:  # noqa: BLE001 - the exception is the outcome
                results.append(('raised', type(e), str(e)))
        assert results[0] == results[1], 'call %d' % i
        assert _model_state(eager_model) == _model_state(janus_model), 'call %d' % i
    assert janus.stats(jf)['graph_calls'] >= 2


# -- TF errors after a state change -------------------------------------------------

class Reader:
    def __init__(self):
        self.reads = 0
        self.cursor = tf.Variable(0)
        self.buffer = tf.constant([10.0, 11.0, 12.0, 13.0, 14.0, 15.0])

    def read(self):
        self.reads += 1
        print('read number', self.reads)
        self.cursor.assign_add(1)
        return tf.gather(self.buffer, self.cursor)


def test_an_op_failing_after_an_update_sees_eagers_writes_prints_and_state():
    """repro 41: eager incremented the counter, printed and advanced the cursor
    before the gather raised; janus restores the cursor and re-runs the call."""
    def make():
        reader = Reader()
        return reader.read, reader
    jf = differential(make, [((), {})] * 9,
                      state=lambda r: (r.reads, int(r.cursor.numpy())))
    assert janus.stats(jf)['graph_calls'] >= 2
    report = janus.explain(jf)
    assert '1 variables kept for a rollback' in report
    assert 'after restoring the 1 variables it had updated' in report



class StreamReader:
    """A reader drawing from a dataset iterator every call: a change no rollback undoes."""

    def __init__(self):
        self.reads = 0
        self.cursor = tf.Variable(0)
        self.buffer = tf.constant([10.0, 11.0, 12.0, 13.0, 14.0, 15.0])
        self.stream = iter(tf.data.Dataset.range(1000).map(lambda i: tf.cast(i, tf.float32)))

    def read(self):
        offset = self.stream.get_next()
        self.reads += 1
        print('read number', self.reads)
        self.cursor.assign_add(1)
        return tf.gather(self.buffer, self.cursor) + offset


def test_an_op_failing_after_a_draw_no_rollback_undoes_runs_imperatively():
    """Fuzzer seed soak17, program 547: after an iterator draw a rollback cannot undo,
    the gather past the end raised the graph's error with the counter and the print
    before it lost; such a call shape now runs imperatively (eager's state, eager's
    exception), where no Python write precedes the fallible op it still converts."""
    def make():
        reader = StreamReader()
        return reader.read, reader
    jf = differential(make, [((), {})] * 9,
                      state=lambda r: (r.reads, int(r.cursor.numpy())))
    assert janus.stats(jf)['graph_calls'] == 0
    assert 'cannot undo' in janus.explain(jf)

def test_an_index_error_after_an_optimizer_step_keeps_eagers_weights():
    """A small Keras model's SGD step, then a lookup at the optimizer's step count
    (past the end of the table on the sixth step): the weights and the step count
    are eager's, and so is the exception."""
    def make():
        keras.utils.set_random_seed(3)
        dense = keras.layers.Dense(2, kernel_initializer='ones')
        opt = keras.optimizers.SGD(0.1, momentum=0.5)
        schedule = tf.constant([1.0, 0.5, 0.25, 0.125, 0.0625])
        history = []

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((dense(x) - y) ** 2)
            grads = tape.gradient(loss, dense.trainable_variables)
            opt.apply_gradients(zip(grads, dense.trainable_variables))
            history.append(loss)
            return loss * tf.gather(schedule, opt.iterations - 1)
        return step, (dense, opt, history)
    calls = [((c([[1.0, float(i)]]), c([[0.5, 0.5]])), {}) for i in range(8)]
    differential(make, calls, state=lambda s: (s[0].weights, s[1].iterations, list(s[2])))


def test_an_update_whose_relaxed_shape_fails_after_another_update():
    """The second update's value had its shape relaxed; at run time it does not fit
    the variable, after the first update ran: restored, and eager's error."""
    class Stats:
        def __init__(self):
            self.count = tf.Variable(0)
            self.total = tf.Variable(tf.zeros([3]))

        def add(self, x):
            self.count.assign_add(1)
            self.total.assign_add(x * 2.0)
            return self.count.read_value()

    def make():
        stats = Stats()
        return stats.add, stats
    sizes = [3, 3, 3, 3, 4, 3, 4, 5, 3]
    calls = [((tf.ones([n]),), {}) for n in sizes]
    differential(make, calls, state=lambda k: (k.count, k.total))


def test_an_error_in_the_forward_pass_after_a_learning_rate_update_changes_nothing():
    """A learning rate assigned first, then a forward pass that fails for a smaller
    batch (a row of the layer's output past the end): the forward pass reads no
    changed variable, so it runs before the assignment and nothing needs to be kept."""
    def make():
        dense = keras.layers.Dense(2, kernel_initializer='ones')
        opt = keras.optimizers.SGD(0.1)

        def step(x, lr):
            opt.learning_rate = lr
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.gather(dense(x), 2))   # the third row
            grads = tape.gradient(loss, dense.trainable_variables)
            opt.apply_gradients(zip(grads, dense.trainable_variables))
            return loss
        return step, (dense, opt)
    sizes = [3, 3, 3, 3, 3, 2, 3, 2, 3]
    calls = [((tf.ones([n, 3]), 0.1 * (i + 1)), {}) for i, n in enumerate(sizes)]
    jf = differential(make, calls,
                      state=lambda s: (s[0].weights, s[1].iterations, s[1].learning_rate))
    assert all(e.rollback is None for e in jf.cache.entries())


def test_an_optimizer_step_keeps_no_variables():
    """The rollback costs nothing where nothing after an update can fail: an
    optimizer step whose ops have fully known shapes keeps no variable."""
    dense = keras.layers.Dense(4)
    opt = keras.optimizers.SGD(0.1, momentum=0.9)

    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(dense(x) ** 2)
        grads = tape.gradient(loss, dense.trainable_variables)
        opt.apply_gradients(zip(grads, dense.trainable_variables))
        return loss
    jf = janus.function(step)
    for _ in range(5):
        jf(tf.ones([8, 3]))
    entries = jf.cache.entries()
    assert len(entries) == 1 and entries[0].has_mutations
    assert entries[0].rollback is None


def test_a_shape_error_after_an_update_keeps_the_dict_write():
    """repro 31: a shape change lets a matmul through a relaxed graph that then
    fails after ``v.assign``; eager made the dict write before it raised."""
    def make():
        stats = {'pos': 0, 'neg': 0}
        v = tf.Variable(tf.zeros([3]))
        w = tf.Variable(np.ones((3, 6), 'float32'))

        def step(x):
            d = stats
            d['neg'] = d['neg'] + 3
            v.assign(v + 1.0)
            return tf.matmul(x, w)
        return step, (stats, v)
    rows = [2, 2, 2, 2, 2, 5, 5, 4, 4, 2]
    calls = [((tf.ones([b, 3 if b != 4 else 4]),), {}) for b in rows]
    differential(make, calls, state=lambda s: (dict(s[0]), s[1]))


def test_a_user_exception_while_tracing_a_new_shape_reruns_the_call():
    """A ``raise`` in the user's code met while tracing a graph for a new shape:
    the call is re-run imperatively, so the dict write before it is made."""
    class Counter:
        def __init__(self):
            self.seen = {'calls': 0}
            self.total = tf.Variable(0.0)

        def step(self, x):
            self.seen['calls'] += 1
            self.total.assign_add(tf.reduce_sum(x))
            if x.shape[0] > 3:
                raise ValueError('batch of %d is too large' % x.shape[0])
            return self.total.read_value()

    def make():
        counter = Counter()
        return counter.step, counter
    calls = [((tf.ones([n]),), {}) for n in (2, 2, 2, 2, 3, 3, 5, 5, 2)]
    differential(make, calls, state=lambda k: (dict(k.seen), k.total))


def test_with_the_knob_off_no_variable_is_kept():
    with janus.config.patch(restore_on_error=False):
        reader = Reader()
        jf = janus.function(reader.read)
        for _ in range(4):
            jf()
        assert jf.cache.entries()[0].rollback is None


def test_a_rollback_restores_exactly_what_it_saved():
    v = tf.Variable([1.0, 2.0])
    keep = rollback.Rollback([(v.handle, v.dtype)])
    saved = keep.save()
    v.assign_add([5.0, 5.0])
    keep.restore(saved)
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])


def test_a_failed_write_back_after_an_update_is_undone_by_the_rollback(monkeypatch, capsys):
    """janus's own failure after the graph updated a variable (here: rebuilding the
    results) no longer needs a JanusError where the graph keeps its variables: they
    are restored and the call runs as plain Python, once."""
    reader = Reader()
    jf = janus.function(reader.read)
    for _ in range(4):
        jf()
    assert jf.cache.entries()[0].rollback is not None

    def fail(*args, **kwargs):
        raise RuntimeError('injected')
    monkeypatch.setattr(entry, 'rebuild', fail)
    capsys.readouterr()
    assert float(jf().numpy()) == 15.0
    assert capsys.readouterr().out == 'read number 5\n'
    assert (reader.reads, int(reader.cursor.numpy())) == (5, 5)
    assert 'injected' in janus.explain(jf)
