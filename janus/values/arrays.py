"""NumPy arrays from outside the call: graph inputs fed on every run, and the stand-in
converted code holds for one while traced.

Needs nothing run before it (``call_signature`` and ``trace_context`` make stand-ins).
A NumPy ndarray of numbers passed as an argument (``call_signature.ArrayNode``) or
read from an object, a container or a global (``shadow_heap.hoist_array``) is a graph
input the run feeds from where the array lives *now* (an in-place write between
calls is seen), guarded by type, dtype and shape (``ARRAY_MATCH``; a dimension relaxed
after a shape miss is ``None``, any size, as for tensors).  The trace
sees an ``ArrayStandIn``: what janus models of the array, exactly as NumPy and TF
treat an ndarray eagerly, and a refusal (``Unsupported``, so the statement runs in
Python, a graph break) for everything else:

* conversion to a tensor (``tf.constant``, ``tf.convert_to_tensor``, ``tf.cast``,
  an operand of a TF op, a Keras layer's input): a conversion function registered
  with TF (``conversion``), so a requested or preferred dtype is honoured as TF
  honours it for an ndarray (a cast NumPy and TF's Cast do alike; others refuse);
* ``shape``, ``dtype``, ``ndim``, ``size``, ``itemsize``, ``nbytes``, ``len``:
  static values (the shape is guarded).  A dimension relaxed after a shape miss
  (``None`` in the stand-in's ``shape``: any size at run time) is never answered
  with ``None``: reading it refuses (UNKNOWN_SHAPE), so janus builds a graph with
  the call's exact shapes instead, as for a tensor's unknown static shape;
* an operator with a tensor on the other side: NumPy defers to the tensor
  (``__array_priority__``), so the tensor's own operator, reflected where the array
  is on the left (``ArrayStandIn.trace_binary``);
* basic indexing (ints, slices, ``None``, ``...``): a view, itself a stand-in;
  returned or stored, the same index of the array re-read after the run;
* iteration of an array of two or more dimensions (a ``for``, unpacking, ``zip``,
  ``enumerate``, ``list``...): its rows, views made by ``a[i]`` (the number of
  rows is guarded by the shape; a row's values are fed, never read);
* returned or stored: the very ndarray (``templates.FromSource``).

NumPy on it (arithmetic with anything but a tensor, NumPy functions, methods,
truth, iteration of a 1-d array (its items are NumPy scalars), item writes, in-place
operators) refuses.
"""
from __future__ import annotations
import inspect
import math
import typing

import numpy as np
import tensorflow as tf

from janus.errors import Unsupported
from janus.graph import fallible
from janus.reasons import Reason
from janus.trace.tracing import current_or_none
from janus.values.protocol import NOT_MODELLED, Outside, StandIn, ViewOf

_NUMERIC = 'biuf'
NDARRAY = np.ndarray


def is_numeric_array(value: typing.Any) -> bool:
    """An ndarray janus feeds to a graph: exactly ``np.ndarray``, of numbers or bools
    in native byte order."""
    return (type(value) is np.ndarray and value.dtype.kind in _NUMERIC
            and value.dtype.isnative)


def is_stand_in(value: typing.Any) -> bool:
    return type(value) is ArrayStandIn


def feed(array: np.ndarray) -> tf.Tensor:
    """The eager tensor a run feeds for ``array``: a copy of its values now (TF's
    conversion copies, as eager's ``tf.constant(array)`` does)."""
    return tf.constant(array)


def refuse_use(what: str) -> typing.NoReturn:
    """Refuses ``what`` on a stand-in (NUMPY_ARRAY): the statement runs in Python."""
    raise Unsupported(Reason.NUMPY_ARRAY,
                      'janus does not convert %s a NumPy array from outside the call (NumPy '
                      'would need its values, which only the run has)' % what)


