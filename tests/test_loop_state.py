"""Dynamic loops that carry lists of tensors (an LSTM cell's ``[h, c]``) and the
ablation knobs (no unrolling, no shape specialization, one inter-op thread).

Differential: each program runs eagerly and under janus on fresh objects,
returns and object state compared after every call; sequence lengths change
mid-way so the unrolled graph's trip-count assumption breaks.
"""
import os
import subprocess
import sys

import keras
import tensorflow as tf

import janus
from conftest import assert_same, differential
from test_control_flow import has_while


class Recurrent:
    """Carries ``self.state = [h, c]`` across calls, like the LSTM example."""

    def __init__(self):
        keras.utils.set_random_seed(3)
        self.cell = keras.layers.LSTMCell(6)
        self.cell.build((None, 4))
        self.state = [tf.fill([2, 6], 0.5), tf.fill([2, 6], -0.25)]

    def run(self, sequence):
        state = self.state
        outputs = []
        for x in sequence:
            h, state = self.cell(x, state)
            outputs.append(h)
        self.state = [tf.stop_gradient(s) for s in state]
        return tf.stack(outputs, axis=1)


def sequences(lengths):
    return [((tf.random.stateless_normal([n, 2, 4], seed=[i, n]),), {})
            for i, n in enumerate(lengths)]


def test_dynamic_loop_carries_list_state_read_and_written_on_an_object(strict):
    def make():
        model = Recurrent()
        return (lambda sequence: model.run(sequence)), model
    with janus.config.patch(max_unroll=0):
        jf = differential(make, sequences([5] * 6), state=lambda m: m.state)
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1 and stats['graph_calls'] == 3 and stats['fallbacks'] == 0
    assert has_while(jf)   # the second graph run reads the state the first one wrote


def test_trip_count_breaks_mid_way_then_the_list_state_is_carried_by_a_while_loop(strict):
    def make():
        model = Recurrent()
        return (lambda sequence: model.run(sequence)), model
    jf = differential(make, sequences([5, 5, 5, 5, 5, 3, 3, 7, 3]), state=lambda m: m.state)
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 2 and stats['fallbacks'] == 0 and stats['cache_misses'] == 2
    assert has_while(jf)   # (None, 2, 4) sequences: trip count only known at run time


def test_a_carried_list_changed_in_place_runs_imperatively_with_reason():
    def make():
        def f(xs):
            state = [tf.zeros([3]), tf.ones([3])]
            for x in xs:
                state[0] = state[0] + x   # in place: other names may share the list
            return state
        return f, None
    with janus.config.patch(max_unroll=0):
        jf = differential(make, [((tf.ones([4, 3]),), {})] * 5)
    assert janus.stats(jf)['graph_calls'] == 0
    assert 'changed in place inside a tensor-dependent loop' in janus.explain(jf)


def test_a_carried_list_that_changes_structure_runs_imperatively():
    def make():
        def f(xs):
            state = [tf.zeros([3])]
            for x in xs:
                state = [state[0] + x, x]
            return state
        return f, None
    with janus.config.patch(max_unroll=0):
        jf = differential(make, [((tf.ones([4, 3]),), {})] * 5)
    assert janus.stats(jf)['graph_calls'] == 0
    assert 'changes its structure' in janus.explain(jf)


def test_stack_along_another_axis_of_a_list_grown_in_a_dynamic_loop(strict):
    def make():
        def f(xs):
            out = []
            for x in xs:
                out.append(x * 2.0)
            return tf.stack(out, axis=1), tf.stack(out, axis=-1)
        return f, None
    with janus.config.patch(max_unroll=0):
        jf = differential(make, [((tf.reshape(tf.range(24.0), [4, 2, 3]) + i,), {})
                                 for i in range(5)])
    assert janus.stats(jf)['graph_calls'] == 2 and has_while(jf)


