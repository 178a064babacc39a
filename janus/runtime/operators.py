"""The operators converted code calls while it is traced into a graph.

Needs a ``TraceContext`` to be entered (``tracer.py`` does it) before any
converted function runs.  Each operator does what plain Python would do and
also (a) records where a value read from outside the call came from, adding
the guard that keeps the graph valid for the next call, or (b) refuses, with
``Unsupported``, what a graph cannot reproduce faithfully, so the call runs
imperatively instead.
"""
import enum
import functools
import inspect
import threading
import types

import tensorflow as tf

from janus import guards
from janus.errors import ConversionError, InvariantError
from janus.guards import GuardKind
from janus import callables
from janus.decisions import DYNAMIC
from janus.runtime import layers, shadow_heap, whitelist
from janus.runtime.namespace import FunctionNamespace
from janus.runtime.shadow_heap import MISSING, Write

_local = threading.local()
builtins_iter = iter  # `iter` below is the runtime operator of the same name


class Unsupported(ConversionError):
    """Raised at trace time; the tracer adds the user's source line."""


class Assumption:
    """One speculation checked inside the graph by a ``Janus>Assert``.

    ``kind``: BRANCH (a test's outcome), TRIP_COUNT (a loop's length), RAISE
    (a raising branch is not taken), ASSERT (a user ``assert``), NONEMPTY_LOOP
    (a dynamic loop under a tape runs at least once), AGREEMENT (all ranks'
    assumptions held).  Only BRANCH and TRIP_COUNT are relaxed when they break.  ``site`` is
    the (code object, site id) the profile and plan know it by.
    """

    def __init__(self, assumption_id, kind, filename, lineno, description, site=None):
        self.id, self.kind, self.site = assumption_id, kind, site
        self.filename, self.lineno, self.description = filename, lineno, description

    @property
    def speculative(self):
        return self.kind in ('BRANCH', 'TRIP_COUNT')

    def __repr__(self):
        return '#%d %s at %s:%s: %s' % (self.id, self.kind, self.filename, self.lineno,
                                         self.description)


