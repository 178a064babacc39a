"""Where each object of one trace came from: an outside object's ``Source``, or made
by the call, and which of its tensors are which eager tensors.

Needs nothing run before it; ``trace_context.TraceContext`` makes one ``Provenance``
(``ctx.provenance``) and one ``TensorIdentity`` (``ctx.tensors``) per trace.  The
provenance invariant lives here (DESIGN.md): every object the trace obtained from
outside the call is mapped to its ``Source``, every object the call made is registered
as made (``Provenance.made``), and ``Provenance.of`` refuses an object that is neither:
no code path concludes "made by the call" from a missing source.
"""
import dataclasses
import types

import numpy as np
import tensorflow as tf

from janus import guards
from janus.errors import InvariantError, Unsupported
from janus.reasons import Reason
from janus.library import whitelist
from janus.values import arrays, protocol, scalars

# Immutable values whose identity no write can reach: builtin ones, and NumPy's
# scalars (``tf.get_static_value(t) == 2`` gives an ``np.bool_``).
_VALUE_TYPES = (frozenset, range, slice, type(Ellipsis), type(NotImplemented))
_HEAP_TYPE = 1 << 9   # Py_TPFLAGS_HEAPTYPE: a class made by a ``class`` statement


def _is_value(value):
    return type(value) in _VALUE_TYPES or (isinstance(value, np.generic)
                                           and not isinstance(value, np.void))


def is_numpy_scalar(value):
    """A NumPy number or bool: immutable, compared by value like a Python constant."""
    return isinstance(value, (np.number, np.bool_))


def bound_to_object(method):
    """A builtin method bound to an object (``lst.append``), not a module's function."""
    owner = getattr(method, '__self__', None)
    return owner is not None and not isinstance(owner, types.ModuleType)


def _found(table, value):
    """What ``table`` (id -> (the object, ...)) holds for ``value`` itself, else None: an
    id alone may be a dead object's, reused."""
    found = table.get(id(value))
    return found if found is not None and found[0] is value else None


