"""Graph breaks (graphgen/segments.py): a statement janus cannot put in a graph runs
in Python, the statements around it in graphs of their own.

Every program runs eagerly and under janus on fresh objects (``differential``):
returns, exceptions, stdout, identity and state after every call agree, also
on calls where an assumption of a segment breaks.
"""
import bisect
import random as random_module
import statistics

import logging

import numpy as np
import pytest
import tensorflow as tf

import janus
from janus.graphgen import segments
from tests.conftest import differential

X = np.random.RandomState(0).randn(8, 5).astype(np.float32)
Y = np.random.RandomState(1).randint(0, 3, size=8)


def _graph_parts(jf):
    return janus.stats(jf)['graph_part_calls']


class Classifier:
    """A Keras training step as users write it: the loss printed every few steps."""

    def __init__(self):
        tf.keras.utils.set_random_seed(0)
        self.dense = tf.keras.layers.Dense(3)
        self.opt = tf.keras.optimizers.SGD(0.1)
        self.step = 0
        self.history = []

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.dense(x)
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                y, logits, from_logits=True))
        grads = tape.gradient(loss, self.dense.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.dense.trainable_variables))
        self.step += 1
        if self.step % 3 == 0:
            print('step', self.step, 'loss %.4f' % loss.numpy())
        return loss

    def train_step_with_metrics(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.dense(x)
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                y, logits, from_logits=True))
        grads = tape.gradient(loss, self.dense.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.dense.trainable_variables))
        accuracy = np.mean(np.argmax(logits.numpy(), axis=1) == y.numpy())
        self.history.append(float(accuracy))
        return loss, accuracy


def _weights(model):
    return [v.numpy() for v in model.dense.weights] + [model.step, list(model.history)]


def _batches(n):
    return [lambda i=i: ((tf.constant(X + i), tf.constant(Y)), {}) for i in range(n)]


def test_print_of_a_value_every_few_steps():
    def make():
        model = Classifier()
        return model.train_step, model
    # Calls 1-3 profile; the graph assumes the print is not reached; the steps that
    # print run the function cut there (its segment profiles at step 6).
    jf = differential(make, _batches(20), _weights)
    assert janus.stats(jf)['graph_calls'] + _graph_parts(jf) >= 15
    assert 'graph break' in janus.explain(jf)


def test_steps_that_log_nothing_keep_the_whole_function_graph():
    def make():
        model = Classifier()
        return model.train_step, model
    # Calls 1-3 profile, call 4 builds the graph assuming no print; steps 6, 9, ..., 30
    # log: their check fails on the host before anything runs, and they run the
    # function cut at the print; the other steps keep running the whole graph.
    jf = differential(make, _batches(30), _weights)
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 0 and stats['imperative_calls'] == 0
    assert stats['split_calls'] == 9
    assert stats['graph_calls'] == 30 - 3 - 9
    assert 'run the function cut at line' in janus.explain(jf)


class VerboseClassifier(Classifier):
    """Logs every 4th step, or every step once ``verbose`` is set from outside; the
    logged values are kept in Python too."""
    verbose = False

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.dense(x)
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                y, logits, from_logits=True))
        grads = tape.gradient(loss, self.dense.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.dense.trainable_variables))
        self.step += 1
        if self.verbose or self.step % 4 == 0:
            value = float(loss.numpy())
            self.history.append(round(value, 4))
            print('step %d loss %.4f' % (self.step, value))
        return loss


def test_the_logging_path_becoming_the_usual_one_stays_eagers():
    def make():
        VerboseClassifier.verbose = False
        model = VerboseClassifier()
        return model.train_step, model

    def batch(i):
        def call():
            VerboseClassifier.verbose = i >= 14   # from step 15 on, every step logs
            return (tf.constant(X + i), tf.constant(Y)), {}
        return call
    jf = differential(make, [batch(i) for i in range(26)], _weights)
    assert janus.stats(jf)['graph_calls'] + _graph_parts(jf) >= 14


def test_numpy_metrics_every_step_keep_the_training_in_one_graph():
    def make():
        model = Classifier()
        return model.train_step_with_metrics, model
    jf = differential(make, _batches(10), _weights)
    assert _graph_parts(jf) >= 3   # calls 1-3 profile the function, 4-6 its segments
    text = janus.explain(jf)
    assert 'graph break' in text and 'runs in Python' in text


def test_int_of_numpy_sizes_later_tensors():
    def pad_to_longest(lengths, x):
        longest = int(tf.reduce_max(lengths).numpy())
        padded = tf.pad(x, [[0, longest - x.shape[0]], [0, 0]])
        return tf.reduce_sum(padded * 2.0, axis=1)

    def make():
        return pad_to_longest, None
    calls = [lambda n=n: ((tf.constant([n, 2]), tf.ones([2, 3])), {}) for n in (4, 4, 5, 4, 6, 6, 4)]
    jf = differential(make, calls)
    assert janus.stats(jf)['split_calls'] > 0


class Environment:
    """A NumPy environment with its own RandomState, as RL code keeps one."""

    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)
        self.state = self.rng.randn(4).astype(np.float32)
        self.steps = 0

    def step(self, action):
        self.steps += 1
        self.state = (self.state * 0.9 + (action - 0.5) * 0.1).astype(np.float32)
        return self.state, float(-abs(self.state).sum()), self.steps >= 5


class Agent:
    def __init__(self):
        tf.keras.utils.set_random_seed(1)
        self.policy = tf.keras.layers.Dense(2)
        self.rng = np.random.RandomState(7)
        self.rewards = []

    def episode(self, env):
        observation = env.state
        total = 0.0
        done = False
        while not done:
            logits = self.policy(tf.constant(observation[None]))
            probs = tf.nn.softmax(logits)
            action = self.rng.choice(2, p=probs.numpy()[0].astype(np.float64) / probs.numpy()[0].sum())
            observation, reward, done = env.step(action)
            total += reward
        self.rewards.append(total)
        return total, tf.reduce_sum(logits)


