"""NumPy arrays from outside the call are graph inputs fed on every run (issue 19).

An ndarray passed as an argument, or read from an object, a container or a global,
is re-read when the graph runs (an in-place write between calls is seen), guarded
by type, dtype and exact shape (ARRAY_MATCH); returned or stored it is the very
array.  NumPy on it refuses, so that statement runs in Python (a graph break).
Every program runs eagerly and under janus on fresh objects (``differential``).
"""
import numpy as np
import pytest
import tensorflow as tf

import janus
from janus.guards import GuardKind
from janus.reasons import Reason
from tests.conftest import differential


def _graph_runs(jf):
    stats = janus.stats(jf)
    return stats['graph_calls'] + stats['graph_part_calls']


def _reasons(jf):
    return {event.reason for event in jf.events if event.reason is not None}


class Agent:
    """An RL agent acting on observations from a NumPy environment."""

    def __init__(self):
        tf.keras.utils.set_random_seed(0)
        self.policy = tf.keras.Sequential([tf.keras.layers.Dense(8, activation='tanh'),
                                           tf.keras.layers.Dense(2)])
        self.policy.build((None, 4))
        self.last_obs = None
        self.opt = tf.keras.optimizers.SGD(0.01)

    def act(self, observation):
        logits = self.policy(tf.constant(observation[None]))
        self.last_obs = observation
        return tf.argmax(logits[0]), logits

    def act_converted(self, observation):
        x = tf.convert_to_tensor(observation)
        return self.policy(tf.reshape(x, [1, 4]))

    def act_keras_input(self, observation):
        return self.policy(observation[None])   # Keras converts (float64 -> float32)

    def train(self, states, actions, returns):
        with tf.GradientTape() as tape:
            logits = self.policy(tf.stack(states))
            logp = tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=tf.constant(actions), logits=logits)
            loss = tf.reduce_mean(logp * returns)
        grads = tape.gradient(loss, self.policy.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.policy.trainable_variables))
        return loss


def _observations(n, dtype=np.float32, seed=0):
    rng = np.random.RandomState(seed)
    return [rng.randn(4).astype(dtype) for _ in range(n)]


def _weights(agent):
    return [v.numpy() for v in agent.policy.trainable_variables]


@pytest.mark.parametrize('method', ['act', 'act_converted', 'act_keras_input'])
def test_an_agent_acts_on_numpy_observations_in_a_graph(method):
    observations = _observations(7)
    calls = [((obs,), {}) for obs in observations]

    def make():
        agent = Agent()
        return getattr(agent, method), agent
    jf = differential(make, calls, state=lambda a: (_weights(a), a.last_obs))
    assert janus.stats(jf)['graph_calls'] >= 3
    assert janus.stats(jf)['imperative_calls'] == 0


def test_the_stored_observation_is_the_very_array():
    agent = Agent()
    act = janus.function(agent.act)
    for obs in _observations(6):
        act(obs)
        assert agent.last_obs is obs
    assert janus.stats(act)['graph_calls'] >= 2


def test_a_float64_observation_meets_float32_weights_as_eagerly():
    """``x_float32 * float64_array`` is float32 eagerly (the array is converted to the
    tensor's dtype), and ``tf.constant(float64_array)`` is float64."""
    def make():
        w = tf.constant([0.5, 2.0, -1.0, 3.0])

        def f(obs):
            scaled = w * obs
            flipped = obs * w
            return scaled, flipped, tf.constant(obs), tf.cast(obs, tf.float32) + w
        return f, None
    calls = [((obs,), {}) for obs in _observations(6, np.float64)]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] >= 2


def test_training_on_lists_of_arrays_and_numpy_returns():
    rng = np.random.RandomState(3)

    def batch():
        states = _observations(5, seed=int(rng.randint(100)))
        actions = rng.randint(0, 2, size=5)
        returns = rng.randn(5).astype(np.float32)
        return lambda: ((list(states), actions.copy(), returns.copy()), {})
    calls = [batch() for _ in range(6)]

    def make():
        agent = Agent()
        return agent.train, agent
    jf = differential(make, calls, state=_weights)
    assert janus.stats(jf)['graph_calls'] >= 2
    assert janus.stats(jf)['imperative_calls'] == 0


