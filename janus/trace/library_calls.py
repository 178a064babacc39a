"""Library calls in converted code: TF/Keras and NumPy APIs on guarded arguments.

Needs a ``TraceContext`` (``trace_context``) whose ``call_user`` is ``calls.call``:
your functions handed to library code (``tf.map_fn(fn, x)``, ``tf.cond(p, f, g)``)
are converted callbacks that dispatch through it.  What library code gets is
checked and guarded (``guard_library_args``); the ops it makes are checked for
draws and prints a graph cannot reproduce; a list grown in a tensor-dependent
loop stands in for its items; NumPy runs on values the trace knows; answers that
differ while tracing are given as eager gets them (``as_eagerly``).
"""
import contextlib
import functools
import inspect
import types

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import func_graph, tensor_util

from janus.reasons import Reason
from janus import guards, pytypes
from janus.graph import effects, fallible
from janus.library import layers, whitelist
from janus.trace import callees, lazy_text, observe
from janus.values import arrays, number_lists, protocol, scalars
from janus.values.protocol import NOT_MODELLED
from janus.values.shapes import checked_shape_in
from janus.trace.trace_context import Unsupported
from janus.trace.tracing import current_or_none


def call_library(ctx, callee, args, kwargs):
    """A TF/Keras API (or a namedtuple class, a builtin exception) on guarded
    arguments; the ops it makes checked (``_refuse_new_ops``)."""
    layers.refuse_lazy_build(callee)   # a Keras optimizer's first apply builds it: not in a trace
    layers.refuse_first_call_in_region(callee, ctx.region_depth)
    refuse_relaxed_input(ctx, callee, args, kwargs)
    shape = checked_shape_in(list(args) + list(kwargs.values()))
    if shape is not None:
        shape._refuse()   # library code would read its unknown dimensions as None
    fed = []
    if ctx.top_graph is not None and ctx.plan.dynamic_scalars:
        if any(callee is fn for fn in _MAKE_CONSTANT):
            made = number_lists.constant(ctx, args, kwargs)
            if made is not None:
                return made
        elif number_lists.converts_lists(callee):
            args, kwargs = number_lists.fed(ctx, args, kwargs, fed)
    args, kwargs = guard_library_args(ctx, callee, args, kwargs)
    scalars.refuse_lenient_shape(callee, args, kwargs)
    if any(callee is fn for fn in _MAKE_CONSTANT) and args and arrays.holds_stand_in(args[0]):
        return arrays.constant(callee, args, kwargs)   # eagerly NumPy's own conversion
    stacked = arrays.stack(args, kwargs) if callee is tf.stack and args else None
    if stacked is not None:
        return stacked
    args, kwargs = scalars.eager_zeros(callee, args, kwargs)
    try:
        with (fallible.made_by_the_user() if _adds_users_ops(callee)
              else contextlib.nullcontext()):
            answer = protocol.library_call(callee, args, kwargs)   # a grown list's
            if answer is not NOT_MODELLED:
                return answer
            if _is_user_tf_function(callee):
                _refuse_retracing(callee, args, kwargs)
            graph = tf.compat.v1.get_default_graph()
            made = graph.version   # the number of ops it holds
            result = callee(*args, **kwargs)
            if graph.version != made:
                _refuse_new_ops(ctx, graph, made)
            return result
    except Exception:
        if fed:   # the call needed the lists' values (a shape): constants again, for good
            ctx.needs_value = ctx.needs_value | frozenset(fed)
        raise


def _refuse_new_ops(ctx, graph, made):
    """Refuses, inside your statement (so that statement becomes a graph break, named),
    an op the library call just made, past the ``made`` ops the graph had
    (``get_operations`` is in creation order):

    * a random op a graph cannot draw as eager does (``tf.random.uniform``:
      RANDOM_OPS);
    * a ``tf.print`` after a ``print`` janus holds back until the run ends: the graph
      would print first (PRINT_ORDER)."""
    for op in graph.get_operations()[made:]:
        if effects.effect(op) is effects.Effect.UNREPRODUCIBLE:
            raise Unsupported(Reason.RANDOM_OPS, effects.unreproducible_reason(op))
        if op.type in effects.PRINT_OPS and ctx.heap.writes.holds_prints():
            raise Unsupported(Reason.PRINT_ORDER, 'a tf.print after a print of this call: '
                              'the graph would print it first')


