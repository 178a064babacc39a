"""Tensor-dependent ``while`` and ``for`` loops as real tf.while_loop.

The loop carries the locals its body rebinds and the Python locations it
writes (written back after the loop), numbers it counts with as dynamic
scalars, and the call's own lists it grows as TensorArrays (``TensorList``).
Needs a ``TraceContext``; called from ``statements.py``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from janus.config import config
from janus.reasons import Reason
from janus.values import scalars
from janus.control.branch_writes import location, outside_reader
from janus.control.common import (TensorList, UNDEFINED, condition_tensor, describe_site,
                                          in_traced_region, is_tensor,
                                          kept_running, kind_of, liftable,
                                          refuse_values, snapshot_of, variables_read)
from janus.graph.graph_analysis import first_state_change, has_checks
from janus.heap.shadow_heap import MISSING, WriteKind
from janus.trace.trace_context import Unsupported
from janus.trace.tracing import current, refuse_unmerged
from janus.values.protocol import NOT_MODELLED, StandIn, is_graph_number
from janus.values.scalars import number_type

if TYPE_CHECKING:
    from janus.trace.namespace import FunctionNamespace
    from janus.heap.shadow_heap import Checkpoint, Rebinding, Region, TraceHeap
    from janus.trace.trace_context import TraceContext


# -- tf.while_loop -----------------------------------------------------------------------

class _Widen(Exception):
    """A loop body rebinds more than the loop carries: trace the loop again, carrying
    ``numbers`` (indices of Python-number locals) and ``keys`` (heap locations)."""

    def __init__(self, numbers: Iterable[int], keys: Mapping[Any, Any]) -> None:
        super().__init__('widen the loop')
        self.numbers, self.keys = set(numbers), dict(keys)


_LOOP_WRITES = (WriteKind.ATTR, WriteKind.ITEM, WriteKind.GLOBAL, WriteKind.CELL)


def dynamic_while(ns: FunctionNamespace, site: int, test_fn: Callable[[], Any],
                  body_fn: Callable[[], Any], get_state: Callable[[], Sequence[Any]],
                  set_state: Callable[[Sequence[Any]], object],
                  lineage: frozenset = frozenset()) -> None:
    """A tf.while_loop.  Locals the body rebinds are loop variables (tensors, lists of
    them, numbers as dynamic scalars), and so are the outside locations it rebinds
    (``self.total = self.total + x``, a global, a cell, an item): their final values
    are written back after the run, when the loop rebound them at all.  Other
    writes (print, appending to an outside list) stay refused: each iteration's
    would need a record of its own."""
    ctx = current()
    original = tuple(get_state())
    where = describe_site(ns, site)
    if any(v is UNDEFINED for v in original):
        raise Unsupported(Reason.LOOP_CARRY_TYPES,
                          '%s: a variable the tensor-dependent loop carries is not defined '
                          'before the loop' % where)
    base = ctx.heap.checkpoint()
    assumptions = len(ctx.assumptions)
    numbers: set[int] = set()
    keys: dict[Any, Any] = {}
    for _ in range(8):
        try:
            return _while_loop(ctx, where, test_fn, body_fn, get_state, set_state, original,
                               numbers, keys, lineage)
        except _Widen as widen:
            ctx.heap.restore(base)
            set_state(original)
            del ctx.assumptions[assumptions:]
            if widen.numbers <= numbers and set(widen.keys) <= set(keys):
                raise Unsupported(Reason.LOOP_CARRY_TYPES,
                                  '%s: janus could not settle what the tensor-dependent loop '
                                  'carries' % where) from None
            numbers |= widen.numbers
            keys.update(widen.keys)
    raise Unsupported(Reason.LOOP_CARRY_TYPES,
                      '%s: janus could not settle what the tensor-dependent loop carries'
                      % where)


def _loop_start(heap: TraceHeap, rebinding: Rebinding, where: str) -> Any:
    """A rebound location's value as the loop starts: a tensor or a dynamic scalar."""
    obj, slot, write = rebinding.obj, rebinding.slot, rebinding.write
    value = heap.read(obj, slot)
    if value is MISSING:
        value = outside_reader(obj, slot, write, where)()
    if is_tensor(value) or is_graph_number(value):
        return value
    if liftable(value):
        return scalars.lift(value)
    raise Unsupported(Reason.LOOP_CARRY_TYPES,
                      '%s: %s is %s before the tensor-dependent loop that rebinds it; janus '
                      'carries only tensors and numbers through such a loop'
                      % (where, location(write, slot), kind_of(value)))


