"""Ordinary Python that training code is full of, found by a bug hunt on code
nobody wrote for janus: each runs eagerly and under janus on fresh objects,
compared after every call (returns, exceptions with their context, state,
identity), with state changed from outside mid-way.
"""
import collections

import pytest
import tensorflow as tf

import janus
from conftest import assert_same, differential, outcome


def test_a_user_exception_after_a_broken_assumption_has_no_janus_context():
    """``raise ValueError`` on a bad batch: eager's exception has no __context__; the
    fallback re-run must not chain janus's AssertionBroke onto it."""
    def make():
        v = tf.Variable(0.0)

        def step(x):
            if tf.reduce_any(x < 0):
                raise ValueError('negative input')
            v.assign_add(tf.reduce_sum(x))
            return v.read_value()
        return step, v
    eager_fn, eager_v = make()
    plain_fn, janus_v = make()
    jf = janus.function(plain_fn)
    for i in range(7):
        x = tf.constant([-1.0, 2.0]) if i == 5 else tf.constant([1.0, 2.0])
        expected, actual = [], []
        for fn, seen in ((eager_fn, expected), (jf, actual)):
            try:
                seen.append(fn(x))
            except ValueError as e:
                seen.append((str(e), e.__context__, e.__cause__))
        if i == 5:
            assert actual == expected == [('negative input', None, None)]
        else:
            assert_same(expected[0], actual[0], 'call %d' % i)
        assert_same(tf.convert_to_tensor(eager_v), tf.convert_to_tensor(janus_v))
    assert janus.stats(jf)['fallbacks'] == 1


def test_passed_through_tensors_come_back_as_the_same_objects(strict):
    class Buffer:
        def __init__(self):
            self.last = tf.constant([0.0])

    def make():
        buf = Buffer()

        def step(x):
            previous = buf.last
            buf.last = x
            return x, previous, x * 2.0
        return step, buf
    eager_fn, eager_buf = make()
    plain_fn, janus_buf = make()
    jf = janus.function(plain_fn)
    for i in range(6):
        x = tf.constant([float(i)])
        before = janus_buf.last
        out = jf(x)
        assert out[0] is x and out[1] is before and janus_buf.last is x
        expected = eager_fn(x)
        assert_same(expected, out, 'call %d' % i)
    assert janus.stats(jf)['graph_calls'] >= 2


def test_a_tf_function_helper_is_not_traced_again_for_relaxed_shapes():
    """A user's @tf.function helper reads Python config when TF traces it.  Eager traces
    it once per shape; janus must not trace it again for a relaxed (None) shape."""
    def make():
        config = {'scale': 1.0}
        traces = []

        @tf.function
        def helper(x):
            traces.append(tuple(x.shape))
            return x * config['scale']

        def step(x):
            return helper(x) + 1.0
        return step, (config, traces)
    eager_fn, (eager_config, eager_traces) = make()
    plain_fn, (janus_config, janus_traces) = make()
    jf = janus.function(plain_fn)
    sizes = [2, 3, 2, 3, 2, 3, 2, 3, 2]
    for i, n in enumerate(sizes):
        if i == 6:
            eager_config['scale'] = janus_config['scale'] = 10.0   # frozen in both traces
        x = tf.ones([n])
        assert_same(eager_fn(x), jf(x), 'call %d' % i)
        assert eager_traces == janus_traces, 'call %d' % i


def test_getattr_hasattr_and_lazy_initialisation(strict):
    class Model:
        def __init__(self):
            self.scale = tf.constant(2.0)

    def make():
        m = Model()

        def step(x, name):
            if not hasattr(m, 'cache'):
                bias = 0.0
            else:
                bias = getattr(m, 'cache')
            return x * getattr(m, name) + bias + getattr(m, 'missing', 1.0)
        return step, m
    eager_fn, eager_m = make()
    plain_fn, janus_m = make()
    jf = janus.function(plain_fn)
    for i in range(8):
        if i == 5:
            eager_m.cache = janus_m.cache = tf.constant(100.0)
        if i == 6:
            eager_m.missing = janus_m.missing = 7.0
        x = tf.constant([float(i)])
        assert_same(outcome(eager_fn, x, 'scale'), outcome(jf, x, 'scale'), 'call %d' % i)
    assert janus.stats(jf)['graph_calls'] >= 2


