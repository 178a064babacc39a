"""Writes to Python state inside a tf.cond branch (``self.best = loss``,
``self.log.append(acc)``, ``print``, globals, cells, items).

Each is recorded in a shadow-heap region and carries the condition of its
path: the write-back applies only the taken path's writes, in program order,
and a location written on either side reads, after the ``if``, as the merge
of both sides (``_Merged``, a ``shadow_heap.Deferred``).  Needs a
``TraceContext`` with its shadow heap.
"""
from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, cast

import tensorflow as tf

from janus.reasons import Reason
from janus import guards, sources
from janus.control.common import OLD, TensorList, kind_of, refuse_values
from janus.control.values import chosen_between, noted, select
from janus.graph.graph_analysis import graph_of
from janus.trace.lazy_text import LazyText
from janus.values.protocol import graph_tensor
from janus.heap.shadow_heap import Deferred, MISSING, WriteKind
from janus.trace.trace_context import Unsupported
from janus.trace.tracing import current

if TYPE_CHECKING:
    from janus.heap.shadow_heap import Checkpoint, Region, Slot, TraceHeap, Write
    from janus.trace.trace_context import TraceContext


class _Exports:
    """The tensors of one branch's graph that its writes (and the locations it
    rebinds) need after the ``if``: returned by the tf.cond, on the other side as
    stand-ins.  ``replace`` gives a written value with them swapped for the cond's
    outputs."""

    def __init__(self, graph: tf.Graph, where: str) -> None:
        self.graph, self.where = graph, where
        self.tensors: list[tf.Tensor] = []
        self._index: dict[int, int] = {}
        self.outputs: Any = None   # the cond's outputs for ``tensors`` (cond.py)

    def specs(self) -> list[tuple[tf.DType, tuple[int | None, ...] | None]]:
        return [(t.dtype, tuple(t.shape.as_list()) if t.shape.rank is not None else None)
                for t in self.tensors]

    def add(self, value: Any, seen: set[int] | None = None, depth: int = 0) -> None:
        seen = set() if seen is None else seen
        if isinstance(value, tf.Tensor):
            if graph_of(value) is self.graph and id(value) not in self._index:
                self._index[id(value)] = len(self.tensors)
                self.tensors.append(value)
            return
        if depth > 16 or id(value) in seen:
            return
        held = graph_tensor(value)   # a dynamic scalar's
        if held is not None:
            self.add(held, seen, depth + 1)
        elif isinstance(value, _Merged):
            seen.add(id(value))
            for part in value.parts():
                self.add(part, seen, depth + 1)
        elif isinstance(value, TensorList):
            raise Unsupported(Reason.GROWN_LIST,
                              '%s: janus does not convert storing a list grown in a '
                              'tensor-dependent loop from inside a tensor-dependent branch'
                              % self.where)
        elif _is_lazy_text(value):
            seen.add(id(value))
            for part in value.values():
                self.add(part, seen, depth + 1)
        elif isinstance(value, (list, tuple, dict)):
            seen.add(id(value))
            for item in (value.values() if isinstance(value, dict) else value):
                self.add(item, seen, depth + 1)

    def condition(self, side: tf.Tensor, condition: tf.Tensor | None) -> tf.Tensor:
        """A write's condition after the cond: ``side`` (this branch's predicate)
        and the condition it had inside the branch."""
        if condition is None:
            return side
        if graph_of(condition) is self.graph:
            return self.replace(condition)   # a stand-in False on the other path
        return tf.logical_and(side, condition)

    def replace(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        memo = {} if memo is None else memo
        if isinstance(value, tf.Tensor):
            index = self._index.get(id(value)) if graph_of(value) is self.graph else None
            if index is None:
                return value
            current().tensors.note_exported(value, self.outputs[index])
            return self.outputs[index]
        if id(value) in memo:
            return memo[id(value)]
        held = graph_tensor(value)   # a dynamic scalar's: rebuilt around the cond's output
        if held is not None:
            tensor = self.replace(held, memo)
            return value if tensor is held else value.trace_uncarry(tensor, self.where,
                                                                     frozenset())
        if isinstance(value, _Merged):
            memo[id(value)] = value
            out: Any
            out = memo[id(value)] = value.replaced(lambda v: self.replace(v, memo))
            return out
        if _is_lazy_text(value):
            parts = [part if isinstance(part, str) else (self.replace(part[0], memo),) + tuple(
                part[1:]) for part in value.parts]
            if all(a is b or (not isinstance(a, str) and a[0] is b[0])
                   for a, b in zip(parts, value.parts)):
                return value
            return type(value)(parts)
        if isinstance(value, (list, tuple, dict)):
            memo[id(value)] = value   # a cycle keeps the original
            if isinstance(value, dict):
                items: Any = {k: self.replace(v, memo) for k, v in value.items()}
                same = all(items[k] is v for k, v in value.items())
            else:
                items = [self.replace(v, memo) for v in value]
                same = all(a is b for a, b in zip(items, value))
            if same:
                return value
            if type(value) is dict:
                out = items
            elif type(value) is list:
                out = items
            elif type(value) is tuple:
                out = tuple(items)
            elif isinstance(value, tuple):
                out = type(value)(*items)   # a namedtuple, a printed variable
            else:
                raise Unsupported(Reason.BRANCH_CHANGES_PYTHON,
                                  '%s: janus does not convert writing a %s holding a value '
                                  'computed in a tensor-dependent branch'
                                  % (self.where, type(value).__name__))
            memo[id(value)] = current().provenance.made(out)   # rebuilt around the cond's outputs
            return out
        return value


def _is_lazy_text(value: object) -> bool:
    return isinstance(value, LazyText)


class _Merged(Deferred):
    """A location written on either side of a tensor-dependent ``if``: on first
    read (per graph) it is the two sides merged by the predicate — tensors of one
    dtype through ``tf.cond`` (shapes merged), numbers into a dynamic scalar, the
    same Python value as itself — or a refusal naming the ``if``.  A side that did
    not write it has the value from before the ``if`` (``previous``, or read
    from outside the call by ``reader`` only now)."""

    def __init__(self, pred: tf.Tensor, true_value: Any, false_value: Any, previous: Any,
                 reader: Callable[[], Any], where: str, name: str,
                 lineage: frozenset = frozenset()) -> None:
        self.pred, self.sides = pred, {True: true_value, False: false_value}
        self.previous, self.reader, self.where, self.name = previous, reader, where, name
        self.lineage = lineage   # the relaxed numbers the test was computed from
        self._resolved: dict[int, tuple[tf.Graph, Any]] = {}   # id(graph) -> (graph, value)

    def parts(self) -> list[Any]:
        parts = [self.pred] + [v for v in self.sides.values() if v is not OLD]
        return parts + ([self.previous] if self.previous is not MISSING else [])

    def replaced(self, replace: Callable[[Any], Any]) -> _Merged:
        """This merge with its tensors replaced (out of an enclosing branch)."""
        sides = {tag: v if v is OLD else replace(v) for tag, v in self.sides.items()}
        previous = self.previous if self.previous is MISSING else replace(self.previous)
        return _Merged(replace(self.pred), sides[True], sides[False], previous, self.reader,
                       self.where, self.name, self.lineage)

    def resolve(self) -> Any:
        graph = tf.compat.v1.get_default_graph()
        found = self._resolved.get(id(graph))
        if found is not None and found[0] is graph:
            return found[1]
        t, f = self._side(True), self._side(False)
        value = chosen_between(self.pred, t, f, self.where)
        if value is None:
            value = noted(self.pred, t, f, select(self.pred, t, f, self._refuse,
                                                    self.lineage))
        self._resolved[id(graph)] = (graph, value)
        return value

    def _side(self, tag: bool) -> Any:
        value = self.sides[tag]
        if value is OLD:
            value = self.previous if self.previous is not MISSING else self.reader()
        return value.resolve() if isinstance(value, Deferred) else value

    def _refuse(self, t: Any, f: Any) -> NoReturn:
        refuse_values(Reason.BRANCH_TYPES,
                      '%s: after the tensor-dependent if, %s is %s on one path and %s on the '
                       'other; janus does not read it again in the same call (writing it there '
                       'is fine)' % (self.where, self.name, kind_of(t), kind_of(f)), t, f,
                       extra=self.lineage)


def location(write: Write, slot: Slot) -> str:
    """A written location as people name it (``self.best``, ``best``)."""
    if write.kind is WriteKind.ATTR:
        return '%r.%s' % (write.source, write.name)
    if write.kind is WriteKind.ITEM:
        return '%r[%r]' % (write.source, slot.key)
    return write.name


def outside_reader(obj: Any, slot: Slot, write: Write, where: str) -> Callable[[], Any]:
    """How to read a written location's value from before the call (guarded), for
    a side of an ``if`` that did not write it."""
    name = location(write, slot)
    key = slot.key

    def read() -> Any:
        ctx = current()
        source: sources.Source
        # An attribute, item or iterator write always names the object it writes to.
        parent = cast(sources.Source, write.source)
        try:
            if write.kind is WriteKind.ATTR:
                value, source = getattr(obj, key), guards.AttrSource(parent, key)
            elif write.kind is WriteKind.ITEM:
                value, source = obj[key], guards.ItemSource(parent, key)
            elif write.kind is WriteKind.GLOBAL:
                found = obj.get('__builtins__', builtins)
                value, source = obj[key], guards.GlobalSource(
                    obj, key, found if isinstance(found, dict) else vars(found))
            elif write.kind is WriteKind.ADVANCE:   # an outside iterator's position
                value = sources.iterator_state(obj)[1]
                source = guards.IteratorPositionSource(parent)
            elif write.source is not None:   # a cell of a function passed in: this call's
                value = obj.cell_contents
                source = guards.AttrSource(write.source, 'cell_contents')
            else:
                value, source = obj.cell_contents, guards.CellSource(obj, key)
        except (AttributeError, KeyError, IndexError, ValueError):
            raise Unsupported(Reason.BRANCH_TYPES,
                              '%s: %s is set on one path of the tensor-dependent if only and '
                              'did not exist before it; janus does not read it again in the '
                              'same call' % (where, name)) from None
        return ctx.guard_value(source, value)
    return read


class BranchEffects:
    """What one traced branch did to Python state: its writes (in program order),
    the locations it rebound, the outside containers it changed in place."""

    def __init__(self, heap: TraceHeap, base: Checkpoint, region: Region, where: str) -> None:
        self.exports = _Exports(tf.compat.v1.get_default_graph(), where)
        self.writes = heap.writes[len(base.writes):]
        # Each rebound location, and its value at the branch's end.
        self.keys = {k: (rebinding, heap.overlay.get(k, MISSING))
                     for k, rebinding in region.keys.items()}
        pending, before = heap.pending, base.pending
        self.changed = {cid for cid in heap.changed if cid not in base.changed
                        or len(dict.get(pending, cid, ())) != len(dict.get(before, cid, ()))}
        self.poisoned = {cid: why for cid, why in pending.poisoned.items()
                         if cid not in before.poisoned}
        self.items_written = heap.items_written - base.items_written
        for write in self.writes:
            self.exports.add(write.value)
            if write.condition is not None:
                self.exports.add(write.condition)
        for rebinding, value in self.keys.values():
            self.exports.add(value)
            if rebinding.condition is not None:
                self.exports.add(rebinding.condition)


def join(ctx: TraceContext, base: Checkpoint, pred: tf.Tensor, found: Mapping[bool, BranchEffects],
         where: str, lineage: frozenset) -> None:
    """The heap after a tf.cond: both branches' writes, each with its path's
    condition (only the taken path's reach Python), and their rebound locations
    as merges, read lazily."""
    heap = ctx.heap
    sides = {True: pred, False: tf.logical_not(pred)}
    for tag in (True, False):
        effects_ = found[tag]
        for write in effects_.writes:
            heap.writes.append(write.changed(
                effects_.exports.replace(write.value),
                effects_.exports.condition(sides[tag], write.condition)))
    keys = list(found[True].keys) + [k for k in found[False].keys if k not in found[True].keys]
    for k in keys:
        records: dict[bool, Any] = {tag: found[tag].keys.get(k) for tag in (True, False)}
        rebound = (records[True] or records[False])[0]
        obj, slot, write = rebound.obj, rebound.slot, rebound.write
        values = {tag: found[tag].exports.replace(records[tag][1]) if records[tag] else OLD
                  for tag in (True, False)}
        heap.overlay[k] = _Merged(pred, values[True], values[False],
                                  base.overlay.get(k, MISSING),
                                  outside_reader(obj, slot, write, where), where,
                                  location(write, slot), lineage)
        conditions = [records[tag][0].condition for tag in (True, False) if records[tag]]
        if len(conditions) == 2 and conditions[0] is None and conditions[1] is None:
            condition = None   # written on both paths
        else:
            parts = [found[tag].exports.condition(sides[tag], records[tag][0].condition)
                     for tag in (True, False) if records[tag]]
            condition = parts[0] if len(parts) == 1 else tf.logical_or(*parts)
        heap.note(obj, slot, write, condition)
        if slot.is_item:
            heap.items_written.add(k[0])
    for tag in (True, False):
        heap.items_written |= found[tag].items_written
        for cid, why in found[tag].poisoned.items():
            heap.changed.add(cid)
            heap.poison(cid, *why)
        for cid in found[tag].changed:
            heap.changed.add(cid)
            source = ctx.provenance.source_of(heap.objects.get(cid))
            heap.poison(cid, Reason.BRANCH_CHANGES_PYTHON,
                        '%s: %s is changed in place (append/extend/insert/update/a new '
                        'key) inside a tensor-dependent branch, so what it holds after the if '
                        'depends on the run; janus does not read it, or write an index of it, '
                        'again in the same call (appending more is fine)'
                        % (where, repr(source) if source is not None else 'an outside container'))
