"""Per-function state, per-graph memory and converted signatures (issue 17, items 7 and 8).

* A janus function's state (profile, graphs, relaxed numbers and sites, failed
  conversions...) lives in one record that a redefinition replaces wholesale:
  a function whose first body did not convert converts once its ``__code__``
  is rebound to one that does.
* Everything janus keeps per graph goes with the graph: evicting graphs keeps
  memory flat however many were built.
* A converted function keeps its signature: defaults, keyword-only parameters,
  ``*args``/``**kwargs`` and mutable defaults of inlined callees and of your
  Keras layers' ``call`` (with Keras's own ``training``/``mask`` injection).

Each behaviour test runs a program eagerly and under janus on fresh objects,
changes the program from outside mid-way so an assumption breaks, and
compares returns, exceptions, stdout and state after every call; where the
program must convert, a graph must have run.

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import keras
import pytest
import tensorflow as tf

import janus
from conftest import assert_same, outcome


def run_both(make, steps, state=None, **janus_options):
    """Runs ``make()``'s function eagerly and under janus on fresh programs.

    ``make()`` returns (fn, program); each step is ``(change, call)``:
    ``change(program)`` (or None) changes the program from outside before the
    call, on each side; ``call(program)`` returns (args, kwargs).  After every
    call the outcomes and ``state(program)`` must agree.  Returns the janus
    function."""
    eager_fn, eager_program = make()
    plain, janus_program = make()
    janus_fn = janus.function(plain, **janus_options)
    for number, (change, call) in enumerate(steps):
        where = 'call %d' % number
        seen = []
        for fn, program in ((eager_fn, eager_program), (janus_fn, janus_program)):
            if change is not None:
                change(program)
            args, kwargs = call(program)
            seen.append((outcome(fn, *args, **kwargs), state(program) if state else None))
        (expected, e_state), (actual, a_state) = seen
        assert expected[0] == actual[0], '%s: eager %s, janus %s' % (where, expected, actual)
        if expected[0] == 'ok':
            assert_same(expected[1], actual[1], where)
        else:
            assert expected[1:] == actual[1:], where
        if state is not None:
            assert_same(e_state, a_state, where + ' state')
    return janus_fn


def plan(call, n=10, changes=None):
    """n steps of ``call(program, i)``; ``changes``: call number -> change before it."""
    changes = changes or {}
    return [(changes.get(i), (lambda p, i=i: call(p, i))) for i in range(n)]


def converted(jf):
    stats = janus.stats(jf)
    assert stats['graphs_built'] >= 1 and stats['graph_calls'] > 0, janus.explain(jf)
    return stats


def x_of(i, sign=1.0, shape=(3, 4)):
    return sign * tf.abs(tf.random.stateless_normal(shape, seed=[i, 7])) + 0.1


def weights(model):
    return [tf.convert_to_tensor(v) for v in model.weights]


class Box:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)


# ---------------------------------------------------------------------------
# A converted function keeps its signature
# ---------------------------------------------------------------------------

class Scaled(keras.Model):
    """A user-written ``call`` with a default the caller leaves out."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2)

    def call(self, x, scale=2.0):
        return self.dense(x) * scale


def _model(cls):
    keras.utils.set_random_seed(3)
    net = cls()
    net(tf.zeros([3, 4]))
    return net


def test_keras_call_keeps_its_default(strict):
    """``net(x)`` on ``call(self, x, scale=2.0)``: the default is filled in (it was
    dropped, the trace failed and every call ran imperatively)."""
    def make():
        net = _model(Scaled)
        prog = Box(net=net, bias=tf.constant(0.5))

        def step(x):
            return net(x) + prog.bias
        return step, prog

    def new_bias(p):
        p.bias = tf.constant([1.0, -1.0])   # a new shape: the first graph's guard fails
    jf = run_both(make, plan(lambda p, i: ((x_of(i),), {}), 10, {6: new_bias}),
                  state=lambda p: weights(p.net))
    converted(jf)


