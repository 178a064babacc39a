"""Loops over tf.data datasets inside a janus function: one tf.while_loop, as eager.

Differential tests on fresh objects (``conftest.differential``): returns, stdout,
identities and state after every call, including calls whose dataset is
empty, longer, or of another element type, and a loop whose assumption breaks
in the middle of an epoch after some variable updates ran.

PYTEST_DONT_REWRITE: a user ``assert`` inside a converted function must stay one.
"""
import numpy as np
import pytest
import tensorflow as tf

import janus
from tests.conftest import differential

XS = np.random.RandomState(0).rand(40, 6).astype(np.float32)
YS = np.random.RandomState(1).randint(0, 3, size=40)


def _dataset(n=40, batch=8):
    return tf.data.Dataset.from_tensor_slices((XS[:n], YS[:n])).batch(batch)


def _call(*args):
    return lambda: (args, {})


def _weights(model):
    return [w.numpy() for w in model.weights]


def _graph_runs(jf):
    return janus.stats(jf)['graph_calls']


def test_a_training_epoch_over_a_dataset_argument_is_one_graph():
    """The TF guide's loop, as users write it: a Keras model, an optimizer step per
    batch, a Python float accumulating the loss (a tensor after the first batch)."""
    def make():
        tf.keras.utils.set_random_seed(3)
        model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation='relu'),
                                     tf.keras.layers.Dense(3)])
        model.build((None, 6))
        opt = tf.keras.optimizers.SGD(0.1)
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        def train_epoch(ds):
            total = 0.0
            batches = 0
            for x, y in ds:
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                total += loss
                batches += 1
            return total / batches
        return train_epoch, model
    calls = [_call(_dataset())] * 5 + [_call(_dataset(24))] + [_call(_dataset(40, 16))] * 2
    jf = differential(make, calls, state=_weights)
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1 and stats['graph_calls'] == 5, janus.explain(jf)


def test_an_empty_dataset_runs_the_call_imperatively():
    """The first iteration is traced apart, assumed to run: an empty dataset breaks
    that assumption, and the call raises eager's ZeroDivisionError."""
    def make():
        v = tf.Variable(0.0)

        def mean(ds):
            total = 0.0
            n = 0
            for x in ds:
                v.assign_add(tf.reduce_sum(x))
                total += tf.reduce_mean(x)
                n += 1
            return total / n
        return mean, v
    full = tf.data.Dataset.from_tensor_slices(XS).batch(10)
    calls = [_call(full)] * 4 + [_call(full.take(0)), _call(full)]
    jf = differential(make, calls, state=lambda v: v.numpy())
    assert _graph_runs(jf) == 2, janus.explain(jf)


def test_a_new_dataset_of_the_same_kind_reuses_the_graph():
    def make():
        seen = tf.Variable(0, dtype=tf.int64)

        def count(ds):
            for x in ds:
                seen.assign_add(tf.reduce_sum(x))
            return seen.read_value()
        return count, seen
    calls = [_call(tf.data.Dataset.range(n)) for n in (3, 5, 7, 0, 9)]
    calls.append(_call(tf.data.Dataset.range(4).map(lambda z: z * 2)))
    jf = differential(make, calls, state=lambda v: v.numpy())
    assert janus.stats(jf)['graphs_built'] == 1, janus.explain(jf)
    calls = [_call(tf.data.Dataset.from_tensor_slices([1.5, 2.5]))]
    with pytest.raises(Exception):   # another element type: eager raises too (int64 += float)
        jf(*calls[0]()[0])


def test_enumerate_zip_and_iter_of_datasets():
    def make():
        def f(a, b):
            s = tf.constant(0, tf.int64)
            for i, (x, y) in enumerate(zip(a, b), start=1):
                s += (x * y) * i
            for z in iter(a):
                s -= z
            return s
        return f, None
    calls = [_call(tf.data.Dataset.range(n), tf.data.Dataset.range(3)) for n in (4, 4, 4, 2, 6)]
    jf = differential(make, calls)
    assert _graph_runs(jf) == 2, janus.explain(jf)


def test_a_dataset_made_in_the_call_and_one_held_by_the_object():
    def make():
        class Averager:
            def __init__(self):
                self.ds = tf.data.Dataset.from_tensor_slices(XS[:12]).batch(4)
                self.steps = 0
                self.history = []

            def run(self, scale):
                local = tf.data.Dataset.from_tensor_slices(scale * XS[:6])
                acc = tf.zeros([6])
                for row in local:
                    acc = acc + row
                for batch in self.ds:
                    acc = acc + tf.reduce_sum(batch, axis=0)
                    self.steps += 1
                self.history.append(float(tf.reduce_sum(acc)))
                return acc
        a = Averager()
        return a.run, a
    calls = [_call(tf.constant(s)) for s in (1.0, 2.0, 0.5, 1.5, 3.0)]
    jf = differential(make, calls, state=lambda a: (a.steps, list(a.history)))
    assert _graph_runs(jf) >= 1, janus.explain(jf)


