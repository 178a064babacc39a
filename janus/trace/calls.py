"""Calls in converted code: what runs, converted, refused or deferred.

Needs a ``TraceContext`` (``trace_context``).  ``call`` dispatches every call
converted code makes: your own Python callees are converted and inlined
(through the converter the tracer handed to the context, so the runtime never
imports the generator), whitelisted builtins and TF/Keras APIs run on guarded
arguments, your Keras layers run their converted ``call`` behind Keras's
``__call__``, methods of outside containers are replayed through the shadow
heap, ``print`` is deferred, and everything else is refused.
"""
import collections
import collections.abc
import contextlib
import functools
import inspect
import sys
import types

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import func_graph, tensor_util

from janus.reasons import Reason
from janus import callables, guards, pytypes
from janus.config import config
from janus.guards import GuardKind
from janus import control
from janus.graph import effects, fallible
from janus.library import layers, whitelist
from janus.recursion import recursion, schema, structures
from janus.trace import access, host_draws, lazy_text, observe
from janus.values import arrays, number_lists, scalar_ops, scalars
from janus.trace.namespace import FunctionNamespace
from janus.trace.printing import _deferred_print
from janus.heap.shadow_heap import Write, WriteKind
from janus.values.shapes import _checked_shape_in
from janus.trace.trace_context import Unsupported
from janus.library.whitelist import captured_by_identity as _captured_by_identity
from janus.trace.tracing import (ChosenMethod, current, current_or_none, need, refuse_unmerged,
                                   writable_context as _writable_context)


def call(__callee, /, *args, **kwargs):
    ctx = current()
    if type(__callee) is ChosenMethod:
        return _call_chosen_method(ctx, __callee, args, kwargs)
    refuse_unmerged(__callee)
    callee, args, kwargs = callables.through_janus(__callee, args, kwargs)   # janus calls janus
    drawn = host_draws.draw(callee, args, kwargs)   # ``self.rng.uniform(0.9, 1.1)``
    if drawn is not None:
        return drawn
    if structures.holds_node(args) or structures.holds_node(kwargs.values()):
        if callee is isinstance and len(args) == 2 and not kwargs \
                and structures.is_node(args[0]) and not structures.holds_node(args[1:]):
            return structures.isinstance_test(args[0], args[1])
        handled = _node_builtin(callee, args, kwargs)
        if handled is not _NOT_HANDLED:
            return handled
        if not _is_user_code(ctx, callee):
            structures.refuse('passing a node of the structure to %s' % _name(callee))
    if not _is_user_code(ctx, callee):   # inlined code meets it where it uses it
        refuse_unmerged(*args, *kwargs.values())
    if any(callee is c for c in (sum, max, min)) and len(args) == 1 and not kwargs:
        if type(args[0]) is types.GeneratorType:
            args = (ctx.provenance.made_result(list(args[0])),)   # taken whole anyway, in order
        if type(args[0]) in (list, tuple) and ctx.provenance.source_of(args[0]) is None:
            folded = _fold_numbers(callee, args[0])   # ``sum(f(c) for c in t)``
            if folded is not _NOT_HANDLED:
                return folded
    lineage = scalars.lineage_deep(list(args) + list(kwargs.values()))
    if lineage or scalars.holds_dynamic(list(args)) or scalars.holds_dynamic(kwargs):
        # A relaxed Python number in the arguments (or one of no outside location: a
        # merged constant, a node's number): modeled, or its value is needed
        handled = _call_with_dynamic_scalars(ctx, callee, args, kwargs, lineage)
        if handled is not _NOT_HANDLED:
            return handled
    _refuse_outside_tape(ctx, callee)
    answer = whitelist.trace_time_only(callee)
    if answer is not None:
        return ctx.provenance.made_result(_as_eagerly(callee, answer, args, kwargs), deep=True)
    if whitelist.is_blocklisted(callee):
        raise Unsupported(Reason.UNCONVERTED_CALL,
                          'janus does not convert calls to %s: it reads or changes TF\'s '
                          'global state, which a graph would do once, when traced'
                          % _name(callee))
    if callee in (getattr, hasattr) and not kwargs and 2 <= len(args) <= 3 \
            and type(args[1]) is str:
        return _attribute_builtin(ctx, callee, *args)
    if callee is type and len(args) == 1 and not kwargs:
        return access.class_of(ctx, args[0])
    if any(callee is c for c in (float, int, bool)) and len(args) == 1 and not kwargs \
            and isinstance(args[0], tf.Tensor) and not isinstance(args[0], guards.EagerTensor):
        return scalars.from_tensor(callee, args[0])   # ``best = float(loss)``
    if _reads_traceback(callee):
        raise Unsupported(Reason.TRACEBACK_READ, 'janus does not convert %s (it reads the '
                          'frames that ran)' % _name(callee))
    if callee is next and 1 <= len(args) <= 2 and not kwargs and _converted_generator(ctx, args[0]):
        # Its code runs here, converted; what it yields keeps its origin (and its end,
        # StopIteration, is eager's).
        return _builtin_exactly(next, args, {})
    if control.datasets.handles_call(callee, args, kwargs):   # iter/enumerate/zip of a dataset
        return ctx.provenance.made_result(control.datasets.call_builtin(callee, args, kwargs))
    if _is_whitelisted_builtin(callee):
        with fallible.made_by_the_user():   # ``sum([a, b])`` of tensors: the user's adds
            return ctx.provenance.made_result(_call_builtin(ctx, callee, args, kwargs))
    if whitelist.is_numpy_function(callee):
        return ctx.provenance.made_result(_call_numpy(ctx, callee, args, kwargs), deep=True)
    if callee is print:
        return _deferred_print(ctx, args, kwargs)
    if whitelist.is_builtin_method(callee):
        return ctx.provenance.made_result(_call_builtin_method(ctx, callee, args, kwargs))
    if isinstance(callee, types.MethodType) and isinstance(callee.__func__, types.FunctionType) \
            and not whitelist.is_library(callee):
        # ``self.helper(x)``, ``m.act(x)`` with ``m.act = scaler.apply``: the method's
        # object has its source (``m.act.__self__``), read and written through it.
        ctx.provenance.of(callee.__self__, 'calling %s' % _name(callee))
        return _inline(ctx, callee.__func__, (callee.__self__,) + args, kwargs, receiver=True)
    if isinstance(callee, types.FunctionType) and callee.__code__ in ctx.code_objects:
        return callee(*args, **kwargs)   # defined in converted code: converted already
    if isinstance(callee, types.FunctionType) and not whitelist.is_library(callee):
        return _inline(ctx, callee, args, kwargs)
    if (whitelist.is_library(callee) or whitelist.is_namedtuple_class(callee)
            or whitelist.is_builtin_exception(callee)):
        return ctx.provenance.made_result(_call_library(ctx, callee, args, kwargs), deep=True)
    call_method = getattr(type(callee), '__call__', None)
    if _is_keras_layer(callee):
        return ctx.provenance.made_result(_call_keras_layer(ctx, callee, args, kwargs), deep=True)
    if isinstance(call_method, types.FunctionType):
        return _inline(ctx, call_method, (callee,) + args, kwargs)
    raise Unsupported(Reason.UNCONVERTED_CALL,
                      'janus does not convert calls to %s; only TF/Keras APIs, whitelisted '
                      'builtins and your own Python functions are converted' % _name(callee))