def test_a_list_of_arrays_of_another_length_builds_a_graph_for_it():
    """The list's length is guarded as for lists of tensors."""
    rng = np.random.RandomState(4)
    lengths = [3, 3, 3, 3, 5, 5, 5, 3]

    def make():
        def f(states):
            return tf.reduce_sum(tf.stack(states), axis=0), len(states)
        return f, None
    calls = [((_observations(n, seed=int(rng.randint(100))),), {}) for n in lengths]
    jf = differential(make, calls)
    assert _graph_runs(jf) >= 3


class Table:
    def __init__(self):
        self.table = np.arange(6, dtype=np.float32).reshape(2, 3)
        self.seen = None

    def lookup(self, x):
        t = tf.constant(self.table)
        self.seen = self.table
        return tf.matmul(x, t, transpose_b=True), self.table.shape, self.table.ndim


def test_an_array_in_an_object_is_re_read_after_in_place_writes():
    table = Table()
    lookup = janus.function(table.lookup)
    reference = Table()
    for step in range(7):
        x = tf.ones([1, 3])
        got, shape, ndim = lookup(x)
        want, want_shape, want_ndim = reference.lookup(x)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert (shape, ndim) == (want_shape, want_ndim) == ((2, 3), 2)
        assert table.seen is table.table
        table.table[0] = 5 + step          # in place, between calls
        reference.table[0] = 5 + step
    assert janus.stats(lookup)['graph_calls'] >= 3
    assert janus.stats(lookup)['graphs_built'] == 1
    guards = [g for entry in lookup.cache.entries() for g in entry.source_guards
              if getattr(g, 'kind', None) is GuardKind.ARRAY_MATCH]
    assert guards


def test_in_place_writes_differentially():
    def make():
        table = Table()
        return table.lookup, table

    def write_between(table):   # run after every call, on each side: an in-place write
        table.table[1, 1] += 1.0
        return table.table.copy(), table.seen is table.table
    calls = [((tf.fill([1, 3], float(step)),), {}) for step in range(6)]
    jf = differential(make, calls, state=write_between)
    assert janus.stats(jf)['graph_calls'] >= 2


def test_a_shape_change_misses_and_builds_a_graph_for_it():
    def make():
        def f(x, a):
            return x + tf.reduce_sum(tf.constant(a))
        return f, None
    shapes = [(3,), (3,), (3,), (3,), (4,), (4,), (4,), (4,), (2, 2), (3,)]
    calls = [((tf.constant(1.0), np.full(s, i, np.float32)), {}) for i, s in enumerate(shapes)]
    jf = differential(make, calls)
    stats = janus.stats(jf)
    assert stats['graphs_built'] >= 2 and stats['cache_misses'] >= 1
    assert any('ARRAY_MATCH' in str(event.detail) for event in jf.events)


def test_a_dtype_change_misses_and_builds_a_graph_for_it():
    def make():
        def f(a):
            return tf.constant(a) * 2, tf.convert_to_tensor(a)
        return f, None
    dtypes = [np.float32] * 4 + [np.float64] * 4 + [np.int64] * 4 + [np.int32, np.bool_]
    calls = [((np.ones(3, d),), {}) for d in dtypes]
    jf = differential(make, calls)
    assert janus.stats(jf)['graphs_built'] >= 2


def test_an_array_argument_is_returned_as_itself():
    def make():
        def f(a, x):
            return a, x * tf.constant(a), (a, [a])
        return f, None
    calls = [((np.arange(3.0), tf.ones([3], tf.float64)), {}) for _ in range(6)]
    jf = differential(make, calls)   # identities are compared per call
    assert janus.stats(jf)['graph_calls'] >= 2


