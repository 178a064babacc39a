"""Which TF ops may fail at run time, and keeping those a graph would prune.

Used at trace time: converted code's library calls, subscripts and operators
mark the ops they make as the user's (``trace/calls.py``, ``operators.py``,
``observe.py``); the tracer (its top graph, ``graphgen/tracer.py``; rollback
plans, ``graphgen/rollback.py``), ``control/`` (the bodies of the
tf.cond / tf.while_loop it builds) and callbacks TF traces keep the unused
ones that may fail running.  Needs a graph being built (any TF graph).
"""
from __future__ import annotations
import contextlib
import typing

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.ops import resource_variable_ops

from janus.graph import effects, graph_analysis
from janus.graph.ops import CHECK_OPS


USER_OPS = '_janus_user_ops'   # on a graph being traced: [start, end) spans of the user's ops
JANUS_OPS = '_janus_own_ops'   # spans inside those that are not the user's (not_the_users)


def made_by_the_user() -> typing.ContextManager[None]:
    """Around a library call the user's code makes (``tf.gather(x, i)``, ``x[i]``):
    the ops it adds to the graph being built are the user's, ones eager would
    run.  Only those are kept running when unused (``keep_unused``); janus's
    own ops and TF's internals (a loop's bookkeeping) are not.  Kept as spans
    of positions in ``graph.get_operations()`` (``graph.version`` counts the ops
    added so far), so marking costs nothing per op."""
    return _marking(USER_OPS)


def not_the_users() -> typing.ContextManager[None]:
    """Around ops made inside a user's call that eager would not run: janus's own
    (a Python number's value computed for ``v.assign(self.lr)``), and what a
    callback traces where eager runs it in a graph that prunes it
    (``tf.vectorized_map``'s scaffolding, ``library_calls._converted_callback``)."""
    return _marking(JANUS_OPS)


@contextlib.contextmanager
def _marking(name: str) -> typing.Iterator[None]:
    graph = tf.compat.v1.get_default_graph()
    start = graph.version
    try:
        yield
    finally:
        if graph.version > start:
            _spans(graph, name).append((start, graph.version))


def _spans(graph: tf.Graph, name: str) -> list:
    spans = getattr(graph, name, None)
    if spans is None:
        spans = []
        setattr(graph, name, spans)
    return spans


def _users(graph: tf.Graph, ops: typing.Sequence[tf.Operation]) -> set[tf.Operation]:
    """The ops of ``ops`` (``graph.get_operations()``) the user asked for: those
    made in a user's call, and control flow whose bodies hold such ops (a
    tf.cond janus built for ``if t: peek = x[k]``, the loop of a ``tf.map_fn``)."""
    positions = set()
    for start, end in getattr(graph, USER_OPS, ()):
        positions.update(range(start, end))
    for start, end in getattr(graph, JANUS_OPS, ()):
        positions.difference_update(range(start, end))
    found = {ops[i] for i in positions if i < len(ops)}
    memo = {}
    found.update(op for op in ops if op.type in _CONTROL_FLOW and any(
        _holds_users_ops(g, memo) for g in effects.called_graphs(op)))
    return found


def _holds_users_ops(graph: tf.Graph, memo: dict[int, bool], depth: int = 0) -> bool:
    """Whether ``graph`` or a body it runs holds ops the user asked for (``memo``:
    id(graph) -> answer, so nested bodies are scanned once per call)."""
    if id(graph) not in memo:
        memo[id(graph)] = bool(getattr(graph, USER_OPS, None)) or (depth < 8 and any(
            _holds_users_ops(inner, memo, depth + 1) for op in graph.get_operations()
            if op.type in _CONTROL_FLOW for inner in effects.called_graphs(op)))
    return memo[id(graph)]