def _refuse_outside_tape(ctx, callee):
    """A GradientTape from outside the call records eagerly, outside any graph: a
    trace calling its methods would use it up (``tape.gradient`` once) or record
    symbolic tensors on it."""
    tape = getattr(callee, '__self__', None)
    if isinstance(tape, tf.GradientTape) and ctx.provenance.source_of(tape) is not None:
        raise Unsupported(Reason.OUTSIDE_TAPE,
                          'janus does not call %s of a GradientTape made outside the graph'
                          % getattr(callee, '__name__', 'a method'))


_NOT_HANDLED = object()
# Builtins that look at the values behind numbers only as Python would (formatting
# after the run, printing): a dynamic scalar passes through them as it is.
_PASS_THROUGH = (print, str, repr, format)


def _call_with_dynamic_scalars(ctx, callee, args, kwargs, lineage):
    """A call given dynamic scalars (``values/scalars.py``): Python's number builtins
    and ``math`` computed in the graph, ``isinstance``/``type`` answered from the
    Python type, TF's elementwise functions and ``Variable.assign*`` given the scalar
    (TF converts it as eager converts the number); user functions are inlined and see
    it as it is.  Anything else needs the value (the trace is redone with it constant)."""
    if callee in (isinstance, issubclass) and len(args) == 2 and not kwargs \
            and scalars.is_dynamic(args[0]):
        return issubclass(args[0].type, args[1]) if callee is isinstance else callee(*args)
    if callee is type and len(args) == 1 and not kwargs and scalars.is_dynamic(args[0]):
        return args[0].type
    if any(callee is c for c in _PASSING_ON) and not kwargs \
            and not any(scalars.is_dynamic(a) for a in args):
        return _NOT_HANDLED   # ``enumerate(items)``: the numbers are only handed on
    if any(callee is c for c in _PASS_THROUGH) or _is_user_code(ctx, callee) \
            or _is_str_format(callee) or _stores_numbers(callee, args, kwargs):
        return _NOT_HANDLED
    if _hands_numbers_to_user_call(callee, args):
        return _NOT_HANDLED   # ``self.model(x, scale=scale)``: your call() gets the number
    if not kwargs and _is_number_function(callee):
        result = scalar_ops.builtin(callee, list(args), lineage)
        if result is not NotImplemented:
            return result
    elif whitelist.is_library(callee) and scalars.library_call_allows(callee, args, kwargs):
        return _NOT_HANDLED
    packed = scalars.packed_shape_call(callee, args, kwargs)
    if packed is not None:   # ``tf.reshape(h, (rows, -1))``, ``rows`` a graph input
        return call(callee, *packed[0], **packed[1])
    converted = _numbers_as_ids(callee, args, kwargs)
    if converted is not None:   # ``tf.nn.embedding_lookup(w, [node.word])``
        return call(callee, *converted[0], **converted[1])
    tensor = _number_as_constant(callee, args, kwargs)
    if tensor is not None:   # ``tf.constant(count, tf.float32)``
        return tensor
    printed = _printed_ints(callee, args, kwargs)
    if printed is not None:   # ``tf.print('step', self.step, 'loss', loss)``
        return call(callee, *printed, **kwargs)
    need(lineage, 'calling %s with a number from outside the call' % _name(callee))


def _printed_ints(callee, args, kwargs):
    """``tf.print``'s arguments with each dynamic int replaced by its scalar tensor,
    which tf.print prints as it prints the int; None when a float or bool is dynamic
    (a tensor prints ``3.0`` as ``3`` and True as 1) or a number is nested."""
    if callee is not tf.print or scalars.lineage_deep(list(kwargs.values())):
        return None
    if any(scalars.is_dynamic(a) and a.type is not int for a in args) \
            or scalars.lineage_deep([a for a in args if not scalars.is_dynamic(a)]):
        return None
    # its int64 value (an int32 conversion would check that it fits: a check inside
    # ``if step % 10 == 0:``, a tf.cond that also prints)
    return [a.tensor if scalars.is_dynamic(a) else a for a in args]