def test_without_shape_specialization_inputs_keep_only_their_rank(strict):
    def make():
        def f(x):
            return tf.reduce_sum(x * 2.0, axis=1)
        return f, None
    with janus.config.patch(specialize_shapes=False):
        jf = differential(make, [((tf.ones([n, 3]),), {}) for n in (4, 4, 4, 4, 7, 2)])
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1 and stats['graph_calls'] == 3 and stats['cache_misses'] == 0
    assert [s.shape.as_list() for s in jf.cache.newest().signature.input_specs()] == [[None, None]]


def test_without_shape_specialization_code_reading_a_dimension_gets_exact_shapes(strict):
    def make():
        def f(x):
            return tf.reshape(x, [x.shape[0] * 3])
        return f, None
    with janus.config.patch(specialize_shapes=False):
        jf = differential(make, [((tf.ones([4, 3]) * i,), {}) for i in range(6)])
    assert janus.stats(jf)['graph_calls'] == 3
    assert [s.shape.as_list() for s in jf.cache.newest().signature.input_specs()] == [[4, 3]]


def test_library_properties_of_a_subclassed_model_are_read_like_library_code(strict):
    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(2)

        def call(self, x):
            return self.dense(x)

    def make():
        keras.utils.set_random_seed(5)
        net, optimizer = Net(), keras.optimizers.SGD(0.1)
        net(tf.zeros([1, 3]))

        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(net(x) ** 2)
            grads = tape.gradient(loss, net.trainable_variables)   # a Keras property
            optimizer.apply_gradients(zip(grads, net.trainable_variables))
            return loss
        return step, net
    jf = differential(make, [((tf.fill([2, 3], float(i)),), {}) for i in range(6)],
                      state=lambda net: [tf.convert_to_tensor(v) for v in net.weights])
    assert janus.stats(jf)['graph_calls'] == 3


def test_inter_op_threads_is_applied_when_janus_is_imported():
    code = ('import janus, tensorflow as tf; '
            'print(tf.config.threading.get_inter_op_parallelism_threads())')
    env = dict(os.environ, JANUS_INTER_OP_THREADS='1', TF_CPP_MIN_LOG_LEVEL='3')
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[-1] == '1'
    assert_same(janus.config.inter_op_threads, 0)   # this process: TF's default


def test_a_container_changed_in_place_after_a_branch_binds_it():
    """Fuzz finding 13 (tests/fuzz_findings_breaks/): the local is bound under the
    loop's tensor ``if`` and then changed in place; it must be carried."""
    class Holder:
        def __init__(self):
            self.nest = {'w': {'n': 0}, 'b': {'n': 0}}

    def make():
        holder = Holder()

        def f(x, p):
            acc = x * 1.0
            w = 0
            while w < p:
                w += 1
                if tf.reduce_sum(acc) < -1.0:
                    continue
                inner = holder.nest['w']
                inner['n'] = inner.get('n', 0) * 2 % 11 + 1
            return acc
        return f, holder
    calls = [((tf.constant([0.25, 1.0]), 3), {})] * 4 + [((tf.constant([0.5, 0.5, 1.0]), 2), {})]
    differential(make, calls, state=lambda h: h.nest)


def test_closures_made_in_a_loop_or_branch_see_the_variable_as_it_ends():
    """``fns.append(lambda: i)`` in a loop: eagerly every lambda reads the one ``i`` of
    the function, its last value (AutoGraph's ``for_with_lambda_iter``).  The body a
    loop or branch becomes must share such a variable with the function, not bind
    its own per iteration (it did: [1, 2] where eager gives [2, 2])."""
    def make():
        def late(xs, scale):
            fns, out = [], []
            for i in xs:
                fns.append(lambda: i * scale)
            for row in tf.unstack(scale * 2.0):
                last = row
                fns.append(lambda: last)
            if len(xs) > 1:
                k = xs[0]
                fns.append(lambda: k)
            k = 100.0
            lazy = (i + k for _ in range(2))
            i = -1.0
            for f in fns:
                out.append(f())
            return out, list(lazy)
        return late, None

    calls = [lambda n=n: (([1.0, 2.0, 3.0][:n], tf.constant([0.5, 1.5])), {})
             for n in [2, 2, 2, 3, 3, 1, 2]]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] >= 2


