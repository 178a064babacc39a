"""What a trace does besides computing: state changes, output, observed shapes.

* All-or-nothing by op definition: every op that changes a resource (a
  variable, a random generator, a dataset iterator, a hash table) waits for
  every assertion, so a run whose assumption broke changed nothing and the
  imperative re-run sees eager's state; unseeded stateful random ops refuse.
* ``print(v)`` of a variable prints its value at that point of the program.
* Early returns nested in ``if``s keep their meaning on every path.
* Relaxed shapes never show user code an unknown dimension.
* Library code that prints while janus traces it refuses the trace.
* Changing a Keras layer's ``trainable`` (or another setting) between calls
  is seen by the next call.

Every test is differential: eager and janus on fresh objects, with an
assumption broken mid-way where that matters.

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import sys
import threading
import types

import keras
import pytest
import tensorflow as tf

import janus
from conftest import assert_same, differential, outcome
from janus.graphgen import effects
from janus.graphgen.converters import common
from janus.trace import trace_context, trace_output, tracing


def t(*shape, seed=0):
    return tf.random.stateless_normal(shape, seed=[seed, 6])


def fill(value, shape=(3,)):
    return tf.fill(shape, float(value))


def _calls(values, *extra):
    return [((fill(v),) + extra, {}) for v in values]


def with_stdout(make, calls, capsys, state=None, **options):
    """``differential`` that also compares what each call printed."""
    eager_fn, eager_state = make()
    plain_fn, janus_state = make()
    janus_fn = janus.function(plain_fn, **options)
    for number, (args, kwargs) in enumerate(calls):
        expected = outcome(eager_fn, *args, **kwargs)
        expected_out = capsys.readouterr().out
        actual = outcome(janus_fn, *args, **kwargs)
        actual_out = capsys.readouterr().out
        where = 'call %d' % number
        assert expected[0] == actual[0], '%s: eager %s, janus %s' % (where, expected, actual)
        if expected[0] == 'ok':
            assert_same(expected[1], actual[1], where)
        assert expected_out == actual_out, where
        if state is not None:
            assert_same(state(eager_state), state(janus_state), where + ' state')
    return janus_fn


# -- all-or-nothing, by op definition ---------------------------------------

def test_op_effects_come_from_op_definitions():
    table = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, -1.0)
    v, g = tf.Variable(1.0), tf.random.Generator.from_seed(1)
    it = iter(tf.data.Dataset.range(3))

    @tf.function
    def f(x):
        v.assign_add(v.read_value() + x)
        table.insert(tf.constant([1], tf.int64), tf.reshape(x, [1]))
        tf.print(table.lookup(tf.constant([1], tf.int64)), g.normal([]), it.get_next())
        return tf.random.uniform([])
    graph = f.get_concrete_function(tf.constant(1.0)).graph
    kinds = {op.type: effects.effect(op) for op in graph.get_operations()}
    change, none = effects.Effect.CHANGE, effects.Effect.NONE
    for op_type in ('AssignAddVariableOp', 'LookupTableInsertV2', 'RngReadAndSkip',
                    'IteratorGetNext', 'PrintV2'):
        assert kinds[op_type] is change, op_type
    for op_type in ('ReadVariableOp', 'LookupTableFindV2', 'AddV2'):
        assert kinds[op_type] is none, op_type
    assert kinds['RandomUniform'] is effects.Effect.UNREPRODUCIBLE


def _generator_program():
    g = tf.random.Generator.from_seed(1234)

    def f(x):
        noise = g.normal([3])            # a draw: advances the generator's state
        if tf.reduce_sum(x) > 0.0:       # profiled always true: assumed, then broken
            return x + noise
        return x - noise
    return f, g


def test_generator_draw_waits_for_the_assertions(strict):
    jf = differential(_generator_program, _calls([1, 2, 3, 4, -5, 6, -7, 8]),
                      state=lambda g: g.state)
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 1 and stats['graph_calls'] >= 4, janus.explain(jf)


def _has_cond(jf):
    graph = jf.cache.newest().concrete.graph
    return any(op.type in ('If', 'StatelessIf') for op in graph.get_operations())


def test_generator_draw_feeding_a_decision_is_real_control_flow(strict):
    """A test on the draw itself is never assumed (its Janus>Assert could not run
    before the draw): it is a tf.cond on the drawn value, so no call draws twice."""
    def make():
        g = tf.random.Generator.from_seed(99)

        def f(x):
            noise = g.uniform([])
            if x + noise > 0.0:      # the decision rests on the draw itself
                return x + noise
            return x - noise
        return f, g
    calls = [((tf.constant(v),), {}) for v in [1.0] * 5 + [-5.0] + [1.0] * 3]
    jf = differential(make, calls, state=lambda g: g.state)
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 0 and stats['graph_calls'] == 6, janus.explain(jf)
    assert _has_cond(jf)


def test_generator_draw_feeding_an_assertion_runs_imperatively():
    def make():
        g = tf.random.Generator.from_seed(99)

        def f(x):
            noise = g.uniform([])
            assert x + noise > -2.0   # a check on the draw itself: not before the draw
            return x + noise
        return f, g
    calls = [((tf.constant(v),), {}) for v in [1.0] * 5 + [-5.0] + [1.0] * 3]
    jf = differential(make, calls, state=lambda g: g.state)
    assert janus.stats(jf)['graphs_built'] == 0
    assert 'RngReadAndSkip' in janus.explain(jf)


def _iterator_program(depends_on_element):
    def make():
        it = iter(tf.data.Dataset.range(100).map(lambda v: tf.cast(v, tf.float32)))

        def f(it, limit):
            v = it.get_next()
            test = v if depends_on_element else limit * 0.0
            if test < limit:
                return v
            return -v
        return f, it
    return make


@pytest.mark.parametrize('depends_on_element', [False, True])
def test_iterator_skips_no_element_when_an_assumption_breaks(depends_on_element):
    eager_fn, eager_it = _iterator_program(depends_on_element)()
    plain_fn, janus_it = _iterator_program(depends_on_element)()
    jf = janus.function(plain_fn)
    for number, limit in enumerate([1000.0] * 5 + [-1.0] + [1000.0] * 3):
        expected = eager_fn(eager_it, tf.constant(limit))
        assert_same(expected, jf(janus_it, tf.constant(limit)), 'call %d' % number)
    stats = janus.stats(jf)
    if depends_on_element:   # a decision on the element: a tf.cond, never assumed
        assert stats['fallbacks'] == 0 and stats['graph_calls'] >= 5, janus.explain(jf)
        assert _has_cond(jf)
    else:
        assert stats['fallbacks'] == 1 and stats['graph_calls'] >= 4, janus.explain(jf)


def test_hash_table_update_waits_for_the_assertions(strict):
    def make():
        table = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, 0.0)
        keys = tf.constant([1, 2, 3], tf.int64)

        def f(x):
            table.insert(keys, table.lookup(keys) + x)   # applied twice would double count
            if tf.reduce_sum(x) > 0.0:
                return x * 2.0
            return x
        return f, (table, keys)
    jf = differential(make, _calls([1, 2, 3, 4, -5, 6]), state=lambda s: s[0].lookup(s[1]))
    assert janus.stats(jf)['fallbacks'] == 1, janus.explain(jf)


def test_unseeded_random_ops_run_imperatively_with_a_reason():
    def make():
        def f(x):
            return x * 2.0 + 0.0 * tf.random.uniform([])
        return f, None
    jf = differential(make, _calls([1, 2, 3, 4, 5]))
    assert janus.stats(jf)['graphs_built'] == 0
    assert 'tf.random.Generator' in janus.explain(jf)


def test_keras_dropout_and_noise_still_convert(strict):
    def make():
        keras.utils.set_random_seed(5)
        drop = keras.layers.Dropout(0.5, seed=3)
        noise = keras.layers.GaussianNoise(0.1, seed=4)

        def f(x):
            y = noise(drop(x, training=True), training=True)
            if tf.reduce_sum(x) > 0.0:    # broken once: the seeds advance once
                return y
            return -y
        return f, (drop, noise)

    def seeds(s):
        return [s[0].seed_generator.state, s[1].seed_generator.state]
    calls = [((t(4, 3, seed=i) + 3.0,), {}) for i in range(5)]
    calls += [((t(4, 3, seed=9) - 3.0,), {}), ((t(4, 3, seed=10) + 3.0,), {})]
    jf = differential(make, calls, state=seeds)
    assert janus.stats(jf)['graph_calls'] >= 3, janus.explain(jf)


# -- print(v) of a variable -----------------------------------------------------

def test_print_of_a_variable_shows_its_value_at_that_point(strict, capsys):
    def make():
        v = tf.Variable([1.0, 2.0], name='acc')
        kv = keras.Variable(0.5, name='scale')

        def f(x):
            print('before:', v, [kv])
            v.assign_add(x)
            kv.assign(kv * 2.0)
            print('after:', v, kv, sep='|')
            assert tf.reduce_sum(x) < 100.0, 'too big'
            return v.read_value()
        return f, (v, kv)
    calls = [((fill(i, (2,)),), {}) for i in [1, 2, 3, 4, 500, 6, 7]]
    jf = with_stdout(make, calls, capsys, state=lambda s: list(s))
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 1 and stats['graph_calls'] >= 3, janus.explain(jf)


def test_print_of_an_object_that_prints_itself_runs_imperatively(capsys):
    class Box:
        def __init__(self, v):
            self.v = v

        def __repr__(self):
            return 'Box(%s)' % self.v.numpy()

    def make():
        box = Box(tf.Variable(1.0))

        def f(x):
            print(box)
            box.v.assign_add(x)
            return x
        return f, box
    calls = [((tf.constant(float(i)),), {}) for i in range(5)]
    jf = with_stdout(make, calls, capsys, state=lambda b: b.v)
    assert 'prints' in janus.explain(jf)


# -- nested early returns ------------------------------------------------------

def two_levels(x, c):
    if c:
        if x > 0.0:
            return x * 2.0
    return x - 1.0


def three_levels_with_else(x, c):
    if x > 0.0:
        if c:
            if x > 5.0:
                return x * 3.0
            x = x + 1.0
        else:
            return x - 1.0
    elif x < -3.0:
        return -x
    return x * 2.0


def both_sides_nested(x, c):
    if x > 0.0:
        if x > 2.0:
            return x * 10.0
    else:
        if x < -2.0:
            return -x
        if c:
            return x + 100.0
    return (x + 0.5) * (x + 0.5)


def tail_with_a_temporary(x, c):
    if x > 0.0:
        if c:
            return x
    y = x + 0.5          # the tail is copied into two branches; y is local to each copy
    return y * y


def before_a_loop(x, c):
    if c:
        if x > 0.0:
            return x
    for _ in range(3):
        x = x + 1.0
    return x


NESTED = [two_levels, three_levels_with_else, both_sides_nested, before_a_loop]


@pytest.mark.parametrize('fn', NESTED, ids=[f.__name__ for f in NESTED])
@pytest.mark.parametrize('values', [
    [1.0, 6.0, 3.0, -1.0, -5.0, 7.0, -7.0, 0.5, 2.5],     # paths differ while profiling
    [1.0, 1.0, 1.0, 1.0, 6.0, -5.0, -1.0, 3.0, 1.0],      # speculated, then broken
], ids=['varied', 'broken'])
def test_nested_returns_keep_their_meaning(fn, values, strict):
    def make():
        return fn, None
    calls = [((tf.constant(v), c), {}) for v in values for c in (True, False)]
    differential(make, calls)


@pytest.mark.parametrize('fn', NESTED, ids=[f.__name__ for f in NESTED])
def test_nested_returns_on_python_values(fn, strict):
    def make():
        return fn, None
    values = [1.0, 6.0, -1.0, -5.0, 3.0, 1.0, 1.0, 1.0]
    calls = [((v, c), {}) for v in values for c in (True, False)]
    differential(make, calls)


def test_a_copied_tail_with_a_temporary_keeps_its_meaning():
    """Not strict: the control pass counts a name read in one copy of the tail as
    read outside the other copy's branch, so a dynamic tf.cond may be refused."""
    def make():
        return tail_with_a_temporary, None
    values = [1.0, -1.0, 2.0, -3.0, 1.0, 4.0, -2.0]
    differential(make, [((tf.constant(v), c), {}) for v in values for c in (True, False)])


