"""Lists of Python numbers and list lengths that change between calls (relaxation.py).

An RL update gets this episode's actions and rewards as Python lists: new values
and a new length every call.  A list of numbers of one type passed to a TF op
(``tf.one_hot(actions, n)``, ``tf.constant(rewards)``) becomes a graph input fed
per run once its values changed (NUMBERS_MATCH), and ``len(rewards)`` a dynamic
scalar once the length changed: one graph for every episode, with eager's
results, types and state on every call.  Each test runs eagerly and under janus
on fresh objects (``conftest.differential``).
"""
import random

import tensorflow as tf

import janus
from conftest import differential


class Agent:
    def __init__(self):
        self.v = tf.Variable(tf.ones([2]))
        self.lengths = []

    def update(self, logits, actions, rewards):
        taken = tf.reduce_sum(tf.nn.log_softmax(logits) * tf.one_hot(actions, 2), axis=1)
        loss = -tf.reduce_sum(taken * tf.constant(rewards))
        self.v.assign_add(tf.ones([2]) * loss)
        self.lengths.append(len(rewards))
        return loss, len(rewards)


def episodes(count, seed=0):
    """(logits, actions, rewards) per call: new lengths and values every call."""
    rng = random.Random(seed)
    calls = []
    for i in range(count):
        n = rng.randint(3, 9)
        actions = [rng.randint(0, 1) for _ in range(n)]
        rewards = [rng.random() for _ in range(n)]
        calls.append(((tf.random.stateless_normal([n, 2], seed=[i, 1]), actions, rewards), {}))
    return calls


def test_an_rl_update_with_new_actions_and_rewards_is_one_graph():
    def make():
        agent = Agent()
        return agent.update, agent
    jf = differential(make, episodes(16), state=lambda a: (a.v, a.lengths))
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 11, janus.explain(jf)
    text = janus.explain(jf)
    assert 'len(rewards): a graph input' in text and 'actions: a graph input' in text, text


def test_constant_dtypes_are_eagers():
    """tf.constant of a fed list converts the Python numbers to the dtype asked for
    (float64 exactly, not through float32); ints give int32, as eagerly."""
    def make():
        def f(xs, ints):
            return (tf.constant(xs, tf.float64), tf.constant(xs), tf.convert_to_tensor(ints),
                    tf.constant(ints, dtype=tf.int64), tf.constant(ints, tf.float32))
        return f, None
    rng = random.Random(1)
    calls = [(([rng.random() / 3 for _ in range(n)], [rng.randint(-9, 9) for _ in range(n)]), {})
             for n in (3, 4, 4, 5, 2, 7, 7)]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] >= 3, janus.explain(jf)


def test_a_changed_item_type_or_range_is_a_new_graph_not_a_wrong_dtype():
    """The guard is the dtype TF converts the items to: floats among ints, a bool list,
    ints beyond int32 (int64), beyond int64 (eager raises) and an empty list (float32)
    each miss or raise as eagerly."""
    def make():
        def f(xs):
            t = tf.constant(xs)
            return t, tf.reduce_sum(tf.one_hot(xs, 3), 0) if t.dtype == tf.int32 else t
        return f, None
    calls = [(([0, 1, 2],), {}), (([2, 1],), {}), (([1, 1, 0, 2],), {}), (([1, 2],), {}),
             (([1.5, 2.5],), {}), (([2**40, 1],), {}), (([True, False],), {}),
             (([],), {}), (([2**70],), {}), (([0, 2, 2],), {})]
    differential(make, calls)


def test_a_list_the_call_changes_is_read_with_its_changes():
    def make():
        class Memory:
            actions = [0, 1]
        memory = Memory()

        def f(action):
            memory.actions.append(action)
            return tf.one_hot(memory.actions, 3)
        return f, memory
    calls = [((i % 3,), {}) for i in range(8)]
    differential(make, calls, state=lambda m: m.actions)


