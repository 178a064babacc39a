"""Graph functions that call themselves: a recursive function's body traced once
into a library function whose recursive calls are ``Janus>Invoke`` ops naming
it (the JANUS paper's InvokeOp, section 4.2.1), and its gradient function, built
the same way.

Needs the op library (``graph/ops.py``).  Builds nothing until first called;
called inside a graph being built, it adds one ``Janus>Invoke`` there, and inside
the function's own body each recursive call is another.

- **The body**, ``body(self_call, *args)``, is a Python function of tensors; it
  calls ``self_call(*args)`` where it recurses (from inside a ``tf.cond`` too:
  the base case is real control flow, never an assumption).  Traced once per
  ``RecursiveFunction``, for arguments of the given specs, whatever depth the data
  asks for at run time.
- **Captures.**  Tensors the body reads from outside (a variable's handle, a
  tensor of the enclosing graph) become the function's trailing inputs, in a
  fixed order, and every recursive call passes them on.  They are found by
  tracing: a trace that finds a capture its recursive calls did not pass is
  traced again with it (a fixed point, at most ``_MAX_TRACES``).
- **Gradients.**  The gradient function takes the function's inputs and the
  upstream gradients of its floating outputs and returns the gradients of its
  differentiable inputs (floats, and variable handles: a variable read in the
  recursion gets its gradient).  It is traced as ``tf.gradients`` of the body
  traced again; there, each recursive call's gradient is a call of the gradient
  function (``Janus>Invoke``'s gradient, ``graph/ops.py``).  It recomputes the
  forward of each subtree (exact; O(nodes x depth) work).
- **Names** are private (``janus_rec_<label>_<n>``): TF removes a function from
  the context by name when a function object is collected, and this object keeps
  the functions it registered (and the branches they call) alive.
"""
from __future__ import annotations
import contextlib
import itertools
import weakref
import typing

import tensorflow as tf
from tensorflow.core.framework import function_pb2
from tensorflow.python.eager import context
from tensorflow.python.eager import record
from tensorflow.python.eager import tape as tape_module
from tensorflow.python.eager.polymorphic_function import atomic_function
from tensorflow.python.framework import func_graph as func_graph_module
from tensorflow.python.framework import ops as ops_module
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.ops import handle_data_util

from janus.config import config
from janus.graph import ops
from janus.graph import lowering

_MAX_TRACES = 4
_SPARSE_GUESSES = ((tf.int32, tf.int32), (tf.int64, tf.int32), (tf.int64, tf.int64),
                   (tf.int32, tf.int64), None)
_ids = itertools.count()
# name -> the FuncGraph of every function built here (forward and gradient): what a
# Janus>Invoke runs, for the tracer's analysis of state changes and checks
# (``effects.called_graphs``); held as long as its RecursiveFunction.
_GRAPHS = weakref.WeakValueDictionary()
_KEPT = weakref.WeakSet()   # every live ``_Kept`` (their tables are no variables)


def graph_of(name: str) -> func_graph_module.FuncGraph | None:
    """The FuncGraph of the recursive (or gradient) function ``name``, or None."""
    return _GRAPHS.get(name)


class RecursionBuildError(Exception):
    """The recursive function could not be built (janus falls back to Python)."""


