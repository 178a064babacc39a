"""Reads and writes of names, attributes and items while a call is traced, and ``with``.

Needs a ``TraceContext`` (``trace_context.py``) to be entered (``tracer.py``
does it) before any converted function runs.  Each operator does what plain
Python would do and also (a) records where a value read from outside the call
came from, adding the guard that keeps the graph valid for the next call, or
(b) refuses, with ``Unsupported``, what a graph cannot reproduce faithfully,
so the call runs imperatively instead.  Converted code reaches them as
``__jr.*`` (``operators.py``).
"""
import enum
import functools
import sys
import types

import numpy as np
import tensorflow as tf

from janus import guards, pytypes
from janus.trace import callables
from janus.config import config
from janus.reasons import Reason
from janus.guards import GuardKind
from janus.graph import fallible
from janus.heap import shadow_heap
from janus.library import whitelist
from janus.trace import host_draws, observe
from janus.values import protocol, static_values
from janus.values.protocol import NOT_MODELLED, StandIn
from janus.control import exceptions
from janus.heap.shadow_heap import MISSING, Slot, Write, WriteKind
from janus.values.shapes import static_shape
from janus.trace.trace_context import Unsupported
from janus.trace.tracing import (current,
                                   writable_context as _writable_context)

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
            raise NameError("free variable '%s' referenced before assignment" % name) from None
        source = ns.cell_sources.get(name) or guards.CellSource(cell, name)
    elif name in ns.globals:
        value = ns.globals[name]
        source = guards.GlobalSource(ns.globals, name, ns.builtins)
    elif name in ns.builtins:
        value = ns.builtins[name]
        source = guards.GlobalSource(ns.globals, name, ns.builtins)
    else:
        raise NameError("name '%s' is not defined" % name)
    written = ctx.heap.read(_namespace_of(ns, name), Slot.name(name))
    if written is not MISSING:
        return written
    return ctx.guard_value(source, value)


def closure_write(name):
    """``nonlocal name; name = ...`` in a function nested in the converted one: plain
    Python on the call's own cell, but not where TF traces a region once and runs it
    many times (the write would happen once per trace)."""
    _writable_context('the enclosing variable %s (from a nested function)' % name,
                      shadowed=False)


def _namespace_of(ns, name):
    return ns.cells[name] if name in ns.cells else ns.globals


def store(ns, name, value):
    """``global x; x = v`` / ``nonlocal x; x = v``: a write to the shadow heap."""
    ctx = _writable_context('the variable %s' % name)
    if name in ns.cells:
        source = ns.cell_sources.get(name)
        # A cell of a function passed in (a new closure every step) is written in the
        # closure of that call's function, found through its source; else the cell itself.
        write = Write(WriteKind.CELL, source.base if source is not None else None, name, value,
                      ns.cells[name])
        source = source or guards.CellSource(ns.cells[name], name)
    else:
        write = Write(WriteKind.GLOBAL, None, name, value, ns.globals)
        source = guards.GlobalSource(ns.globals, name, ns.builtins)
    ctx.guards.note_number_write(source, value)
    ctx.heap.write(_namespace_of(ns, name), Slot.name(name), write)


# Builtin attribute lookups (a namedtuple's is tuple's): no user code runs.
_PLAIN_GETATTRIBUTE = (object.__getattribute__, tuple.__getattribute__, list.__getattribute__,
                       dict.__getattribute__)


