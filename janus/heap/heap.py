"""The shadow heap: how graphs read and write Python objects (paper §4.2.3).

A converted function's ``obj.name`` and ``obj[key]`` become the ops
``Janus>PyGetAttr``/``PySetAttr``/``PyGetSubscr``/``PySetSubscr``
(janus_ops/heap_ops.cc).  The graph names an object by an int64 *handle*
(``HandleRegistry``) and the current graph run by an int64 *run id*, fed on
every call.  Within a run, sets write only the run's *shadow copy* of
(object, name/key); gets read the shadow copy when the run wrote one, else
the real object.  After the run, ``commit(run_id)`` writes the shadows back
to the objects, in write order, or ``discard(run_id)`` drops them: state
changes all or nothing, so a failed assumption can fall back to eager
execution with nothing to undo (Figure 5).

The kernels call back into this module (``_read_attr``, ``_read_item``,
``_write_attr``, ``_write_item``) under the GIL.  Conversion happens here:
a read returns a C-contiguous NumPy array of the op's dtype, which the kernel
copies into its output; a write receives a memoryview of the tensor's bytes,
copies it into a NumPy array, and keeps that array as the shadow.  Commit
turns shadows into EagerTensors (``tf.constant``), on the committing thread
rather than inside a kernel, so no TF runtime call is made from a running
graph; the user gets exactly what eager code would have stored: an
EagerTensor of the same dtype and shape.

Thread safety: kernels of one or several runs may call in from TF's
inter-op threads at once.  The GIL makes each dict operation atomic, but the
helpers do several in a row (and the GIL may switch threads between any two
bytecodes), so the registry and the shadow table each have their own lock.

Needs the op library (``janus.graph.ops.load_ops``), loaded on the first
op wrapper call.  Importing this module registers the ops' gradients.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import threading
import weakref
import typing

import numpy as np
import tensorflow as tf

from janus.graph import ops

DEAD_OBJECT_MARK = 'JANUS_HEAP_DEAD_OBJECT'
MISMATCH_MARK = 'JANUS_HEAP_MISMATCH'

GET_ATTR = 'Janus>PyGetAttr'
SET_ATTR = 'Janus>PySetAttr'
GET_SUBSCR = 'Janus>PyGetSubscr'
SET_SUBSCR = 'Janus>PySetSubscr'

# Gradients.  A get's value comes from the Python heap, which the graph
# cannot differentiate (its only inputs are the int64 run id and handle), so
# gradients stop there, as at a constant: tape.gradient/tf.gradients answer
# None for the op's inputs and for whatever put the value on the heap,
# without error, and flow normally through what the graph computes from the
# value.  Sets have no outputs, so nothing can be
# differentiated through them; they are registered too, so that gradient
# construction that visits every op (cond_v2/while_v2) never raises
# LookupError.  Consequence for the graph generator: a value read back from
# the heap in the run that wrote it carries no gradient to the written
# tensor; where eager code would differentiate through `self.h = h; ...
# self.h`, forward `h` itself instead of reading it back.
# Try/except: a second registration (importlib.reload) raises KeyError.
for _op_type in (GET_ATTR, SET_ATTR, GET_SUBSCR, SET_SUBSCR):
    try:
        tf.no_gradient(_op_type)
    except KeyError:
        pass


class HeapError(Exception):
    """A heap op cannot do what the graph asks; the op fails INVALID_ARGUMENT."""


class DeadObjectError(HeapError):
    """A handle's object was garbage-collected or released.

    The kernels map this class to FAILED_PRECONDITION; the message carries
    ``JANUS_HEAP_DEAD_OBJECT``.
    """


class MismatchError(HeapError, TypeError):
    """A heap value is not of the dtype/shape the graph was specialized for."""


# ------------------------------------------------------------------ handles


class _Entry:
    """One registered object: a weak or strong reference, and its pins."""

    __slots__ = ('ref', 'strong', 'obj_id', 'pins', 'owners')

    def __init__(self, obj: typing.Any) -> None:
        self.obj_id = id(obj)
        self.ref: weakref.ref | None = None   # when obj supports weak references
        self.strong = None    # obj itself, when it does not
        self.pins = 0         # explicit pins plus one per owner
        self.owners = set()   # ids of the owners holding a pin

    def get(self) -> typing.Any:
        return self.strong if self.ref is None else self.ref()


class HandleRegistry:
    """Int64 handles for the Python objects that graphs access.

    ``pin(obj, owner)`` (alias ``handle_of``) returns ``obj``'s handle, the
    same one while it is registered, and adds a pin: without an owner, one
    that ``release(handle)`` removes; with an owner (the graph, or any weakly
    referenceable object), one released when the owner is garbage-collected,
    so dropping a graph releases what it pinned (an owner pins each object
    once).  The entry goes when its last pin does.

    Objects that support weak references are held weakly, so a graph never
    keeps a user's object alive: their entry also goes when they die.
    Others (list, dict, tuple...) are held strongly until the last pin goes.
    Handles are never reused, so a stale handle can only fail with
    DeadObjectError, never reach another object.
    """

    def __init__(self) -> None:
        # Not reentrant on purpose: see _try_purge.
        self._lock = threading.Lock()
        self._entries = {}          # handle -> _Entry
        self._handle_by_id = {}     # id(obj) -> handle
        self._owner_pins = {}       # (id(owner), handle) -> weakref.finalize
        self._next_handle = 1       # 0 is never a handle
        # Work queued by weakref callbacks (object died; owner died), which
        # can run inside any allocation, even one made by a locked method
        # of this registry: they only queue (deque.append is atomic), and
        # the queue is drained under the lock (_purge).
        self._dead = collections.deque()           # handles
        self._owner_died = collections.deque()     # (owner id, handle)

    def pin(self, obj: typing.Any, owner: typing.Any = None) -> int:
        """``obj``'s handle, pinned once more (by ``owner`` if given)."""
        with self._lock:
            self._purge()
            handle = self._handle_by_id.get(id(obj))
            entry = self._entries.get(handle)
            if entry is None or entry.get() is not obj:
                handle, entry = self._register(obj)
            if owner is None:
                entry.pins += 1
            elif id(owner) not in entry.owners:
                entry.pins += 1
                entry.owners.add(id(owner))
                finalizer = weakref.finalize(
                    owner, _queue_and_purge, weakref.ref(self),
                    '_owner_died', (id(owner), handle))
                finalizer.atexit = False  # type: ignore[misc]  # nothing to release at exit
                self._owner_pins[(id(owner), handle)] = finalizer
            return handle   # type: ignore[return-value]  # registered above when missing

    handle_of = pin

    def release(self, handle: int) -> None:
        """Removes one explicit pin; unknown or gone handles are ignored."""
        with self._lock:
            self._purge()
            self._unpin(handle)

    def resolve(self, handle: int) -> typing.Any:
        """The live object behind ``handle``; DeadObjectError if it is gone."""
        with self._lock:
            self._purge()
            entry = self._entries.get(handle)
            obj = None if entry is None else entry.get()
            known = 0 < handle < self._next_handle
        if obj is not None:
            return obj
        if not known:
            raise HeapError('unknown heap handle %d' % handle)
        raise DeadObjectError(
            '%s: heap handle %d no longer refers to a live object (it was '
            'garbage-collected, or released by the graph that pinned it)'
            % (DEAD_OBJECT_MARK, handle))

    def __len__(self) -> int:
        with self._lock:
            self._purge()
            return len(self._entries)

    def _register(self, obj: typing.Any) -> tuple[int, _Entry]:
        handle = self._next_handle
        self._next_handle += 1
        entry = _Entry(obj)
        try:
            entry.ref = weakref.ref(obj, functools.partial(
                _queue_and_purge, weakref.ref(self), '_dead', handle))
        except TypeError:  # not weakly referenceable: list, dict, int...
            entry.strong = obj
        self._entries[handle] = entry
        self._handle_by_id[id(obj)] = handle
        return handle, entry

    def _unpin(self, handle: int) -> None:
        entry = self._entries.get(handle)
        if entry is not None:
            entry.pins -= 1
            if entry.pins <= 0:
                self._remove(handle)

    def _remove(self, handle: int) -> None:
        entry = self._entries.pop(handle, None)
        if entry is None:
            return
        # A dead object's id may already be mapped to a newer object's
        # handle: remove the mapping only if it is still ours.
        if self._handle_by_id.get(entry.obj_id) == handle:
            del self._handle_by_id[entry.obj_id]
        # Owners that outlive the entry must not keep finalizers for it.
        for owner_id in entry.owners:
            self._owner_pins.pop((owner_id, handle)).detach()

    def _purge(self) -> None:
        """Applies queued deaths. Call with the lock held."""
        while self._dead:
            self._remove(self._dead.popleft())
        while self._owner_died:
            owner_id, handle = self._owner_died.popleft()
            if self._owner_pins.pop((owner_id, handle), None) is not None:
                self._entries[handle].owners.discard(owner_id)
                self._unpin(handle)

    def _try_purge(self) -> None:
        # A callback on a thread already inside a locked method fails to
        # take the (non-reentrant) lock and leaves its work queued for the
        # next call; otherwise the release happens right away.
        if self._lock.acquire(blocking=False):
            try:
                self._purge()
            finally:
                self._lock.release()