def _fold_numbers(callee, items):
    """``sum``/``max``/``min`` of items the call made, some of them dynamic numbers:
    computed in the graph, in Python's order (a ``sum`` of floats from Python 3.12
    on, which compensates its additions, is left to the value)."""
    if not items or not any(scalars.is_dynamic(item) for item in items) \
            or not all(scalars.is_dynamic(item) or type(item) in scalars.DTYPES
                       for item in items):
        return _NOT_HANDLED
    if callee is not sum:
        return items[0] if len(items) == 1 else call(callee, *items)
    if sys.version_info >= (3, 12) and any(
            (item.type if scalars.is_dynamic(item) else type(item)) is float for item in items):
        return _NOT_HANDLED
    total = 0
    for item in items:
        total = observe.binop('Add', total, item)
    return total


def _number_as_constant(callee, args, kwargs):
    """``tf.constant(n, dtype)`` / ``tf.convert_to_tensor(n, dtype)`` of one dynamic
    number: the scalar eager's conversion gives (``scalars.to_tensor``); None for
    any other call (a shape, a name: not modelled)."""
    try:
        if callee is not tf.constant and callee is not tf.convert_to_tensor:
            return None
    except TypeError:
        return None
    if not args or not scalars.is_dynamic(args[0]) or len(args) > 2 \
            or set(kwargs) - {'dtype'} or (len(args) == 2 and 'dtype' in kwargs):
        return None
    dtype = args[1] if len(args) == 2 else kwargs.get('dtype')
    return scalars.to_tensor(args[0], dtype)


def _id_arguments():
    """TF functions whose argument (position, keyword) eager converts from a list of
    numbers as data (ids, indices), never as a shape."""
    return {tf.nn.embedding_lookup: (1, 'ids'), tf.gather: (1, 'indices'),
            tf.one_hot: (0, 'indices'), tf.convert_to_tensor: (0, 'value'),
            tf.constant: (0, 'value')}


def _numbers_as_ids(callee, args, kwargs):
    """(args, kwargs) with a flat list of ints holding dynamic scalars at an ids
    argument replaced by the int32 tensor eager converts it to; None otherwise."""
    try:
        position, keyword = _id_arguments().get(callee, (None, None))
    except TypeError:
        return None
    if position is None:
        return None
    args, kwargs = list(args), dict(kwargs)
    holder, key = (args, position) if len(args) > position else (kwargs, keyword)
    value = holder[key] if key in range(len(args)) or key in kwargs else None
    if type(value) is not list or not value or scalars.lineage_deep(
            [v for v in list(args) + list(kwargs.values()) if v is not value]) \
            or not all(type(v) is int or (scalars.is_dynamic(v) and v.type is int)
                       for v in value) \
            or not all(-2 ** 31 <= v < 2 ** 31 for v in value if type(v) is int):
        return None
    if callee in (tf.convert_to_tensor, tf.constant) and (len(args) > 1 or kwargs):
        return None   # a dtype asked for: eager's conversion differs
    holder[key] = tf.stack([scalars.to_tensor(v) if scalars.is_dynamic(v)
                            else tf.constant(v, tf.int32) for v in value])
    return args, kwargs


def _stores_numbers(callee, args, kwargs):
    """``log.append((tag, self.step))``: a list method that only stores its arguments
    (written back after the run as Python numbers, ``graphgen/tracer.py``), never
    hashes, compares or indexes by them."""
    if type(getattr(callee, '__self__', None)) is not list or kwargs:
        return False
    name = getattr(callee, '__name__', None)
    if name == 'insert':
        return len(args) == 2 and not scalars.lineage_deep([args[0]])
    return name in ('append', 'extend') and len(args) == 1


def _is_str_format(callee):
    return isinstance(getattr(callee, '__self__', None), str) and \
        getattr(callee, '__name__', None) == 'format'


def _is_number_function(callee):
    return any(callee is f for f in (float, int, bool, abs, round, max, min, divmod)) or (
        isinstance(callee, types.BuiltinFunctionType)
        and getattr(callee, '__module__', None) == 'math')


# Builtins that iterate over their arguments: given a list node of known length
# (a recursive function's own parameter), they are given its items.
_ITERATING_BUILTINS = (list, tuple, enumerate, reversed, zip, sum, max, min, any, all, sorted,
                       iter, map, filter)


def _node_builtin(callee, args, kwargs):
    """``len(t)``, ``type(t)``, ``sum(t)``... of a node in a recursion; else
    ``_NOT_HANDLED``."""
    if callee is len and len(args) == 1 and not kwargs:
        return structures.length(args[0])
    if callee is type and len(args) == 1 and not kwargs and args[0].static is not None:
        return schema.key_type(args[0].static)
    if any(callee is builtin for builtin in _ITERATING_BUILTINS):
        ctx = current()
        args = [ctx.provenance.made_result(structures.items(a)) if structures.is_node(a) else a
                for a in args]
        return call(callee, *args, **kwargs)
    return _NOT_HANDLED


def _hands_numbers_to_user_call(callee, args):
    """A Keras layer of yours called with dynamic numbers past its first argument (a
    keyword, or a later positional one): Keras's ``__call__`` hands them on to your
    converted ``call``, which sees them as they are; if Keras itself used one, its
    dunders need the value (the trace is redone with it constant)."""
    return (layers.user_call(callee) is not None
            and not (args and scalars.is_dynamic(args[0])))


def _is_user_code(ctx, callee):
    """Calls the converter inlines (they see dynamic scalars as they are)."""
    if isinstance(callee, types.MethodType):
        return isinstance(callee.__func__, types.FunctionType) and not whitelist.is_library(callee)
    if isinstance(callee, types.FunctionType):
        return callee.__code__ in ctx.code_objects or not whitelist.is_library(callee)
    return False


def _as_eagerly(callee, answer, args, kwargs):
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
                          % (_name(callee), answer.value))
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