# Library functions that make a tensor of an ndarray (or a list of them) themselves,
# without TF's conversion registry when building a graph.
_MAKE_CONSTANT = (tf.constant, tf.convert_to_tensor, tf.compat.v1.constant,
                  tf.compat.v1.convert_to_tensor)


def _adds_users_ops(callee):
    """Whether the ops a library call adds are ones eager runs as the user's, even
    unused (kept running, ``fallible.py``).  Not janus's own values' methods (a
    TensorList's append), nor a backward pass: an unused gradient (of an input
    nobody asked for, a whole convolution) fails only where the forward op it
    differentiates failed first.  Nor scaffolding a library call leaves where
    eager runs a graph that prunes it (``tf.vectorized_map``, ``tf.data``); a
    ``tf.function``'s own body is a graph of its own, pruned by TF as eagerly."""
    if whitelist.is_janus_runtime(callee) or callee is tf.vectorized_map:
        return False   # vectorized_map runs through a graph eagerly, leaving dead scaffolding
    owner = getattr(callee, '__self__', None)
    return not (isinstance(owner, (tf.GradientTape, tf.data.Dataset)) or callee is tf.gradients)


def _is_user_tf_function(callee):
    python_function = getattr(callee, 'python_function', None)
    return (isinstance(callee, tf.types.experimental.PolymorphicFunction)
            and python_function is not None and not whitelist.is_library(python_function))


def _refuse_retracing(callee, args, kwargs):
    """Your ``@tf.function`` helper, called from converted code, reuses the trace eager
    made for the same input shapes; for a relaxed (unknown) dimension TF would trace it
    again, running its Python code at another time than eagerly (and freezing the
    Python values it reads then): refused, so janus builds an exact-shape graph."""
    for value in tf.nest.flatten((args, kwargs)):
        if isinstance(value, tf.Tensor) and not value.shape.is_fully_defined():
            raise Unsupported(Reason.TF_FUNCTION_RETRACE,
                              'janus does not call your tf.function %s with a tensor of '
                              'unknown shape %s (TF would trace it again)'
                              % (callees.name(callee), value.shape))


def guard_library_args(ctx, callee, args, kwargs):
    """Checks and guards what library code gets; returns (args, kwargs) with outside
    containers replaced by copies whose tensors are re-read every run, and your own
    functions (``tf.map_fn(fn, x)``, ``tf.cond(p, f, g)``) replaced by their converted
    versions, run as a tensor-dependent region (a branch or loop body TF traces once)."""
    what = 'an argument of %s' % (callees.name(callee) if callee is not None else 'a builtin')

    def prepare(value, depth=0):
        if isinstance(value, lazy_text.LazyText):
            value.refuse()
        if arrays.is_stand_in(value):
            return value   # TF converts it (arrays.conversion), as it converts an ndarray
        if _is_user_function(value):
            return _converted_callback(ctx, value, _runs_callbacks_op_by_op(callee))
        if type(value) in (list, tuple) and depth == 0 and ctx.provenance.source_of(value) is None:
            ctx.provenance.of(value, what)
            items = [prepare(v, 1) for v in value]   # tf.switch_case's branches
            if all(a is b for a, b in zip(items, value)):
                return value   # the call's own list, as it is
            return type(value)(items)
        if ctx.provenance.source_of(value) is None:
            ctx.provenance.of(value, what)
            if observe.has_user_dunders(value):
                raise Unsupported(Reason.LIBRARY_GETS_OBJECT,
                                  'janus does not pass your %s object to library code (it '
                                  'would run its special methods unconverted)'
                                  % type(value).__name__)
            return value
        if pytypes.has_items(value) or pytypes.is_set(value):
            return ctx.contents(value)   # a set refuses: its order
        if not whitelist.captured_by_identity(value):
            raise Unsupported(Reason.LIBRARY_GETS_OBJECT,
                              'janus does not pass your %s object to library code (it might '
                              'read or change it behind the guards)' % type(value).__name__)
        return value
    return [prepare(v) for v in args], {k: prepare(v) for k, v in kwargs.items()}