def test_namedtuple_fields_sorted_sets_and_isinstance_dispatch(strict):
    State = collections.namedtuple('State', 'h c')

    class Act:
        def __call__(self, x):
            return tf.nn.relu(x)

    class Tanh(Act):
        def __call__(self, x):
            return tf.tanh(x)

    class Net:
        def __init__(self):
            self.state = State(tf.constant([1.0]), tf.constant([2.0]))
            self.act = Act()
            self.losses = {'l2'}
            self.order = [3, 1, 2]

    def make():
        net = Net()

        def step(x):
            y = x * net.state.h + net.state.c
            if isinstance(net.act, Tanh):
                y = y * 10.0
            if 'l2' in net.losses:
                y = y + 0.5
            return net.act(y) * float(sorted(net.order)[0])
        return step, net
    eager_fn, eager_net = make()
    plain_fn, janus_net = make()
    jf = janus.function(plain_fn)
    for i in range(10):
        if i == 4:
            for net in (eager_net, janus_net):
                net.state = State(tf.constant([-1.0]), tf.constant([0.5]))
        if i == 6:
            eager_net.act, janus_net.act = Tanh(), Tanh()
        if i == 7:
            eager_net.losses.clear()
            janus_net.losses.clear()
        if i == 8:
            eager_net.order.append(0)
            janus_net.order.append(0)
        x = tf.constant([float(i) - 3.0])
        assert_same(eager_fn(x), jf(x), 'call %d' % i)
    assert janus.stats(jf)['graph_calls'] >= 2


@pytest.mark.parametrize('form', ['keywords', 'mapping and keywords'])
def test_update_of_an_outside_dict_with_keywords(strict, form):
    def make():
        def step(metrics, x):
            if form == 'keywords':
                metrics.update(loss=x * 2.0, steps=1)
            else:
                metrics.update({'loss': x}, acc=x + 1.0)
            return x
        return step, None
    calls = []
    for i in range(6):
        calls.append(lambda i=i: (({'loss': tf.constant(0.0)}, tf.constant(float(i))), {}))
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] >= 2


def test_a_replay_buffer_appended_then_read_in_the_same_call(strict):
    """``self.buffer.append(t)`` then ``len``/``in``/truthiness/``tf.add_n``/indexing of
    the same list (and new keys of a dict) in one call: reads see the changes, in
    program order; the object written back is the caller's very list."""
    class Replay:
        def __init__(self):
            self.buffer = [tf.constant(0.0), tf.constant(1.0)]
            self.meta = {'seen': tf.constant(0.0)}

    def make():
        replay = Replay()

        def step(x):
            replay.buffer.append(x)
            replay.buffer.insert(0, x * 2.0)
            replay.buffer[-1] = replay.buffer[-1] + 10.0
            replay.meta['last'] = x
            replay.meta['seen'] = replay.meta['seen'] + 1.0
            total = tf.add_n(replay.buffer) + replay.meta['last']
            if replay.buffer and 'last' in replay.meta:
                total = total + float(len(replay.buffer))
            return total, replay.buffer
        return step, replay
    eager_fn, eager_replay = make()
    plain_fn, janus_replay = make()
    jf = janus.function(plain_fn)
    for i in range(9):
        if i in (3, 6):   # trimmed from outside: back to two items
            for replay in (eager_replay, janus_replay):
                del replay.buffer[2:]
                replay.meta.pop('last')
        x = tf.constant(float(i))
        expected, actual = eager_fn(x), jf(x)
        assert_same(expected, actual, 'call %d' % i)
        assert actual[1] is janus_replay.buffer
        assert_same(eager_replay.meta, janus_replay.meta, 'call %d meta' % i)
    assert janus.stats(jf)['graph_calls'] >= 2


def test_nonlocal_counters_in_nested_functions(strict):
    """Found by the fuzzer (seed ci, programs 93/118): a helper defined inside the
    function bumping ``nonlocal`` state wrote a module global instead."""
    def make():
        def step(x):
            calls = 0
            scale = 1.0

            def bump(by):
                nonlocal calls, scale
                calls += 1
                scale = scale * by
            bump(2.0)
            bump(3.0)
            return x * scale + calls, calls
        return step, None
    jf = differential(make, [((tf.constant([float(i)]),), {}) for i in range(6)])
    assert janus.stats(jf)['graph_calls'] >= 2


def test_nonlocal_write_in_a_tensor_dependent_loop_runs_imperatively():
    def make():
        def count_down(x):
            steps = 0

            def tick():
                nonlocal steps
                steps = steps + 1
            while tf.reduce_sum(x) > 0:
                tick()
                x = x - 1.0
            return steps
        return count_down, None
    jf = differential(make, [((tf.constant([float(i % 3 + 1)]),), {}) for i in range(7)])
    assert 'enclosing variable steps' in janus.explain(jf)