def _check_plain_attribute(obj, name, writing=False, value=None):
    kind = type(obj)
    if not writing and host_draws.is_draw_method(obj, name):
        return   # ``self.np_rng.normal``: a draw janus makes on the host (host_draws.py)
    if kind.__getattribute__ not in _PLAIN_GETATTRIBUTE or hasattr(kind, '__getattr__') and (
            not writing and not found_without_getattr(obj, name)):
        raise Unsupported(Reason.CUSTOM_ATTRIBUTE,
                          'janus does not convert reads through a custom __getattr__/'
                          '__getattribute__ (%s.%s)' % (kind.__name__, name))
    if writing and (kind.__setattr__ is not object.__setattr__
                    or kind.__delattr__ is not object.__delattr__) \
            and not _library_setattr_keeps(kind, value):
        raise Unsupported(Reason.CUSTOM_ATTRIBUTE,
                          'janus does not convert writes through a custom __setattr__ (%s.%s)'
                          % (kind.__name__, name))
    for klass in kind.__mro__:
        if name not in klass.__dict__:
            continue
        found = klass.__dict__[name]   # a class attribute that is None shadows those after it
        if isinstance(found, functools.cached_property) and (
                writing or name in (getattr(obj, '__dict__', None) or ())):
            # Computed already (the profiled calls read it): the instance's dict answers
            # and the getter does not run (``attribute`` guards that it is still there);
            # a write goes to that dict, as for a plain attribute.
            break
        if hasattr(found, '__get__') and not isinstance(
                found, (types.FunctionType, staticmethod, classmethod)) \
                and not callables.is_janus(found):   # a janus-decorated method binds like one
            if type(found).__name__ in ('member_descriptor', '_tuplegetter'):
                if writing and type(found).__name__ == '_tuplegetter':
                    _refuse_write(kind, name, 'a namedtuple field is read-only')
                return  # a __slots__ entry or a namedtuple field: plain storage
            if whitelist.in_package(klass.__module__ or '', whitelist.LIBRARY_PREFIXES):
                # Inherited from TF/Keras (Model.trainable_variables): library
                # code, assumed free of side effects like any library call.
                if writing and isinstance(found, property) and found.fset is None:
                    _refuse_write(kind, name, 'a property without a setter')
                return
            raise Unsupported(Reason.CUSTOM_ATTRIBUTE,
                              'janus does not convert reads of the property or descriptor '
                              '%s.%s (it may run code with side effects)' % (kind.__name__, name))
        break   # a plain class attribute: a write goes to the instance's dict
    if writing and kind.__dictoffset__ == 0:
        _refuse_write(kind, name, 'its objects have no __dict__ (__slots__), so they take no '
                      'attribute the class does not declare')


def found_without_getattr(obj, name):
    """Whether Python finds ``obj.name`` without calling its class's ``__getattr__``."""
    return name in (getattr(obj, '__dict__', None) or ()) or any(
        name in vars(klass) for klass in type(obj).__mro__)


def _draw_method(ctx, generator, source, name):
    """``rng.uniform`` of a random generator (``host_draws.py`` makes the draw): a new
    bound method each read, fixed by the generator's type and by its instance dict not
    holding the name (the generator itself is guarded by identity where it draws)."""
    ctx.guards.add(GuardKind.TYPE_MATCH, source, type(generator))
    _guard_found_without_getattr(ctx, generator, source, name)
    return getattr(generator, name)


def _cached_property(obj, name):
    """Whether ``obj.name`` is a ``functools.cached_property`` of its class."""
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            return isinstance(klass.__dict__[name], functools.cached_property)
    return False


def _guard_found_without_getattr(ctx, obj, source, name):
    """A read that did not run ``__getattr__`` (or a cached property's getter): the
    object's ``__dict__`` keeps (or still lacks, the class having it) the name, so the
    next read does not either."""
    own = getattr(obj, '__dict__', None)
    if own is not None:
        ctx.guards.add(GuardKind.CONTAINS_MATCH, guards.AttrSource(source, '__dict__'),
                       (type(own), name, name in own))


def _refuse_write(kind, name, why):
    """A write Python rejects: refused at trace time, so the call runs imperatively
    and raises at that line, before any later state change (never at write-back)."""
    raise Unsupported(Reason.PYTHON_RAISES,
                      'janus does not convert writing %s.%s: Python raises AttributeError '
                      '(%s)' % (kind.__name__, name, why))


def made(value):
    """A literal or comprehension of converted code (``[]``, ``{k: v}``, ``[f(x) for
    x in xs]``), or a function's own ``*args``/``**kwargs``: an object the call made."""
    return current().provenance.made(value)


