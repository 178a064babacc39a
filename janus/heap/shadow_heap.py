"""The trace-time shadow heap: what a graph reads from and writes to Python objects.

Needs a ``TraceContext`` (``operators``); used by the operators that read and
write attributes, items, globals and closure cells.

* Reads of tensors kept in Python objects (``self.state``) are *hoisted*: the
  graph gets a call-time input that re-reads the object's current value on
  every run (guarded by dtype and shape), instead of a constant frozen at
  trace time.
* Writes (``self.state = h``, ``self.d[k] = v``, ``self.outputs.append(h)``,
  ``global step; step += 1``) and ``print(...)`` go to the shadow only: later reads in the same
  trace see the written value, and the graph returns every written value as
  an extra output.  The executor writes them back, in program order, only
  after the run finished — which means every ``Janus>Assert`` passed — so a
  run that fails an assumption changed no Python object (all-or-nothing).
* Inside a tensor-dependent branch (``tf.cond``) or loop (``tf.while_loop``,
  ``control/``) writes are recorded in a *region*: a write made in
  a branch carries the condition under which it happens (a bool the graph
  returns), and the write-back applies only the writes of the path taken.
  After the ``if``, a location written on either side reads as a
  ``Deferred`` value: the two sides merged on first read (or refused then,
  naming the line, when they cannot be merged).
"""
from __future__ import annotations
import abc
import dataclasses
import enum
import threading
import typing

import numpy as np
import tensorflow as tf

from janus import guards, sources
from janus.trace import call_signature
from janus.config import config
from janus.errors import Unsupported
from janus.heap import heap
from janus.values import arrays

_call_time = threading.local()


class _RunToken:
    """Owns the handle pins of one graph run; pins are released when it goes."""


def set_call_arguments(arguments: typing.Mapping[str, typing.Any] | None,
                       run_id: int | None = None) -> None:
    """The arguments (and heap run id) of the graph run about to start: hoisted
    reads re-read from them, heap ops name objects by handles pinned for it."""
    _call_time.arguments = arguments
    _call_time.run_id = run_id
    # Heap ops pin handles for the run's lifetime (the token owns them); only they need it.
    _call_time.token = _RunToken() if run_id is not None else None


def _call_arguments() -> typing.Mapping[str, typing.Any] | None:
    return getattr(_call_time, 'arguments', None)


def call_arguments_now() -> typing.Mapping[str, typing.Any] | None:
    """The arguments of the graph run now starting (for call-time readers)."""
    return _call_arguments()


def _run_id_now() -> np.int64:
    import numpy as np
    return np.int64(_call_time.run_id)


def _handle_now(source: sources.Source) -> np.int64:
    import numpy as np
    return np.int64(heap.pin(source.value(_call_arguments(), {}), owner=_call_time.token))


class WriteKind(enum.StrEnum):
    """What a shadow-heap write does to the Python heap when it is replayed."""
    ATTR = 'attr'      # setattr(obj, name, value)
    ITEM = 'item'      # obj[name] = value
    CALL = 'call'      # obj.name(*value): append/extend/insert/update
    GLOBAL = 'global'  # a declared global
    CELL = 'cell'      # a declared nonlocal (closure cell)
    PRINT = 'print'    # print(*args, **kwargs)
    ADVANCE = 'advance'  # a list/tuple/range iterator moved to a position (sources.iterator_state)


class Slot(typing.NamedTuple):
    """Where in an object a heap location is: a name (an attribute, or a global or
    cell name in its namespace) or an item.  The one spelling of a location: the
    trace heap keys it ``(id(obj), slot)``, whatever wrote it (a Python write, a
    heap op)."""
    is_item: bool
    key: typing.Any    # the name (a str) or the item's key

    @classmethod
    def name(cls, name: str) -> Slot:
        return cls(False, name)

    @classmethod
    def item(cls, key: typing.Any) -> Slot:
        return cls(True, key)