class TraceContext:
    """What one trace learns: guards on outside values, in-graph assumptions."""

    def __init__(self, fn, arguments, plan, convert):
        self.fn = fn
        self.plan = plan
        self.convert = convert   # fn -> Converted: the generator's, handed in (no import cycle)
        self.dynamic_depth = 0  # > 0 while tracing a tf.cond branch or tf.while_loop body
        self.top_graph = None
        self.heap = shadow_heap.TraceHeap()
        self.last_loop_reads_variables = False   # set while tracing a tf.while_loop body
        self.soft_conditions = None   # a list in distributed steps: assumptions agreed on, see distributed.py
        self.shapes = None      # relaxed shapes of hoisted heap reads, kept across traces
        self.guards = []
        self._guard_keys = set()
        self._sources = {}     # id(obj) -> Source, for objects from outside the call
        self._keep = []        # keeps those objects alive so ids stay unique
        self.assumptions = []
        self.assert_ops = []
        self.converted = {}    # code object -> Converted, for to_code/explain
        self.code_objects = set()
        self.stack = []
        self.aliasable = []    # (source, value) of every outside object, each source once
        self._aliasable_uids = set()

    # -- sources ---------------------------------------------------------
    def register_arguments(self, arguments):
        """Gives the objects the trace sees as arguments (containers rebuilt around
        placeholders, other objects themselves) their ``ArgSource``."""
        for name, value in arguments.items():
            self._register_argument(guards.ArgSource(name), value, set())

    def _register_argument(self, source, value, visiting):
        if type(value) in guards.PRIMITIVES or isinstance(value, tf.Tensor):
            return
        self._remember(source, value)
        if isinstance(value, types.MethodType):   # obj.method passed: obj is outside too
            self._register_argument(guards.AttrSource(source, '__self__'), value.__self__,
                                    visiting)
            return
        if id(value) in visiting:
            return   # a cyclic argument: its items were registered on the way in
        visiting.add(id(value))
        if type(value) is list or isinstance(value, tuple):
            for i, item in enumerate(value):
                self._register_argument(guards.ItemSource(source, i), item, visiting)
        elif type(value) is dict:
            for key, item in value.items():
                self._register_argument(guards.ItemSource(source, key), item, visiting)

    def _remember(self, source, value):
        if not _captured_by_identity(value) and not isinstance(value, tf.Tensor) \
                and source.uid() not in self._aliasable_uids:
            self._aliasable_uids.add(source.uid())
            self.aliasable.append((source, value))
        if id(value) not in self._sources:
            self._sources[id(value)] = source
            self._keep.append(value)

    def register_default(self, fn, name, value):
        """A callee's default argument: an outside object, written through the heap."""
        if type(value) in guards.PRIMITIVES or isinstance(value, tf.Tensor):
            return value
        return self.guard_value(guards.DefaultSource(fn, name), value, hoist=False)

    def alias_guard(self, arguments):
        """One guard on which outside objects are the same object: ``f(a, a)`` and
        ``f(a, b)`` need different graphs.  The expected partition is computed from
        the real call's values (the trace sees rebuilt argument containers)."""
        if len(self.aliasable) < 2:
            return None
        sources = [source for source, _ in self.aliasable]
        return guards.AliasGuard(sources, guards.AliasGuard.partition(sources, arguments))

    def source_of(self, value):
        if type(value) in guards.PRIMITIVES or isinstance(value, tf.Tensor):
            return None
        return self._sources.get(id(value))

    def add_guard(self, kind, source, expected):
        key = (kind, source.uid())
        if key not in self._guard_keys:
            self._guard_keys.add(key)
            self.guards.append(guards.SourceGuard(kind, source, expected))

    def guard_value(self, source, value, hoist=True):
        """Guards a value read from ``source``, remembers where it lives, and returns
        what the trace should use: the value, or for a tensor a hoisted graph input."""
        kind = type(value)
        if kind in guards.PRIMITIVES:
            self.add_guard(GuardKind.VALUE_MATCH, source, value)
            return value
        if kind is guards.EagerTensor and hoist and self.top_graph is not None:
            return shadow_heap.hoist_tensor(self, source, value)
        if isinstance(value, tf.Tensor) and kind is not guards.EagerTensor:
            return value   # already in this graph: an argument's placeholder or a hoisted read
        if isinstance(value, enum.Enum):
            self.add_guard(GuardKind.ID_MATCH, source, value)   # Mode.EVAL is not Mode.TRAIN
            return value
        if type(value).__module__ == 'numpy':
            raise Unsupported('janus does not convert reading the NumPy value %r from outside '
                              'the call (it would be frozen into the graph); keep it in a '
                              'tf.Variable or pass a tensor' % (source,))
        if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
            self.add_guard(GuardKind.METHOD_MATCH, source, value.__func__)
            return value
        if kind in (list, dict) or isinstance(value, tuple):
            self.add_guard(GuardKind.TYPE_MATCH, source, kind)   # contents: guard_deep, lazily
        elif _captured_by_identity(value):
            self.add_guard(GuardKind.ID_MATCH, source, value)
        else:
            self.add_guard(GuardKind.TYPE_MATCH, source, kind)
        self._remember(source, value)
        return value

    def guard_deep(self, value, depth=0):
        """Guards the length and every item of an outside container code will read."""
        source = self.source_of(value)
        if source is None or depth > 8:
            return
        if id(value) in self.heap.changed:
            raise Unsupported('janus does not convert reading a %s from outside the call after '
                              'changing it in place in the same call' % type(value).__name__)
        if self._guard_flat_constants(source, value):
            return
        if isinstance(value, (list, tuple)):   # list subclasses too (Keras's TrackedList)
            self.add_guard(GuardKind.LEN_MATCH, source, (type(value), len(value)))
            items = enumerate(value)
        elif type(value) is dict:
            self.add_guard(GuardKind.KEYS_MATCH, source, list(value))
            items = value.items()
        else:
            return
        for key, item in items:
            if self.heap.read(value, ('item', key)) is not MISSING:
                continue   # written earlier in this call: the trace knows it
            self.guard_value(guards.ItemSource(source, key), item, hoist=False)
            self.guard_deep(item, depth + 1)

    def contents(self, value, depth=0):
        """Guards an outside container's length and items and returns a copy of it in
        which every tensor is re-read on each run (hoisted), for values that flow into
        the graph: library arguments, loops, slices, print."""
        source = self.source_of(value)
        if source is None or depth > 8 or not isinstance(value, (list, tuple, dict)):
            return value
        if id(value) in self.heap.changed:
            raise Unsupported('janus does not convert reading a %s from outside the call after '
                              'changing it in place in the same call' % type(value).__name__)
        if self._guard_flat_constants(source, value):
            return type(value)(value) if type(value) in (list, tuple, dict) else list(value)
        if isinstance(value, dict):
            self.add_guard(GuardKind.KEYS_MATCH, source, list(value))
            return {k: self.contents(self._item_now(value, source, k, v), depth + 1)
                    for k, v in value.items()}
        self.add_guard(GuardKind.LEN_MATCH, source, (type(value), len(value)))
        items = [self.contents(self._item_now(value, source, i, v), depth + 1)
                 for i, v in enumerate(value)]
        if type(value) is tuple or not isinstance(value, tuple):
            return tuple(items) if type(value) is tuple else items   # a Keras TrackedList: a list
        return type(value)(*items)   # a namedtuple

    def _guard_flat_constants(self, source, value):
        """One EQUALS_MATCH guard for a list/tuple (or a dict's keys and values) of
        Python constants: a 2,000-word vocabulary is one C-level compare per call,
        not 2,000 guards.  False (nothing guarded) for anything else."""
        if type(value) not in (list, tuple, dict) or len(value) < 2:
            return False
        items = list(value.values()) + list(value) if type(value) is dict else value
        if not all(type(item) in guards.PRIMITIVES for item in items):
            return False
        if any(self.heap.read(value, ('item', k)) is not MISSING
               for k in (value if type(value) is dict else range(len(value)))):
            return False
        snapshot = type(value)(value)
        self.add_guard(GuardKind.EQUALS_MATCH, source, (snapshot, tuple(map(type, snapshot))))
        return True

    def _item_now(self, container, source, key, value):
        """An item as this point of the call sees it: written earlier in the call
        (``obj.items[0] = x``), or the guarded outside value."""
        written = self.heap.read(container, ('item', key))
        if written is not MISSING:
            return written
        return self.guard_value(guards.ItemSource(source, key), value)

    # -- assumptions -----------------------------------------------------
    def decide(self, key):
        """The plan's outcome for this evaluation of site ``key`` (dynamic inside regions)."""
        if self.dynamic_depth:
            return DYNAMIC
        return self.plan.decide(key)

    def site_line(self, key):
        converted = self.converted.get(key[0])
        site = converted.sites.get(key[1]) if converted is not None else None
        return (converted.filename if converted else None), (site.lineno if site else None)

    def site_text(self, key):
        filename, lineno = self.site_line(key)
        return 'line %s of %s' % (lineno, filename)

    def assume(self, key, kind, condition, description, lineno=None, gate=None):
        """Adds a Janus>Assert that ``condition`` holds; returns the op (None if static).

        With ``gate`` (a tensor), returns ``gate`` passed through a
        Janus>CheckedIdentity instead: usable only once the assumption holds.
        """
        from janus.runtime import ops
        static = tf.get_static_value(condition)
        if static is not None and bool(static):
            return gate
        filename, site_lineno = self.site_line(key) if key is not None else (None, None)
        if filename is None and self.stack:
            filename = self.stack[-1].filename
        lineno = lineno or site_lineno
        assumption = Assumption(len(self.assumptions), kind, filename, lineno, description, key)
        self.assumptions.append(assumption)
        if self.soft_conditions is not None and self.dynamic_depth == 0:
            self.soft_conditions.append(tf.reshape(tf.cast(condition, tf.bool), []))
            return gate   # checked by every rank together, in distributed.agree
        message = '%s: %s (line %s)' % (kind, description, lineno)
        if gate is not None:
            gated = ops.janus_checked_identity(tf.reshape(condition, []), gate, assumption.id,
                                               message)
            op = gated.op
        else:
            gated = op = ops.janus_assert(tf.reshape(condition, []), assumption.id, message)
        if tf.compat.v1.get_default_graph() is self.top_graph:
            self.assert_ops.append(op)
        return gated


