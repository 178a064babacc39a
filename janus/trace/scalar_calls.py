"""Calls given dynamic scalars: numbers the plan relaxed, modelled in the graph.

Needs a ``TraceContext`` (``trace_context``) whose ``call_user`` is ``calls.call``:
a call rewritten here (a shape packed into a tensor, ids stacked, ``tf.print``'s
ints as tensors) is dispatched again from the start.  ``values/scalars.py`` makes
the scalars; here a call that gets one is computed in the graph
(``scalar_ops.builtin``), handed on to code that sees it as it is (your
functions, printing), or needs the value (``tracing.need``: the trace is redone
with it constant).  A number answers its own builtins (``DynamicScalar.trace_builtin``,
through ``protocol.builtin``): ``isinstance``/``type``, ``abs``, ``round``, ``max``...
"""
import sys

import tensorflow as tf

from janus.library import layers, whitelist
from janus.trace import callees, observe
from janus.values import protocol, scalars
from janus.values.protocol import NOT_MODELLED, graph_number_type, graph_tensor, is_graph_number
from janus.trace.tracing import need


# Builtins that look at the values behind numbers only as Python would (formatting
# after the run, printing): a dynamic scalar passes through them as it is.
_PASS_THROUGH = (print, str, repr, format)


def call_with_dynamic_scalars(ctx, callee, args, kwargs, lineage):
    """A call given dynamic scalars (``values/scalars.py``): Python's number builtins
    and ``math`` computed in the graph, ``isinstance``/``type`` answered from the
    Python type, TF's elementwise functions and ``Variable.assign*`` given the scalar
    (TF converts it as eager converts the number); user functions are inlined and see
    it as it is.  Anything else needs the value (the trace is redone with it constant)."""
    answer = protocol.builtin(callee, args, kwargs)   # ``abs(n)``, ``type(n)``, ``math.cos(n)``
    if answer is not NOT_MODELLED:
        return answer
    if any(callee is c for c in callees.PASSING_ON) and not kwargs \
            and not any(map(is_graph_number, args)):
        return callees.PASS   # ``enumerate(items)``: the numbers are only handed on
    if any(callee is c for c in _PASS_THROUGH) or callees.is_user_code(ctx, callee) \
            or callees.is_str_format(callee) or _stores_numbers(callee, args, kwargs):
        return callees.PASS
    if _hands_numbers_to_user_call(callee, args):
        return callees.PASS   # ``self.model(x, scale=scale)``: your call() gets the number
    if whitelist.is_library(callee) and scalars.library_call_allows(callee, args, kwargs):
        return callees.PASS
    packed = scalars.packed_shape_call(callee, args, kwargs)
    if packed is not None:   # ``tf.reshape(h, (rows, -1))``, ``rows`` a graph input
        return ctx.call_user(callee, *packed[0], **packed[1])
    converted = _numbers_as_ids(callee, args, kwargs)
    if converted is not None:   # ``tf.nn.embedding_lookup(w, [node.word])``
        return ctx.call_user(callee, *converted[0], **converted[1])
    tensor = _number_as_constant(callee, args, kwargs)
    if tensor is not None:   # ``tf.constant(count, tf.float32)``
        return tensor
    printed = _printed_ints(callee, args, kwargs)
    if printed is not None:   # ``tf.print('step', self.step, 'loss', loss)``
        return ctx.call_user(callee, *printed, **kwargs)
    need(lineage, 'calling %s with a number from outside the call' % callees.name(callee))


def _printed_ints(callee, args, kwargs):
    """``tf.print``'s arguments with each dynamic int replaced by its scalar tensor,
    which tf.print prints as it prints the int; None when a float or bool is dynamic
    (a tensor prints ``3.0`` as ``3`` and True as 1) or a number is nested."""
    if callee is not tf.print or scalars.lineage_deep(list(kwargs.values())):
        return None
    if any(graph_number_type(a) not in (None, int) for a in args) \
            or scalars.lineage_deep([a for a in args if not is_graph_number(a)]):
        return None
    # its int64 value (an int32 conversion would check that it fits: a check inside
    # ``if step % 10 == 0:``, a tf.cond that also prints)
    return [graph_tensor(a) if is_graph_number(a) else a for a in args]


def fold_numbers(ctx, callee, items):
    """``sum``/``max``/``min`` of items the call made, some of them dynamic numbers:
    computed in the graph, in Python's order (a ``sum`` of floats from Python 3.12
    on, which compensates its additions, is left to the value)."""
    kinds = [scalars.number_type(item) for item in items]
    if not items or None in kinds or not scalars.holds_dynamic(items):
        return callees.PASS
    if callee is not sum:
        return items[0] if len(items) == 1 else ctx.call_user(callee, *items)
    if sys.version_info >= (3, 12) and float in kinds:
        return callees.PASS
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
    if not args or not is_graph_number(args[0]) or len(args) > 2 \
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
            or not all(scalars.number_type(v) is int for v in value) \
            or not all(-2 ** 31 <= v < 2 ** 31 for v in value if type(v) is int):
        return None
    if callee in (tf.convert_to_tensor, tf.constant) and (len(args) > 1 or kwargs):
        return None   # a dtype asked for: eager's conversion differs
    holder[key] = tf.stack([scalars.to_tensor(v) if is_graph_number(v)
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


def _hands_numbers_to_user_call(callee, args):
    """A Keras layer of yours called with dynamic numbers past its first argument (a
    keyword, or a later positional one): Keras's ``__call__`` hands them on to your
    converted ``call``, which sees them as they are; if Keras itself used one, its
    dunders need the value (the trace is redone with it constant)."""
    return (layers.user_call(callee) is not None
            and not (args and is_graph_number(args[0])))
