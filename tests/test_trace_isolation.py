"""janus's own machinery stays out of sight: of your frames, of other threads, of Keras.

The profiler runs your function's code with probes (a twin of it): ``locals()``,
``vars()``, ``dir()``, frame objects, ``eval`` and tracebacks inside it see
exactly what they see eagerly (no janus names, no janus frames between your
frames).  While one thread profiles or traces a subclassed Keras model,
another thread calling the same model plainly runs the model's own
``call`` and prints normally.  What Keras itself changes on a layer while
janus traces it (its losses: ``add_loss``, activity regularizers) is what
eager leaves there after every call, not the trace's symbolic tensors.

Each test runs the program eagerly and under janus on fresh objects and
compares returns, stdout and state after every call, with the program's
regime changed mid-way (a new argument type, a branch that flips).

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import inspect
import sys
import threading
import traceback

import keras
import pytest
import tensorflow as tf

import janus
from conftest import differential
from janus.library import library_state


def c(value):
    return tf.constant(value)


def calls_with(values):
    return [((c(v),), {}) for v in values]


# -- (a) the profiler's copy: frames look like the original's ----------------

def caller_view():
    """What a helper sees of its caller's frame."""
    caller = sys._getframe(1)
    return caller.f_code.co_name, sorted(caller.f_locals)


def make_introspecting():
    offset = 3

    def step(x, scale=2.0, shift=1.0):
        seen = [sorted(locals()), sorted(vars()), dir(),
                sorted(inspect.currentframe().f_locals),
                sys._getframe().f_code.co_name, sys._getframe().f_code.co_qualname,
                eval('scale + offset'), caller_view()]

        def inner(a):
            return sorted(locals()), offset
        seen.append(inner(1))
        seen.append((lambda b: sorted(locals()))(2))
        seen.append([sorted(locals()) for _ in range(1)])
        print('locals:', sorted(locals()))
        return x * scale + shift, seen
    return step, None


def test_locals_vars_dir_and_frames_in_profiled_calls_are_the_originals(capsys):
    # float32, then float64 tensors; the trace refuses locals(): later calls run plainly.
    values = [c(1.0), c(2.0), c(3.0), c(4.0)] + [tf.constant(5.0, tf.float64)] * 2
    jf = differential(make_introspecting, [((v,), {}) for v in values])
    assert janus.stats(jf)['profiled_calls'] == 3   # the probed twin ran
    assert '__jp' not in capsys.readouterr().out


class Tuner:
    """Records its hyper-parameters with ``dict(locals())``, as configs often do."""

    def __init__(self):
        self.step = 0
        self.history = []

    def update(self, x, lr=0.1, decay=0.5):
        params = dict(locals())
        params.pop('self')
        self.step += 1
        self.history.append(sorted(params))
        if tf.reduce_sum(x) > 0:
            return x * lr
        return x * decay


def test_a_method_recording_its_locals_sees_its_parameters_only():
    def make():
        tuner = Tuner()
        return tuner.update, tuner
    calls = calls_with([1.0, 2.0, 3.0, 4.0, -5.0, 6.0])   # the branch flips mid-way
    differential(make, calls, state=lambda t: (t.step, t.history))


def failing_helper(x):
    raise ValueError('bad %d' % int(x))


def make_traceback_reader():
    def step(x):
        try:
            y = 1.0 + failing_helper(x)
        except ValueError:
            frames = traceback.extract_tb(sys.exc_info()[2])
            where = [(f.name, f.line, f.colno, f.end_colno) for f in frames]
            return x, where
        return y, []
    return step, None


# The try makes a graph break: a traceback through a segment shows janus's frames
# between the skeleton's and the segment's (DESIGN.md, Graph breaks).
@pytest.mark.usefixtures('without_graph_breaks')
def test_a_traceback_through_a_profiled_call_has_the_users_frames_only():
    differential(make_traceback_reader, calls_with([1.0, 2.0, 3.0, 4.0, 5.0]))


