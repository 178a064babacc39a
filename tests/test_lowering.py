"""lowering.lower_ifs: a function's tf.conds as Switch/Merge, run through Janus>Invoke,
give what the traced function gives, and a side not taken runs nothing."""
import itertools

import pytest
import tensorflow as tf
from tensorflow.core.framework import function_pb2
from tensorflow.python.eager import context

from janus.graph import ops
from janus.graph import lowering

_names = itertools.count()


def _lowered(concrete):
    """The concrete function's definition lowered and registered under a new name."""
    definition = concrete.function_def
    lowered = lowering.lower_ifs(definition, context.context().get_function_def)
    lowered.signature.name = 'janus_test_lowered_%d' % next(_names)
    context.context().add_function_def(lowered)
    return lowered


def _run(lowered, concrete, *args):
    inputs = [tf.convert_to_tensor(a) for a in args] + list(concrete.captured_inputs)
    types = [o.dtype for o in concrete.outputs]
    return ops.janus_invoke(lowered.signature.name, inputs, types)


def _ops(definition):
    return {node.op for node in definition.node_def}


def test_nested_conds_and_an_input_returned_as_is():
    def f(x, n):
        if n > 0:
            if n > 5:
                y = x * 2.0
            else:
                y = x + 1.0
        else:
            y = x   # a branch that returns its input
        return y, n + 1

    concrete = tf.function(f, autograph=True).get_concrete_function(
        tf.TensorSpec([3], tf.float32), tf.TensorSpec([], tf.int32))
    lowered = _lowered(concrete)
    assert not _ops(lowered) & {'If', 'StatelessIf'}
    assert {'Switch', 'Merge'} <= _ops(lowered)
    x = tf.constant([1.0, 2.0, 3.0])
    for n in (-1, 0, 3, 6, 9):
        got = _run(lowered, concrete, x, n)
        want = concrete(x, tf.constant(n))
        for a, b in zip(got, want):
            assert a.numpy().tolist() == b.numpy().tolist(), n


def test_the_side_not_taken_changes_nothing():
    v = tf.Variable(0)
    w = tf.Variable(0)

    def f(flag):
        if flag:
            v.assign_add(1)
        else:
            w.assign_add(10)
        return tf.constant(7)   # a branch-free output: the side effects must still run

    concrete = tf.function(f).get_concrete_function(tf.TensorSpec([], tf.bool))
    lowered = _lowered(concrete)
    assert not _ops(lowered) & {'If', 'StatelessIf'}
    _run(lowered, concrete, True)
    assert (v.numpy(), w.numpy()) == (1, 0)
    _run(lowered, concrete, False)
    _run(lowered, concrete, False)
    assert (v.numpy(), w.numpy()) == (1, 20)


def test_an_error_in_the_side_not_taken_is_not_raised():
    def f(x, safe):
        if safe:
            y = x
        else:
            with tf.control_dependencies([tf.debugging.assert_positive(x)]):   # fails if x <= 0
                y = tf.identity(x)
        return y

    concrete = tf.function(f).get_concrete_function(tf.TensorSpec([], tf.float32),
                                                    tf.TensorSpec([], tf.bool))
    lowered = _lowered(concrete)
    assert _run(lowered, concrete, -1.0, True)[0].numpy() == -1.0
    with pytest.raises(tf.errors.InvalidArgumentError):
        _run(lowered, concrete, -1.0, False)


def test_a_function_without_conds_is_returned_as_is():
    concrete = tf.function(lambda x: x * 2).get_concrete_function(tf.TensorSpec([], tf.int32))
    definition = concrete.function_def
    assert lowering.lower_ifs(definition, context.context().get_function_def) is definition


def test_a_control_input_on_a_branch_argument_is_dead_on_the_other_side():
    """``^x`` on an argument of the side not taken: the op must not run (a control
    edge from the input's Switch itself would be live on both sides)."""
    def f(x, flag):
        if flag:
            tf.debugging.Assert(False, ['the side not taken ran'])
            y = x + 1.0
        else:
            y = x
        return y

    concrete = tf.function(f).get_concrete_function(tf.TensorSpec([], tf.float32),
                                                    tf.TensorSpec([], tf.bool))
    main = function_pb2.FunctionDef()
    main.CopyFrom(concrete.function_def)
    node = next(n for n in main.node_def if n.op in ('If', 'StatelessIf'))
    then = function_pb2.FunctionDef()
    then.CopyFrom(context.context().get_function_def(node.attr['then_branch'].func.name))
    for n in then.node_def:   # as a FunctionDef may have it: a control input on an argument
        if n.op == 'Const' and not n.input:
            n.input.append('^' + then.signature.input_arg[0].name)
    then.signature.name = 'janus_test_then_%d' % next(_names)
    context.context().add_function_def(then)
    node.attr['then_branch'].func.name = then.signature.name
    lowered = lowering.lower_ifs(main, context.context().get_function_def)
    lowered.signature.name = 'janus_test_lowered_%d' % next(_names)
    context.context().add_function_def(lowered)
    inputs = [tf.constant(1.0), tf.constant(False)]
    assert ops.janus_invoke(lowered.signature.name, inputs, [tf.float32])[0].numpy() == 1.0
