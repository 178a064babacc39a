"""Python side of janus's custom ops (janus_ops/*.cc): ``Janus>Assert`` and
``Janus>Invoke``.

``janus_assert`` puts the check of one speculative assumption into the graph
being built; ``parse_assumption_failure`` recovers the assumption id from the
error TensorFlow raises when such a check fails.  ``janus_invoke`` runs a library
function by name (a recursive call in a graph, ``graph/recursive_functions.py``),
its gradient the function its ``grad_f`` attribute names.

Before this module runs, ``janus_ops/_janus_ops.so`` must have been compiled,
against the TensorFlow imported here, by installing the project in this
environment (``pip install --no-build-isolation -e .``).  The library is loaded
lazily, on the first ``janus_assert`` call (or ``load_ops()``), once per process.
"""
from __future__ import annotations

import os
import re
import threading
from typing import Optional
import typing

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

from janus.errors import JanusOpsError

# janus's own checks: stateful (so nothing prunes them), but they change nothing.
CHECK_OPS = ('Janus>Assert', 'Janus>CheckedIdentity')

OP_TYPE = 'Janus>Assert'
LIBRARY_NAME = '_janus_ops.so'
BUILD_INFO_NAME = '_build_info.txt'

# Mirrors the message built by the kernel in janus_ops/assert_op.cc.
_FAILURE_RE = re.compile(r'JANUS_ASSUMPTION_FAILED\[id=(-?\d+)\]')

_REBUILD_HINT = (
    'Rebuild it against the TensorFlow of this environment: with '
    'tensorflow-cpu==2.21.0 installed, run `pip install --no-build-isolation '
    '-e .` in the janus checkout (or `bash scripts/test.sh`, which does it).')

# The check is a guard, not part of the computation: its input is a bool and
# it has no outputs, so there is nothing to differentiate.  Registering "no
# gradient" explicitly keeps tf.gradients / tape / cond_v2 / while_v2 gradient
# construction from ever raising LookupError when it meets the op in a graph.
# Try/except: a second registration (importlib.reload) raises KeyError.
try:
    tf.no_gradient(OP_TYPE)
except KeyError:
    pass

_lock = threading.Lock()
_module = None


def load_ops() -> typing.Any:
    """Returns the loaded op module, loading the library on first use.

    Raises JanusOpsError, saying how to rebuild, if the library is missing,
    was built against another TensorFlow version, or fails to load.
    """
    global _module
    with _lock:
        if _module is None:
            _module = _load_library(_library_dir())
    return _module


def janus_assert(condition: tf.Tensor, assumption_id: int, message: str,
                 name: str | None = None) -> tf.Operation:
    """Adds a check that ``condition`` (a scalar bool) holds.

    When it does not, running the op raises tf.errors.FailedPreconditionError
    whose message carries ``JANUS_ASSUMPTION_FAILED[id=assumption_id]``.
    Returns the Operation in graph mode, so callers can use it as a control
    input; in eager mode the check has already run and None is returned.
    """
    return load_ops().janus_assert(
        condition=condition, assumption_id=int(assumption_id),
        message=str(message), name=name)


def janus_checked_identity(condition: tf.Tensor, value: tf.Tensor, assumption_id: int, message: str,
                           name: str | None = None) -> tf.Tensor:
    """``value``, passed on only once ``condition`` holds (else fails like janus_assert).

    A data dependency on the check, which graph optimizations keep, where a
    control dependency through an Identity could be optimized away.
    """
    return load_ops().janus_checked_identity(
        condition=condition, input=value, assumption_id=int(assumption_id),
        message=str(message), name=name)


# Gradient: the identity's, for the value; none for the condition (a bool).
@tf.RegisterGradient('Janus>CheckedIdentity')
def _checked_identity_grad(op: tf.Operation, grad: tf.Tensor) -> list:
    return [None, grad]


INVOKE_OP = 'Janus>Invoke'
# On an op: it writes only janus's own scratch space (a recursive function's kept
# outputs, ``recursive_functions._Kept``): no state of the user's (``effects.effect``).
SCRATCH_ATTR = '_janus_scratch'


def janus_invoke(function_name: str, args: typing.Sequence[tf.Tensor],
                 output_types: typing.Sequence[tf.DType], output_shapes: typing.Sequence = (),
                 grad_function: str = '', grad_inputs: typing.Sequence[int] = (),
                 grad_types: typing.Sequence[tf.DType] = (),
                 name: str | None = None) -> list[tf.Tensor]:
    """Runs the library function ``function_name`` on ``args`` (janus_ops/invoke_op.cc),
    also from inside that function's own body: a recursive call in a graph.

    ``output_shapes``: the callee's result shapes (nothing infers shapes through a
    recursion); ``grad_function``: the library function that gives the gradients
    (dtypes ``grad_types``) of ``args[i]`` for ``i`` in ``grad_inputs``, from
    ``args`` and the upstream gradients of the floating outputs
    (``invoke_gradient_inputs``); empty: no gradient.  Returns the outputs, a list."""
    return load_ops().janus_invoke(
        args, Tout=list(output_types), f=function_name, grad_f=grad_function,
        grad_inputs=[int(i) for i in grad_inputs], grad_types=list(grad_types),
        output_shapes=[tf.TensorShape(s) for s in output_shapes], name=name)