def test_nested_break_and_continue_keep_their_meaning(strict):
    def make():
        def f(xs, stop, skip):
            total = xs[0] * 0.0
            for x in xs:
                if x > 0.0:
                    if x > stop:
                        break
                    if x < skip:
                        continue
                total = total + x
            return total
        return f, None
    calls = [((tf.constant([1.0, 5.0, 2.0, 9.0, 3.0]), stop, skip), {})
             for stop, skip in [(4.0, 1.5), (10.0, 0.0), (2.5, 2.0), (4.0, 1.5), (8.0, 3.0)]]
    differential(make, calls)


def test_a_fold_that_fails_leaves_the_code_unchanged():
    import gast
    tree = gast.parse('if a:\n    if b:\n        return 1\nwhile c:\n    return 2\nreturn 3')
    before = gast.dump(tree)
    with pytest.raises(common.CannotFold):
        common.fold_jumps(tree.body, lambda n: any(isinstance(s, gast.Return)
                                                   for s in gast.walk(n)),
                          lambda s: [gast.Pass()] if isinstance(s, gast.Return) else None)
    assert gast.dump(tree) == before


# -- relaxed shapes ------------------------------------------------------------

def _shape_reader(read):
    def make():
        def f(x):
            n = read(x)
            if n is None:          # never true eagerly
                return x * 0.0
            return x * 2.0 + float(n if isinstance(n, int) else 1)
        return f, None
    return make


