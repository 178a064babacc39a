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
import gc
import io
import weakref

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

        def step(x, *rest, bias=0.5, history=[], **options):   # noqa: B006
            prog.calls += 1
            history.append(prog.calls)
            return (total(x, *rest, shift=prog.shift, **options), scaled(x, shift=bias),
                    total(x), len(history))
        return step, prog

    def move(p):
        p.shift = 2.5
    def calls(p, i):
        keywords = {'scale': 2.0, 'bias': 1.5} if i > 7 else {'scale': 2.0}
        return (x_of(i), x_of(i + 1)), keywords
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


# ---------------------------------------------------------------------------
# What janus keeps per graph goes with the graph
# ---------------------------------------------------------------------------

class Stepper:
    """A training-step-like method: a counter, a variable update, a speculated tensor
    branch, a list of Python numbers, and a site whose real control flow cannot be
    built (a write to a text buffer janus does not convert: its outcome is assumed)."""

    def __init__(self):
        self.step = 0
        self.w = tf.Variable([1.0, 2.0, 3.0])
        self.history = []
        self.log = io.StringIO()

    def run(self, x, mode):
        self.step += 1
        y = x * self.w
        if tf.reduce_sum(y) > 0:
            y = y + 1.0
        self.w.assign_add(y * 0.0)
        if self.step % 1000 == 999:
            self.log.write(mode)
        self.history.append(self.step)
        return y


def _live(objects):
    gc.collect()
    return sum(1 for ref in objects if ref() is not None)


@pytest.mark.parametrize('heap_ops', [False, True])
def test_memory_stays_flat_over_200_evictions(heap_ops):
    """Every call passes a new ``mode`` string: a new graph per call, the oldest
    evicted (cache_size_limit=2, and no growth: cache_size_max=2).  Evicted graphs, their ConcreteFunctions and the
    functions TF registered for them must be freed: the counts after 20 and after
    220 calls are the same."""
    from tensorflow.python.eager import context
    prog = Stepper()
    x = tf.constant([1.0, -0.5, 0.25])
    with janus.config.patch(cache_size_limit=2, cache_size_max=2, recompile_limit=1000,
                            reprofile_calls=0, log_recompiles=False, heap_ops=heap_ops):
        jf = janus.function(prog.run, profile_calls=1)
        entries, graphs = [], []
        counts = []
        for i in range(221):
            jf(x, 'mode%d' % i)
            newest = jf.cache.newest()
            if newest is not None:   # the first call is profiled
                entries.append(weakref.ref(newest))
                graphs.append(weakref.ref(newest.concrete))
            if i in (20, 220):
                counts.append((_live(entries), _live(graphs),
                               len(context.context().list_function_names())))
    stats = janus.stats(jf)
    assert stats['evictions'] >= 200 and stats['graph_calls'] >= 200, janus.explain(jf)
    assert counts[0][:2] == (2, 2), counts
    assert counts[1] == counts[0], counts
    assert 'assumed instead' in janus.explain(jf)   # per-graph bookkeeping was exercised
    assert prog.history == list(range(1, 222))


# ---------------------------------------------------------------------------
# Redefinition resets everything janus learned about the old body
# ---------------------------------------------------------------------------

def _trainer_class():
    """A class per side: each side's methods are rebound on its own class."""
    class Trainer:
        def __init__(self):
            self.step = 0
            self.w = tf.Variable([0.5, -0.25, 1.0])
            self.log = io.StringIO()
            self.limit_mode = 'a'

        def tried(self, x):   # janus does not convert this try statement
            try:   # Keras raises ValueError for an unknown name: janus cannot vouch for it
                y = tf.keras.activations.get('linear_' + self.limit_mode)(x * self.w)
            except ValueError:
                y = x * self.w
            self.step += 1
            self.w.assign_add(0.125 * y)
            if tf.reduce_sum(y) > 0:
                return y * 2.0
            return y

        def logged(self, x):   # the trace refuses the text buffer's write
            y = x * self.w
            self.log.write('step')
            self.step += 1
            self.w.assign_add(0.125 * y)
            return y

        def moded(self, x):   # a graph per mode: past recompile_limit, imperative
            y = x * self.w
            if self.limit_mode == 'a':
                y = y + 1.0
            self.step += 1
            self.w.assign_add(0.125 * y)
            return y

        def plain(self, x):   # converts
            y = x * self.w
            self.step += 1
            self.w.assign_add(0.125 * y)
            if tf.reduce_sum(y) > 0:
                return y * 2.0
            return y
    return Trainer