def _queue_and_purge(registry_ref: weakref.ref, queue_name: str, item: typing.Any,
                     *_weakref: object) -> None:
    """Weakref/finalize callback: queue ``item``, then purge if possible."""
    registry = registry_ref()
    if registry is not None:
        getattr(registry, queue_name).append(item)
        registry._try_purge()  # pylint: disable=protected-access


# ------------------------------------------------------------------ shadows

_ATTR = 'attr'
_ITEM = 'item'


class ShadowHeap:
    """The shadow copies of every graph run in flight, one table per run id.

    A run's table maps (handle, 'attr'|'item', name|key) to (object, array,
    dtype) in first-write order: commit replays the writes in that order,
    so new dict keys and new attributes appear in the order eager code
    would have added them.  The table holds the written object strongly,
    so a weakly registered object cannot die between a set and the commit.
    """

    def __init__(self, registry: HandleRegistry) -> None:
        self._registry = registry
        self._lock = threading.Lock()
        self._runs = {}           # run id -> {shadow key: (obj, array, dtype)}
        self._next_run = 1        # 0 is never a run id

    def begin_run(self) -> int:
        """A new run id, with an empty shadow table."""
        with self._lock:
            run_id = self._next_run
            self._next_run += 1
            self._runs[run_id] = {}
            return run_id

    def commit(self, run_id: int) -> None:
        """Writes the run's shadows back to the real objects and ends the run.

        Each array becomes an EagerTensor, as eager code would have stored.
        The run ends even if a write-back raises (a property setter, say);
        the writes before it stay done.
        """
        writes = self._end(run_id)
        # Eager tensors even if called while a graph is being built.
        eager = contextlib.nullcontext() if tf.executing_eagerly() else tf.init_scope()
        with eager:
            for (_, kind, key), (obj, array, dtype) in writes.items():
                value = tf.constant(array, dtype=dtype)
                if kind == _ATTR:
                    setattr(obj, key, value)
                else:
                    obj[key] = value

    def discard(self, run_id: int) -> None:
        """Drops the run's shadows; no object changes. Ends the run."""
        self._end(run_id)

    def __len__(self) -> int:
        """The number of runs in flight (begun, neither committed nor discarded)."""
        with self._lock:
            return len(self._runs)

    def read(self, run_id: int, handle: int, kind: str, key: typing.Any) -> typing.Any:
        """The run's shadow of obj.key / obj[key] if it wrote one, else the real value."""
        obj = self._registry.resolve(handle)
        if kind == _ITEM:
            key = _item_key(obj, key, writing=False)
        with self._lock:
            hit = self._table(run_id).get((handle, kind, key))
        if hit is not None:
            return hit[1]
        return getattr(obj, key) if kind == _ATTR else obj[key]

    def write(self, run_id: int, handle: int, kind: str, key: typing.Any, array: np.ndarray,
              dtype: tf.DType) -> None:
        """Records obj.key = array / obj[key] = array in the run's shadow only."""
        obj = self._registry.resolve(handle)
        if kind == _ITEM:
            key = _item_key(obj, key, writing=True)
        with self._lock:
            self._table(run_id)[(handle, kind, key)] = (obj, array, dtype)

    def _table(self, run_id: int) -> dict:
        table = self._runs.get(run_id)
        if table is None:
            raise HeapError(
                'heap run id %d is not in flight (begin_run() it first; '
                'commit/discard end it)' % run_id)
        return table

    def _end(self, run_id: int) -> dict:
        with self._lock:
            table = self._table(run_id)
            del self._runs[run_id]
        return table