READERS = {
    'TensorShape(x.shape)[0]': lambda x: tf.TensorShape(x.shape)[0],
    'x.shape.dims[0]': lambda x: x.shape.dims[0].value,
    'x.shape.as_list()[0]': lambda x: x.shape.as_list()[0],
    'list(x.shape)[0]': lambda x: list(x.shape)[0],
    'tuple(x.shape)[0]': lambda x: tuple(x.shape)[0],
    'x.shape._dims[0]': lambda x: x.shape._dims[0],
    'x.shape == (2, 3)': lambda x: 1 if x.shape == (2, 3) else 0,
    'str(x.shape)': lambda x: len(str(x.shape)),
    'tf.zeros(x.shape)': lambda x: tf.zeros(x.shape).shape[0],
}


@pytest.mark.parametrize('read', list(READERS.values()), ids=list(READERS))
def test_unknown_dimensions_are_never_observed(read):
    calls = [((tf.ones([rows, 3]),), {}) for rows in [2, 2, 2, 2, 3, 4, 5, 6, 7]]
    differential(_shape_reader(read), calls)


def test_rank_and_known_dimensions_keep_the_relaxed_graph(strict):
    def make():
        def f(x):
            return x * float(len(x.shape) + x.shape[-1] + x.shape.rank)
        return f, None
    calls = [((tf.ones([rows, 3]),), {}) for rows in [2, 2, 2, 2, 3, 4, 5, 6, 7]]
    jf = differential(make, calls)
    assert janus.stats(jf)['graphs_built'] == 2, janus.explain(jf)   # exact, then (None, 3)


