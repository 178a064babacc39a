"""Undoing a failed run's variable updates, so the call can be re-run eagerly.

Needs a traced ``ConcreteFunction`` (``graphgen/tracer.py``) and the names of
its ops that run before any state change (``tracer.defer_state_updates``).
State changes wait for every assertion and for every op that does not need
them, so most TF errors stop a run before anything changed.  What remains
are ops that run after a change: ones that read a changed variable (a
``tf.gather`` at a cursor the call just advanced), or ones TF orders after it
(a variable read created later).  If any of those can fail at run time, the
graph gets a ``Rollback``: before each run it keeps the values of the
variables the graph may update (a read each; TF copies a kept buffer on the
next in-place update, so the cost is a copy of those variables per run), and
when the run fails after a change it assigns them back.  Nothing else changed
(Python writes wait for the run to finish), so the call can then be re-run
imperatively and the user sees eager's exception with eager's state.

Only variables an op may update before some fallible op ran are kept (an
optimizer step that waits for the gradients it applies is not).  A graph
gets none when every op that may run after a change cannot fail
(``infallible``: forwarding, reads, arithmetic, matmuls, reductions and
variable updates whose shapes are known where they must agree: an ordinary
training step), when it changes state that cannot be undone (a dataset
iterator, ``tf.print``, a hash table, a call janus cannot look into: the
reason is kept for ``explain``, and an error there still surfaces as the
graph's own), or when ``config.restore_on_error`` is off.  Invariant
(asserted): a rollback restores variables only, by their resource handles.
"""
import tensorflow as tf
from tensorflow.python.ops import gen_resource_variable_ops, resource_variable_ops

from janus.runtime import effects, scalars


class Rollback:
    """The variables a graph may update, as (resource handle, dtype) pairs."""

    def __init__(self, handles):
        self.handles = tuple(handles)
        assert all(handle.dtype == tf.resource and isinstance(dtype, tf.DType)
                   for handle, dtype in self.handles), self.handles

    def save(self):
        """The variables' values now (eager tensors holding their buffers)."""
        read = gen_resource_variable_ops.read_variable_op
        return [read(handle, dtype) for handle, dtype in self.handles]

    def restore(self, saved):
        """Assigns the values ``save`` kept back to the variables."""
        assign = gen_resource_variable_ops.assign_variable_op
        for (handle, _), value in zip(self.handles, saved):
            assign(handle, value)

    def __len__(self):
        return len(self.handles)


class NotUndoable(Exception):
    """The graph changes state that a rollback cannot restore (the reason)."""


def plan(concrete, before, on_host=frozenset()):
    """(Rollback or None, reason or None) for a traced graph.

    ``before``: names of the top graph's ops that run before any state change
    (errors there need no rollback); None when the graph changes no state.
    ``on_host``: ops whose checks ran on the host before the run (hostcheck.py).
    Only variables that an op may update before some fallible op ran are
    kept: an update that waits for every fallible op (an optimizer step after
    the gradients it applies) never runs when one of them fails."""
    graph = concrete.graph
    if before is None:
        return None, None
    ops = graph.get_operations()
    fallible = [op for op in ops if op.name not in before and op not in on_host
                and not infallible(op)]
    if not fallible:
        return None, None
    waiting = _waiting_for_all(ops, fallible)
    try:
        handles = updated_variables(graph, skip=waiting)
    except NotUndoable as e:
        return None, str(e)
    return (Rollback(handles) if handles else None), None


def _waiting_for_all(ops, fallible):
    """The ops that run only after every op in ``fallible`` finished."""
    consumers = {}
    for op in ops:
        for source in [t.op for t in op.inputs] + list(op.control_inputs):
            consumers.setdefault(source, []).append(op)
    waiting = None
    for root in fallible:
        found, stack = set(), [root]
        while stack:
            for consumer in consumers.get(stack.pop(), ()):
                if consumer not in found:
                    found.add(consumer)
                    stack.append(consumer)
        waiting = found if waiting is None else waiting & found
        if not waiting:
            break
    return waiting


def updated_variables(graph, skip=frozenset()):
    """(handle, dtype) of every variable the graph's ops (but those in ``skip``)
    may update; raises ``NotUndoable`` for a state change other than a
    variable update."""
    inputs = _updated_inputs(graph, {}, skip)
    variables = {id(v.handle): v for v in graph.variables}
    captured = {id(internal): external for external, internal in graph.captures}
    handles = []
    for index in sorted(inputs):
        placeholder = graph.inputs[index]
        external = captured.get(id(placeholder))
        variable = variables.get(id(external)) if external is not None else None
        if variable is None:
            raise NotUndoable('the graph changes a resource that is not a variable it '
                              'captured (%s)' % placeholder.name)
        handles.append((variable.handle, variable.dtype))
    return handles