def keep_unused(graph: tf.Graph, outputs: typing.Sequence[tf.Tensor],
                skip: typing.AbstractSet[tf.Operation] = frozenset()) -> int:
    """Makes every op of ``graph`` the user asked for (``made_by_the_user``) that may
    fail and that nothing the graph gives needs one of its control outputs, and
    returns how many.  Eagerly such an op runs and raises (``acc + tf.gather(x,
    i)`` whose sum nobody uses); TF would prune it from the function, so the
    call would return normally and its Python writes would be made.
    ``outputs``: the graph's output tensors; ``skip``: ops janus made redundant
    (checks the host runs).  Called when ``graph``'s body is complete and
    before it becomes a function (the end of a trace, of a tf.cond branch, of a
    loop body): control flow in it that keeps such ops runs as a call."""
    needed = graph_analysis.ancestors(
        [t.op for t in outputs if hasattr(t, 'op')] + list(graph.control_outputs))
    ops = graph.get_operations()
    users = _users(graph, ops)
    kept = [op for op in ops
            if op in users and op not in needed and op not in skip
            and op.name not in skip
            and not op._is_stateful   # stateful ops run anyway (automatic control deps)
            and not infallible(op)]
    graph.control_outputs.extend(kept)
    _run_unlowered(op for op in ops if op.type in _CONTROL_FLOW and (
        op in kept or any(getattr(g, KEPT, False) for g in effects.called_graphs(op))))
    if kept:
        setattr(graph, KEPT, True)
    return len(kept)


KEPT = '_janus_kept_fallible'   # on a graph: keep_unused kept some of its ops


def _run_unlowered(ops: typing.Iterable[tf.Operation]) -> None:
    """Marks tf.cond / tf.while_loop ops to run as function calls.  TF lowers them
    to switch/merge and then keeps only what their data outputs need: the body's
    control outputs, and the whole op when nothing uses its outputs, would be
    pruned.  Run as a call, its body's control outputs run."""
    for op in ops:
        op._set_attr('_lower_using_switch_merge', attr_value_pb2.AttrValue(b=False))


_CONTROL_FLOW = frozenset(('If', 'StatelessIf', 'While', 'StatelessWhile', 'Case',
                           'StatelessCase'))


# -- ops that cannot fail at run time ------------------------------------------

# Always: they forward, read or make a value.
_NEVER_FAIL = frozenset((
    'Identity', 'IdentityN', 'NoOp', 'Const', 'Placeholder', 'ReadVariableOp', 'StopGradient',
    'Snapshot', 'VarIsInitializedOp', 'VariableShape', 'Shape', 'Size', 'Rank', 'ZerosLike',
    'OnesLike', 'OptionalHasValue', 'OptionalNone',
))

# When every input and output shape is fully known (TF checked them while
# building, and attributes or constant operands fixed the rest): ops that have
# no error path on any value.  Not slicing or gathering (an index is a value).
_SHAPE_CHECKED = frozenset((
    'Cast', 'AddV2', 'Add', 'Sub', 'Mul', 'Neg', 'Square', 'Sqrt', 'Rsqrt', 'Exp', 'Log',
    'Log1p', 'Expm1', 'Maximum', 'Minimum', 'Abs', 'Sign', 'Reciprocal', 'Inv', 'Tanh',
    'Sigmoid', 'Relu', 'Relu6', 'Elu', 'Selu', 'LeakyRelu', 'Softplus', 'SquaredDifference',
    'MulNoNan', 'DivNoNan', 'Less', 'LessEqual', 'Greater', 'GreaterEqual', 'Equal',
    'NotEqual', 'Select', 'SelectV2', 'LogicalAnd', 'LogicalOr', 'LogicalNot', 'AddN',
    'ClipByValue', 'IsNan', 'IsFinite', 'IsInf', 'Floor', 'Ceil', 'Round', 'Rint', 'Sin',
    'Cos', 'ReluGrad', 'Relu6Grad', 'EluGrad', 'SeluGrad', 'LeakyReluGrad', 'TanhGrad',
    'SigmoidGrad', 'SqrtGrad', 'RsqrtGrad', 'SoftplusGrad', 'Reshape', 'ExpandDims',
    'Squeeze', 'Pack', 'MatMul', 'BatchMatMulV2', 'BiasAdd', 'BiasAddGrad', 'Softmax',
    'LogSoftmax', 'Sum', 'Max', 'Min', 'Prod', 'All', 'Any', 'ArgMax', 'ArgMin',
    'AssignVariableOp', 'AssignAddVariableOp', 'AssignSubVariableOp', 'Bitcast', 'BitwiseAnd',
    'BitwiseOr', 'BitwiseXor',
))