def test_keras_call_default_and_keyword_override(strict):
    """``net(x)`` and ``net(x, scale=s)`` in one call; the call's own default rebound."""
    def make():
        net = _model(Scaled)

        def step(x, s):
            return net(x) - net(x, scale=s)
        return step, net

    def rebind(net):
        type(net).call.__defaults__ = (3.0,)
    try:
        jf = run_both(make, plan(lambda p, i: ((x_of(i), 0.5), {}), 10, {6: rebind}),
                      state=weights)
    finally:
        Scaled.call.__defaults__ = (2.0,)
    converted(jf)


class Gate(keras.Model):
    """``training`` injected by Keras: None unless the caller (or an outer layer) says."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2)

    def call(self, x, training=None):
        y = self.dense(x)
        if training:
            return y * 0.5
        return y + 1.0


class Masked(keras.Model):
    """``training=False, mask=None``: Keras fills ``mask`` from the input's mask."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2)

    def call(self, x, training=False, mask=None):
        y = self.dense(x)
        if mask is not None:
            y = y * tf.cast(mask, y.dtype)[:, None]
        return y * 2.0 if training else y


@pytest.mark.parametrize('cls', [Gate, Masked])
def test_keras_training_flag_injected_into_call(strict, cls):
    """``net(x)`` and ``net(x, training=True)``, the flag switched from outside mid-way."""
    def make():
        net = _model(cls)
        prog = Box(net=net, training=False)

        def step(x):
            return net(x), net(x, training=True), net(x, training=prog.training)
        return step, prog

    def train(p):
        p.training = True
    jf = run_both(make, plan(lambda p, i: ((x_of(i),), {}), 10, {6: train}),
                  state=lambda p: weights(p.net))
    converted(jf)


def test_keras_call_with_mutable_default_and_kwargs(strict):
    """A ``call`` with a mutable default it appends to and ``**kwargs`` it passes on."""
    def make():
        class Logged(keras.Model):
            def __init__(self):
                super().__init__()
                self.dense = keras.layers.Dense(2)

            def call(self, x, log=[], **options):   # noqa: B006 - the default is the state
                log.append(len(log))
                return scaled(self.dense(x), **options)
        net = _model(Logged)

        def step(x, i):
            return net(x, shift=1.0) if i % 2 else net(x)
        return step, net

    def reset(net):
        type(net).call.__defaults__[0].clear()
    state = lambda net: (weights(net), list(type(net).call.__defaults__[0]))  # noqa: E731
    jf = run_both(make, plan(lambda p, i: ((x_of(i), i), {}), 10, {6: reset}), state=state)
    converted(jf)


def scaled(x, factor=1.0, *, shift=0.0, **unused):
    return x * factor + shift


def test_inlined_callees_keep_keyword_only_defaults_args_and_kwargs(strict):
    """Keyword-only parameters with defaults, ``*args`` and ``**kwargs`` passed through."""
    def total(*xs, scale=1.0, **options):
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return scaled(out, scale, **options)

    def make():
        prog = Box(shift=0.0, calls=0)

        def step(x, *rest, **options):
            prog.calls += 1
            return (total(x, *rest, shift=prog.shift, **options), scaled(x, shift=1.0),
                    total(x))
        return step, prog

    def move(p):
        p.shift = 2.5
    calls = lambda p, i: ((x_of(i), x_of(i + 1)), {'scale': 2.0})  # noqa: E731
    jf = run_both(make, plan(calls, 10, {6: move}), state=lambda p: (p.shift, p.calls))
    converted(jf)


def test_mutable_defaults_of_inlined_callees_accumulate(strict):
    """A keyword-only mutable default, written on every call."""
    def make():
        def record(x, *, seen={}):   # noqa: B006 - the default is the state
            seen[len(seen)] = 1
            return x * float(len(seen))

        def step(x):
            return record(x)
        return step, record

    def clear(fn):
        fn.__kwdefaults__['seen'].clear()
    jf = run_both(make, plan(lambda fn, i: ((x_of(i),), {}), 8, {5: clear}),
                  state=lambda fn: dict(fn.__kwdefaults__['seen']))
    converted(jf)