class Write:
    """One write to the Python heap, replayed after a successful run."""

    def __init__(self, kind: WriteKind, source: sources.Source | None, name: typing.Any,
                 value: typing.Any, where: typing.Any, condition: typing.Any = None) -> None:
        assert isinstance(kind, WriteKind), kind
        self.kind = kind
        self.source = source      # where the written object lives (a guards.Source)
        self.name = name          # attribute name, item key, method name, or variable name
        self.value = value        # trace-time value (tensors become graph outputs)
        self.where = where        # the namespace dict / cell for 'global' / 'cell'
        # None: the write happens whenever the run succeeds; else a scalar bool tensor
        # of the trace's graph: it happens only when that is true (a branch's write).
        self.condition = condition

    @property
    def partial(self) -> bool:
        """Whether a failing replay may have applied part of itself (printed some
        arguments, extended by some items)."""
        return self.kind in (WriteKind.PRINT, WriteKind.CALL)

    def changed(self, value: typing.Any, condition: typing.Any) -> Write:
        """The same write with another value and condition (out of a branch)."""
        return Write(self.kind, self.source, self.name, value, self.where, condition)

    def target(self, arguments: typing.Mapping[str, typing.Any], memo: dict) -> typing.Any:
        """The object this write changes: the one the statement saw when it ran.

        A source names an object as it was when the call started (guards and
        hoisted reads see that state too), and the trace gave every object the
        source it was found at then, so the target is its source's value *before*
        any write of the run is applied.  ``GraphEntry.run`` resolves every
        target first: after ``m.front, m.back = m.back, m.front``, a write to
        ``m.front.data`` goes to the old ``m.back``, as eagerly."""
        if self.kind is WriteKind.PRINT:
            return None
        if self.kind is WriteKind.GLOBAL or (self.kind is WriteKind.CELL and self.source is None):
            return self.where
        # An object's, or a cell found through its source (a closure passed in: the
        # current call's cell, not the one the trace saw).
        return self.source.value(arguments, memo)   # type: ignore[union-attr]  # (kinds with one)

    def apply(self, value: typing.Any, target: typing.Any) -> None:
        """Replays the write on ``target`` (``self.target(...)``, resolved before
        the run's first write)."""
        if self.kind is WriteKind.PRINT:
            args, kwargs = value
            print(*args, **kwargs)
        elif self.kind is WriteKind.GLOBAL:
            target[self.name] = value
        elif self.kind is WriteKind.CELL:
            target.cell_contents = value
        elif self.kind is WriteKind.ATTR:
            setattr(target, self.name, value)
        elif self.kind is WriteKind.ITEM:
            target[self.name] = value
        elif self.kind is WriteKind.ADVANCE:
            _advance(target, int(value))
        else:
            getattr(target, self.name)(*value)

    def describe(self) -> str:
        return '%s %s%s' % (self.kind, repr(self.source) + '.' if self.source else '', self.name)


def _advance(iterator: typing.Any, position: int) -> None:
    """Moves an iterator (as the trace saw it at the call's start) to ``position``;
    to its end as a ``for`` loop leaves it: pulled once past the last item, so a
    list or tuple iterator releases its sequence as eagerly."""
    if position == sources.EXHAUSTED:
        for _ in iterator:
            pass
    else:
        iterator.__setstate__(position)


class _Pending(dict):
    """id -> [(method name, args)]; a container changed on one path of a
    tensor-dependent branch has no contents a later read could see (``poisoned``)."""

    def __init__(self, items: typing.Any = (), poisoned: typing.Any = None) -> None:
        super().__init__(items)
        self.poisoned = dict(poisoned or {})   # id -> (Reason, why) its contents are unknown

    def get(self, key: typing.Any, default: typing.Any = None) -> typing.Any:
        if key in self.poisoned:
            raise Unsupported(*self.poisoned[key])
        return super().get(key, default)

    def copy(self) -> _Pending:
        return _Pending({k: list(v) for k, v in self.items()}, self.poisoned)