def _check_loop_checks(outer: tf.Graph, where: str, reads_variables: bool) -> None:
    """A loop body that checks (a Janus>Assert: a dynamic scalar's range, a branch it
    assumes) and reads a variable, after a state change earlier in the call: TF
    orders the loop after the change (it reads the resource), and the deferred-
    update rule orders every change after every check, so the graph would hold a
    cycle.  Refused (the loop's outcome may be assumed instead, ``_or_assume``)."""
    if not reads_variables or first_state_change(outer) is None:
        return
    if config.restore_on_error and current().soft_conditions is None:  # type: ignore[attr-defined]
        return   # checked after the change, undone if broken (tracer.defer_state_updates)
    if has_checks(tf.compat.v1.get_default_graph()):
        raise Unsupported(Reason.CHECK_AFTER_STATE_CHANGE,
                          '%s: a tensor-dependent loop that reads a variable and makes '
                          'checks, after a state change made earlier in the same call: its '
                          'checks could not precede the change' % where)


def _loop_value(start: Any, value: Any, where: str, name: str) -> Any:
    """What the loop carries for a rebound value that started as ``start``: a tensor,
    or a stand-in the loop carries (a dynamic scalar, a grown list), which answers
    for itself (``trace_carry``)."""
    if not isinstance(start, StandIn):
        refuse_unmerged(start, value)
        if not is_tensor(value) or value.dtype != start.dtype:
            raise Unsupported(Reason.LOOP_CARRY_TYPES,
                              '%s: %s changes from %s to %s inside the tensor-dependent loop'
                              % (where, name, kind_of(start), kind_of(value)))
        return value
    carried = start.trace_carry(value, where)
    if carried is NOT_MODELLED:
        refuse_values(Reason.LOOP_CARRY_TYPES,
                      '%s: %s changes from %s to %s inside the tensor-dependent loop'
                       % (where, name, kind_of(start), kind_of(value)), start, value)
    return carried


def _carried_stand_in(value: Any, where: str) -> bool:
    """A stand-in a loop carries as what it answers (``trace_carry``): a dynamic
    scalar (its tensor), a grown list (its TensorArray)."""
    return isinstance(value, StandIn) and value.trace_carry(value, where) is not NOT_MODELLED


def _uncarried(start: Any, carried: Any, where: str, lineage: frozenset = frozenset()) -> Any:
    """A loop variable that started as ``start`` back from what the loop carried for it:
    a tensor as it is; a stand-in rebuilds itself (``trace_uncarry``), also depending
    on ``lineage`` (how often the loop ran)."""
    if isinstance(start, StandIn):
        return start.trace_uncarry(carried, where, lineage)
    return carried


def _array_value(start: tf.TensorArray, value: Any, where: str) -> tf.TensorArray:
    """What the loop carries for a TensorArray the body rebinds (``ta = ta.write(i, x)``):
    the array itself (tf.while_loop carries its flow), of the same dtype."""
    refuse_unmerged(value)
    if not isinstance(value, tf.TensorArray) or value.dtype != start.dtype:
        raise Unsupported(Reason.LOOP_CARRY_TYPES,
                          '%s: a TensorArray changes to %s inside the tensor-dependent loop'
                          % (where, kind_of(value)))
    return value


def _check_loop_writes(heap: TraceHeap, checkpoint: Checkpoint, where: str) -> None:
    """Inside a tf.while_loop body only rebinding a location is converted (carried)."""
    writes = heap.writes[len(checkpoint.writes):]
    if any(write.kind is WriteKind.PRINT for write in writes):
        raise Unsupported(Reason.PRINT_IN_DYNAMIC_LOOP,
                          '%s: janus does not convert print() inside a tensor-dependent loop '
                          '(each iteration would need a record of its own)' % where)
    if any(write.kind is WriteKind.ADVANCE for write in writes):
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          '%s: janus does not convert a loop over an iterator from outside the '
                          'call inside a tensor-dependent loop (how far each iteration moves it '
                          'would need a record of its own)' % where)
    changed = [cid for cid in heap.changed if cid not in checkpoint.changed
               or len(dict.get(heap.pending, cid, ())) != len(dict.get(checkpoint.pending,
                                                                        cid, ()))]
    if changed or any(write.kind not in _LOOP_WRITES for write in writes):
        # Relaxed numbers among what is stored: the trace is redone with them constant
        # (the loop may then unroll), as for any use that needs their value.
        refuse_values(Reason.OUTSIDE_APPEND_IN_LOOP,
                      '%s: janus does not convert appending to an outside list or dict '
                       '(append/extend/insert/update/a new key) inside a tensor-dependent '
                       'loop (each iteration would need a record of its own); collect the '
                       'values in a local list and extend it after the loop' % where,
                       extra=scalars.lineage_deep([write.value for write in writes]))