def _item_key(obj: typing.Any, key: typing.Any, writing: bool) -> typing.Any:
    """The shadow key of obj[key]: list indices made non-negative.

    Lists cannot change length within a run (only whole items are set), so
    obj[-1] and obj[len - 1] are one shadow.  A set is checked as eager
    code would fail at once (index out of range, immutable container);
    the commit must not be the first to find out.
    """
    if writing and not hasattr(type(obj), '__setitem__'):
        raise TypeError("'%s' object does not support item assignment"
                        % type(obj).__name__)
    if isinstance(obj, (list, tuple)) and isinstance(key, int):
        if not -len(obj) <= key < len(obj):
            raise IndexError('%s %sindex out of range' % (
                type(obj).__name__, 'assignment ' if writing else ''))
        return key % len(obj)
    return key


# ------------------------------------------------------------- conversion


@functools.lru_cache(maxsize=None)
def _dtype(dtype_enum: int) -> tf.DType:
    return tf.dtypes.as_dtype(dtype_enum)


# Which Python scalar types convert to which dtypes, as tf.constant(value,
# dtype) would accept them without loss of kind.
def _scalar_fits(value: typing.Any, dtype: tf.DType) -> bool:
    if isinstance(value, bool):
        return dtype.is_bool
    if isinstance(value, int):
        return dtype.is_integer or dtype.is_floating or dtype.is_complex
    if isinstance(value, float):
        return dtype.is_floating or dtype.is_complex
    return isinstance(value, complex) and dtype.is_complex