def test_a_view_comes_back_as_a_view_of_the_same_array():
    holder = {}

    def make():
        def f(a):
            v = a[None, 1:]
            holder['v'] = v
            return v, tf.constant(v), a[0:2], a[..., ::2]
        return f, None
    calls = [((np.arange(4.0) + i,), {}) for i in range(6)]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] >= 2
    a = np.arange(4.0)
    v, _, _, _ = jf(a)
    assert v.base is a and np.shares_memory(v, a) and v.shape == (1, 3)


def test_numpy_scalar_arguments():
    def make():
        def f(x, scale, offset, count):
            return x * scale + offset, scale, count
        return f, None
    calls = [((tf.ones([2], tf.float64), np.float64(0.5), np.float32(1.5), np.int64(3)), {})
             for _ in range(5)]
    calls += [((tf.ones([2], tf.float64), np.float64(0.25), np.float32(1.5), np.int64(3)), {})]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] >= 2


def _numpy_uses():
    """Programs that use the array in a NumPy way inside: each such statement is
    refused (runs in Python, a graph break), the answers stay eager's."""
    def arithmetic(x, a):
        b = a * 2.0
        return x + tf.constant(b)

    def with_another_array(x, a):
        return x * tf.constant(a + a)

    def numpy_function(x, a):
        m = np.mean(a)
        return x * m

    def method(x, a):
        return x + a.sum()

    def truth(x, a):
        if a.any():
            return x
        return -x

    def iteration(x, a):
        total = x
        for v in a:
            total = total + v
        return total

    def comparison(x, a):
        mask = a > 0.5
        return x, mask

    def item_write(x, a):
        a[0] = 7.0
        return x + tf.constant(a)

    def in_place(x, a):
        a += 1.0
        return x * tf.constant(a)

    def scalar_index(x, a):
        return x * a[0]

    def fancy_index(x, a):
        return x + tf.constant(a[[0, 1, 2]])
    return [arithmetic, with_another_array, numpy_function, method, truth, iteration,
            comparison, item_write, in_place, scalar_index, fancy_index]


@pytest.mark.parametrize('fn', _numpy_uses(), ids=lambda fn: fn.__name__)
def test_numpy_on_the_array_inside_is_refused_and_stays_correct(fn):
    def make():
        return fn, None
    calls = [lambda i=i: ((tf.ones([3], tf.float64), np.arange(3.0) * (i - 2)), {})
             for i in range(6)]   # fresh arrays per side: some programs write into them
    jf = differential(make, calls)
    refused = _reasons(jf)
    assert refused & {Reason.NUMPY_ARRAY, Reason.NUMPY_IN_GRAPH}, refused


def test_a_graph_break_segment_taking_an_array_runs_a_graph():
    def make():
        def f(x, a):
            print('x is', x.numpy())
            y = x * tf.constant(a)
            z = tf.reduce_sum(y) + tf.reduce_max(tf.convert_to_tensor(a))
            return y, z
        return f, None
    calls = [((tf.constant([1.0, 2.0, 3.0]), np.arange(3, dtype=np.float32) + i), {})
             for i in range(7)]
    jf = differential(make, calls)
    assert janus.stats(jf)['split_calls'] >= 3
    assert janus.stats(jf)['graph_part_calls'] > 0


def test_a_global_array_is_re_read():
    def make():
        def f(x):
            return x * tf.constant(SCALE)
        return f, None
    jf = janus.function(make()[0])
    for step in range(6):
        SCALE[1] = step
        np.testing.assert_array_equal(jf(tf.ones([2])).numpy(), [1.0, float(step)])
    assert janus.stats(jf)['graph_calls'] >= 2


SCALE = np.ones(2, np.float32)


def test_the_same_array_passed_twice_and_two_arrays_get_different_graphs():
    def make():
        def f(a, b):
            return a is b, tf.constant(a) + tf.constant(b)
        return f, None
    one = np.ones(2)
    calls = [((one, one), {})] * 4 + [((one, np.ones(2)), {})] * 3 + [((one, one), {})]
    jf = differential(make, calls)
    assert janus.stats(jf)['graphs_built'] >= 2


