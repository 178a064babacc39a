"""janus.function accepts anything eager code can call, and each call means the same.

Bound methods (``janus.function(obj.train_step)``), callable objects, Keras
models, ``functools.partial``, private ``self.__x`` names, recursion, janus
functions calling janus functions, a keyword named ``self``, arguments that
contain themselves, generator and coroutine functions, and Keras optimizers
whose first ``apply_gradients`` runs inside the function.  Each runs
eagerly and under janus on fresh objects (``differential``).
"""
import asyncio
import functools

import keras
import pytest
import tensorflow as tf

import janus
from conftest import assert_same, differential, outcome


def x_calls(n=6, width=3):
    return [((tf.constant([float(i + j) for j in range(width)]),), {}) for i in range(n)]


# -- bound methods and callable objects ---------------------------------------

class Accumulator:
    """State in a tensor attribute and in a Python counter."""

    def __init__(self):
        self.total = tf.zeros([3])
        self.step = 0

    def add(self, x):
        self.total = self.total + x
        return tf.reduce_sum(self.total)

    def count(self, x):
        self.step += 1
        return x * float(self.step)

    def me(self, x):
        return self

    def __call__(self, x):
        self.total = self.total * 0.5 + x
        return self.total


def test_bound_method_with_tensor_state_builds_a_graph(strict):
    def make():
        acc = Accumulator()
        return acc.add, acc
    jf = differential(make, x_calls(), state=lambda acc: acc.total)
    assert janus.stats(jf)['graph_calls'] >= 2


def test_bound_method_with_python_counter():
    def make():
        acc = Accumulator()
        return acc.count, acc
    differential(make, x_calls(8), state=lambda acc: acc.step)


def test_bound_method_returns_its_own_object():
    acc = Accumulator()
    jf = janus.function(acc.me)
    for _, (args, kwargs) in zip(range(6), x_calls()):
        assert jf(*args, **kwargs) is acc


def test_callable_object_with_python_call(strict):
    def make():
        acc = Accumulator()
        return acc, acc
    jf = differential(make, x_calls(), state=lambda acc: acc.total)
    assert janus.stats(jf)['graph_calls'] >= 2


def test_janus_function_of_a_method_stays_as_is_on_a_class():
    acc = Accumulator()
    jf = janus.function(acc.add)
    Accumulator.alias = jf          # eagerly, a bound method on a class is not rebound
    try:
        assert Accumulator().alias is jf
    finally:
        del Accumulator.alias


# -- Keras models --------------------------------------------------------------

class Branchy(keras.Model):
    def __init__(self):
        super().__init__()
        self.a = keras.layers.Dense(4, activation='tanh')
        self.b = keras.layers.Dense(2)

    def call(self, x, training=None):
        h = self.a(x)
        if training:
            h = h * 2.0
        return self.b(h)


def model_calls():
    return [((tf.random.stateless_normal([5, 3], seed=[i, 1]),), {'training': i % 2 == 0})
            for i in range(8)]


def test_keras_model_itself_runs_keras_call_with_the_converted_call(strict):
    def make():
        keras.utils.set_random_seed(3)
        model = Branchy()
        model(tf.zeros([1, 3]))
        return model, model
    jf = differential(make, model_calls(),
                      state=lambda m: [tf.convert_to_tensor(v) for v in m.weights])
    assert janus.stats(jf)['graph_calls'] >= 2
    assert 'Branchy' in janus.explain(jf)
    assert 'call_through' not in janus.explain(jf).splitlines()[0]