@dataclasses.dataclass(frozen=True)
class Rebinding:
    """A location (attribute, item, global, cell: ``obj``'s ``slot``) a region
    rebinds, with a ``Write`` of it.  ``condition``: None when rebound whenever
    the region runs, else a bool tensor of the region's graph (rebound by a
    nested branch only when that is true)."""
    obj: object
    slot: Slot
    write: 'Write'
    condition: object = None


class Region:
    """The writes of one tensor-dependent branch or loop body being traced.

    ``keys``: (id(obj), slot) -> the ``Rebinding`` of every location the region
    rebinds."""

    def __init__(self) -> None:
        self.keys = {}


class Checkpoint:
    """The heap's state at one point of the trace, to trace a branch from it again."""

    def __init__(self, heap: TraceHeap) -> None:
        self.overlay = dict(heap.overlay)
        self.writes = list(heap.writes)
        self.changed = set(heap.changed)
        self.pending = heap.pending.copy()
        self.items_written = set(heap.items_written)


class Deferred(abc.ABC):
    """An overlaid value known only when it is read (``TraceHeap.read``): the merge
    of a tensor-dependent branch's two sides, or a refusal that names the line."""

    @abc.abstractmethod
    def resolve(self) -> typing.Any:
        """The value the read sees (or raises the refusal)."""


class WriteLog(list):
    """The trace's Python writes, in program order.  ``first_mark``: the id of the
    newest op of the top graph when the first write was logged (``graph``, set when
    the trace starts): ops up to it come before every Python write in program order.
    A checkpoint restored may drop that write; the mark stays (earlier: conservative)."""

    def __init__(self) -> None:
        super().__init__()
        self.graph = None
        self.first_mark: int | None = None

    def append(self, write: Write) -> None:
        if self.first_mark is None:
            ops = self.graph.get_operations() if self.graph is not None else ()
            self.first_mark = ops[-1]._id if ops else 0
        super().append(write)

    def holds_prints(self) -> bool:
        """Whether a ``print`` held back until the run's end was logged so far."""
        return any(write.kind is WriteKind.PRINT for write in self)