def differentiable(dtype: tf.DType) -> bool:
    """Whether an input of ``dtype`` gets a gradient: floats, complex, and a
    variable's handle (its gradient is the read value's)."""
    dtype = tf.as_dtype(dtype)
    return dtype.is_floating or dtype.is_complex or dtype == tf.resource


def invoke_gradient_inputs(outputs: typing.Sequence[tf.Tensor],
                           grads: typing.Sequence[tf.Tensor | None]) -> list[tf.Tensor]:
    """The upstream gradients a gradient function of ``Janus>Invoke`` takes: one per
    floating output (zeros where nothing flows back), in order."""
    return [grad if grad is not None else tf.zeros_like(out)
            for out, grad in zip(outputs, grads)
            if out.dtype.is_floating or out.dtype.is_complex]


# Gradient: the function the op names in ``grad_f``, run through another
# Janus>Invoke (a recursive function's gradient function calls itself the same
# way).  No ``grad_f``: no gradient, an error that says so, never zeros.
# Gradient functions are not differentiated again (no second order).
@tf.RegisterGradient(INVOKE_OP)
def _invoke_grad(op: tf.Operation, *grads: tf.Tensor | None) -> list:
    grad_function = _function_name(op.get_attr('grad_f'))
    if not grad_function:
        raise LookupError('janus: %s (%s) has no gradient function'
                          % (op.name, _function_name(op.get_attr('f'))))
    inputs = [_reachable_handle(x) if x.dtype == tf.resource else x for x in op.inputs]
    return _gradients_by(grad_function, inputs, op.outputs, grads,
                         list(op.get_attr('grad_types')), op.get_attr('grad_inputs'))


_KEPT_GRADIENT = 'JanusKeptOutputs'


def kept_outputs(values: typing.Sequence[tf.Tensor], inputs: typing.Sequence[tf.Tensor],
                 grad_function: str, grad_inputs: typing.Sequence[int],
                 grad_types: typing.Sequence[tf.DType]) -> list[tf.Tensor]:
    """``values`` (a recursive call's outputs read back from where the forward kept
    them) passed through an ``IdentityN`` that also takes the call's ``inputs``: its
    gradient is the call's (the gradient function ``grad_function`` run through
    ``Janus>Invoke``, as ``Janus>Invoke``'s own), without running the call again."""
    outputs = tf.raw_ops.IdentityN(input=list(values) + list(inputs))
    op = outputs[0].op
    attrs = {'_gradient_op_type': attr_value_pb2.AttrValue(s=_KEPT_GRADIENT.encode()),
             '_janus_kept': attr_value_pb2.AttrValue(i=len(values)),
             '_janus_grad_f': attr_value_pb2.AttrValue(s=grad_function.encode()),
             '_janus_grad_inputs': attr_value_pb2.AttrValue(
                 list=attr_value_pb2.AttrValue.ListValue(i=list(grad_inputs))),
             '_janus_grad_types': attr_value_pb2.AttrValue(
                 list=attr_value_pb2.AttrValue.ListValue(
                     type=[tf.as_dtype(t).as_datatype_enum for t in grad_types]))}
    for key, value in attrs.items():
        op._set_attr(key, value)
    return list(outputs[:len(values)])


@tf.RegisterGradient(_KEPT_GRADIENT)
def _kept_outputs_grad(op: tf.Operation, *grads: tf.Tensor | None) -> list:
    count = op.get_attr('_janus_kept')
    grad_function = op.get_attr('_janus_grad_f').decode()
    inputs = [_reachable_handle(x) if x.dtype == tf.resource else x
              for x in op.inputs[count:]]
    out = _gradients_by(grad_function, inputs, op.outputs[:count], grads[:count],
                        [tf.as_dtype(t) for t in op.get_attr('_janus_grad_types')],
                        op.get_attr('_janus_grad_inputs'))
    return [None] * count + out


def _gradients_by(grad_function: str, inputs: list[tf.Tensor],
                  outputs: typing.Sequence[tf.Tensor], grads: typing.Sequence[tf.Tensor | None],
                  types: typing.Sequence[tf.DType], grad_inputs: typing.Sequence[int]) -> list:
    """The gradients of ``inputs`` (None where not in ``grad_inputs``) from the
    gradient function, given the upstream gradients of ``outputs``."""
    layout = _GRADIENT_LAYOUTS.get(grad_function) or [None] * len(types)
    flat_types = []
    for dtype, sparse in zip(types, layout):
        flat_types.extend([dtype] if sparse is None else [dtype] + list(sparse))
    result = iter(janus_invoke(grad_function,
                               inputs + invoke_gradient_inputs(outputs, grads), flat_types))
    out = [None] * len(inputs)
    for i, sparse in zip(grad_inputs, layout):
        out[i] = next(result) if sparse is None else tf.IndexedSlices(
            next(result), next(result), next(result))
    return out