def test_keras_model_train_step_method(strict):
    class Trainer(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1)
            self.opt = keras.optimizers.SGD(0.1)

        def train_step(self, x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((self(x) - y) ** 2)
            grads = tape.gradient(loss, self.trainable_variables)
            self.opt.apply_gradients(zip(grads, self.trainable_variables))
            return loss

        def call(self, x):
            return self.dense(x)

    def make():
        keras.utils.set_random_seed(4)
        model = Trainer()
        model(tf.zeros([1, 3]))
        model.opt.build(model.trainable_variables)
        return model.train_step, model
    calls = [((tf.random.stateless_normal([4, 3], seed=[i, 2]), tf.ones([4, 1])), {})
             for i in range(8)]
    jf = differential(make, calls, state=lambda m: [tf.convert_to_tensor(v) for v in m.weights])
    assert janus.stats(jf)['graph_calls'] >= 4


# -- functools.partial -----------------------------------------------------------

def scaled(x, scale, shift=0.0):
    return x * scale + shift


def test_partial_of_a_function_and_keyword_overrides(strict):
    def make():
        return functools.partial(scaled, scale=3.0, shift=1.0), None
    calls = x_calls(4) + [((tf.constant([1.0, 2.0, 3.0]),), {'shift': 5.0})] * 4
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] >= 2


def test_partial_of_a_bound_method():
    def make():
        acc = Accumulator()
        return functools.partial(acc.add), acc
    differential(make, x_calls(), state=lambda acc: acc.total)


# -- private names ----------------------------------------------------------------

class Private:
    def __init__(self):
        self.__scale = tf.constant(2.0)
        self.__calls = tf.constant(0.0)

    def __call__(self, x):
        self.__calls = self.__calls + 1.0
        return x * self.__scale + self.__helper()

    def __helper(self):
        return self.__calls

    def calls(self):
        return self.__calls


class DecoratedPrivate(Private):
    @janus.function
    def scaled(self, x):
        return x * self._Private__scale + self.__offset()

    def __offset(self):
        return 1.0


def test_private_names_are_mangled_as_in_the_class_body(strict):
    def make():
        obj = Private()
        return obj, obj
    jf = differential(make, x_calls(), state=lambda obj: obj.calls())
    assert janus.stats(jf)['graph_calls'] >= 2


def test_private_names_in_a_method_decorated_in_the_class_body(strict):
    obj, plain = DecoratedPrivate(), Private()
    for args, _ in x_calls():
        assert_same(args[0] * 2.0 + 1.0, obj.scaled(*args))
    assert janus.stats(obj.scaled)['graph_calls'] >= 2
    del plain


MANGLED_SOURCE = """
class _Outer:
    def method(self, __p, *, __k=1):
        global __g
        __v = self.__a + __p
        def helper():
            return __v.__b
        class Inner:
            def get(self):
                return self.__c
        f(__kw=__k)
        return __g, helper, Inner
"""


def test_mangling_pass_names_what_the_compiler_names():
    import ast
    import gast
    from janus.pyct import mangling
    namespace = {}
    exec(compile(MANGLED_SOURCE, '<mangled>', 'exec'), namespace)
    method = namespace['_Outer'].method
    assert mangling.owner_class(method) == '_Outer'
    tree = gast.ast_to_gast(ast.parse(MANGLED_SOURCE)).body[0].body[0]
    tree = mangling.mangle(tree, mangling.owner_class(method))
    module = ast.fix_missing_locations(gast.gast_to_ast(gast.Module([tree], [])))
    copy = next(c for c in compile(module, '<copy>', 'exec').co_consts if hasattr(c, 'co_names'))

    def names(code):
        found = set(code.co_names) | set(code.co_varnames) | set(code.co_cellvars)
        for const in code.co_consts:
            if hasattr(const, 'co_names'):
                found |= names(const)
        return found
    assert names(copy) == names(method.__code__)


# -- recursion and janus calling janus ---------------------------------------------

def depth_sum(tree):
    if isinstance(tree, list):
        return depth_sum(tree[0]) + depth_sum(tree[1])
    return tree


@janus.function
def countdown(x, n):
    if n == 0:
        return x
    return countdown(x + 1.0, n - 1)