class RecursiveFunction:
    """``body`` as one library function calling itself; ``self(*args)`` calls it."""

    def __init__(
            self, label: str, body: typing.Callable, arg_specs: typing.Sequence[tf.TensorSpec],
            output_specs: typing.Sequence[tf.TensorSpec], memo_key: int | None = None,
            gradient_scope: typing.Callable[[], typing.ContextManager] = contextlib.nullcontext,
            gradient_optional: bool = False) -> None:
        number = next(_ids)
        self.name = 'janus_rec_%s_%d' % (label, number)
        self.grad_name = self.name + '_grad'
        # The argument (an int64 scalar) that alone decides the outputs (a node's
        # index), or None: the forward then keeps each call's outputs under it, and
        # the gradient reads a recursive call's outputs back instead of recomputing
        # its subtree (``_Kept``).
        self.memo_key = memo_key
        self._kept: _Kept | None = None
        self._tracing_gradient = False
        # () -> a context manager held while the gradient function is traced
        self._gradient_scope = gradient_scope
        # No tape records the calls: a gradient TF cannot build is left out
        self.gradient_optional = gradient_optional
        self.body = body
        self.arg_specs = [tf.TensorSpec.from_spec(s) for s in arg_specs]
        self.output_specs = [tf.TensorSpec.from_spec(s) for s in output_specs]
        self.captures = []         # outer tensors passed after the arguments, in order
        self._functions = []       # the AtomicFunctions registered (kept alive)
        self._registered = []      # names of the lowered definitions added to the context
        self.traces = 0            # body traces, forward and gradient
        self.variables = ()        # the variables the body reads
        # the gradients' dtypes (from the traced inputs)
        self._outer_grad_types: list | None = None

    def build(self) -> None:
        """Traces the function and its gradient now (else at the first call)."""
        if not self._functions:
            self._build()

    def graphs(self) -> list:
        """The FuncGraphs built: the function's and its gradient's."""
        return list(getattr(self, '_graphs', ()))

    def __call__(self, *args: tf.Tensor) -> list[tf.Tensor]:
        self.build()
        for variable in self.variables:   # as a read would: tapes watch what the call reads
            tape_module.variable_accessed(variable)
        return self._invoke(list(args), self.captures, self._outer_grad_types)

    # -- building ------------------------------------------------------------
    def _build(self) -> None:
        if self.memo_key is not None and all(s.shape.is_fully_defined()
                                             for s in self.output_specs):
            self._kept = _Kept(self.output_specs)
        graph = self._trace_forward()
        functions, graphs = self._register(self.name, graph), [graph]
        self._tracing_gradient = True
        try:
            with self._gradient_scope():
                grad_graph = self._trace_sparse_settled()
        except (ValueError, TypeError, AssertionError, LookupError):
            if not self.gradient_optional:
                raise
            # No tape records the call: it runs without a gradient function (one asked
            # for later raises, never zeros).
            ops.forget_gradient_layout(self.grad_name)
            grad_graph, self.grad_name = None, ''
        finally:
            self._tracing_gradient = False
        if grad_graph is not None:
            functions += self._register(self.grad_name, grad_graph)
            graphs.append(grad_graph)
            _GRAPHS[self.grad_name] = grad_graph
        self._functions, self._graphs = functions, graphs
        _GRAPHS[self.name] = graph

    def _register(self, name: str, graph: func_graph_module.FuncGraph) -> list:
        """Registers ``graph`` as the library function ``name`` (its tf.conds lowered,
        ``lowering.py``, unless ``config.recursion_lowers_conds`` is off); returns
        what must stay alive for it to stay registered."""
        if not config.recursion_lowers_conds:
            return [atomic_function.from_func_graph(name, graph, {})]
        traced = atomic_function.from_func_graph(name + '_traced', graph, {})
        definition = function_pb2.FunctionDef()
        definition.CopyFrom(traced.definition)
        definition.signature.name = name
        ctx = context.context()
        try:
            lowered = lowering.lower_ifs(definition, _function_def)
        except lowering.LoweringError:
            lowered = definition   # run as traced
        ctx.add_function_def(lowered)
        self._registered.append(name)
        return [traced]

    @property
    def keeps_outputs(self) -> bool:
        """Whether the forward keeps each call's outputs for the gradient."""
        return self._kept is not None

    def is_scratch(self, op: tf.Operation) -> bool:
        """Whether ``op`` writes only the kept outputs (no state of the user's)."""
        return self._kept is not None and self._kept.writes(op)

    def _trace_forward(self) -> func_graph_module.FuncGraph:
        for _ in range(_MAX_TRACES):
            graph, args, outputs = self._trace_body(self.name)
            found = list(graph.external_captures)
            if _same_tensors(found, self.captures):
                graph.inputs = args + list(graph.internal_captures)
                graph.outputs = outputs
                self._outer_grad_types = self._grad_types(graph.inputs)
                return graph
            self.captures = found   # pass these on too, and trace again
        raise RecursionBuildError('%s: the captures of the recursive function did not settle'
                                  % self.name)

    def _trace_body(
            self,
            name: str) -> tuple[func_graph_module.FuncGraph, list[tf.Tensor], list[tf.Tensor]]:
        """A FuncGraph of the body, its argument placeholders and its outputs; the
        known captures captured first, in order."""
        graph = func_graph_module.FuncGraph(name)
        # No tape records the trace (a tape would wrap each tf.cond in a function of
        # its own, for eager gradients); the variables it reads are watched apart.
        with graph.as_default(), record.stop_recording(), \
                record.VariableWatcher() as reads:
            args = [tf.compat.v1.placeholder(s.dtype, s.shape) for s in self.arg_specs]
            inner = [graph.capture(c) for c in self.captures]
            outputs = self._run_body(graph, args, inner)
        self.variables = reads.watched_variables()
        self.traces += 1
        return graph, args, outputs

    def _run_body(self, graph: func_graph_module.FuncGraph, args: typing.Sequence[tf.Tensor],
                  inner_captures: typing.Sequence[tf.Tensor]) -> list[tf.Tensor]:
        # In the gradient's trace a recursive call reads its kept outputs back (its
        # gradient is still the gradient function's): no subtree is computed again.
        kept = self._kept is not None and self._tracing_gradient

        def self_call(*call_args: tf.Tensor) -> list[tf.Tensor]:
            if kept:
                return self._kept_outputs(list(call_args), inner_captures)
            return self._invoke(list(call_args), inner_captures)
        result = self.body(self_call, *args)
        flat = tf.nest.flatten(result)
        if len(flat) != len(self.output_specs):
            raise RecursionBuildError('%s: the body returns %d values, not %d'
                                      % (self.name, len(flat), len(self.output_specs)))
        outputs = []
        for value, spec in zip(flat, self.output_specs):
            value = tf.convert_to_tensor(value)
            if value.dtype != spec.dtype or not spec.shape.is_compatible_with(value.shape):
                raise RecursionBuildError('%s: the body returns %s, not %s'
                                          % (self.name, value, spec))
            outputs.append(tf.identity(value))
        if self._kept is not None and not self._tracing_gradient:
            outputs = self._kept.keep(args[self.memo_key], outputs)   # type: ignore[index]
        return outputs

    def _trace_sparse_settled(self) -> func_graph_module.FuncGraph:
        """The gradient function, each gradient as sparse as eager's would be: a
        variable only gathered from (an embedding) gets an IndexedSlices.  Which ones
        are is guessed (sparse for every variable), traced, and traced again with
        what the trace found until the two agree (a recursive call's gradient is the
        function itself, so its layout must be known before it is traced)."""
        resources = [dtype == tf.resource for dtype in self._grad_input_dtypes()]
        # tf.cond's gradient needs both sides' IndexedSlices of one dtype: a gather's
        # gives its ids' dtype and an int32 dense shape; dense is the last resort.
        for sparse in _SPARSE_GUESSES:
            guess = [sparse if resource else None for resource in resources]
            for _ in range(_MAX_TRACES):
                ops.register_gradient_layout(self.grad_name, guess)
                try:
                    graph, found = self._trace_gradient()
                except (TypeError, ValueError):
                    if sparse is None:
                        raise
                    break   # the next guess
                if found == guess:
                    return graph
                guess = found
        raise RecursionBuildError('%s: the gradients\' sparsity did not settle' % self.name)

    def _grad_input_dtypes(self) -> list[tf.DType]:
        inputs = [s.dtype for s in self.arg_specs] + [c.dtype for c in self.captures]
        return [inputs[i] for i in self._grad_inputs(
            [tf.TensorSpec([], dtype) for dtype in inputs])]

    def __del__(self) -> None:
        try:
            ops.forget_gradient_layout(self.grad_name)
            ctx = context.context()
            for name in self._registered:
                ctx.remove_function(name)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def _trace_gradient(self) -> tuple[func_graph_module.FuncGraph, list]:
        """(graph, layout).  Inputs: the function's inputs, then one upstream gradient
        per floating output; outputs: the gradients of the differentiable inputs
        (``grad_inputs``), an IndexedSlices one as three (``layout``: its dtypes)."""
        graph, args, outputs = self._trace_body(self.grad_name)
        if not _same_tensors(list(graph.external_captures), self.captures):
            raise RecursionBuildError('%s: the gradient trace captured other tensors'
                                      % self.name)
        inner = list(graph.internal_captures)
        with graph.as_default():
            floating = [out for out in outputs if _floating(out.dtype)]
            upstream = [tf.compat.v1.placeholder(out.dtype, out.shape) for out in floating]
            sources = args + inner
            wanted = self._grad_inputs(sources)
            grads = tf.gradients(floating, [sources[i] for i in wanted], grad_ys=upstream) \
                if floating and wanted else [None] * len(wanted)
            outputs, layout = [], []
            for i, grad in zip(wanted, grads):
                if isinstance(grad, tf.IndexedSlices) and grad.dense_shape is not None:
                    grad = _without_zero_rows(grad)
                    outputs += [grad.values, grad.indices, grad.dense_shape]
                    layout.append((grad.indices.dtype, grad.dense_shape.dtype))
                else:
                    outputs.append(_zeros_for(sources[i]) if grad is None
                                   else tf.convert_to_tensor(grad))
                    layout.append(None)   # type: ignore[arg-type]  # a dense gradient
        graph.inputs = args + inner + upstream
        graph.outputs = outputs
        return graph, layout

    # -- calling ---------------------------------------------------------------
    def _grad_inputs(self, inputs: typing.Sequence) -> list[int]:
        scratch = self._scratch_positions()
        return [i for i, x in enumerate(inputs)
                if ops.differentiable(x.dtype) and i not in scratch]

    def _scratch_positions(self) -> set[int]:
        """Input positions of kept outputs' tables (resources, but no variables): this
        function's, and those of a recursive helper it calls."""
        handles = {id(t.resource_handle) for kept in list(_KEPT) for t in kept.tables}
        return {len(self.arg_specs) + i for i, c in enumerate(self.captures)
                if id(c) in handles}

    def _grad_types(self, inputs: typing.Sequence[tf.Tensor]) -> list[tf.DType]:
        return [_gradient_dtype(inputs[i]) for i in self._grad_inputs(inputs)]

    def _invoke(self, args: list[tf.Tensor], captures: typing.Sequence[tf.Tensor],
                grad_types: typing.Sequence[tf.DType] | None = None,
                function: str | None = None) -> list[tf.Tensor]:
        if len(args) != len(self.arg_specs):
            raise RecursionBuildError('%s takes %d arguments, got %d'
                                      % (self.name, len(self.arg_specs), len(args)))
        args = [tf.convert_to_tensor(a, dtype=s.dtype) for a, s in zip(args, self.arg_specs)]
        inputs = args + list(captures)
        results = ops.janus_invoke(
            function or self.name, inputs, [s.dtype for s in self.output_specs],
            [s.shape for s in self.output_specs], grad_function=self.grad_name,
            grad_inputs=self._grad_inputs(inputs),
            grad_types=grad_types if grad_types is not None else self._grad_types(inputs))
        return results


    def _kept_outputs(self, args: list[tf.Tensor],
                      captures: typing.Sequence[tf.Tensor]) -> list[tf.Tensor]:
        """A recursive call in the gradient's trace: its outputs read back from the
        kept tables in place (no function run), passed through an ``IdentityN`` with
        the call's inputs whose gradient is the gradient function's
        (``ops.kept_outputs``), as the call's own would be."""
        args = [tf.convert_to_tensor(a, dtype=s.dtype) for a, s in zip(args, self.arg_specs)]
        inputs = args + list(captures)
        values = self._kept.read(args[self.memo_key],   # type: ignore[union-attr, index]
                                 self.captures, captures)
        return ops.kept_outputs(values, inputs, self.grad_name, self._grad_inputs(inputs),
                                self._grad_types(inputs))