def refuse_unknown(value: ArrayStandIn, what: str) -> typing.NoReturn:
    """Refuses reading ``what`` of a stand-in whose shape has a relaxed dimension
    (UNKNOWN_SHAPE: the build traces again with the call's exact shapes); recorded on
    the trace too, in case library code swallows the exception."""
    reason = ('the code reads %s of a NumPy array %s%s whose dimensions are only known '
              'at run time in a graph with relaxed shapes' % (what, value.dtype,
                                                             list(value.shape)))
    ctx = current_or_none()
    if ctx is not None and ctx.refusals is not None:
        ctx.refusals.append((Reason.UNKNOWN_SHAPE, reason))
    raise Unsupported(Reason.UNKNOWN_SHAPE, reason)


def known(shape: typing.Sequence[int | None]) -> bool:
    return None not in shape


class ArrayStandIn(StandIn):
    """What converted code holds for an outside ndarray while traced: ``tensor`` (a
    graph tensor of the array's dtype and shape), ``dtype``/``shape`` (NumPy's, the
    guarded ones; ``None`` where a dimension is relaxed, for janus and library code
    only: user code reads them through ``trace_attribute`` and ``length``), and for a
    view made by basic indexing ``base`` (the stand-in it indexes) and ``key`` (the
    index)."""

    __slots__ = ('tensor', 'dtype', 'shape', 'base', 'key')

    def __init__(self, tensor: tf.Tensor, dtype: np.dtype, shape: tuple,
                 base: ArrayStandIn | None = None, key: typing.Any = None) -> None:
        self.tensor, self.dtype, self.shape = tensor, dtype, tuple(shape)
        self.base, self.key = base, key

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int | None:
        return math.prod(self.shape) if known(self.shape) else None

    def __repr__(self) -> str:
        return '<janus stand-in for a NumPy array %s%s>' % (self.dtype, list(self.shape))

    # The protocol (values/protocol.py): what converted code may do with it.
    RANK = 1   # where an array meets a node (RANK 2) in one operation, the node answers

    def materialize(self) -> Outside | ViewOf:
        """Returned or stored: the very ndarray, re-read after the run; a view, the same
        index of what its base gives back."""
        return Outside() if self.base is None else ViewOf(self.base, self.key)

    def trace_attribute(self, name: str) -> typing.Any:
        """``a.shape``, ``a.dtype``...: what the guards fix; anything else refuses.  What
        depends on a relaxed dimension refuses (UNKNOWN_SHAPE)."""
        if name in ('shape', 'size', 'nbytes') and not known(self.shape):
            refuse_unknown(self, '.%s' % name)
        if name in ('shape', 'dtype', 'ndim', 'size'):
            return getattr(self, name)
        if name == 'itemsize':
            return self.dtype.itemsize
        if name == 'nbytes':
            return self.size * self.dtype.itemsize   # type: ignore[operator]  # known above
        refuse_use('reading .%s of' % name)

    def trace_set_attribute(self, name: str, value: typing.Any) -> typing.NoReturn:
        refuse_use('setting .%s of' % name)

    def trace_set_item(self, container: typing.Any, key: typing.Any,
                       value: typing.Any) -> typing.NoReturn:
        refuse_use('writing an item of (or indexing with)')

    def trace_class(self) -> type:
        return NDARRAY   # an outside NumPy array's type is guarded (ARRAY_MATCH)

    def trace_item(self, key: typing.Any) -> ArrayStandIn:
        return _index(self, key)   # basic indexing: a view, itself a stand-in

    def trace_key(self, container: typing.Any) -> typing.NoReturn:
        refuse_use('indexing with')

    def trace_truth(self) -> typing.NoReturn:
        refuse_use('the truth value of')   # NumPy's, of the run's values

    def trace_iterate(self, what: str) -> tuple[ArrayStandIn, ...]:
        return rows(self, what)

    def trace_unpack(self, count: int | None,
                     nested: typing.Callable[[tuple], typing.Any]) -> tuple[ArrayStandIn, ...]:
        return rows(self, 'unpacking')   # each row a stand-in Python unpacks (refused)

    def trace_contains(self, container: typing.Any, key: typing.Any) -> typing.NoReturn:
        refuse_use('`in` with')

    def trace_unary(self, op: str) -> typing.Any:
        if op == 'Not':   # ``not array``: its truth decides (``trace_truth``)
            return NOT_MODELLED
        refuse_use('a unary operator on')

    def trace_in_place(self, target: typing.Any, value: typing.Any, symbol: str) -> typing.Any:
        """``target op= value``: refused, unless a tensor or variable is the target
        (then ``target op value``: the tensor's operator, ``trace_binary``)."""
        if target is self or not isinstance(target, (tf.Tensor, tf.Variable)):
            refuse_use("'%s=' (in place) with" % symbol)
        return NOT_MODELLED

    def trace_binary(self, left: typing.Any, right: typing.Any, forward: str, reflected: str,
                     symbol: str) -> typing.Any:
        """``left <op> right`` (an operator or a comparison) where one side is a stand-in:
        with a tensor or variable on the other side, NumPy defers to it (its
        ``__array_priority__``), so the result is the tensor's own operator (reflected
        where the array is on the left), which converts the array as TF converts an
        ndarray.  Anything else refuses (NumPy on NumPy, NumPy on Python numbers)."""
        array_left = left is self   # both this array (``a + a``): the left answers
        tensor = right if array_left else left
        if not isinstance(tensor, (tf.Tensor, tf.Variable)):   # another array refuses too
            refuse_use("the operator '%s' on" % symbol)
        method = getattr(type(tensor), reflected if array_left else forward, None)
        with fallible.made_by_the_user():   # ``t * a`` of mismatched shapes raises unused
            result = method(tensor, self) if method is not None else NotImplemented
        if result is NotImplemented:
            refuse_use("the operator '%s' (the tensor does not take it) on" % symbol)
        return result

    # Backstops for code that reaches the object without janus's observations
    # (library code, NumPy's coercion): NumPy would need the run's values.
    def _refused(self, *args: typing.Any, **kwargs: typing.Any) -> typing.NoReturn:
        what = 'using (in NumPy or plain Python)'
        ctx = current_or_none()
        if ctx is not None and ctx.refusals is not None:   # library code may swallow it
            ctx.refusals.append((Reason.NUMPY_ARRAY, 'janus does not convert %s a NumPy array '
                                 'from outside the call' % what))
        refuse_use(what)

    __array__ = __bool__ = __iter__ = __getitem__ = __setitem__ = __contains__ = _refused
    __format__ = __str__ = __len__ = __hash__ = __index__ = __float__ = __int__ = _refused