def _to_array(value: typing.Any, dtype_enum: int) -> np.ndarray:
    """``value`` as a C-contiguous array of the op's dtype, or MismatchError.

    Accepts what eager code stores in the heap: an EagerTensor or NumPy
    value of exactly that dtype, or a Python scalar of a fitting kind.
    """
    dtype = _dtype(dtype_enum)
    if isinstance(value, tf.Tensor):
        if not hasattr(value, '_numpy'):
            raise _mismatch('a symbolic tf.Tensor', dtype)
        if value.dtype != dtype:
            raise _mismatch('a %s tensor' % value.dtype.name, dtype)
        # _numpy() views a CPU tensor's buffer (numpy() would copy it first);
        # the kernel copies the bytes before this array is dropped.
        return value._numpy()  # pylint: disable=protected-access
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype != dtype.as_numpy_dtype:
            raise _mismatch('a NumPy %s value' % value.dtype, dtype)
        return np.asarray(value, order='C')
    if isinstance(value, (bool, int, float, complex)) and _scalar_fits(value, dtype):
        try:
            return np.asarray(value, dtype=dtype.as_numpy_dtype)
        except OverflowError:
            raise _mismatch('%r (out of range)' % (value,), dtype) from None
    raise _mismatch('a %s' % type(value).__name__, dtype)


def _mismatch(what: str, dtype: tf.DType) -> MismatchError:
    return MismatchError('%s: the value is %s, the graph was specialized for %s'
                         % (MISMATCH_MARK, what, dtype.name))


def _copy_array(dtype_enum: int, shape: typing.Sequence[int], data: memoryview) -> np.ndarray:
    """An array of its own holding the bytes of ``data`` (a tensor's memoryview).

    Copied, because the kernel releases the view on return and TF may then
    reuse the tensor's memory; no view of ``data`` may outlive this call.
    """
    dtype = _dtype(dtype_enum)
    return np.frombuffer(data, dtype=dtype.as_numpy_dtype).reshape(shape).copy()


# -------------------------------------------------- called by the kernels

registry = HandleRegistry()
shadow = ShadowHeap(registry)


def _read_attr(run_id: int, handle: int, name: str, dtype_enum: int) -> np.ndarray:
    return _to_array(shadow.read(run_id, handle, _ATTR, name), dtype_enum)