class _Kept:
    """Each call's outputs kept by the forward under its key (a node's index), in one
    hash table per output, for the gradient to read back (the issue's "forward
    states kept for the backward": O(nodes) instead of O(nodes x depth)).

    Safe because the key alone decides the outputs (``memo_key``: no tensor argument
    and no threaded number), every forward call of a run ends before the backward
    starts (the backward needs the root's output), and the backward reads only keys
    the same run's forward wrote (the children of a node it computed).  The tables
    are scratch space: their writes change no state of the user's
    (``effects.effect``: ops marked ``SCRATCH_ATTR``)."""

    def __init__(self, specs: typing.Sequence[tf.TensorSpec]) -> None:
        # Values are kept flat: a table's value is a vector.
        self.shapes = [spec.shape for spec in specs]
        with tf.init_scope():
            self.tables = [tf.lookup.experimental.MutableHashTable(
                tf.int64, spec.dtype, tf.zeros([spec.shape.num_elements()], spec.dtype))
                for spec in specs]
        self._inserts = set()
        _KEPT.add(self)

    def keep(self, key: tf.Tensor, outputs: typing.Sequence[tf.Tensor]) -> list[tf.Tensor]:
        keys = tf.reshape(tf.cast(key, tf.int64), [1])
        inserts = []
        for table, value in zip(self.tables, outputs):
            op = table.insert(keys, tf.reshape(value, [1, -1]))
            op._set_attr(ops.SCRATCH_ATTR, attr_value_pb2.AttrValue(b=True))
            self._inserts.add(op)
            inserts.append(op)
        with tf.control_dependencies(inserts):
            return [tf.identity(value) for value in outputs]

    def writes(self, op: tf.Operation) -> bool:
        return op in self._inserts

    def read(self, key: tf.Tensor, outer_captures: typing.Sequence[tf.Tensor],
             captures: typing.Sequence[tf.Tensor]) -> list[tf.Tensor]:
        """The kept outputs under ``key``, read through ``captures`` (the graph's
        copies of ``outer_captures``, among them the tables' handles)."""
        handles = {id(c): h for c, h in zip(outer_captures, captures)}
        keys = tf.reshape(tf.cast(key, tf.int64), [1])
        outputs = []
        for table, shape in zip(self.tables, self.shapes):
            handle = handles.get(id(table.resource_handle))
            if handle is None:
                raise RecursionBuildError('the kept outputs\' table is not an input')
            default = tf.zeros([shape.num_elements()], table.value_dtype)   # (never read)
            found = tf.raw_ops.LookupTableFindV2(table_handle=handle, keys=keys,
                                                 default_value=default)
            outputs.append(tf.reshape(found[0], shape))
        return outputs