def attr(obj, name):
    """``obj.name``: janus's stand-ins (``StandIn.trace_attribute``) and graph tensors
    answer for themselves; a Python object's attribute is read as Python reads it
    (``_python_attribute``)."""
    ctx = current()
    if isinstance(obj, StandIn):
        found = obj.trace_attribute(name)
        if found is not NOT_MODELLED:
            return found
        if name in protocol.NAMES:   # janus's own, never the value's: as Python finds none
            raise AttributeError("'%s' object has no attribute '%s'" % (type(obj).__name__, name))
    if isinstance(obj, types.ModuleType) and whitelist.in_package(obj.__name__,
                                                                 whitelist.LIBRARY_PREFIXES):
        return getattr(obj, name)  # library modules are assumed not to change (paper 4.3.1)
    if isinstance(obj, tf.Tensor) and name in ('shape', 'get_shape'):
        return static_shape(obj, name)
    if isinstance(obj, (tf.RaggedTensor, tf.SparseTensor)) and name in ('shape', 'get_shape'):
        return _composite_shape(obj, name)
    if name == '__traceback__' and isinstance(obj, BaseException):
        raise Unsupported(Reason.TRACEBACK_READ, 'janus does not convert reading an '
                          'exception\'s __traceback__ (the frames that ran)')
    if isinstance(obj, tf.Tensor) and name in ('ref', 'experimental_ref') \
            and ctx.tensors.is_input(obj):
        # A reference is the tensor's identity as a hashable key; a graph input's is
        # not the eager tensor's (``is`` is answered in observe.compare instead).
        raise Unsupported(Reason.TENSOR_KEY,
                          'janus does not convert tensor.%s() (a key by identity: the graph '
                          'tensor is not the eager one); compare with `is`' % name)
    if isinstance(obj, tf.Tensor) and not isinstance(obj, guards.EagerTensor):
        return _tensor_attribute(obj, name)
    return _python_attribute(ctx, obj, name)


def _python_attribute(ctx, obj, name):
    """``obj.name`` of a Python object: as the call wrote it, plain Python on the
    call's own object, else guarded where it came from (``_outside_attribute``)."""
    written = ctx.heap.read(obj, Slot.name(name))
    if written is not MISSING:
        if id(written) in ctx.tracked_copies and ctx.tracked_copies[id(written)] is None:
            raise Unsupported(Reason.CUSTOM_ATTRIBUTE,
                              'janus does not convert reading back %s.%s in the call that set '
                              'it: Keras keeps its own copy (a TrackedList/TrackedDict) there'
                              % (type(obj).__name__, name))
        return written
    if isinstance(obj, enum.Enum) and name in ('name', 'value'):
        return getattr(obj, name)   # fixed by the member, which is guarded by identity
    if name == '__class__' and _plain_class_attribute(obj):
        return class_of(ctx, obj)
    source = ctx.provenance.source_of(obj)
    if source is None:
        ctx.provenance.of(obj, 'reading .%s' % name)   # the call's own object: plain Python
        value = getattr(obj, name)
        if whitelist.is_library_object(obj):
            return ctx.provenance.made_result(value, deep=True)   # what library code gives out
        return value
    return _outside_attribute(ctx, obj, source, name)


def _outside_attribute(ctx, obj, source, name):
    """``obj.name`` of an object from outside the call (``source``): a modelled
    container's method or data attribute, a library object's (captured by identity)
    or a plain attribute of yours (checked to run no code, then guarded by value)."""
    if pytypes.is_own_method(obj, name):
        # A modelled container's methods are its type's (its type is guarded); what
        # they read or change is handled where they are called (method_calls.py).
        return getattr(obj, name)
    if (pytypes.has_items(obj) or pytypes.is_set(obj)) and not whitelist.is_library_object(obj):
        if name not in dir(pytypes.model_of(obj).base):
            _check_plain_attribute(obj, name)   # your subclass's own attribute or method
        # A data attribute of the container type (a deque's maxlen): guarded by value.
        ctx.attributes_used.setdefault(id(obj), set()).add(name)
        return ctx.guard_value(guards.AttrSource(source, name), getattr(obj, name))
    library = whitelist.is_library_object(obj) or isinstance(obj, types.ModuleType) or (
        isinstance(obj, type) and not is_plain_class(obj))
    library = library or whitelist.is_flags_object(obj)   # ``FLAGS.batch_size``: its value
    if not library:
        if isinstance(obj, type):
            _check_class_attribute(obj, name)
        else:
            _check_plain_attribute(obj, name)
            if hasattr(type(obj), '__getattr__') or _cached_property(obj, name):
                _guard_found_without_getattr(ctx, obj, source, name)
        ctx.attributes_used.setdefault(id(obj), set()).add(name)
        written = _class_attribute_written(ctx, obj, source, name)
        if written is not MISSING:
            return written
        if host_draws.is_draw_method(obj, name):
            return _draw_method(ctx, obj, source, name)
    value = getattr(obj, name)
    # Library objects' tensors are their own business (captured by identity);
    # a tensor in the user's object is re-read on every run.
    return ctx.guard_value(guards.AttrSource(source, name), value, hoist=not library)