# Elementwise, but failing on some integer values (division by zero, a
# negative integer power, the mean of nothing): shape-checked only for
# floating-point operands.
_FLOAT_ONLY = frozenset(('RealDiv', 'Div', 'FloorDiv', 'FloorMod', 'Pow', 'Xdivy', 'Xlogy',
                         'Mean'))

# A dense optimizer update: checks only that its operands' shapes agree.
_DENSE_APPLY_PREFIX = 'ResourceApply'


KNOWN_TO_SUCCEED = '_janus_known_to_succeed'   # on a graph: names of ops cannot_fail marked


def cannot_fail(op: tf.Operation) -> None:
    """Records that janus made ``op`` so that it cannot fail whatever its static
    shapes say (a reshape of one element to a scalar)."""
    names = getattr(op.graph, KNOWN_TO_SUCCEED, None)
    if names is None:
        names = set()
        setattr(op.graph, KNOWN_TO_SUCCEED, names)
    names.add(op.name)


def infallible(op: tf.Operation, depth: int = 0) -> bool:
    """Whether ``op`` cannot raise at run time (conservative: False when unsure)."""
    called = effects.called_graphs(op)
    if called:
        return depth < 8 and all(infallible(inner, depth + 1)
                                 for graph in called for inner in graph.get_operations())
    if op.type in _NEVER_FAIL:
        return True
    if op.name in getattr(op.graph, KNOWN_TO_SUCCEED, ()):
        return True   # janus's own (one element made a scalar, scalars.as_scalar)
    if op.type in CHECK_OPS:
        # Every state change waits for every check (tracer.defer_state_updates); a
        # branch's copy of a check made before the branch (control.py) fails after it.
        return True
    if _prints(op) or _by_nonzero_constant(op):
        return True
    shaped = op.type in _SHAPE_CHECKED or op.type.startswith(_DENSE_APPLY_PREFIX)
    if not shaped and op.type in _FLOAT_ONLY:
        operands = op.inputs[:1] if op.type in _REDUCTIONS else op.inputs   # not its axes
        shaped = all(t.dtype.is_floating or t.dtype.is_complex for t in operands)
    if not shaped:
        return False
    if op.type in ('ArgMax', 'ArgMin') and not op.inputs[0].shape.num_elements():
        return False   # fails on an empty axis
    return _shapes_known(op) or _shapes_suffice(op)


def _prints(op: tf.Operation) -> bool:
    """``tf.print``'s ops: its message's formatting (the template's placeholders were
    counted when it was made) and the print to a standard stream or the log (one to
    a file may fail to open it)."""
    if op.type == 'StringFormat':
        return True
    if op.type != 'PrintV2':
        return False
    stream = op.get_attr('output_stream')
    return not (stream.decode() if isinstance(stream, bytes) else stream).startswith('file://')


def _by_nonzero_constant(op: tf.Operation) -> bool:
    """An integer ``step % 10`` or ``n // 4``: a division by a constant other than zero
    (of a scalar constant: any shape broadcasts against it)."""
    if op.type not in ('FloorMod', 'FloorDiv', 'TruncateMod', 'TruncateDiv') \
            or len(op.inputs) != 2:
        return False
    divisor = tf.get_static_value(op.inputs[1])
    return divisor is not None and np.ndim(divisor) == 0 and divisor != 0 and (
        divisor != -1 or not op.inputs[0].dtype.is_integer)   # INT_MIN // -1 overflows