@dataclasses.dataclass(frozen=True)
class LoopCarry:
    """The layout of what a tf.while_loop carries: the locals the body rebinds,
    then the Python locations it rebinds (``held``), then one flag per location,
    "rebound in some iteration" (zero iterations leave the object untouched)."""
    n_local: int
    n_held: int

    def split(self, values: Iterable[Any]) -> tuple[list[Any], list[Any], list[Any]]:
        """(locals, held, flags) of a tuple the loop carries."""
        values = list(values)
        held_end = self.n_local + self.n_held
        return values[:self.n_local], values[self.n_local:held_end], values[held_end:]


def _while_loop(ctx: TraceContext, where: str, test_fn: Callable[[], Any],
                body_fn: Callable[[], Any], get_state: Callable[[], Sequence[Any]],
                set_state: Callable[[Sequence[Any]], object], original: Sequence[Any],
                numbers: set[int], keys: Mapping[Any, Any], lineage: frozenset) -> None:
    builder = _WhileLoop(ctx, where, test_fn, body_fn, get_state, set_state, original, numbers,
                         keys, lineage)
    builder.build()


class _WhileLoop:
    """One tensor-dependent loop built as a tf.while_loop (``_while_loop``)."""

    def __init__(self, ctx: TraceContext, where: str, test_fn: Callable[[], Any],
                 body_fn: Callable[[], Any], get_state: Callable[[], Sequence[Any]],
                 set_state: Callable[[Sequence[Any]], object], original: Sequence[Any],
                 numbers: set[int], keys: Mapping[Any, Any], lineage: frozenset) -> None:
        self.ctx, self.where, self.lineage = ctx, where, lineage
        self.test_fn, self.body_fn = test_fn, body_fn
        self.get_state, self.set_state, self.keys = get_state, set_state, keys
        self.heap = ctx.heap
        self.outer = tf.compat.v1.get_default_graph()
        init = self.init = list(original)
        _lists_to_tensor_arrays(init, body_fn, get_state, set_state, where, lineage)
        # Lists/tuples of tensors the body rebinds (an LSTM cell's [h, c]) are
        # carried leaf by leaf and rebuilt with the same structure each iteration.
        self.structures = {i for i, v in enumerate(init) if _is_tensor_structure(v)}
        for i in self.structures:   # an outside list (self.state): its tensors re-read every run
            init[i] = ctx.contents(init[i])
        # Stand-ins the loop carries, each as it answers (``trace_carry``): dynamic
        # scalars, grown lists; a Python number the body changes, lifted to a dynamic one.
        self.stand_ins = {i: v if _carried_stand_in(v, where) else scalars.lift(v)
                          for i, v in enumerate(init) if _carried_stand_in(v, where)
                          or i in numbers}
        self.loop_index = [i for i, v in enumerate(init)
                           if is_tensor(v) or isinstance(v, tf.TensorArray)
                           or i in self.structures or i in self.stand_ins]
        self.fixed = {i: snapshot_of(v) for i, v in enumerate(init) if i not in self.loop_index}
        self.carried = list(keys.items())   # (k, the Rebinding of that location)
        self.starts = [_loop_start(self.heap, rebinding, where) for _, rebinding in self.carried]
        self.start = self.heap.checkpoint()
        self.passed: dict[int, Any] = {}
        # Carried lists/tuples the body hands on as it got them (the same object,
        # the same tensors): eagerly the local still holds the object it held
        # before the loop (an argument list stays the caller's), so it gets it back.
        self.untouched: set[int] = set()
        self.original = tuple(original)
        self.carry = LoopCarry(len(self.loop_index), len(self.carried))
        self.kept_outside: set[int] = set()   # locals the body may leave holding an outside tensor
        self.first_values: Any = None   # the loop variables' values as it starts (build)

    def full_state(self, values: Sequence[Any]) -> tuple[Any, ...]:
        """The function's locals, given the loop's values of those it carries."""
        state = list(self.init)
        for i, value in zip(self.loop_index, values):
            if i in self.stand_ins:
                value = _uncarried(self.stand_ins[i], value, self.where, self.lineage)
            elif i in self.structures:
                value = self.ctx.provenance.made_result(   # rebuilt around the loop's values
                    tf.nest.pack_sequence_as(self.init[i], list(value)), deep=True)
                self.passed[i] = (value, list(tf.nest.flatten(value)))
            state[i] = value
        return tuple(state)

    def loop_values(self, state: Sequence[Any]) -> tuple[Any, ...]:
        """The loop's values of the locals it carries, from the function's locals."""
        values = []
        for i in self.loop_index:
            value = state[i]
            if i in self.stand_ins:
                value = _loop_value(self.stand_ins[i], value, self.where, 'a variable')
            elif i in self.structures:
                value = _structure_leaves(self.init[i], value, self.passed.get(i), self.where)
            elif isinstance(self.init[i], tf.TensorArray):   # ``ta = ta.write(i, x)``
                value = _array_value(self.init[i], value, self.where)
            elif is_tensor(self.init[i]):
                value = _loop_value(self.init[i], value, self.where, 'a variable')
            values.append(value)
        return tuple(values)

    def enter(self, values: Sequence[Any]) -> list[Any]:
        """Binds the loop's values (locals and held locations); returns the flags."""
        for value in values:
            self.ctx.tensors.note_looped(value)
        local, held, flags = self.carry.split(values)
        self.set_state(self.full_state(local))
        self.heap.restore(self.start)
        self._hold(held)
        return flags

    def _hold(self, held: Sequence[Any]) -> None:
        heap = self.heap
        for (k, rebinding), first, value in zip(self.carried, self.starts, held):
            heap.overlay[k] = _uncarried(first, value, self.where)
            if rebinding.slot.is_item:
                heap.items_written.add(k[0])

    def cond(self, *values: Any) -> tf.Tensor:
        self.enter(values)
        return kept_running(condition_tensor(in_traced_region(self.test_fn)))

    def body(self, *values: Any) -> tuple[Any, ...]:
        heap, ctx, where = self.heap, self.ctx, self.where
        flags = self.enter(values)
        checkpoint = heap.checkpoint()
        region = heap.open_region()
        try:
            in_traced_region(self.body_fn)
        finally:
            heap.close_region(region)
        ctx.last_loop_reads_variables = bool(variables_read())
        _check_loop_writes(heap, checkpoint, where)
        _check_loop_checks(self.outer, where, ctx.last_loop_reads_variables)
        state = self.get_state()
        self._check_fixed(state, region)
        out = list(self.loop_values(state))
        self.untouched = {i for i in self.structures if state[i] is self.passed[i][0]}
        for (_, rebinding), first in zip(self.carried, self.starts):
            value = heap.read(rebinding.obj, rebinding.slot)
            out.append(_loop_value(first, value, where,
                                   location(rebinding.write, rebinding.slot)))
        self.kept_outside.update(_check_loop_identity(ctx, out, values, self.first_values,
                                                      self.carry.n_local, where))
        out.extend(self._rebound_flags(region, flags))
        heap.restore(checkpoint)
        return kept_running(tuple(out))

    def _check_fixed(self, state: Sequence[Any], region: Region) -> None:
        """Locals the loop does not carry must not change; numbers it counts with and
        locations it newly rebinds make the loop be traced again, carrying them."""
        widen = set()
        for i, snapshot in self.fixed.items():
            if snapshot_of(state[i]) != snapshot:
                if liftable(self.init[i]) and number_type(state[i]) is type(self.init[i]):
                    widen.add(i)   # a Python number the loop counts with: carry it
                    continue
                raise Unsupported(Reason.LOOP_CARRY_TYPES,
                                  '%s: a Python value (%s) changes inside a tensor-dependent '
                                  'loop; janus keeps Python values Python'
                                  % (self.where, kind_of(self.init[i])))
        # The next attempt carries these too (their conditions are this attempt's).
        more = {k: dataclasses.replace(rebinding, condition=None)
                for k, rebinding in region.keys.items() if k not in self.keys}
        if widen or more:
            raise _Widen(widen, more)

    def _rebound_flags(self, region: Region, flags: Sequence[Any]) -> Iterator[Any]:
        for (k, _), flag in zip(self.carried, flags):
            rebinding = region.keys.get(k)
            if rebinding is None:
                yield flag
            elif rebinding.condition is None:
                yield tf.constant(True)
            else:
                yield tf.logical_or(flag, rebinding.condition)

    def build(self) -> None:
        self.first_values = self.loop_values(self.init) + tuple(
            _loop_value(s, s, self.where, location(rebinding.write, rebinding.slot))
            for s, (_, rebinding) in zip(self.starts, self.carried)) + \
            tuple(tf.constant(False) for _ in self.carried)
        try:
            final = tf.while_loop(self.cond, self.body, self.first_values)
        except ValueError as e:
            if 'shape' not in str(e):
                raise
            final = tf.while_loop(self.cond, self.body, self.first_values,
                                  shape_invariants=tf.nest.map_structure(
                                      _widened_invariant, self.first_values))
        if not isinstance(final, (list, tuple)):
            final = (final,)
        self._finish(list(final))

    def _finish(self, final: Sequence[Any]) -> None:
        """After the loop: its locals bound, each held location written back."""
        heap = self.heap
        for j, value in enumerate(final):
            self.ctx.tensors.note_looped(value, maybe_outside=j in self.kept_outside)
        heap.restore(self.start)
        local, held, flags = self.carry.split(final)
        state = list(self.full_state(local))
        for i in self.untouched:
            state[i] = self.original[i]
        self.set_state(tuple(state))
        for (k, rebinding), first, value, flag in zip(self.carried, self.starts, held, flags):
            obj, slot, write = rebinding.obj, rebinding.slot, rebinding.write
            value = _uncarried(first, value, self.where, self.lineage)
            heap.overlay[k] = value
            if slot.is_item:
                heap.items_written.add(k[0])
            # Written back only when some iteration rebound it (else it keeps its object).
            heap.writes.append(write.changed(value, flag))
            heap.note(obj, slot, write, flag)