# -- output at trace time --------------------------------------------------------

def test_library_code_that_prints_refuses_the_trace(capsys):
    def make():
        def f(x):
            args = tf.unstack(x)
            tf.autograph.trace(*args)   # print(*args), from inside TensorFlow
            return x * 2.0 + 1.0
        return f, None
    calls = [((tf.constant([float(i)]),), {}) for i in range(6)]
    jf = with_stdout(make, calls, capsys)
    assert janus.stats(jf)['graphs_built'] == 0
    assert 'standard output' in janus.explain(jf)


@pytest.mark.parametrize('capture', ['capsys', 'capfd'])
def test_stdout_is_restored_after_every_trace_even_a_failed_one(capture, request):
    captured = request.getfixturevalue(capture)

    def ok(x):
        print('value', x)
        return x + 1.0

    def fails(x):
        tf.autograph.trace(x)
        return x + 1.0
    stream = sys.stdout
    for fn in (ok, fails):
        jf = janus.function(fn, profile_calls=0)
        for _ in range(2):
            jf(tf.constant(1.0))
            assert sys.stdout is stream
    assert captured.readouterr().out.count('value tf.Tensor(1.0') == 2


def test_the_stdout_proxy_writes_through_outside_a_trace(capsys):
    with trace_output.refused():
        print('not tracing')
    assert capsys.readouterr().out == 'not tracing\n'