class EagerOnly:
    """``t.numpy`` (``cpu``, ``device``...) of a graph tensor standing for an eager one:
    it exists eagerly (``hasattr`` is True, as eagerly) but means the run's value or
    eager placement; any use of it refuses."""

    def __init__(self, name):
        self.name = name

    def refuse(self, *args, **kwargs):
        raise Unsupported(Reason.NUMPY_IN_GRAPH,
                          'janus does not convert using tensor.%s: eagerly it is the value or '
                          'placement of an eager tensor, which only the graph run has' % self.name)

    __call__ = __bool__ = __str__ = __format__ = __eq__ = __iter__ = __len__ = refuse
    __hash__ = None


_EAGER_SAMPLE = []


class StaticValue:
    """``t.numpy`` of a graph tensor whose value the graph fixes before it runs
    (``tf.get_static_value``: a shape, a size, a constant, computed from the guarded
    shapes alone): ``int(tf.shape(h)[1].numpy())`` sizes a later tensor, read at trace
    time, exactly what eager reads (the call's shapes are the graph's)."""

    def __init__(self, value):
        self.value = value

    def __call__(self):
        value = np.array(self.value, copy=True)
        return value[()] if value.ndim == 0 else value   # eager's: a NumPy scalar at rank 0


def _static_numpy(tensor):
    """A ``StaticValue`` for ``tensor.numpy`` when every run gives it one value
    (``static_values.py``), else None."""
    value = static_values.value_of(tensor)
    if value is None:
        return None
    return StaticValue(np.asarray(value, dtype=tensor.dtype.as_numpy_dtype))


def _tensor_attribute(tensor, name):
    """An attribute of a graph tensor, as eager code reads it from the eager tensor it
    stands for (``whitelist.TENSOR_ATTRIBUTES_*``): default-deny."""
    if name == 'numpy':
        static = _static_numpy(tensor)
        if static is not None:
            return static
        if static_values.from_shapes(tensor):   # a relaxed dimension: exact shapes know it
            raise Unsupported(Reason.UNKNOWN_SHAPE,
                              'janus does not convert .numpy() of a shape that is only known '
                              'at run time in a graph with relaxed shapes')
    if name in whitelist.TENSOR_ATTRIBUTES_SAME or name in getattr(tensor, '__dict__', ()):
        return getattr(tensor, name)   # also what was set on it (Keras's ``_keras_mask``)
    if name in whitelist.TENSOR_ATTRIBUTES_EAGER_RAISES or not hasattr(guards.EagerTensor,
                                                                        name):
        if not _EAGER_SAMPLE:
            with tf.init_scope():
                _EAGER_SAMPLE.append(tf.constant(0))
        return getattr(_EAGER_SAMPLE[0], name)   # raises eager's AttributeError
    return EagerOnly(name)


def class_of(ctx, value):
    """``type(value)`` / ``value.__class__``: an outside object's class is an outside
    object too (``cls = type(self); cls.steps += 1``), read through ``type(...)`` of
    the object's source on every call; a graph tensor's type differs (refused)."""
    if isinstance(value, (tf.Tensor, tf.Variable)):
        raise Unsupported(Reason.TENSOR_TYPE,
                          'janus does not convert type() of a tensor (a graph tensor is '
                          'not an EagerTensor); use isinstance(x, tf.Tensor)')
    if isinstance(value, StandIn):   # an array's, a dynamic number's: what it stands for
        found = value.trace_class()
        if found is not NOT_MODELLED:
            return found
    kind = type(value)
    source = ctx.provenance.source_of(value)
    if source is not None and ctx.provenance.source_of(kind) is None:
        # The object's own guards fix its type (TYPE_MATCH, ID_MATCH, or its signature
        # node): the class needs no guard of its own, only the source.
        ctx.provenance.remember(guards.TypeSource(source), kind)
    return kind


def is_plain_class(cls):
    """A class of the user's whose attributes are plain storage: ``type`` (or a
    metaclass that does not change attribute access, ``ABCMeta``) as its metaclass,
    read and written through the shadow heap like an instance's attributes."""
    meta = type(cls)
    return (isinstance(cls, type) and cls.__module__ != 'builtins'
            and not whitelist.is_library(cls)
            and meta.__getattribute__ is type.__getattribute__
            and meta.__setattr__ is type.__setattr__ and meta.__delattr__ is type.__delattr__
            and not hasattr(meta, '__getattr__'))