class TraceHeap:
    """Per trace: overlaid values, the write log, and containers changed in place."""

    def __init__(self) -> None:
        self.overlay = {}      # (id(obj), Slot) -> value written earlier in this trace
        self.writes = WriteLog()
        self.changed = set()   # ids of outside containers whose structure changed in place
        self.pending = _Pending()   # id -> [(method name, args)]: those changes, in program order
        self.items_written = set()   # ids of outside containers with an item written
        self.objects = {}      # id -> an outside container changed in place (for messages)
        self._keep = []
        self.op_writes = {}    # (id(obj), key) -> True where a Janus>PySet* op wrote it
        self.run_id = None     # the run id input (heap_ops mode), made on first use
        self.handles = {}      # source.uid() -> handle input (heap_ops mode)
        self.regions = []      # open write regions (control/), innermost last
        self.scanned = {}      # id(graph) -> (graph, ops scanned, first state change id)

    def change(self, obj: typing.Any, method: str, args: typing.Sequence) -> None:
        """``obj.append(x)`` and friends on an outside container: later reads in the
        same call see the container as changed (``TraceContext.contents``)."""
        if method == '__setitem__' and type(obj) is list and id(obj) in self.pending.poisoned:
            # Whether the index exists depends on the path an earlier branch took.
            raise Unsupported(*self.pending.poisoned[id(obj)])
        self.changed.add(id(obj))
        self.objects[id(obj)] = obj
        dict.setdefault(self.pending, id(obj), []).append((method, tuple(args)))
        self._keep.append(obj)

    def read(self, obj: typing.Any, slot: Slot) -> typing.Any:
        value = self.overlay.get((id(obj), slot), _MISSING)
        if isinstance(value, Deferred):
            return value.resolve()
        return value

    def write(self, obj: typing.Any, slot: Slot, write: Write) -> None:
        self.overlay[(id(obj), slot)] = write.value
        if slot.is_item:
            self.items_written.add(id(obj))
        self._keep.append(obj)
        self.writes.append(write)
        self.note(obj, slot, write, None)

    def note(self, obj: typing.Any, slot: Slot, write: Write, condition: typing.Any) -> None:
        """Records in the innermost open region that ``obj``'s ``slot`` was rebound:
        under ``condition``, or also under the conditions it was rebound before in
        the region (a loop body's second conditional write must not hide the first)."""
        if not self.regions:
            return
        keys = self.regions[-1].keys
        earlier = keys.get((id(obj), slot))
        if earlier is not None and condition is not None:
            condition = None if earlier.condition is None \
                else tf.logical_or(earlier.condition, condition)
        keys[(id(obj), slot)] = Rebinding(obj, slot, write, condition)

    # -- regions (control/) ---------------------------------------
    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self)

    def restore(self, checkpoint: Checkpoint) -> None:
        self.overlay = dict(checkpoint.overlay)
        self.writes[:] = checkpoint.writes
        self.changed = set(checkpoint.changed)
        self.pending = checkpoint.pending.copy()
        self.items_written = set(checkpoint.items_written)

    def open_region(self) -> Region:
        region = Region()
        self.regions.append(region)
        return region

    def close_region(self, region: Region) -> None:
        assert self.regions and self.regions[-1] is region
        self.regions.pop()

    def poison(self, container_id: int, reason: typing.Any, context: str) -> None:
        """A container changed on one path only: later reads of it are refused
        (``reason``, a ``Reason``; ``context``, the message)."""
        self.pending.poisoned[container_id] = (reason, context)

    def differs(self, obj: typing.Any) -> bool:
        """Whether the call changed this container's items or structure: observations
        of it must look at its contents as changed, not at the real object."""
        return id(obj) in self.changed or id(obj) in self.items_written


_MISSING = object()
MISSING = _MISSING


def hoist_tensor(ctx: typing.Any, source: sources.Source, value: tf.Tensor) -> tf.Tensor:
    """A call-time graph input that re-reads ``source``; guarded by dtype and shape.

    With ``config.heap_ops``, attribute and item reads are Janus>PyGetAttr /
    PyGetSubscr ops instead (the slower, in-graph path of the paper)."""
    if (config.heap_ops and isinstance(source, (guards.AttrSource, guards.ItemSource))
            and type(getattr(source, 'key', '')) in (int, str)):
        return read_op(ctx, source, value)
    shape = value.shape
    key = ('heap',) + source.uid()
    if ctx.shapes is not None:
        previous = ctx.shapes.get(key)
        shape = call_signature.widen_shape(previous, shape) if previous is not None else shape
        ctx.shapes[key] = shape
    shape = call_signature.specialized(shape)
    spec = tf.TensorSpec(shape, value.dtype)
    ctx.guards.add(guards.GuardKind.TENSOR_MATCH, source, (value.dtype, shape))

    def read_now() -> typing.Any:
        return source.value(_call_arguments(), {})
    hoisted = ctx.top_graph.capture_call_time_value(read_now, spec, key=('janus', key))
    _register_reader(ctx, ('janus', key), read_now)
    # A call-time input of the top graph wherever it is read (a branch captures it):
    # stored or returned as is, it comes back as the very tensor read.
    ctx.tensors.register(source, hoisted)
    return hoisted


