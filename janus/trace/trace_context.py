"""What one trace knows: its sources, guards, assumptions and shadow heap.

Needs nothing run before it.  ``tracer.py`` makes a ``TraceContext`` per
trace and enters it (``tracing.enter_trace``) for the thread that traces;
every runtime operator finds it with ``tracing.current()``.  The provenance invariant lives
here (DESIGN.md): every object the trace obtained from outside the call is
mapped to its ``Source``, every object the call made is registered as made
(``made``), and ``provenance`` refuses an object that is neither: no code
path concludes "made by the call" from a missing source.
"""
import collections
import dataclasses
import enum
import time
import types

import numpy as np
import tensorflow as tf

from janus import guards, pytypes
from janus.decisions import DYNAMIC
from janus.config import config
from janus.errors import InvariantError, TraceBudgetExceeded, Unsupported
from janus.guards import GuardKind
from janus.reasons import Reason
from janus.graph import ops
from janus.heap import shadow_heap
from janus.library import whitelist
from janus.values import arrays, scalars
from janus.heap.shadow_heap import MISSING, Slot
from janus.trace.tracing import Assumption



_OBSERVATIONS = {GuardKind.TRUTH_MATCH: 'truth', GuardKind.LEN_MATCH: 'len',
                 GuardKind.CONTAINS_MATCH: 'in'}


def _class_namespace(kind, source, expected):
    """``name in cls.__dict__`` (a mappingproxy): which class of an MRO defines an
    attribute, the one observation janus makes of a class's namespace."""
    return (kind is GuardKind.CONTAINS_MATCH and expected[0] is types.MappingProxyType
            and isinstance(source, guards.AttrSource) and source.name == '__dict__')


@dataclasses.dataclass
class RecursionState:
    """What one trace knows of recursion (``recursion/recursion.py``,
    ``recursion_levels``, ``vectorize``): one record, not fields of the context."""
    # code -> region_depth when its outermost active frame began (calls._inline)
    roots: dict = dataclasses.field(default_factory=dict)
    # Recursive graph functions over Python structures: their builds by call shape, and
    # code -> the build whose body is being traced.
    builds: dict = dataclasses.field(default_factory=dict)
    active: dict = dataclasses.field(default_factory=dict)
    # > 0 while a per-node body is traced to run for a level of nodes at once
    # (``recursion_levels``): each graph's outputs depend on its checks
    vectorizing: int = 0
    # bumped at every `with` of a library context manager: a GradientTape may start or
    # stop recording there (recursion_levels reuses results within one epoch)
    tape_epoch: int = 0
    structure_widened: bool = False   # a built one's structure widened: trace again
    writes: set = dataclasses.field(default_factory=set)   # ids of the writes recursion.call made
    builds_made: list = dataclasses.field(default_factory=list)   # every build, in order (explain)