def _captured_by_identity(value):
    if isinstance(value, (tf.Tensor, tf.Variable, types.FunctionType, types.ModuleType, type,
                          types.BuiltinFunctionType)):
        return True
    return whitelist.is_library_object(value) or callable(value) and not hasattr(value, '__dict__')


def current():
    ctx = getattr(_local, 'ctx', None)
    if ctx is None:
        raise RuntimeError('janus converted code ran outside of a trace')
    return ctx


def current_or_none():
    return getattr(_local, 'ctx', None)


def enter_trace(ctx):
    _local.ctx = ctx


def exit_trace():
    _local.ctx = None


# ----------------------------------------------------------------------
# Operators called by converted code.
# ----------------------------------------------------------------------

class _KeyMaker:
    """``KEY[1:2, ::3]`` evaluates subscript syntax to the key object."""

    def __getitem__(self, key):
        return key


KEY = _KeyMaker()


def load(ns, name):
    """A free name: a closure cell, a module global or a builtin."""
    ctx = current()
    if name in ns.cells:
        cell = ns.cells[name]
        try:
            value = cell.cell_contents
        except ValueError:
            raise NameError("free variable '%s' referenced before assignment" % name)
        source = ns.cell_sources.get(name) or guards.CellSource(cell, name)
    elif name in ns.globals:
        value = ns.globals[name]
        source = guards.GlobalSource(ns.globals, name, ns.builtins)
    elif name in ns.builtins:
        value = ns.builtins[name]
        source = guards.GlobalSource(ns.globals, name, ns.builtins)
    else:
        raise NameError("name '%s' is not defined" % name)
    written = ctx.heap.read(_namespace_of(ns, name), name)
    if written is not MISSING:
        return written
    return ctx.guard_value(source, value)


def _namespace_of(ns, name):
    return ns.cells[name] if name in ns.cells else ns.globals


def store(ns, name, value):
    """``global x; x = v`` / ``nonlocal x; x = v``: a write to the shadow heap."""
    ctx = _writable_context('the variable %s' % name)
    if name in ns.cells:
        write = Write('cell', None, name, value, ns.cells[name])
    else:
        write = Write('global', None, name, value, ns.globals)
    ctx.heap.write(_namespace_of(ns, name), name, write)


def _check_plain_attribute(obj, name, writing=False):
    kind = type(obj)
    if kind.__getattribute__ is not object.__getattribute__ or hasattr(kind, '__getattr__'):
        raise Unsupported('janus does not convert reads through a custom __getattr__/'
                          '__getattribute__ (%s.%s)' % (kind.__name__, name))
    if writing and (kind.__setattr__ is not object.__setattr__
                    or kind.__delattr__ is not object.__delattr__):
        raise Unsupported('janus does not convert writes through a custom __setattr__ (%s.%s)'
                          % (kind.__name__, name))
    for klass in kind.__mro__:
        found = klass.__dict__.get(name)
        if found is not None and hasattr(found, '__get__') and not isinstance(
                found, (types.FunctionType, staticmethod, classmethod)) \
                and not callables.is_janus(found):   # a janus-decorated method binds like one
            if type(found).__name__ == 'member_descriptor':
                return  # a __slots__ entry: a plain storage slot
            if whitelist.in_package(klass.__module__ or '', whitelist.LIBRARY_PREFIXES):
                # Inherited from TF/Keras (Model.trainable_variables): library
                # code, assumed free of side effects like any library call.
                return
            raise Unsupported('janus does not convert reads of the property or descriptor '
                              '%s.%s (it may run code with side effects)' % (kind.__name__, name))
        if found is not None:
            return


