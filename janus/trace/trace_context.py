"""What one trace knows: its guards on outside values, assumptions and shadow heap, with
the records it keeps them in (where objects came from: ``provenance.py``).

Needs nothing run before it.  ``tracer.py`` makes a ``TraceContext`` per
trace and enters it (``tracing.enter_trace``) for the thread that traces;
every runtime operator finds it with ``tracing.current()``.  Outside values are
read here (``guard_value``, ``contents``, ``view``): each is guarded and given its
``Source`` (``ctx.provenance``, which holds the provenance invariant, DESIGN.md).
"""
import collections
import dataclasses
import enum
import time
import types

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
from janus.values import arrays, protocol, scalars
from janus.values.protocol import StandIn
from janus.heap.shadow_heap import MISSING, Slot
from janus.trace import provenance
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
    # code -> region_depth when its outermost active frame began (inlining.inline)
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


@dataclasses.dataclass
class GuardSet:
    """The guards one trace takes, each once, in order (the graph's ``source_guards``),
    and the numbers the call rewrites (``evolving``)."""
    taken: list = dataclasses.field(default_factory=list)
    keys: set = dataclasses.field(default_factory=set)   # what each SourceGuard taken looks at
    number_writes: dict = dataclasses.field(default_factory=dict)   # uid -> name, rewritten numbers

    def add(self, kind, source, expected):
        """Takes a ``SourceGuard`` (once per kind and source, and per key or attribute name
        looked up)."""
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
        if key not in self.keys:
            self.keys.add(key)
            self.taken.append(guards.SourceGuard(kind, source, expected))

    def take(self, guard):
        """Takes a guard of another kind (aliasing, a structure, library settings) as is."""
        self.taken.append(guard)

    def note_number_write(self, source, value):
        """A write of a number to ``source``.  If the trace also read a Python number
        there as a constant (VALUE_MATCH, before or after the write), the function
        evolves it (``self.step += 1``), so the next call would miss; the janus
        function makes it dynamic before caching the graph (``evolving``)."""
        if type(value) in (int, float) or protocol.is_graph_number(value):
            self.number_writes.setdefault(source.uid(), repr(source))

    @property
    def evolving(self):
        """(uid, name) of the numbers the trace read as constants and the call rewrites."""
        return {(uid, name) for uid, name in self.number_writes.items()
                if (GuardKind.VALUE_MATCH, uid) in self.keys}