def _check_loop_identity(ctx: TraceContext, values: Sequence[Any], given: Sequence[Any],
                         first: Sequence[Any], n_local: int, where: str) -> set[int]:
    """Which carried variables the body may leave holding an outside tensor (an
    argument, ``self.last``), directly or moved from another variable that started
    as one (``a, b = b, a``): eagerly the variable then *is* that tensor, and ``is``
    after the call finds it, but the loop gives a new tensor.  An outside location
    (``self.a``, written back) is refused here; a local's indices are returned, and
    its result may not be written to outside state (``TensorIdentity.note_looped``).
    ``given``: the body's loop variables; ``first``: their values as the loop starts."""
    outside = {id(value): k for k, value in enumerate(given)
               if is_tensor(value) and k < len(first) and is_tensor(first[k])
               and ctx.tensors.holds_input(first[k])}
    kept = set()
    for j, value in enumerate(values):
        for side in _possible_tensors(ctx, value):
            k = outside.get(id(side))
            if ctx.tensors.is_input(side) or (k is not None and k != j and given[k] is side):
                if j >= n_local:
                    raise Unsupported(Reason.TENSOR_IDENTITY,
                                      '%s: janus does not convert keeping a tensor from '
                                      'outside the call (an argument, an attribute) in an '
                                      'outside location a tensor-dependent loop rebinds: the '
                                      'loop would give a copy, not that tensor' % where)
                kept.add(j)
    return kept


