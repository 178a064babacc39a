"""Values across the two sides of a tf.cond: what a branch can give as an output,
and how the two sides' values become one (a tensor, a dynamic scalar, a
``Chosen`` between two outside containers) or are refused.

Needs a ``TraceContext``; used by ``cond.py`` and ``branch_writes.py``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import tensorflow as tf

from janus.reasons import Reason
from janus.values import scalars
from janus.control.common import (COMPARED_BY_VALUE, describe_site, is_tensor, kind_of,
                                          liftable, refuse_values)
from janus.trace.trace_context import Unsupported
from janus.values.protocol import graph_tensor, is_graph_number
from janus.values.scalars import number_type
from janus.trace.tracing import Chosen, UnmergedLocal, current

if TYPE_CHECKING:
    from janus.trace.namespace import FunctionNamespace


class CannotMerge(Exception):
    pass


def cannot_merge(t: object, f: object) -> NoReturn:
    raise CannotMerge()


def as_output(value: Any) -> tf.Tensor | tuple[Any, ...]:
    """What a branch returns for a local: a tensor, a number as a scalar tensor (so
    two different numbers can merge into a dynamic scalar), else a placeholder
    (a Python value is merged by identity, not through the graph)."""
    if is_tensor(value):
        return value
    tensor = graph_tensor(value)   # a dynamic scalar's
    if tensor is not None:
        return tensor
    if liftable(value):
        return scalars.lift(value).tensor
    if _merged_tuple(value):   # ``return h, c``: item by item
        return tuple(as_output(item) for item in value)
    return tf.constant(0)


def _merged_tuple(value: object) -> bool:
    """A plain tuple, or a namedtuple class as ``collections.namedtuple`` made it (no
    ``__new__``/``__init__`` of the user's to run again), whose items a tf.cond can
    give out one by one."""
    kind = type(value)
    if kind is tuple:
        return True
    return (isinstance(value, tuple) and kind.__bases__ == (tuple,)
            and hasattr(kind, '_fields') and '_make' in vars(kind)
            and '__init__' not in vars(kind) and '__dict__' not in vars(kind)
            and '__new__' in vars(kind)
            and getattr(kind.__new__, '__qualname__', '') == kind.__name__ + '.__new__')


def refusal(where: str, name: str,
            lineage: frozenset = frozenset()) -> Callable[[Any, Any], NoReturn]:
    def refuse(t: Any, f: Any) -> NoReturn:
        refuse_values(Reason.BRANCH_TYPES,
                      '%s: after a tensor-dependent if, %s would be %s in one branch and %s '
                       'in the other; janus keeps Python values Python'
                       % (where, name, kind_of(t), kind_of(f)), t, f, extra=lineage)
    return refuse


def merge_values(t: Any, f: Any, output: Any, refuse: Callable[[Any, Any], object],
                 lineage: frozenset = frozenset()) -> Any:
    """The value after a tf.cond whose sides gave ``t`` and ``f``; ``output``: the
    cond's output for them (None: only check that they can merge); ``lineage``:
    the relaxed numbers the test was computed from (a merged number depends on
    them too: pinned, the test is plain Python)."""
    if t is f and not is_graph_number(t):
        return t   # one object on both paths (made before the if): it, as eagerly
    if is_tensor(t) and is_tensor(f):
        if t.dtype != f.dtype:   # (the cond gave out neither: its output is a stand-in)
            refuse(t, f)
        return output if output is not None else t
    kind = _merged_number_type(t, f)
    if kind is not None:
        if not is_graph_number(t) and not is_graph_number(f) and _same_python(t, f):
            return t
        if output is None:
            return t
        return scalars.DynamicScalar(scalars.as_scalar(output), kind,
                                     scalars.lineage_of(t, f) | lineage)
    if not (is_tensor(t) or is_tensor(f) or is_graph_number(t) or is_graph_number(f)):
        if _same_python(t, f):
            return t
    if _merged_tuple(t) and type(t) is type(f) and len(t) == len(f):
        items = [merge_values(a, b, output[i] if output is not None else None,
                              lambda *_: refuse(t, f), lineage)
                 for i, (a, b) in enumerate(zip(t, f))]
        return tuple(items) if type(t) is tuple else type(t)._make(items)
    refuse(t, f)


def _merged_number_type(t: Any, f: Any) -> type | None:
    """The number type two sides share where they merge into one number (a dynamic
    scalar when they differ): each a stand-in of such a number (a dynamic scalar) or
    a Python number one can become (``liftable``); else None."""
    kind = number_type(t)
    if kind is not None and kind is number_type(f) and (
            is_graph_number(t) or liftable(t)) and (is_graph_number(f) or liftable(f)):
        return kind
    return None


def outputs_apart(seen: Mapping[bool, Sequence[Any]]) -> set[int]:
    """Positions of locals whose two sides' outputs (``as_output``) differ in kind or
    dtype: such a local cannot be one value after the if (it becomes an
    UnmergedLocal), so neither side gives it out."""
    def spec(value: Any) -> tuple[Any, ...]:
        if is_tensor(value):
            return ('tensor', value.dtype)
        if is_graph_number(value) or liftable(value):
            return ('number', number_type(value))
        if _merged_tuple(value):
            return ('tuple', type(value), tuple(spec(item) for item in value))
        return ('python', None)
    return {i for i, (t, f) in enumerate(zip(seen[True], seen[False])) if spec(t) != spec(f)}


def merge(ns: FunctionNamespace, site: int, seen: Mapping[bool, Sequence[Any]],
          outputs: Sequence[Any] | None, pred: tf.Tensor,
          lineage: frozenset = frozenset()) -> tuple[Any, ...]:
    where = describe_site(ns, site)
    merged = []
    for i, (t, f) in enumerate(zip(seen[True], seen[False])):
        try:
            merged.append(noted(pred, t, f, merge_values(
                t, f, outputs[i] if outputs is not None else None, cannot_merge, lineage)))
        except CannotMerge:   # refused where it is used, if it is (UnmergedLocal)
            chosen = chosen_between(pred, t, f, where)
            merged.append(chosen if chosen is not None else UnmergedLocal(
                where, '%s where the test is true and %s where it is false'
                % (kind_of(t), kind_of(f)), lineage))
    return tuple(merged)


def noted(pred: tf.Tensor, t: Any, f: Any, value: Any) -> Any:
    """``value``, the merge of two tensors ``t`` and ``f`` by ``pred``: recorded, so
    ``is`` and returns know it is one of them (``TensorIdentity.note_merged``)."""
    if is_tensor(value) and is_tensor(t) and is_tensor(f) and t is not f:
        current().tensors.note_merged(value, pred, t, f)
    elif _merged_tuple(value) and value is not t and value is not f:
        for item, a, b in zip(value, t, f):   # its items are one of the sides' too
            noted(pred, a, b, item)
        current().tensors.note_merged_tuple(value, pred, t, f)
    return value


def chosen_between(pred: tf.Tensor, t: object, f: object, where: str) -> Chosen | None:
    """Two distinct outside lists or dicts on the two sides of a tf.cond: a ``Chosen``
    (changed in place, each candidate gets a conditional write); else None."""
    ctx = current()
    if t is f or not all(type(v) in (list, dict) and ctx.provenance.source_of(v) is not None
                         for v in (t, f)):
        return None
    return Chosen(where, [(t, pred), (f, tf.logical_not(pred))],
                  tf.compat.v1.get_default_graph())


def _same_python(a: Any, b: Any, depth: int = 0) -> bool:
    """Whether two Python values are the same value.  Compares only what has no
    code of its own and no identity a program can tell apart (numbers, strings,
    and tuples of them, item by item); anything else only by identity: a user's
    ``__eq__`` would run unconverted, a dynamic scalar's needs its value, and two
    lists or dicts that compare equal are still two objects (``bucket = m.pos``
    on one side, ``m.neg`` on the other: an append after the ``if`` changes the
    one the run chose, so they never merge into one)."""
    if a is b:
        return True
    if type(a) is not type(b) or depth > 8:
        return False
    if type(a) in (float, complex):
        return repr(a) == repr(b)   # -0.0 is not 0.0; a NaN is a NaN
    if type(a) in COMPARED_BY_VALUE:
        try:
            return bool(a == b)
        except Exception:  # noqa: BLE001 - incomparable values are not the same
            return False
    if isinstance(a, tuple):   # namedtuples too; their items by these rules
        # Only a tuple of plain values: two tuples holding one tensor or object are two
        # objects made at run time, which ``is`` tells apart (``t = u`` on one side,
        # ``(x, 1)`` made again on the other).
        return len(a) == len(b) and all(
            _plain_value(x) and _same_python(x, y, depth + 1) for x, y in zip(a, b))
    return False


def _plain_value(value: object, depth: int = 0) -> bool:
    """A number, string or the like (``COMPARED_BY_VALUE``), or a tuple of them."""
    if type(value) in (float, complex) or type(value) in COMPARED_BY_VALUE:
        return True
    return isinstance(value, tuple) and depth < 8 and all(
        _plain_value(item, depth + 1) for item in value)


def dummy(spec: tuple[tf.DType, Sequence[int | None] | None], where: str) -> tf.Tensor:
    """A stand-in of ``spec``'s dtype on the side of a tf.cond that has no such value."""
    dtype, dims = spec
    if dtype in (tf.resource, tf.variant):
        raise Unsupported(Reason.BRANCH_TYPES,
                          '%s: janus cannot carry a %s value out of a tensor-dependent branch'
                          % (where, dtype.name))
    shape = [0 if d is None else d for d in dims] if dims is not None else []
    return tf.zeros(shape, dtype)


def select(pred: tf.Tensor, t: Any, f: Any, refuse: Callable[[Any, Any], object],
           lineage: frozenset = frozenset()) -> Any:
    """``t if pred else f`` of two values both sides of a tf.cond can hold."""
    if t is f:
        return t
    if is_tensor(t) and is_tensor(f):
        if t.dtype != f.dtype:
            refuse(t, f)
        if t.shape.is_fully_defined() and t.shape == f.shape:
            return tf.where(pred, t, f)
        return tf.cond(pred, lambda: tf.identity(t), lambda: tf.identity(f))
    kind = _merged_number_type(t, f)
    if kind is not None:
        if not is_graph_number(t) and not is_graph_number(f) and _same_python(t, f):
            return t
        # Each side's tensor: a dynamic scalar's own, a Python number's lifted.
        return scalars.DynamicScalar(tf.where(pred, as_output(t), as_output(f)), kind,
                                     scalars.lineage_of(t, f) | lineage)
    if not (is_tensor(t) or is_tensor(f) or is_graph_number(t)
            or is_graph_number(f)) and _same_python(t, f):
        return t
    refuse(t, f)