def test_the_explain_advice_for_an_array_shape_miss():
    from janus.advising import guard_advice
    assert 'shape' in guard_advice('ARRAY_MATCH')


def _converting_uses():
    """Programs janus models on an array argument: each runs as one graph."""
    def operators(x, a):
        return a - x, a / x, x ** a, x < a, a >= x, x == a, a != x

    def printed(x, a):
        print('a is', a)
        return x * a

    def in_a_branch(x, a):
        if tf.reduce_sum(x * a) > 4.0:
            y = x * a
        else:
            y = x - a
        return y

    def static(x, a):
        return (isinstance(a, np.ndarray), type(a) is np.ndarray, len(a), a.shape, a.size,
                a.ndim, a.dtype == np.float32, x)

    def stacked(x, a):
        return tf.stack([x, a]), tf.stack([a, a], axis=1), tf.convert_to_tensor([a, a])

    def tf_functions(x, a):
        return tf.zeros_like(a) + x, tf.shape(a), tf.matmul(x[None], tf.constant(a)[:, None])

    def views(x, a):
        return tf.constant(a[1:]), a[None], a[..., None], a[::-1] * x, a[3:]
    return [operators, printed, in_a_branch, static, stacked, tf_functions, views]


@pytest.mark.parametrize('fn', _converting_uses(), ids=lambda fn: fn.__name__)
def test_what_janus_models_of_an_array_converts(fn):
    def make():
        return fn, None
    calls = [lambda i=i: ((tf.ones([3]), np.arange(3, dtype=np.float32) + i), {})
             for i in range(6)]
    jf = differential(make, calls)
    stats = janus.stats(jf)
    assert stats['graph_calls'] >= 2 and stats['imperative_calls'] == 0, janus.explain(jf)


class Recorder:
    def __init__(self):
        self.seen = []
        self.last = None


def test_arrays_appended_and_stored_are_the_very_arrays():
    def make():
        recorder = Recorder()

        def f(x, a):
            recorder.seen.append(a)
            recorder.last = a
            b = recorder.last   # read back in the same call: the array written
            return x + b
        return f, recorder

    def state(recorder):
        return len(recorder.seen), recorder.last
    calls = [lambda i=i: ((tf.ones([3]), np.arange(3, dtype=np.float32) + i), {})
             for i in range(6)]
    jf = differential(make, calls, state=state)
    assert janus.stats(jf)['graph_calls'] >= 2
    recorder = Recorder()
    g = janus.function(lambda x, a: (recorder.seen.append(a), x + a)[1])
    arrays = [np.ones(3, np.float32) for _ in range(5)]
    for a in arrays:
        g(tf.ones([3]), a)
    assert all(seen is a for seen, a in zip(recorder.seen, arrays))


def test_a_cast_janus_does_not_model_is_refused_and_stays_correct():
    """``int_tensor * float_array``: eager casts the floats to ints (NumPy's astype);
    janus refuses that cast (the statement runs in Python) rather than guess."""
    def make():
        def f(x, a):
            return x * a
        return f, None
    calls = [lambda i=i: ((tf.constant([1, 2, 3]), np.array([1.5, 2.5, -3.7]) * i), {})
             for i in range(5)]
    jf = differential(make, calls)
    assert Reason.NUMPY_ARRAY in _reasons(jf)


# -- relaxed shapes: an array whose length changes every call ---------------------

class Learner:
    """A policy-gradient update on one episode: NumPy states and returns, the actions
    (a NumPy array or a list of ints), all of the episode's length."""

    def __init__(self):
        tf.keras.utils.set_random_seed(0)
        self.policy = tf.keras.Sequential([tf.keras.layers.Dense(8, activation='tanh'),
                                           tf.keras.layers.Dense(2)])
        self.policy.build((None, 4))
        self.opt = tf.keras.optimizers.SGD(0.01)

    def train(self, states_array, actions_list, returns_array):
        with tf.GradientTape() as tape:
            logits = self.policy(tf.constant(states_array))
            taken = tf.reduce_sum(tf.nn.log_softmax(logits) * tf.one_hot(actions_list, 2),
                                  axis=1)
            loss = -tf.reduce_sum(taken * returns_array)
        grads = tape.gradient(loss, self.policy.trainable_variables)
        self.opt.apply_gradients(zip(grads, self.policy.trainable_variables))
        return loss