def test_a_shape_list_that_changes_converts_or_stays_constant():
    """A list of numbers used as a shape: fed, TF sees a shape of unknown rank; where a
    trace needs it, the list is specialized again (a graph per value)."""
    def make():
        class Config:
            shape = [2, 3]
        config = Config()

        def f(x):
            y = tf.reshape(x, config.shape)
            return y, tf.zeros(config.shape) + tf.reduce_sum(y)
        return f, config

    def call(shape):
        def prepare():
            return (tf.range(6.0),), {}
        return shape, prepare
    shapes = [[2, 3], [3, 2], [6, 1], [1, 6], [2, 3], [3, 2], [6]]

    eager_fn, eager_config = make()
    plain_fn, janus_config = make()
    jf = janus.function(plain_fn)
    for shape in shapes:
        eager_config.shape, janus_config.shape = list(shape), list(shape)
        expected, actual = eager_fn(tf.range(6.0)), jf(tf.range(6.0))
        for e, a in zip(expected, actual):
            assert e.shape == a.shape and e.numpy().tolist() == a.numpy().tolist()


def test_concat_of_a_list_of_numbers_raises_as_eagerly():
    """tf.concat takes one value as a list of one: a fed list would not raise there."""
    def make():
        class Holder:
            xs = [1, 2]
        holder = Holder()

        def f(x):
            return x + tf.concat(holder.xs, 0)
        return f, holder
    eager_fn, eager_holder = make()
    plain_fn, janus_holder = make()
    jf = janus.function(plain_fn)
    for values in ([1, 2], [3, 4], [5, 6, 7], [1, 2]):
        eager_holder.xs, janus_holder.xs = list(values), list(values)
        outcomes = []
        for fn in (eager_fn, jf):
            try:
                fn(tf.constant(1))
                outcomes.append('ok')
            except Exception as e:  # noqa: BLE001 - both sides must raise alike
                outcomes.append(type(e).__name__)
        assert outcomes[0] == outcomes[1] != 'ok', outcomes


def test_a_growing_outside_list_length_is_one_graph():
    def make():
        class Log:
            items = []
        log = Log()

        def f(x):
            n = len(log.items)
            log_scale = x * n
            return log_scale, n, n + 1, n > 3

        def call(i):
            log.items.append(i)
        return (f, call), log
    (eager_fn, eager_grow), eager_log = make()
    (plain_fn, janus_grow), janus_log = make()
    jf = janus.function(plain_fn)
    for i in range(12):
        eager_grow(i)
        janus_grow(i)
        expected, actual = eager_fn(tf.constant(2.0)), jf(tf.constant(2.0))
        assert float(expected[0]) == float(actual[0])
        assert expected[1:] == actual[1:] and [type(v) for v in expected[1:]] == [
            type(v) for v in actual[1:]]
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 7, janus.explain(jf)
    assert 'len(' in janus.explain(jf)
    janus_log.items = (1, 2)   # a tuple now: the type guard misses
    eager_log.items = (1, 2)
    assert eager_fn(tf.constant(2.0))[1:] == jf(tf.constant(2.0))[1:]


def test_a_tensor_sliced_by_a_number_that_changes_is_one_graph():
    """``boxes[:, :longest]`` with ``longest`` a dynamic int slices by its tensor: the
    same values as eager for every size (negative, past the end), one graph; an int
    index out of range raises eager's error."""
    def make():
        class Cut:
            longest = 2
        cut = Cut()

        def f(boxes):
            kept = boxes[:, :cut.longest]
            tail = boxes[cut.longest:, ::2]
            return kept, tail, boxes[1, cut.longest - 1], boxes[:, -cut.longest:]
        return f, cut
    eager_fn, eager_cut = make()
    plain_fn, janus_cut = make()
    jf = janus.function(plain_fn)
    for n in (2, 3, 1, 5, 6, 0, -2, 4, 2):
        eager_cut.longest = janus_cut.longest = n
        x = tf.reshape(tf.range(24.0), [4, 6])
        expected, actual = eager_fn(x), jf(x)
        for e, a in zip(expected, actual):
            assert e.shape == a.shape and e.numpy().tolist() == a.numpy().tolist(), n
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 5, janus.explain(jf)
    eager_cut.longest = janus_cut.longest = 40
    outcomes = []
    for fn in (eager_fn, jf):
        try:
            fn(tf.reshape(tf.range(24.0), [4, 6]))
        except Exception as e:  # noqa: BLE001 - both raise alike
            outcomes.append(type(e).__name__)
    assert outcomes[0] == outcomes[1], outcomes