def attr(obj, name):
    ctx = current()
    if isinstance(obj, types.ModuleType) and whitelist.in_package(obj.__name__,
                                                                 whitelist.LIBRARY_PREFIXES):
        return getattr(obj, name)  # library modules are assumed not to change (paper 4.3.1)
    if isinstance(obj, tf.Tensor) and name in ('shape', 'get_shape'):
        return _static_shape(obj, name)
    written = ctx.heap.read(obj, name)
    if written is not MISSING:
        return written
    if isinstance(obj, enum.Enum) and name in ('name', 'value'):
        return getattr(obj, name)   # fixed by the member, which is guarded by identity
    source = ctx.source_of(obj)
    if source is None or type(obj) in whitelist.CONTAINER_TYPES:
        # A container's attributes are its type's methods (its type is guarded);
        # what they read or change is handled where they are called.
        return getattr(obj, name)
    library = whitelist.is_library_object(obj) or isinstance(obj, (type, types.ModuleType))
    if not library:
        _check_plain_attribute(obj, name)
    value = getattr(obj, name)
    # Library objects' tensors are their own business (captured by identity);
    # a tensor in the user's object is re-read on every run.
    return ctx.guard_value(guards.AttrSource(source, name), value, hoist=not library)


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

    def __init__(self, shape):   # no TensorShape.__init__: no _dims to read behind our back
        object.__setattr__(self, '_plain', tf.TensorShape(shape))

    def __getattribute__(self, name):
        if name in CheckedShape._OPEN:
            return object.__getattribute__(self, name)
        return object.__getattribute__(self, '_refuse')(name)

    def _refuse(self, *args, **kwargs):
        reason = ('the code observes the dimensions of %s, which are only known at run time '
                  'in a graph with relaxed shapes' % self._plain)
        ctx = current_or_none()
        if ctx is not None and getattr(ctx, 'refusals', None) is not None:
            ctx.refusals.append(reason)
        raise Unsupported(reason)

    @property
    def rank(self):
        return self._plain.rank

    ndims = rank

    def __len__(self):
        return len(self._plain)

    def __bool__(self):
        return bool(self._plain)

    def __getitem__(self, key):
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


def _checked_shape_in(values, depth=0):
    """The first CheckedShape in ``values`` (lists, tuples, dicts searched), or None."""
    for value in values:
        if isinstance(value, CheckedShape):
            return value
        if depth < 8 and isinstance(value, (list, tuple, dict)):
            found = _checked_shape_in(value.values() if isinstance(value, dict) else value,
                                      depth + 1)
            if found is not None:
                return found
    return None


def _static_shape(tensor, name):
    shape = tensor.shape
    if shape.rank is None or not shape.is_fully_defined():
        shape = CheckedShape(shape) if shape.rank is not None else None
        if shape is None:
            raise Unsupported('the code reads the shape of a tensor whose rank is only known '
                              'at run time')
    return shape if name == 'shape' else (lambda: shape)


def _writable_context(what):
    ctx = current()
    if ctx.dynamic_depth:
        raise Unsupported('janus does not convert a write to %s inside a tensor-dependent '
                          'branch or loop (the write would happen once per trace, not per '
                          'iteration)' % what)
    return ctx


def setattr_(obj, name, value):
    """``obj.name = value``: outside objects are written through the shadow heap."""
    ctx = _writable_context('%s.%s' % (type(obj).__name__, name))
    source = ctx.source_of(obj)
    if source is None:
        _assert_made_by_call(obj)
        setattr(obj, name, value)   # an object made by this call: plain Python
        return
    if whitelist.is_library_object(obj) or isinstance(obj, (type, types.ModuleType)):
        raise Unsupported('janus does not convert setting attributes of %s objects'
                          % type(obj).__name__)
    _check_plain_attribute(obj, name, writing=True)
    if _via_heap_op(value):
        shadow_heap.write_op(ctx, obj, source, ('attr', name), value)
        return
    ctx.heap.write(obj, name, Write('attr', source, name, value, None))


def _assert_made_by_call(obj):
    """The sources invariant (DESIGN.md): an object without a source was made by
    this call.  Converted code cannot construct instances of your classes (such
    calls are refused), so one without a source lost it on the way: a janus bug,
    which must not turn into a write to your object at trace time."""
    if not (whitelist.is_library_object(obj) or isinstance(obj, (type, types.ModuleType))):
        raise InvariantError('internal: a %s object reached the trace without a source '
                             '(janus lost track of where it came from)' % type(obj).__name__)


def _via_heap_op(value):
    from janus.config import config
    return config.heap_ops and isinstance(value, tf.Tensor)


def _refuse_user_key(key):
    if observe.has_user_dunders(key):
        raise Unsupported('janus does not convert using a %s as a key (its class defines '
                          'special methods, such as __hash__/__eq__, that would run '
                          'unconverted)' % type(key).__name__)