@pytest.mark.parametrize('first', ['tried', 'logged', 'moded'])
def test_a_function_that_did_not_convert_converts_once_redefined(first):
    """The first body fails to convert (a try statement), fails to trace, or reaches
    the recompile limit; ``Trainer.<first>.__code__`` is then rebound to a body that
    converts: janus profiles and converts the new body (``failed_conversion``, the
    failed call shapes and the recompile budget used to survive the redefinition)."""
    def make():
        t = _trainer_class()()
        return getattr(t, first), t

    def redefine(t):
        method = getattr(type(t), first)
        method.__code__ = type(t).plain.__code__

    def new_mode(t):
        t.limit_mode += 'b'
    changes = {i: new_mode for i in range(3, 8)}
    changes.update({8: redefine, 14: lambda t: t.w.assign(-t.w)})
    with janus.config.patch(recompile_limit=2):
        jf = run_both(make, plan(lambda t, i: ((x_of(i, shape=(3,)),), {}), 20, changes),
                      state=lambda t: (t.step, tf.convert_to_tensor(t.w)))
    stats = janus.stats(jf)
    assert stats['graph_calls'] >= 4, janus.explain(jf)
    assert 'redefined' in janus.explain(jf)


@pytest.mark.usefixtures("without_graph_breaks")
def test_redefinition_replaces_every_field_of_the_function_state():
    """Everything janus learned per function lives in one record, and a redefinition
    replaces all of it: after it no field holds what the old definition had."""
    from janus import function_state
    Trainer = _trainer_class()

    def step(t, x, mode, items):
        y = x * t.w
        if tf.reduce_sum(y) > 0:   # assumed, then broken: a relaxed site
            y = y * 2.0
        if mode == 'log':           # this call shape fails to trace
            t.log.write(mode)
        t.step += 1                 # rewritten every call: a dynamic number
        return y + float(len(items))
    t = Trainer()
    jf = janus.function(step, profile_calls=2)
    items = []
    for i in range(12):
        items.append(i)             # a growing list argument: passed as itself
        x = x_of(i, sign=-1.0 if i == 7 else 1.0, shape=(3,))
        jf(t, x, 'log' if i in (9, 10) else 'm%d' % (i % 3), items)
    old = jf.state
    dirty = {name for name in function_state.fields()
             if getattr(old, name) not in (None, 0, [], {}, set())}
    assert {'cache', 'graphs_built', 'failed_signatures', 'opaque_lists',
            'miss_values'} <= dirty, (dirty, janus.explain(jf))
    assert old.speculation.relaxed_sites, janus.explain(jf)
    assert old.scalars.dynamic, janus.explain(jf)

    step.__code__ = (lambda t, x, mode, items: x * 3.0).__code__
    assert_same(jf(t, x, 'm0', items), x * 3.0)
    new = jf.state
    assert new is not old
    for name in function_state.fields():
        before, after = getattr(old, name), getattr(new, name)
        assert after is not before or after in (None, 0), name
    assert not new.cache.entries() and not new.speculation.relaxed_sites and not new.scalars.dynamic
    assert not new.failed_signatures and not new.opaque_lists and not new.miss_values
    assert new.graphs_built == 0 and new.profile.calls == 1