def _call_numpy(ctx, callee, args, kwargs):
    """``np.sqrt(self.d)``, ``np.float32(lr)``: NumPy on values the trace knows (Python
    constants and NumPy scalars, guarded where they were read; arrays and lists the call
    made of them) runs now, as eagerly, its result a constant of the graph.  A tensor's
    value only the run has (refused); a relaxed number never gets here (its value is
    needed first, ``_call_with_dynamic_scalars``)."""
    if 'out' in kwargs:
        raise Unsupported(Reason.UNCONVERTED_CALL,
                          'janus does not convert %s(out=...): it writes into an array'
                          % _name(callee))
    args, kwargs = _guard_library_args(ctx, callee, args, kwargs)
    for value in list(args) + list(kwargs.values()):
        _refuse_unknown_to_numpy(ctx, callee, value)
    return callee(*args, **kwargs)


def _refuse_unknown_to_numpy(ctx, callee, value, depth=0):
    """Refuses an argument of a NumPy function the trace does not know the value of."""
    if arrays.is_stand_in(value):
        raise Unsupported(Reason.NUMPY_IN_GRAPH,
                          'janus does not convert %s() of a NumPy array from outside the call: '
                          'janus feeds the array to the graph, so only the run has its values '
                          '(use the tf.math function on tf.constant(a))' % _name(callee))
    if isinstance(value, (tf.Tensor, tf.Variable)):
        raise Unsupported(Reason.NUMPY_IN_GRAPH,
                          'janus does not convert %s() of a tensor: NumPy needs its value, '
                          'which only the graph run has (use the tf.math function)'
                          % _name(callee))
    if type(value) in guards.PRIMITIVES or _is_numpy_value(value) or isinstance(value, type):
        return
    if type(value) in (list, tuple) and depth < 8:
        for item in value:
            _refuse_unknown_to_numpy(ctx, callee, item, depth + 1)
        return
    raise Unsupported(Reason.LIBRARY_GETS_OBJECT,
                      'janus does not convert %s() of a %s: NumPy would read it behind the '
                      'guards' % (_name(callee), type(value).__name__))