def numbers(n):
    for i in range(n):
        if i == 2:
            raise KeyError('no %d' % i)
        yield float(i)


class Flag:
    """A truth test and an iteration that look at who calls them."""

    def __init__(self, on):
        self.on = on

    def __bool__(self):
        return self.on and sys._getframe(1).f_code.co_name == 'walk'

    def __iter__(self):
        return iter([sys._getframe(1).f_code.co_name])


def make_iterating():
    def walk(x, flag):
        seen = [name for name in flag] if flag else []
        try:
            for v in numbers(4):
                x = x + v
        except KeyError:
            frames = traceback.extract_tb(sys.exc_info()[2])
            seen.append([(f.name, f.line) for f in frames])
        return x, seen
    return walk, None


# The try makes a graph break: a traceback through a segment shows janus's frames
# between the skeleton's and the segment's (DESIGN.md, Graph breaks).
@pytest.mark.usefixtures('without_graph_breaks')
def test_iterators_and_truth_tests_in_profiled_calls_see_the_users_frame():
    calls = [((c(float(i)), Flag(i % 2 == 0)), {}) for i in range(6)]
    differential(make_iterating, calls)


class Report:
    def __init__(self):
        self.lines = []

    def log(self, x):
        header = """step:
            value"""
        self.lines.append(header)
        if tf.reduce_sum(x) > 0:
            return x * 2.0, header
        return x, header


def test_a_multi_line_string_in_an_indented_def_keeps_its_indentation():
    def make():
        report = Report()
        return report.log, report
    calls = calls_with([1.0, 2.0, 3.0, 4.0, 5.0, -6.0, 7.0])   # a graph, then a fallback
    jf = differential(make, calls, state=lambda r: r.lines)
    assert janus.stats(jf)['graph_calls'] > 0


# -- (b) threads: a model janus traces or profiles, called plainly meanwhile --

class Net(keras.Model):
    def __init__(self, hook):
        super().__init__()
        self.d1 = keras.layers.Dense(4, kernel_initializer='ones', activation=hook)
        self.d2 = keras.layers.Dense(1, kernel_initializer='ones')

    def call(self, x):
        h = self.d1(x)
        if tf.reduce_sum(h) > 0:
            h = h * 2.0
        return self.d2(h)


class PlainCaller:
    """Another thread that calls the model plainly (and prints) whenever the
    training thread, inside the model's call, asks it to, and waits for it."""

    def __init__(self, net, x):
        self.net, self.x = net, x
        self.go, self.done, self.stop = threading.Event(), threading.Event(), threading.Event()
        self.results, self.errors = [], []
        self.thread = threading.Thread(target=self.serve, daemon=True)

    def serve(self):
        while not self.stop.is_set():
            if not self.go.wait(0.05):
                continue
            self.go.clear()
            try:
                self.results.append(self.net(self.x).numpy().tolist())
                print('plain call', len(self.results))
            except Exception as e:  # noqa: BLE001 - the error is what the test looks at
                self.errors.append('%s: %s' % (type(e).__name__, e))
            self.done.set()

    def hook(self, h):
        """The first layer's activation: Keras runs it as is, in the training thread
        while janus profiles or traces the model, so the plain call happens then."""
        if threading.current_thread() is not self.thread and self.thread.is_alive():
            self.done.clear()
            self.go.set()
            assert self.done.wait(30), 'the plain call did not finish'
        return tf.nn.relu(h)


def train(janus_step, net, calls):
    losses = []
    for i in range(calls):
        x = c([[float(i) - 4.0, 1.0, -2.0]])
        losses.append(janus_step(x).numpy().tolist())
    return losses