def test_looping_over_an_outside_dict_after_adding_a_key():
    """Found by the fuzzer (seed ci, program 217)."""
    def make():
        def f(counts):
            total = 0
            counts['c'] = total
            for key in counts:
                total = total + len(key) + counts[key]
            return total
        return f, None
    calls = [lambda: (({'a': 1, 'b': 2},), {})] * 6
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] >= 2


def test_several_membership_tests_on_one_outside_set(strict):
    """Found by the bug hunt: two ``in`` tests of one set shared one guard, so adding
    the second key from outside was not seen."""
    def make():
        enabled = {'l2'}

        def loss_fn(t):
            loss = tf.reduce_sum(t)
            if 'l2' in enabled:
                loss = loss + 0.1 * tf.reduce_sum(t * t)
            if 'l1' in enabled:
                loss = loss + tf.reduce_sum(tf.abs(t))
            return loss
        return loss_fn, enabled
    eager_fn, eager_set = make()
    plain_fn, janus_set = make()
    jf = janus.function(plain_fn)
    for i in range(9):
        if i == 4:
            eager_set.add('l1')
            janus_set.add('l1')
        if i == 6:
            eager_set.discard('l2')
            janus_set.discard('l2')
        x = tf.constant([1.0, float(i)])
        assert_same(eager_fn(x), jf(x), 'call %d' % i)
    assert janus.stats(jf)['graph_calls'] >= 3


def test_replacing_a_keras_layers_activation_is_seen(strict):
    import keras

    def make():
        keras.utils.set_random_seed(3)
        dense = keras.layers.Dense(3, activation='relu')
        dense(tf.zeros([2, 4]))

        def forward(x):
            return dense(x)
        return forward, dense
    eager_fn, eager_dense = make()
    plain_fn, janus_dense = make()
    jf = janus.function(plain_fn)
    for i in range(8):
        if i == 5:
            eager_dense.activation = janus_dense.activation = keras.activations.tanh
        x = tf.constant([[float(i) - 3.0] * 4, [1.0] * 4])
        assert_same(eager_fn(x), jf(x), 'call %d' % i)
    assert janus.stats(jf)['graph_calls'] >= 2


def test_a_bad_batch_after_shapes_were_relaxed_raises_eagers_error():
    """Found by the fuzzer (seed P, program 1424): a graph relaxed to (None,) let a
    batch through that Keras rejects eagerly; the graph failed in an op that needs
    no changed state but ran after the optimizer step, and its TF error reached the
    user.  Such ops now run before any state change, so the call is re-run eagerly."""
    def make():
        dense = tf.keras.layers.Dense(1, kernel_initializer='ones', name='dense_relaxed')
        opt = tf.keras.optimizers.SGD(0.05, momentum=0.5)

        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(dense(tf.reshape(x, [1, -1])))
            grads = tape.gradient(loss, dense.trainable_variables)
            opt.apply_gradients(zip(grads, dense.trainable_variables))
            return tf.map_fn(lambda e: e * 1.5 + 0.5, x)
        return step, dense
    calls = [((tf.constant(v),), {}) for v in ([0.25, 0.25], [0.25, 0.25], [0.5], [0.5],
                                                [1.0], [0.5, 1.0], [2.0])]
    differential(make, calls, state=lambda dense: dense.weights)


@pytest.mark.parametrize('program', ['leaky', 'loop'])
def test_graph_rewrites_with_wrong_answers_are_off_for_janus_graphs(strict, program):
    """Found by the fuzzer (seeds N/315, M/988; final/1952, M/1175): grappler fuses
    ``tf.maximum(x * c, x)`` into LeakyRelu (wrong for c > 1) and breaks a loop over a
    tensor whose length changed; janus runs its graphs with those rewrites off."""
    def make():
        def leaky(x):
            acc = x * 2.0
            return tf.maximum(acc, x)

        def loop(x):
            acc = x * 1.0
            for e in x:
                acc = acc + e
                acc = tf.clip_by_value(acc + acc, -20.0, 20.0)
            return acc
        return (leaky if program == 'leaky' else loop), None
    sizes = [3, 3, 4, 4, 3, 4, 4]
    calls = [((tf.constant([0.5, -1.0, 0.25, -0.5][:n]),), {}) for n in sizes]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] >= 2