def _is_numpy_value(value):
    """A NumPy scalar, or an array of numbers the call made (an outside array is refused
    where it is read)."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in 'biufc'
    return isinstance(value, (np.number, np.bool_))


def _attribute_builtin(ctx, callee, obj, name, *default):
    """``getattr(obj, 'name'[, default])`` / ``hasattr(obj, 'name')``: a read through the
    attribute operator (guarded); a missing attribute is guarded to stay missing."""
    if callee is hasattr and default:
        raise TypeError('hasattr expected 2 arguments, got 3')
    try:
        value = access.attr(obj, name)
    except AttributeError:
        source = ctx.provenance.source_of(obj)
        if source is not None:
            ctx.guards.add(GuardKind.HASATTR_MATCH, source, (name, False))
        if callee is hasattr:
            return False
        if default:
            return default[0]
        raise
    return True if callee is hasattr else value


def _converted_generator(ctx, value):
    """Whether ``value`` is a generator the call made from converted code (a generator
    function of yours, a generator expression): ``next`` runs its code in the trace."""
    return (type(value) is types.GeneratorType and value.gi_code in ctx.code_objects
            and ctx.provenance.source_of(value) is None)


def _is_whitelisted_builtin(callee):
    try:
        return callee in whitelist.BUILTINS
    except TypeError:  # unhashable callee
        return False


def _name(callee):
    name = getattr(callee, '__qualname__', None) or getattr(callee, '__name__', None)
    return repr(name) if name else 'a %s object' % type(callee).__name__


def _is_keras_layer(obj):
    return any(whitelist.in_package(k.__module__ or '', whitelist.LIBRARY_PREFIXES)
               for k in type(obj).__mro__[1:])


def _call_keras_layer(ctx, layer, args, kwargs):
    """Your own Keras layer/model: Keras's __call__ (build, training flag, masks) runs
    as usual, and the ``call`` it dispatches to is your converted ``call``."""
    _refuse_relaxed_input(ctx, layer, args, kwargs)
    call = layers.user_call(layer)
    if call is None:
        return layer(*args, **kwargs)   # e.g. a Sequential subclass without its own call
    if any(c.fn.__code__ is call.__code__ for c in ctx.stack):
        raise Unsupported(Reason.RECURSION,
                          'janus does not convert recursive calls (%s)' % call.__qualname__)
    converted = ctx.convert(call)
    ctx.guard_function(call)
    ctx.register_converted(call.__code__, converted)

    def converted_call(*call_args, **call_kwargs):
        # What Keras hands your call (the inputs as you passed them, or its own copies),
        # bound as Python binds them (``training``/``mask`` where ``call`` takes them):
        # the converted function has no defaults.
        call_args = [ctx.provenance.made_result(v, deep=True) for v in call_args]
        call_kwargs = {k: ctx.provenance.made_result(v, deep=True) for k, v in call_kwargs.items()}
        bound = _bound(ctx, call, (layer,) + tuple(call_args), call_kwargs)
        ctx.stack.append(converted)
        try:
            return converted.py_fn(*bound.args, **bound.kwargs)
        finally:
            ctx.stack.pop()
    with layers.calling(layer, converted_call):
        return layer(*args, **kwargs)


def _refuse_relaxed_input(ctx, layer, args, kwargs):
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


def _guard_library_args(ctx, callee, args, kwargs):
    """Checks and guards what library code gets; returns (args, kwargs) with outside
    containers replaced by copies whose tensors are re-read every run, and your own
    functions (``tf.map_fn(fn, x)``, ``tf.cond(p, f, g)``) replaced by their converted
    versions, run as a tensor-dependent region (a branch or loop body TF traces once)."""
    what = 'an argument of %s' % (_name(callee) if callee is not None else 'a builtin')

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
        if not _captured_by_identity(value):
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
                    result = call(fn, *args, **kwargs)
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


def _call_builtin(ctx, callee, args, kwargs):
    if callee not in _READS_NO_ITEMS and any(map(observe.is_graph_ragged, args)):
        # ``list(rt)``, ``sum(rt)``: Python would index the rows until an IndexError
        # the graph never raises.
        args = tuple(observe.ragged_rows(a, 'iterating') if observe.is_graph_ragged(a) else a
                     for a in args)
    if callee in _PASSING_ON and not kwargs and any(map(arrays.is_stand_in, args)):
        # ``zip(self.heads, MASKS)``: a 2-d array hands on its rows, views a[i].
        args = tuple(arrays.rows(a, '%s() of' % callee.__name__) if arrays.is_stand_in(a)
                     else a for a in args)
    values = list(args) + list(kwargs.values())
    if any(map(arrays.is_stand_in, values)) or (
            callee not in _PASSING_ON + (len, isinstance, issubclass)
            and arrays.holds_stand_in(values)):   # ``sum([a, b])`` would add the arrays
        return _builtin_of_array(callee, args, kwargs)
    if callee is isinstance and len(args) == 2 and not kwargs and isinstance(args[0], tf.Tensor):
        return issubclass(guards.EagerTensor, args[1])   # a graph tensor stands for an eager one
    if callee in (isinstance, issubclass) and len(args) == 2 and not kwargs:
        # Reads only types: guarded by TYPE_MATCH/ID_MATCH where read; the classes of a
        # tuple from outside (``isinstance(v, self.kinds)``) are read by C: guarded here.
        return callee(args[0], observe.plain_deep(ctx, args[1]))
    if callee in (str, repr, format) and args and not kwargs:
        value = observe.plain_deep(ctx, args[0])
        if lazy_text.needs_run_values(value):
            return lazy_text.text_of(callee, value, *args[1:])   # formatted after the run
    observe.refuse_user_dunders(callee, list(args) + list(kwargs.values()))
    if callee is len and len(args) == 1 and not kwargs and _static_length(args[0]) is not None:
        return _static_length(args[0])
    if callee in (len, bool) and len(args) == 1 and not kwargs \
            and ctx.provenance.source_of(args[0]) is not None and pytypes.observes(args[0], 'len'):
        return observe.size_of(callee, args[0])   # one O(1) guard, not one per item
    if callee in _ORDER_FREE and len(args) == 1 and not kwargs and pytypes.is_set(args[0]) \
            and ctx.provenance.source_of(args[0]) is not None:
        items = ctx.set_contents(args[0])   # guarded whole: the result has no order to get wrong
        if callee is sum and not all(type(item) in (int, bool) for item in items):
            raise Unsupported(Reason.SET_ORDER,
                              'janus does not convert sum() of a set of floats from outside '
                              'the call (the result depends on the set\'s order)')
        return callee(items)
    if callee in whitelist.KEYED_BUILTINS and kwargs:
        raise Unsupported(Reason.BUILTIN_ARGUMENTS,
                          'janus does not convert %s() with key=/default=' % callee.__name__)
    if callee in _PASSING_ON and not kwargs:
        # The items are handed on as they are (the loop or the unpacking that takes
        # them guards what it reads): the items themselves, not copies.
        return callee(*[_items_of(ctx, callee, v) for v in args])
    args, kwargs = _guard_library_args(ctx, callee, args, kwargs)
    return _builtin_on_guarded(callee, args, kwargs)


def _builtin_on_guarded(callee, args, kwargs):
    """A builtin on values guarded or made by the call (``int(s)``, ``d.pop(k)``): on
    Python's own values, what its own code raises eager raises there."""
    if pytypes.builtin_values_only(list(args) + list(kwargs.values())
                                   + [getattr(callee, '__self__', None)]):
        return _builtin_exactly(callee, args, kwargs)
    return callee(*args, **kwargs)


@control.exceptions.raises_for_user
def _builtin_exactly(callee, args, kwargs):
    return callee(*args, **kwargs)


def _reads_traceback(callee):
    """``traceback.format_exc()``, ``sys.exc_info()``, ``sys.exception()``: the frames of a
    trace (or of a graph break's skeleton) are not eager's."""
    return (callee is sys.exc_info or callee is getattr(sys, 'exception', None)
            or whitelist.module_of(callee) == 'traceback')


_READS_NO_ITEMS = (isinstance, issubclass, type, id, len, repr, str, format, hash, callable,
                   getattr, hasattr)


def _static_length(value):
    """``len()`` of a graph tensor whose first dimension the graph knows (an argument's
    is guarded by its shape; TF's shape inference never gets a known one wrong), or None."""
    if isinstance(value, tf.Tensor) and not hasattr(value, 'numpy') \
            and value.shape.rank and value.shape[0] is not None:
        return int(value.shape[0])
    return None


def _builtin_of_array(callee, args, kwargs):
    """A builtin given an outside NumPy array's stand-in: ``isinstance``/``type``
    answered for ``np.ndarray`` (its type is guarded), ``len`` its first dimension;
    anything else would need NumPy's values (refused)."""
    if callee in (isinstance, issubclass) and len(args) == 2 and not kwargs \
            and arrays.is_stand_in(args[0]) and not arrays.holds_stand_in(args[1]):
        return issubclass(arrays.NDARRAY, args[1]) if callee is isinstance else callee(*args)
    if callee is len and len(args) == 1 and not kwargs and arrays.is_stand_in(args[0]):
        return arrays.length(args[0])
    arrays.refuse_use('%s() of' % getattr(callee, '__name__', 'a builtin'))


# Builtins whose result from a set does not depend on its order (its items are
# distinct constants: sorting them has no ties).
_ORDER_FREE = (sorted, min, max, any, all, sum)

