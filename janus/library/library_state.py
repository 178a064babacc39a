"""Python state library code changes while a trace calls it: modelled, or refused.

Needs ``trace_context`` and ``shadow_heap``; the tracer calls ``install``,
``guard_for``, ``restore`` and ``leaked``.  At trace time, Keras code runs
as it is, on the real objects: what it changes there it changes once per
graph, with symbolic tensors, where eager changes it on every call with
values.  Keras 3 does that to one thing on a built layer's call: its
losses.  An entry call clears the layer's and its sublayers' ``_losses``,
``add_loss`` (your ``self.add_loss(kl)``, an ``activity_regularizer``)
appends to them, and ``layer.losses`` after the call reads them.  So while
a thread traces, janus wraps ``Layer._clear_losses`` and ``Layer.add_loss``
(other threads and eager calls go straight through): each change becomes a
shadow-heap write (``clear``, ``extend`` with the tensors), replayed in
program order after every successful run with that run's values, and the
lists get their contents from before the trace back when it ends
(``restore``).

Most layers never hold a loss: clearing a list that was empty when the
trace began, before anything was added to it, writes nothing (a write
would cost every call, and a layer called in a ``tf.while_loop`` or a
``tf.map_fn`` could not convert); one guard checks that those lists are
still empty when the graph runs, in O(1) until some loss was added
anywhere (a ``version`` bumped by eager ``add_loss`` and by the replays).

Anything else a trace leaves in a library object's state that holds one of
its graph tensors (another Keras version's loss or metric lists, say) is
found after the trace (``leaked``) and the trace is refused.
"""
from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn

import tensorflow as tf

from janus.reasons import Reason
from janus import guards, sources
from janus.library import whitelist
from janus.trace import trace_context, tracing
from janus.heap.shadow_heap import Write, WriteKind

_lock = threading.Lock()
_installed = False
version = 0   # bumped whenever a loss is added outside a trace (eagerly, or replayed)
_VERSION = sources.CounterSource(sys.modules[__name__], 'version', 'keras losses added')


def _bump() -> None:
    global version
    version += 1


def install() -> None:
    """Wraps Keras's ``Layer`` once, if the program imported Keras; idempotent."""
    global _installed
    if _installed or 'keras' not in sys.modules:
        return
    with _lock:
        if _installed:
            return
        from keras import layers
        layer = layers.Layer
        if callable(getattr(layer, '_clear_losses', None)) and callable(layer.add_loss):
            _wrap_clear(layer)
            _wrap_add(layer)
        _installed = True


class _Traced:
    """One loss list a trace changed: its contents before, and whether the trace
    must write it (it held losses then, or the trace added some)."""

    def __init__(self, layer: object, losses: list[Any]) -> None:
        self.losses = losses
        self.before = list(losses)
        self.live = bool(self.before)
        self.target = sources.ObjectSource(LossList(layer, losses))


class LossList:
    """What replayed writes call: the layer's loss list, bumping ``version``."""

    def __init__(self, layer: object, losses: list[Any]) -> None:
        self.losses = losses
        self.__qualname__ = '%s.losses' % getattr(layer, 'name', type(layer).__name__)

    def clear(self) -> None:
        self.losses.clear()

    def extend(self, values: Iterable[Any]) -> None:
        self.losses.extend(values)
        _bump()


def _tracing() -> trace_context.TraceContext | None:
    """The trace this thread is in (None: plain Python, eager or another thread)."""
    return tracing.current_or_none()


def _traced(ctx: trace_context.TraceContext, layer: object, losses: list[Any]) -> _Traced:
    record = ctx.library_preimages.get(id(losses))
    if record is None:
        record = ctx.library_preimages[id(losses)] = _Traced(layer, losses)
    return record


def _wrap_clear(layer_class: type[Any]) -> None:
    original = layer_class._clear_losses

    def _clear_losses(self) -> object:
        ctx = _tracing()
        losses = getattr(self, '_losses', None)
        if ctx is None or not isinstance(losses, list):
            return original(self)
        record = _traced(ctx, self, losses)
        result = original(self)
        if record.live:   # else the list is empty at run time too (guard_for)
            _record(ctx, self, record, 'clear', [])
        return result
    layer_class._clear_losses = _clear_losses


def _wrap_add(layer_class: type[Any]) -> None:
    original = layer_class.add_loss

    def add_loss(self, loss: object) -> object:
        ctx = _tracing()
        losses = getattr(self, '_losses', None)
        if ctx is None or not isinstance(losses, list):
            result = original(self, loss)
            _bump()
            return result
        record = _traced(ctx, self, losses)
        before = list(losses)
        result = original(self, loss)
        if len(losses) < len(before) or any(a is not b for a, b in zip(before, losses)):
            _refuse(ctx, Reason.LIBRARY_SIDE_EFFECT,
                    'Keras changed the losses of %s other than by adding to them'
                    % _name(self))
        if len(losses) > len(before):
            record.live = True
            _record(ctx, self, record, 'extend', [list(losses[len(before):])])
        return result
    layer_class.add_loss = add_loss


