"""Loops over a list, tuple or range iterator from outside the call
(``for x in it`` where ``it = iter(batches)`` was passed in or kept on ``self``).

Needs a ``TraceContext`` (``tracing.current``); ``statements.loop_iterable`` calls
in here for a ``for`` loop whose iterable has a source.

Python exposes such an iterator's state without advancing it
(``sources.iterator_state``): the sequence it walks and how far it got.  The
trace guards both (the position by value, the sequence as any outside
container: its length and items, ``TraceContext.view``), unrolls the items left,
and records where the loop leaves the iterator as a shadow-heap write
(``WriteKind.ADVANCE``), replayed like any other write once the run passed its
assertions: a loop that ran to the end leaves a list or tuple iterator
exhausted (its sequence released, as eagerly), a ``break`` one item past the
last item the body saw.  A second loop over the same iterator in the call starts
where the first left it (the position is a heap location the trace reads
back).  A break the graph decides (a tensor flag) is refused by ``for_stmt``: the
graph could not tell how far the iterator went.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from janus import guards, sources
from janus.guards import GuardKind
from janus.reasons import Reason
from janus.heap.shadow_heap import MISSING, Slot, Write, WriteKind
from janus.trace.trace_context import Unsupported
from janus.values.protocol import is_graph_number

if TYPE_CHECKING:
    from janus.sources import Source
    from janus.trace.trace_context import TraceContext

POSITION = Slot.name('<iterator position>')   # the trace heap's key for an iterator's position


def is_sequence_iterator(value: object) -> bool:
    return type(value) in sources.SEQUENCE_ITERATORS


def unchanged_while_iterated(ctx: TraceContext, container: Any,
                             items: Iterable[Any]) -> Iterator[Any]:
    """An outside dict's keys (a deque's items, a dict view's), each step checking
    that the body did not add or remove one: eagerly that raises RuntimeError at the
    next pull (janus refuses: the imperative run raises it)."""
    pending = lambda: len(dict.get(ctx.heap.pending, id(container), ()))   # noqa: E731
    start = pending()
    for item in items:
        _check_unchanged(container, pending() != start)
        yield item
    _check_unchanged(container, pending() != start)   # (eagerly: at the pull that ends it)


def _check_unchanged(container: Any, changed: bool) -> None:
    if changed:
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          'janus does not convert a loop over an outside %s that the loop '
                          'changes' % type(container).__name__)


def list_items(ctx: TraceContext, sequence: Any) -> _Indexed:
    """A loop's pulls from an outside list (``for x in self.items``), read live."""
    return _Indexed(LiveItems(ctx, sequence))


class _Indexed:
    def __init__(self, items: LiveItems) -> None:
        self.items, self.index = items, 0

    def __iter__(self) -> _Indexed:
        return self

    def __next__(self) -> Any:
        if self.index >= len(self.items):
            raise StopIteration
        self.index += 1
        return self.items[self.index - 1]


def outside_items(ctx: TraceContext, iterator: Any, source: Source) -> _Pulls:
    """An iterator the trace pulls the outside iterator's remaining items from,
    each pull recorded as that iterator's new position."""
    sequence, position = sources.iterator_state(iterator)
    known = ctx.heap.read(iterator, POSITION)
    if known is MISSING:
        ctx.guards.add(GuardKind.VALUE_MATCH, guards.IteratorPositionSource(source), position)
    elif is_graph_number(known) or not isinstance(known, int):
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          'janus does not convert a loop over a %s that a tensor-dependent '
                          'branch earlier in the call may have advanced'
                          % type(iterator).__name__)
    else:
        position = known
    if position == sources.EXHAUSTED:
        return _Pulls(ctx, iterator, source, LiveItems(ctx, ()), position)
    if type(sequence) is range:   # immutable: its start, stop and step
        ctx.guards.add(GuardKind.VALUE_MATCH, guards.IteratorSequenceSource(source), sequence)
        return _Pulls(ctx, iterator, source, LiveItems(ctx, tuple(sequence)), position)
    # The trace's own value for it: the rebuilt argument where the list was also
    # passed in (``f(batches, iter(batches))``: one object, as eagerly).
    sequence = ctx.guard_value(guards.IteratorSequenceSource(source), sequence)
    return _Pulls(ctx, iterator, source, LiveItems(ctx, sequence), position)


class LiveItems:
    """An outside list or tuple's items as the loop over it sees them at each step:
    the body's appends and item writes to the list (this call's, in the trace heap)
    are seen by the next steps, as eagerly (a list iterator reads the list itself)."""

    def __init__(self, ctx: TraceContext, sequence: Any) -> None:
        self.ctx, self.sequence = ctx, sequence
        self.live = type(sequence) is list   # a tuple or a range cannot change
        self._seen: tuple[int, int, int] | None = None
        self._items: list[Any] | None = None

    def __len__(self) -> int:
        return len(self._current())

    def __getitem__(self, index: int) -> Any:
        return self._current()[index]

    def _current(self) -> Any:
        heap, sequence = self.ctx.heap, self.sequence
        version = (len(heap.writes), len(dict.get(heap.pending, id(sequence), ())),
                   len(sequence)) if self.live else None
        if self._items is None or version != self._seen:   # written since: as it is now
            self._seen = version
            self._items = list(self.ctx.view(sequence)) \
                if self.ctx.provenance.source_of(sequence) is not None else list(sequence)
        return self._items


class _Pulls:
    """The items from ``position`` on; every pull moves the recorded position (a
    ``break`` leaves it after the item the body saw, the end leaves a list or
    tuple iterator exhausted, a range iterator at its length)."""

    def __init__(self, ctx: TraceContext, iterator: Any, source: Source, items: LiveItems,
                 position: int) -> None:
        self.ctx, self.iterator, self.source = ctx, iterator, source
        self.items, self.position = items, position
        self.ranged = type(iterator) is type(iter(range(0)))
        self.last: Write | None = None   # this loop's newest position write

    def __iter__(self) -> _Pulls:
        return self

    def __next__(self) -> Any:
        if self.position == sources.EXHAUSTED:
            raise StopIteration
        if self.position >= len(self.items):
            if not self.ranged:
                self._move(sources.EXHAUSTED)
            raise StopIteration
        item = self.items[self.position]
        self._move(self.position + 1)
        return item

    def _move(self, position: int) -> None:
        self.position = position
        heap = self.ctx.heap
        if heap.writes and heap.writes[-1] is self.last:
            heap.writes.pop()   # nothing between: one write, the newer position
        self.last = Write(WriteKind.ADVANCE, self.source, POSITION.key, position, None)
        heap.write(self.iterator, POSITION, self.last)
