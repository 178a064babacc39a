"""Misuse of the API raises a janus error that says what to do."""
import math

import pytest
import tensorflow as tf

import janus
from conftest import assert_same, differential, outcome


class Model:
    def __call__(self, x):
        return x


@pytest.mark.parametrize('target, hint', [
    (3, 'needs something to call'),
    (staticmethod(lambda x: x), 'below @staticmethod'),
])
def test_decorating_what_cannot_be_called_raises_usage_error(target, hint):
    with pytest.raises(janus.JanusUsageError, match=hint):
        janus.function(target)


@pytest.mark.parametrize('make_target', [lambda: len, lambda: math.sqrt, lambda: Model,
                                         lambda: Model(), lambda: Model().__call__])
def test_any_callable_is_accepted_and_means_what_it_means_eagerly(make_target):
    jf = janus.function(make_target())
    plain = make_target()
    for value in (4.0, 9.0, 16.0, 25.0):
        argument = [value] if plain is len else value
        expected, actual = outcome(plain, argument), outcome(jf, argument)
        if expected[0] == 'ok' and not isinstance(plain, type):
            assert_same(expected, actual)
        else:   # a class makes new objects: compare what happened, by type
            assert (expected[0], type(expected[1])) == (actual[0], type(actual[1]))


def test_bad_options_and_double_decoration():
    with pytest.raises(janus.JanusUsageError, match='profile_calls'):
        janus.function(profile_calls=-1)
    jf = janus.function(lambda x: x)
    with pytest.raises(janus.JanusUsageError, match='already'):
        janus.function(jf)


def test_introspection_of_a_plain_function_says_what_to_do():
    with pytest.raises(janus.JanusUsageError, match='@janus.function'):
        janus.explain(len)
    jf = janus.function(lambda x: x)
    with pytest.raises(janus.JanusUsageError, match='no graph yet'):
        janus.to_code(jf)


def test_function_defined_by_exec_runs_imperatively_with_reason():
    namespace = {'tf': tf}
    exec('def f(x):\n    return x * 2\n', namespace)

    def make():
        return namespace['f'], None
    jf = differential(make, [((tf.constant([1.0, 2.0]),), {})] * 5)
    assert janus.stats(jf)['graphs_built'] == 0
    assert 'no source' in janus.explain(jf)
    with janus.config.patch(strict=True):
        with pytest.raises(janus.StrictModeError, match='no source'):
            jf(tf.constant([1.0, 2.0]))


def test_decorator_with_options_and_disabled_switch(strict):
    @janus.function(profile_calls=1)
    def f(x):
        return x + 1.0
    f(tf.constant(1.0))
    f(tf.constant(2.0))
    assert janus.stats(f)['graphs_built'] == 1
    with janus.config.patch(enabled=False):
        assert float(f(tf.constant(3.0))) == 4.0
    assert janus.stats(f)['graph_calls'] == 1


def test_called_inside_a_tf_function_it_traces_through(strict):
    @janus.function
    def inner(x):
        return x * 3.0

    @tf.function
    def outer(x):
        return inner(x) + 1.0
    assert float(outer(tf.constant(2.0))) == 7.0
    assert janus.stats(inner)['graphs_built'] == 0


def test_a_misspelled_keyword_gets_a_suggestion():
    with pytest.raises(janus.JanusUsageError, match="'profile_call'; did you mean 'profile_calls'"):
        janus.function(profile_call=3)
    with pytest.raises(TypeError, match="did you mean 'strict'"):   # still a TypeError
        janus.function(lambda x: x, stric=True)
    with pytest.raises(janus.JanusUsageError, match='it takes profile_calls, strict, jit_compile'):
        janus.function(warmup=2)


def test_the_version_is_the_installed_package_s():
    from importlib import metadata
    try:
        expected = metadata.version('janus-tf')
    except metadata.PackageNotFoundError:
        expected = '0+unknown'
    assert janus.__version__ == expected and janus.__version__