@dataclasses.dataclass
class HostState:
    """What the host program of the trace's graph reads (``graphgen/hostcheck.py``): None
    while the trace collects none (a context of no graph, as in tests), then a dict."""
    leaves: dict = None       # placeholder name -> how the host reads it (hostcheck.py)
    functions: dict = None    # numpy_function op -> (its Python function, dtype)
    draws: dict = None        # numpy_function op -> the generator it draws from
    call_time_readers: dict = None   # call-time capture key -> janus's reader (tracer.py)


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
        self.host = HostState()   # what the host program reads (None: not collected)
        self.library_preimages = {}   # lists Keras changed at trace time -> contents before
        self.has_mutations = False     # the graph changes state (tracer.defer_state_updates)
        self.safe_error_ops = None     # ops that run before any state change (tracer.py)
        self.guards = GuardSet()
        self.assumptions = []
        self.assert_ops = []
        self.converted = {}    # code object -> Converted, for to_code/explain
        self.code_objects = set()
        self.provenance = provenance.Provenance(arguments, self.code_objects)
        self.tensors = provenance.TensorIdentity(self.provenance)
        self.stack = []
        self.needs_value = frozenset()   # (uid, name) of dynamic scalars a use needed the value of
        self.attributes_used = {}   # id(outside object) -> attribute names read/written via janus
        self.zero_signs = {}   # (graph, tensor, dtype) -> eager's sign for its zero (scalars.py)
        # id -> a container written to a Keras object, as Keras keeps it (None: not read
        # back; access.py); templated only in its own write (templating._write_templates)
        self.tracked_copies = {}
        self.tracked_templating = frozenset()   # of those, the ids the write templated now
        self.try_regions = []   # control/exceptions.TryRegion of every try body traced
        self.recursion = RecursionState()   # the recursion feature's own (recursion/recursion.py)
        # list arguments a recursion's roots are in, rebuilt by the signature: passed
        # whole in the next trace (``retrace.PassWhole``)
        self.whole_arguments = set()
        self.written_objects = {}   # id -> outside object whose attribute the call wrote

    def check_deadline(self):
        """Raises TraceBudgetExceeded once the trace ran past ``config.trace_seconds_limit``
        (checked at each tensor test: where nested loops and branches make traces long)."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise TraceBudgetExceeded('tracing took more than %g s (janus.config.'
                                      'trace_seconds_limit)' % config.trace_seconds_limit)

    # -- outside values: guarded, and given their sources -----------------
    def register_default(self, fn, name, value):
        """A callee's default argument: an outside object, written through the heap."""
        if type(value) in guards.PRIMITIVES or isinstance(value, tf.Tensor):
            return value
        return self.guard_value(guards.DefaultSource(fn, name), value, hoist=False)

    def guard_value(self, source, value, hoist=True):
        """Guards a value read from ``source``, remembers where it lives, and returns
        what the trace should use: the value, or for a tensor a hoisted graph input."""
        kind = type(value)
        if kind in guards.PRIMITIVES:
            if hoist and self.top_graph is not None and self.plan.is_dynamic_scalar(source):
                dynamic = scalars.read_relaxed(self, source, value)
                if dynamic is not None:
                    return dynamic
            self.guards.add(GuardKind.VALUE_MATCH, source, value)
            return value
        if kind is guards.EagerTensor and hoist and self.top_graph is not None:
            return shadow_heap.hoist_tensor(self, source, value)
        if isinstance(value, tf.Tensor) and kind is not guards.EagerTensor \
                or isinstance(value, StandIn):
            # Already in this graph: an argument's placeholder, a hoisted read, a relaxed
            # number of a container argument (its signature node guards it), or an
            # array's stand-in (an argument's, or read before: its guards are taken).
            return value
        if isinstance(value, enum.Enum):
            self.guards.add(GuardKind.ID_MATCH, source, value)   # Mode.EVAL is not Mode.TRAIN
            return value
        if whitelist.is_numpy_callable(value):   # ``np.sqrt``: a call of it decides (calls.py)
            self.guards.add(GuardKind.ID_MATCH, source, value)
            self.provenance.remember(source, value)
            return value
        if arrays.is_numeric_array(value) and hoist and self.top_graph is not None:
            return self._array(source, value)
        if provenance.is_numpy_scalar(value):   # ``self.scale = np.float32(2)``: by value
            self.guards.add(GuardKind.VALUE_MATCH, source, value)
            return value
        if type(value).__module__ == 'numpy':
            raise Unsupported(Reason.NUMPY_GLOBAL,
                              'janus does not convert reading the NumPy value %r from outside '
                              'the call (it would be frozen into the graph); keep it in a '
                              'tf.Variable or pass a tensor' % (source,))
        if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
            self.guards.add(GuardKind.METHOD_MATCH, source, value.__func__)
            self._guard_owner(source, value)
            return value
        if kind in (list, dict) or isinstance(value, tuple):
            self.guards.add(GuardKind.TYPE_MATCH, source, kind)   # contents: guard_deep, lazily
            stand_in = self.provenance.stand_in_for(value)
            if stand_in is not None:
                # The caller's container the trace also has as a (rebuilt) argument: one
                # object, as eagerly; ALIAS_MATCH keeps them one on later calls.
                self.provenance.alias(source, stand_in)
                return stand_in
        elif whitelist.captured_by_identity(value):
            self.guards.add(GuardKind.ID_MATCH, source, value)
        else:
            self.guards.add(GuardKind.TYPE_MATCH, source, kind)
        self.provenance.remember(source, value)
        if kind is types.BuiltinMethodType and provenance.bound_to_object(value):
            self._guard_owner(source, value)   # ``self.record = self.history.append``
        return value

    def _array(self, source, value):
        """An outside ndarray read at ``source``: a graph input fed from there on every
        run (``shadow_heap.hoist_array``, ARRAY_MATCH); one stand-in per array, however
        often or wherever it is read (ALIAS_MATCH keeps the sources one array)."""
        stand_in = self.provenance.array_stand_in(value)
        if stand_in is not None:
            self.guards.add(GuardKind.ARRAY_MATCH, source, (value.dtype, stand_in.shape))
        else:
            hoisted, shape = shadow_heap.hoist_array(self, source, value)
            stand_in = arrays.ArrayStandIn(hoisted, value.dtype, shape)
            self.provenance.note_array(value, stand_in)
        self.provenance.remember(source, stand_in)   # and ALIAS_MATCH, per source
        return stand_in

    def _guard_owner(self, source, method):
        """A method read from outside (``m.act = scaler.apply`` as a callback, a
        builtin method of a list): its ``__self__`` is an outside object too, read
        and written through ``method.__self__`` on every call (the ALIAS_MATCH
        guard keeps which other outside object it is)."""
        owner, where = method.__self__, guards.AttrSource(source, '__self__')
        known = self.provenance.source_of(owner)
        if known is None:
            self.guard_value(where, owner, hoist=False)
        elif isinstance(source, guards.AttrSource) and known.uid() == source.base.uid() \
                and source.name not in (getattr(owner, '__dict__', None) or ()):
            # ``self.helper``, found on the class: bound to ``self`` as long as the object
            # does not get an attribute of that name (``self.helper = other.helper``).
            own = getattr(owner, '__dict__', None)
            if own is not None:
                self.guards.add(GuardKind.CONTAINS_MATCH,
                                guards.AttrSource(source.base, '__dict__'),
                                (type(own), source.name, False))
        else:
            # the ALIAS_MATCH guard says which object it is
            self.provenance.remember(where, owner)

    def guard_deep(self, value, depth=0):
        """Guards the length and every item of an outside container code will read
        (``==``, ``in`` with a key that is not a constant): what its model
        (``janus/pytypes.py``) lets janus guard, or ``Unsupported``."""
        source = self.provenance.source_of(value)
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
            self.guards.add(GuardKind.KEYS_MATCH, source, list(value))
            items = value.items()
        else:
            self.guards.add(GuardKind.LEN_MATCH, source, (type(value), len(value)))
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
        self.guards.add(GuardKind.SET_MATCH, source, type(value)(value))

    def set_contents(self, value):
        """An outside set or frozenset as this point of the call sees it (guarded whole,
        this call's adds and discards applied), for order-free observations only:
        truth, ``len``, ``in``, comparisons."""
        self.guard_set(self.provenance.source_of(value), value)
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
        source = self.provenance.source_of(value)
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
        return self.provenance.snapshot(copy, value)

    def view(self, value):
        """An outside container's items as this point of the call sees them, one level
        deep, for code that hands the items on (loops, unpacking, ``zip``,
        ``enumerate``, ``d.values()``, ``d.get(k)``): a copy of the container (its
        length or keys guarded, this call's changes applied) whose items are the
        guarded reads of each item: a tensor re-read every run, a number guarded, and
        a container or any other object the very object, with its ``ItemSource``, so
        writes through it reach the real one (eager hands out the items themselves)."""
        source = self.provenance.source_of(value)
        if source is None:
            return value
        model = pytypes.model_of(value)
        if model is None or not pytypes.has_items(value) or model.kind is pytypes.Kind.DEQUE:
            return self.contents(value)   # refused, itself, or (a deque) a guarded copy
        if self._guard_flat_constants(source, value):
            copy = list(value) if type(value) is list else (
                dict(value) if type(value) is dict else value)
        elif model.kind is pytypes.Kind.DICT:
            self.guards.add(GuardKind.KEYS_MATCH, source, list(value))
            copy = {k: self._item_now(value, source, k, v) for k, v in value.items()}
        else:
            self.guards.add(GuardKind.LEN_MATCH, source, (type(value), len(value)))
            items = [self._item_now(value, source, i, v) for i, v in enumerate(value)]
            if type(value) is tuple or not isinstance(value, tuple):
                copy = tuple(items) if type(value) is tuple else items
            else:
                copy = type(value)(*items)   # a namedtuple
        for method, args in self.heap.pending.get(id(value), ()):
            getattr(copy, method)(*args)   # this call's appends/updates, in program order
        return self.provenance.snapshot(copy, value)

    def _contents_before_changes(self, source, value, depth):
        if self._guard_flat_constants(source, value):
            return type(value)(value) if type(value) in (list, tuple, dict) else list(value)
        kind = pytypes.model_of(value).kind
        if kind is pytypes.Kind.DICT:
            self.guards.add(GuardKind.KEYS_MATCH, source, list(value))
            return {k: self.contents(self._item_now(value, source, k, v), depth + 1)
                    for k, v in value.items()}
        self.guards.add(GuardKind.LEN_MATCH, source, (type(value), len(value)))
        items = [self.contents(self._item_now(value, source, i, v), depth + 1)
                 for i, v in enumerate(value)]
        if kind is pytypes.Kind.DEQUE:   # appends to the copy drop what the real one drops
            self.guards.add(GuardKind.VALUE_MATCH, guards.AttrSource(source, 'maxlen'),
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
        self.guards.add(GuardKind.EQUALS_MATCH, source, (snapshot, tuple(map(type, snapshot))))
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
        self.guards.add(GuardKind.FUNCTION_MATCH, guards.ObjectSource(fn),
                        (fn.__code__, fn.__defaults__, fn.__kwdefaults__))

    def register_converted(self, code, converted):
        """A function the trace runs converted.  Its site ids name the nodes the
        profiler recorded: both come from one ``pyct.frontend.front_end`` of the code."""
        self.converted[code] = converted
        self.code_objects.update(converted.code_objects)   # one set, the provenance's too

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