def _plain_class_attribute(obj):
    """Whether ``obj.__class__`` is ``type(obj)`` (no class of it redefines it)."""
    for klass in type(obj).__mro__:
        if '__class__' in vars(klass):
            return klass is object
    return False


def _check_class_attribute(cls, name, writing=False):
    """A read (or write) of a plain class's attribute runs no code of the user's: the
    metaclass's and the class's own descriptors are functions, static and class
    methods or builtin ones (a property read off the class is the property)."""
    for klass in type(cls).__mro__:
        found = vars(klass).get(name)
        if found is not None and hasattr(type(found), '__set__' if writing else '__get__') \
                and klass.__module__ != 'builtins':
            raise Unsupported(Reason.CUSTOM_ATTRIBUTE,
                              'janus does not convert %s the attribute %s.%s (a descriptor of '
                              'its metaclass)' % ('writing' if writing else 'reading',
                                                  cls.__name__, name))
    if writing:
        return
    for klass in cls.__mro__:
        found = vars(klass).get(name)
        if found is None:
            continue
        if hasattr(type(found), '__get__') and not isinstance(
                found, (types.FunctionType, staticmethod, classmethod)) \
                and type(found).__module__ != 'builtins' and not callables.is_janus(found):
            raise Unsupported(Reason.CUSTOM_ATTRIBUTE,
                              'janus does not convert reads of the descriptor %s.%s (it may '
                              'run code with side effects)' % (cls.__name__, name))
        return


def _class_attribute_written(ctx, obj, source, name):
    """A class attribute this call wrote earlier (``type(self).steps = ...``), as read
    through an instance or a subclass; MISSING when none was written.  Eagerly the read
    finds the first namespace in the MRO that has the name, after the write: every
    namespace up to that one is guarded to keep (or lack) the name, so a graph traced
    while a subclass had its own ``steps`` is not run after the caller deleted it."""
    if isinstance(obj, type):
        own, classes = vars(obj), obj.__mro__
    else:
        own, classes = getattr(obj, '__dict__', None), type(obj).__mro__
    others = [klass for klass in classes if klass is not obj]
    if own is None or all(ctx.heap.read(klass, Slot.name(name)) is MISSING for klass in others):
        return MISSING
    chain = [(guards.AttrSource(source, '__dict__'), own, None)] + [
        (guards.AttrSource(guards.ObjectSource(klass), '__dict__'), vars(klass), klass)
        for klass in others]
    for where, namespace, klass in chain:
        written = ctx.heap.read(klass, Slot.name(name)) if klass is not None else MISSING
        if written is not MISSING:
            return written
        found = name in namespace
        ctx.guards.add(GuardKind.CONTAINS_MATCH, where, (type(namespace), name, found))
        if found:
            return MISSING
    return MISSING


def setattr_(obj, name, value):
    """``obj.name = value``: outside objects are written through the shadow heap."""
    if isinstance(obj, StandIn) and obj.trace_set_attribute(name, value) is not NOT_MODELLED:
        return   # written by the stand-in (an array or a node refuses)
    ctx = _writable_context('%s.%s' % (type(obj).__name__, name))
    source = ctx.provenance.source_of(obj)
    if source is None:
        ctx.provenance.of(obj, 'writing .%s' % name)   # the call's own object, or refused
        if whitelist.is_library_object(obj) or isinstance(obj, types.ModuleType) \
                or is_plain_class(obj):
            raise Unsupported(Reason.OUTSIDE_VALUE,
                              'janus does not convert setting attributes of a %s it did not '
                              'read from outside the call' % type(obj).__name__)
        _writable_context('%s.%s' % (type(obj).__name__, name), shadowed=False)
        setattr(obj, name, value)   # an object made by this call: plain Python
        return
    plain_class = is_plain_class(obj)
    if whitelist.is_library_object(obj) or isinstance(obj, types.ModuleType) or (
            isinstance(obj, type) and not plain_class):
        if _is_learning_rate_setting(obj, name, value):
            return _set_learning_rate(ctx, obj, source, value)
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          'janus does not convert setting attributes of %s objects'
                          % type(obj).__name__)
    if plain_class:
        _check_class_attribute(obj, name, writing=True)
    else:
        _check_plain_attribute(obj, name, writing=True, value=value)
    ctx.attributes_used.setdefault(id(obj), set()).add(name)
    ctx.guards.note_number_write(guards.AttrSource(source, name), value)
    if not plain_class and type(obj).__setattr__ is not object.__setattr__ \
            and _tracked_copy(value):
        # Keras's tracking keeps a copy (``layer.outs is lst`` is False eagerly too).
        kept = _as_keras_keeps(ctx, value) if _keras_tracks(obj) else None
        if kept is None:   # another library's tracking (tf.Module): not read back
            kept = ctx.provenance.made(list(value) if type(value) is list else
                                       dict(value) if type(value) is dict else tuple(list(value)))
            ctx.tracked_copies[id(kept)] = None
        value = kept
    if _via_heap_op(value):
        shadow_heap.write_op(ctx, obj, source, Slot.name(name), value)
        return
    ctx.written_objects[id(obj)] = obj   # a recursion over it reads it stale (recursion.py)
    ctx.heap.write(obj, Slot.name(name), Write(WriteKind.ATTR, source, name, value, None))