def item(obj, key):
    if isinstance(obj, (tf.Tensor, tf.Variable)):
        return obj[key]  # a slicing op; the object itself is guarded by identity or spec
    _refuse_user_key(key)
    ctx = current()
    source = ctx.source_of(obj)
    if source is None:
        if observe.user_dunder(obj, '__getitem__') is not None:
            raise Unsupported('janus does not convert subscripts of a %s, whose class defines '
                              '__getitem__' % type(obj).__name__)
        return obj[key]
    if type(obj) not in (list, tuple, dict) and not isinstance(obj, tuple):
        raise Unsupported('janus does not convert subscripts of %s objects from outside '
                          'the call' % type(obj).__name__)
    key = _list_index(ctx, obj, source, key)
    written = ctx.heap.read(obj, ('item', key)) if _hashable(key) else MISSING
    if written is not MISSING:
        return written
    if id(obj) in ctx.heap.changed or type(key) is slice:
        return ctx.contents(obj)[key]
    value = obj[key]
    return ctx.guard_value(guards.ItemSource(source, key), value)


def _list_index(ctx, obj, source, key):
    """An int index into an outside list or tuple as the position it names
    (``items[-1]`` and ``items[2]`` are one item of a 3-item list); the length it
    depends on is guarded.  Out of range: refused, so eager raises its IndexError."""
    if type(key) is not int or not isinstance(obj, (list, tuple)) or id(obj) in ctx.heap.changed:
        return key
    if not -len(obj) <= key < len(obj):
        raise Unsupported('index %d out of range of a %s of %d from outside the call'
                          % (key, type(obj).__name__, len(obj)))
    if key < 0:
        ctx.add_guard(GuardKind.LEN_MATCH, source, (type(obj), len(obj)))
        key += len(obj)
    return key


def _hashable(key):
    try:
        hash(key)
    except TypeError:
        return False
    return True


def setitem(obj, key, value):
    _refuse_user_key(key)
    ctx = current()
    source = ctx.source_of(obj)
    if source is None:
        if observe.user_dunder(obj, '__setitem__') is not None:
            raise Unsupported('janus does not convert item writes into a %s, whose class '
                              'defines __setitem__' % type(obj).__name__)
        obj[key] = value
        return
    ctx = _writable_context('an item of a %s' % type(obj).__name__)
    if type(obj) not in (list, dict) or not _hashable(key):
        raise Unsupported('janus converts item writes into outside lists and dicts only')
    if type(obj) is list and type(key) is not int:
        raise Unsupported('janus converts item writes into outside lists by int index only')
    key = _list_index(ctx, obj, source, key)
    if type(obj) is dict and key not in obj and ctx.heap.read(obj, ('item', key)) is MISSING:
        ctx.heap.changed.add(id(obj))   # a new key: the dict's structure changed
    if _via_heap_op(value) and type(key) in (int, str):
        shadow_heap.write_op(ctx, obj, source, ('item', key), value)
        return
    ctx.heap.write(obj, ('item', key), Write('item', source, key, value, None))


def iter(ns, site, iterable):  # noqa: A001 - it is the runtime's `iter`
    """A loop's iterable: outside lists are guarded; tensors are unrolled when safe."""
    if isinstance(iterable, tf.Tensor):
        from janus.runtime import control
        return builtins_iter(control.unrolled_items(ns, site, iterable, allow_dynamic=False))
    ctx = current()
    source = ctx.source_of(iterable)
    if source is None:  # made by this call: iterating it is plain Python
        if observe.user_dunder(iterable, '__iter__') or observe.user_dunder(iterable,
                                                                              '__getitem__'):
            raise Unsupported('janus does not convert a loop over a %s, whose class defines '
                              '__iter__/__getitem__' % type(iterable).__name__)
        return builtins_iter(iterable)
    if isinstance(iterable, (list, tuple)):   # list subclasses too (Keras's TrackedList)
        return builtins_iter(ctx.contents(iterable))
    if type(iterable) is dict:
        return builtins_iter(list(iterable))  # keys are guarded by KEYS_MATCH
    raise Unsupported('janus does not convert a loop over a %s from outside the call'
                      % type(iterable).__name__)




def enter(manager):
    if whitelist.is_library_object(manager):
        return manager
    raise Unsupported('janus converts `with` only for TF/Keras context managers, not %s'
                      % type(manager).__name__)


def assert_(test, lineno, message_thunk):
    """``assert``: a tensor condition becomes a ``Janus>Assert`` in the graph."""
    if not isinstance(test, tf.Tensor):
        if not observe.truth(test):
            raise AssertionError(message_thunk())
        return
    from janus.runtime.control import truth
    current().assume(None, 'ASSERT', truth(test), 'assert statement holds', lineno=lineno)


def call(__callee, /, *args, **kwargs):
    ctx = current()
    callee, args, kwargs = callables.through_janus(__callee, args, kwargs)   # janus calls janus
    if _is_whitelisted_builtin(callee):
        return _call_builtin(ctx, callee, args, kwargs)
    if callee is print:
        return _deferred_print(ctx, args, kwargs)
    if whitelist.is_builtin_method(callee):
        return _call_builtin_method(ctx, callee, args, kwargs)
    if isinstance(callee, types.MethodType) and isinstance(callee.__func__, types.FunctionType) \
            and not whitelist.is_library(callee):
        return _inline(ctx, callee.__func__, (callee.__self__,) + args, kwargs)
    if isinstance(callee, types.FunctionType) and not whitelist.is_library(callee):
        return _inline(ctx, callee, args, kwargs)
    if (whitelist.is_library(callee) or whitelist.is_namedtuple_class(callee)
            or whitelist.is_builtin_exception(callee)):
        return _call_library(ctx, callee, args, kwargs)
    call_method = getattr(type(callee), '__call__', None)
    if _is_keras_layer(callee):
        return _call_keras_layer(ctx, callee, args, kwargs)
    if isinstance(call_method, types.FunctionType):
        return _inline(ctx, call_method, (callee,) + args, kwargs)
    raise Unsupported('janus does not convert calls to %s; only TF/Keras APIs, whitelisted '
                      'builtins and your own Python functions are converted' % _name(callee))