# Builtins that hand their arguments' items on without looking at them.
_PASSING_ON = (zip, enumerate, reversed, list, tuple)


def _items_of(ctx, callee, value):
    """An argument of a builtin in ``_PASSING_ON``: an outside container's view
    (``TraceContext.view``; a set refuses), a container of the call's own as it is."""
    source = ctx.provenance.source_of(value)
    model = pytypes.model_of(value)
    if source is not None and type(value) is list and callee in (zip, enumerate):
        return control.outside_iterators.list_items(ctx, value)   # read live, as eagerly
    if source is not None and model is not None and model.container:
        return ctx.view(value)
    if source is not None and callee is not reversed \
            and control.outside_iterators.is_sequence_iterator(value):
        # ``enumerate(self.it)``: pulled item by item, as eagerly (a break stops it).
        return control.outside_iterators.outside_items(ctx, value, source)
    if source is None and not isinstance(value, lazy_text.LazyText):
        ctx.provenance.of(value, 'an argument of %s' % _name(callee))
        viewed = ctx.provenance.viewed_container(value)
        if viewed is not None and callee in (zip, enumerate):   # ``enumerate(d.items())``
            return control.outside_iterators.unchanged_while_iterated(ctx, viewed, list(value))
        return value
    return _guard_library_args(ctx, callee, [value], {})[0][0]


# Methods that read every item of their arguments (not keep the argument itself).
_CONTENT_READING_METHODS = frozenset((
    'extend', 'extendleft', 'update', 'difference_update', 'join', 'format', 'format_map',
    'union', 'intersection', 'difference', 'symmetric_difference', 'issubset', 'issuperset',
    'isdisjoint', 'startswith', 'endswith'))


_DICT_VIEWS = frozenset(('keys', 'values', 'items'))

# Read-only container methods that give items out without looking inside them.
_HANDING_OUT = frozenset(('get', 'items', 'keys', 'values', 'copy', '__getitem__'))


def _call_builtin_method(ctx, callee, args, kwargs):
    owner = callee.__self__
    source = ctx.provenance.source_of(owner)
    if isinstance(owner, (str, bytes)) and any(lazy_text.needs_run_values(v)
                                               for v in list(args) + list(kwargs.values())):
        if _is_str_format(callee) and not lazy_text.holds_tensor(list(args) + list(kwargs.values())):
            # Numbers from outside, tried out on extreme values (lazy_text.checked_text);
            # a tensor's value could make the format raise after the run: refused.
            plain = (ctx.provenance.made([observe.plain_deep(ctx, v) for v in args]),
                     ctx.provenance.made({k: observe.plain_deep(ctx, v)
                                          for k, v in kwargs.items()}))
            return lazy_text.checked_text(lazy_text.LazyText([(plain, 'format', owner)]))
        raise Unsupported(Reason.FORMATTING,
                          'janus does not convert str.%s() of a graph value; use an f-string'
                          % callee.__name__)
    if callee.__name__ in ('extend', 'update') and len(args) == 1 and not kwargs \
            and isinstance(args[0], (list, tuple, dict)):
        # ``parts.extend(self.parts)``: the items themselves, each read guarded.
        args = [ctx.view(args[0]) if ctx.provenance.source_of(args[0]) is not None
                else _items_of(ctx, callee, args[0])]
    elif callee.__name__ in _CONTENT_READING_METHODS:
        # ``'/'.join(self.names)``: the method reads the outside argument's items,
        # so it gets the guarded contents.
        args = [observe.plain_deep(ctx, v) for v in args]
    if source is None:
        ctx.provenance.of(owner, '%s.%s()' % (type(owner).__name__, callee.__name__))
        return _builtin_on_guarded(callee, args, kwargs)   # the call's own container
    model, name = pytypes.model_of(owner), callee.__name__
    if name in model.reads:
        # On the contents as this point of the call sees them (an item written earlier
        # in the call included), tensors re-read every run; a set's guarded whole;
        # methods that hand items out (``d.values()``, ``d.get(k)``) give the items
        # themselves.
        if model.kind is pytypes.Kind.SET:
            contents = ctx.set_contents(owner)
        elif name in _HANDING_OUT:
            contents = ctx.view(owner)
        else:
            contents = ctx.contents(owner)
        result = getattr(contents, name)(*args, **kwargs)
        if name in _DICT_VIEWS and model.kind is pytypes.Kind.DICT:
            ctx.provenance.note_view(result, owner)   # a loop over it must see the dict unchanged
        return result
    if name == 'update' and kwargs and model.kind is pytypes.Kind.DICT and len(args) <= 1:
        # d.update(b=t): one mapping, same order
        args, kwargs = [ctx.provenance.made(dict(*args, **kwargs))], {}
    if name not in model.changes or kwargs:
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          'janus does not convert %s.%s() on a %s from outside the call'
                          % (type(owner).__name__, name, type(owner).__name__))
    args = _replayable(model, name, args)
    # Replayed on the real object after a successful run (these methods return None,
    # so nothing in the trace depends on the object's new state).
    ctx = _writable_context('a %s (%s)' % (type(owner).__name__, name))
    _try_replay(model, owner, name, args)
    ctx.heap.change(owner, name, args)
    ctx.heap.writes.append(Write(WriteKind.CALL, source, name, ctx.provenance.made(list(args)),
                                 None))
    return None