# Casts where TF's Cast gives what NumPy's ``astype`` (eager's conversion) gives:
# (from kinds, to dtypes).  Others (float -> int, to float16) refuse.
_INTEGERS = (tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8, tf.uint16, tf.uint32, tf.uint64)
_SAME_CASTS = {'b': _INTEGERS + (tf.bool, tf.float32, tf.float64),
               'i': _INTEGERS + (tf.bool, tf.float32, tf.float64),
               'u': _INTEGERS + (tf.bool, tf.float32, tf.float64),
               'f': (tf.float32, tf.float64)}


def conversion(value: ArrayStandIn, dtype: tf.DType | None = None, name: str | None = None,
               as_ref: bool = False) -> tf.Tensor:
    """TF's conversion of a stand-in (registered below): a new tensor of the array's
    dtype, or of ``dtype`` where the cast is one TF and NumPy do alike."""
    del name, as_ref
    tensor = value.tensor
    if dtype is None or tf.as_dtype(dtype) == tensor.dtype:
        return tf.identity(tensor)   # a new tensor each time, as eagerly
    dtype = tf.as_dtype(dtype)
    if dtype not in _SAME_CASTS.get(value.dtype.kind, ()) or (
            value.dtype.kind == 'f' and value.dtype.itemsize not in (4, 8)):
        raise Unsupported(Reason.NUMPY_ARRAY,
                          'janus does not convert a NumPy %s array from outside the call to '
                          '%s (NumPy casts it; janus converts only where TF casts alike)'
                          % (value.dtype, dtype.name))
    return tf.cast(tensor, dtype)