def test_names_bound_inside_an_inner_loop_are_not_carried_by_the_outer_one(strict):
    """AutoGraph's ``break_in_inner_for`` over a dataset of rows: ``c`` (and the
    break's item) are bound inside the inner loop before any read, so the dataset
    loop need not carry them (it refused: "not defined before the loop"); ``last``,
    read after an inner loop that may not run, is carried."""
    def make():
        def scan(rows):
            s = tf.constant(0)
            last = tf.constant(-1)
            for row in rows:
                for c in row:
                    if c % 2 > 0:
                        break
                    s += c
                for c in row:
                    last = c
                s += last
            return s, last
        return scan, None

    def data(i):
        return tf.data.Dataset.from_tensor_slices(
            tf.constant([[2, 4, 1], [4, 5 + i, 6], [8, 8, 8]], dtype=tf.int32)[:1 + i % 3])

    jf = differential(make, [lambda i=i: ((data(i),), {}) for i in range(7)])
    assert janus.stats(jf)['graph_calls'] >= 3


def test_a_tensor_array_written_in_a_tensor_dependent_loop_is_carried(strict):
    """``outs = outs.write(t, h)`` in a loop over ``tf.range(n)`` (an RNN unrolled the
    way TF2 code writes it for tf.function), and in a loop over a dataset: the
    TensorArray is a loop variable (it was refused as a Python value changing)."""
    def make():
        def rnn(xs, w, rows):
            outs = tf.TensorArray(tf.float32, size=tf.shape(xs)[0])
            h = tf.zeros([2])
            for t in tf.range(tf.shape(xs)[0]):
                h = tf.tanh(xs[t] * w + h)
                outs = outs.write(t, h)
            sums = tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=())
            for row in rows:
                sums = sums.write(sums.size(), tf.reduce_sum(row))
            return outs.stack(), h, sums.stack()
        return rnn, None

    def call(i):
        rows = tf.data.Dataset.from_tensor_slices(tf.reshape(tf.range(2 * (2 + i % 3)), [-1, 2]))
        return (tf.ones([3 + i % 2, 2]) * i, tf.constant([0.5, -0.5]), rows), {}

    jf = differential(make, [lambda i=i: call(i) for i in range(7)])
    assert janus.stats(jf)['graph_calls'] >= 3


def test_a_list_argument_a_dynamic_loop_hands_on_untouched_comes_back_as_itself(strict):
    """Fuzz finding 44-2: the loop body names ``state[0] = ...`` (so the list is
    carried), but a Python condition skips it.  After the tf.while_loop the local
    must still be the caller's list (and a tuple the caller's tuple), as eagerly;
    the loop rebuilt a new one.  The trip count changes mid-way, so the unrolled
    graph's assumption breaks and the next graph holds the tf.while_loop."""
    def make():
        keep_state = False

        def decode(x, state, pair):
            step = tf.constant(0)
            while step < tf.cast(tf.reduce_max(tf.abs(x)), tf.int32):
                step += 1
                if tf.reduce_sum(x) < -4.0:
                    break
                if keep_state:
                    state[0] = state[0] + x
                x = x * 0.5 + pair[0]
            return x, state, pair
        return decode, None

    def call(scale):
        return lambda: ((tf.constant([scale, -1.0]), [tf.zeros([2]), tf.ones([2])],
                         (tf.constant(0.25), tf.constant(2.0))), {})

    jf = differential(make, [call(s) for s in (3.0, 3.0, 3.0, 3.0, 6.0, -9.0, 5.0, 2.0)])
    assert janus.stats(jf)['graph_calls'] >= 3
    assert has_while(jf)