def _episode(length, seed, as_list=False):
    rng = np.random.RandomState(seed)
    states = rng.randn(length, 4).astype(np.float32)
    actions = rng.randint(0, 2, size=length).astype(np.int32)
    returns = rng.randn(length).astype(np.float32)
    if as_list:
        return lambda: ((states.copy(), [int(a) for a in actions], returns.copy()), {})
    return lambda: ((states.copy(), actions.copy(), returns.copy()), {})


EPISODE_LENGTHS = [5, 17, 9, 30, 12, 23, 6, 28, 14, 19, 8, 26]


def test_an_update_on_episodes_of_changing_length_relaxes_the_arrays():
    """After the first shape miss the episode's dimension is None in the graph's inputs
    (ARRAY_MATCH accepts any size there): a few graphs serve every length."""
    def make():
        learner = Learner()
        return learner.train, learner
    calls = [_episode(n, seed) for seed, n in enumerate(EPISODE_LENGTHS)]
    jf = differential(make, calls, state=_weights)
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3, janus.explain(jf)
    assert _graph_runs(jf) >= 8 and stats['imperative_calls'] == 0, janus.explain(jf)
    relaxed = [line for entry in jf.cache.entries() for line in entry.signature.describe()
               if 'None' in line]
    assert any('states_array: NumPy array float32[None, 4]' in line for line in relaxed)
    assert any('returns_array: NumPy array float32[None]' in line for line in relaxed)
    assert any('actions_list: NumPy array int32[None]' in line for line in relaxed)


def test_an_update_taking_a_list_of_actions_matches_eager():
    """The actions as a list of ints: its length is relaxed (passed whole), its values
    are constants of the graph (EQUALS_MATCH), so each episode gets a graph of its own
    until the recompile limit; the arrays beside it are relaxed all the same."""
    def make():
        learner = Learner()
        return learner.train, learner
    calls = [_episode(n, seed, as_list=True) for seed, n in enumerate(EPISODE_LENGTHS[:7])]
    jf = differential(make, calls, state=_weights)
    described = [line for entry in jf.cache.entries() for line in entry.signature.describe()]
    assert 'returns_array: NumPy array float32[None]' in described, janus.explain(jf)


def _reads_the_length():
    def by_len(x, a):
        return x * float(len(a)), tf.reduce_sum(tf.constant(a))

    def by_shape(x, a):
        return x + a.shape[0], a.shape, a.size, a.nbytes

    def by_slices(x, a):   # slices along the relaxed dimension: any length
        return tf.constant(a[1:]) * x, tf.constant(a[::-1, 1]), tf.constant(a[:, None, -1])

    def by_int_index(x, a):   # in range or not depends on the length (IndexError)
        return tf.constant(a[4]) * x, tf.constant(a[-1, 1:])

    def stacked(x, a):   # the same array twice: alike at any length
        return tf.stack([a, a]) * x, tf.convert_to_tensor([a, a])

    def stacked_views(x, a):
        return tf.convert_to_tensor([a, a[::-1]]) * x
    return [by_len, by_shape, by_slices, by_int_index, stacked, stacked_views]


@pytest.mark.parametrize('fn', _reads_the_length(), ids=lambda fn: fn.__name__)
def test_reading_the_size_of_a_relaxed_array_matches_eager(fn):
    """``len(a)``, ``a.shape``... of an array whose length varies: never a None, never
    a stale size (an exact-shape graph, or the statement in Python)."""
    def make():
        return fn, None
    lengths = [3, 5, 4, 6, 2, 7, 5, 8, 3]
    calls = [lambda n=n: ((tf.constant(2.0), np.arange(3 * n, dtype=np.float32).reshape(n, 3)),
                          {}) for n in lengths]
    jf = differential(make, calls)
    if fn.__name__ in ('by_slices', 'stacked'):   # nothing read of the size: one graph
        assert janus.stats(jf)['graphs_built'] == 1 and _graph_runs(jf) >= 5, janus.explain(jf)