def test_reinforce_style_agent_with_a_numpy_environment():
    def make():
        agent = Agent()
        return agent.episode, agent
    calls = [lambda s=s: ((Environment(s),), {}) for s in range(6)]
    differential(make, calls, lambda agent: (agent.rewards, agent.rng.randint(1000)))


def test_next_of_a_python_iterator():
    class Feeder:
        def __init__(self):
            self.batches = iter([np.float32(i) for i in range(100)])
            self.total = tf.Variable(0.0)

        def step(self, w):
            batch = next(self.batches)
            y = tf.constant(batch) * w + 1.0
            self.total.assign_add(y)
            return y

    def make():
        feeder = Feeder()
        return feeder.step, feeder
    calls = [lambda: ((tf.constant(2.0),), {})] * 8
    differential(make, calls, lambda f: f.total.numpy())


def test_try_except_runs_in_python_with_its_body_in_graphs():
    class Cache:
        def __init__(self):
            self.table = {}

        def lookup(self, key, x):
            y = tf.square(x) + 1.0
            try:
                scale = self.table[key]
            except KeyError:
                scale = 2.0
                self.table[key] = scale + 1.0
            return y * scale

    def make():
        cache = Cache()
        return cache.lookup, cache
    calls = [lambda k=k: ((k, tf.constant([1.0, 2.0])), {}) for k in 'aabab' * 2]
    differential(make, calls, lambda c: dict(c.table))


def test_third_party_statistics_and_bisect():
    class Tracker:
        def __init__(self):
            self.losses = []
            self.bounds = [0.5, 1.0, 2.0]

        def update(self, x):
            loss = tf.reduce_mean(x * x)
            self.losses.append(float(loss))
            bucket = bisect.bisect(self.bounds, statistics.mean(self.losses))
            return loss * 2.0, bucket

    def make():
        tracker = Tracker()
        return tracker.update, tracker
    calls = [lambda i=i: ((tf.constant([0.5 * i, 1.0]),), {}) for i in range(8)]
    differential(make, calls, lambda t: list(t.losses))


def test_a_user_exception_after_a_break_leaves_state_and_output_as_eager():
    class Checker:
        def __init__(self):
            self.seen = []

        def check(self, x):
            y = x * 3.0
            value = float(y.numpy().sum())
            print('value', value)
            self.seen.append(value)
            if value > 10:
                raise ValueError('too large: %s' % value)
            return tf.sqrt(y)

    def make():
        checker = Checker()
        return checker.check, checker
    calls = [lambda v=v: ((tf.constant([v, 1.0]),), {}) for v in (1.0, 2.0, 9.0, 1.0, 3.0, 8.0)]
    differential(make, calls, lambda c: list(c.seen))


def test_a_local_unbound_across_a_break_raises_as_eagerly():
    def sum_rows(x, n):
        for i in range(n):
            row = x[i] * 2.0
        print('last row', row.numpy())
        return tf.reduce_sum(row)

    def make():
        return sum_rows, None
    calls = [((tf.ones([3, 2]), n), {}) for n in (2, 2, 3, 2, 0, 3, 0, 2)]
    differential(make, calls)


def test_an_assumption_breaking_inside_a_segment_reruns_only_that_segment():
    class Scaler:
        def __init__(self):
            self.calls = 0

        def scale(self, x, limit):
            self.calls += 1
            y = x * 2.0
            if tf.reduce_sum(y) > limit:   # assumed from the profile, then broken
                y = y / 10.0
            print('sum', y.numpy().sum())
            return y + 1.0

    def make():
        scaler = Scaler()
        return scaler.scale, scaler
    calls = [((tf.constant([1.0, 1.0]), 100.0), {})] * 6 + [
        ((tf.constant([100.0, 1.0]), 100.0), {}), ((tf.constant([1.0, 1.0]), 100.0), {})]
    differential(make, calls, lambda s: s.calls)


def test_nonlocals_written_across_breaks():
    def make():
        counter = 0

        def step(x):
            nonlocal counter
            counter += 1
            y = x + counter
            print('y', y.numpy())
            counter += 1
            return y * 2.0
        return step, lambda: counter
    calls = [((tf.constant([1.0]),), {})] * 6
    differential(make, calls, lambda read: read())


TOTAL = [0]
seen_total = 0


def _count_globally(x):
    global seen_total
    seen_total += 1
    y = x + seen_total
    print('y', y.numpy())
    seen_total += 1
    TOTAL[0] += 1
    return y * 2.0


def test_globals_written_across_breaks():
    global seen_total
    eager = []
    for _ in range(6):
        eager.append(_count_globally(tf.constant([1.0])).numpy())
    after_eager, seen_total, TOTAL[0] = (seen_total, TOTAL[0]), 0, 0
    jf = janus.function(_count_globally)
    got = [jf(tf.constant([1.0])).numpy() for _ in range(6)]
    assert np.allclose(eager, got) and (seen_total, TOTAL[0]) == after_eager
    assert janus.stats(jf)['split_calls'] == 3


def test_breaks_are_off_with_the_knob():
    with janus.config.patch(graph_breaks=False):
        def make():
            model = Classifier()
            return model.train_step_with_metrics, model
        jf = differential(make, _batches(6), _weights)
    assert janus.stats(jf)['split_calls'] == 0


def test_a_nested_function_reading_a_rebound_local_is_not_cut():
    def fn(x):
        scale = 2.0
        get = lambda: scale  # noqa: E731 - reads the local bound again below
        y = x * get()
        print(y.numpy())
        scale = 3.0
        return y * get()

    with pytest.raises(segments.CannotSplit):
        segments.split(fn, [fn.__code__.co_firstlineno + 4])

    def make():
        return fn, None
    differential(make, [((tf.constant([1.0]),), {})] * 5)


