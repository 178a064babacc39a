"""Static shapes as converted code sees them: never a ``None`` eager would not see.

Needs a ``TraceContext`` (``tracing.current_or_none``).  Reading an
unknown dimension of a graph tensor (a relaxed batch size) is refused, so
janus builds an exact-shape graph instead.
"""
from __future__ import annotations
import typing
import tensorflow as tf

from janus.reasons import Reason
from janus.trace.trace_context import Unsupported
from janus.trace.tracing import current_or_none, need


class CheckedShape(tf.TensorShape):
    """A graph tensor's static shape as user code sees it: eager code always sees
    every dimension, so observing one that is unknown here (a relaxed batch
    size) is refused rather than answered with None; janus then builds a graph
    with exact shapes instead.

    Default-deny: only the rank (``rank``, ``ndims``, ``len``, ``bool``) and
    items that are known (``shape[-1]``) are answered.  Every other attribute
    (``dims``, ``as_list``, ``_dims``, ``merge_with``...) and every special
    method TensorShape implements through them (iteration, ``==``, ``str``,
    hashing, ``tf.TensorShape(shape)``, ``+``) refuses; a refusal is also
    recorded on the trace, in case library code swallows the exception.
    """
    _OPEN = frozenset(('rank', 'ndims', '_plain', '_refuse', '__class__', '__getitem__',
                       '__len__', '__bool__'))

    def __init__(self, shape: tf.TensorShape) -> None:   # no TensorShape.__init__: no _dims to read behind our back
        object.__setattr__(self, '_plain', tf.TensorShape(shape))

    def __getattribute__(self, name: str) -> typing.Any:
        if name in CheckedShape._OPEN:
            return object.__getattribute__(self, name)
        return object.__getattribute__(self, '_refuse')(name)

    def _refuse(self, *args: typing.Any, **kwargs: typing.Any) -> typing.NoReturn:
        reason = ('the code observes the dimensions of %s, which are only known at run time '
                  'in a graph with relaxed shapes' % self._plain)
        ctx = current_or_none()
        if ctx is not None and ctx.number_shapes:   # maybe a dimension a number decides
            need(ctx.number_shapes, 'reading a dimension of %s, computed from a number'
                 % self._plain, Reason.UNKNOWN_SHAPE)
        if ctx is not None and ctx.refusals is not None:
            ctx.refusals.append((Reason.UNKNOWN_SHAPE, reason))
        raise Unsupported(Reason.UNKNOWN_SHAPE, reason)

    @property
    def rank(self) -> int | None:
        return self._plain.rank

    ndims = rank

    def __len__(self) -> int:
        return len(self._plain)

    def __bool__(self) -> bool:
        return bool(self._plain)

    def __getitem__(self, key: int | slice) -> typing.Any:
        value = self._plain[key]
        if isinstance(value, tf.TensorShape):
            return value if value.is_fully_defined() else CheckedShape(value)
        if value is None:
            self._refuse()
        return value

    # TensorShape implements these through ``_dims``, which refuses anyway;
    # they are listed so the refusal does not depend on that detail.
    __iter__ = __eq__ = __ne__ = __str__ = __repr__ = __hash__ = _refuse
    __reduce__ = __reduce_ex__ = __add__ = __radd__ = __concat__ = _refuse


def checked_shape_in(values: typing.Any, depth: int = 0) -> CheckedShape | None:
    """The first CheckedShape in ``values`` (lists, tuples, dicts searched), or None."""
    for value in values:
        if isinstance(value, CheckedShape):
            return value
        if depth < 8 and isinstance(value, (list, tuple, dict)):
            found = checked_shape_in(value.values() if isinstance(value, dict) else value,
                                      depth + 1)
            if found is not None:
                return found
    return None


def static_shape(tensor: tf.Tensor, name: str) -> typing.Any:
    """``tensor.shape`` (or, ``name`` ``get_shape``, the method) as converted code reads
    it: a ``CheckedShape`` where a dimension is unknown; an unknown rank refuses."""
    shape = tensor.shape
    if shape.rank is None or not shape.is_fully_defined():
        shape = CheckedShape(shape) if shape.rank is not None else None
        if shape is None:
            raise Unsupported(Reason.UNKNOWN_SHAPE,
                              'the code reads the shape of a tensor whose rank is only known '
                              'at run time')
    return shape if name == 'shape' else (lambda: shape)
