"""The deferred-update rule: a graph run whose Janus>Assert fails changed nothing.

The call is then re-run imperatively, so state ends exactly as eagerly.
These tests fail if the control dependencies from asserts to state updates
are removed (the variable would be updated twice: by the graph, then again).

PYTEST_DONT_REWRITE: the programs under test use `assert`; pytest's rewriting
would change their eager messages but not janus's copies of them.
"""
import keras
import pytest
import tensorflow as tf

import janus
from conftest import assert_same, differential
from janus.graphgen import tracer


def t(*shape, seed=0):
    return tf.random.stateless_normal(shape, seed=[seed, 4])


def _counter_program():
    counter = tf.Variable(0.0)
    total = tf.Variable(tf.zeros([3]))

    def f(x):
        counter.assign_add(1.0)        # happens before the assert in program order
        total.assign_add(x)
        assert tf.reduce_all(x > -10.0), 'x out of range'
        return total * 2.0
    return f, (counter, total)


def test_failed_assert_changes_no_variable_and_reruns_imperatively(strict):
    calls = [((t(3, seed=i),), {}) for i in range(5)]
    calls += [((tf.constant([-20.0, 0.0, 1.0]),), {})]   # assert fails in the graph
    calls += [((t(3, seed=9),), {}), ((t(3, seed=10),), {})]
    jf = differential(_counter_program, calls, state=lambda s: [s[0], s[1]])
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 1 and stats['graphs_built'] == 1
    assert stats['graph_calls'] == 4 and stats['imperative_calls'] == 1
    assert 'ASSERT' in janus.explain(jf) and 'fallback' in janus.explain(jf)


def test_state_updates_carry_control_dependencies_on_every_assert(strict):
    fn, _ = _counter_program()
    jf = janus.function(fn, profile_calls=0)
    jf(t(3))
    entry = jf.cache.newest()
    graph = entry.concrete.graph
    asserts = [op for op in graph.get_operations() if op.type == 'Janus>Assert']
    updates = [op for op in graph.get_operations() if op.type == 'AssignAddVariableOp']
    assert len(asserts) == 1 and len(updates) == 2
    for op in updates:
        assert asserts[0] in op.control_inputs


def test_without_deferral_the_variable_would_change_twice(monkeypatch):
    """Guards the test above: breaking the rule makes the differential test fail."""
    monkeypatch.setattr(tracer, 'defer_state_updates', lambda graph, asserts, **_: True)
    fn, (counter, _) = _counter_program()
    jf = janus.function(fn, profile_calls=0)
    jf(t(3))
    with pytest.raises(AssertionError):
        jf(tf.constant([-20.0, 0.0, 1.0]))
    assert float(counter.numpy()) == 3.0  # eager would say 2.0


def test_assert_depending_on_a_state_change_is_not_speculated():
    def make():
        v = tf.Variable(1.0)

        def f(x):
            v.assign(x)
            assert v.read_value() > 0.0
            return v * 2.0
        return f, v
    calls = [((tf.constant(float(i + 1)),), {}) for i in range(5)] + [((tf.constant(-1.0),), {})]
    jf = differential(make, calls, state=lambda v: v)
    assert janus.stats(jf)['graphs_built'] == 0
    assert 'depends on a state change' in janus.explain(jf)


def test_keras_training_step_with_failing_assert_keeps_weights_equal(strict):
    def make():
        keras.utils.set_random_seed(1)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation='tanh'),
                                  keras.layers.Dense(1)])
        opt = keras.optimizers.Adam(0.01)

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            assert loss < 100.0, 'diverged'
            return loss
        return step, (model, opt)

    def state(s):
        model, opt = s
        return [v.numpy() for v in model.weights] + [opt.iterations.numpy()]

    calls = [((t(8, 4, seed=i), t(8, 1, seed=i + 30)), {}) for i in range(6)]
    calls += [((t(8, 4, seed=40), t(8, 1, seed=41) * 1000.0), {})]   # loss >= 100
    calls += [((t(8, 4, seed=i), t(8, 1, seed=i + 30)), {}) for i in range(50, 53)]
    eager_step, eager_s = make()
    plain_step, janus_s = make()
    jf = janus.function(plain_step)
    for number, (args, kwargs) in enumerate(calls):
        outcomes = []
        for fn in (eager_step, jf):
            try:
                outcomes.append(('ok', fn(*args)))
            except AssertionError as e:
                outcomes.append(('raised', str(e)))
        assert outcomes[0][0] == outcomes[1][0], number
        if outcomes[0][0] == 'ok':
            assert_same(outcomes[0][1], outcomes[1][1])
        for a, b in zip(state(eager_s), state(janus_s)):
            assert_same(tf.constant(a), tf.constant(b), 'call %d state' % number)
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 1 and stats['graphs_built'] == 1, janus.explain(jf)
    assert stats['graph_calls'] == 6, janus.explain(jf)
