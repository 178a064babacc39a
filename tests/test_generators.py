"""Generators consumed inside a janus function: converted and run inside the trace.

A generator function of your own called in the function (``for a, b in
pairs(xs)``, ``sum(scaled(x))``, ``next(g)``, a method ``self.chunks(x)``) is
converted like any function of yours; its body runs while the trace consumes it,
so the loop is unrolled into the graph.  A generator that leaves the call
(returned, stored) or whose statements need a graph's control flow is not
converted: that statement runs in Python.  Each test runs eagerly and under
janus on fresh objects (``conftest.differential``): returns, stdout, state and
exceptions after every call.
"""
import pytest
import tensorflow as tf

import janus
from conftest import differential


def pairs(xs):
    for i in range(len(xs) - 1):
        yield xs[i], xs[i + 1]


def scaled(t, n):
    for i in range(n):
        yield t * (i + 1)


def calls_of(*shapes, repeat=7):
    return [((tf.random.stateless_normal(shape, seed=[i, 7]),), {})
            for i in range(repeat) for shape in shapes]


def converts(jf, at_least=3):
    stats = janus.stats(jf)
    assert stats['graph_calls'] >= at_least and stats['split_calls'] == 0, janus.explain(jf)


def test_loops_over_generators_unroll_into_one_graph():
    def make():
        def f(x):
            total = tf.zeros([])
            for a, b in pairs([x, x * 2, x * 3]):
                total += tf.reduce_sum(a * b)
            for i, w in enumerate(scaled(x, 3)):
                total += tf.reduce_sum(w) * i
            return total, sum(scaled(x, 2)), list(zip(scaled(x, 2), pairs([1, 2, 3])))
        return f, None
    converts(differential(make, calls_of([3])))


class Trainer:
    def __init__(self):
        self.v = tf.Variable(1.0)
        self.seen = 0
        self.log = []

    def chunks(self, x, size):
        for start in range(0, int(x.shape[0]), size):
            self.seen += 1
            yield x[start:start + size]

    def step(self, x):
        losses = []
        for chunk in self.chunks(x, 2):
            loss = tf.reduce_mean(chunk * self.v)
            self.v.assign_add(loss * 0.01)
            losses.append(loss)
        self.log.append(len(losses))
        return tf.add_n(losses), self.seen


def test_a_generator_method_with_state_writes():
    def make():
        trainer = Trainer()
        return trainer.step, trainer
    jf = differential(make, calls_of([6], [4]), state=lambda t: (t.v, t.seen, t.log))
    converts(jf)


def test_next_on_a_generator_and_one_dropped_half_way():
    def make():
        def f(x):
            g = scaled(x, 4)
            first = next(g)
            second = next(g)
            return first + second, next(scaled(x, 1), None)
        return f, None
    converts(differential(make, calls_of([2])))


def test_a_generator_returning_early_and_its_stop_value():
    def upto(xs, limit):
        for x in xs:
            if x > limit:
                return 'stopped'
            yield x

    def make():
        def f(x, limit):
            kept = [v for v in upto([1, 2, 3, 4], limit)]
            g = upto([1], limit)
            next(g)
            try_stop = None
            for _ in g:
                pass
            return x * len(kept), kept, try_stop
        return f, None
    calls = [((tf.constant(2.0), n), {}) for n in (2, 2, 2, 3, 3, 3, 0)]
    differential(make, calls)


def test_an_exception_raised_inside_a_generator_reaches_the_caller():
    def checked(xs):
        for x in xs:
            if x < 0:
                raise ValueError('negative item %d' % x)
            yield x

    def make():
        def f(x, items):
            return x * sum(checked(items))
        return f, None
    calls = [((tf.constant(1.0), [1, 2]), {}), ((tf.constant(1.0), [1, 2]), {}),
             ((tf.constant(1.0), [1, 2]), {}), ((tf.constant(1.0), [1, 2]), {}),
             ((tf.constant(1.0), [1, -2]), {}), ((tf.constant(1.0), [3, 2]), {})]
    differential(make, calls)


def test_a_generator_that_leaves_the_call_is_the_real_one():
    """Returned or stored, the generator runs later, outside the call: janus must not
    hand out one its trace made (that statement runs in Python)."""
    class Holder:
        pending = None

    def make():
        holder = Holder()

        def f(x):
            holder.pending = scaled(x, 2)
            return x + 1, scaled(x, 3)
        return f, holder

    eager_fn, eager_holder = make()
    plain_fn, janus_holder = make()
    jf = janus.function(plain_fn)
    for i in range(6):
        x = tf.constant([1.0, float(i)])
        (e_value, e_gen), (j_value, j_gen) = eager_fn(x), jf(x)
        assert e_value.numpy().tolist() == j_value.numpy().tolist()
        assert [v.numpy().tolist() for v in e_gen] == [v.numpy().tolist() for v in j_gen]
        assert [v.numpy().tolist() for v in eager_holder.pending] == [
            v.numpy().tolist() for v in janus_holder.pending]


def test_a_yield_under_a_tensor_condition():
    def positives(xs):
        for x in xs:
            if tf.reduce_sum(x) > 0:
                yield x

    def make():
        def f(x):
            kept = list(positives([x, -x, x * 2]))
            return tf.add_n(kept) if kept else tf.zeros_like(x), len(kept)
        return f, None
    calls = [((tf.constant([1.0, 2.0]),), {})] * 5 + [((tf.constant([-1.0, -2.0]),), {})] * 4
    differential(make, calls)


def test_a_with_in_a_generator_is_not_converted():
    def make():
        log = []

        class Scope:
            def __enter__(self):
                log.append('enter')

            def __exit__(self, *exc):
                log.append('exit')

        def guarded(x):
            with Scope():
                yield x * 2

        def f(x):
            return [v for v in guarded(x)][0] + 1
        return f, log
    differential(make, calls_of([2]), state=lambda log: list(log))


@pytest.mark.parametrize('use', ['send', 'close', 'throw'])
def test_send_close_and_throw_behave_as_eagerly(use):
    def echo(x):
        received = yield x
        while True:
            try_value = yield received if received is not None else x
            received = try_value

    def make():
        def f(x):
            g = echo(x)
            first = next(g)
            if use == 'send':
                return first, g.send(x * 3)
            if use == 'close':
                g.close()
                return first, next(g, 'done')
            return first, g.throw(ValueError('thrown'))
        return f, None
    differential(make, calls_of([2]))