def _is_user_function(value):
    if isinstance(value, functools.partial):
        return _is_user_function(value.func)
    return (isinstance(value, (types.FunctionType, types.MethodType))
            and isinstance(getattr(value, '__func__', value), types.FunctionType)
            and not whitelist.is_library(value))


def _runs_callbacks_op_by_op(callee):
    """Whether eager ``callee`` runs the user's callbacks op by op, so that an unused
    op there that fails raises (``tf.map_fn``, ``tf.cond``: kept running in the
    graph).  ``tf.data`` maps, ``tf.vectorized_map`` and ``tf.function`` trace
    them into graphs even eagerly, and prune such ops there too."""
    return any(callee is fn for fn in _OP_BY_OP_CALLERS)


_OP_BY_OP_CALLERS = (tf.map_fn, tf.scan, tf.foldl, tf.foldr, tf.cond, tf.case, tf.switch_case,
                     tf.while_loop)


def _converted_callback(ctx, fn, keep_unused=False):
    """``fn`` as library code may call it during the trace: converted, and inside a
    region TF traces once but may run many times (so writes there are refused).
    ``keep_unused``: eager runs it op by op (``_runs_callbacks_op_by_op``)."""
    outer = tf.compat.v1.get_default_graph() if keep_unused else None

    @functools.wraps(fn)
    def callback(*args, **kwargs):
        if current_or_none() is not ctx:
            return fn(*args, **kwargs)   # called when the graph runs (tf.py_function): Python
        ctx.region_depth += 1
        try:
            # What library code hands in (``tf.map_fn``'s lists of slices): its own.
            args = [ctx.provenance.made_result(v, deep=True) for v in args]
            kwargs = {k: ctx.provenance.made_result(v, deep=True) for k, v in kwargs.items()}
            # Where eager runs it in a graph (tf.data, vectorized_map), its unused ops
            # are pruned there too: not the user's to keep.
            with contextlib.nullcontext() if keep_unused else fallible.not_the_users():
                if getattr(fn, '__code__', None) in ctx.code_objects:
                    result = fn(*args, **kwargs)   # defined in converted code: converted
                else:
                    result = ctx.call_user(fn, *args, **kwargs)
        finally:
            ctx.region_depth -= 1
        _keep_unused_in_body(outer, result)
        return result
    return callback


def _keep_unused_in_body(outer, result):
    """A callback TF traced into a body of its own (``tf.map_fn``'s loop, a user's
    ``tf.cond`` branch): the user's ops there that may fail run even if unused.
    ``outer``: the graph of the library call, None where eager prunes them too."""
    graph = tf.compat.v1.get_default_graph()
    if outer is not None and graph is not outer and isinstance(graph, func_graph.FuncGraph):
        fallible.keep_unused(graph, tf.nest.flatten(result))


def refuse_relaxed_input(ctx, layer, args, kwargs):
    """UNKNOWN_SHAPE (a trace with the call's exact shapes) for a Keras layer whose
    input spec fixes a size the trace knows only as None, once the call pulled from
    an outside iterator: a wrong size would then fail at the layer's op after a pull
    no re-run undoes, with TF's error where eager raises Keras's.  (Before any such
    effect a failing run is re-run imperatively, which raises Keras's own error: the
    relaxed graph stays, as for a flattened input whose size is known only at run time.)"""
    reason = layers.relaxed_where_spec_fixes(layer, args, kwargs)
    if reason is not None and ctx.top_graph is not None and effects.pulls_outside(ctx.top_graph):
        if ctx.refusals is not None:   # in case library code swallows it
            ctx.refusals.append((Reason.UNKNOWN_SHAPE, reason))
        raise Unsupported(Reason.UNKNOWN_SHAPE, reason)