def hoist_array(ctx: typing.Any, source: sources.Source,
                value: np.ndarray) -> tuple[tf.Tensor, tuple]:
    """A call-time graph input fed with the NumPy array at ``source`` as it is when the
    graph runs (a copy of its values then: an in-place write between calls is seen);
    guarded by type, dtype and shape (ARRAY_MATCH; with relaxed shapes, a dimension
    that differed between traces is None, any size).  Returns (the input, its shape)."""
    shape = tf.TensorShape(value.shape)
    key = ('heap-array', value.ndim) + source.uid()
    if ctx.shapes is not None:
        previous = ctx.shapes.get(key)
        shape = call_signature.widen_shape(previous, shape) if previous is not None else shape
        ctx.shapes[key] = shape
    shape = tuple(call_signature.specialized(shape).as_list())
    ctx.guards.add(guards.GuardKind.ARRAY_MATCH, source, (value.dtype, shape))

    def read_now() -> tf.Tensor:
        return arrays.feed(source.value(_call_arguments(), {}))
    key = ('janus', 'array') + source.uid()
    spec = tf.TensorSpec(shape, tf.as_dtype(value.dtype))
    hoisted = ctx.top_graph.capture_call_time_value(read_now, spec, key=key)
    _register_reader(ctx, key, read_now)
    return hoisted, shape


def hoist_numbers(ctx: typing.Any, source: sources.Source, value: typing.Sequence,
                  natural: tf.DType, dtype: tf.DType | None = None) -> tf.Tensor:
    """A call-time graph input fed with the list of numbers at ``source`` as it is when
    the graph runs (``tf.constant`` of it, as TF converts it eagerly), any length;
    guarded by the container type and ``natural``, the dtype TF converts its items
    to (NUMBERS_MATCH); fed as ``dtype`` (default ``natural``).  ``relaxation.py``
    relaxes a list to this after its values changed between calls
    (``tf.one_hot(actions, n)`` with this episode's actions)."""
    dtype = natural if dtype is None else dtype
    ctx.guards.add(guards.GuardKind.NUMBERS_MATCH, source, (type(value), natural))

    def read_now() -> tf.Tensor:
        return tf.constant(source.value(_call_arguments(), {}), dtype)
    key = ('janus', 'numbers', dtype.name) + source.uid()
    hoisted = ctx.top_graph.capture_call_time_value(read_now, tf.TensorSpec([None], dtype),
                                                    key=key)
    _register_reader(ctx, key, read_now)
    return hoisted


def hoist_scalar(ctx: typing.Any, source: sources.Source, kind: type) -> tf.Tensor:
    """A call-time graph input that re-reads the relaxed Python number at ``source``
    (``self.step``): a scalar int64/float64, guarded by type and range only."""
    dtype = {int: tf.int64, float: tf.float64, bool: tf.bool}[kind]
    ctx.guards.add(guards.GuardKind.SCALAR_MATCH, source, kind)

    tensors = call_signature.ScalarTensors(kind)

    def read_now() -> tf.Tensor:
        return tensors.tensor(source.value(_call_arguments(), {}))
    key = ('janus', 'scalar') + source.uid()
    placeholder = ctx.top_graph.capture_call_time_value(read_now, tf.TensorSpec([], dtype),
                                                        key=key)
    _register_reader(ctx, key, read_now)
    leaves = ctx.host.leaves
    if leaves is not None:   # graphgen/hostcheck.py computes checks on it before the run
        leaves[placeholder.name] = ('source', source, kind)
    return placeholder


def hoist_eager_zero(ctx: typing.Any, source: sources.Source, key_dtype: tf.DType | None,
                     dtype: tf.DType) -> tf.Tensor:
    """A call-time graph input: when the relaxed float at ``source`` is a zero, eager's
    own conversion of it (``tf.convert_to_tensor(value, key_dtype)``: its scalar cache
    decides the sign, and learns it as eager code would teach it); a zero of ``dtype``
    otherwise, unused (``scalars._converted_float``)."""
    with tf.init_scope():
        unused = tf.constant(np.zeros((), dtype.as_numpy_dtype))   # NumPy: never cached

    def read_now() -> tf.Tensor:
        value = source.value(_call_arguments(), {})
        if type(value) is float and value == 0.0:
            return tf.convert_to_tensor(value, dtype=key_dtype)
        return unused
    key = ('janus', 'eager_zero', dtype.name, key_dtype and key_dtype.name) + source.uid()
    placeholder = ctx.top_graph.capture_call_time_value(read_now, tf.TensorSpec([], dtype),
                                                        key=key)
    _register_reader(ctx, key, read_now)
    return placeholder