def _is_whitelisted_builtin(callee):
    try:
        return callee in whitelist.BUILTINS
    except TypeError:  # unhashable callee
        return False


def _name(callee):
    name = getattr(callee, '__qualname__', None) or getattr(callee, '__name__', None)
    return repr(name) if name else 'a %s object' % type(callee).__name__


def _is_keras_layer(obj):
    return any(whitelist.in_package(k.__module__ or '', whitelist.LIBRARY_PREFIXES)
               for k in type(obj).__mro__[1:])


def _call_keras_layer(ctx, layer, args, kwargs):
    """Your own Keras layer/model: Keras's __call__ (build, training flag, masks) runs
    as usual, and the ``call`` it dispatches to is your converted ``call``."""
    from janus.runtime import layers
    call = layers.user_call(layer)
    if call is None:
        return layer(*args, **kwargs)   # e.g. a Sequential subclass without its own call
    if any(c.fn.__code__ is call.__code__ for c in ctx.stack):
        raise Unsupported('janus does not convert recursive calls (%s)' % call.__qualname__)
    converted = ctx.convert(call)
    ctx.converted[call.__code__] = converted
    ctx.code_objects |= converted.code_objects

    def converted_call(*call_args, **call_kwargs):
        ctx.stack.append(converted)
        try:
            return converted.py_fn(layer, *call_args, **call_kwargs)
        finally:
            ctx.stack.pop()
    with layers.calling(layer, converted_call):
        return layer(*args, **kwargs)


def _guard_library_args(ctx, args, kwargs):
    """Checks and guards what library code gets; returns (args, kwargs) with outside
    containers replaced by copies whose tensors are re-read every run, and your own
    functions (``tf.map_fn(fn, x)``, ``tf.cond(p, f, g)``) replaced by their converted
    versions, run as a tensor-dependent region (a branch or loop body TF traces once)."""
    def prepare(value, depth=0):
        if isinstance(value, observe.LazyText):
            value.refuse()
        if _is_user_function(value):
            return _converted_callback(ctx, value)
        if type(value) in (list, tuple) and depth == 0 and ctx.source_of(value) is None:
            return type(value)(prepare(v, 1) for v in value)   # tf.switch_case's branches
        if ctx.source_of(value) is None:
            if observe.has_user_dunders(value):
                raise Unsupported('janus does not pass your %s object to library code (it '
                                  'would run its special methods unconverted)'
                                  % type(value).__name__)
            return value
        if isinstance(value, (list, tuple, dict)):
            return ctx.contents(value)
        if not _captured_by_identity(value):
            raise Unsupported('janus does not pass your %s object to library code (it might '
                              'read or change it behind the guards)' % type(value).__name__)
        return value
    return [prepare(v) for v in args], {k: prepare(v) for k, v in kwargs.items()}


def _is_user_function(value):
    if isinstance(value, functools.partial):
        return _is_user_function(value.func)
    return (isinstance(value, (types.FunctionType, types.MethodType))
            and isinstance(getattr(value, '__func__', value), types.FunctionType)
            and not whitelist.is_library(value))


def _converted_callback(ctx, fn):
    """``fn`` as library code may call it during the trace: converted, and inside a
    region TF traces once but may run many times (so writes there are refused)."""
    @functools.wraps(fn)
    def callback(*args, **kwargs):
        if current_or_none() is not ctx:
            return fn(*args, **kwargs)   # called when the graph runs (tf.py_function): Python
        ctx.dynamic_depth += 1
        try:
            if getattr(fn, '__code__', None) in ctx.code_objects:
                return fn(*args, **kwargs)   # defined in converted code: converted already
            return call(fn, *args, **kwargs)
        finally:
            ctx.dynamic_depth -= 1
    return callback


def _deferred_print(ctx, args, kwargs):
    """``print``: output is a side effect, so it happens after a successful run,
    with the run's values (printing an eager tensor shows what eager shows).
    A variable is printed as it was at that point of the program: its value is
    read in the graph there, and formatted after the run as eager formats it."""
    if set(kwargs) - {'sep', 'end', 'flush'}:
        raise Unsupported('janus converts print() with sep=/end=/flush= only')
    ctx = _writable_context('standard output (print)')
    args = [_printable(ctx.contents(v)) for v in args]
    ctx.heap.writes.append(Write('print', None, 'print', (list(args), dict(kwargs)), None))
    return None


class _VariableStyle(enum.Enum):
    TF = 'tf'         # tf.Variable: ResourceVariable.__repr__
    KERAS = 'keras'   # keras.Variable: keras.src.backend.common.variables.Variable.__repr__