def test_a_check_failing_mid_epoch_undoes_the_run():
    """A user ``assert`` inside the loop is checked in the loop, after earlier
    batches updated the variable: when it fails, the run's updates are undone and
    the call re-runs imperatively (eager's partial updates, eager's AssertionError)."""
    def make():
        v = tf.Variable(tf.zeros([6]))
        log = []

        def step(ds):
            for x in ds:
                v.assign_add(tf.reduce_sum(x, axis=0))
                assert tf.reduce_min(x) >= 0.0, 'negative input'
            log.append('epoch')
            return v.read_value()
        return step, (v, log)
    good = tf.data.Dataset.from_tensor_slices(XS).batch(8)
    mixed = np.array(XS)
    mixed[20] *= -1.0
    bad = tf.data.Dataset.from_tensor_slices(mixed).batch(8)
    calls = [_call(good)] * 5 + [_call(bad), _call(good)]
    jf = differential(make, calls, state=lambda s: (s[0].numpy(), list(s[1])))
    assert _graph_runs(jf) == 3, janus.explain(jf)
    assert 'kept for a rollback' in janus.explain(jf)


def test_a_loop_with_break_over_a_dataset_is_one_graph_loop():
    """``break`` is a flag the graph loop carries: once it is up no element is pulled,
    so a loop over an endless dataset (``repeat()``) ends as eagerly, whether the
    break comes at a tensor test or unconditionally after the first element."""
    def make():
        def first_big(ds):
            found = tf.constant(-1.0)
            for x in ds:
                if tf.reduce_sum(x) > 3.0:
                    found = tf.reduce_sum(x)
                    break
            return found

        def first(ds):
            for x in ds:
                out = x * 2.0
                break
            return out

        def both(ds):
            return first_big(ds), first(ds)
        return both, None
    calls = [_call(tf.data.Dataset.from_tensor_slices(XS).repeat())] * 5
    calls += [_call(tf.data.Dataset.from_tensor_slices(XS[:3] * 0.1).repeat(2))]
    jf = differential(make, calls)
    assert _graph_runs(jf) >= 2, janus.explain(jf)


def test_a_break_stops_a_generator_and_a_tensor_range():
    """A generator made by the call is not pulled past the break (an endless one
    would never end), and ``range(n)`` of a tensor stops at the break."""
    def make():
        def naturals():
            i = 0
            while True:
                yield i
                i += 1

        def count_up(x, n):
            for i in naturals():
                if i > 3:
                    break
                x = x + 1
            for i in range(n):
                if x > 20:
                    break
                x = x + i
            return x
        return count_up, None
    calls = [_call(tf.constant(1), tf.constant(10))] * 5 + [_call(tf.constant(30), tf.constant(4))]
    jf = differential(make, calls)
    assert _graph_runs(jf) >= 2, janus.explain(jf)


def test_next_of_an_iterator_made_in_the_call():
    """AutoGraph's reference idioms: ``next(itr)`` twice in one expression and in a
    loop; a dataset too short raises StopIteration as eagerly (the assumption that
    an element exists breaks and the call re-runs imperatively)."""
    def make():
        def first_two(ds):
            itr = iter(ds)
            return 10 * next(itr) + next(itr)

        def digits(ds, n):
            itr = iter(ds)
            s = tf.constant(0, dtype=tf.int64)
            for _ in range(n):
                s = s * 10 + next(itr)
            return s

        def both(ds, n):
            return first_two(ds), digits(ds, n)
        return both, None
    calls = [_call(tf.data.Dataset.range(7), 5)] * 5 + [_call(tf.data.Dataset.range(1), 1),
                                                        _call(tf.data.Dataset.range(9), 5)]
    jf = differential(make, calls)
    assert _graph_runs(jf) >= 3, janus.explain(jf)


def test_tf_print_in_a_dataset_loop_prints_every_element_once(capfd):
    def make():
        def show(ds):
            for e in ds:
                tf.print('element', e)
        return show, None
    jf = differential(make, [_call(tf.data.Dataset.range(3))] * 5)
    assert _graph_runs(jf) == 2, janus.explain(jf)
    printed = capfd.readouterr().err.split('\n')
    assert printed.count('element 2') == 10   # five calls each side