tf.register_tensor_conversion_function(ArrayStandIn, conversion)


def length(value: ArrayStandIn) -> int:
    """``len(a)``: the first dimension; a 0-d array raises eagerly (refused here)."""
    if not value.shape:
        refuse_use('len() of a 0-d')
    if value.shape[0] is None:
        refuse_unknown(value, 'len()')
    return value.shape[0]


def rows(value: ArrayStandIn, what: str) -> tuple[ArrayStandIn, ...]:
    """The rows an iteration of ``value`` gives eagerly, ``what`` naming the iteration:
    views ``a[0]``, ``a[1]``... of an array of two or more dimensions, each a stand-in
    (the count is its first dimension, fixed by the guards).  A 1-d array's items are
    NumPy scalars, its values (refused); a 0-d one raises eagerly (refused too)."""
    if value.ndim < 2:
        raise Unsupported(Reason.NUMPY_ARRAY,
                          'janus does not convert %s a %d-d NumPy array from outside the call '
                          '(its items are NumPy scalars: NumPy would need its values, which '
                          'only the run has)' % (what, value.ndim))
    if value.shape[0] is None:
        refuse_unknown(value, 'the rows (%s it)' % what)
    return tuple(_index(value, i) for i in range(value.shape[0]))


def _basic_key(key: typing.Any) -> bool:
    """Whether ``key`` is NumPy basic indexing janus models: ints, slices of ints,
    ``None`` and ``...``, alone or in a tuple (no bools, arrays or lists)."""
    items = key if type(key) is tuple else (key,)
    for item in items:
        if item is None or item is Ellipsis or type(item) is int:
            continue
        if type(item) is slice and all(type(p) in (int, type(None))
                                       for p in (item.start, item.stop, item.step)):
            continue
        return False
    return True


def _index(value: ArrayStandIn, key: typing.Any) -> ArrayStandIn:
    """``a[key]`` for basic indexing: a view of the array, itself a stand-in (eager gives
    a new view of it each call; NumPy scalars, out-of-range and other indexing refuse).
    Along a relaxed dimension a slice gives a relaxed one; an int refuses
    (UNKNOWN_SHAPE: whether it is in range depends on the size)."""
    if not _basic_key(key):
        refuse_use('indexing (other than by ints, slices, None and ...)')
    if not known(value.shape):
        _refuse_ints_on_relaxed(value, key)
    try:   # NumPy's checks on the known dimensions (a relaxed one: any size, here 1)
        sample = np.empty([1 if d is None else d for d in value.shape], value.dtype)[key]
    except Exception:  # noqa: BLE001 - NumPy raises eagerly: that statement runs in Python
        refuse_use('indexing out of range')
    if type(sample) is not np.ndarray:
        refuse_use('indexing to a NumPy scalar')
    tensor = value.tensor[key]
    shape = tuple(tensor.shape.as_list())
    if (known(value.shape) and shape != sample.shape) or len(shape) != sample.ndim or any(
            d is not None and d != s for d, s in zip(shape, sample.shape)):
        refuse_use('indexing (janus and NumPy disagree on the shape)')
    return ArrayStandIn(tensor, value.dtype, shape, value, key)


def _refuse_ints_on_relaxed(value: ArrayStandIn, key: typing.Any) -> None:
    """Refuses (UNKNOWN_SHAPE) an int index along a relaxed dimension of ``value``."""
    items = key if type(key) is tuple else (key,)
    if sum(item is Ellipsis for item in items) > 1:
        return   # NumPy raises whatever the sizes: refused as out of range
    consumed = sum(item is not None and item is not Ellipsis for item in items)
    axis = 0
    for item in items:
        if item is Ellipsis:
            axis += max(value.ndim - consumed, 0)
        elif item is not None:
            if type(item) is int and axis < value.ndim and value.shape[axis] is None:
                refuse_unknown(value, 'an item (an int index along a relaxed dimension)')
            axis += 1


