"""An op that may fail runs even when nothing uses its result (FINDINGS 8).

Eagerly every line runs, so ``peek = tf.gather(x, i)`` past the end raises
even if ``peek`` is never read.  TF prunes a stateless op no output needs,
and lowers tf.cond / tf.while_loop so that only their data outputs count; a
graph would return normally and janus would then make the Python writes the
call made after that line.  janus keeps such ops running
(``graph/fallible.py``): in the top graph, in tf.cond branches and in
tf.while_loop bodies.
"""
import tensorflow as tf

import janus
from conftest import differential


class Loader:
    """A cursor over a batch, with a debugging look-ahead nobody reads."""

    def __init__(self):
        self.cursor = tf.Variable(0)
        self.rows = 0

    def next_row(self, x):
        self.cursor.assign_add(1)
        peek = tf.gather(x, self.cursor % 4)   # left over from debugging: unused
        self.rows += 1
        return x * 2.0


def _state(loader):
    return int(loader.cursor.numpy()), loader.rows


def _calls(n, sign=None):
    def call(i):
        s = 1.0 if sign is None else sign(i)
        return lambda: ((tf.constant([1.0, 2.0, 3.0]) * s,), {})
    return [call(i) for i in range(n)]


def test_an_unused_gather_past_the_end_raises_as_eagerly():
    def make():
        loader = Loader()
        return loader.next_row, loader
    jf = differential(make, _calls(9), state=_state)
    assert janus.stats(jf)['graph_calls'] > 0


def test_an_unused_gather_in_a_tensor_dependent_branch_raises_as_eagerly():
    def make():
        state = Loader()

        def step(x):
            state.cursor.assign_add(1)
            if tf.reduce_sum(x) > 0:
                peek = tf.gather(x, state.cursor % 5)   # unused
                x = x * 2.0
            state.rows += 1
            return x
        return step, state
    jf = differential(make, _calls(12, sign=lambda i: 1.0 if i % 2 else -1.0), state=_state)
    assert janus.stats(jf)['graph_calls'] > 0


def test_an_unused_gather_in_a_tensor_dependent_loop_raises_as_eagerly():
    def make():
        state = Loader()

        def step(x, n):
            state.cursor.assign_add(1)
            total = tf.zeros([])
            i = tf.constant(0)
            while i < n:
                peek = tf.gather(x, i + state.cursor % 3)   # unused: fails past the end
                total += tf.reduce_sum(x)
                i += 1
            state.rows += 1
            return total
        return step, state
    calls = [(lambda i=i: ((tf.constant([1.0, 2.0, 3.0]), tf.constant(1 + i % 2)), {}))
             for i in range(8)]
    jf = differential(make, calls, state=_state)
    assert janus.stats(jf)['graph_calls'] > 0


class Counter:
    def __init__(self):
        self.calls = 0


def _counted(body):
    """make() for ``differential``: ``body(counter, *args)`` with a fresh counter."""
    def make():
        counter = Counter()
        return (lambda *args: body(counter, *args)), counter
    return make


def _vector_and_index(rows):
    return [(lambda sign=sign, k=k: ((tf.constant([1.0, 2.0, 3.0]) * sign, tf.constant(k)), {}))
            for sign, k in rows]


_ROWS = [(1.0, 0), (-1.0, 1), (1.0, 2), (-1.0, 1), (1.0, 4), (-1.0, 0), (1.0, 5), (1.0, 2),
         (-1.0, 1), (1.0, 4), (1.0, 0)]


def test_a_branch_that_only_peeks_still_raises():
    # Nothing uses the tf.cond janus builds: TF would prune it whole.
    def step(counter, x, k):
        if tf.reduce_sum(x) > 0:
            peek = tf.gather(x, k)
        counter.calls += 1
        return x * 2.0
    jf = differential(_counted(step), _vector_and_index(_ROWS), state=lambda c: c.calls)
    assert janus.stats(jf)['graph_calls'] > 0


def test_a_conditional_expression_that_only_peeks_still_raises():
    def step(counter, x, k):
        counter.calls += 1
        peek = x[k] if tf.reduce_sum(x) > 0 else x[0]
        return x * 2.0
    jf = differential(_counted(step), _vector_and_index(_ROWS), state=lambda c: c.calls)
    assert janus.stats(jf)['graph_calls'] > 0


def test_a_loop_that_only_peeks_still_raises():
    def step(counter, x, n):
        for i in tf.range(n):
            peek = tf.gather(x, i)
        counter.calls += 1
        return tf.reduce_sum(x)
    calls = [(lambda n=n: ((tf.constant([1.0, 2.0, 3.0]), tf.constant(n)), {}))
             for n in [1, 2, 3, 2, 4, 1, 3, 5, 2, 3, 1]]
    jf = differential(_counted(step), calls, state=lambda c: c.calls)
    assert janus.stats(jf)['graph_calls'] > 0


_SHAPES = [(3, 3), (4, 4), (5, 5), (3, 3), (4, 2), (6, 6), (3, 5), (4, 4), (2, 2), (5, 3)]


def _two_vectors():
    return [(lambda a=a, b=b: ((tf.ones([a]), tf.ones([b])), {})) for a, b in _SHAPES]


def test_unused_comparisons_and_builtin_sums_of_mismatched_shapes_raise():
    def step(counter, x, y):
        counter.calls += 1
        mask = x < y
        total = sum([x, y])
        return tf.reduce_sum(x) + tf.reduce_sum(y)
    jf = differential(_counted(step), _two_vectors(), state=lambda c: c.calls)
    assert janus.stats(jf)['graph_calls'] > 0