def _read_item(run_id: int, handle: int, key: typing.Any, dtype_enum: int) -> np.ndarray:
    return _to_array(shadow.read(run_id, handle, _ITEM, key), dtype_enum)


def _write_attr(run_id: int, handle: int, name: str, dtype_enum: int, shape: typing.Sequence[int],
                data: memoryview) -> None:
    shadow.write(run_id, handle, _ATTR, name,
                 _copy_array(dtype_enum, shape, data), _dtype(dtype_enum))


def _write_item(run_id: int, handle: int, key: typing.Any, dtype_enum: int,
                shape: typing.Sequence[int], data: memoryview) -> None:
    shadow.write(run_id, handle, _ITEM, key,
                 _copy_array(dtype_enum, shape, data), _dtype(dtype_enum))


# ------------------------------------------------------- public interface

# The op wrappers are library code: AutoGraph, converting a tf.function
# that calls them, must not descend into them (and the op loader below).
_not_converted = tf.autograph.experimental.do_not_convert


pin = registry.pin
handle_of = registry.handle_of
release = registry.release
begin_run = shadow.begin_run
commit = shadow.commit
discard = shadow.discard


@contextlib.contextmanager
def run_scope() -> typing.Iterator[int]:
    """Yields a new run id; commits it if the body returns, discards it if it raises.

    A run that is never ended keeps its shadows (and the objects written)
    alive, so callers that do not use this must end every run themselves.
    """
    run_id = begin_run()
    try:
        yield run_id
    except BaseException:
        discard(run_id)
        raise
    commit(run_id)


@_not_converted
def py_get_attr(run_id: typing.Any, handle: typing.Any, name: str, dtype: tf.DType,
                shape: typing.Any = None) -> tf.Tensor:
    """``obj.name`` of the object behind ``handle``, in run ``run_id``.

    ``dtype`` and ``shape`` (partially known allowed) are what the graph
    was specialized for; a value that differs fails the op with
    INVALID_ARGUMENT (JANUS_HEAP_MISMATCH).
    """
    return ops.load_ops().janus_py_get_attr(
        run_id=_int64(run_id), handle=_int64(handle), attr_name=name,
        dtype=tf.as_dtype(dtype), shape=tf.TensorShape(shape))


@_not_converted
def py_set_attr(run_id: typing.Any, handle: typing.Any, name: str,
                value: typing.Any) -> tf.Operation:
    """Sets ``obj.name = value`` in run ``run_id``'s shadow copy only.

    Returns the Operation in a graph (order later gets after it with a
    control dependency); None when run eagerly.
    """
    return ops.load_ops().janus_py_set_attr(
        run_id=_int64(run_id), handle=_int64(handle), value=value, attr_name=name)


@_not_converted
def py_get_subscr(run_id: typing.Any, handle: typing.Any, key: typing.Any, dtype: tf.DType,
                  shape: typing.Any = None) -> tf.Tensor:
    """``obj[key]`` (key: an int or str, or a scalar tensor of one)."""
    return ops.load_ops().janus_py_get_subscr(
        run_id=_int64(run_id), handle=_int64(handle), key=_key(key),
        dtype=tf.as_dtype(dtype), shape=tf.TensorShape(shape))


@_not_converted
def py_set_subscr(run_id: typing.Any, handle: typing.Any, key: typing.Any,
                  value: typing.Any) -> tf.Operation:
    """Sets ``obj[key] = value`` in the run's shadow copy only."""
    return ops.load_ops().janus_py_set_subscr(
        run_id=_int64(run_id), handle=_int64(handle), key=_key(key),
        value=value)


def _int64(value: typing.Any) -> tf.Tensor:
    return tf.convert_to_tensor(_no_python_int(value), dtype=tf.int64)


def _key(key: typing.Any) -> tf.Tensor:
    return tf.convert_to_tensor(_no_python_int(key))


def _no_python_int(value: typing.Any) -> typing.Any:
    # Run ids and handles are new ints every call, and TF's eager scalar
    # cache keeps every Python int ever converted to a tensor (with its
    # tensor), so they would leak; NumPy scalars are not cached.
    if isinstance(value, int) and not isinstance(value, bool):
        return np.int64(value)
    return value