def _call_chosen_method(ctx, method, args, kwargs):
    """``bucket.append(x)`` on one of two outside containers a tensor-dependent ``if``
    chose (``tracing.Chosen``): on each candidate, the write under its side's
    condition.  What each then holds depends on the run: reading it again in the
    call is refused (appending more is fine)."""
    chosen = method.chosen
    refuse_unmerged(*args, *kwargs.values())
    if method.name == 'update' and len(args) <= 1:
        # d.update(b=t): one mapping, same order
        args, kwargs = [ctx.provenance.made(dict(*args, **kwargs))], {}
    if kwargs or tf.compat.v1.get_default_graph() is not chosen.graph:
        chosen.refuse()
    if method.name in _CONTENT_READING_METHODS:
        args = [observe.plain_deep(ctx, v) for v in args]
    if scalars.lineage_deep(list(args)):
        need(scalars.lineage_deep(list(args)), 'storing a number into one of two '
                     'containers chosen by a tensor-dependent if', Reason.CHOSEN_CONTAINER)
    ctx = _writable_context('a %s (%s)' % (type(chosen.candidates[0][0]).__name__, method.name))
    for owner, condition in chosen.candidates:
        ctx.heap.change(owner, method.name, args)
        ctx.heap.poison(id(owner), Reason.CHOSEN_CONTAINER,
                        '%s: %r is changed in place (%s) through a name a '
                        'tensor-dependent if chose, so what it holds depends on the run; janus '
                        'does not read it again in the same call (appending more is fine)'
                        % (chosen.where, ctx.provenance.source_of(owner), method.name))
        ctx.heap.writes.append(Write(WriteKind.CALL, ctx.provenance.source_of(owner), method.name,
                                     ctx.provenance.made(list(args)), None, condition))
    return None


def _replayable(model, name, args):
    """The arguments of a change to an outside set or deque, as the write-back will
    pass them: it must do there what it did in the trace.  A set gets constants (a
    tensor is unhashable eagerly; a NaN made per call is a new item every call);
    iterables are data (lists, tuples, dicts, strings, a set of at most one item:
    the order a set's items are added in shapes its order), not iterators the
    trace used up."""
    if model.kind not in (pytypes.Kind.SET, pytypes.Kind.DEQUE):
        return args
    if name in ('add', 'discard', 'append', 'appendleft'):
        items = list(args)
    else:
        if not all(type(arg) in (list, tuple, dict, str, collections.deque)
                   or type(arg) in (set, frozenset) and len(arg) <= 1 for arg in args):
            raise Unsupported(Reason.OUTSIDE_VALUE,
                              'janus converts %s.%s() of lists, tuples, dicts, strings and '
                              'one-item sets only' % (model.base.__name__, name))
        args = [tuple(arg) if type(arg) in (set, frozenset) else arg for arg in args]
        items = [item for arg in args for item in arg]
    if model.kind is pytypes.Kind.SET and not all(pytypes.is_constant(item) and item == item
                                                  for item in items):
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          'janus converts adding Python constants (not NaN) to a set from '
                          'outside the call only')
    return args


def _try_replay(model, owner, method, args):
    """Runs ``method`` with ``args`` on an empty list or dict: what Python raises for
    these arguments (``extend(3)``, ``insert('a', x)``, ``update([1])``) is raised
    at trace time, so the call runs imperatively and raises at that line, never at
    write-back after the graph changed state.  The item ``append``/``insert`` store
    is not looked at; a graph tensor is not iterated in the trace (that would add
    ops): ``extend`` needs it to have a first dimension."""
    if method == 'append':
        return
    if method == 'insert':
        args = list(args[:1]) + [None] * (len(args) - 1)
    elif len(args) == 1 and isinstance(args[0], tf.Tensor) \
            and not isinstance(args[0], guards.EagerTensor):
        if method != 'extend' or not args[0].shape.rank:
            raise Unsupported(Reason.UNKNOWN_SHAPE,
                              'janus does not convert %s.%s() of a graph tensor of %s'
                              % (type(owner).__name__, method, 'unknown rank or a scalar'
                                 if method == 'extend' else 'any shape'))
        return
    if any(isinstance(a, collections.abc.Iterator) for a in args):
        return   # running it would consume what the write-back replays
    scratch = {pytypes.Kind.DICT: dict, pytypes.Kind.SET: set,
               pytypes.Kind.DEQUE: collections.deque}.get(model.kind, list)()
    try:
        getattr(scratch, method)(*args)
    except Unsupported:
        raise
    except Exception as e:  # noqa: BLE001 - Python rejects these arguments
        raise Unsupported(Reason.PYTHON_RAISES,
                          'janus does not convert %s.%s() with these arguments: Python raises '
                          '%s (%s)' % (type(owner).__name__, method, type(e).__name__, e)) from None


def _call_library(ctx, callee, args, kwargs):
    layers.refuse_lazy_build(callee)   # a Keras optimizer's first apply builds it: not in a trace
    _refuse_relaxed_input(ctx, callee, args, kwargs)
    shape = _checked_shape_in(list(args) + list(kwargs.values()))
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
    args, kwargs = _guard_library_args(ctx, callee, args, kwargs)
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
            if any(isinstance(v, control.TensorList) for v in list(args) + list(kwargs.values())):
                return _call_with_tensor_lists(callee, args, kwargs)
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
                              % (_name(callee), value.shape))


def _tensor_list_functions():
    """Library functions whose list argument a TensorList stands in for, and how."""
    stacked = lambda t: t.stacked()  # noqa: E731
    table = {tf.stack: stacked, tf.convert_to_tensor: stacked,
             tf.concat: lambda t: t.array.concat(),
             tf.add_n: lambda t: tf.reduce_sum(t.stacked(), axis=0)}
    for name in ('reduce_sum', 'reduce_mean', 'reduce_max', 'reduce_min', 'reduce_prod',
                 'reduce_all', 'reduce_any', 'reduce_logsumexp'):
        table[getattr(tf, name, None) or getattr(tf.math, name)] = stacked
    return table