class PrintedVariable(tuple):
    """A variable's value at one point of the program, printed as eager prints the
    variable.  A tuple, so the tracer rebuilds it from the run's outputs:
    (style value, text before the value, value tensor)."""

    def __new__(cls, style, head, value):
        return tuple.__new__(cls, (style, head, value))

    def __repr__(self):
        style, head, value = self
        if _VariableStyle(style) is _VariableStyle.TF:
            from tensorflow.python.framework import ops as tf_ops
            return '%s%s>' % (head, tf_ops.value_text(value, is_repr=True))
        import keras
        return '%s, value=%s>' % (head, keras.ops.convert_to_numpy(value))

    __str__ = __repr__


def _variable_style(variable):
    """How eager prints ``variable`` (None: a kind janus does not know how to print)."""
    kind = type(variable)
    if kind.__str__ is not object.__str__:
        return None
    from tensorflow.python.ops import resource_variable_ops
    if kind.__repr__ is resource_variable_ops.BaseResourceVariable.__repr__:
        return _VariableStyle.TF
    keras = _keras_variables()
    if keras is not None and kind.__repr__ is keras.Variable.__repr__:
        return _VariableStyle.KERAS
    return None


def _keras_variables():
    """Keras's variables module, if the program imported Keras (else None)."""
    import sys
    return sys.modules.get('keras.src.backend.common.variables')


def _is_variable(value):
    keras = _keras_variables()
    return isinstance(value, tf.Variable) or (keras is not None
                                              and isinstance(value, keras.Variable))


def _snapshot(variable):
    style = _variable_style(variable)
    if style is None:
        raise Unsupported('janus does not convert print() of a %s' % type(variable).__name__)
    if style is _VariableStyle.TF:
        head = "<tf.Variable '%s' shape=%s dtype=%s, " % (
            variable.name, variable.get_shape(), variable.dtype.name)
    else:
        head = '<Variable path=%s, shape=%s, dtype=%s' % (
            variable.path, variable.shape, variable.dtype)
    # Read here, in program order: the graph orders it before later updates.
    return PrintedVariable(style.value, head, tf.identity(tf.convert_to_tensor(variable)))