def test_an_unknown_dimension_refuses_as_an_unknown_shape():
    def f(x, a):
        return x * len(a)
    jf = janus.function(f)
    for n in [3, 5, 4, 6, 2, 7]:
        assert float(jf(tf.constant(2.0), np.ones(n, np.float32))) == 2.0 * n
    texts = [str(event.detail) for event in jf.events]
    assert Reason.UNKNOWN_SHAPE in _reasons(jf) or any('exact shapes' in t for t in texts), \
        janus.explain(jf)


@pytest.mark.parametrize('change', ['rank', 'dtype'])
def test_a_rank_or_dtype_change_still_misses_after_relaxing(change):
    def make():
        def f(x, a):
            return x + tf.reduce_sum(tf.constant(a), axis=0), tf.constant(a).dtype.name
        return f, None
    arrays_ = [np.ones(n, np.float32) for n in [3, 5, 4, 6, 2, 7]]
    other = np.ones((3, 2), np.float32) if change == 'rank' else np.ones(4, np.float64)
    arrays_ += [other, other, np.ones(5, np.float32), other]
    calls = [lambda a=a: ((tf.constant(1.0), a.copy()), {}) for a in arrays_]
    jf = differential(make, calls)
    misses = [str(event.detail) for event in jf.events if 'ARRAY_MATCH' in str(event.detail)]
    wanted = 'float32[3, 2]' if change == 'rank' else 'float64[4]'
    assert any(wanted in text for text in misses), janus.explain(jf)
    assert any('float32[None]' in text for text in misses), janus.explain(jf)


class Buffer:
    """An array kept on an object, replaced by one of another length between calls."""

    def __init__(self):
        self.data = np.zeros(3, np.float32)

    def total(self, x):
        return tf.reduce_sum(tf.constant(self.data)) + x

    def count(self, x):
        return x * len(self.data)


@pytest.mark.parametrize('method', ['total', 'count'])
def test_an_array_on_an_object_whose_length_changes_is_relaxed_too(method):
    def make():
        buffer = Buffer()
        return getattr(buffer, method), buffer

    def refill(buffer):   # after every call, on each side: a longer or shorter array
        buffer.data = np.arange(len(buffer.data) * 7 % 11 + 1, dtype=np.float32)
        return buffer.data.copy()
    calls = [((tf.constant(1.0),), {})] * 9
    jf = differential(make, calls, state=refill)
    if method == 'total':
        assert janus.stats(jf)['graphs_built'] <= 2 and _graph_runs(jf) >= 4, janus.explain(jf)
        guards = [g for entry in jf.cache.entries() for g in entry.source_guards
                  if getattr(g, 'kind', None) is GuardKind.ARRAY_MATCH]
        assert any(None in g.expected[1] for g in guards), janus.explain(jf)


def _list_and_print_uses():
    def in_a_list(x, pair):   # arrays in a list argument, each relaxed on its own
        return tf.reduce_sum(tf.constant(pair[0])) * x + tf.reduce_mean(tf.constant(pair[1]))

    def printed(x, pair):
        print('first', pair[0])
        return x
    return [in_a_list, printed]


@pytest.mark.parametrize('fn', _list_and_print_uses(), ids=lambda fn: fn.__name__)
def test_arrays_in_a_list_argument_relax_each(fn):
    def make():
        return fn, None
    lengths = [(2, 3), (4, 3), (3, 5), (6, 1), (2, 2), (5, 4), (1, 6)]
    calls = [lambda n=n, m=m: ((tf.constant(2.0), [np.arange(n, dtype=np.float32),
                                                   np.ones((m, 2), np.float32)]), {})
             for n, m in lengths]
    jf = differential(make, calls)
    assert janus.stats(jf)['graphs_built'] <= 2 and _graph_runs(jf) >= 3, janus.explain(jf)