def _library_setattr_keeps(kind, value):
    """Whether ``kind``'s ``__setattr__``/``__delattr__`` are a library's (a Keras
    model's, a ``tf.Module``'s) and ``value`` is one they store as it is: a Python
    number, string or None, a dynamic scalar, a tensor.  Their tracking wraps
    containers, layers and variables (not deferred), but these pass through, so
    replaying the write through the real ``__setattr__`` after the run is eager's."""
    for method in (kind.__setattr__, kind.__delattr__):
        if method in (object.__setattr__, object.__delattr__):
            continue
        if not whitelist.is_library(method):   # janus's own wrapper (library_config) too
            return False
    return _tracked_as_is(value) or _tracked_copy(value)


def _keras_tracks(obj):
    """Whether ``obj`` is a Keras 3 layer whose ``__setattr__`` tracks containers now
    (it wraps a list in a ``TrackedList``, a dict in a ``TrackedDict``)."""
    tracking = sys.modules.get('keras.src.utils.tracking')
    return (tracking is not None and hasattr(obj, '_tracker')
            and getattr(tracking, 'is_tracking_enabled', lambda: False)())


def _as_keras_keeps(ctx, value, depth=0):
    """What Keras's tracking stores for ``value`` (``Tracker.track``): lists and dicts
    as ``TrackedList``/``TrackedDict`` (without a tracker: nothing in them needs one,
    ``_tracked_copy``), nested ones too, tuples copied; each made by the call, so
    code reading the attribute back in the call gets eager's kind of object.  The
    write replays through Keras's own ``__setattr__`` after the run."""
    tracking = sys.modules['keras.src.utils.tracking']
    if depth > 4 or type(value) not in (list, tuple, dict):
        return value
    if type(value) is dict:
        kept = tracking.TrackedDict({k: _as_keras_keeps(ctx, v, depth + 1)
                                     for k, v in value.items()})
    elif type(value) is list:
        kept = tracking.TrackedList([_as_keras_keeps(ctx, v, depth + 1) for v in value])
    else:
        return ctx.provenance.made(tuple(_as_keras_keeps(ctx, v, depth + 1) for v in value))
    ctx.provenance.made(kept)
    ctx.tracked_copies[id(kept)] = kept   # kept alive: ids are compared while templating
    return kept


def _tracked_as_is(value):
    return (type(value) in guards.PRIMITIVES or protocol.is_graph_number(value)
            or isinstance(value, tf.Tensor))


def _tracked_copy(value, depth=0):
    """A list, tuple or dict of numbers, strings and tensors (``self.outputs = [x, y]``
    on a Keras layer): Keras's tracking stores a copy (a ``TrackedList``), made again
    from the real values when the write is replayed."""
    if depth > 4 or type(value) not in (list, tuple, dict):
        return False
    items = value.values() if type(value) is dict else value
    return all(_tracked_as_is(v) or _tracked_copy(v, depth + 1) for v in items)


def _is_learning_rate_setting(obj, name, value):
    """``optimizer.learning_rate = x`` on a Keras optimizer whose rate is a variable."""
    base = sys.modules.get('keras.src.optimizers.base_optimizer')
    variables = sys.modules.get('keras.src.backend.common.variables')
    return (name == 'learning_rate' and base is not None and variables is not None
            and isinstance(obj, base.BaseOptimizer)
            and isinstance(getattr(obj, '_learning_rate', None), variables.Variable)
            and (type(value) in (int, float) or protocol.is_graph_number(value)
                 or isinstance(value, tf.Tensor)))


