"""Loops over ``tf.data`` datasets and iterators as one ``tf.while_loop``.

Needs a ``TraceContext`` (``trace/tracing.current``); ``statements.for_stmt``
and ``calls.call`` (``iter``/``enumerate``/``zip`` of a dataset) call in here.

``for x in ds`` runs exactly the dataset's elements, however many there are,
as AutoGraph does: an iterator made in the graph is pulled with
``get_next_as_optional``, and the loop carries the optional beside the
function's own loop variables (``loops.dynamic_while`` does the rest:
rebound locals, outside locations written back, lists grown as TensorArrays).
A dataset argument is fed per call by its variant tensor
(``call_signature.DatasetNode``); one read from outside (``self.ds``) is the
object itself, guarded by identity, and the graph captures it.

A local the loop carries that starts as a Python number or unbound
(``total = 0.0`` before ``total += loss``) gets the first iteration traced
before the loop, behind a NONEMPTY_LOOP assumption (an empty dataset runs
the call imperatively), so it is a tensor of one type in the loop; where
every profiled run of the loop ran no iteration, the loop is assumed empty
instead (TRIP_COUNT, relaxed when it breaks).
``enumerate(ds)`` counts with a dynamic scalar (a Python int in eager code
stays an int in the graph: ``scalars``), ``zip`` of datasets is
``Dataset.zip``, and ``iter(ds)`` is an iterator made in the graph, which a
``for`` loop pulls from like a dataset, and ``next()`` of it is its next element,
assumed to exist (a RAISE assumption: eagerly it raises StopIteration).
``for i in range(n)`` of an integer tensor ``n`` counts ``i`` as a dynamic int.
A ``break`` (a flag, ``converters/jumps.py``) ends the loop without pulling
another element.  An iterator argument (``call_signature.IteratorNode``) is the
caller's own: the graph pulls from it, and only the check that the first pull
found an element may follow it (``effects.PULL_CHECKS``, verified in
``graphgen/tracer.py``): a second ``next()`` whose check would follow the first
pull runs the call imperatively.  Refused: a loop with ``return`` inside, a
comprehension over a dataset, other builtins iterating one (``zip`` with a
list), and a loop over an outside dataset whose iterators change state
(``refuse_outside_state``).
"""
from __future__ import annotations

import dataclasses
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tensorflow as tf
from tensorflow.python.data.ops import iterator_ops, optional_ops

from janus.pyct.sites import SiteKey
from janus.reasons import Reason
from janus.graph import effects, fallible
from janus.values import scalars
from janus.control.common import UNDEFINED
from janus.control.loops import dynamic_while
from janus.graph.graph_analysis import first_state_change
from janus.trace.trace_context import Unsupported
from janus.values.protocol import graph_tensor, is_graph_number
from janus.values.scalars import number_type
from janus.trace.tracing import AssumptionKind, current

if TYPE_CHECKING:
    from janus.trace.namespace import FunctionNamespace
    from janus.trace.trace_context import TraceContext


@dataclasses.dataclass(frozen=True)
class TensorRange:
    """``range(n)`` of an integer scalar graph tensor (eagerly, of its ``__index__``):
    ``start``/``stop`` are Python ints or dynamic ints, ``step`` a Python int."""
    start: object
    stop: object
    step: int


@dataclasses.dataclass(frozen=True)
class Enumerated:
    """``enumerate(ds, start)`` of a dataset, as a loop will run it."""
    dataset: object
    start: int


def is_dataset_value(value: object) -> bool:
    """A dataset, ``enumerate`` of one, an iterator made in this graph, or a
    ``TensorRange``."""
    return isinstance(value, (tf.data.Dataset, Enumerated, TensorRange)) \
        or _graph_iterator(value)


def _index_tensor(value: object) -> bool:
    """An integer scalar graph tensor (what ``range()`` takes eagerly via __index__)."""
    return isinstance(value, tf.Tensor) and not hasattr(value, 'numpy') \
        and value.dtype.is_integer and value.shape.rank == 0


def _graph_iterator(value: object) -> bool:
    """An iterator the graph pulls from: made in it, or an argument's (``IteratorNode``)."""
    return isinstance(value, iterator_ops.OwnedIterator) and not tf.executing_eagerly() \
        and hasattr(value, '_iterator_resource') \
        and not hasattr(value._iterator_resource, 'numpy')