def _printable(value, depth=0):
    """``value`` with every variable in it replaced by a snapshot of its value."""
    if _is_variable(value):
        return _snapshot(value)
    if not isinstance(value, (list, tuple, dict)):
        if observe.user_dunder(value, '__str__') or observe.user_dunder(value, '__repr__'):
            # It would run after the graph, unconverted, seeing the state at the end.
            raise Unsupported('janus does not convert print() of a %s, whose class defines '
                              'how it prints' % type(value).__name__)
        return value
    if depth > 8:
        raise Unsupported('janus does not convert print() of containers nested this deep')
    if isinstance(value, dict):
        items = {k: _printable(v, depth + 1) for k, v in value.items()}
        if all(items[k] is v for k, v in value.items()):
            return value
        if type(value) is dict:
            return items
    else:
        items = [_printable(v, depth + 1) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
    if type(value) is list:
        return items
    if type(value) is tuple:
        return tuple(items)
    if whitelist.is_namedtuple_class(type(value)):
        return type(value)(*items)
    raise Unsupported('janus does not convert print() of a %s holding a variable'
                      % type(value).__name__)


def _call_builtin(ctx, callee, args, kwargs):
    if callee in (str, repr, format) and args and not kwargs:
        value = observe.plain_deep(ctx, args[0])
        if observe._needs_run_values(value):
            return observe.text_of(callee, value, *args[1:])   # formatted after the run
    observe.refuse_user_dunders(callee, list(args) + list(kwargs.values()))
    if callee in (len, bool) and len(args) == 1 and not kwargs \
            and ctx.source_of(args[0]) is not None and isinstance(args[0], (list, tuple, dict)):
        return observe.size_of(callee, args[0])   # one O(1) guard, not one per item
    if callee in whitelist.KEYED_BUILTINS and kwargs:
        raise Unsupported('janus does not convert %s() with key=/default=' % callee.__name__)
    args, kwargs = _guard_library_args(ctx, args, kwargs)
    return callee(*args, **kwargs)


_REPLAYED_METHODS = frozenset(('append', 'extend', 'insert', 'update'))
# Methods that read every item of their arguments (not keep the argument itself).
_CONTENT_READING_METHODS = frozenset((
    'extend', 'update', 'join', 'format', 'format_map', 'union', 'intersection', 'difference',
    'symmetric_difference', 'issubset', 'issuperset', 'isdisjoint', 'startswith', 'endswith'))


def _call_builtin_method(ctx, callee, args, kwargs):
    owner = callee.__self__
    source = ctx.source_of(owner)
    if isinstance(owner, (str, bytes)) and any(observe._needs_run_values(v)
                                               for v in list(args) + list(kwargs.values())):
        raise Unsupported('janus does not convert str.%s() of a graph value; use an f-string'
                          % callee.__name__)
    if callee.__name__ in _CONTENT_READING_METHODS:
        # ``parts.extend(self.parts)``, ``'/'.join(self.names)``: the method reads the
        # outside argument's items, so it gets the guarded contents.
        args = [observe.plain_deep(ctx, v) for v in args]
    if source is None:
        return callee(*args, **kwargs)
    if callee.__name__ in whitelist.READ_ONLY_METHODS:
        # On the contents as this point of the call sees them (an item written earlier
        # in the call included), tensors re-read every run.
        method = getattr(ctx.contents(owner), callee.__name__)
        return method(*args, **kwargs)
    if callee.__name__ not in _REPLAYED_METHODS or kwargs:
        raise Unsupported('janus does not convert %s.%s() on a %s from outside the call'
                          % (type(owner).__name__, callee.__name__, type(owner).__name__))
    # Replayed on the real object after a successful run (append/extend/insert/
    # update return None, so nothing in the trace depends on the object's new state).
    ctx = _writable_context('a %s (%s)' % (type(owner).__name__, callee.__name__))
    ctx.heap.changed.add(id(owner))
    ctx.heap.writes.append(Write('call', source, callee.__name__, list(args), None))
    return None


def _call_library(ctx, callee, args, kwargs):
    layers.refuse_lazy_build(callee)   # a Keras optimizer's first apply builds it: not in a trace
    shape = _checked_shape_in(list(args) + list(kwargs.values()))
    if shape is not None:
        shape._refuse()   # library code would read its unknown dimensions as None
    args, kwargs = _guard_library_args(ctx, args, kwargs)
    if any(isinstance(v, control.TensorList) for v in list(args) + list(kwargs.values())):
        return _call_with_tensor_lists(callee, args, kwargs)
    return callee(*args, **kwargs)


def _tensor_list_functions():
    """Library functions whose list argument a TensorList stands in for, and how."""
    stacked = lambda t: t.stacked()  # noqa: E731
    table = {tf.stack: stacked, tf.convert_to_tensor: stacked,
             tf.concat: lambda t: t.array.concat(),
             tf.add_n: lambda t: tf.reduce_sum(t.stacked(), axis=0)}
    for name in ('reduce_sum', 'reduce_mean', 'reduce_max', 'reduce_min', 'reduce_prod',
                 'reduce_all', 'reduce_any', 'reduce_logsumexp'):
        table[getattr(tf, name, None) or getattr(tf.math, name)] = stacked
    return table


def _call_with_tensor_lists(callee, args, kwargs):
    table = _tensor_list_functions()
    lists = [v for v in list(args) + list(kwargs.values()) if isinstance(v, control.TensorList)]
    convert = table.get(callee) if args and isinstance(args[0], control.TensorList) else None
    axis = kwargs.get('axis', args[1] if len(args) > 1 else 0)
    if convert is None or len(lists) != 1 or (callee is tf.concat and axis != 0):
        raise Unsupported('%s: janus supports tf.stack, tf.concat (axis 0), tf.add_n and '
                          'tf.reduce_* of a list grown in a tensor-dependent loop, not %s'
                          % (lists[0].where, _name(callee)))
    value = convert(args[0])
    if callee is tf.stack and axis != 0:
        value = _move_leading_axis(value, axis, lists[0].where)
    if callee in (tf.stack, tf.concat, tf.add_n, tf.convert_to_tensor):
        return value
    return callee(value, *args[1:], **kwargs)


def _move_leading_axis(stacked, axis, where):
    """``tf.stack(items, axis)`` from the items stacked along axis 0."""
    rank = stacked.shape.rank
    if rank is None or not isinstance(axis, int) or not -rank <= axis < rank:
        raise Unsupported('%s: tf.stack(axis=%r) of a list grown in a tensor-dependent loop '
                          'needs a static axis within the items\' rank' % (where, axis))
    axis %= rank
    return tf.transpose(stacked, list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank)))


def _inline(ctx, fn, args, kwargs):
    """Inlines a user Python callee by tracing its converted version."""
    if fn.__code__ in [c.fn.__code__ for c in ctx.stack]:
        raise Unsupported('janus does not convert recursive calls (%s); the function runs '
                          'imperatively' % fn.__qualname__)
    converted = ctx.convert(fn)
    bound = inspect.signature(fn).bind(*args, **kwargs)
    _apply_defaults(ctx, fn, bound)
    ctx.converted[fn.__code__] = converted
    ctx.code_objects |= converted.code_objects
    root = ctx.source_of(fn)
    py_fn = converted.bind(FunctionNamespace(fn, root)) if root else converted.py_fn
    ctx.stack.append(converted)
    try:
        return py_fn(*bound.args, **bound.kwargs)
    finally:
        ctx.stack.pop()


def _apply_defaults(ctx, fn, bound):
    """Fills in defaults as outside objects: ``def helper(x, seen=[])`` appends to the
    function's one default list through the shadow heap, on every run."""
    for name, parameter in bound.signature.parameters.items():
        if name in bound.arguments or parameter.default is inspect.Parameter.empty:
            continue
        bound.arguments[name] = ctx.register_default(fn, name, parameter.default)
    bound.apply_defaults()   # *args / **kwargs left empty


# Control flow lives in its own module; converted code finds it here, as __jr.*.
from janus.runtime import control  # noqa: E402
from janus.runtime.control import (boolop, for_stmt, if_stmt, ifexp, not_, read,  # noqa: E402,F401
                                   test, while_stmt)
from janus.runtime import observe  # noqa: E402
from janus.runtime.observe import (LazyText, binop, compare, compare_chain,  # noqa: E402,F401
                                   format_value, inplace, join_text, not_value, truth, unary,
                                   unpack)