# Ops whose inputs map to a called graph's inputs from this offset on.
_BRANCH_OFFSET = {'If': 1, 'StatelessIf': 1, 'Case': 1, 'StatelessCase': 1}


def _updated_inputs(graph, memo, skip=frozenset()):
    """Indices into ``graph.inputs`` of the resources its ops (but ``skip``) change."""
    if id(graph) in memo:
        return memo[id(graph)]
    memo[id(graph)] = found = set()
    index_of = {id(t): i for i, t in enumerate(graph.inputs)}
    for op in graph.get_operations():
        if op in skip:
            continue
        for tensor in changed_resources(op, memo):
            if id(tensor) not in index_of:
                raise NotUndoable('%s changes a resource made inside the graph (%s)'
                                  % (op.type, op.name))
            found.add(index_of[id(tensor)])
    return found


def changed_resources(op, memo=None):
    """The resource tensors of ``op``'s graph that ``op`` (or a graph it runs)
    changes, seen through ``Identity``; raises ``NotUndoable`` for a change
    that is not to a resource (a print, a file) or that janus cannot see."""
    memo = {} if memo is None else memo
    called = effects.called_graphs(op)
    if called:
        offset = _BRANCH_OFFSET.get(op.type, 0)
        return [through_identity(op.inputs[offset + i]) for inner in called
                for i in _updated_inputs(inner, memo)]
    if op.type in effects.CALL_OPS:
        raise NotUndoable('the graph calls a function janus cannot look into (%s)' % op.name)
    if effects.effect(op) is not effects.Effect.CHANGE:
        return []
    resources = [through_identity(t) for t in op.inputs if t.dtype == tf.resource]
    if not resources:
        raise NotUndoable('%s has an effect outside TF (%s)' % (op.type, op.name))
    return resources


def through_identity(tensor):
    """The tensor an ``Identity`` chain forwards (a resource handle's placeholder)."""
    while tensor.op.type == 'Identity' and tensor.op.inputs:
        tensor = tensor.op.inputs[0]
    return tensor


# -- ops that cannot fail at run time ------------------------------------------

# Always: they forward, read or make a value.
_NEVER_FAIL = frozenset((
    'Identity', 'IdentityN', 'NoOp', 'Const', 'Placeholder', 'ReadVariableOp', 'StopGradient',
    'Snapshot', 'VarIsInitializedOp', 'VariableShape', 'Shape', 'Size', 'Rank', 'ZerosLike',
    'OnesLike',
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
    'AssignVariableOp', 'AssignAddVariableOp', 'AssignSubVariableOp',
))

# Elementwise, but failing on some integer values (division by zero, a
# negative integer power, the mean of nothing): shape-checked only for
# floating-point operands.
_FLOAT_ONLY = frozenset(('RealDiv', 'Div', 'FloorDiv', 'FloorMod', 'Pow', 'Xdivy', 'Xlogy',
                         'Mean'))

# A dense optimizer update: checks only that its operands' shapes agree.
_DENSE_APPLY_PREFIX = 'ResourceApply'


def infallible(op, depth=0):
    """Whether ``op`` cannot raise at run time (conservative: False when unsure)."""
    called = effects.called_graphs(op)
    if called:
        return depth < 8 and all(infallible(inner, depth + 1)
                                 for graph in called for inner in graph.get_operations())
    if op.type in _NEVER_FAIL:
        return True
    if op.type == 'Reshape' and op.name in getattr(op.graph, scalars.KNOWN_SCALARS, ()):
        return True   # janus's own: one element made a scalar
    if op.type in ('Janus>Assert', 'Janus>CheckedIdentity'):
        # Every state change waits for every check (tracer.defer_state_updates); a
        # branch's copy of a check made before the branch (control.py) fails after it.
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


# Elementwise on one floating-point operand (or a cast): any shape will do.
_UNARY = frozenset(('Cast', 'Neg', 'Square', 'Sqrt', 'Rsqrt', 'Exp', 'Log', 'Log1p', 'Expm1',
                    'Abs', 'Sign', 'Reciprocal', 'Inv', 'Tanh', 'Sigmoid', 'Relu', 'Relu6',
                    'Elu', 'Selu', 'LeakyRelu', 'Softplus', 'IsNan', 'IsFinite', 'IsInf',
                    'Floor', 'Ceil', 'Round', 'Rint', 'Sin', 'Cos'))
_REDUCTIONS = frozenset(('Sum', 'Max', 'Min', 'Prod', 'All', 'Any', 'Mean'))


def _shapes_suffice(op):
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
    'LogicalAnd', 'LogicalOr')) | _FLOAT_ONLY - _REDUCTIONS


def _shapes_known(op):
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