def test_recursion_by_name_runs_imperatively_with_the_reason():
    def make():
        return depth_sum, None
    calls = [(([x, [x * 2.0, x * 3.0]],), {}) for (x,), _ in x_calls()]
    jf = differential(make, calls)
    assert 'recursive' in janus.explain(jf)


def test_decorated_recursive_function():
    for n in range(6):
        assert_same(tf.constant([float(n)]), countdown(tf.constant([0.0]), n))
    assert 'recursive' in janus.explain(countdown)


@janus.function
def inner_double(x):
    return x * 2.0


def test_janus_function_calling_a_janus_function_inlines_it(strict):
    def make():
        def outer(x):
            return inner_double(x) + 1.0
        return outer, None
    jf = differential(make, x_calls())
    assert janus.stats(jf)['graph_calls'] >= 2
    assert 'inner_double' in janus.to_code(jf)


class Twice(tf.keras.layers.Layer):
    def call(self, x):
        return x * 2.0


def test_janus_function_calling_a_janus_function_of_a_keras_layer(strict):
    """``inner = janus.function(layer)`` runs ``call_through(layer, ...)``; called from
    another janus function, that is inlined as your code is, and the layer runs as a
    layer (the runtime packages' own helpers are never converted: call_through is not one)."""
    def make():
        inner = janus.function(Twice())

        def outer(x):
            return inner(x) + 1.0
        return outer, None
    jf = differential(make, x_calls())
    assert janus.stats(jf)['graph_calls'] >= 2


class Scaler:
    """A callable object of yours: Python state its ``__call__`` changes."""

    def __init__(self, factor):
        self.factor = factor
        self.calls = 0

    def __call__(self, v):
        self.calls += 1
        return v * self.factor + 1.0


def test_janus_function_calling_a_janus_function_of_a_callable_object(strict):
    """``inner = janus.function(obj)`` called from a janus function: ``obj`` is read where
    the inner janus function keeps it, so its counter is written back on every run and a
    change of its factor from outside is seen, as eagerly (found by the fuzzer's
    ``janus_callee``: before, janus lost track of ``obj`` and ran every call as Python)."""
    def program(wrap):
        obj = Scaler(2.0)
        inner = wrap(obj)

        def outer(x, n):
            acc = x * 1.0
            for _ in range(n):
                acc = acc + tf.reduce_sum(inner(acc)) * 0.1
            return acc
        return obj, outer
    eager_obj, eager = program(lambda f: f)
    janus_obj, jf = program(janus.function)
    jf = janus.function(jf)
    for step, (args, _) in enumerate(x_calls(8)):
        if step == 5:
            eager_obj.factor = janus_obj.factor = 0.5
        assert_same(eager(args[0], 3), jf(args[0], 3), 'call %d' % step)
        assert (eager_obj.calls, eager_obj.factor) == (janus_obj.calls, janus_obj.factor)
    assert janus.stats(jf)['graph_calls'] >= 3


def pair_class(decorate):
    class Pair:
        def __init__(self):
            self.scale = tf.constant(3.0)

        @decorate
        def inner(self, x):
            return x * self.scale

        @decorate
        def outer(self, x):
            return self.inner(x) - 1.0
    return Pair


def test_janus_method_calling_a_janus_method(strict):
    eager, jobj = pair_class(lambda f: f)(), pair_class(janus.function)()
    for args, _ in x_calls():
        assert_same(eager.outer(*args), jobj.outer(*args))
    assert janus.stats(jobj.outer)['graph_calls'] >= 2


# -- keyword named self, cyclic arguments --------------------------------------------

class Named:
    name = 'layer0'


def test_keyword_named_self_in_a_call(strict):
    def make():
        obj = Named()

        def tagged(x):
            return x + float(len('{self.name}'.format(self=obj)))
        return tagged, None
    differential(make, x_calls())


