"""Speculative control flow: assumed outcomes, asserts, fallback, relaxation, dynamic flow.

Each test runs the program eagerly and under janus call by call (returns and
state compared after every call), breaks an assumption mid-way, and checks
the counters and which kind of graph was built (unrolled or tf.cond/while).

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import numpy as np
import tensorflow as tf

import janus
from conftest import differential


def op_types(jf):
    """Op types of the newest graph, including those inside its functions."""
    from janus.graph.effects import called_graphs
    seen, stack = [], list(jf.cache.newest().concrete.graph.get_operations())
    while stack:
        op = stack.pop()
        seen.append(op.type)
        for graph in called_graphs(op):
            stack.extend(graph.get_operations())
    return seen


def has_cond(jf):
    return any(t in ('If', 'StatelessIf') for t in op_types(jf))


def has_while(jf):
    return any(t in ('While', 'StatelessWhile') for t in op_types(jf))


def assumptions(jf):
    return [a.kind for a in jf.cache.newest().assumptions.values()]


def filled(value, shape=(3,)):
    return tf.fill(shape, float(value))


def test_branch_flips_at_call_7_falls_back_once_then_builds_tf_cond(strict):
    def make():
        def f(x):
            if tf.reduce_sum(x) > 0:
                y = x * 2.0
            else:
                y = x - 1.0
            return y
        return f, None
    calls = [((filled(1 + i),), {}) for i in range(6)] + [((filled(-1 - i),), {}) for i in range(6)]
    jf = differential(make, calls)
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 2 and stats['fallbacks'] == 1
    assert stats['graph_calls'] == 3 + 5 and stats['imperative_calls'] == 1
    assert has_cond(jf) and 'BRANCH' not in assumptions(jf)   # the second graph is the relaxed one
    assert 'relaxed' in janus.explain(jf)


def test_first_graph_has_only_the_assumed_branch_and_its_assert(strict):
    def make():
        def f(x):
            if tf.reduce_sum(x) > 0:
                y = x * 2.0
            else:
                y = tf.sqrt(x) + 1.0
            return y
        return f, None
    jf = differential(make, [((filled(i + 1),), {}) for i in range(5)])
    assert assumptions(jf) == ['BRANCH'] and not has_cond(jf)
    assert 'Sqrt' not in op_types(jf)


def _counting_loop():
    def f(x, n):
        i = tf.constant(0)
        total = tf.zeros_like(x)
        while i < n:
            total = total + x * tf.cast(i, tf.float32)
            i += 1
        return total, i
    return f, None


def test_while_on_tensor_condition_unrolls_then_becomes_tf_while_loop(strict):
    calls = [((filled(1), tf.constant(4)), {}) for _ in range(6)]
    calls += [((filled(2), tf.constant(6)), {}), ((filled(3), tf.constant(2)), {}),
              ((filled(1), tf.constant(0)), {}), ((filled(1), tf.constant(4)), {})]
    jf = differential(make := _counting_loop, calls)  # noqa: F841
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 1 and stats['graphs_built'] == 2
    assert has_while(jf) and stats['graph_calls'] == 3 + 3


def test_unrolled_while_asserts_every_step_and_the_exit():
    fn, _ = _counting_loop()
    jf = janus.function(fn, profile_calls=2)
    for _ in range(3):
        jf(filled(1), tf.constant(3))
    assert assumptions(jf) == ['BRANCH'] * 4 and not has_while(jf)


def test_long_loops_are_never_unrolled(strict):
    with janus.config.patch(max_unroll=8):
        jf = differential(_counting_loop, [((filled(1), tf.constant(20)), {})] * 5)
    assert has_while(jf) and janus.stats(jf)['fallbacks'] == 0


def test_for_over_tensor_of_unknown_length_asserts_the_trip_count(strict):
    def make():
        def f(xs, mask):
            acc = tf.zeros([2])
            for row in tf.boolean_mask(xs, mask):   # length unknown until run time
                acc = acc * 0.5 + row
            return acc
        return f, None
    xs = tf.reshape(tf.range(12, dtype=tf.float32), [6, 2])
    three = tf.constant([True, False, True, False, True, False])
    four = tf.constant([True, True, True, False, True, False])
    calls = [((xs * i, three), {}) for i in range(5)] + [((xs, four), {})]
    calls += [((xs * i, four), {}) for i in range(3)] + [((xs, three), {})]
    jf = differential(make, calls)
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 1 and stats['graphs_built'] == 2
    assert has_while(jf) and 'TRIP_COUNT' not in assumptions(jf)
    assert stats['graph_calls'] == 2 + 4


def test_profiled_lengths_that_vary_give_a_while_loop_at_once(strict):
    def make():
        def f(xs):
            acc = tf.zeros([2])
            for row in xs:
                acc = acc * 0.5 + row
            return acc
        return f, None
    jf = differential(make, [((tf.ones([n, 2]) * n,), {}) for n in [5, 6, 7, 6, 9, 6]])
    assert has_while(jf) and janus.stats(jf)['fallbacks'] == 0


def test_for_over_tensor_with_fixed_length_unrolls_without_asserts(strict):
    def make():
        def f(xs):
            acc = tf.zeros([2])
            for row in xs:
                acc = acc + row
            return acc
        return f, None
    jf = differential(make, [((tf.ones([4, 2]) * i,), {}) for i in range(6)])
    assert not has_while(jf) and assumptions(jf) == []


def test_loop_that_exits_early_on_some_calls(strict):
    def make():
        def f(x, limit):
            total = tf.zeros([])
            for i in range(6):
                total = total + x[i]
                if total > limit:
                    break
            return total
        return f, None
    x = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    limits = [100.0] * 5 + [4.0] + [100.0, 7.0, 1.0, 12.0, 100.0]
    jf = differential(make, [((x, tf.constant(v)), {}) for v in limits])
    stats = janus.stats(jf)
    # The exit moved: the assumption broke and the call fell back; the break
    # became a flag, so the relaxed graph exits early with tf.cond.
    assert stats['fallbacks'] == 1 and stats['graphs_built'] == 2
    assert stats['graph_calls'] == 2 + 5 and has_cond(jf)
    assert '__janus_break' in janus.to_code(jf)


def test_continue_and_while_break_on_the_dynamic_path(strict):
    def make():
        def f(x, n):
            i = tf.constant(0)
            acc = tf.zeros([])
            while i < n:
                i += 1
                if x[i % 4] < 0:
                    continue
                acc += x[i % 4]
                if acc > 10.0:
                    break
            return acc, i
        return f, None
    x = tf.constant([1.0, -2.0, 3.0, 4.0])
    ns = [3, 3, 3, 3, 6, 9, 2, 12, 3]
    with janus.config.patch(max_unroll=4):
        jf = differential(make, [((x, tf.constant(n)), {}) for n in ns])
    assert has_while(jf)


def test_python_valued_condition_is_a_guard_per_value(strict):
    def make():
        def f(x, training):
            if training:
                x = tf.nn.dropout(x, rate=0.0)
                return x * 2.0
            return x
        return f, None
    calls = [((filled(i), i % 2 == 0), {}) for i in range(10)]
    with janus.config.patch(reprofile_calls=0):
        jf = differential(make, calls)
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 2 and stats['fallbacks'] == 0


def test_raise_under_a_tensor_condition_becomes_an_assert():
    def make():
        def f(x):
            if tf.reduce_min(x) < 0:
                raise ValueError('negative input: %s' % x.shape)
            return tf.sqrt(x)
        return f, None
    calls = [((filled(i + 1),), {}) for i in range(5)] + [((filled(-1),), {}),
                                                          ((filled(4),), {})]
    with janus.config.patch(strict=True):
        jf = differential(make, calls)
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 1 and stats['graph_calls'] == 3
    assert stats['graphs_built'] == 1   # raising is not a speculation to relax


def test_raise_in_a_dynamic_branch_keeps_the_other_branch(strict):
    def make():
        def f(x):
            y = x
            if tf.reduce_min(x) < -100:
                raise ValueError('way too small')
            elif tf.reduce_sum(x) > 0:
                y = x * 2.0
            else:
                y = x * 3.0
            return y
        return f, None
    values = [1, -500, -1, 2, -2, 3, -3, -500, 4, -4]   # a profiled call raised
    jf = differential(make, [((filled(v),), {}) for v in values])
    assert 'RAISE' in assumptions(jf) and has_cond(jf)
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1 and stats['fallbacks'] == 1


def test_and_or_and_conditional_expressions(strict):
    def make():
        def f(x, y):
            both = tf.reduce_sum(x) > 0 and tf.reduce_sum(y) > 0
            either = tf.reduce_sum(x) > 5 or tf.reduce_sum(y) < 0
            z = x if tf.reduce_max(x) > tf.reduce_max(y) else y
            return both, either, z
        return f, None
    pairs = [(1, 2), (2, 1), (3, 4), (4, 3), (-1, 2), (5, -5), (1, 1)]
    jf = differential(make, [((filled(a), filled(b)), {}) for a, b in pairs])
    assert janus.stats(jf)['fallbacks'] >= 1


def test_nested_dynamic_branch_inside_dynamic_loop(strict):
    def make():
        def f(x, n):
            i = tf.constant(0)
            acc = tf.zeros_like(x)
            while i < n:
                if i % 2 == 0:
                    acc = acc + x
                else:
                    acc = acc - 0.5 * x
                i = i + 1
            return acc
        return f, None
    ns = [3, 4, 5, 6, 3, 7, 2, 8]
    with janus.config.patch(max_unroll=2):
        jf = differential(make, [((filled(2), tf.constant(n)), {}) for n in ns])
    assert has_while(jf) and has_cond(jf) and janus.stats(jf)['fallbacks'] == 0


def test_variables_updated_in_a_dynamic_branch_wait_for_assertions(strict):
    def make():
        v = tf.Variable(0.0)

        def f(x):
            if tf.reduce_sum(x) > 0:
                v.assign_add(1.0)
            else:
                v.assign_sub(1.0)
            assert tf.reduce_max(x) < 50.0, 'too big'
            return v.read_value()
        return f, v
    values = [1, -1, 2, -2, 3, -3, 60, 4, -4]
    differential(make, [((filled(v),), {}) for v in values], state=lambda v: v)


def test_graph_error_before_any_state_change_reruns_for_eagers_exception(strict):
    def make():
        v = tf.Variable(0.0)

        def f(x, n):
            y = tf.reshape(x, tf.stack([n, -1]))
            v.assign_add(1.0)
            return y
        return f, v
    calls = [((tf.ones([6]), tf.constant(2)), {})] * 5 + [((tf.ones([6]), tf.constant(4)), {})]
    calls += [((tf.ones([6]), tf.constant(3)), {})]
    differential(make, calls, state=lambda v: v)


def test_undefined_in_one_branch_runs_imperatively_with_reason():
    def make():
        def f(x):
            if tf.reduce_sum(x) > 0:
                extra = x * 2.0
            y = x + 1.0
            return y, extra
        return f, None
    values = [1, 2, 3, 4, -1, 5, 6]
    jf = differential(make, [((filled(v),), {}) for v in values])
    assert janus.stats(jf)['fallbacks'] == 1
    assert 'undefined' in janus.explain(jf)


def test_early_returns_become_one_return_and_a_tf_cond(strict):
    def make():
        def f(x):
            if tf.reduce_sum(x) > 0:
                y = x * 2.0
                if tf.reduce_max(x) > 10:
                    return y + 100.0
                return y
            z = -x
            return z * 3.0
        return f, None
    values = [1, 2, 3, -1, 20, -2, 3, 30, -5, 4]
    jf = differential(make, [((filled(v),), {}) for v in values])
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 1 and stats['graphs_built'] == 2 and has_cond(jf)
    assert '__janus_return' in janus.to_code(jf)


def test_return_inside_a_loop_keeps_python_shape_and_assumes_the_exit(strict):
    def make():
        def f(xs):
            for i in range(4):
                if tf.reduce_sum(xs[i]) > 5:
                    return xs[i]
            return xs[0] * 0.0
        return f, None
    base = tf.ones([4, 3])
    jf = differential(make, [((base * 3.0,), {}) for _ in range(6)])
    assert assumptions(jf) == ['BRANCH'] and janus.stats(jf)['fallbacks'] == 0


def numbers(n):
    for i in range(n):
        yield float(i)


def test_loops_over_outside_list_iterators_and_generators_convert():
    def make_iterator_arg():
        def f(x, values):
            for v in values:                # a list iterator from outside: consumed by the call
                x = x + v
            return x
        return f, None

    def make_generator_call():
        def f(x):
            for v in numbers(3):           # a generator function of yours: converted
                x = x * v
            return x
        return f, None
    jf = differential(make_iterator_arg, [lambda i=i: ((filled(i), iter([1.0, 2.0])), {})
                                          for i in range(5)])
    assert janus.stats(jf)['graph_calls'] == 2, janus.explain(jf)   # position and items guarded
    jf = differential(make_generator_call, [((filled(i),), {}) for i in range(5)])
    assert janus.stats(jf)['graph_calls'] == 2, janus.explain(jf)   # 3 profiled, then graphs


def test_a_dict_changed_while_iterating_raises_as_eagerly():
    def make():
        def f(x):
            d = {'a': x, 'b': x * 2.0}
            for k in d:
                d[k + '!'] = d[k]
            return d
        return f, None
    differential(make, [((filled(i),), {}) for i in range(5)])


def test_dynamic_loop_under_a_tape_assumes_one_iteration_so_gradients_stay_none(strict):
    """A tf.while_loop that runs zero times gives its variables zero gradients;
    eagerly they are None. janus assumes at least one iteration (NONEMPTY_LOOP)
    and falls back when the loop does not run; the graph stays."""
    def make():
        w = tf.Variable([1.5, -0.5])

        def f(x, n):
            with tf.GradientTape() as tape:
                i = tf.constant(0)
                y = x
                while i < n:
                    y = y * w
                    i += 1
                loss = tf.reduce_sum(y)
            return tape.gradient(loss, w)
        return f, w
    ns = [2, 3, 4, 5, 2, 0, 3, 0]
    with janus.config.patch(max_unroll=1):
        jf = differential(make, [((filled(1, (2,)), tf.constant(n)), {}) for n in ns])
    assert has_while(jf) and 'NONEMPTY_LOOP' in janus.explain(jf)
    assert janus.stats(jf)['fallbacks'] == 2 and janus.stats(jf)['graphs_built'] == 1


def test_a_tuple_of_tensors_returned_from_both_sides_of_a_tensor_if_merges_item_by_item():
    """``return h, c`` on both paths (a TreeLSTM cell): one tf.cond output per item."""
    def f(x):
        if tf.reduce_sum(x) > 0:
            h = x * 2
            return h, tf.zeros_like(h)
        a = x + 1
        return a, a * 3
    jf = janus.function(f)
    for v in [1.0, -1.0, 2.0, -2.0, 3.0, -3.0]:
        got, want = jf(tf.constant([v])), f(tf.constant([v]))
        assert type(got) is tuple and len(got) == 2
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert janus.stats(jf)['graph_calls'] == 3


def test_merged_tuples_keep_identity_types_and_no_user_new_runs():
    """A merged tuple is a new object (``is`` on it runs imperatively); an item that
    is one object on both sides stays it; numbers keep their Python type; a
    namedtuple subclass with its own ``__new__`` is never rebuilt by janus."""
    import collections

    def same_item(x):
        y = x * 5
        if tf.reduce_sum(x) > 0:
            t = (y, 1)
        else:
            t = (y, 2)
        return t[0] is y

    def whole(x):
        u = (x, 1)
        if tf.reduce_sum(x) > 0:
            t = u
        else:
            t = (x * 2, 2)
        return t is u

    def kinds(x):
        if tf.reduce_sum(x) > 0:
            t = (x, 2)
        else:
            t = (x, 3)
        _, n = t
        return type(t[1]).__name__, type(n) is int, isinstance(n, int)

    for f in (same_item, whole, kinds):
        jf = janus.function(f)
        for v in [1.0, -1.0, 2.0, -2.0, 3.0, -3.0]:
            assert jf(tf.constant([v])) == f(tf.constant([v])), (f.__name__, v)

    class P(collections.namedtuple('P', 'a b')):
        def __new__(cls, a, b):
            print('P.__new__')
            return super().__new__(cls, a, b + 10)

    def pick(x, u, v):
        if tf.reduce_sum(x) > 0:
            t = u
        else:
            t = v
        return t.a, t.b
    jf = janus.function(pick)
    for k in [1.0, -1.0, 2.0, -2.0, 3.0, -3.0]:
        def args():
            return (tf.constant([k]), tuple.__new__(P, (tf.constant([k]), 1)),
                    tuple.__new__(P, (tf.constant([3 * k]), 2)))
        assert jf(*args())[1] == pick(*args())[1]


def test_a_merged_tuple_returned_with_the_side_it_took_is_that_side():
    """``t = u`` on one side of a tensor if, ``return t, u``: on that path eager returns
    one tuple twice; janus gives back the run's side, so ``t is u`` as eagerly."""
    def pair(x):
        u = (x, 1)
        if tf.reduce_sum(x) > 0:
            t = u
        else:
            t = (x * 2, 2)
        return t, u
    jf = janus.function(pair)
    for v in [1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0]:
        got, want = jf(tf.constant([v])), pair(tf.constant([v]))
        assert (got[0] is got[1]) == (want[0] is want[1]), v
        np.testing.assert_array_equal(got[0][0].numpy(), want[0][0].numpy())
        assert got[0][1] == want[0][1]
    assert janus.stats(jf)['graph_calls'] > 0


def test_tuples_with_the_same_items_made_on_each_side_are_two_objects():
    """``u = (x, 1)``; one side keeps it, the other makes ``(x, 1)`` again: eagerly two
    objects, which ``is`` tells apart (they used to merge into ``u``)."""
    def pick(x):
        u = (x, 1)
        if tf.reduce_sum(x) > 0:
            t = u
        else:
            t = (x, 1)
        if t is u:
            return x + 1.0, t, u
        return x - 1.0, t, u
    jf = janus.function(pick)
    for v in [1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0]:
        got, want = jf(tf.constant([v])), pick(tf.constant([v]))
        np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
        assert (got[1] is got[2]) == (want[1] is want[2]), v