def _possible_tensors(ctx: TraceContext, value: Any, depth: int = 0) -> Iterator[tf.Tensor]:
    """``value`` and, through tf.cond merges, every tensor it may be when the graph runs."""
    if not is_tensor(value):
        return
    yield value
    sides = ctx.tensors.merged_sides(value)
    if sides is not None and depth < 32:
        for side in sides[1:]:
            yield from _possible_tensors(ctx, side, depth + 1)


def _is_tensor_structure(value: object) -> bool:
    if not (type(value) is list or isinstance(value, tuple)) or not value:
        return False
    return all(is_tensor(leaf) for leaf in tf.nest.flatten(value))


def _structure_leaves(template: Any, value: Any, passed: Any, where: str) -> list[tf.Tensor]:
    """The tensors of a carried list/tuple after one iteration, as a list.

    The body may rebind it to a new one of the same structure; changing the
    one it was given in place is refused, because other names may share that
    Python list in eager code."""
    if type(value) is not type(template) or not _is_tensor_structure(value):
        raise Unsupported(Reason.LOOP_CARRY_TYPES,
                          '%s: a %s of tensors carried by a tensor-dependent loop becomes %s'
                          % (where, type(template).__name__, kind_of(value)))
    try:
        tf.nest.assert_same_structure(template, value)
    except (ValueError, TypeError):
        raise Unsupported(Reason.LOOP_CARRY_TYPES,
                          '%s: a %s of tensors carried by a tensor-dependent loop changes its '
                          'structure' % (where, type(template).__name__)) from None
    leaves = list(tf.nest.flatten(value))
    if passed is not None and value is passed[0] and any(
            a is not b for a, b in zip(leaves, passed[1])):
        raise Unsupported(Reason.LOOP_CARRY_TYPES,
                          '%s: a %s of tensors is changed in place inside a tensor-dependent '
                          'loop; janus only carries ones the loop rebinds'
                          % (where, type(template).__name__))
    return leaves