def _call_with_tensor_lists(callee, args, kwargs):
    table = _tensor_list_functions()
    lists = [v for v in list(args) + list(kwargs.values()) if isinstance(v, control.TensorList)]
    convert = table.get(callee) if args and isinstance(args[0], control.TensorList) else None
    axis = kwargs.get('axis', args[1] if len(args) > 1 else 0)
    if convert is None or len(lists) != 1 or (callee is tf.concat and axis != 0):
        raise Unsupported(Reason.GROWN_LIST,
                          '%s: janus supports tf.stack, tf.concat (axis 0), tf.add_n and '
                          'tf.reduce_* of a list grown in a tensor-dependent loop, not %s'
                          % (lists[0].where, _name(callee)))
    value = convert(args[0])
    if callee is tf.stack and axis != 0:
        value = _move_leading_axis(value, axis, lists[0].where)
    if callee in (tf.stack, tf.concat, tf.add_n, tf.convert_to_tensor):
        return value
    return callee(value, *args[1:], **kwargs)


def _move_leading_axis(stacked, axis, where):
    """``tf.stack(items, axis)`` from the items stacked along axis 0."""
    rank = stacked.shape.rank
    if rank is None or not isinstance(axis, int) or not -rank <= axis < rank:
        raise Unsupported(Reason.GROWN_LIST,
                          '%s: tf.stack(axis=%r) of a list grown in a tensor-dependent loop '
                          'needs a static axis within the items\' rank' % (where, axis))
    axis %= rank
    return tf.transpose(stacked, list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank)))


def _inline(ctx, fn, args, kwargs, receiver=False):
    """Inlines a user Python callee by tracing its converted version; a recursion over
    Python objects becomes a recursive graph function instead (``recursion.py``)."""
    whitelist.refuse_stateful_stdlib(fn)
    building = recursion.active(ctx, fn)
    if building is not None:   # a recursive call inside that function's own graph
        return recursion.self_call(ctx, building.build, args, kwargs, receiver)
    depth = sum(c.fn.__code__ is fn.__code__ for c in ctx.stack)   # equal code: recursion
    # The outermost call over objects (or, when the janus function itself recurses,
    # its first recursive call: the levels above stay inlined).
    if (depth == 0 or not ctx.recursion.active) and recursion.over_objects(
            fn, args, kwargs, receiver):
        return recursion.call(ctx, fn, args, kwargs, receiver,
                              lambda args, kwargs: _run_inlined(ctx, fn, args, kwargs, 0))
    # A method's own object (``self.power(m, n // 2)``) decides nothing by itself.
    _refuse_recursion(ctx, fn, depth, list(args[receiver:]) + list(kwargs.values()))
    return _run_inlined(ctx, fn, args, kwargs, depth)


def _run_inlined(ctx, fn, args, kwargs, depth):
    converted = ctx.convert(fn)
    ctx.guard_function(fn)
    bound = _bound(ctx, fn, args, kwargs)
    ctx.register_converted(fn.__code__, converted)
    root = ctx.provenance.source_of(fn)
    py_fn = converted.bind(FunctionNamespace(fn, root)) if root else converted.py_fn
    ctx.stack.append(converted)
    if depth == 0:
        ctx.recursion.roots[fn.__code__] = ctx.region_depth
    try:
        return py_fn(*bound.args, **bound.kwargs)
    finally:
        ctx.stack.pop()
        if depth == 0:
            ctx.recursion.roots.pop(fn.__code__, None)


def _refuse_recursion(ctx, fn, depth, args):
    """A recursive call is inlined (unrolled) when Python numbers decide it (a matrix
    power's exponent): its arguments are tensors and Python constants (a relaxed
    number is specialized again, ``tracing.need``: a graph per value), at most
    ``config.max_recursion_unroll`` deep, and never through a tensor-dependent branch
    or loop entered since the recursion began (there only the run knows the depth).
    A recursion over objects or containers (a tree of ``Node`` objects) is refused:
    unrolled, it would be one graph per structure, and most structures come once."""
    if depth == 0:
        return
    lineage = scalars.lineage_of(*args)
    if lineage:   # the numbers deciding the recursion: specialized, a graph per value
        need(lineage, 'a recursive call of %s' % fn.__qualname__, Reason.RECURSION)
    if not all(isinstance(a, tf.Tensor) or pytypes.is_constant(a) for a in args):
        raise Unsupported(Reason.RECURSION,
                          'janus does not convert recursive calls (%s) over objects or '
                          'containers: unrolled, each structure would be a graph of its own'
                          % fn.__qualname__)
    if ctx.region_depth > ctx.recursion.roots.get(fn.__code__, 0):
        raise Unsupported(Reason.RECURSION,
                          'janus does not unroll a recursive call of %s under a tensor-dependent '
                          'condition or loop (only the run knows how deep it goes)'
                          % fn.__qualname__)
    if depth > config.max_recursion_unroll:
        raise Unsupported(Reason.RECURSION,
                          'janus inlines a recursion at most %d calls deep '
                          '(janus.config.max_recursion_unroll); %s recursed deeper'
                          % (config.max_recursion_unroll, fn.__qualname__))


def _bound(ctx, fn, args, kwargs):
    """``fn``'s parameters bound to a call's arguments as Python binds them, defaults
    included: a converted function has none of its own (``generator._as_function_def``),
    so every caller of one passes all of its parameters."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    _apply_defaults(ctx, fn, bound)
    return bound


def _apply_defaults(ctx, fn, bound):
    """Fills in defaults as outside objects: ``def helper(x, seen=[])`` appends to the
    function's one default list through the shadow heap, on every run."""
    for name, parameter in bound.signature.parameters.items():
        if name in bound.arguments or parameter.default is inspect.Parameter.empty:
            continue
        bound.arguments[name] = ctx.register_default(fn, name, parameter.default)
    bound.apply_defaults()   # *args / **kwargs left empty