def handles_call(callee: object, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """Whether ``callee(*args, **kwargs)`` is one of the builtins over a dataset
    this module answers (``call_builtin``), or ``range`` of a tensor."""
    if callee is range and not kwargs and 1 <= len(args) <= 3 \
            and any(map(_index_tensor, args)) and (len(args) < 3 or type(args[2]) is int
                                                   and args[2] != 0):
        return all(_index_tensor(a) or number_type(a) is int for a in args)
    return callee in _CONSUMING and any(
        is_dataset_value(a) or isinstance(a, iterator_ops.OwnedIterator)
        for a in list(args) + list(kwargs.values()))


# Builtins that iterate their arguments: of a dataset, ``iter``/``enumerate``/``zip``
# (of datasets only)/``next`` convert; the others would iterate it in Python.
_CONSUMING = (iter, enumerate, zip, next, list, tuple, sorted, sum, min, max, reversed, map,
              filter, any, all, set, frozenset, dict)


def call_builtin(callee: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    for value in args:
        if isinstance(value, tf.data.Dataset):
            refuse_outside_state(value)
    if callee is range:
        bounds = [scalars.from_tensor(int, a) if _index_tensor(a) else a for a in args]
        start, stop = (0, bounds[0]) if len(bounds) == 1 else bounds[:2]
        # A tensor step arrives as a dynamic int, which compares and adds as an int does.
        return TensorRange(start, stop, bounds[2] if len(bounds) == 3 else 1)  # type: ignore[arg-type]
    if callee is iter and len(args) == 1 and not kwargs \
            and isinstance(args[0], tf.data.Dataset):
        return iter(args[0])   # inside the graph: an iterator made by the graph
    if callee is enumerate and isinstance(args[0], tf.data.Dataset) \
            and set(kwargs) <= {'start'} and len(args) <= 2:
        start = kwargs.get('start', args[1] if len(args) > 1 else 0)
        if type(start) is not int:
            raise Unsupported(Reason.DYNAMIC_ITERATION,
                              'janus converts enumerate() of a dataset from a Python int only')
        return Enumerated(args[0], start)
    if callee is zip and not kwargs and all(isinstance(a, tf.data.Dataset) for a in args):
        return tf.data.Dataset.zip(tuple(args))
    if callee is next and len(args) == 1 and not kwargs and _graph_iterator(args[0]):
        return _next_element(args[0])
    raise Unsupported(Reason.DYNAMIC_ITERATION,
                      'janus does not convert %s() of a tf.data dataset or iterator yet: loop '
                      'over it with `for` (a tf.while_loop), or call it outside the function'
                      % callee.__name__)


def _next_element(iterator: Any) -> Any:
    """``next(it)`` of an iterator the graph made: its next element, assumed to exist
    (eagerly an exhausted iterator raises StopIteration: the call re-runs imperatively)."""
    ctx = current()
    _note_pulls(ctx, iterator)
    optional = iterator.get_next_as_optional()
    checked = ctx.assume(None, AssumptionKind.RAISE, optional.has_value(),
                         'the iterator has a next element (next() does not raise '
                         'StopIteration)', lineno=_user_line(ctx), gate=optional._variant_tensor)
    _mark_pull_check(checked, optional._variant_tensor)
    return _value_of(checked, optional.element_spec)


def _value_of(variant: tf.Tensor, element_spec: Any) -> Any:
    """The element of an optional known to hold one (checked, or the loop's test): its
    ``OptionalGetValue`` cannot fail (``fallible.cannot_fail``), so it needs no rollback."""
    value = optional_ops._OptionalImpl(variant, element_spec).get_value()
    for tensor in tf.nest.flatten(value):
        if isinstance(tensor, tf.Tensor) and tensor.op.type == 'OptionalGetValue':
            fallible.cannot_fail(tensor.op)
    return value


def _note_pulls(ctx: TraceContext, iterator: Any) -> None:
    if effects.outside_iterator(iterator):
        setattr(ctx.top_graph, effects.PULLS_OUTSIDE, True)


def _mark_pull_check(check: tf.Operation, variant: tf.Tensor) -> None:
    """A check that a pull from an outside iterator found an element (``effects``);
    the pull is clean when it is the graph's first state change and the call wrote
    no Python state before it."""
    pull = effects.outside_pull(variant)
    if pull is not None and check is not None:
        effects.record_pull_check(getattr(check, 'op', check), pull)
        if not current().heap.writes and first_state_change(pull.graph) == pull._id:
            effects.record_clean_pull(pull)


def _user_line(ctx: TraceContext) -> int | None:
    """The line of the converted code running now (its innermost frame), or None."""
    filename = ctx.stack[-1].filename if ctx.stack else None
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == filename:
            return frame.f_lineno
        frame = frame.f_back
    return None


def refuse_outside_state(dataset: tf.data.Dataset) -> None:
    """Refuses a loop over a dataset built on an outside one whose iterators change
    state outside it (``effects.dataset_keeps_state``: a shuffle reshuffling per
    epoch, a map updating a variable): a run that fails after making its iterator
    could not undo that, and the imperative re-run would do it again."""
    for variant in _outside_variants(dataset._variant_tensor):
        if effects.variant_keeps_state(variant):
            raise Unsupported(Reason.DYNAMIC_ITERATION,
                              'janus does not convert a loop over a tf.data dataset from outside '
                              'the call whose iterators change state (a shuffle that reshuffles '
                              'each epoch, a map that updates a variable or draws random '
                              'numbers, a cache): a failed run could not undo it')


def _outside_variants(variant: tf.Tensor) -> Iterator[tf.Tensor]:
    """The eager variant tensors (outside datasets) a dataset's variant is built from."""
    stack, seen = [variant], set()
    while stack:
        tensor = stack.pop()
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        if hasattr(tensor, 'numpy'):
            yield tensor
            continue
        if tensor.op.type == 'Placeholder':
            captured = {id(inner): outer for outer, inner in tensor.graph.captures}
            if id(tensor) in captured:
                stack.append(captured[id(tensor)])
            continue
        stack.extend(t for t in tensor.op.inputs if t.dtype == tf.variant)


def refuse_python_loop() -> None:
    """A dataset iterated by Python (a loop with break/return, a comprehension)."""
    raise Unsupported(Reason.DYNAMIC_ITERATION,
                      'janus does not convert a loop over a tf.data dataset or iterator with '
                      'break/return/continue inside (or a comprehension over one) yet: only a '
                      'plain `for` loop over it becomes a tf.while_loop')


def dataset_for(ns: FunctionNamespace, site: int, iterable: Any, body_fn: Callable[[Any], Any],
                get_state: Callable[[], Sequence[Any]],
                set_state: Callable[[Sequence[Any]], object],
                stop: Callable[[], Any] | None = None) -> None:
    """``for item in iterable`` (``is_dataset_value``) as a tf.while_loop; ``stop``
    reads the loop's break flag (``statements.for_stmt``): once it is up, no next
    element is pulled and the loop ends."""
    if isinstance(iterable, TensorRange):
        return _range_for(ns, site, iterable, body_fn, get_state, set_state, stop)
    counter = None
    if isinstance(iterable, Enumerated):
        counter = scalars.lift(iterable.start)
        iterable = iterable.dataset
    if isinstance(iterable, tf.data.Dataset):
        refuse_outside_state(iterable)
    iterator = iterable if isinstance(iterable, iterator_ops.OwnedIterator) else iter(iterable)
    _note_pulls(current(), iterator)
    element_spec = iterator.element_spec
    box = {'next': iterator.get_next_as_optional()._variant_tensor, 'count': counter}

    def optional() -> Any:
        return optional_ops._OptionalImpl(box['next'], element_spec)

    def get() -> tuple[Any, ...]:
        extra = (box['next'],) if counter is None else (box['next'], box['count'])
        return tuple(get_state()) + extra

    def put(values: Sequence[Any]) -> None:
        values = tuple(values)
        if counter is None:
            set_state(values[:-1])
            box['next'] = values[-1]
        else:
            set_state(values[:-2])
            box['next'], box['count'] = values[-2], values[-1]

    def step() -> None:
        item = _value_of(box['next'], element_spec)
        if counter is not None:
            item = (box['count'], item)
        body_fn(item)
        box['next'] = _pull(iterator, stop)
        if counter is not None:
            count = box['count']
            box['count'] = scalars.rewrap(count, count.tensor + 1)

    if _first_iteration_apart(get_state()):
        if not effects.outside_iterator(iterator) and _assumed_empty(
                ns, site, tf.logical_not(optional().has_value())):
            return   # (a failed check would have pulled an element from an outside one)
        pulled = box['next']
        # The first element is read through the check: never before it held.
        box['next'] = current().assume(SiteKey(ns.fn.__code__, site),
                                       AssumptionKind.NONEMPTY_LOOP, optional().has_value(),
                                       'the loop over the dataset runs at least once',
                                       gate=pulled)
        _mark_pull_check(box['next'], pulled)
        step()
    dynamic_while(ns, site, lambda: optional().has_value(), step, get, put)


def _pull(iterator: Any, stop: Callable[[], Any] | None) -> tf.Tensor:
    """The iterator's next element as an optional's variant, or an empty one once the
    break flag is up (a Python True, or a tensor: a ``tf.cond``)."""
    flag = stop() if stop is not None else False
    if flag is False:
        return iterator.get_next_as_optional()._variant_tensor
    empty = lambda: tf.experimental.Optional.empty(iterator.element_spec)  # noqa: E731
    if flag is True:
        return empty()._variant_tensor
    return tf.cond(tf.cast(flag, tf.bool), empty,
                   iterator.get_next_as_optional)._variant_tensor


def _range_for(ns: FunctionNamespace, site: int, bounds: Any, body_fn: Callable[[Any], Any],
               get_state: Callable[[], Sequence[Any]], set_state: Callable[[Sequence[Any]], object],
               stop: Callable[[], Any] | None = None) -> None:
    """``for i in range(n)`` of a tensor ``n``: ``i`` a dynamic int (a Python int
    eagerly), counted in the loop."""
    start = bounds.start if is_graph_number(bounds.start) else scalars.lift(bounds.start)
    end = graph_tensor(bounds.stop)
    if end is None:
        end = tf.constant(bounds.stop, tf.int64)
    box = {'i': start}

    def more() -> tf.Tensor:
        index = box['i'].tensor
        going = index < end if bounds.step > 0 else index > end
        flag = stop() if stop is not None else False
        return going if flag is False else tf.logical_and(going, tf.logical_not(flag))

    def get() -> tuple[Any, ...]:
        return tuple(get_state()) + (box['i'],)

    def put(values: Sequence[Any]) -> None:
        values = tuple(values)
        set_state(values[:-1])
        box['i'] = values[-1]

    def step() -> None:
        index = box['i']
        body_fn(index)
        box['i'] = scalars.rewrap(index, index.tensor + bounds.step)

    if _first_iteration_apart(get_state()):
        if _assumed_empty(ns, site, tf.logical_not(more())):
            return
        current().assume(SiteKey(ns.fn.__code__, site), AssumptionKind.NONEMPTY_LOOP, more(),
                         'the loop over range() runs at least once')
        step()
    dynamic_while(ns, site, more, step, get, put)


def _assumed_empty(ns: FunctionNamespace, site: int, empty: tf.Tensor) -> bool:
    """Where every profiled run of the loop ran no iteration (an empty dataset passed
    in), the loop is assumed to run none (TRIP_COUNT: a Python number it would add
    to stays one, as eagerly); when that breaks, the next graph runs the loop."""
    key = SiteKey(ns.fn.__code__, site)
    ctx = current()
    if ctx.decide(key) != 0:
        return False
    ctx.assume(key, AssumptionKind.TRIP_COUNT, empty, 'the loop runs no iteration')
    return True


def _first_iteration_apart(state: Sequence[Any]) -> bool:
    """Whether the loop's first iteration runs before the tf.while_loop, assumed to
    run: a local the loop carries starts as a Python number (``total = 0.0``, then
    ``total += loss``: a tensor from the first iteration on, as eagerly) or is not
    bound yet (first bound in the loop, read after it)."""
    return any(value is UNDEFINED or type(value) in (int, float) for value in state)