def test_the_skeleton_keeps_the_signature_and_defaults():
    def fn(x, scale=2.0, *rest, shift=1.0, **extra):
        y = x * scale + shift
        print('y', y.numpy(), rest, sorted(extra))
        return y + len(rest)

    def make():
        return fn, None
    calls = [((tf.constant([1.0]),), {}), ((tf.constant([1.0]), 3.0), {'shift': 0.5}),
             ((tf.constant([1.0]), 3.0, 'a', 'b'), {'k': 1}), ((tf.constant([2.0]),), {})] * 2
    differential(make, calls + [((), {})])


class Timer:
    """A user context manager, as logging code has one."""

    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append('enter')
        return self

    def __exit__(self, *exc):
        self.log.append('exit %s' % (exc[0].__name__ if exc[0] else None))
        return False


def test_a_user_context_manager_around_tensor_work():
    class Trainer:
        def __init__(self):
            self.log = []

        def step(self, x):
            with Timer(self.log):
                y = tf.nn.relu(x) * 2.0
                z = tf.reduce_sum(y)
            return z + 1.0

    def make():
        trainer = Trainer()
        return trainer.step, trainer
    calls = [lambda i=i: ((tf.constant([1.0, -float(i)]),), {}) for i in range(7)]
    differential(make, calls, lambda t: list(t.log))


def _pairs(values):
    for i in range(len(values) - 1):
        yield values[i], values[i + 1]


def test_a_generator_consumed_inside_the_function():
    def total(xs):
        out = tf.zeros([2])
        for a, b in _pairs(xs):
            out = out + a * b
        return out

    def make():
        return total, None
    calls = [lambda n=n: (([tf.constant([1.0, float(i)]) for i in range(n)],), {})
             for n in (3, 3, 4, 3, 2, 3)]
    differential(make, calls)


def test_explain_names_the_break_line_and_its_reason():
    model = Classifier()
    jf = janus.function(model.train_step_with_metrics)
    for i in range(8):
        jf(tf.constant(X + i), tf.constant(Y))
    text = janus.explain(jf)
    line = Classifier.train_step_with_metrics.__code__.co_firstlineno + 7
    assert 'test_graph_breaks.py:%d' % line in text, text
    assert 'numpy' in text.lower() and 'segments in graphs of their own' in text


def test_a_break_inside_a_gradient_tape():
    class Model:
        def __init__(self):
            tf.keras.utils.set_random_seed(0)
            self.dense = tf.keras.layers.Dense(2)
            self.opt = tf.keras.optimizers.SGD(0.1)

        def step(self, x):
            with tf.GradientTape() as tape:
                y = self.dense(x)
                print('sum %.5f' % y.numpy().sum())
                loss = tf.reduce_sum(y * y)
            grads = tape.gradient(loss, self.dense.trainable_variables)
            self.opt.apply_gradients(zip(grads, self.dense.trainable_variables))
            return loss

    def make():
        model = Model()
        return model.step, model
    calls = [lambda i=i: ((tf.constant(np.full([3, 4], 0.1 * (i + 1), np.float32)),), {})
             for i in range(9)]
    jf = differential(make, calls, lambda m: [v.numpy() for v in m.dense.weights])
    assert _graph_parts(jf) > 0


def test_a_failed_trace_is_not_repeated_for_new_dimensions(monkeypatch):
    from janus.graphgen import tracer
    traced = []
    real = tracer.trace
    monkeypatch.setattr(tracer, 'trace', lambda *a, **k: traced.append(1) or real(*a, **k))

    def make_tape(x):
        tape = tf.GradientTape()   # returned: no graph can give it back
        return tape, x * 2.0

    jf = janus.function(make_tape)
    for n in (2, 2, 2, 3):   # the build at the 4th call traces (relaxed, then exact shapes)
        jf(tf.ones([n]))
    first_build = len(traced)
    for n in (4, 5, 6, 3, 7):
        tape, y = jf(tf.ones([n]))
        assert isinstance(tape, tf.GradientTape) and y.shape == [n]
    assert first_build >= 1 and len(traced) == first_build, janus.explain(jf)


def _numbers(n):
    for i in range(n):
        if i == 2:
            raise KeyError('no %d' % i)
        yield float(i)


def test_locals_bound_before_an_exception_caught_in_the_function():
    """A loop over a generator that raises half-way, inside ``try``: the handler and
    the code after it see the locals the loop bound before the raise."""
    def walk(x):
        try:
            for v in _numbers(4):
                x = x + v
                last = v
        except KeyError as e:
            print('stopped', str(e), float(x), last)
        return x * 2.0

    def make():
        return walk, None
    differential(make, [((tf.constant([float(i)]),), {}) for i in range(7)])


class Detector:
    """A detection-style step: the padding size comes from ``.numpy()`` of a count."""

    def __init__(self):
        tf.keras.utils.set_random_seed(3)
        self.head = tf.keras.layers.Dense(4)
        self.opt = tf.keras.optimizers.SGD(0.05)

    def step(self, features, boxes):
        counts = tf.reduce_sum(tf.cast(boxes[:, :, 0] > 0, tf.int32), axis=1)
        longest = int(tf.reduce_max(counts).numpy())
        kept = boxes[:, :longest, :]
        with tf.GradientTape() as tape:
            predicted = self.head(features)[:, None, :]
            loss = tf.reduce_mean(tf.square(predicted - kept))
        grads = tape.gradient(loss, self.head.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.head.trainable_variables))
        return loss, longest


def test_a_size_from_numpy_shapes_the_rest_of_the_step():
    def make():
        detector = Detector()
        return detector.step, detector
    rng = np.random.RandomState(5)

    def batch(longest):
        boxes = np.zeros([2, 6, 4], np.float32)
        boxes[0, :longest] = rng.rand(longest, 4) + 0.1
        boxes[1, :2] = rng.rand(2, 4) + 0.1
        features = rng.rand(2, 8).astype(np.float32)
        return lambda: ((tf.constant(features), tf.constant(boxes)), {})
    calls = [batch(n) for n in (3, 3, 3, 4, 3, 5, 3, 4, 6, 3, 4, 5)]
    jf = differential(make, calls, lambda d: [v.numpy() for v in d.head.weights])
    assert _graph_parts(jf) > 0, janus.explain(jf)