class TraceContext:
    """What one trace learns: guards on outside values, in-graph assumptions."""

    def __init__(self, fn, arguments, plan, convert, call_user=None):
        limit = config.trace_seconds_limit
        self.deadline = time.perf_counter() + limit if limit and limit > 0 else None
        self.fn = fn
        self.call_arguments = arguments   # the real call's (the trace sees rebuilt containers)
        self.plan = plan
        self.convert = convert   # fn -> Converted: the generator's, handed in (no import cycle)
        # (fn, *args) -> result: ``calls.call``, converting and inlining user code.  Handed
        # in because calls.py sits above observe.py, whose operators call user dunders.
        self.call_user = call_user
        self.region_depth = 0  # > 0 while tracing a tf.cond branch or tf.while_loop body
        self.top_graph = None
        self.heap = shadow_heap.TraceHeap()
        self.last_loop_reads_variables = False   # set while tracing a tf.while_loop body
        self.soft_conditions = None   # a list in distributed steps: assumptions agreed on, see distributed.py
        # True while a recursive function's gradient is traced: it re-runs the forward's
        # computations for the nodes the same run's forward visited, whose checks passed
        # (a failed one ends the run first), so its assertions are left out.
        self.checks_proven = False
        self.shapes = None      # relaxed shapes of hoisted heap reads, kept across traces
        # Lineage of dynamic ints packed into a shape (scalars.packed_shape_call): a read
        # of a dimension left unknown needs their values (shapes.CheckedShape).
        self.number_shapes = frozenset()
        # Set by the tracer for a graph it builds (None: a context of no trace, as in tests).
        # (Reason, message) refusals library code may have swallowed (trace_output, CheckedShape)
        self.refusals = None
        self.host_leaves = None      # placeholder name -> how the host reads it (hostcheck.py)
        self.host_functions = None   # numpy_function op -> (its Python function, dtype)
        self.host_draws = None       # numpy_function op -> the generator it draws from
        self.call_time_readers = None   # call-time capture key -> janus's reader (tracer.py)
        self.library_preimages = {}   # lists Keras changed at trace time -> contents before
        self.has_mutations = False     # the graph changes state (tracer.defer_state_updates)
        self.safe_error_ops = None     # ops that run before any state change (tracer.py)
        self.guards = []
        self._guard_keys = set()
        self._sources = {}     # id(obj) -> Source, for objects from outside the call
        self._keep = []        # keeps those objects alive so ids stay unique
        self._made = {}        # id(obj) -> obj, for objects the call made (kept alive)
        self._snapshots = {}   # id(copy) -> (copy, original): copies standing for outside ones
        self._views = {}       # id(view) -> (view, container): d.keys()/values()/items() of an outside dict
        self.assumptions = []
        self.assert_ops = []
        self.converted = {}    # code object -> Converted, for to_code/explain
        self.code_objects = set()
        self.stack = []
        self.aliasable = []    # (source, value) of every outside object, each source once
        self._aliasable_uids = set()
        self._tensor_sources = {}   # id(graph input) -> (source, the input itself)
        self._input_tensors = {}    # the same for every graph input, hoisted in a branch too
        self._stand_ins = {}   # id(a real argument container) -> the trace's rebuilt one
        self._arrays = {}      # id(an outside ndarray) -> (it, its arrays.ArrayStandIn)
        self._numpy_scalars = {}   # id(a NumPy scalar argument) -> (it, its ArgSource...)
        self._merged = {}   # id(a tensor two sides of a tf.cond gave) -> (it, pred, t, f)
        self._merged_tuples = {}   # id(a tuple a tf.cond merged item by item) -> it, pred, sides
        self._looped = {}   # id(a tf.while_loop's variable or result) -> (it, maybe outside)
        self._copies = {}   # id(a tf.cond output for a branch's choice of outside tensors) -> it
        self.needs_value = frozenset()   # (uid, name) of dynamic scalars a use needed the value of
        self.attributes_used = {}   # id(outside object) -> attribute names read/written via janus
        self.zero_signs = {}   # (graph, tensor, dtype) -> eager's sign for its zero (scalars.py)
        # id -> a container written to a Keras object, as Keras keeps it (None: not read
        # back; access.py); templated only in its own write (tracer._write_templates)
        self.tracked_copies = {}
        self.tracked_templating = frozenset()   # of those, the ids the write templated now
        self._number_writes = {}   # uid -> name: number locations the call rewrites
        self.try_regions = []   # control/exceptions.TryRegion of every try body traced
        self.recursion = RecursionState()   # the recursion feature's own (recursion/recursion.py)
        self.opaque_arguments = frozenset()   # list arguments passed as themselves
        # list arguments a recursion's roots are in, rebuilt by the signature: passed
        # whole in the next trace (``retrace.PassWhole``)
        self.whole_arguments = set()
        self.written_objects = {}   # id -> outside object whose attribute the call wrote

    # -- sources ---------------------------------------------------------
    def register_arguments(self, arguments, opaque=frozenset()):
        """Gives the objects the trace sees as arguments (containers rebuilt around
        placeholders, other objects themselves) their ``ArgSource``; an ``opaque``
        list is the caller's own list: its items are read through its source, at run
        time, like an attribute's list."""
        self.opaque_arguments = frozenset(opaque)
        for name, value in arguments.items():
            if name in opaque:
                self._remember(guards.ArgSource(name), value)
            else:
                self._register_argument(guards.ArgSource(name), value, set())

    def _register_argument(self, source, value, visiting):
        if isinstance(value, tf.Tensor):
            self.register_tensor(source, value)
            return
        if type(value) in guards.PRIMITIVES or type(value) is scalars.DynamicScalar:
            return
        if is_numpy_scalar(value):   # a constant (VALUE_MATCH), returned as the caller's own
            self._numpy_scalars.setdefault(id(value), (value, source))
            return
        self._remember(source, value)
        if arrays.is_stand_in(value):   # the same ndarray read elsewhere is this stand-in
            real = source.value(self.call_arguments, {})
            self._arrays.setdefault(id(real), (real, value))
            return
        if type(value) in (list, dict) or isinstance(value, tuple):
            self._stand_in(source, value)
        if isinstance(value, types.MethodType) or (type(value) is types.BuiltinMethodType
                                                   and _bound_to_object(value)):
            # obj.method / lst.append passed: obj is outside too
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

    def _stand_in(self, source, value):
        """The rebuilt argument container ``value`` stands for the caller's own object:
        the same object read through an attribute (``f(x, m.items)``) is that one
        object in the trace too (``guard_value``), as eagerly."""
        real = source.value(self.call_arguments, {})
        if real is not value:
            self._stand_ins.setdefault(id(real), (real, value))

    def remember(self, source, value):
        """Records where an outside object lives (its guards are the caller's)."""
        self._remember(source, value)

    def _remember(self, source, value):
        stand_in = self._stand_ins.get(id(value))
        if stand_in is not None and stand_in[0] is value:
            # One object, one trace value (DESIGN.md): the caller's container the trace
            # rebuilt as an argument is met as that rebuilt one (``guard_value``).
            raise InvariantError('internal: the trace met a %s argument apart from the '
                                 'one it rebuilt for it (at %r)' % (type(value).__name__, source))
        if not whitelist.captured_by_identity(value) and not isinstance(value, tf.Tensor):
            self._alias(source, value)
        if id(value) not in self._sources:
            self._sources[id(value)] = source
            self._keep.append(value)

    def _alias(self, source, value):
        """``source`` joins the ALIAS_MATCH partition (each source once)."""
        if source.uid() not in self._aliasable_uids:
            self._aliasable_uids.add(source.uid())
            self.aliasable.append((source, value))

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

    def register_tensor(self, source, tensor, passed_through=True):
        """A graph input standing for an outside tensor (an argument's placeholder, a
        hoisted read): returned or stored as is (``passed_through``), it comes back
        as that very tensor; compared by identity, it is that tensor (``same_tensor``)."""
        if passed_through:
            self._tensor_sources[id(tensor)] = (source, tensor)
        self._input_tensors.setdefault(id(tensor), (source, tensor))

    def is_input_tensor(self, tensor):
        """Whether ``tensor`` stands for an outside eager tensor (an input of the graph)."""
        found = self._input_tensors.get(id(tensor))
        return found is not None and found[1] is tensor

    def note_merged(self, tensor, pred, true_value, false_value):
        """``tensor`` is ``true_value`` if ``pred`` else ``false_value`` (a tf.cond's
        merge): eagerly it *is* one of them, which ``is`` and returns keep."""
        self._merged[id(tensor)] = (tensor, pred, true_value, false_value)

    def note_merged_tuple(self, value, pred, true_value, false_value):
        """``value`` is a tuple a tf.cond merged item by item from ``true_value`` and
        ``false_value``: a new object, so its identity is not eager's (``is`` on it is
        refused, observe.compare; returned, the run's side comes back where it can:
        tracer._template)."""
        self._merged_tuples[id(value)] = (value, pred, true_value, false_value)

    def is_merged_tuple(self, value):
        found = self._merged_tuples.get(id(value))
        return type(value) is not type(None) and found is not None and found[0] is value

    def merged_tuple_sides(self, value):
        """(pred, true side, false side) of a tuple ``note_merged_tuple`` knows, else None."""
        found = self._merged_tuples.get(id(value))
        return found[1:] if found is not None and found[0] is value else None

    def merged_sides(self, tensor):
        """(pred, true side, false side) of a tensor ``note_merged`` knows, else None."""
        found = self._merged.get(id(tensor))
        return found[1:] if found is not None and found[0] is tensor else None

    def note_looped(self, tensor, maybe_outside=False):
        """``tensor`` is a tf.while_loop's variable (in its body) or result: eagerly it
        is whichever tensor the last iteration left, maybe one from before the loop;
        ``is`` on it cannot be answered when tracing (``same_tensor`` refuses).
        ``maybe_outside``: a result eager may have as an outside tensor itself (the
        body kept an argument in it): writing it to outside state is refused
        (``check_written_identity``), since the graph gives a copy."""
        if isinstance(tensor, tf.Tensor):
            self._looped[id(tensor)] = (tensor, maybe_outside)

    def note_exported(self, inner, output):
        """``output``, a tf.cond's output, stands for ``inner``, a tensor of one branch:
        where ``inner`` is a choice among outside tensors (nested ifs), eager's value is
        one of them and ``output`` a copy (``check_written_identity`` refuses it)."""
        if self.merged_sides(inner) is not None and self.holds_input_tensor(inner):
            self._copies[id(output)] = output

    def is_looped(self, tensor):
        found = self._looped.get(id(tensor))
        return found is not None and found[0] is tensor

    def check_written_identity(self, value, depth=0):
        """Refuses writing (to outside state) a loop result that eager may hold as an
        outside tensor: a later ``is`` would find a copy where eager finds that one."""
        if depth > 8:
            return
        if isinstance(value, tf.Tensor):
            found = self._looped.get(id(value))
            if found is not None and found[0] is value and found[1]:
                raise Unsupported(Reason.TENSOR_IDENTITY,
                                  'janus does not convert storing a tensor a tensor-dependent '
                                  'loop may have left as a tensor from outside the call (an '
                                  'argument): the graph gives a copy, not that tensor')
            found = self._copies.get(id(value))
            if found is not None and found is value:
                raise Unsupported(Reason.TENSOR_IDENTITY,
                                  'janus does not convert storing a tensor that nested '
                                  'tensor-dependent ifs chose among tensors from outside the '
                                  'call: the graph gives a copy, not the chosen tensor')
            sides = self.merged_sides(value)
            for side in (sides[1:] if sides is not None else ()):
                if side.graph is not self.top_graph and self.holds_input_tensor(side):
                    raise Unsupported(Reason.TENSOR_IDENTITY,
                                      'janus does not convert storing a tensor that nested '
                                      'tensor-dependent ifs chose among tensors from outside '
                                      'the call: the graph gives a copy, not the chosen '
                                      'tensor')
                self.check_written_identity(side, depth + 1)
        elif type(value) in (list, tuple, dict):
            for item in (value.values() if type(value) is dict else value):
                self.check_written_identity(item, depth + 1)

    def holds_input_tensor(self, tensor, depth=0):
        """Whether ``tensor`` is (or a tf.cond may choose) a graph input: an outside
        eager tensor whose identity a graph's fresh result would lose."""
        if self.is_input_tensor(tensor):
            return True
        sides = self.merged_sides(tensor)
        return sides is not None and depth < 32 and any(
            self.holds_input_tensor(side, depth + 1) for side in sides[1:])

    def same_tensor(self, left, right):
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
                when_true = self.same_tensor(true_value, other)
                when_false = self.same_tensor(false_value, other)
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
        if not (self.is_input_tensor(left) and self.is_input_tensor(right)):
            return False
        sources = [self._input_tensors[id(tensor)][0] for tensor in (left, right)]
        for source in sources:
            self._alias(source, None)
        first, second = (source.value(self.call_arguments, {}) for source in sources)
        return first is second

    def numpy_scalar_source(self, value):
        """Where a NumPy scalar argument came from (eager returns that very object), or
        None for one the call made."""
        found = self._numpy_scalars.get(id(value))
        return found[1] if found is not None and found[0] is value else None

    def tensor_source(self, tensor):
        found = self._tensor_sources.get(id(tensor))
        return found[0] if found is not None and found[1] is tensor else None

    def source_of(self, value):
        if type(value) in guards.PRIMITIVES or isinstance(value, tf.Tensor) \
                or type(value) is scalars.DynamicScalar:
            return None
        return self._sources.get(id(value))

    # -- provenance: sourced, or made by the call, never inferred ----------
    def made(self, value):
        """Registers ``value`` as made by this call (a literal, a comprehension, a
        builtin's or library call's result, a copy); returns it."""
        if id(value) not in self._made and self._needs_provenance(value) \
                and id(value) not in self._sources:
            self._made[id(value)] = value
        return value

    def is_made(self, value):
        return id(value) in self._made

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
        snapshot = self._snapshots.get(id(value))
        if snapshot is not None and snapshot[0] is value:
            return snapshot[1]
        if id(value) in self._sources or not (self._needs_provenance(value)
                                              or isinstance(value, tuple)):
            return value
        known = id(value) in self._made
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

    def check_deadline(self):
        """Raises TraceBudgetExceeded once the trace ran past ``config.trace_seconds_limit``
        (checked at each tensor test: where nested loops and branches make traces long)."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise TraceBudgetExceeded('tracing took more than %g s (janus.config.'
                                      'trace_seconds_limit)' % config.trace_seconds_limit)

    def provenance(self, value, what):
        """The ``Source`` of an outside object, or None for an object the call made
        (or a value whose identity no write can reach: a number, a tensor, a tuple,
        a library object).  Anything else reached the trace without either: an
        ``InvariantError`` (the call runs imperatively), never a guess."""
        source = self.source_of(value)
        if source is not None:
            return source
        snapshot = self._snapshots.get(id(value))
        if snapshot is not None and snapshot[0] is value:
            raise InvariantError('internal: %s: a copy of an outside %s reached the converted '
                                 'code in its place' % (what, type(value).__name__))
        if id(value) in self._made or not self._needs_provenance(value):
            return None
        raise InvariantError('internal: %s: a %s object reached the trace with neither a '
                             'source nor a record that the call made it (janus lost track '
                             'of where it came from)' % (what, type(value).__name__))

    def _needs_provenance(self, value):
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

    def is_snapshot(self, value):
        """Whether ``value`` is a copy standing for an outside container (``snapshot``)."""
        found = self._snapshots.get(id(value))
        return found is not None and found[0] is value

    def note_view(self, view, container):
        """Records ``view`` (``d.items()`` of the copy standing for the outside dict
        ``container``) so a loop over it checks ``container`` stays unchanged."""
        self._views[id(view)] = (view, container)
        self._keep.append(view)
        return view

    def viewed_container(self, value):
        """The outside dict whose keys/values/items ``value`` is, or None."""
        found = self._views.get(id(value))
        return found[1] if found is not None and found[0] is value else None

    def snapshot(self, copy, original):
        """Records ``copy`` as standing for the outside container ``original`` (made
        by the call, but never to be written or handed out in its place)."""
        if copy is not original:
            self._snapshots[id(copy)] = (copy, original)
            self._keep.append(copy)
        return copy

    def add_guard(self, kind, source, expected):
        observation = _OBSERVATIONS.get(kind)
        if observation is not None:   # default-deny by the type table (DESIGN.md)
            model = pytypes.model_of_type(expected[0])
            if (model is None or observation not in model.observes) \
                    and not _class_namespace(kind, source, expected):
                raise InvariantError('internal: a %s guard on a %s, whose %s janus does not '
                                     'model' % (kind.value, expected[0].__name__, observation))
        key = (kind, source.uid())
        if kind is GuardKind.CONTAINS_MATCH:
            key += (type(expected[1]), expected[1])   # one guard per key looked up
        elif kind is GuardKind.HASATTR_MATCH:
            key += (expected[0],)                     # one guard per attribute name
        if key not in self._guard_keys:
            self._guard_keys.add(key)
            self.guards.append(guards.SourceGuard(kind, source, expected))

    def note_number_write(self, source, value):
        """A write of a number to ``source``.  If the trace also read a Python number
        there as a constant (VALUE_MATCH, before or after the write), the function
        evolves it (``self.step += 1``), so the next call would miss; the janus
        function makes it dynamic before caching the graph (``evolving``)."""
        if type(value) in (int, float) or type(value) is scalars.DynamicScalar:
            self._number_writes.setdefault(source.uid(), repr(source))

    @property
    def evolving(self):
        """(uid, name) of the numbers the trace read as constants and the call rewrites."""
        return {(uid, name) for uid, name in self._number_writes.items()
                if (GuardKind.VALUE_MATCH, uid) in self._guard_keys}

    def guard_value(self, source, value, hoist=True):
        """Guards a value read from ``source``, remembers where it lives, and returns
        what the trace should use: the value, or for a tensor a hoisted graph input."""
        kind = type(value)
        if kind in guards.PRIMITIVES:
            if hoist and self.top_graph is not None and self.plan.is_dynamic_scalar(source):
                dynamic = scalars.read_relaxed(self, source, value)
                if dynamic is not None:
                    return dynamic
            self.add_guard(GuardKind.VALUE_MATCH, source, value)
            return value
        if kind is guards.EagerTensor and hoist and self.top_graph is not None:
            return shadow_heap.hoist_tensor(self, source, value)
        if isinstance(value, tf.Tensor) and kind is not guards.EagerTensor \
                or kind is scalars.DynamicScalar:
            # Already in this graph: an argument's placeholder, a hoisted read, or a
            # relaxed number of a container argument (its signature node guards it).
            return value
        if isinstance(value, enum.Enum):
            self.add_guard(GuardKind.ID_MATCH, source, value)   # Mode.EVAL is not Mode.TRAIN
            return value
        if whitelist.is_numpy_callable(value):   # ``np.sqrt``: a call of it decides (calls.py)
            self.add_guard(GuardKind.ID_MATCH, source, value)
            self._remember(source, value)
            return value
        if arrays.is_stand_in(value):
            return value   # an argument's, or read before: its guards are taken
        if arrays.is_numeric_array(value) and hoist and self.top_graph is not None:
            return self._array(source, value)
        if is_numpy_scalar(value):   # ``self.scale = np.float32(2)``: a constant, by value
            self.add_guard(GuardKind.VALUE_MATCH, source, value)
            return value
        if type(value).__module__ == 'numpy':
            raise Unsupported(Reason.NUMPY_GLOBAL,
                              'janus does not convert reading the NumPy value %r from outside '
                              'the call (it would be frozen into the graph); keep it in a '
                              'tf.Variable or pass a tensor' % (source,))
        if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
            self.add_guard(GuardKind.METHOD_MATCH, source, value.__func__)
            self._guard_owner(source, value)
            return value
        if kind in (list, dict) or isinstance(value, tuple):
            self.add_guard(GuardKind.TYPE_MATCH, source, kind)   # contents: guard_deep, lazily
            stand_in = self._stand_ins.get(id(value))
            if stand_in is not None and stand_in[0] is value:
                # The caller's container the trace also has as a (rebuilt) argument: one
                # object, as eagerly; ALIAS_MATCH keeps them one on later calls.
                self._alias(source, stand_in[1])
                return stand_in[1]
        elif whitelist.captured_by_identity(value):
            self.add_guard(GuardKind.ID_MATCH, source, value)
        else:
            self.add_guard(GuardKind.TYPE_MATCH, source, kind)
        self._remember(source, value)
        if kind is types.BuiltinMethodType and _bound_to_object(value):
            self._guard_owner(source, value)   # ``self.record = self.history.append``
        return value

    def _array(self, source, value):
        """An outside ndarray read at ``source``: a graph input fed from there on every
        run (``shadow_heap.hoist_array``, ARRAY_MATCH); one stand-in per array, however
        often or wherever it is read (ALIAS_MATCH keeps the sources one array)."""
        found = self._arrays.get(id(value))
        if found is not None and found[0] is value:
            stand_in = found[1]
            self.add_guard(GuardKind.ARRAY_MATCH, source, (value.dtype, stand_in.shape))
        else:
            hoisted, shape = shadow_heap.hoist_array(self, source, value)
            stand_in = arrays.ArrayStandIn(hoisted, value.dtype, shape)
            self._arrays[id(value)] = (value, stand_in)
        self._remember(source, stand_in)   # and ALIAS_MATCH, per source
        return stand_in

    def _guard_owner(self, source, method):
        """A method read from outside (``m.act = scaler.apply`` as a callback, a
        builtin method of a list): its ``__self__`` is an outside object too, read
        and written through ``method.__self__`` on every call (the ALIAS_MATCH
        guard keeps which other outside object it is)."""
        owner, where = method.__self__, guards.AttrSource(source, '__self__')
        known = self.source_of(owner)
        if known is None:
            self.guard_value(where, owner, hoist=False)
        elif isinstance(source, guards.AttrSource) and known.uid() == source.base.uid() \
                and source.name not in (getattr(owner, '__dict__', None) or ()):
            # ``self.helper``, found on the class: bound to ``self`` as long as the object
            # does not get an attribute of that name (``self.helper = other.helper``).
            own = getattr(owner, '__dict__', None)
            if own is not None:
                self.add_guard(GuardKind.CONTAINS_MATCH, guards.AttrSource(source.base,
                                                                           '__dict__'),
                               (type(own), source.name, False))
        else:
            self._remember(where, owner)   # the ALIAS_MATCH guard says which object it is

    def guard_deep(self, value, depth=0):
        """Guards the length and every item of an outside container code will read
        (``==``, ``in`` with a key that is not a constant): what its model
        (``janus/pytypes.py``) lets janus guard, or ``Unsupported``."""
        source = self.source_of(value)
        if source is None or depth > 8:
            return
        if id(value) in self.heap.changed:
            raise Unsupported(Reason.OUTSIDE_READ_AFTER_CHANGE,
                              'janus does not convert reading a %s from outside the call after '
                              'changing it in place in the same call' % type(value).__name__)
        model = pytypes.model_of(value)
        if model is not None and model.kind is pytypes.Kind.SET:
            self.guard_set(source, value)
            return
        if not pytypes.has_items(value):   # a Counter (truth, len, `in` only) refuses here
            whitelist.refuse_opaque(value, ('__eq__',), 'reading every item of')
            return
        if self._guard_flat_constants(source, value):
            return
        if model.kind is pytypes.Kind.DICT:
            self.add_guard(GuardKind.KEYS_MATCH, source, list(value))
            items = value.items()
        else:
            self.add_guard(GuardKind.LEN_MATCH, source, (type(value), len(value)))
            items = enumerate(value)
        for key, item in items:
            if self.heap.read(value, Slot.item(key)) is not MISSING:
                continue   # written earlier in this call: the trace knows it
            self.guard_value(guards.ItemSource(source, key), item, hoist=False)
            self.guard_deep(item, depth + 1)

    def guard_set(self, source, value):
        """One SET_MATCH guard for an outside set or frozenset janus observes whole: its
        items must be constants (no NaN: ``==`` cannot tell two NaNs' places apart)."""
        if not all(pytypes.is_constant(item) and item == item for item in value):
            raise Unsupported(Reason.OUTSIDE_VALUE,
                              'janus converts observing a %s from outside the call only when '
                              'its items are Python constants (not NaN)' % type(value).__name__)
        self.add_guard(GuardKind.SET_MATCH, source, type(value)(value))

    def set_contents(self, value):
        """An outside set or frozenset as this point of the call sees it (guarded whole,
        this call's adds and discards applied), for order-free observations only:
        truth, ``len``, ``in``, comparisons."""
        self.guard_set(self.source_of(value), value)
        copy = set(value)
        for method, args in self.heap.pending.get(id(value), ()):
            getattr(copy, method)(*args)
        return copy

    def contents(self, value, depth=0):
        """Guards an outside container's length and items and returns a copy of it in
        which every tensor is re-read on each run (hoisted), for values that flow into
        the graph: library arguments, loops, slices, print.  Only ordered containers
        have contents (``pytypes.has_items``); another outside container at the top
        refuses (a set's order is not one janus can reproduce; a Counter's items are
        not modelled), and any other value is itself."""
        source = self.source_of(value)
        if source is None or depth > 8:
            return value
        if not pytypes.has_items(value):
            model = pytypes.model_of(value)
            if depth == 0 and pytypes.is_set(value):
                raise Unsupported(Reason.SET_ORDER,
                                  'janus does not convert iterating over, copying or passing on '
                                  'a %s from outside the call (Python\'s order of its items is '
                                  'not one janus can reproduce); use sorted(...) of it'
                                  % type(value).__name__)
            if depth == 0 and model is not None and model.container:   # a Counter
                raise Unsupported(Reason.OUTSIDE_VALUE,
                                  'janus does not convert reading the items of a %s from '
                                  'outside the call (janus models its truth, len and `in` only)'
                                  % type(value).__name__)
            return value
        copy = self._contents_before_changes(source, value, depth)
        pending = self.heap.pending.get(id(value), ())
        for method, args in pending:
            getattr(copy, method)(*args)   # this call's appends/updates, in program order
        if pending:   # outside containers they added (``extend(self.more)``): their contents
            deep = lambda v: self.contents(v, depth + 1)   # noqa: E731
            if type(copy) is dict:
                copy = {k: deep(v) for k, v in copy.items()}
            elif type(copy) is collections.deque:
                copy = collections.deque([deep(v) for v in copy], copy.maxlen)
            else:
                copy = [deep(v) for v in copy]
        return self.snapshot(copy, value)

    def view(self, value):
        """An outside container's items as this point of the call sees them, one level
        deep, for code that hands the items on (loops, unpacking, ``zip``,
        ``enumerate``, ``d.values()``, ``d.get(k)``): a copy of the container (its
        length or keys guarded, this call's changes applied) whose items are the
        guarded reads of each item: a tensor re-read every run, a number guarded, and
        a container or any other object the very object, with its ``ItemSource``, so
        writes through it reach the real one (eager hands out the items themselves)."""
        source = self.source_of(value)
        if source is None:
            return value
        model = pytypes.model_of(value)
        if model is None or not pytypes.has_items(value) or model.kind is pytypes.Kind.DEQUE:
            return self.contents(value)   # refused, itself, or (a deque) a guarded copy
        if self._guard_flat_constants(source, value):
            copy = list(value) if type(value) is list else (
                dict(value) if type(value) is dict else value)
        elif model.kind is pytypes.Kind.DICT:
            self.add_guard(GuardKind.KEYS_MATCH, source, list(value))
            copy = {k: self._item_now(value, source, k, v) for k, v in value.items()}
        else:
            self.add_guard(GuardKind.LEN_MATCH, source, (type(value), len(value)))
            items = [self._item_now(value, source, i, v) for i, v in enumerate(value)]
            if type(value) is tuple or not isinstance(value, tuple):
                copy = tuple(items) if type(value) is tuple else items
            else:
                copy = type(value)(*items)   # a namedtuple
        for method, args in self.heap.pending.get(id(value), ()):
            getattr(copy, method)(*args)   # this call's appends/updates, in program order
        return self.snapshot(copy, value)

    def _contents_before_changes(self, source, value, depth):
        if self._guard_flat_constants(source, value):
            return type(value)(value) if type(value) in (list, tuple, dict) else list(value)
        kind = pytypes.model_of(value).kind
        if kind is pytypes.Kind.DICT:
            self.add_guard(GuardKind.KEYS_MATCH, source, list(value))
            return {k: self.contents(self._item_now(value, source, k, v), depth + 1)
                    for k, v in value.items()}
        self.add_guard(GuardKind.LEN_MATCH, source, (type(value), len(value)))
        items = [self.contents(self._item_now(value, source, i, v), depth + 1)
                 for i, v in enumerate(value)]
        if kind is pytypes.Kind.DEQUE:   # appends to the copy drop what the real one drops
            self.add_guard(GuardKind.VALUE_MATCH, guards.AttrSource(source, 'maxlen'),
                           value.maxlen)
            return collections.deque(items, value.maxlen)
        if type(value) is tuple or not isinstance(value, tuple):
            return tuple(items) if type(value) is tuple else items   # a list subclass: a list
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
        if any(self.heap.read(value, Slot.item(k)) is not MISSING
               for k in (value if type(value) is dict else range(len(value)))):
            return False
        snapshot = type(value)(value)
        self.add_guard(GuardKind.EQUALS_MATCH, source, (snapshot, tuple(map(type, snapshot))))
        return True

    def _item_now(self, container, source, key, value):
        """An item as this point of the call sees it: written earlier in the call
        (``obj.items[0] = x``), or the guarded outside value."""
        written = self.heap.read(container, Slot.item(key))
        if written is not MISSING:
            return written
        return self.guard_value(guards.ItemSource(source, key), value)

    def guard_function(self, fn):
        """An inlined function's body and defaults as traced (both can be rebound in
        place: ``helper.__defaults__ = (2.0,)``)."""
        self.add_guard(GuardKind.FUNCTION_MATCH, guards.ObjectSource(fn),
                       (fn.__code__, fn.__defaults__, fn.__kwdefaults__))

    def register_converted(self, code, converted):
        """A function the trace runs converted.  Its site ids name the nodes the
        profiler recorded: both come from one ``pyct.frontend.front_end`` of the code."""
        self.converted[code] = converted
        self.code_objects |= converted.code_objects

    # -- assumptions -----------------------------------------------------
    def decide(self, key):
        """The plan's outcome for this evaluation of site ``key`` (dynamic inside regions)."""
        if self.region_depth:
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
        static = tf.get_static_value(condition)
        if (static is not None and bool(static)) or self.checks_proven:
            return gate
        filename, site_lineno = self.site_line(key) if key is not None else (None, None)
        if filename is None and self.stack:
            filename = self.stack[-1].filename
        lineno = lineno or site_lineno
        assumption = Assumption(len(self.assumptions), kind, filename, lineno, description, key)
        self.assumptions.append(assumption)
        if self.soft_conditions is not None and self.region_depth == 0:
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


# Immutable values whose identity no write can reach: builtin ones, and NumPy's
# scalars (``tf.get_static_value(t) == 2`` gives an ``np.bool_``).
_VALUE_TYPES = (frozenset, range, slice, type(Ellipsis), type(NotImplemented))


def is_numpy_scalar(value):
    """A NumPy number or bool: immutable, compared by value like a Python constant."""
    return isinstance(value, (np.number, np.bool_))


_HEAP_TYPE = 1 << 9   # Py_TPFLAGS_HEAPTYPE: a class made by a ``class`` statement


def _is_value(value):
    return type(value) in _VALUE_TYPES or (isinstance(value, np.generic)
                                           and not isinstance(value, np.void))


def _bound_to_object(method):
    """A builtin method bound to an object (``lst.append``), not a module's function."""
    owner = getattr(method, '__self__', None)
    return owner is not None and not isinstance(owner, types.ModuleType)
