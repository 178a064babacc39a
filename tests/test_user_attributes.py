"""Attributes that run code: your properties, flags objects with ``__getattr__``,
attribute writes on Keras layers (``trace/attributes.py``, ``trace/access.py``).

Differential tests on fresh objects (``conftest.differential``): returns, state and
identity after every call, with the objects changed between calls; each checks
that the idiom now runs graphs.
"""
import tensorflow as tf

import janus
from tests.conftest import differential


def _call(*args, **kwargs):
    return lambda: (args, kwargs)


def _graph_runs(jf):
    return janus.stats(jf)['graph_calls']


class Args:
    """A config object with a computed property (``self.args.strategy``)."""

    def __init__(self, scale):
        self._scale = scale
        self.reads = 0

    @property
    def scale(self):
        return self._scale * 2.0

    @property
    def offset(self):
        self.reads += 1   # a property with a side effect: converted, replayed per call
        return 0.5


class Trainer:
    def __init__(self):
        self.args = Args(1.5)
        self._lr = 0.1

    @property
    def lr(self):
        return self._lr

    @lr.setter
    def lr(self, value):
        self._lr = max(value, 0.01)

    def step(self, x, decay=False):
        y = x * self.args.scale + self.args.offset
        if decay:
            self.lr = self.lr * 0.5
        return y * self.lr


def test_properties_of_your_classes_are_converted_like_methods():
    def make():
        t = Trainer()
        return t.step, t
    calls = [_call(tf.constant([1.0, 2.0]))] * 4 + [_call(tf.constant([1.0, 2.0]), decay=True)]
    calls += [_call(tf.constant([3.0, 1.0]))] * 3

    def state(t):
        return (t._lr, t.args.reads, t.args._scale)
    jf = differential(make, calls, state=state)
    assert _graph_runs(jf) >= 4, janus.explain(jf)


def test_a_property_changed_on_the_class_is_a_guard_miss():
    def make():
        class Box:
            def __init__(self):
                self.v = 2.0

            @property
            def double(self):
                return self.v * 2.0
        box = Box()

        def f(x, swap=False):
            if swap:
                type(box).double = property(lambda self: self.v * 3.0)
            return x * box.double
        return f, box
    calls = [_call(tf.constant(1.0))] * 4 + [_call(tf.constant(1.0), swap=True)]
    calls += [_call(tf.constant(1.0))] * 2
    differential(make, calls, state=lambda b: b.v)


class Flags:
    """absl-style flags: values in a dict, read through ``__getattr__``."""

    def __init__(self, **values):
        self.__dict__['_values'] = dict(values)

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError('unknown flag %r' % name) from None


class CountingConfig:
    """A ``__getattr__`` that counts its lookups (not pure): converted, not guarded."""

    def __init__(self):
        self.lookups = 0
        self.table = {'width': 3.0}

    def __getattr__(self, name):
        if name.startswith('_'):
            raise AttributeError(name)
        self.lookups += 1
        return self.table[name]


def test_a_flags_object_is_guarded_by_the_flags_read():
    def make():
        flags = Flags(scale=3.0, use_bias=True, name='run')

        def f(x):
            y = x * flags.scale
            if flags.use_bias:
                y = y + 1.0
            return y
        return f, flags
    jf = janus.function(make()[0])
    eager_f, eager_flags = make()
    janus_f, janus_flags = make()
    jf = janus.function(janus_f)
    x = tf.constant([1.0, -2.0])
    for step in range(8):
        if step == 5:   # the caller changes a flag: a guard miss, eager's value
            eager_flags._values['scale'] = janus_flags._values['scale'] = -1.0
        if step == 6:
            eager_flags._values['use_bias'] = janus_flags._values['use_bias'] = False
        assert eager_f(x).numpy().tolist() == jf(x).numpy().tolist()
    assert _graph_runs(jf) >= 3, janus.explain(jf)


def test_a_missing_flag_raises_as_eagerly():
    def make():
        flags = Flags(scale=3.0)

        def f(x, which):
            return x * getattr(flags, which) if which != 'scale' else x * flags.scale
        return f, flags
    calls = [_call(tf.constant(1.0), 'scale')] * 4 + [_call(tf.constant(1.0), 'nope')]
    differential(make, calls)


def test_an_impure_getattr_is_converted_and_counts_as_eagerly():
    def make():
        cfg = CountingConfig()

        def f(x):
            return x * cfg.width + cfg.width
        return f, cfg
    calls = [_call(tf.constant([1.0, 2.0]))] * 6
    jf = differential(make, calls, state=lambda c: c.lookups)
    assert _graph_runs(jf) >= 2, janus.explain(jf)


