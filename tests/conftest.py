"""Shared test helpers: differential comparison of eager and janus runs.

Every feature test runs the same program eagerly and under janus on fresh
objects, and compares returns, raised exceptions and state after every call.
"""
import contextlib
import io
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import janus  # noqa: E402


def assert_same(expected, actual, path='result'):
    """Same structure, same Python values, same tensor dtype/shape/values."""
    if isinstance(expected, tf.Variable) or type(expected).__name__ == 'Variable':
        assert type(actual) is type(expected), path   # tf.Variable or keras.Variable
        expected, actual = tf.convert_to_tensor(expected), tf.convert_to_tensor(actual)
    if isinstance(expected, tf.Tensor):
        assert isinstance(actual, tf.Tensor), '%s: %r is not a tensor' % (path, actual)
        assert expected.dtype == actual.dtype, path
        assert expected.shape == actual.shape, path
        np.testing.assert_allclose(expected.numpy(), actual.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=path)
        return
    assert type(expected) is type(actual), '%s: %s vs %s' % (path, type(expected), type(actual))
    if isinstance(expected, (tf.SparseTensor, tf.RaggedTensor)):   # by their component tensors
        assert_same(tf.nest.flatten(expected, expand_composites=True),
                    tf.nest.flatten(actual, expand_composites=True), path)
        return
    if isinstance(expected, np.ndarray):
        np.testing.assert_array_equal(expected, actual, err_msg=path)
    elif isinstance(expected, (list, tuple)):
        assert len(expected) == len(actual), path
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, '%s[%d]' % (path, i))
    elif isinstance(expected, dict):
        assert list(expected) == list(actual), path
        for k in expected:
            assert_same(expected[k], actual[k], '%s[%r]' % (path, k))
    else:
        assert expected == actual, '%s: %r != %r' % (path, expected, actual)


def outcome(fn, *args, **kwargs):
    """('ok', result) or ('raised', type, message): what calling fn did."""
    try:
        return ('ok', fn(*args, **kwargs))
    except Exception as e:  # noqa: BLE001 - the exception itself is the outcome
        return ('raised', type(e), str(e))


def identities(result, args, kwargs, depth=0, path='result'):
    """Where the result holds the very objects passed in: {path: argument path}.
    Eager returns a mutable argument (or an item of one) as itself; so must janus."""
    found = {}
    inputs = {'args[%d]' % i: a for i, a in enumerate(args)}
    inputs.update({'kwargs[%r]' % k: v for k, v in kwargs.items()})
    for name, value in list(inputs.items()):
        if isinstance(value, (list, tuple)):
            inputs.update({'%s[%d]' % (name, i): item for i, item in enumerate(value)})
    # Immutable values are left out: tensors too (one passed through a dynamic
    # tf.cond comes back equal, not identical; straight paths keep identity).
    by_id = {id(v): name for name, v in inputs.items()
             if not isinstance(v, (int, float, str, bool, bytes, type(None), tf.Tensor))}

    def walk(value, where, level):
        if id(value) in by_id:
            found[where] = by_id[id(value)]
        if level < 3 and isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, '%s[%d]' % (where, i), level + 1)
        elif level < 3 and isinstance(value, dict):
            for key, item in value.items():
                walk(item, '%s[%r]' % (where, key), level + 1)
    walk(result, path, depth)
    return found


def differential(make, calls, state=None, **janus_options):
    """Runs ``make()``'s function eagerly and under janus, call by call.

    ``make()`` returns (fn, program_state); each element of ``calls`` is an
    (args, kwargs) pair or a callable returning one (fresh tensors per side).
    After every call the outcomes (return or exception type and message),
    stdout, identities (a returned argument is that argument) and
    ``state(program_state)`` must agree.  Both sides' output is passed on to
    the real stdout afterwards (eager's, then janus's), for tests reading it.
    Returns the janus function, for counter assertions.
    """
    eager_fn, eager_state = make()
    plain_fn, janus_state = make()
    janus_fn = janus.function(plain_fn, **janus_options)
    for number, call in enumerate(calls):
        where = 'call %d' % number
        sides = []
        for fn in (eager_fn, janus_fn):
            args, kwargs = call() if callable(call) else call   # fresh arguments per side
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                result = outcome(fn, *args, **kwargs)
            same = identities(result[1], args, kwargs) if result[0] == 'ok' else {}
            sides.append((result, printed.getvalue(), same))
        (expected, e_out, e_same), (actual, a_out, a_same) = sides
        sys.stdout.write(e_out + a_out)
        assert expected[0] == actual[0], '%s: eager %s, janus %s' % (where, expected, actual)
        if expected[0] == 'ok':
            assert_same(expected[1], actual[1], where)
        else:
            assert expected[1:] == actual[1:], where
        assert e_out == a_out, '%s stdout: eager %r, janus %r' % (where, e_out, a_out)
        assert e_same == a_same, '%s identity: eager %s, janus %s' % (where, e_same, a_same)
        if state is not None:
            assert_same(state(eager_state), state(janus_state), where + ' state')
    return janus_fn


@pytest.fixture
def strict():
    """Claims the program converts: any imperative fallback is an error."""
    with janus.config.patch(strict=True):
        yield


@pytest.fixture
def without_graph_breaks():
    """For tests of what janus does where it cannot convert a statement and does not
    cut the function there: assumed outcomes, whole-function fallback."""
    with janus.config.patch(graph_breaks=False):
        yield


@pytest.fixture(autouse=True)
def _no_measured_floor(request):
    """The measured floor (floor.py) decides by wall time; a test that counts graph
    runs must not depend on the machine's speed.  Tests of the floor itself are marked
    ``measured_floor`` and run with it on."""
    if request.node.get_closest_marker('measured_floor'):
        yield
        return
    with janus.config.patch(measured_floor=False):
        yield


def pytest_configure(config):
    config.addinivalue_line('markers', 'measured_floor: runs with the measured floor on '
                            '(janus.config.measured_floor; off in every other test)')
    config.addinivalue_line('markers', 'long: the long tier (the fuzz slice, the Horovod '
                            'job): `bash scripts/test.sh --long`; the default run leaves it out')