def _function_def(name: str) -> function_pb2.FunctionDef | None:
    """The FunctionDef the eager context holds under ``name``, or None."""
    try:
        return context.context().get_function_def(name)
    except (tf.errors.NotFoundError, ValueError):
        return None


def _without_zero_rows(grad: tf.IndexedSlices) -> tf.IndexedSlices:
    """An IndexedSlices gradient without its all-zero rows.  tf.cond makes every
    captured variable an input once per branch, and the gradient of the copy one
    side does not use is zeros, converted to one row per row of the variable: kept,
    they would grow at every level of the recursion (150 rows per call for a small
    embedding).  A zero row adds nothing to any optimizer's sparse update (squares,
    moments, scatter-adds), so dropping it keeps every update as eager's."""
    values = grad.values
    flat = tf.reshape(values, tf.stack([tf.shape(values)[0], -1]))
    keep = tf.reshape(tf.where(tf.reduce_any(tf.not_equal(flat, 0), axis=1)), [-1])
    return tf.IndexedSlices(tf.gather(values, keep), tf.gather(grad.indices, keep),
                            grad.dense_shape)


def _same_tensors(a: typing.Sequence, b: typing.Sequence) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _floating(dtype: tf.DType) -> bool:
    return dtype.is_floating or dtype.is_complex


def _gradient_dtype(tensor: tf.Tensor) -> tf.DType:
    """A gradient's dtype: the tensor's, or for a variable's handle its value's."""
    if tensor.dtype != tf.resource:
        return tensor.dtype
    return _handle_dtype(tensor)


def _handle_data(handle: tf.Tensor) -> typing.Any:
    """A variable handle's dtype and shape record (an eager handle carries it; a
    graph tensor's is the graph's)."""
    data = getattr(handle, '_handle_data', None)
    if data is None and not isinstance(handle, ops_module.EagerTensor):
        data = handle_data_util.get_resource_handle_data(handle)
    if data is None or not data.shape_and_type:
        raise RecursionBuildError('a resource read in the recursion has no known dtype')
    return data.shape_and_type[0]


def _handle_dtype(handle: tf.Tensor) -> tf.DType:
    return tf.as_dtype(_handle_data(handle).dtype)


def _zeros_for(tensor: tf.Tensor) -> tf.Tensor:
    """The gradient of an input nothing differentiable depends on."""
    if tensor.dtype != tf.resource:
        return tf.zeros_like(tensor)
    data = _handle_data(tensor)
    return tf.zeros(tf.TensorShape(data.shape), tf.as_dtype(data.dtype))