def _set_learning_rate(ctx, obj, source, value):
    """Keras's setter assigns the rate variable: run it now, in the graph, in program
    order (an ``apply_gradients`` later in the step must see the new rate).  Guarded:
    the optimizer keeps that variable (a schedule set later is another program)."""
    ctx.guards.add(guards.GuardKind.ID_MATCH, guards.AttrSource(source, '_learning_rate'),
                   obj._learning_rate)
    obj.learning_rate = value


def _via_heap_op(value):
    return config.heap_ops and isinstance(value, tf.Tensor)


def _refuse_user_key(key):
    if observe.has_user_dunders(key):
        raise Unsupported(Reason.SPECIAL_METHODS,
                          'janus does not convert using a %s as a key (its class defines '
                          'special methods, such as __hash__/__eq__, that would run '
                          'unconverted)' % type(key).__name__)


def item(obj, key):
    found = protocol.item(obj, key)   # a stand-in's own answer (a node's, an array's)
    if found is not NOT_MODELLED:
        return found
    if isinstance(obj, tf.Tensor) or pytypes.is_variable(obj):
        with fallible.made_by_the_user():   # x[5] raises eagerly even if unused
            # a slicing op; the object itself is guarded by identity or spec
            return obj[_tensor_key(key)]
    _refuse_user_key(key)
    ctx = current()
    source = ctx.provenance.source_of(obj)
    if source is None:
        ctx.provenance.of(obj, 'a subscript')   # the call's own container: plain Python
        if observe.user_dunder(obj, '__getitem__') is not None:
            raise Unsupported(Reason.SPECIAL_METHODS,
                              'janus does not convert subscripts of a %s, whose class defines '
                              '__getitem__' % type(obj).__name__)
        # Only the key's kind matters to what a builtin container's subscript raises
        # (a graph tensor key lacks an eager one's __index__).
        value = _own_item(obj, key) if type(obj) in _BUILTIN_CONTAINERS \
            and pytypes.builtin_values_only((key,)) else obj[key]
        return ctx.provenance.made(value) if type(key) is slice else value
    if not pytypes.has_items(obj):
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          'janus does not convert subscripts of %s objects from outside '
                          'the call' % type(obj).__name__)
    if id(obj) in ctx.heap.changed:
        # As changed so far in this call; the items themselves (a slice: a new list).
        value = ctx.view(obj)[key]
        return ctx.provenance.made(value) if type(key) is slice else value
    key = _list_index(ctx, obj, source, key)
    written = ctx.heap.read(obj, Slot.item(key)) if _hashable(key) else MISSING
    if written is not MISSING:
        return written
    if type(key) is slice:
        return ctx.provenance.made(ctx.view(obj)[key])   # a new list of the items themselves
    if pytypes.model_of(obj).kind is pytypes.Kind.DICT and pytypes.is_constant(key) \
            and not hasattr(type(obj), '__missing__') \
            and key not in obj and not observe.compare('In', key, obj):   # guarded absent
        return _missing_key(key)
    value = obj[key]
    return ctx.guard_value(guards.ItemSource(source, key), value)


_BUILTIN_CONTAINERS = (list, tuple, dict, str, bytes, range)


@exceptions.raises_for_user
def _own_item(obj, key):
    """``obj[key]`` of the call's own container: what it raises, eager raises."""
    return obj[key]


@exceptions.raises_for_user
def _missing_key(key):
    """The KeyError of a key an outside dict is guarded not to hold."""
    raise KeyError(key)


def _composite_shape(value, name):
    """A RaggedTensor's or SparseTensor's static shape, where the graph knows every
    dimension eager code sees (a ragged dimension is None eagerly too); one relaxed
    in the graph refuses, and janus builds a graph with exact shapes instead."""
    shape = value.shape
    ragged = range(1, value.ragged_rank + 1) if isinstance(value, tf.RaggedTensor) else ()
    if shape.rank is None or any(dim is None for i, dim in enumerate(shape.as_list())
                                 if i not in ragged):
        raise Unsupported(Reason.UNKNOWN_SHAPE,
                          'the code reads the shape of a %s whose dimensions are only known at '
                          'run time' % type(value).__name__)
    return shape if name == 'shape' else (lambda: shape)