def _widened_invariant(value: Any) -> Any:
    if isinstance(value, tf.TensorArray):
        return tf.TensorShape(None)
    rank = value.shape.rank
    return tf.TensorShape([None] * rank) if rank is not None else tf.TensorShape(None)


def _lists_to_tensor_arrays(init: list[Any], body_fn: Callable[[], Any],
                            get_state: Callable[[], Sequence[Any]],
                            set_state: Callable[[Sequence[Any]], object], where: str,
                            lineage: frozenset = frozenset()) -> None:
    """Local lists the loop grows become TensorLists (TensorArrays) in ``init``.

    Only the call's own: an outside list (an argument, passed as itself or
    rebuilt, an attribute's list) grown in the loop would grow a copy, its
    appends lost; that is refused, or with the loop's count from relaxed
    numbers, traced again with them constant (the loop unrolls)."""
    lists = [i for i, v in enumerate(init) if type(v) is list]
    if not lists:
        return
    appended = _dry_run_appends(init, lists, body_fn, get_state, set_state)
    for i in lists:
        items, grown = init[i], appended.get(i, [])
        if not grown:
            continue  # unchanged by the loop: stays a Python list (checked after the body)
        if current().provenance.source_of(items) is not None:
            refuse_values(Reason.OUTSIDE_APPEND_IN_LOOP,
                          '%s: janus does not convert appending to a list from outside the '
                           'call inside a tensor-dependent loop (each iteration would need a '
                           'record of its own); collect the values in a local list and '
                           'extend it after the loop' % where, extra=lineage)
        if not all(is_tensor(v) for v in items + grown):
            raise Unsupported(Reason.GROWN_LIST,
                              '%s: a list grown in a tensor-dependent loop must hold tensors'
                              % where)
        dtype = grown[0].dtype
        shape = grown[0].shape
        for value in items + grown:
            shape = shape.most_specific_compatible_shape(value.shape)
        array = tf.TensorArray(dtype, size=0, dynamic_size=True, element_shape=shape)
        for k, value in enumerate(items):
            array = array.write(k, value)
        init[i] = TensorList(array, where)


def _dry_run_appends(init: Sequence[Any], lists: Sequence[int], body_fn: Callable[[], Any],
                     get_state: Callable[[], Sequence[Any]],
                     set_state: Callable[[Sequence[Any]], object]) -> dict[int, list[Any]]:
    """Traces the body once in a scratch graph to see what it appends to each list
    (what it writes to Python state there is forgotten)."""
    from tensorflow.python.framework import func_graph
    heap = current().heap
    checkpoint = heap.checkpoint()
    probes = list(init)
    for i in lists:
        # a scratch copy of the call's own list
        probes[i] = current().provenance.made(list(init[i]))
    grown = {}
    with func_graph.FuncGraph('janus_dry_run').as_default():
        set_state(tuple(probes))
        region = heap.open_region()
        try:
            in_traced_region(body_fn)
            after = get_state()
            for i in lists:
                # Grown: appended in place, or rebound to the old items plus more
                # (``out = out + [h]``); a list of new items is rebound, not grown.
                if after[i] is probes[i] or (type(after[i]) is list and all(
                        a is b for a, b in zip(after[i], init[i]))):
                    grown[i] = list(after[i])[len(init[i]):]
        finally:
            heap.close_region(region)
            heap.restore(checkpoint)
            set_state(tuple(init))
    return grown


def dynamic_for(ns: FunctionNamespace, site: int, iterable: Any, body_fn: Callable[[Any], Any],
                get_state: Callable[[], Sequence[Any]],
                set_state: Callable[[Sequence[Any]], object]) -> None:
    box = {'i': tf.constant(0)}
    count = tf.shape(iterable)[0]

    def get() -> tuple[Any, ...]:
        return tuple(get_state()) + (box['i'],)

    def put(values: Sequence[Any]) -> None:
        set_state(tuple(values[:-1]))
        box['i'] = values[-1]

    def step() -> None:
        body_fn(tf.gather(iterable, box['i']))
        box['i'] = box['i'] + 1

    dynamic_while(ns, site, lambda: box['i'] < count, step, get, put)