def call_numpy(ctx, callee, args, kwargs):
    """``np.sqrt(self.d)``, ``np.float32(lr)``: NumPy on values the trace knows (Python
    constants and NumPy scalars, guarded where they were read; arrays and lists the call
    made of them) runs now, as eagerly, its result a constant of the graph.  A tensor's
    value only the run has (refused); a relaxed number never gets here (its value is
    needed first, ``scalar_calls.call_with_dynamic_scalars``)."""
    if 'out' in kwargs:
        raise Unsupported(Reason.UNCONVERTED_CALL,
                          'janus does not convert %s(out=...): it writes into an array'
                          % callees.name(callee))
    args, kwargs = guard_library_args(ctx, callee, args, kwargs)
    for value in list(args) + list(kwargs.values()):
        _refuse_unknown_to_numpy(ctx, callee, value)
    return callee(*args, **kwargs)


def _refuse_unknown_to_numpy(ctx, callee, value, depth=0):
    """Refuses an argument of a NumPy function the trace does not know the value of."""
    if arrays.is_stand_in(value):
        raise Unsupported(Reason.NUMPY_IN_GRAPH,
                          'janus does not convert %s() of a NumPy array from outside the call: '
                          'janus feeds the array to the graph, so only the run has its values '
                          '(use the tf.math function on tf.constant(a))' % callees.name(callee))
    if isinstance(value, (tf.Tensor, tf.Variable)):
        raise Unsupported(Reason.NUMPY_IN_GRAPH,
                          'janus does not convert %s() of a tensor: NumPy needs its value, '
                          'which only the graph run has (use the tf.math function)'
                          % callees.name(callee))
    if type(value) in guards.PRIMITIVES or _is_numpy_value(value) or isinstance(value, type):
        return
    if type(value) in (list, tuple) and depth < 8:
        for item in value:
            _refuse_unknown_to_numpy(ctx, callee, item, depth + 1)
        return
    raise Unsupported(Reason.LIBRARY_GETS_OBJECT,
                      'janus does not convert %s() of a %s: NumPy would read it behind the '
                      'guards' % (callees.name(callee), type(value).__name__))


def _is_numpy_value(value):
    """A NumPy scalar, or an array of numbers the call made (an outside array is refused
    where it is read)."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in 'biufc'
    return isinstance(value, (np.number, np.bool_))


def as_eagerly(callee, answer, args, kwargs):
    """A library function whose answer while tracing differs from eager's
    (``whitelist.TRACE_TIME_ONLY``): answered as eager code gets it, or refused."""
    bound = inspect.signature(callee).bind(*args, **kwargs)   # eager's TypeError for bad calls
    bound.apply_defaults()
    if answer is whitelist.TraceTimeOnly.TRUE:
        return True
    if answer is whitelist.TraceTimeOnly.FALSE:
        return False
    value = next(iter(bound.arguments.values()), None)
    if answer is whitelist.TraceTimeOnly.NOT_SYMBOLIC and isinstance(value, tf.Tensor):
        return False   # every tensor in converted code stands for an eager one
    if answer is whitelist.TraceTimeOnly.STATIC_VALUE and isinstance(value, tf.Tensor) \
            and not isinstance(value, guards.EagerTensor):
        return _static_value(value, bound.arguments.get('partial', False))
    if answer is whitelist.TraceTimeOnly.REFUSED:
        raise Unsupported(Reason.UNCONVERTED_CALL, 'janus does not convert calls to %s: %s'
                          % (callees.name(callee), answer.value))
    return callee(*args, **kwargs)   # not about a graph tensor: the same answer


def _static_value(tensor, partial):
    """``tf.get_static_value(t)``: eagerly, always ``t``'s value.  In the trace, the value
    TF derives from the graph's structure (constants, guarded static shapes) is the value
    on every call the graph serves; a value only the run knows refuses."""
    value = tensor_util.constant_value(tensor, partial=partial)
    if value is None or value.dtype == object and any(v is None for v in value.flat):
        raise Unsupported(Reason.NUMPY_IN_GRAPH,
                          'janus does not convert tf.get_static_value() of a tensor whose value '
                          'only the graph run knows (eagerly it is always known)')
    return value[()] if value.ndim == 0 else value   # eager's numpy(): a NumPy scalar