# Gradient function name -> per gradient it gives: None (a dense tensor), or the
# (indices, dense_shape) dtypes of an IndexedSlices given as three outputs (values,
# indices, dense_shape): an embedding's gradient stays sparse through a recursion,
# as eagerly (optimizers apply sparse gradients differently, ``recursive_functions``).
_GRADIENT_LAYOUTS = {}


def register_gradient_layout(grad_function: str, layout: typing.Any) -> None:
    _GRADIENT_LAYOUTS[grad_function] = list(layout)


def forget_gradient_layout(grad_function: str) -> None:
    _GRADIENT_LAYOUTS.pop(grad_function, None)


def _reachable_handle(handle: tf.Tensor) -> tf.Tensor:
    """A variable handle the op took inside a branch, as the graph the gradient is
    built in can reach it: the capture it came from, outward (cond_v2's gradient
    cannot map a branch's captured handle passed on to an op in the branch), then
    captured by each graph between there and here (in nested conds each gradient
    graph may take a tensor only from the graph just outside it)."""
    if tf.executing_eagerly() or not hasattr(handle, 'op'):
        return handle   # the eager tape, or an eager handle (a graph captures it as is)
    chain, graph = [], tf.compat.v1.get_default_graph()
    while graph is not None:
        chain.append(graph)
        graph = getattr(graph, 'outer_graph', None)
    while not any(handle.graph is g for g in chain):
        graph = handle.graph
        captures = getattr(graph, 'internal_captures', ())
        index = next((i for i, t in enumerate(captures) if t is handle), None)
        if index is not None:
            handle = graph.external_captures[index]
            continue
        # A branch input cond_v2 made (the branches' inputs matched): the If's input.
        index = next((i for i, t in enumerate(getattr(graph, 'inputs', ())) if t is handle),
                     None)
        op = getattr(graph, '_forward_cond', None)
        if index is None or op is None or op.type not in ('If', 'StatelessIf'):
            return handle
        handle = op.inputs[index + 1]
    position = next(i for i, g in enumerate(chain) if handle.graph is g)
    for graph in reversed(chain[1:position]):
        handle = graph.capture(handle)
    return handle


def _function_name(attr: typing.Any) -> str:
    """A func attribute's name: a NameAttrList in a graph, bytes on the eager tape."""
    name = getattr(attr, 'name', attr)
    return name.decode() if isinstance(name, bytes) else name


def parse_assumption_failure(error: BaseException | str) -> Optional[int]:
    """Returns the assumption id named in a TF error (or string), else None."""
    text = getattr(error, 'message', None)
    if not isinstance(text, str):
        text = str(error)
    match = _FAILURE_RE.search(text)
    return int(match.group(1)) if match else None


def _library_dir() -> str:
    # Imported here, not at module top, so a missing package is reported
    # as a JanusOpsError with the rebuild hint, like a missing library.
    try:
        import janus_ops
    except ImportError as e:
        raise JanusOpsError(
            'janus_ops package not importable (%s). %s' % (e, _REBUILD_HINT)
        ) from e
    return os.path.dirname(os.path.abspath(janus_ops.__file__))


def _load_library(directory: str) -> typing.Any:
    path = os.path.join(directory, LIBRARY_NAME)
    if not os.path.isfile(path):
        raise JanusOpsError(
            'Janus op library not found at %s. %s' % (path, _REBUILD_HINT))
    _check_build_info(directory)
    try:
        return tf.load_op_library(path)
    except (tf.errors.OpError, OSError) as e:
        raise JanusOpsError(
            'Janus op library %s failed to load: %s. %s'
            % (path, e, _REBUILD_HINT)) from e


def _check_build_info(directory: str) -> None:
    # A library built against another TF often loads and then crashes (C++
    # ABI), so the version it was built against is compared before loading.
    built_for = _read_build_info(directory).get('tensorflow_version')
    if built_for != tf.__version__:
        raise JanusOpsError(
            'Janus op library in %s was built against TensorFlow %s but '
            'TensorFlow %s is running. %s'
            % (directory, built_for or '<unknown>', tf.__version__,
               _REBUILD_HINT))


def _read_build_info(directory: str) -> dict[str, str]:
    """Parses the ``key=value`` lines setup.py writes next to the library."""
    try:
        with open(os.path.join(directory, BUILD_INFO_NAME)) as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    pairs = (line.split('=', 1) for line in lines if '=' in line)
    return {key.strip(): value.strip() for key, value in pairs}