def test_keyword_named_self_passed_to_the_janus_function():
    def make():
        def method_like(self, x):
            return x * float(len(self.name))
        return method_like, None
    calls = [((), {'self': Named(), 'x': args[0]}) for args, _ in x_calls()]
    differential(make, calls)


def test_argument_that_contains_itself_runs_imperatively():
    def make():
        def count(x, items):
            return x * float(len(items))
        return count, None

    def call(i):
        def fresh():
            items = [1, 2]
            items.append(items)
            return (tf.constant([float(i)]), items), {}
        return fresh
    jf = differential(make, [call(i) for i in range(6)])
    assert 'contains itself' in janus.explain(jf)


# -- generators and coroutines ---------------------------------------------------------

def numbers(n):
    for i in range(n):
        yield i * 2


async def later(x):
    return x + 1


def test_generator_function_runs_as_plain_python():
    jf = janus.function(numbers)
    for n in range(5):
        assert list(jf(n)) == list(numbers(n))
    assert 'generator' in janus.explain(jf)
    with janus.config.patch(strict=True):
        with pytest.raises(janus.StrictModeError, match='generator'):
            jf(3)


def test_coroutine_function_runs_as_plain_python():
    jf = janus.function(later)
    for n in range(4):
        assert asyncio.run(jf(n)) == n + 1


def test_generator_method():
    class Source:
        def __init__(self):
            self.items = [1, 2, 3]

        def each(self):
            yield from self.items
    obj = Source()
    jf = janus.function(obj.each)
    assert [list(jf()) for _ in range(4)] == [[1, 2, 3]] * 4


# -- introspection of what janus.function returns ------------------------------------------

def test_introspection_accepts_bound_methods_and_optimizers():
    obj = DecoratedPrivate()
    obj.scaled(tf.constant([1.0]))
    assert janus.stats(obj.scaled)['calls'] >= 1
    jf = janus.function(scaled)
    jf(tf.constant([1.0]), 2.0)
    assert janus.stats(jf.__call__) == janus.stats(jf)
    assert 'scaled' in janus.explain(jf.__call__)

    var = tf.Variable([1.0, 2.0])
    opt = janus.Optimizer(keras.optimizers.SGD(0.1))
    for _ in range(5):
        opt.minimize(lambda: tf.reduce_sum(var * var), [var])
    assert janus.stats(opt)['calls'] == 5
    assert janus.stats(opt.minimize) == janus.stats(opt)
    assert 'janus function' in janus.explain(opt)
    assert 'def _minimize_step' in janus.to_code(opt)


# -- optimizers that build their slots on their first apply ----------------------------------

def optimizer_step(make_optimizer):
    def make():
        keras.utils.set_random_seed(7)
        model = keras.Sequential([keras.layers.Dense(4, activation='relu'), keras.layers.Dense(1)])
        model.build((None, 3))
        opt = make_optimizer()

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(x) - y) ** 2)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return step, (model, opt)
    return make


def training_state(state):
    model, opt = state
    return ([tf.convert_to_tensor(v) for v in model.weights],
            tf.convert_to_tensor(opt.iterations))


@pytest.mark.parametrize('profile_calls', [0, 1, 3])
@pytest.mark.parametrize('make_optimizer', [lambda: keras.optimizers.Adam(0.01),
                                            lambda: keras.optimizers.RMSprop(0.01)])
def test_optimizer_built_by_its_first_apply_inside_the_function(make_optimizer, profile_calls):
    calls = [((tf.random.stateless_normal([5, 3], seed=[i, 5]), tf.ones([5, 1])), {})
             for i in range(8)]
    with janus.config.patch(profile_calls=profile_calls):
        jf = differential(optimizer_step(make_optimizer), calls, state=training_state)
    assert janus.stats(jf)['graph_calls'] >= 4


def test_outcome_helper_is_used_for_exceptions_too():
    jf = janus.function(scaled)
    assert outcome(jf, tf.constant([1.0]))[:2] == outcome(scaled, tf.constant([1.0]))[:2]