def _segment_functions(jf):
    """The janus functions of ``jf``'s segments, and theirs (a segment may break again)."""
    found, todo = [], [part for split in jf.state.splits.values() for part in split.slots]
    while todo:
        part = todo.pop(0)
        if not isinstance(part, janus.api.JanusFunction):
            continue   # a segment running as plain Python (too little tensor work)
        found.append(part)
        todo += [inner for split in part.state.splits.values() for inner in split.slots]
    return found


def test_a_segment_with_a_maybe_unbound_input_breaks_again():
    """Fuzzer finding (tests/fuzz_findings_breaks/): a segment whose input may be unbound
    (bound in a loop that may not run) reads janus's helpers as a closure cell ``__jr``;
    a second break in it cut it again with ``__jr`` a parameter twice (SyntaxError,
    an internal error on every call)."""
    def fn(x, n):
        for _ in range(n):
            last = x * 2.0
        print('a', last.numpy())
        z = last + 1.0
        print('b', z.numpy())
        return z * 2.0

    def make():
        return fn, None
    calls = [((tf.constant([0.5, 1.0]), n), {}) for n in (2, 2, 2, 1, 2, 0, 3, 2, 2, 2, 0, 1)]
    jf = differential(make, calls)
    assert janus.stats(jf)['split_calls'] > 0
    events = [ev for part in [jf] + _segment_functions(jf) for ev in part.events]
    assert not [ev for ev in events if ev.kind.value == 'internal error'], events


def test_a_nested_function_writing_a_local_before_a_break_is_not_cut():
    """Fuzzer finding (tests/fuzz_findings_breaks/): ``bump`` writes the local ``tally``
    through ``nonlocal``; cut at the break, the segment defining ``bump`` kept the cell it
    writes, and ``return tally`` read the skeleton's copy (0, eagerly 2)."""
    def fn(x):
        tally = 0

        def bump():
            nonlocal tally
            tally += 1
        size = int(np.ceil(float(tf.reduce_sum(tf.abs(x))))) % 4
        for _ in range(2):
            bump()
        return tally, x * 2.0 + size

    with pytest.raises(segments.CannotSplit):
        segments.split(fn, [fn.__code__.co_firstlineno + 6])

    def make():
        return fn, None
    differential(make, [((tf.constant([1.0, -0.5 * i]),), {}) for i in range(7)])


def test_locals_bound_in_a_try_body_before_an_exception_reach_the_handler():
    """Fuzzer finding (tests/fuzz_findings_breaks/): the try body ran as one segment;
    raising KeyError at its second statement, it returned none of its locals, so the
    handler saw ``acc`` from before the body (janus 0.5, eagerly 1.5).  Each statement
    of a try body is now a segment of its own."""
    class Table:
        def __init__(self):
            self.table = {}

        def lookup(self, x, p):
            acc = x * 1.0
            try:
                acc = acc * 2.0
                acc = acc + self.table['k%d' % p]
            except KeyError:
                acc = acc - 0.5
                self.table['k%d' % p] = float(len(self.table))
            for k in range(2):
                try:
                    acc = acc + 1.0
                    acc = acc / (p - k)
                except ZeroDivisionError:
                    acc = acc * 3.0
            return acc

    def make():
        table = Table()
        return table.lookup, table
    calls = [((tf.constant([1.0, 2.0]), p), {}) for p in (0, 1, 0, 2, 2, 3, 0, 4, 1, 5, 6)]
    jf = differential(make, calls, lambda t: dict(t.table))
    assert janus.stats(jf)['graph_part_calls'] > 0


def test_a_name_bound_before_a_segment_and_maybe_in_it_keeps_its_value():
    """Fuzzer finding (tests/fuzz_findings_breaks/): ``msg`` is bound (a parameter) and
    the segment before the break binds it only when the branch runs, never reading it;
    the segment returned ``msg`` as if bound inside it: UnboundLocalError when the
    branch did not run.  Also through a second break in a segment (the fuzzer's case)."""
    def fn(x, msg='none'):
        if x[0] > 0.5:
            msg = 'big'
        print(msg, x.numpy())
        return x * 2.0, msg

    def twice(x):
        acc = x * 1.0
        msg = ''
        print(acc.numpy())
        if x[0] > 0.625:
            msg = str(x)
            acc = acc + 1.0
        msg = msg + 'a'
        return acc, msg

    calls = [((tf.constant([v]),), {}) for v in [1.0] * 8 + [0.25, 1.0, 0.25]]
    for function in (fn, twice):
        jf = differential(lambda function=function: (function, None), calls)
        assert janus.stats(jf)['split_calls'] > 0