class Detector:
    """Per-scale heads zipped with the rows of NumPy anchor masks, as detection models
    write it (``for head, mask in zip(self.heads, MASKS)``, ``len(mask)``)."""

    def __init__(self, masks):
        tf.keras.utils.set_random_seed(0)
        self.masks = masks
        self.heads = [tf.keras.layers.Dense(len(mask) * 2) for mask in masks]
        self.rows_seen = []

    def __call__(self, x):
        outputs = []
        for head, mask in zip(self.heads, self.masks):
            out = tf.reshape(head(x), (-1, len(mask), 2))
            outputs.append(out * tf.cast(mask, tf.float32)[None, :, None])
        return outputs


def _fresh_masks(i=0):
    return np.array([[3, 4, 5], [0, 1, 2]]) + i


def test_rows_of_a_2d_array_are_iterated_in_a_graph(strict):
    def make():
        model = Detector(_fresh_masks())
        return model.__call__, model
    calls = [lambda: ((tf.ones([2, 4]),), {}) for _ in range(6)]
    jf = differential(make, calls, state=lambda m: [w.numpy() for h in m.heads
                                                     for w in h.weights])
    assert janus.stats(jf)['graph_calls'] >= 3


def test_rows_are_views_re_read_after_an_in_place_write():
    masks = _fresh_masks()

    def f(x):
        total = x
        for row in masks:
            total = total + tf.reduce_sum(tf.constant(row, tf.float32))
        return total
    jf = janus.function(f)
    for step in range(6):
        masks[1, 2] = step   # seen by the next run, as eagerly
        assert float(jf(tf.constant(0.0))) == float(masks.sum())
    assert janus.stats(jf)['graph_calls'] >= 2


def _row_uses():
    def unpacking(x, a):
        first, second = a
        return x * tf.constant(first), x + tf.constant(second)

    def enumerate_rows(x, a):
        out = []
        for i, row in enumerate(a):
            out.append(x * float(i) + tf.constant(row))
        return out

    def list_reversed(x, a):
        rows = list(reversed(a))
        return [x + tf.constant(r) for r in rows], len(rows)

    def tuple_rows_shapes(x, a):
        return x * float(sum(r.shape[0] for r in tuple(a)))

    def returns_a_row(x, a):
        for row in a:
            x = x + tf.constant(row)
        return x, row

    def iterating_a_row(x, a):   # a row is 1-d: its items are NumPy scalars (refused)
        for row in a:
            for v in row:
                x = x + v
        return x

    def three_d(x, a):
        b = a[None]
        for plane in b:
            for row in plane:
                x = x + tf.constant(row)
        return x
    return [unpacking, enumerate_rows, list_reversed, tuple_rows_shapes, returns_a_row,
            iterating_a_row, three_d]


@pytest.mark.parametrize('fn', _row_uses(), ids=lambda fn: fn.__name__)
def test_rows_of_a_2d_array_as_eagerly(fn):
    def make():
        return fn, None
    calls = [lambda i=i: ((tf.ones([3], tf.float64), np.arange(6.0).reshape(2, 3) * (i - 2)),
                          {}) for i in range(6)]
    differential(make, calls)


def test_rows_of_an_array_whose_first_dimension_changes():
    def make():
        def f(x, a):
            for row in a:
                x = x + tf.constant(row)
            return x
        return f, None
    calls = [lambda i=i: ((tf.ones([3], tf.float64), np.ones((2 + i % 3, 3))), {})
             for i in range(9)]
    differential(make, calls)


def test_a_returned_row_is_a_view_of_the_array():
    a = np.arange(6.0).reshape(2, 3)

    def f(x):
        for row in a:
            x = x + tf.constant(row)
        return row
    jf = janus.function(f)
    for _ in range(5):
        row = jf(tf.ones([3], tf.float64))
        assert row.base is a or row.base is a.base or np.shares_memory(row, a)
        np.testing.assert_array_equal(row, a[1])