def test_the_stdout_proxy_refuses_only_the_tracing_thread(capsys):
    ctx = types.SimpleNamespace(refusals=[])
    stream = sys.stdout
    with trace_output.refused():
        tracing.enter_trace(ctx)
        try:
            other = threading.Thread(target=print, args=('other thread',))
            other.start()
            other.join()
            with pytest.raises(trace_context.Unsupported):
                print('tracing thread')
        finally:
            tracing.exit_trace()
    assert sys.stdout is stream
    assert capsys.readouterr().out == 'other thread\n' and len(ctx.refusals) == 1


# -- Keras layer settings --------------------------------------------------------

def _bn_program():
    keras.utils.set_random_seed(0)
    bn = keras.layers.BatchNormalization()
    bn.build((None, 2))

    def f(x):
        return bn(x, training=True)
    return f, bn


def _bn_calls(count):
    return [((tf.constant([[1.0, 2.0], [3.0, 6.0]]) + i,), {}) for i in range(count)]


def test_freezing_a_keras_layer_is_seen_by_the_next_call(strict):
    eager_fn, eager_bn = _bn_program()
    plain_fn, janus_bn = _bn_program()
    jf = janus.function(plain_fn)
    for number, (args, _) in enumerate(_bn_calls(9)):
        if number in (5, 7):
            eager_bn.trainable = janus_bn.trainable = number == 7
        assert_same(eager_fn(*args), jf(*args), 'call %d' % number)
        assert_same(eager_bn.moving_mean, janus_bn.moving_mean, 'call %d state' % number)
    assert 'LIBRARY_CONFIG' in janus.explain(jf)


def test_toggling_trainable_reuses_the_graphs_built_for_each_setting(strict):
    eager_fn, eager_bn = _bn_program()
    plain_fn, janus_bn = _bn_program()
    jf = janus.function(plain_fn, profile_calls=1)
    for number, (args, _) in enumerate(_bn_calls(12)):
        eager_bn.trainable = janus_bn.trainable = number % 2 == 0
        assert_same(eager_fn(*args), jf(*args), 'call %d' % number)
        assert_same(eager_bn.moving_mean, janus_bn.moving_mean, 'call %d state' % number)
    assert janus.stats(jf)['graphs_built'] == 2, janus.explain(jf)


def test_changing_a_layer_setting_is_seen_by_the_next_call(strict):
    def make():
        drop = keras.layers.Dropout(0.5, seed=1)

        def f(x):
            return drop(x, training=True)
        return f, drop
    eager_fn, eager_drop = make()
    plain_fn, janus_drop = make()
    jf = janus.function(plain_fn)
    for number in range(8):
        if number == 5:
            eager_drop.rate = janus_drop.rate = 0.0
        x = t(4, 4, seed=number)
        assert_same(eager_fn(x), jf(x), 'call %d' % number)