def test_a_dataset_whose_iterators_change_state_is_looped_in_python():
    """A shuffle that reshuffles every epoch and a map that counts in a variable: a
    failed run could not undo making their iterator, so the loop runs in Python (its
    body in graphs), and a check failing mid-epoch leaves eager's state."""
    def make():
        class Loader:
            def __init__(self):
                self.count = tf.Variable(0, dtype=tf.int64)
                self.ds = tf.data.Dataset.range(6).shuffle(6, seed=3).map(self.tag)
                self.total = tf.Variable(0, dtype=tf.int64)

            def tag(self, x):
                return x * 2

            def epoch(self, limit):
                for x in self.ds:
                    self.total.assign(self.total * 3 + x)
                    assert x < limit, 'too big'
                return self.total.read_value()
        loader = Loader()
        return loader.epoch, loader
    limits = [20] * 5 + [6, 20, 20]
    calls = [_call(tf.constant(n, tf.int64)) for n in limits]
    jf = differential(make, calls, state=lambda m: m.total.numpy())
    assert 'change state' in janus.explain(jf), janus.explain(jf)


def test_zip_of_a_dataset_and_a_list_runs_as_eagerly():
    """Python's zip stops at the shorter side; a graph pulling the dataset would run
    past its end: janus does not convert it (the statement runs in Python)."""
    def make():
        v = tf.Variable(0.0)

        def f(ds, weights):
            for x, w in zip(ds, weights):
                v.assign_add(tf.reduce_sum(x) * w)
            return v.read_value()
        return f, v
    calls = [_call(tf.data.Dataset.from_tensor_slices(XS[:n]), [1.0, 2.0, 3.0])
             for n in (2, 2, 2, 5, 2, 3)]
    differential(make, calls, state=lambda v: v.numpy())


def _per_side(make_iterator):
    """A call giving eager and janus each its own long-lived iterator (eager's
    first: ``differential`` calls the eager side first), and the two iterators."""
    iterators, turn = [make_iterator(), make_iterator()], [0]

    def call():
        turn[0] += 1
        return (iterators[(turn[0] - 1) % 2],), {}
    return call, iterators


def _rest(iterator):
    return [np.asarray(x).tolist() for x in iterator]


def test_a_train_step_pulling_next_from_the_callers_iterator():
    """Keras's own idiom: ``train_step(iterator)`` with ``next(iterator)`` inside,
    until the data runs out (StopIteration, as eagerly, with the iterator
    advanced exactly as eager's and the weights updated only by full steps)."""
    def make():
        tf.keras.utils.set_random_seed(5)
        model = tf.keras.Sequential([tf.keras.layers.Dense(3)])
        model.build((None, 6))
        opt = tf.keras.optimizers.SGD(0.1)
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        def train_step(iterator):
            x, y = next(iterator)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return train_step, model
    call, iterators = _per_side(lambda: iter(_dataset(40, 4)))
    jf = differential(make, [call] * 12, state=_weights)
    assert _graph_runs(jf) >= 5, janus.explain(jf)
    assert 'iterator of' in janus.explain(jf)
    assert _rest(iterators[0]) == _rest(iterators[1]) == []


def test_a_loop_over_the_callers_iterator_stops_where_eager_does():
    """``for x in iterator`` with a break continues, call after call, from where the
    last call stopped; the element that broke the loop is consumed, the next is
    not (a graph loop pulls no element past the break)."""
    values = np.array([1., 2., -1., 3., 4., 5., -2., 6., -3., 7., 8.], np.float32)

    def make():
        def sum_until_negative(iterator):
            total = tf.constant(0.0)
            for x in iterator:
                if x < 0:
                    break
                total += x
            return total
        return sum_until_negative, None
    call, iterators = _per_side(lambda: iter(tf.data.Dataset.from_tensor_slices(values)))
    jf = differential(make, [call] * 6)
    assert _graph_runs(jf) >= 1, janus.explain(jf)
    assert _rest(iterators[0]) == _rest(iterators[1])


def test_two_pulls_in_one_call_from_the_callers_iterator():
    """Two ``next()`` in one call: the second's check would follow the first pull,
    which no failed run could undo; the call is still what eager does, element by
    element, up to the StopIteration in the middle of a call."""
    def make():
        def pair(iterator):
            a = next(iterator)
            b = next(iterator)
            return a * 10 + b
        return pair, None
    call, iterators = _per_side(lambda: iter(tf.data.Dataset.range(9)))
    differential(make, [call] * 6)
    assert _rest(iterators[0]) == _rest(iterators[1])