def test_a_break_inside_a_gradient_tape_body():
    """Fuzz-session finding (tests/fuzz_findings_breaks/): with a break inside the tape's
    body, ``tape.gradient`` after it landed in a segment taking the tape as input; traced
    in that segment's graph, the loss was a placeholder and the gradient None.  What a
    ``with`` cut by a break binds is now read in Python only."""
    class Step:
        def __init__(self):
            self.w = tf.Variable([1.0, 2.0])
            self.losses = []

        def step(self, x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = x * self.w
                print('y', y.numpy())
                loss = tf.reduce_sum(y * y)
            gw, gx = tape.gradient(loss, [self.w, x])
            self.w.assign_sub(0.01 * gw)
            self.losses.append(float(loss))
            return loss, gx

    def make():
        step = Step()
        return step.step, step
    calls = [((tf.constant([1.0, 0.5 * i]),), {}) for i in range(10)]
    jf = differential(make, calls, lambda s: (s.w.numpy(), list(s.losses)))
    assert janus.stats(jf)['graph_part_calls'] > 0


class LoggedTrainer(Classifier):
    """The loss logged with the ``logging`` module every step and a NumPy ``Generator``
    choosing a dropout-style mask, as research code does."""

    def __init__(self, logger, records):
        super().__init__()
        self.rng = np.random.default_rng(11)
        self.logger = logger
        self.records = records

    def train_step(self, x, y):
        keep = self.rng.random(x.shape[1]) > 0.2
        with tf.GradientTape() as tape:
            logits = self.dense(x * tf.constant(keep, tf.float32))
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                y, logits, from_logits=True))
        grads = tape.gradient(loss, self.dense.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.dense.trainable_variables))
        self.step += 1
        self.logger.info('step %d loss %.5f kept %d', self.step, loss.numpy(), keep.sum())
        return loss


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_logging_and_a_numpy_generator_draw_every_step():
    sides = []

    def make():
        logger = logging.getLogger('janus-test-trainer-%d' % len(sides))
        logger.setLevel(logging.INFO)
        logger.propagate = False
        handler = _Records()
        logger.handlers[:] = [handler]
        sides.append((logger, handler))
        trainer = LoggedTrainer(logger, handler.lines)
        return trainer.train_step, trainer
    try:
        jf = differential(make, _batches(9), lambda t: _weights(t) + [list(t.records)])
    finally:
        for logger, _ in sides:
            logger.handlers[:] = []
    assert len(sides[0][1].lines) == len(sides[1][1].lines) == 9
    assert _graph_parts(jf) >= 3, janus.explain(jf)


def test_raising_a_number_read_from_a_tensor_under_a_tensor_condition():
    """Fuzzer finding 9 (tests/fuzz_findings_breaks/): ``raise ValueError(v)`` with ``v =
    float(t)``: the failed trace's message was made from the user's exception after the
    trace ended, and ``v`` (a dynamic number) needed the trace (an internal error)."""
    def make():
        seen = []

        def fn(x, p):
            acc = x * 1.0
            for _ in range(p):
                if tf.reduce_sum(x) > 0.0:
                    v = float(tf.reduce_max(x))
                    seen.append(v)
                    if v > 2.875:
                        raise ValueError(v)
                    acc = tf.clip_by_value(acc + v * 0.1 + tf.reduce_sum(acc), -20.0, 20.0)
            return acc
        return fn, seen
    calls = [((tf.constant(values), p), {}) for values, p in (
        ([0.5, 1.0], 1), ([1.0, 0.75], 1), ([-0.75, -0.25], 2), ([-0.25, 3.0], 2),
        ([1.0, 0.75], 1), ([2.0, 3.5], 1), ([1.0, 0.5], 2))]
    jf = differential(make, calls, state=list)
    events = [ev for part in [jf] + _segment_functions(jf) for ev in part.events]
    assert not [ev for ev in events if ev.kind.value == 'internal error'], events


def test_strict_mode_raises_on_a_graph_break():
    """Strict mode claims the whole function converts: a break is an error there."""
    def fn(x):
        y = tf.reduce_sum(tf.square(x * 2.0 + 1.0) - x)
        print('y', y.numpy())
        return y + 1.0
    jf = janus.function(fn, strict=True)
    with pytest.raises(janus.StrictModeError, match='numpy'):
        for _ in range(6):
            jf(tf.constant([1.0, 2.0]))
    assert janus.stats(jf)['split_calls'] == 0


def test_a_segment_with_too_little_tensor_work_runs_as_plain_python():
    """Two ops around a break cost less eagerly than a janus call: the segment runs as
    plain Python (explain says so); with the threshold at 1 it gets a graph."""
    def make():
        def fn(x):
            y = x * 2.0 + 1.0
            print('y', y.numpy())
            return y
        return fn, None
    calls = [((tf.constant([1.0, float(i)]),), {}) for i in range(8)]
    jf = differential(make, calls)
    # the run that built the segment's graph is its only graph run
    assert janus.stats(jf)['split_calls'] > 0 and _graph_parts(jf) <= 1, janus.explain(jf)
    assert 'less than a graph call costs' in janus.explain(jf)
    with janus.config.patch(segment_min_ops=1):
        jf = differential(make, calls)
    assert _graph_parts(jf) >= 3, janus.explain(jf)


class Rollout:
    """A method whose segment after a loop reads locals the loop may not bind
    (they cross the cut as maybe-unbound, through janus's own names)."""

    def __init__(self):
        self.w = tf.Variable([[0.5, -0.25], [0.125, 1.0]])
        self.frames = 0

    def run(self, x, steps):
        t = 0
        while t < steps:
            x = tf.tanh(tf.matmul(x, self.w))
            last = x
            t += 1
            self.frames += 1
        total = float(tf.reduce_sum(x).numpy())     # a break
        scale = tf.reduce_mean(last) * 2.0 + total
        return tf.nn.relu(last * scale) - tf.exp(-scale)


def test_a_methods_segment_reading_maybe_unbound_locals_converts():
    def make():
        rollout = Rollout()
        return rollout.run, rollout
    calls = [lambda i=i: ((tf.constant([[1.0, 2.0]]) * float(i + 1), i % 3), {})
             for i in range(14)]
    jf = differential(make, calls, lambda r: r.frames)
    report = janus.explain(jf)
    assert 'NameError' not in report and '__jr' not in report
    assert _graph_parts(jf) >= 6


class Policy:
    """Acts frame by frame: the forward pass and the ``.numpy()`` in one statement."""

    def __init__(self):
        tf.keras.utils.set_random_seed(2)
        self.net = tf.keras.Sequential([tf.keras.layers.Dense(8, activation='tanh'),
                                        tf.keras.layers.Dense(2)])
        self.draws = random_module.Random(0)
        self.frames = 0

    def act(self, obs, frames):
        actions = []
        for _ in range(frames):
            probs = tf.nn.softmax(self.net(obs[None]))[0].numpy()
            actions.append(int(probs[1] > 0.5))
            obs = obs * 0.9 + float(probs[0])
            self.frames += 1
        return actions, obs

    def act_noisily(self, obs):
        # the receiver breaks too: NumPy needs the draw's value (not made on the host)
        noise = tf.constant(np.float32(self.draws.random() * 0.01)).numpy()
        return tf.nn.softmax(self.net(obs[None]) + noise)