def test_a_keras_layer_keeps_a_list_of_its_outputs():
    """``self.all_layer_outputs = [...]`` in ``call()``: Keras's tracking stores a copy
    (a TrackedList), made again from the run's tensors when the write is replayed."""
    def make():
        tf.keras.utils.set_random_seed(5)

        class Encoder(tf.keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.dense = [tf.keras.layers.Dense(4), tf.keras.layers.Dense(4)]

            def call(self, x):
                outputs = []
                for i in range(len(self.dense)):
                    x = self.dense[i](x)
                    outputs.append(x)
                self.all_layer_outputs = outputs
                self.last = {'out': x, 'n': len(outputs)}
                return x
        layer = Encoder()
        return layer, layer

    def state(layer):
        outs = getattr(layer, 'all_layer_outputs', None)
        return (type(outs).__name__, [o.numpy() for o in outs or []],
                getattr(layer, 'last', {}).get('n'))
    calls = [_call(tf.ones([2, 3]) * i) for i in range(6)]
    jf = differential(make, calls, state=state)
    assert _graph_runs(jf) >= 2, janus.explain(jf)


class Shadowed:
    @property
    def y(self):
        return 5.0


class ShadowedSub(Shadowed):
    y = None   # a class attribute that is None shadows the base class's property


def test_a_class_attribute_that_is_none_shadows_a_property():
    def make():
        obj = ShadowedSub()

        def f(x):
            return x * 3.0 if obj.y is None else x * obj.y
        return f, obj
    jf = differential(make, [_call(tf.constant(1.0))] * 5)
    assert _graph_runs(jf) >= 1, janus.explain(jf)


def test_getattr_sees_what_the_call_wrote_before_reading():
    """A pure lookup reads the real object: only before the call wrote anything; an
    attribute the call set is read from the call's own write."""
    def make():
        cfg = Flags(scale=1.0)

        def f(x, s):
            cfg._values['scale'] = s
            return x * cfg.scale

        def g(x):
            fresh = Flags(scale=2.0)
            fresh.__dict__['scale'] = 3.0
            return f(x, 4.0) + x * fresh.scale
        return g, cfg
    jf = differential(make, [_call(tf.constant(1.5))] * 6, state=lambda c: dict(c._values))
    del jf


def test_reading_back_a_container_written_to_a_keras_layer_in_the_same_call():
    """Keras keeps a TrackedList copy: read back in the same call, janus runs the
    statement in Python (the state after the call is eager's either way)."""
    def make():
        class Cache(tf.keras.layers.Layer):
            def call(self, x):
                self.outs = [x, x * 2.0]
                kept = self.outs
                return x + kept[1], type(kept).__name__
        layer = Cache()
        return layer, layer
    differential(make, [_call(tf.ones([2]))] * 5,
                 state=lambda layer: type(getattr(layer, 'outs', None)).__name__)


def test_a_keras_layer_reads_back_a_list_it_set_in_the_same_call():
    """``self.feats = []`` then ``self.feats.append(h)`` and ``self.feats[-1]``: the
    call reads Keras's own kind of copy (a TrackedList), nested lists too, and the
    layer keeps eager's after the call; returning the kept list itself stays eager's
    (refused: it would not be the layer's own object)."""
    def make():
        tf.keras.utils.set_random_seed(2)

        class Pyramid(tf.keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.dense = [tf.keras.layers.Dense(4) for _ in range(3)]

            def call(self, x, keep=False):
                self.feats = []
                self.levels = {'sizes': [], 'last': None}
                h = x
                for layer in self.dense:
                    h = layer(h)
                    self.feats.append(h)
                    self.levels['sizes'].append(len(self.feats))
                self.levels['last'] = h
                out = self.feats[-1] + self.feats[0]
                if keep:
                    return out, self.feats
                return out, type(self.feats).__name__, type(self.levels['sizes']).__name__
        layer = Pyramid()
        return layer, layer

    def state(layer):
        feats = getattr(layer, 'feats', None)
        levels = getattr(layer, 'levels', {})
        return (type(feats).__name__, [f.numpy() for f in feats or []],
                type(levels).__name__, type(levels.get('sizes')).__name__,
                list(levels.get('sizes', [])))
    calls = [_call(tf.ones([2, 3]) * i) for i in range(6)]
    calls += [lambda i=i: ((tf.ones([2, 3]) * i,), {'keep': True}) for i in range(3)]
    jf = differential(make, calls, state=state)
    assert _graph_runs(jf) >= 2, janus.explain(jf)