def holds_stand_in(values: typing.Any, depth: int = 0) -> bool:
    """Whether ``values`` (a list, tuple or dict, walked) holds a stand-in."""
    if depth > 8:
        return False
    if is_stand_in(values):
        return True
    if type(values) in (list, tuple):
        return any(holds_stand_in(v, depth + 1) for v in values)
    if type(values) is dict:
        return any(holds_stand_in(v, depth + 1) for v in values.values())
    return False


def _all_alike(items: typing.Any) -> bool:
    """Whether ``items`` is a non-empty list or tuple of stand-ins of one dtype and shape
    (NumPy's conversion of it is stacking them).  Several arrays with a relaxed
    dimension refuse (UNKNOWN_SHAPE): whether they are alike depends on the sizes."""
    if not (type(items) in (list, tuple) and items and all(map(is_stand_in, items))):
        return False
    if any(item is not items[0] for item in items):   # one array again: alike at any size
        for item in items:
            if not known(item.shape):
                refuse_unknown(item, 'the shape (stacking it with other arrays)')
    return len({(v.dtype, v.shape) for v in items}) == 1


def stack(args: typing.Sequence, kwargs: typing.Mapping[str, typing.Any]) -> tf.Tensor | None:
    """``tf.stack(values, axis)`` of a list holding stand-ins, as eagerly: with
    ``axis=0`` TF converts the list first, which NumPy does for arrays alone (a stacking
    for arrays of one dtype and shape) and TF's autopacking for arrays among tensors
    (each array converted to the first tensor's dtype).  None where TF's own packing
    of the graph values does what it does eagerly (another axis: each array converted
    on its own; no stand-in)."""
    bound = inspect.signature(tf.stack).bind(*args, **kwargs)
    values: typing.Any
    values, axis = bound.arguments.get('values'), bound.arguments.get('axis', 0)
    if type(values) not in (list, tuple) or not any(map(is_stand_in, values)):
        return None
    if all(map(is_stand_in, values)):
        if not _all_alike(values):
            refuse_use('tf.stack() of arrays of several dtypes or shapes, from')
        return tf.stack([conversion(v) for v in values], axis)
    if axis != 0:
        return None
    if not all(is_stand_in(v) or isinstance(v, tf.Tensor) for v in values):
        refuse_use('tf.stack() of a list mixing Python values and')
    dtype = next(v.dtype for v in values if isinstance(v, tf.Tensor))
    return tf.stack([conversion(v, dtype) if is_stand_in(v) else v for v in values])


def constant(callee: typing.Callable, args: typing.Sequence,
             kwargs: typing.Mapping[str, typing.Any]) -> tf.Tensor | None:
    """``tf.constant(a, dtype=None, shape=None)`` / ``tf.convert_to_tensor(a, dtype=None,
    dtype_hint=None)`` of a stand-in, or of a list or tuple of stand-ins of one dtype
    and shape (NumPy stacks them), as eagerly."""
    bound = inspect.signature(callee).bind(*args, **kwargs)
    bound.apply_defaults()
    value: typing.Any
    value, dtype = bound.arguments.get('value'), bound.arguments.get('dtype')
    if bound.arguments.get('shape') is not None:
        refuse_use('tf.constant(shape=...) of')
    hint = bound.arguments.get('dtype_hint') or bound.arguments.get('preferred_dtype')
    items = [value] if is_stand_in(value) else value
    if not _all_alike(items):
        refuse_use('tf.constant()/tf.convert_to_tensor() of a list mixing (or nesting)')
    # NumPy casts to any dtype asked for, so a hint is always taken (or refused).
    tensors = [conversion(v, dtype if dtype is not None else hint) for v in items]
    return tensors[0] if is_stand_in(value) else tf.stack(tensors)