def _register_reader(ctx: typing.Any, key: typing.Any,
                     read_now: typing.Callable[[], typing.Any]) -> None:
    """``read_now`` gives a value its guard checks (an eager tensor of the capture's dtype
    and a compatible shape): a run may call it without TF's re-check of the result
    (``tracer._captured_reader``).  The first closure of a key is the one TF keeps."""
    readers = ctx.host.call_time_readers
    if readers is not None:
        readers.setdefault(key, read_now)


# -- the in-graph path (config.heap_ops): Janus>Py* ops on handles -------------

def run_id_input(ctx: typing.Any) -> tf.Tensor:
    if ctx.heap.run_id is None:
        ctx.heap.run_id = ctx.top_graph.capture_call_time_value(
            _run_id_now, tf.TensorSpec([], tf.int64), key=('janus', 'run_id'))
    return ctx.heap.run_id


def handle_input(ctx: typing.Any, source: sources.Source) -> tf.Tensor:
    """A call-time input: the handle of the object ``source`` names in this call."""
    key = source.uid()
    if key not in ctx.heap.handles:
        ctx.heap.handles[key] = ctx.top_graph.capture_call_time_value(
            lambda: _handle_now(source), tf.TensorSpec([], tf.int64),
            key=('janus', 'handle') + key)
    return ctx.heap.handles[key]


def read_op(ctx: typing.Any, source: sources.AttrSource | sources.ItemSource,
            value: tf.Tensor) -> tf.Tensor:
    """``obj.name`` / ``obj[key]`` of a tensor, read in the graph by a Janus>Py* op."""
    shape = value.shape
    ctx.guards.add(guards.GuardKind.TENSOR_MATCH, source, (value.dtype, shape))
    base = handle_input(ctx, source.base)
    if isinstance(source, guards.AttrSource):
        return heap.py_get_attr(run_id_input(ctx), base, source.name, value.dtype, shape)
    return heap.py_get_subscr(run_id_input(ctx), base, source.key, value.dtype, shape)


def write_op(ctx: typing.Any, obj: typing.Any, source: sources.Source, slot: Slot,
             value: tf.Tensor) -> tf.Operation:
    """``obj.name = t`` / ``obj[key] = t`` of a tensor, into the run's shadow copy."""
    kind = WriteKind.ITEM if slot.is_item else WriteKind.ATTR
    if ctx.region_depth:
        # Inside a tensor-dependent branch or loop: a shadow write like any other (it
        # carries its path's condition; control/), written back after the
        # run and so after the ops' commit, as program order has it.
        ctx.heap.write(obj, slot, Write(kind, source, slot.key, value, None))
        return
    base = handle_input(ctx, source)
    # The op's write is committed before the Python write-backs: an earlier
    # Python write of the same location must not land after it.
    ctx.heap.writes[:] = [w for w in ctx.heap.writes
                          if not (w.kind == kind and w.name == slot.key
                                  and w.source is not None and w.source.uid() == source.uid())]
    if slot.is_item:
        heap.py_set_subscr(run_id_input(ctx), base, slot.key, value)
    else:
        heap.py_set_attr(run_id_input(ctx), base, slot.key, value)
    ctx.heap.op_writes['%s %r.%s (Janus>PySet op)' % (kind.value, source, slot.key)] = True
    ctx.heap.overlay[(id(obj), slot)] = value
    if slot.is_item:
        ctx.heap.items_written.add(id(obj))
    ctx.heap._keep.append(obj)