def test_the_forward_pass_in_a_numpy_statement_runs_in_a_graph():
    def make():
        policy = Policy()
        return policy.act, policy
    calls = [lambda i=i: ((tf.constant([0.5, -1.0, 0.25]) * float(i + 1), 3), {})
             for i in range(10)]
    jf = differential(make, calls, lambda p: p.frames)
    split, = jf.state.splits.values()
    assert split.hoisted   # the forward pass went to the segment before the break
    assert _graph_parts(jf) >= 5


def test_a_hoisted_receiver_that_breaks_too_runs_whole_in_python():
    def make():
        policy = Policy()
        return policy.act_noisily, policy
    calls = [lambda i=i: ((tf.constant([0.5, -1.0, 0.25]) * float(i + 1),), {})
             for i in range(14)]
    jf = differential(make, calls, lambda p: p.draws.getstate())
    split, = jf.state.splits.values()
    assert not split.hoisted and jf.state.unhoisted
    assert _graph_parts(jf) >= 4   # the break is found, then its hoisting undone


def test_a_walrus_under_or_binds_in_the_function():
    class Smoother:
        def __init__(self):
            self.updates = 0

        def smooth(self, x, warm):
            scale = 0.5
            if not warm or (scale := tf.reduce_mean(x)) < 0.0:
                self.updates += 1
            label = 'big' if (peak := float(tf.reduce_max(x).numpy())) > 2.0 else 'small'
            return x * scale + peak, label

    def make():
        smoother = Smoother()
        return smoother.smooth, smoother
    calls = [lambda i=i: ((tf.constant([0.5, -1.0, 2.0]) * float(i % 4 - 1), i % 3 != 0), {})
             for i in range(12)]
    jf = differential(make, calls, lambda s: s.updates)
    assert 'assignment expression' in janus.explain(jf)


class Blocks:
    """A user's timing block (janus cannot know it never swallows) around a break."""

    def __init__(self):
        self.log = []
        self.count = 0
        self.draws = random_module.Random(1)

    def __enter__(self):
        self.log.append('enter')
        return self

    def __exit__(self, kind, value, tb):
        self.log.append('exit')
        return False

    def step(self, x):
        acc = x * 1.0
        with self:
            acc = acc * 1.5
            print('max', tf.reduce_max(acc).numpy().item())
            print('noise', tf.constant(np.float32(self.draws.random())).numpy())   # hoisted, then not
            acc = tf.nn.relu(acc) - 0.5
        self.count = self.count + 2
        if float(tf.reduce_sum(acc)) > self.count:
            self.count -= 1
        return acc + self.count


def test_segments_of_a_cut_made_again_keep_their_own_slots():
    def make():
        blocks = Blocks()
        return blocks.step, blocks
    calls = [lambda v=v: ((tf.constant(v),), {}) for v in (
        [0.5, 0.25, 1.0], [0.25, 0.5, 0.75], [0.25, 0.5, 0.25], [1.0, 0.75, 0.75],
        [0.25, 0.25, 0.5], [1.0, 1.0, 1.0], [1.0, 0.75, 0.5], [0.5, 0.75, 1.0]) * 2]
    jf = differential(make, calls, lambda b: (b.count, list(b.log), b.draws.getstate()))
    assert jf.state.unhoisted


def test_the_innermost_value_read_is_hoisted():
    import gast as gast_module
    from janus.graphgen import hoist
    tree = gast_module.parse('def f(acc):\n    print(\'max\', tf.reduce_max(acc).numpy().item())\n'
                             ).body[0]
    assert hoist.hoist(tree, {2}) == {2}
    hoisted = tree.body[0]
    assert isinstance(hoisted.value, gast_module.Call)
    assert hoisted.value.func.attr == 'reduce_max'


class FrameRollout:
    """Per frame: the policy's probabilities read with ``.numpy()`` (the first break),
    then a NumPy draw (the second, found by a segment inside the loop), with the
    frames collected in a list that grows every frame."""

    def __init__(self):
        tf.keras.utils.set_random_seed(3)
        self.policy = tf.keras.layers.Dense(2)
        self.rng = np.random.RandomState(5)

    def episode(self, observation, frames):
        observations, actions = [], []
        for _ in range(frames):
            probs = tf.nn.softmax(self.policy(observation))[0].numpy()
            observations.append(observation)
            action = int(self.rng.uniform() < probs[1])
            actions.append(action)
            observation = observation * 0.5 + float(action)
        return tf.concat(observations, 0), actions


def test_a_segment_whose_trace_failed_is_not_traced_again_every_frame(monkeypatch):
    """A segment in a loop whose trace fails at a second break makes its owner cut
    again; the frames left in that call run it plainly, instead of tracing it again
    with each frame's longer list."""
    from janus.graphgen import tracer
    traced = []
    real = tracer.trace
    monkeypatch.setattr(tracer, 'trace', lambda *a, **k: traced.append(1) or real(*a, **k))

    def make():
        rollout = FrameRollout()
        return rollout.episode, rollout
    calls = [lambda: ((tf.ones([1, 3]), 20), {}) for _ in range(8)]
    jf = differential(make, calls, lambda rollout: rollout.rng.randint(1000))
    assert len(traced) <= 12, (len(traced), janus.explain(jf))   # 20 frames