# Elementwise on one floating-point operand (or a cast): any shape will do.
_UNARY = frozenset(('Cast', 'Neg', 'Square', 'Sqrt', 'Rsqrt', 'Exp', 'Log', 'Log1p', 'Expm1',
                    'Abs', 'Sign', 'Reciprocal', 'Inv', 'Tanh', 'Sigmoid', 'Relu', 'Relu6',
                    'Elu', 'Selu', 'LeakyRelu', 'Softplus', 'IsNan', 'IsFinite', 'IsInf',
                    'Floor', 'Ceil', 'Round', 'Rint', 'Sin', 'Cos'))
_REDUCTIONS = frozenset(('Sum', 'Max', 'Min', 'Prod', 'All', 'Any', 'Mean'))


def _shapes_suffice(op: tf.Operation) -> bool:
    """Shapes partly unknown (a relaxed batch dimension), but every dimension the
    op needs to agree is known: a unary op, a binary one with a scalar operand, a
    reduction over constant axes, a MatMul or BiasAdd whose inner sizes match."""
    inputs = list(op.inputs)
    if op.type in _UNARY:
        return op.type == 'Cast' or inputs[0].dtype.is_floating
    if op.type in _REDUCTIONS:
        return inputs[1].op.type == 'Const' and inputs[0].shape.rank is not None
    if op.type == 'MatMul':
        a, b = (t.shape for t in inputs)
        if a.rank != 2 or b.rank != 2:
            return False
        inner_a = a[0] if op.get_attr('transpose_a') else a[1]
        inner_b = b[1] if op.get_attr('transpose_b') else b[0]
        return inner_a is not None and inner_a == inner_b
    if op.type == 'BiasAdd':
        value, bias = (t.shape for t in inputs)
        if value.rank is None or bias.rank != 1 or value.rank < 2:
            return False
        channels = value[1] if op.get_attr('data_format') == b'NCHW' else value[-1]
        return channels is not None and channels == bias[0]
    if op.type in _BROADCASTING:
        # Elementwise with a scalar: nothing to broadcast against.
        return any(t.shape.rank == 0 for t in inputs) and all(
            t.shape.rank is not None for t in inputs)
    return False


_BROADCASTING = frozenset((
    'AddV2', 'Add', 'Sub', 'Mul', 'Maximum', 'Minimum', 'SquaredDifference', 'MulNoNan',
    'DivNoNan', 'Less', 'LessEqual', 'Greater', 'GreaterEqual', 'Equal', 'NotEqual',
    'LogicalAnd', 'LogicalOr', 'BitwiseAnd', 'BitwiseOr', 'BitwiseXor')) | _FLOAT_ONLY - _REDUCTIONS


def _shapes_known(op: tf.Operation) -> bool:
    """Every input and output shape fully known, variables' own shapes included."""
    for tensor in list(op.inputs) + list(op.outputs):
        if tensor.dtype == tf.resource:
            data = resource_variable_ops.get_resource_handle_data(tensor)
            if data is None or not data.is_set or not data.shape_and_type:
                return False
            if any(d.size < 0 for d in data.shape_and_type[0].shape.dim) or \
                    data.shape_and_type[0].shape.unknown_rank:
                return False
            if op.type.startswith(('Assign', _DENSE_APPLY_PREFIX)):
                shape = [d.size for d in data.shape_and_type[0].shape.dim]
                values = [t for t in op.inputs if t.dtype != tf.resource]
                # An assign's value (and an update's gradient) must match the variable.
                if op.type.startswith('Assign') and values and (
                        not values[-1].shape.is_fully_defined()
                        or values[-1].shape.as_list() != shape):
                    return False
        elif not tensor.shape.is_fully_defined():
            return False
    return True
