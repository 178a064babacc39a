"""Straight-line code converts, means what it means eagerly, and is counted right."""
import collections

import tensorflow as tf

import janus
from conftest import assert_same, differential

Pair = collections.namedtuple('Pair', 'first second')


def t(*shape, seed=0, dtype=tf.float32):
    return tf.cast(tf.random.stateless_normal(shape, seed=[seed, 1]) * 3, dtype)


def test_ten_calls_one_shape_build_one_graph_and_run_it_seven_times(strict):
    def make():
        def f(x, y):
            return x * 2.0 + y
        return f, None
    jf = differential(make, [((t(4, 3, seed=i), t(4, 3, seed=i + 50)), {}) for i in range(10)])
    assert janus.stats(jf) == dict(janus.stats(jf), calls=10, profiled_calls=3, graphs_built=1,
                                   graph_calls=7, fallbacks=0, imperative_calls=0)


def test_operators_literals_unpacking_and_nested_returns(strict):
    def make():
        def f(x, y, k):
            a, (b, c) = x + y, (x - y, x * y)
            d = {'div': a / (tf.abs(c) + 1.0), 'pow': b ** 2, 'neg': -a, 'mod': k % 3}
            first, *rest = [a, b, c]
            cmp = (x > y, x <= y, x == y, x != y)
            logic = k > 1 and k < 10 or not k
            return Pair(first, rest), d, list(cmp), logic, (k // 2, k * 1.5)
        return f, None
    calls = [((t(3, 2, seed=i), t(3, 2, seed=9 + i), 5), {}) for i in range(6)]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] == 3


def test_tensor_subscripts_slices_and_tf_namespaces(strict):
    def make():
        def f(x, w):
            h = tf.nn.relu(tf.linalg.matmul(x, w))
            return (h[0], h[:, 1:], h[::2, ::-1], h[..., 0], h[1, 2], tf.math.reduce_max(h),
                    tf.concat([h, h], axis=0)[-1])
        return f, None
    calls = [((t(4, 5, seed=i), t(5, 3, seed=i + 7)), {}) for i in range(5)]
    differential(make, calls)


def test_whitelisted_builtins(strict):
    def make():
        def f(xs, n):
            total = sum([x * 2 for x in xs])
            pairs = [a + b for a, b in zip(xs, reversed(xs))]
            scaled = [x * float(i) for i, x in enumerate(xs)]
            return (total, pairs, scaled, len(xs), max(n, 2), min(n, 2), abs(-n), int(2.5 * n),
                    list(range(n)), isinstance(xs[0], tf.Tensor), tuple(range(1, n, 2)))
        return f, None
    calls = [(([t(2, seed=i), t(2, seed=i + 1), t(2, seed=i + 2)], 4), {}) for i in range(5)]
    differential(make, calls)


def helper_scale(x, factor=3.0):
    return x * factor


def helper_chain(x):
    return helper_scale(x) + helper_scale(x, factor=-1.0)


def test_inlines_user_callees_with_defaults_and_keywords(strict):
    def make():
        def f(x):
            return helper_chain(x), helper_scale(x, factor=0.5)
        return f, None
    jf = differential(make, [((t(3, seed=i),), {}) for i in range(5)])
    code = janus.to_code(jf)
    assert 'inlined callee helper_chain' in code and 'inlined callee helper_scale' in code


def test_nested_function_with_closure_and_lambda(strict):
    def make():
        offset = tf.constant(10.0)
        square = lambda v: v * v  # noqa: E731

        def f(x):
            return square(x) + offset
        return f, None
    differential(make, [((t(2, seed=i),), {}) for i in range(5)])


class Scaler:
    def __init__(self, factor):
        self.factor = factor
        self.bias = tf.constant([1.0, 2.0])

    @janus.function
    def apply(self, x):
        return x * self.factor + self.bias

    def plain(self, x):
        return x * self.factor + self.bias


def test_methods_share_one_function_and_guard_each_instance(strict):
    a, b = Scaler(2.0), Scaler(2.0)
    for i in range(5):
        x = t(2, seed=i)
        assert_same(a.plain(x), a.apply(x))
        assert_same(b.plain(x), b.apply(x))
    stats = janus.stats(Scaler.apply)
    # self.bias is re-read on every run (a hoisted input, guarded by dtype and
    # shape), so b's different bias needs no second graph and is never stale.
    assert stats['graphs_built'] == 1 and stats['calls'] == 10
    b.bias = tf.constant([5.0, 6.0])
    x = t(2, seed=9)
    assert_same(b.plain(x), b.apply(x))


def test_python_scalar_arguments_are_guarded_by_value(strict):
    def make():
        def f(x, scale, mode):
            return x * scale if mode == 'mul' else x + scale
        return f, None
    calls = [((t(2, seed=i), 2.0, 'mul'), {}) for i in range(4)]
    calls += [((t(2, seed=5), 3.0, 'mul'), {}), ((t(2, seed=6), 3.0, 'add'), {}),
              ((t(2, seed=7), 2.0, 'mul'), {}), ((t(2, seed=8), 3, 'mul'), {})]
    with janus.config.patch(reprofile_calls=0):
        jf = differential(make, calls)
    assert janus.stats(jf)['graphs_built'] == 4  # (2.0,mul) (3.0,mul) (3.0,add) (3,mul)


def test_star_args_and_kwargs(strict):
    def make():
        def f(x, *rest, scale=1.0, **named):
            return x * scale + sum(rest) + named['shift']
        return f, None
    calls = [((t(2, seed=i), t(2, seed=i + 1), t(2, seed=2)), {'scale': 2.0, 'shift': t(2)})
             for i in range(5)]
    differential(make, calls)


def test_concurrent_calls_from_threads(strict):
    import threading

    def f(x, k):
        return tf.reduce_sum(x * k, axis=-1)
    jf = janus.function(f)
    failures = []

    def worker(seed):
        try:
            for i in range(60):
                x = t(3 + (i + seed) % 4, 5, seed=i)
                k = float(seed % 2 + 1)
                assert_same(f(x, k), jf(x, k))
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(e)
    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[:1]
    stats = janus.stats(jf)
    assert stats['calls'] == 240 and stats['graph_calls'] >= 200