def test_failed_traces_are_bounded_for_call_shapes_that_keep_changing(monkeypatch):
    """A function no graph can hold, called with a new shape every call: after
    ``failed_trace_limit`` failed traces, new shapes run imperatively, untried."""
    from janus.graphgen import tracer
    traced = []
    real = tracer.trace
    monkeypatch.setattr(tracer, 'trace', lambda *a, **k: traced.append(1) or real(*a, **k))

    def total(xs):
        s = tf.add_n(xs)
        print('total', s.numpy().sum())
        return s

    def make():
        return total, None
    calls = [lambda n=n: (([tf.ones([2])] * n,), {}) for n in range(1, 30)]
    with janus.config.patch(failed_trace_limit=4, graph_breaks=False):
        jf = differential(make, calls)
    assert 0 < len(traced) <= 8, (len(traced), janus.explain(jf))
    assert 'failed_trace_limit' in janus.explain(jf)


class TwoBreaks:
    """A step with two breaks, the second found only when the code after the first
    is traced as a segment."""

    def __init__(self):
        self.w = tf.Variable(tf.reshape(tf.range(12, dtype=tf.float32), (3, 4)) / 10.0)
        self.rng = np.random.RandomState(2)

    def step(self, x):
        h = tf.nn.relu(tf.matmul(x, self.w)) + 1.0
        h = h * tf.reduce_mean(h)
        print('mean', h.numpy().mean())
        y = tf.tanh(h) * 2.0 + tf.reduce_sum(h)
        noise = float(self.rng.uniform(size=1)[0])   # an array draw: not made on the host
        return tf.reduce_sum(y * noise + tf.exp(-y))


def test_a_cut_made_again_keeps_the_segments_it_leaves_as_they_were():
    def make():
        model = TwoBreaks()
        return model.step, model
    calls = [lambda: ((tf.ones([2, 3]),), {}) for _ in range(9)]
    jf = differential(make, calls, lambda model: model.rng.randint(1000))
    (lines, split), = jf.state.splits.items()
    assert len(lines) == 2, janus.explain(jf)
    first = split.slots[0]
    assert isinstance(first, janus.api.JanusFunction), janus.explain(jf)
    # made for the first cut (at the print), still the one after the second
    assert janus.stats(first)['graphs_built'] == 1
    assert janus.stats(first)['calls'] > janus.stats(split.slots[-1])['calls'], janus.explain(jf)


class Scheduled:
    """After the logged line: a tensor test (its outcome the profile saw the same
    on every call) and a Python loop, in the segment after the break."""

    def __init__(self):
        self.w = tf.Variable(tf.ones((3, 3)) / 3.0)
        self.seen = []

    def step(self, x):
        h = tf.matmul(x, self.w)
        self.seen.append(float(h.numpy().sum()))
        if tf.reduce_sum(h) > 0:
            h = h * 2.0
        else:
            h = h - 1.0
        for _ in range(3):
            h = tf.tanh(h) + 0.5
        return tf.reduce_sum(h)


def test_a_segment_takes_its_owners_profile_and_traces_on_its_first_call():
    def make():
        model = Scheduled()
        return model.step, model
    calls = [lambda i=i: ((tf.ones([2, 3]) * (i + 1),), {}) for i in range(6)]
    calls.append(lambda: ((-tf.ones([2, 3]),), {}))   # the tensor test's other side
    calls += [lambda: ((tf.ones([2, 3]),), {})] * 2
    jf = differential(make, calls, lambda model: model.seen)
    (split,) = jf.state.splits.values()
    parts = [p for p in split.slots if isinstance(p, janus.api.JanusFunction)]
    assert parts, janus.explain(jf)
    for part in parts:
        assert janus.stats(part)['profiled_calls'] == 0, janus.explain(jf)
        assert janus.stats(part)['graph_calls'] >= 3, janus.explain(jf)


class ThreeBreaks:
    """Three breaks one after another: the first stops the whole function's trace,
    the others are inside the code after it."""

    def __init__(self):
        self.w = tf.Variable(tf.ones((3, 3)) / 3.0)
        self.rng = np.random.RandomState(4)
        self.log = []

    def step(self, x):
        h = tf.matmul(x, self.w)
        print('sum', h.numpy().sum())
        h = tf.tanh(h) * 2.0
        scale = float(self.rng.uniform(size=1)[0])   # an array draw: not made on the host
        h = h * scale + 1.0
        self.log.append(float(np.mean(h.numpy())))
        return tf.reduce_sum(h * h)


def test_the_breaks_a_call_reaches_are_found_in_that_call():
    def make():
        model = ThreeBreaks()
        return model.step, model
    calls = [lambda: ((tf.ones([2, 3]),), {}) for _ in range(8)]
    jf = differential(make, calls, lambda model: (model.log, model.rng.randint(1000)))
    found = [e for e in jf.events if e.kind is janus.api.EventKind.GRAPH_BREAK
             and 'runs in Python' in e.detail]
    assert len(found) == 3 and len({e.call for e in found}) == 1, janus.explain(jf)
    assert janus.stats(jf)['split_calls'] == 5


def _discounted(rewards, gamma=0.9):
    out, running = [], 0.0
    for r in reversed(rewards):
        running = r + gamma * running
        out.append(running)
    return np.array(out[::-1], dtype=np.float32)


class Episode:
    """A loop acting per frame (a break inside it), then a NumPy helper on the
    episode's rewards (a refusal inside the callee, found by the segment after the
    loop) and tensor work reading a local the loop may not have bound."""

    def __init__(self):
        self.w = tf.Variable(tf.ones((3, 2)) / 3.0)
        self.rng = np.random.RandomState(6)

    def run(self, obs, frames):
        rewards = []
        t = 0
        while t < frames:
            logits = tf.matmul(obs, self.w)
            p = tf.nn.softmax(logits).numpy()[0]
            rewards.append(float(p[0] > self.rng.uniform()))
            t += 1
        returns = _discounted(rewards)
        loss = -tf.reduce_sum(tf.reduce_sum(logits) * returns)
        return loss, len(rewards)


def test_a_refused_helper_after_a_loop_with_a_break():
    def make():
        episode = Episode()
        return episode.run, episode
    calls = [lambda n=n: ((tf.ones([1, 3]), n), {}) for n in (3, 4, 2, 5, 3, 4, 6, 2)]
    jf = differential(make, calls, lambda e: e.rng.randint(1000))
    text = janus.explain(jf)
    assert 'internal error' not in text, text


