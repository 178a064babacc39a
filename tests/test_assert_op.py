"""Tests of the Janus>Assert op and its Python binding on their own.

Needs the op library built (`pip install --no-build-isolation -e .`).
"""

import pytest
import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops

from janus.errors import JanusOpsError
from janus.graph import ops


def _failing(assumption_id):
    return pytest.raises(
        tf.errors.FailedPreconditionError,
        match=r'JANUS_ASSUMPTION_FAILED\[id=%d\]' % assumption_id)


def test_true_passes_eager():
    assert ops.janus_assert(tf.constant(True), 1, 'holds') is None


def test_true_passes_in_graph_and_returns_operation():
    created = []

    @tf.function
    def f(x):
        created.append(ops.janus_assert(x > 0, 2, 'x > 0'))
        return x + 1.0

    assert float(f(tf.constant(1.0))) == 2.0
    assert isinstance(created[0], tf.Operation)
    assert created[0].type == 'Janus>Assert'


def test_false_fails_eager_with_id_and_message():
    with _failing(7) as info:
        ops.janus_assert(tf.constant(False), 7, 'x was an int')
    assert 'x was an int' in info.value.message


def test_false_fails_in_graph_with_id():
    @tf.function
    def f(x):
        ops.janus_assert(x > 0, 42, 'x > 0')
        return x

    with _failing(42):
        f(tf.constant(-1.0))


def test_non_scalar_condition_rejected_at_graph_construction():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match='rank 0'):
            ops.janus_assert(tf.constant([True, True]), 3, 'vector')


def test_non_scalar_condition_rejected_eagerly():
    with pytest.raises(tf.errors.InvalidArgumentError, match='scalar'):
        ops.janus_assert(tf.constant([True, True]), 3, 'vector')


def test_parse_assumption_failure():
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        ops.janus_assert(tf.constant(False), 12345, 'm')
    assert ops.parse_assumption_failure(info.value) == 12345
    assert ops.parse_assumption_failure(
        'Graph execution error: JANUS_ASSUMPTION_FAILED[id=9]: m') == 9
    assert ops.parse_assumption_failure(
        tf.errors.InvalidArgumentError(None, None, 'other failure')) is None
    assert ops.parse_assumption_failure(ValueError('nothing here')) is None


def test_op_is_stateful_and_not_pruned():
    # The assert's result is unused: only statefulness keeps it in the graph.
    @tf.function
    def f(x):
        ops.janus_assert(x > 0, 5, 'x > 0')
        return tf.constant(0.0)

    graph = f.get_concrete_function(tf.constant(1.0)).graph
    asserts = [op for op in graph.get_operations() if op.type == 'Janus>Assert']
    assert asserts and asserts[0].op_def.is_stateful
    with _failing(5):
        f(tf.constant(-1.0))


def test_gradient_next_to_assert_unaffected_eager():
    x = tf.constant(3.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        ops.janus_assert(x > 0, 6, 'x > 0')
        y = x * x
    assert float(tape.gradient(y, x)) == 6.0


def test_gradient_next_to_assert_unaffected_in_graph():
    @tf.function
    def grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            check = ops.janus_assert(x > 0, 8, 'x > 0')
            with tf.control_dependencies([check]):
                y = x * x
        return tape.gradient(y, x)

    assert float(grad(tf.constant(3.0))) == 6.0
    with _failing(8):
        grad(tf.constant(-3.0))


def test_no_gradient_registered():
    with tf.Graph().as_default():
        op = ops.janus_assert(tf.constant(True), 10, 'm')
        # Raises LookupError for an op type with no registration at all.
        assert tf_ops.get_gradient_function(op) is None


def test_missing_library_raises_janus_ops_error(tmp_path):
    with pytest.raises(JanusOpsError, match='--no-build-isolation') as info:
        ops._load_library(str(tmp_path))
    assert isinstance(info.value, ImportError)


def test_library_built_for_other_tensorflow_rejected(tmp_path):
    (tmp_path / ops.LIBRARY_NAME).write_bytes(b'not loaded')
    (tmp_path / ops.BUILD_INFO_NAME).write_text('tensorflow_version=0.0.1\n')
    with pytest.raises(JanusOpsError, match='built against TensorFlow 0.0.1'):
        ops._load_library(str(tmp_path))


def test_unloadable_library_raises_janus_ops_error(tmp_path):
    (tmp_path / ops.LIBRARY_NAME).write_bytes(b'not an ELF file')
    (tmp_path / ops.BUILD_INFO_NAME).write_text(
        'tensorflow_version=%s\n' % tf.__version__)
    with pytest.raises(JanusOpsError, match='failed to load'):
        ops._load_library(str(tmp_path))


# -- Janus>CheckedIdentity ---------------------------------------------------

def test_checked_identity_forwards_the_value_when_the_condition_holds():
    value = tf.constant([1.0, 2.0])
    out = ops.janus_checked_identity(tf.constant(True), value, 3, 'holds')
    assert out.numpy().tolist() == [1.0, 2.0]
    with _failing(4):
        ops.janus_checked_identity(tf.constant(False), value, 4, 'broken')


def test_checked_identity_is_not_folded_away_by_consumers_demanding_a_shape():
    """Regression: grappler must not infer the checked length from unstack(num=3)."""
    @tf.function
    def f(xs, mask):
        rows = tf.boolean_mask(xs, mask)
        rows = ops.janus_checked_identity(tf.equal(tf.shape(rows)[0], 3), rows, 9, 'three')
        return tf.unstack(rows, num=3)
    xs = tf.reshape(tf.range(12, dtype=tf.float32), [6, 2])
    assert len(f(xs, tf.constant([True, False] * 3))) == 3
    with _failing(9):
        f(xs, tf.constant([True, True, True, False, True, False]))


def test_checked_identity_gradient_is_the_identity():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = ops.janus_checked_identity(tf.constant(True), x * 3.0, 1, 'ok')
        loss = tf.reduce_sum(y)
    assert tape.gradient(loss, x).numpy().tolist() == [3.0, 3.0]
