"""Values a traced graph fixes before it runs: ``int(tf.shape(h)[1].numpy())``.

Needs nothing run before it (``access.py`` asks it for ``t.numpy`` of a graph tensor).
Detection and sequence models size later tensors from a shape read with ``.numpy()``:
eagerly the number is the run's, in a graph it is a value only the run has, a graph
break.  But a graph janus builds has the call's shapes (guarded by its signature, or
``None`` where they were relaxed), and shape arithmetic on known dimensions has one
value for every run of that graph.  ``value_of`` computes it at trace time, as TF's
own ``tf.get_static_value`` does, and past it for the small shape-arithmetic ops it
stops at (``tf.shape(h)[1]`` is a ``StridedSlice`` of a ``Shape``): each op of
``_FOLDED`` whose inputs are all known runs eagerly on them, with its own attributes,
so the value is exactly the kernel's.  Anything else (an op reading a placeholder's
values, a variable, a random op, a stateful op, a relaxed dimension) is unknown:
``None``, and the read stays a refusal.
"""
from __future__ import annotations
import typing
import numpy as np
import tensorflow as tf

# Ops whose output depends on their inputs alone, run eagerly on known inputs.
_FOLDED = frozenset((
    'StridedSlice', 'Cast', 'Pack', 'ConcatV2', 'AddV2', 'Add', 'Sub', 'Mul', 'FloorDiv',
    'FloorMod', 'RealDiv', 'Maximum', 'Minimum', 'Prod', 'Sum', 'Identity', 'Reshape',
    'ExpandDims', 'Squeeze', 'Range', 'Shape', 'Size', 'Rank', 'GatherV2', 'Neg', 'Abs'))
_DTYPES = (tf.int32, tf.int64, tf.float32, tf.float64, tf.bool)
_DEPTH = 24   # ops followed back from the tensor read (shape arithmetic is shallow)


def value_of(tensor: tf.Tensor) -> np.ndarray | None:
    """The NumPy value every run of the graph gives ``tensor``, or None."""
    if tensor.dtype not in _DTYPES:
        return None
    try:
        return _value(tensor, _DEPTH, {})
    except Exception:  # noqa: BLE001 - TF could not fold it: its value is the run's
        return None


def from_shapes(tensor: tf.Tensor) -> bool:
    """Whether ``tensor`` is computed from shapes and constants alone (``_FOLDED`` ops
    back to ``Shape``/``Size``/``Rank``): unknown only because a dimension is relaxed,
    it has one value per call shape (a trace with exact shapes knows it)."""
    try:
        return _from_shapes(tensor, _DEPTH)
    except Exception:  # noqa: BLE001 - an answer for a message: unknown, not from shapes
        return False


def _from_shapes(tensor: tf.Tensor, depth: int) -> bool:
    op = tensor.op
    if op.type in ('Shape', 'Size', 'Rank', 'Const'):
        return True
    if depth <= 0 or op.type not in _FOLDED or op.control_inputs or op._is_stateful:
        return False
    return all(_from_shapes(t, depth - 1) for t in op.inputs)


def _value(tensor: tf.Tensor, depth: int, memo: dict) -> np.ndarray | None:
    if tensor.name in memo:
        return memo[tensor.name]
    value = tf.get_static_value(tensor, partial=False)
    if value is None and depth > 0:
        value = _folded(tensor, depth, memo)
    memo[tensor.name] = value
    return value


def _folded(tensor: tf.Tensor, depth: int, memo: dict) -> np.ndarray | None:
    op = tensor.op
    if op.type not in _FOLDED or op.control_inputs or op._is_stateful:
        return None
    if op.type in ('Shape', 'Size', 'Rank'):
        return None   # ``get_static_value`` answered what the static shape knows
    inputs = []
    for source in op.inputs:
        known = _value(source, depth - 1, memo)
        if known is None:
            return None
        inputs.append(known)
    with tf.init_scope():   # eagerly: the kernel's own result
        outputs = _run_eagerly(op, inputs)
    return np.asarray(outputs[tensor.value_index])


def _run_eagerly(op: tf.Operation, values: typing.Sequence) -> typing.Sequence:
    """``op`` run eagerly on ``values`` with its attributes (the op's raw function)."""
    definition = op.op_def
    inferred = set()
    kwargs = {}
    position = 0
    for arg in definition.input_arg:
        inferred.update(a for a in (arg.type_attr, arg.number_attr, arg.type_list_attr) if a)
        if arg.number_attr or arg.type_list_attr:
            count = (op.get_attr(arg.number_attr) if arg.number_attr
                     else len(op.get_attr(arg.type_list_attr)))
            kwargs[arg.name] = [tf.constant(v) for v in values[position:position + count]]
            position += count
        else:
            kwargs[arg.name] = tf.constant(values[position], dtype=op.inputs[position].dtype)
            position += 1
    for attr in definition.attr:
        if attr.name not in inferred:
            kwargs[attr.name] = op.get_attr(attr.name)
    result = getattr(tf.raw_ops, op.type)(**kwargs)
    return result if isinstance(result, (list, tuple)) else [result]