def test_a_segment_cut_for_the_rest_of_a_call_with_two_runs_on_one_line():
    """Fuzzer soak37 program 412: the segment (lines of the else branch) cut for the
    rest of the call at its inner loop had two runs on its last line (its statement
    and its own return); both parts got one name, and the skeleton called one with
    the other's arguments (a TypeError eager never raises)."""
    def f(x, p):
        acc = x * 1.0
        i3 = tf.constant(0)
        while i3 < 4 and tf.reduce_sum(acc) < 6.0:
            i3 = i3 + 1
            if tf.reduce_sum(acc) > 4.0:
                break
            if tf.reduce_max(x) > 0.875:
                q1 = int(isinstance(p, int)) + int(callable(len))
            elif tf.reduce_max(x) > 0.875:
                acc = tf.clip_by_value(acc * acc, -20.0, 20.0)
            else:
                outs2 = [acc]
                i_ = tf.constant(0)
                while i_ < tf.shape(x)[0]:
                    i_ += 1
                    outs2 = outs2 + [outs2[-1] * 0.5]
                acc = outs2[-1]
            q1 = max(p, 1) + min(p, 2)
        return acc, q1

    def make():
        return f, None
    values = [[1.0, 0.25, 0.75, 0.75], [0.75, 1.0, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25],
              [0.5, 0.25, 0.25, 0.5], [0.25, 0.5, 0.25, 0.25]]
    calls = [lambda v=v, p=p: ((tf.constant(v), p), {}) for p, v in enumerate(values)]
    differential(make, calls)


def test_a_function_without_source_is_not_cut_and_reports_no_janus_error(capsys):
    namespace = {'tf': tf}
    exec('class Stepper:\n'
         '    def step(self, x):\n'
         '        n = tf.reduce_sum(x)\n'
         '        print(n.numpy())\n'
         '        return x * 2\n', namespace)

    def make():
        stepper = namespace['Stepper']()
        return stepper.step, None
    differential(make, [lambda i=i: ((tf.ones([2]) * i,), {}) for i in range(6)])
    assert 'internal error' not in capsys.readouterr().err


class NoiseGenerator:
    """A GAN-style generator step: the latent noise drawn with ``tf.random.normal``
    inside the step (a stateful random op no graph draws as eager does)."""

    def __init__(self):
        tf.keras.utils.set_random_seed(3)
        self.net = tf.keras.Sequential([tf.keras.layers.Dense(8, activation='relu'),
                                        tf.keras.layers.Dense(2)])
        self.net.build((None, 4))
        self.opt = tf.keras.optimizers.SGD(0.05)

    def train_step(self, target):
        with tf.GradientTape() as tape:
            z = tf.random.normal([6, 4])
            fake = self.net(z)
            loss = tf.reduce_mean(tf.square(fake - target))
        grads = tape.gradient(loss, self.net.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.net.trainable_variables))
        return loss


def test_a_stateful_random_draw_breaks_at_its_line_only():
    """The draw's statement runs in Python (eager's own stream, drawn once a call),
    the forward pass, gradient and update in graphs; the same losses and weights as
    eager from the same global seed."""
    target = tf.constant([[0.5, -0.5]])
    sides = []
    for wrap in (lambda f: f, janus.function):
        model = NoiseGenerator()
        step = wrap(model.train_step)
        tf.random.set_seed(11)
        losses = [float(step(target)) for _ in range(12)]
        sides.append((losses, [v.numpy() for v in model.net.trainable_variables], step))
    (e_losses, e_vars, _), (j_losses, j_vars, jf) = sides
    np.testing.assert_allclose(j_losses, e_losses, rtol=1e-5)
    for e, j in zip(e_vars, j_vars):
        np.testing.assert_allclose(j, e, rtol=1e-5, atol=1e-6)
    stats = janus.stats(jf)
    assert stats['split_calls'] >= 8 and stats['graph_part_calls'] >= 8, janus.explain(jf)
    line = NoiseGenerator.train_step.__code__.co_firstlineno + 2
    assert 'line %d runs in Python' % line in janus.explain(jf), janus.explain(jf)


def _one_stream(fn, *args):
    """What ``fn(*args)`` writes to stdout and stderr, in the order it reaches a
    terminal holding both (the file descriptors joined: tf.print writes to fd 2)."""
    import os
    import sys
    import tempfile
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as joined:
        saved = os.dup(1), os.dup(2)
        os.dup2(joined.fileno(), 1)
        os.dup2(joined.fileno(), 2)
        try:
            fn(*args)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        joined.seek(0)
        return [line for line in joined.read().decode().splitlines()
                if not line.startswith(('janus:', 'WARNING', 'W0000', 'I0000'))]


def test_a_tf_print_after_a_print_keeps_their_order():
    """``print`` is held back until the run ends; ``tf.print`` prints while the graph
    runs: a tf.print after a print runs in Python (a graph break at it), so a log
    reads as eagerly; a tf.print before a print stays in the graph."""
    def epoch(x):
        print('epoch start', flush=True)
        tf.print('loss', x * 2.0)
        return x + 1.0

    def before(x):
        tf.print('loss', x * 2.0)
        print('epoch end', flush=True)
        return x + 1.0

    for fn in (epoch, before):
        jf = janus.function(fn)
        for i in range(7):
            x = tf.constant(float(i))
            assert _one_stream(jf, x) == _one_stream(fn, x), (fn.__name__, i, janus.explain(jf))
        if fn is epoch:   # (its segments are too small for graphs: plain Python)
            assert any(e.reason is janus.reasons.Reason.PRINT_ORDER
                       for e in jf.__janus_function__.events), janus.explain(jf)
        else:
            assert janus.stats(jf)['graph_calls'] >= 3, janus.explain(jf)