def test_an_unused_integer_division_by_zero_raises():
    def step(counter, a, b):
        counter.calls += 1
        ratio = a // b
        return a + b
    calls = [(lambda d=d: ((tf.constant([4, 6]), tf.constant([2, d])), {}))
             for d in [1, 2, 3, 0, 1, 2, 0, 3, 1]]
    jf = differential(_counted(step), calls, state=lambda c: c.calls)
    assert janus.stats(jf)['graph_calls'] > 0


def test_unused_ops_in_functions_tf_traces_for_the_user_raise():
    # tf.map_fn's loop body and a user's own tf.cond branch: TF traces them.
    def row(e, k):
        peek = tf.gather(e, k)
        return e * 2.0

    def step(counter, x, k):
        counter.calls += 1
        doubled = tf.map_fn(lambda e: row(e, k), x)
        return tf.cond(tf.reduce_sum(x) > 0, lambda: row(x, k), lambda: x - 1.0) + doubled
    calls = [(lambda k=k: ((tf.ones([3, 3]), tf.constant(k)), {}))
             for k in [0, 1, 2, 1, 3, 0, 5, 2, 1, 4, 0]]
    jf = differential(_counted(step), calls, state=lambda c: c.calls)
    assert janus.stats(jf)['graph_calls'] > 0


class Peek(tf.keras.layers.Layer):
    """A layer whose look-up runs past the end every few calls."""

    def __init__(self):
        super().__init__(name='peek')
        self.seen = tf.Variable(0, trainable=False)

    def call(self, inputs):
        self.seen.assign_add(1)
        look = tf.gather(inputs, self.seen % 7, axis=1)
        return inputs * 2.0 + tf.reduce_sum(look)


def test_a_keras_layers_error_after_a_graph_failed_names_its_arguments_as_eagerly():
    # The re-run's error lists `inputs=...` (the layer's own signature), not the
    # (*args, **kwargs) of the dispatcher janus installs while it runs the layer.
    def make():
        layer = Peek()
        return layer, layer
    calls = [(lambda: ((tf.ones([2, 5]),), {})) for _ in range(12)]
    jf = differential(make, calls, state=lambda layer: int(layer.seen.numpy()))
    assert janus.stats(jf)['graph_calls'] > 0


def test_only_the_users_unused_ops_that_may_fail_are_kept():
    from tensorflow.python.framework import func_graph
    from janus.graph import fallible
    graph = func_graph.FuncGraph('probe')
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        janus_own = tf.gather(x, tf.constant(2))      # not made in a user's call: not kept
        with fallible.made_by_the_user():
            y = x * 2.0
            _ = tf.tanh(x)                            # unused, cannot fail: not kept
            bad = tf.gather(x, tf.constant(1))        # unused, may fail: kept
            used = tf.gather(x, tf.constant(0))       # may fail, but an output needs it
            with fallible.not_the_users():
                inner = tf.gather(x, tf.constant(2))  # janus's own inside the call: not kept
        assert fallible.keep_unused(graph, [y, used]) == 1
        assert graph.control_outputs == [bad.op]
        assert janus_own.op not in graph.control_outputs and inner.op not in graph.control_outputs


def test_a_failure_before_a_dead_branch_restores_the_update_after_it():
    # The cond's result is dead, so grappler drops the gather from its inputs and
    # the step counter's update no longer waits for the gather: the rollback must
    # keep the counter too (fuzzer seed s22b, program 393).
    class Reader:
        def __init__(self):
            self.cursor = tf.Variable(0)
            self.steps = tf.Variable(0, dtype=tf.int64)

    def make():
        reader = Reader()

        def step(x):
            total = x * 1.0
            reader.cursor.assign_add(1)
            total = total + tf.gather(x, reader.cursor % 4)
            if reader.steps % 3 == 0:
                total = total + tf.cast(reader.steps, total.dtype)
            reader.steps.assign_add(1)
        return step, reader

    def state(reader):
        return int(reader.cursor.numpy()), int(reader.steps.numpy())
    calls = [(lambda: ((tf.constant([0.25, 0.5, 0.25]),), {})) for _ in range(9)]
    jf = differential(make, calls, state=state)
    assert janus.stats(jf)['graph_calls'] > 0


def _batches(sizes):
    dataset = None
    for n in sizes:
        part = tf.data.Dataset.from_tensors(tf.ones([n, 3]))
        dataset = part if dataset is None else dataset.concatenate(part)
    return iter(dataset)


def test_vectorized_map_scaffolding_is_not_kept_running():
    # pfor traces the function once in the calling graph as scaffolding (a gather at
    # row 0): eagerly it runs in a graph that prunes that, so an empty batch is fine.
    sizes = [3, 2, 3, 4, 3, 0, 3, 0, 2]

    def make():
        batches = _batches(sizes)

        def step():
            x = batches.get_next()
            return tf.vectorized_map(lambda row: tf.gather(row, 1) * 2.0, x)
        return step, None
    jf = differential(make, [((), {}) for _ in sizes])
    assert janus.stats(jf)['imperative_calls'] == 0


def test_an_unused_op_in_a_dataset_map_is_pruned_as_eagerly():
    # tf.data traces its map function into a graph even eagerly, and prunes there.
    picks = [0, 1, 2, 1, 5, 0, 7, 1]

    def row(r, k):
        peek = tf.gather(r, k)
        return r * 2.0

    def make():
        keys = iter(tf.data.Dataset.from_tensor_slices(tf.constant(picks)))

        def step(x):
            k = keys.get_next()
            rows = tf.data.Dataset.from_tensor_slices(x).map(lambda r: row(r, k))
            return rows.reduce(tf.zeros([3]), lambda a, b: a + b)
        return step, None
    jf = differential(make, [(lambda: ((tf.ones([2, 3]),), {})) for _ in picks])
    assert janus.stats(jf)['imperative_calls'] == 0
