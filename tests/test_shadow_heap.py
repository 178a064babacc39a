"""The shadow heap: Python state read and written by converted functions.

Reads of tensors kept in Python objects are re-read on every run; writes
(attributes, items, globals, nonlocals, list appends) reach the Python heap
only after a run in which every assertion passed.  Every test compares the
heap after every call with an eager run on fresh objects.

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import gc
import weakref

import keras
import pytest
import tensorflow as tf

import janus
from conftest import assert_same, differential


@pytest.fixture(autouse=True, params=['hoisted', 'heap_ops'])
def heap_path(request):
    """Every test runs on both paths: hoisted inputs/outputs, and Janus>Py* ops."""
    with janus.config.patch(heap_ops=request.param == 'heap_ops'):
        yield request.param


def t(*shape, seed=0):
    return tf.random.stateless_normal(shape, seed=[seed, 5])


class RNNModel:
    """The paper's Figure 1, whole: self.state read at the start, written at the end."""

    def __init__(self):
        keras.utils.set_random_seed(3)
        self.cell = keras.layers.SimpleRNNCell(8)
        self.cell.build((None, 4))
        self.head = keras.layers.Dense(1)
        self.head.build((None, 8))
        self.opt = keras.optimizers.SGD(0.05)
        self.state = tf.zeros([2, 8])

    def __call__(self, sequence, target):
        with tf.GradientTape() as tape:
            state = self.state
            outputs = []
            for item in sequence:
                out, states = self.cell(item, [state])
                state = states[0]
                outputs += [state]
            loss = tf.reduce_mean((self.head(tf.stack(outputs)) - target) ** 2)
        variables = self.cell.trainable_variables + self.head.trainable_variables
        self.opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        self.state = tf.stop_gradient(state)
        return loss


def _rnn_state(model):
    return [model.state] + [v for v in model.cell.weights + model.head.weights]


def test_figure_1_trains_with_the_same_losses_and_state_one_graph_per_call(strict):
    def make():
        model = RNNModel()
        return (lambda sequence, target: model(sequence, target)), model
    calls = [((t(6, 2, 4, seed=i), t(6, 2, 1, seed=i + 50)), {}) for i in range(10)]
    jf = differential(make, calls, state=_rnn_state)
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1 and stats['graph_calls'] == 7
    assert stats['imperative_calls'] == 0
    assert 'writes back attr' in janus.explain(jf)   # the state write, on either path


class Net:
    def __init__(self):
        self.training = True
        self.keep_prob = 0.5
        self.scale = tf.constant(2.0)
        self.loss_value = None
        self.history = []

    def set_keep_prob(self, value):
        self.keep_prob = value

    def step(self, x):
        y = x * self.scale
        if self.training:
            y = y * self.keep_prob
        self.loss_value = tf.reduce_sum(y)
        self.history.append(self.loss_value)
        return y


def _net_state(net):
    return [net.training, net.keep_prob, net.loss_value, list(net.history)]


def test_flag_flips_and_method_changes_between_calls(strict):
    def make():
        net = Net()
        return net.step, net
    plan = [None] * 4 + ['eval', 'eval', 'train', 'keep', 'keep', None]

    def call(action, net):
        if action == 'eval':
            net.training = False
        elif action == 'train':
            net.training = True
        elif action == 'keep':
            net.set_keep_prob(0.25)

    eager_step, eager_net = make()
    plain, janus_net = make()
    jf = janus.function(plain.__func__)
    for i, action in enumerate(plan):
        call(action, eager_net)
        call(action, janus_net)
        x = t(3, seed=i)
        assert_same(eager_step(x), jf(janus_net, x))
        assert_same(_net_state(eager_net), _net_state(janus_net), 'call %d' % i)
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 0
    assert stats['graphs_built'] >= 3   # training=True, training=False, keep_prob=0.25


def test_assertion_failing_after_heap_writes_leaves_the_heap_unchanged(strict):
    def make():
        net = Net()

        def f(x):
            y = net.step(x)
            assert tf.reduce_max(y) < 50.0, 'too big'
            return y
        return f, net
    values = [1, 2, 3, 4, 5, 100, 6]
    jf = differential(make, [((tf.fill([3], float(v)),), {}) for v in values], state=_net_state)
    assert janus.stats(jf)['fallbacks'] == 1


COUNTER = 0
TOTAL = tf.zeros([3])


def test_globals_and_nonlocals_incremented(strict):
    def make():
        calls = 0
        acc = tf.zeros([3])

        def f(x):
            nonlocal calls, acc
            global TOTAL
            calls += 1
            acc = acc + x
            TOTAL = TOTAL + x * 2.0
            return acc * 1.0
        return f, (lambda: (calls, acc))
    global TOTAL
    start = TOTAL
    # Each side runs its own closure; TOTAL is shared, so compare its increments.
    eager_fn, eager_state = make()
    plain, janus_state = make()
    jf = janus.function(plain)
    with janus.config.patch(recompile_limit=4):
        for i in range(8):
            x = t(3, seed=i)
            before = TOTAL
            expected = eager_fn(x)
            eager_delta = TOTAL - before
            before = TOTAL
            assert_same(expected, jf(x))
            assert_same(eager_delta, TOTAL - before)
            assert_same(eager_state(), janus_state())
    TOTAL = start
    # `calls` is a Python int that changes every call: each value is a new graph
    # until the recompile limit, then the function runs imperatively (said in explain).
    assert janus.stats(jf)['graphs_built'] <= 4