def _tensor_key(key):
    """A tensor's index with each dynamic int (``x[:, :longest]``, ``longest`` a graph
    input) as its scalar tensor: TF slices by a scalar int tensor as by the int."""
    kind = protocol.graph_number_type(key)
    if kind is not None:
        return protocol.graph_tensor(key) if kind is int else key
    if type(key) is slice:
        parts = (key.start, key.stop, key.step)
        if any(map(protocol.is_graph_number, parts)):
            return slice(*map(_tensor_key, parts))
        return key
    if type(key) is tuple and any(type(k) is slice or protocol.is_graph_number(k) for k in key):
        return tuple(map(_tensor_key, key))
    return key


def _list_index(ctx, obj, source, key):
    """An int index into an outside list or tuple as the position it names
    (``items[-1]`` and ``items[2]`` are one item of a 3-item list); the length it
    depends on is guarded.  Out of range: refused, so eager raises its IndexError."""
    if type(key) is not int or pytypes.model_of(obj).kind is pytypes.Kind.DICT \
            or id(obj) in ctx.heap.changed:
        return key
    if not -len(obj) <= key < len(obj):
        raise Unsupported(Reason.PYTHON_RAISES,
                          'index %d out of range of a %s of %d from outside the call'
                          % (key, type(obj).__name__, len(obj)))
    if key < 0:
        ctx.guards.add(GuardKind.LEN_MATCH, source, (type(obj), len(obj)))
        key += len(obj)
    return key


def _hashable(key):
    try:
        hash(key)
    except TypeError:
        return False
    return True


def setitem(obj, key, value):
    if protocol.set_item(obj, key, value) is not NOT_MODELLED:
        return   # written by a stand-in (a node or an array, container or key, refuses)
    _refuse_user_key(key)
    ctx = current()
    source = ctx.provenance.source_of(obj)
    if source is None:
        ctx.provenance.of(obj, 'an item write')   # the call's own container: plain Python
        if observe.user_dunder(obj, '__setitem__') is not None:
            raise Unsupported(Reason.SPECIAL_METHODS,
                              'janus does not convert item writes into a %s, whose class '
                              'defines __setitem__' % type(obj).__name__)
        obj[key] = value
        return
    ctx = _writable_context('an item of a %s' % type(obj).__name__)
    model = pytypes.model_of(obj)
    if model is None or not model.item_writes or not _hashable(key):
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          'janus converts item writes into outside lists and dicts only')
    if model.kind is pytypes.Kind.LIST and type(key) is not int:
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          'janus converts item writes into outside lists by int index only')
    if model.kind is pytypes.Kind.LIST:
        _check_list_index(ctx, obj, source, key)
    if id(obj) in ctx.heap.changed or (model.kind is pytypes.Kind.DICT and key not in obj
                                       and ctx.heap.read(obj, Slot.item(key)) is MISSING):
        # A new key changes the dict's structure; once changed, every item write is
        # replayed on the changed contents in program order (indices as Python has them).
        ctx.heap.change(obj, '__setitem__', (key, value))
        ctx.heap.writes.append(Write(WriteKind.ITEM, source, key, value, None))
        return
    key = _list_index(ctx, obj, source, key)
    if _via_heap_op(value) and type(key) in (int, str):
        shadow_heap.write_op(ctx, obj, source, Slot.item(key), value)
        return
    ctx.heap.write(obj, Slot.item(key), Write(WriteKind.ITEM, source, key, value, None))


def _check_list_index(ctx, obj, source, key):
    """An item write into an outside list is replayed after the run: its index must
    be in range on every call the graph serves (the length is guarded).  The
    call's own appends only grow the list, so an index within the length it had
    before them stays valid; any other index is refused (IndexError eagerly)."""
    if not -len(obj) <= key < len(obj):
        raise Unsupported(Reason.PYTHON_RAISES,
                          'janus does not convert writing item %d of a list of %d from '
                          'outside the call (Python raises IndexError unless the call grew '
                          'it first)' % (key, len(obj)))
    ctx.guards.add(GuardKind.LEN_MATCH, source, (type(obj), len(obj)))


def enter(manager):
    if whitelist.is_library_object(manager):
        ctx = current()
        if ctx is not None:
            ctx.recursion.tape_epoch += 1
        return manager
    raise Unsupported(Reason.CONTEXT_MANAGER,
                      'janus converts `with` only for TF/Keras context managers, not %s'
                      % type(manager).__name__)