def _record(ctx: trace_context.TraceContext, layer: object, record: _Traced, method: str,
            args: list[Any]) -> None:
    """``losses.<method>(*args)``, replayed after each successful run."""
    try:
        ctx = tracing.writable_context('the losses of %s' % _name(layer))
    except trace_context.Unsupported as e:
        _refuse(ctx, e.reason, e.context)
    # janus's own record of the call (the arguments list and the losses list in it).
    args = [ctx.provenance.made(list(arg)) if type(arg) is list else arg for arg in args]
    ctx.heap.writes.append(Write(WriteKind.CALL, record.target, method,
                                 ctx.provenance.made(args), None))


def _refuse(ctx: trace_context.TraceContext, reason: Reason, context: str | None) -> NoReturn:
    """Raises Unsupported, remembered on the trace (Keras code may swallow it)."""
    refusals = ctx.refusals
    if refusals is not None:
        refusals.append((reason, context))
    raise trace_context.Unsupported(reason, context)


def _name(layer: object) -> str:
    return 'Keras layer %r' % getattr(layer, 'name', type(layer).__name__)




class EmptyLosses:
    """The loss lists a graph assumes empty when it runs (they were when it was
    traced, and it writes nothing to them before it adds): rechecked only after
    some loss was added somewhere."""

    def __init__(self, lists: list[list[Any]]) -> None:
        self.lists = lists
        self.version = version

    def holds(self, current_version: int) -> bool:
        if current_version == self.version:
            return True
        if any(self.lists):
            return False
        self.version = current_version
        return True

    def __repr__(self) -> str:
        return 'no losses on %d layers as at %d added' % (len(self.lists), self.version)


def guard_for(ctx: trace_context.TraceContext) -> guards.SourceGuard | None:
    """The guard that the lists the trace found empty are empty on a call, or None."""
    empty = [record.losses for record in ctx.library_preimages.values() if not record.before]
    if not empty:
        return None
    return guards.SourceGuard(guards.GuardKind.LIBRARY_CONFIG, _VERSION,
                              EmptyLosses(empty))


def restore(ctx: trace_context.TraceContext) -> None:
    """Gives the lists the trace changed their contents from before it."""
    for record in ctx.library_preimages.values():
        record.losses.clear()   # the list's own methods (Keras tracks some lists' items)
        record.losses.extend(record.before)


def leaked(ctx: trace_context.TraceContext, objects: Iterable[object]) -> str | None:
    """Where a library object among ``objects`` (Keras layers with their sublayers)
    keeps a tensor of this trace's graphs: 'type.attribute', or None."""
    seen = set()
    for obj in _library_objects(objects):
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        for name, value in list(getattr(obj, '__dict__', {}).items()):
            items = value.values() if isinstance(value, dict) else (
                value if isinstance(value, (list, tuple)) else (value,))
            if any(_of_trace(ctx, item) for item in list(items)):
                return '%s.%s' % (type(obj).__name__, name)
    return None


def _library_objects(objects: Iterable[object]) -> Iterator[object]:
    for obj in objects:
        if not whitelist.is_library_object(obj) and not _is_layer(obj):
            continue
        if isinstance(obj, (tf.data.Dataset, tf.RaggedTensor, tf.SparseTensor)) \
                or _graph_iterator(obj):
            continue   # a graph dataset, iterator or composite tensor (an argument's, the
            # call's) is a value over its own graph, immutable
        flatten = getattr(obj, '_flatten_layers', None)
        if _is_layer(obj) and callable(flatten):
            yield from flatten(include_self=True, recursive=True)
        else:
            yield obj


def _graph_iterator(obj: object) -> bool:
    """A tf.data iterator of a graph handle: made by the trace, never kept by a call."""
    resource = getattr(obj, '_iterator_resource', None)
    return isinstance(obj, tf.data.Iterator) and isinstance(resource, tf.Tensor) \
        and not hasattr(resource, 'numpy')


def _is_layer(obj: object) -> bool:
    keras = sys.modules.get('keras')
    layer = getattr(getattr(keras, 'layers', None), 'Layer', None) if keras else None
    return layer is not None and isinstance(obj, layer)


def _of_trace(ctx: trace_context.TraceContext, value: object) -> bool:
    """Whether ``value`` is a symbolic tensor of the trace's graph or one inside it."""
    if not isinstance(value, tf.Tensor) or not hasattr(value, 'graph'):
        return False   # an eager tensor has no graph
    graph = value.graph
    while graph is not None:
        if graph is ctx.top_graph:
            return True
        graph = getattr(graph, 'outer_graph', None)
    return False