def test_a_model_being_traced_or_profiled_runs_plainly_in_another_thread(capsys):
    x_eval = c([[1.0, 2.0, 3.0]])
    box = {}
    net = Net(lambda h: box['caller'].hook(h))
    caller = box['caller'] = PlainCaller(net, x_eval)
    net(tf.zeros([1, 3]))
    opt = keras.optimizers.SGD(0.0)   # weights never change: every plain call agrees
    expected = net(x_eval).numpy().tolist()

    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(net(x))
        grads = tape.gradient(loss, net.trainable_variables)
        opt.apply_gradients(zip(grads, net.trainable_variables))
        return loss

    eager = train(step, net, 10)
    capsys.readouterr()
    caller.thread.start()
    try:
        jf = janus.function(step)
        got = train(jf, net, 10)   # the branch flips at call 4: a fallback, a new trace
    finally:
        caller.stop.set()
        caller.thread.join(30)
    assert got == eager
    assert caller.errors == []
    assert caller.results and all(r == expected for r in caller.results)
    stats = janus.stats(jf)
    assert stats['graph_calls'] > 0 and stats['profiled_calls'] > 0
    # A plain call (and its print) happened during each profiled call and each trace.
    assert len(caller.results) >= stats['profiled_calls'] + stats['graphs_built']
    printed = capsys.readouterr().out
    assert printed.count('plain call') == len(caller.results)
    assert 'call' not in vars(net)   # the model is left as it was


# -- (c) what Keras changes on a layer while janus traces it -------------------

class Penalized(keras.layers.Layer):
    """Adds a loss on every call (a VAE's KL term, say)."""

    def call(self, x):
        self.add_loss(tf.reduce_sum(x) * 0.1)
        return x * 2.0


class Regularized(keras.Model):
    def __init__(self):
        super().__init__()
        self.d = keras.layers.Dense(2, kernel_initializer='ones', activity_regularizer='l2')
        self.penalty = Penalized()
        self.calls = 0

    def call(self, x):
        self.calls += 1
        h = self.d(x)
        if tf.reduce_sum(h) > 5.0:
            h = self.penalty(h)
        return h


def make_regularized(read_losses):
    def make():
        net = Regularized()
        net(tf.zeros([1, 2]))

        def step(x, extra=False):
            y = net(x)
            if extra:
                net.add_loss(tf.reduce_mean(y))
            if read_losses:
                return tf.reduce_sum(y) + tf.add_n(net.losses)
            return tf.reduce_sum(y)
        return step, net
    return make


def losses_of(net):
    return [l.numpy().tolist() for l in net.losses], net.calls


@pytest.mark.parametrize('read_losses', [False, True])
def test_losses_keras_adds_at_trace_time_are_each_calls_values(read_losses):
    values = [0.0, 3.0, 0.5, 4.0, 1.0, 5.0, 0.2, 6.0, 0.1, 7.0]   # the tf.cond's sides alternate
    calls = [((c([[v, 1.0]]),), {'extra': i >= 6}) for i, v in enumerate(values)]
    jf = differential(make_regularized(read_losses), calls, state=losses_of)
    if not read_losses:   # reading the losses a tf.cond's branch added runs imperatively
        assert janus.stats(jf)['graph_calls'] > 0


def test_losses_of_a_straight_line_call_are_replayed_in_the_graph():
    def make():
        net = Regularized()
        net(tf.zeros([1, 2]))

        def step(x):
            return tf.reduce_sum(net(x)) + tf.add_n(net.losses)
        return step, net
    calls = [((c([[v, 1.0]]),), {}) for v in [6.0, 7.0, 8.0, 9.0, 10.0, 0.0, 11.0]]
    jf = differential(make, calls, state=losses_of)   # call 5 breaks the speculated branch
    assert janus.stats(jf)['graph_calls'] > 0


def test_a_graph_tensor_left_in_library_state_refuses_the_trace(monkeypatch):
    monkeypatch.setattr(library_state, 'restore', lambda ctx: None)
    make = make_regularized(False)
    jf = differential(make, [((c([[v, 1.0]]),), {}) for v in [6.0, 7.0, 8.0, 9.0, 10.0]],
                      state=losses_of)
    assert janus.stats(jf)['graph_calls'] == 0
    assert 'kept a graph tensor' in janus.explain(jf)