@dataclasses.dataclass
class Provenance:
    """Sources of outside objects, the objects the call made, and the trace's stand-ins
    for outside ones (copies, rebuilt argument containers, arrays, NumPy scalars)."""
    call_arguments: dict   # the real call's (the trace sees rebuilt containers)
    # code objects the trace converted (the context's ``code_objects``, shared): functions
    # and generators of that code are the call's own
    code_objects: set
    sources: dict = dataclasses.field(default_factory=dict)   # id(obj) -> Source, outside objects
    kept: list = dataclasses.field(default_factory=list)   # keeps those alive so ids stay unique
    made_objects: dict = dataclasses.field(default_factory=dict)   # id(obj) -> obj the call made
    # id(copy) -> (copy, original): copies standing for outside ones
    snapshots: dict = dataclasses.field(default_factory=dict)
    # id(view) -> (view, container): d.keys()/values()/items() of an outside dict
    views: dict = dataclasses.field(default_factory=dict)
    aliasable: list = dataclasses.field(default_factory=list)   # (source, value), each source once
    alias_uids: set = dataclasses.field(default_factory=set)
    # id(a real argument container) -> (it, the trace's rebuilt one)
    stand_ins: dict = dataclasses.field(default_factory=dict)
    # id(an outside ndarray) -> (it, its arrays.ArrayStandIn)
    arrays: dict = dataclasses.field(default_factory=dict)
    # id(a NumPy scalar argument) -> (it, its ArgSource...)
    numpy_scalars: dict = dataclasses.field(default_factory=dict)
    opaque_arguments: frozenset = frozenset()   # list arguments passed as themselves

    # -- arguments -------------------------------------------------------
    def register_arguments(self, arguments, tensors, opaque=frozenset()):
        """Gives the objects the trace sees as arguments (containers rebuilt around
        placeholders, other objects themselves) their ``ArgSource``, their tensors to
        ``tensors`` (the trace's ``TensorIdentity``); an ``opaque`` list is the caller's
        own list: its items are read through its source, at run time, like an
        attribute's list."""
        self.opaque_arguments = frozenset(opaque)
        for name, value in arguments.items():
            if name in opaque:
                self.remember(guards.ArgSource(name), value)
            else:
                self._register_argument(guards.ArgSource(name), value, tensors, set())

    def _register_argument(self, source, value, tensors, visiting):
        if isinstance(value, tf.Tensor):
            tensors.register(source, value)
            return
        if type(value) in guards.PRIMITIVES or protocol.is_graph_number(value):
            return
        if is_numpy_scalar(value):   # a constant (VALUE_MATCH), returned as the caller's own
            self.numpy_scalars.setdefault(id(value), (value, source))
            return
        self.remember(source, value)
        if arrays.is_stand_in(value):   # the same ndarray read elsewhere is this stand-in
            self.note_array(source.value(self.call_arguments, {}), value)
            return
        if type(value) in (list, dict) or isinstance(value, tuple):
            self._note_stand_in(source, value)
        if isinstance(value, types.MethodType) or (type(value) is types.BuiltinMethodType
                                                   and bound_to_object(value)):
            # obj.method / lst.append passed: obj is outside too
            self._register_argument(guards.AttrSource(source, '__self__'), value.__self__,
                                    tensors, visiting)
            return
        if id(value) in visiting:
            return   # a cyclic argument: its items were registered on the way in
        visiting.add(id(value))
        if type(value) is list or isinstance(value, tuple):
            for i, item in enumerate(value):
                self._register_argument(guards.ItemSource(source, i), item, tensors, visiting)
        elif type(value) is dict:
            for key, item in value.items():
                self._register_argument(guards.ItemSource(source, key), item, tensors,
                                        visiting)

    def _note_stand_in(self, source, value):
        """The rebuilt argument container ``value`` stands for the caller's own object:
        the same object read through an attribute (``f(x, m.items)``) is that one
        object in the trace too (``TraceContext.guard_value``), as eagerly."""
        real = source.value(self.call_arguments, {})
        if real is not value:
            self.stand_ins.setdefault(id(real), (real, value))

    # -- sources ---------------------------------------------------------
    def source_of(self, value):
        if type(value) in guards.PRIMITIVES or isinstance(value, tf.Tensor) \
                or protocol.is_graph_number(value):
            return None
        return self.sources.get(id(value))

    def remember(self, source, value):
        """Records where an outside object lives (its guards are the caller's)."""
        stand_in = _found(self.stand_ins, value)
        if stand_in is not None:
            # One object, one trace value (DESIGN.md): the caller's container the trace
            # rebuilt as an argument is met as that rebuilt one (``guard_value``).
            raise InvariantError('internal: the trace met a %s argument apart from the '
                                 'one it rebuilt for it (at %r)' % (type(value).__name__, source))
        if not whitelist.captured_by_identity(value) and not isinstance(value, tf.Tensor):
            self.alias(source, value)
        if id(value) not in self.sources:
            self.sources[id(value)] = source
            self.kept.append(value)

    def alias(self, source, value):
        """``source`` joins the ALIAS_MATCH partition (each source once)."""
        if source.uid() not in self.alias_uids:
            self.alias_uids.add(source.uid())
            self.aliasable.append((source, value))

    def alias_guard(self, arguments):
        """One guard on which outside objects are the same object: ``f(a, a)`` and
        ``f(a, b)`` need different graphs.  The expected partition is computed from
        the real call's values (the trace sees rebuilt argument containers)."""
        if len(self.aliasable) < 2:
            return None
        sources = [source for source, _ in self.aliasable]
        return guards.AliasGuard(sources, guards.AliasGuard.partition(sources, arguments))

    # -- stand-ins for outside objects -----------------------------------
    def stand_in_for(self, real):
        """The rebuilt argument container standing for the caller's ``real`` one, or None."""
        found = _found(self.stand_ins, real)
        return found[1] if found is not None else None

    def note_array(self, real, stand_in):
        """``stand_in`` (an ``arrays.ArrayStandIn``) is the outside ndarray ``real`` (the
        first one noted stays: an array passed twice is one stand-in)."""
        self.arrays.setdefault(id(real), (real, stand_in))

    def array_stand_in(self, real):
        """The stand-in of the outside ndarray ``real``, or None."""
        found = _found(self.arrays, real)
        return found[1] if found is not None else None

    def numpy_scalar_source(self, value):
        """Where a NumPy scalar argument came from (eager returns that very object), or
        None for one the call made."""
        found = _found(self.numpy_scalars, value)
        return found[1] if found is not None else None

    # -- made by the call, never inferred --------------------------------
    def made(self, value):
        """Registers ``value`` as made by this call (a literal, a comprehension, a
        builtin's or library call's result, a copy); returns it."""
        if id(value) not in self.made_objects and self.needs(value) \
                and id(value) not in self.sources:
            self.made_objects[id(value)] = value
        return value

    def is_made(self, value):
        return id(value) in self.made_objects

    def made_result(self, value, deep=False):
        """A result of a modelled operation (a builtin, a container method, an
        operator; ``deep``: library code, which builds nested containers of its own)
        as converted code gets it: copies standing for outside containers replaced by
        those containers (eager hands out the objects themselves), and the new object
        (with ``deep``, every new object in it) registered as made by the call.  Items
        a builtin only passed on keep the provenance they had."""
        return self._made_result(value, deep, 0)

    def _made_result(self, value, deep, depth):
        if type(value) in guards.PRIMITIVES or isinstance(value, tf.Tensor):
            return value
        snapshot = _found(self.snapshots, value)
        if snapshot is not None:
            return snapshot[1]
        if id(value) in self.sources or not (self.needs(value) or isinstance(value, tuple)):
            return value
        known = id(value) in self.made_objects
        if depth == 0 or deep:
            self.made(value)
        if depth > 8 or known:
            return value
        if type(value) is list:
            for i, item in enumerate(value):
                restored = self._made_result(item, deep, depth + 1)
                if restored is not item:
                    value[i] = restored
        elif type(value) is dict:
            for key, item in value.items():
                restored = self._made_result(item, deep, depth + 1)
                if restored is not item:
                    value[key] = restored
        elif isinstance(value, tuple):
            items = [self._made_result(item, deep, depth + 1) for item in value]
            if any(a is not b for a, b in zip(items, value)):
                if type(value) is tuple:
                    return tuple(items)
                if whitelist.is_namedtuple_class(type(value)):
                    return type(value)(*items)
        return value

    def of(self, value, what):
        """The ``Source`` of an outside object, or None for an object the call made
        (or a value whose identity no write can reach: a number, a tensor, a tuple,
        a library object).  Anything else reached the trace without either: an
        ``InvariantError`` (the call runs imperatively), never a guess."""
        source = self.source_of(value)
        if source is not None:
            return source
        if _found(self.snapshots, value) is not None:
            raise InvariantError('internal: %s: a copy of an outside %s reached the converted '
                                 'code in its place' % (what, type(value).__name__))
        if id(value) in self.made_objects or not self.needs(value):
            return None
        raise InvariantError('internal: %s: a %s object reached the trace with neither a '
                             'source nor a record that the call made it (janus lost track '
                             'of where it came from)' % (what, type(value).__name__))

    def needs(self, value):
        """Whether the trace must know where ``value`` came from: whether a write to it,
        or a read of it, could differ between an outside object and the call's own.
        Not for immutable values (numbers, strings, tensors, tuples, which the trace
        follows item by item), janus's own objects, library objects (identity and the
        library's own business, paper 4.3.1), builtin functions and types, and code
        this call defined (its code objects)."""
        kind = type(value)
        if kind in guards.PRIMITIVES or _is_value(value) or isinstance(value, tuple) \
                or isinstance(value, (tf.Tensor, tf.Variable)) or kind is scalars.DynamicScalar:
            return False
        module = getattr(kind, '__module__', '') or ''
        if module.startswith('janus.') or whitelist.is_library_object(value):
            return False
        if kind in (types.FunctionType, types.GeneratorType):
            code = getattr(value, '__code__', None) or getattr(value, 'gi_code', None)
            return code not in self.code_objects and not whitelist.is_library(value)
        if kind is types.BuiltinFunctionType:
            owner = value.__self__
            return not (owner is None or isinstance(owner, types.ModuleType))
        if kind is types.MethodType:
            return False   # its __self__ is checked where it is called
        if isinstance(value, type):
            # a C type (``numpy.int32``) takes no attribute writes: nothing to track
            return not (value.__module__ == 'builtins' or whitelist.is_library(value)
                        or not value.__flags__ & _HEAP_TYPE)
        if isinstance(value, types.ModuleType):
            return not whitelist.in_package(value.__name__, whitelist.LIBRARY_PREFIXES)
        return True

    # -- copies standing for outside containers --------------------------
    def is_snapshot(self, value):
        """Whether ``value`` is a copy standing for an outside container (``snapshot``)."""
        return _found(self.snapshots, value) is not None

    def snapshot(self, copy, original):
        """Records ``copy`` as standing for the outside container ``original`` (made
        by the call, but never to be written or handed out in its place)."""
        if copy is not original:
            self.snapshots[id(copy)] = (copy, original)
            self.kept.append(copy)
        return copy

    def note_view(self, view, container):
        """Records ``view`` (``d.items()`` of the copy standing for the outside dict
        ``container``) so a loop over it checks ``container`` stays unchanged."""
        self.views[id(view)] = (view, container)
        self.kept.append(view)
        return view

    def viewed_container(self, value):
        """The outside dict whose keys/values/items ``value`` is, or None."""
        found = _found(self.views, value)
        return found[1] if found is not None else None


