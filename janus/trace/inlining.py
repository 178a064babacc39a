"""Your Python callees in converted code: converted, then traced in place (inlined).

Needs a ``TraceContext`` (``trace_context``) with the converter the tracer handed
it (``TraceContext.convert``; the runtime never imports the generator).  A
function or method of yours runs its converted version on the caller's graph; a
recursion over Python objects becomes a recursive graph function
(``recursion/recursion.py``), one Python numbers decide is unrolled; your Keras
layer runs its converted ``call`` behind Keras's own ``__call__``.
"""
import inspect

import tensorflow as tf

from janus.reasons import Reason
from janus import pytypes
from janus.config import config
from janus.library import layers, whitelist
from janus.recursion import recursion
from janus.trace import library_calls
from janus.values import scalars
from janus.trace.namespace import FunctionNamespace
from janus.trace.trace_context import Unsupported
from janus.trace.tracing import need


def inline(ctx, fn, args, kwargs, receiver=False):
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
    """Traces ``fn``'s converted version in place, on the caller's graph, its parameters
    bound as Python binds them (``depth``: how many of its frames are active already)."""
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


def call_keras_layer(ctx, layer, args, kwargs):
    """Your own Keras layer/model: Keras's __call__ (build, training flag, masks) runs
    as usual, and the ``call`` it dispatches to is your converted ``call``."""
    library_calls.refuse_relaxed_input(ctx, layer, args, kwargs)
    layers.refuse_first_call_in_region(layer, ctx.region_depth)
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