def test_an_error_in_the_callers_pipeline_is_eagers_error():
    """A pull that fails (a check in the dataset's map) raises eager's error type (a
    graph's message) with the iterator where eager leaves it (the next call gets
    the element after), and the Python state the call writes after ``next()`` is
    not written, as eagerly."""
    values = np.array([1., 2., 4., 0., 8., 16., 32.], np.float32)

    def pipeline():
        ds = tf.data.Dataset.from_tensor_slices(values)
        return iter(ds.map(lambda v: tf.debugging.check_numerics(1.0 / v, 'division by zero')))

    def make():
        history = []

        def step(iterator):
            x = next(iterator)
            history.append(len(history))
            return x * 2.0
        return step, history
    sides = []
    for wrap in (lambda fn: fn, janus.function):
        fn, history = make()
        fn, iterator, outcomes = wrap(fn), pipeline(), []
        for _ in range(9):
            try:
                outcomes.append(float(fn(iterator)))
            except (tf.errors.InvalidArgumentError, StopIteration) as e:
                outcomes.append(type(e).__name__)
            outcomes.append(list(history))
        sides.append((outcomes, fn))
    assert sides[0][0] == sides[1][0]
    assert 'InvalidArgumentError' in sides[0][0] and 'StopIteration' in sides[0][0]
    assert _graph_runs(sides[1][1]) >= 2, janus.explain(sides[1][1])


def test_a_local_changing_dtype_before_a_break_keeps_eagers_dtype():
    """AutoGraph's reference case: ``n`` is an int32 tensor before the loop and a float32
    one from its first iteration (which breaks). The tf.cond the break becomes inside
    the graph loop gives ``n`` out on neither side: never its stand-in (an int32 zero,
    eager's value but not its dtype)."""
    def make():
        def early_stop(ds):
            n = tf.constant(0, dtype=tf.int32)
            for _ in ds:
                n = tf.constant(0, dtype=tf.float32)
                break
            return n
        return early_stop, None
    calls = [_call(tf.data.Dataset.from_tensor_slices([1, 2, 3]))] * 5
    calls += [_call(tf.data.Dataset.from_tensor_slices(tf.zeros([0], tf.int32)))]
    differential(make, calls)


def test_a_loop_profiled_empty_is_assumed_empty_until_it_is_not():
    """Every profiled run saw an empty dataset (or ``range(n)`` of a zero tensor): the
    graph assumes the loop runs no iteration (the Python ``0`` it would add to stays
    ``0``, as eagerly); the first non-empty one breaks that, re-runs imperatively,
    and the next graph runs the loop."""
    def make():
        def count(ds, n):
            s = 0
            for x in ds:
                s = s + x
            t = 0.0
            for _ in range(n):
                t += 1.5
            return s, t
        return count, None
    empty, full = tf.data.Dataset.range(0), tf.data.Dataset.range(4)
    calls = [_call(empty, tf.constant(0))] * 5 + [_call(full, tf.constant(3))]
    calls += [_call(empty, tf.constant(0)), _call(full, tf.constant(2))] * 2
    jf = differential(make, calls)
    assert _graph_runs(jf) >= 4, janus.explain(jf)
    assert 'the loop runs no iteration' in janus.explain(jf)


def test_a_generator_is_never_pulled_past_a_break_the_graph_decides():
    """A break under a test only the graph knows (``i >= k`` of a relaxed int) cannot
    stop a Python generator in the trace: the loop is not converted, and what is left
    in the generator after the loop is eager's."""
    def make():
        def numbers(n):
            for i in range(n):
                yield tf.constant(i)

        def head_sum(k):
            g = numbers(6)
            s = tf.constant(0)
            for i, x in enumerate(g):
                s += x
                if i >= k:
                    break
            return s, len(list(g))
        return head_sum, None
    differential(make, [_call(k) for k in (1, 1, 1, 1, 2, 3, 0)])


def test_the_callers_iterator_profiled_empty_then_not():
    """Profiled with exhausted iterators, then given a full one: the first element
    is not lost (an assumption that the loop runs no iteration would have pulled it
    before failing)."""
    def make():
        def total(iterator):
            s = 0
            for x in iterator:
                s = s + x
            return s
        return total, None
    full = [False]

    def call():
        return (iter(tf.data.Dataset.range(1, 6) if full[0] else tf.data.Dataset.range(0)),), {}

    def flip():
        full[0] = True
        return call()
    calls = [call] * 10 + [flip, flip]
    differential(make, calls)


def test_one_iterator_passed_twice_pulls_in_program_order():
    """``f(it, it)``: two handles on one iterator; the graph pulls in the order of
    the program, as eagerly (TF orders ops by handle, not by iterator)."""
    def make():
        v = tf.Variable(0, dtype=tf.int64)

        def pair(a, b):
            x = a.get_next()
            v.assign(v * 10 + x)
            y = b.get_next()
            return x * 1000 + y
        return pair, v
    iterators = [iter(tf.data.Dataset.range(40)), iter(tf.data.Dataset.range(40))]
    turn = [0]

    def call():
        turn[0] += 1
        it = iterators[(turn[0] - 1) % 2]
        return (it, it), {}
    jf = differential(make, [call] * 12, state=lambda v: v.numpy())
    assert _graph_runs(jf) >= 5, janus.explain(jf)