@dataclasses.dataclass
class TensorIdentity:
    """Which eager tensor each tensor of the trace is: graph inputs standing for outside
    tensors, a tf.cond's merges (one of two sides), a tf.while_loop's tensors (whichever
    the last iteration left).  ``is`` and writes to outside state ask it."""
    provenance: Provenance   # an ``is`` between two inputs joins the ALIAS_MATCH partition
    passed_through: dict = dataclasses.field(default_factory=dict)   # id(input) -> (source, it)
    inputs: dict = dataclasses.field(default_factory=dict)   # the same for every graph input
    # id(a tensor two sides of a tf.cond gave) -> (it, pred, t, f)
    merged: dict = dataclasses.field(default_factory=dict)
    # id(a tuple a tf.cond merged item by item) -> it, pred, sides
    merged_tuples: dict = dataclasses.field(default_factory=dict)
    # id(a tf.while_loop's variable or result) -> (it, maybe outside)
    looped: dict = dataclasses.field(default_factory=dict)
    # id(a tf.cond output for a branch's choice of outside tensors) -> (it,)
    copies: dict = dataclasses.field(default_factory=dict)

    def register(self, source, tensor, passed_through=True):
        """A graph input standing for an outside tensor (an argument's placeholder, a
        hoisted read): returned or stored as is (``passed_through``), it comes back
        as that very tensor; compared by identity, it is that tensor (``same``)."""
        if passed_through:
            self.passed_through[id(tensor)] = (source, tensor)
        self.inputs.setdefault(id(tensor), (source, tensor))

    def is_input(self, tensor):
        """Whether ``tensor`` stands for an outside eager tensor (an input of the graph)."""
        found = self.inputs.get(id(tensor))
        return found is not None and found[1] is tensor

    def source(self, tensor):
        """The source of a graph input returned or stored as is, or None."""
        found = self.passed_through.get(id(tensor))
        return found[0] if found is not None and found[1] is tensor else None

    def note_merged(self, tensor, pred, true_value, false_value):
        """``tensor`` is ``true_value`` if ``pred`` else ``false_value`` (a tf.cond's
        merge): eagerly it *is* one of them, which ``is`` and returns keep."""
        self.merged[id(tensor)] = (tensor, pred, true_value, false_value)

    def note_merged_tuple(self, value, pred, true_value, false_value):
        """``value`` is a tuple a tf.cond merged item by item from ``true_value`` and
        ``false_value``: a new object, so its identity is not eager's (``is`` on it is
        refused, observe.compare; returned, the run's side comes back where it can:
        tracer._template)."""
        self.merged_tuples[id(value)] = (value, pred, true_value, false_value)

    def is_merged_tuple(self, value):
        return type(value) is not type(None) and _found(self.merged_tuples, value) is not None

    def merged_tuple_sides(self, value):
        """(pred, true side, false side) of a tuple ``note_merged_tuple`` knows, else None."""
        found = _found(self.merged_tuples, value)
        return found[1:] if found is not None else None

    def merged_sides(self, tensor):
        """(pred, true side, false side) of a tensor ``note_merged`` knows, else None."""
        found = _found(self.merged, tensor)
        return found[1:] if found is not None else None

    def note_looped(self, tensor, maybe_outside=False):
        """``tensor`` is a tf.while_loop's variable (in its body) or result: eagerly it
        is whichever tensor the last iteration left, maybe one from before the loop;
        ``is`` on it cannot be answered when tracing (``same`` refuses).
        ``maybe_outside``: a result eager may have as an outside tensor itself (the
        body kept an argument in it): writing it to outside state is refused
        (``check_written``), since the graph gives a copy."""
        if isinstance(tensor, tf.Tensor):
            self.looped[id(tensor)] = (tensor, maybe_outside)

    def note_exported(self, inner, output):
        """``output``, a tf.cond's output, stands for ``inner``, a tensor of one branch:
        where ``inner`` is a choice among outside tensors (nested ifs), eager's value is
        one of them and ``output`` a copy (``check_written`` refuses it)."""
        if self.merged_sides(inner) is not None and self.holds_input(inner):
            self.copies[id(output)] = (output,)

    def is_looped(self, tensor):
        return _found(self.looped, tensor) is not None

    def check_written(self, value, top_graph, depth=0):
        """Refuses writing (to outside state) a loop result that eager may hold as an
        outside tensor: a later ``is`` would find a copy where eager finds that one."""
        if depth > 8:
            return
        if isinstance(value, tf.Tensor):
            found = _found(self.looped, value)
            if found is not None and found[1]:
                raise Unsupported(Reason.TENSOR_IDENTITY,
                                  'janus does not convert storing a tensor a tensor-dependent '
                                  'loop may have left as a tensor from outside the call (an '
                                  'argument): the graph gives a copy, not that tensor')
            if _found(self.copies, value) is not None:
                raise Unsupported(Reason.TENSOR_IDENTITY,
                                  'janus does not convert storing a tensor that nested '
                                  'tensor-dependent ifs chose among tensors from outside the '
                                  'call: the graph gives a copy, not the chosen tensor')
            sides = self.merged_sides(value)
            for side in (sides[1:] if sides is not None else ()):
                if side.graph is not top_graph and self.holds_input(side):
                    raise Unsupported(Reason.TENSOR_IDENTITY,
                                      'janus does not convert storing a tensor that nested '
                                      'tensor-dependent ifs chose among tensors from outside '
                                      'the call: the graph gives a copy, not the chosen '
                                      'tensor')
                self.check_written(side, top_graph, depth + 1)
        elif type(value) in (list, tuple, dict):
            for item in (value.values() if type(value) is dict else value):
                self.check_written(item, top_graph, depth + 1)

    def holds_input(self, tensor, depth=0):
        """Whether ``tensor`` is (or a tf.cond may choose) a graph input: an outside
        eager tensor whose identity a graph's fresh result would lose."""
        if self.is_input(tensor):
            return True
        sides = self.merged_sides(tensor)
        return sides is not None and depth < 32 and any(
            self.holds_input(side, depth + 1) for side in sides[1:])

    def same(self, left, right):
        """``left is right`` for two tensors, as eager code finds it.  Two graph inputs
        (an argument, a hoisted ``self.last_x``) are one eager tensor or two: the
        trace answers from the call's real values and the ALIAS_MATCH guard keeps
        that answer for every call the graph serves (memoization by identity).  A
        tensor the call computed is none of its inputs.  A tensor a tensor-dependent
        ``if`` chose is the side the run takes: where the sides' answers differ, the
        answer is a bool known when the graph runs (the predicate)."""
        if left is right:
            return True
        for one, other in ((left, right), (right, left)):
            sides = self.merged_sides(one)
            if sides is not None:
                pred, true_value, false_value = sides
                when_true = self.same(true_value, other)
                when_false = self.same(false_value, other)
                if type(when_true) is bool and type(when_false) is bool:
                    if when_true == when_false:
                        return when_true
                    condition = pred if when_true else tf.logical_not(pred)
                    return scalars.DynamicScalar(tf.reshape(condition, []), bool)
                raise Unsupported(Reason.TENSOR_IDENTITY,
                                  'janus does not convert `is` between tensors chosen by '
                                  'nested tensor-dependent ifs')
        if self.is_looped(left) or self.is_looped(right):
            raise Unsupported(Reason.TENSOR_IDENTITY,
                              'janus does not convert `is` on a tensor a tensor-dependent '
                              'loop carries or gives (which tensor it is is known only when '
                              'the loop runs)')
        if not (self.is_input(left) and self.is_input(right)):
            return False
        sources = [self.inputs[id(tensor)][0] for tensor in (left, right)]
        for source in sources:
            self.provenance.alias(source, None)
        first, second = (source.value(self.provenance.call_arguments, {}) for source in sources)
        return first is second