def test_tensor_accumulator_in_a_global_reuses_one_graph(strict):
    def f(x):
        global TOTAL
        TOTAL = TOTAL + x
        return TOTAL
    global TOTAL
    start = TOTAL
    jf = janus.function(f)
    expected = TOTAL
    for i in range(8):
        x = t(3, seed=i)
        expected = expected + x
        assert_same(expected, jf(x))
        assert_same(expected, TOTAL)
    TOTAL = start
    assert janus.stats(jf)['graphs_built'] == 1 and janus.stats(jf)['graph_calls'] == 5


def test_dict_of_tensors_built_in_a_loop_and_stored(strict):
    class Holder:
        def __init__(self):
            self.results = {}
            self.names = ['a', 'b', 'c']

    def make():
        holder = Holder()

        def f(x):
            out = {}
            for i, name in enumerate(holder.names):
                out[name] = x * float(i)
            holder.results = out
            holder.results['sum'] = out['a'] + out['c']
            return holder.results['b']
        return f, holder
    jf = differential(make, [((t(2, seed=i),), {}) for i in range(6)],
                      state=lambda h: h.results)
    assert janus.stats(jf)['graph_calls'] == 3


class Slotted:
    __slots__ = ('w', 'seen')

    def __init__(self):
        self.w = tf.constant(3.0)
        self.seen = tf.constant(0.0)


class Dynamic:
    def __getattr__(self, name):
        return tf.constant(1.0)


class WithProperty:
    def __init__(self):
        self.reads = 0

    @property
    def w(self):
        self.reads += 1
        return tf.constant(2.0)


def test_slots_properties_and_getattr_convert():
    def make_slotted():
        obj = Slotted()

        def f(x):
            obj.seen = obj.seen + tf.reduce_sum(x)
            return x * obj.w
        return f, obj
    with janus.config.patch(strict=True):
        jf = differential(make_slotted, [((t(2, seed=i),), {}) for i in range(5)],
                          state=lambda o: [o.w, o.seen])
    assert janus.stats(jf)['graph_calls'] == 2

    # Your __getattr__ and properties are converted like methods (trace/attributes.py):
    # the property's count of reads goes up once per call, as eagerly.
    for cls in (Dynamic, WithProperty):
        def make(cls=cls):
            obj = cls()
            return (lambda x: x * obj.w), obj
        jf = differential(make, [((t(2),), {})] * 5,
                          state=lambda o: getattr(o, 'reads', None))
        assert janus.stats(jf)['graph_calls'] == 2, janus.explain(jf)


def test_attribute_deleted_or_object_replaced_between_calls():
    class Box:
        pass

    def make():
        holder = Box()
        holder.inner = Box()
        holder.inner.w = tf.constant(2.0)

        def f(x):
            return x * holder.inner.w
        return f, holder
    eager_fn, eager_holder = make()
    plain, holder = make()
    jf = janus.function(plain)
    for i in range(5):
        assert_same(eager_fn(t(2)), jf(t(2)))
    for h in (eager_holder, holder):
        h.inner = Box()
        h.inner.w = tf.constant(-1.0)
    assert_same(eager_fn(t(2)), jf(t(2)))
    for h in (eager_holder, holder):
        del h.inner.w
    for fn in (eager_fn, jf):
        try:
            fn(t(2))
            raise AssertionError('expected AttributeError')
        except AttributeError as e:
            assert 'w' in str(e)


def test_objects_made_per_call_are_not_kept_alive(strict, heap_path):
    """10,000 calls, each on a new object: neither the objects nor handles pile up."""
    from janus.heap import heap

    class Item:
        def __init__(self, value):
            self.value = value
            self.out = None

    @janus.function
    def f(item, x):
        item.out = x * item.value
        return item.out

    import tracemalloc
    refs = []
    values = [tf.constant(float(k)) for k in range(7)]
    one = tf.constant(1.0)
    for i in range(10000):
        item = Item(values[i % 7])
        if i % 10 == 0:
            refs.append(weakref.ref(item))
        f(item, one)
        assert float(item.out) == float(i % 7)
        del item
        if i == 1000:
            gc.collect()
            handles_early = len(heap.registry)
            tracemalloc.start()
            memory_early = tracemalloc.get_traced_memory()[0]
    gc.collect()
    memory_growth = tracemalloc.get_traced_memory()[0] - memory_early
    tracemalloc.stop()
    alive = sum(ref() is not None for ref in refs)
    assert alive <= 2, alive   # the objects of the traced call only
    assert len(heap.registry) <= handles_early + 2
    assert memory_growth < 1_000_000, memory_growth   # Python memory flat
    assert janus.stats(f)['graphs_built'] == 1 and janus.stats(f)['graph_calls'] == 9997


def test_print_happens_after_the_run_with_eagers_text(strict, capsys):
    def make():
        def f(x):
            y = x * 2.0
            print('step', y, 'of', x.shape, sep='|')
            assert tf.reduce_max(y) < 100.0, 'too big'
            return y
        return f, None
    values = [1, 2, 3, 4, 500, 6]
    eager_fn, _ = make()
    plain, _ = make()
    jf = janus.function(plain)
    for v in values:
        x = tf.fill([2], float(v))
        outputs = []
        for fn in (eager_fn, jf):
            try:
                fn(x)
            except AssertionError:
                pass
            outputs.append(capsys.readouterr().out)
        assert outputs[0] == outputs[1] and outputs[0].startswith('step|tf.Tensor(')
    stats = janus.stats(jf)
    assert stats['graph_calls'] == 2 and stats['fallbacks'] == 1   # printed once, not twice
