"""Python object structures (trees of ``Node`` objects) as graph inputs, for recursion.

Needs a ``TraceContext`` while a recursive graph function is traced
(``recursion/recursion.py``).  The JANUS paper reads tree nodes from the Python
heap inside the graph; janus encodes them on the host instead (issue 21's
measured design: ~14 us per tree, against the GIL per attribute):

* a ``Schema`` is what the recursion reads: the node classes it meets (a list or
  tuple's class includes its length, its items are columns ``0..n-1``) and, per
  attribute read (a *column*), the kinds of value seen there (another node,
  None, an int, a float, a bool, absent), overall and per class;
* ``Encoder.encode`` walks, before each run, exactly those attributes from the
  call's root objects and packs one int64 table ``[rows, nodes]``: each node's
  class (-1 past the last node), per column each node's value and kind (floats
  as their bits, a node as its index, None as -1), each node's depth (``DEPTH_ROW``:
  a node's children are shallower) and the roots' indices last;
* ``StructureGuard`` (``STRUCTURE_MATCH``) is that walk as a guard: a node of
  another class, a value of another kind, a property, a cycle or a structure
  deeper than Python's recursion limit allows makes the call miss (the
  structure the graph assumes is proved, never assumed);
* in the traced body a node is a ``NodeRef`` (a scalar index tensor): reading
  ``node.left`` gathers its column (another ``NodeRef``, a ``DynamicScalar``
  number, or None), ``isinstance(node, Leaf)`` and ``node is None`` are tensor
  tests; any other use of a node refuses (``Reason.RECURSION``).
"""
import enum
import sys
import types

import numpy as np
import tensorflow as tf

from janus import guards
from janus.errors import Unsupported
from janus.guards import GuardKind, Miss
from janus.reasons import Reason
from janus.library import whitelist
from janus.values import scalars

INT_BOUND = guards.SCALAR_INT_BOUND
DEPTH_ROW = -2   # the table's row of each node's depth (1 for a node with no node below it)
REACHED_ROW = -3   # 1 where the roots reach a node through the call columns (Encoder)


class Kind(enum.IntEnum):
    """What one attribute of one node holds (a cell's tag in the table)."""
    NONE = 0
    NODE = 1
    INT = 2
    FLOAT = 3
    BOOL = 4
    MISSING = 5   # the node has no such attribute (eagerly: AttributeError)
    OTHER = 6     # anything else: a list, a string, a variable, a property
    TENSOR = 7    # an eager tensor (one dtype and shape per column: fed stacked)
    METHOD = 8    # a plain function of the node's class (``node.is_leaf()``), not shadowed


_NUMBER_KINDS = {Kind.INT: int, Kind.FLOAT: float, Kind.BOOL: bool}
_PLAIN_GETATTRIBUTE = (object.__getattribute__,)
SEQUENCES = (list, tuple)   # nested lists and tuples are nodes too: their items are columns 0..n-1


def class_key(obj):
    """A node's class as the table holds it: its class, or for a list or tuple its
    class and length (a node's arity is part of its class, so a function specialized
    to it knows ``len(t)`` and unrolls ``for c in t``)."""
    kind = type(obj)
    if kind is list or kind is tuple:
        return (kind, len(obj))
    return kind


def key_type(key):
    """The Python class of a class key."""
    return key[0] if type(key) is tuple else key


def key_name(key):
    if type(key) is tuple:
        return '%s[%d]' % (key[0].__name__, key[1])
    return key.__name__


def is_node_value(value):
    """An object the encoder takes as a node: an instance of a node class, a list or
    a tuple."""
    kind = type(value)
    return kind is list or kind is tuple or is_node_class(kind)


def is_structure_root(value):
    """A call argument that makes a recursive function a recursion over a structure:
    a node object, or a non-empty list or tuple of lists, tuples, nodes, Python
    numbers and None, holding at least one list, tuple or number (a nested list's
    root, its leaves numbers; a list of tensors stays unrolled, as before)."""
    kind = type(value)
    if kind is list or kind is tuple:
        kinds = [type(item) for item in value]
        return bool(kinds) and all(k in _ROOT_ITEMS or is_node_class(k) for k in kinds) \
            and any(k in _ROOT_ITEMS and k is not type(None) for k in kinds)
    return is_node_class(kind)


_ROOT_ITEMS = (list, tuple, int, float, bool, type(None))


def code_of_kind(kind):
    """The dispatch code of a value that is not a node (a node's is its class id)."""
    return -1 - int(kind)


def column_label(name):
    """How a message names a column: ``.left``, or ``[0]`` for an item."""
    return '[%d]' % name if type(name) is int else '.%s' % name


def is_node_class(kind):
    """A class of the user's whose attributes are plain storage: its objects can be
    nodes of an encoded structure."""
    module = getattr(kind, '__module__', '') or ''
    return (isinstance(kind, type) and type(kind) is type and module != 'builtins'
            and module.split('.')[0] != 'janus'
            and not whitelist.in_package(module, whitelist.LIBRARY_PREFIXES)
            and kind.__getattribute__ in _PLAIN_GETATTRIBUTE
            and not hasattr(kind, '__getattr__')
            and not issubclass(kind, (BaseException, type, tf.Tensor, tf.Variable))
            and kind.__module__ not in ('numpy', 'collections'))


def cell(obj, name):
    """(Kind, raw value) of ``obj.name`` as Python reads it, without running code:
    a property or any other descriptor than a ``__slots__`` entry is OTHER.  An int
    ``name`` is an item of a list or tuple (MISSING past its end, or on another node)."""
    kind = type(obj)
    if kind is list or kind is tuple:
        if type(name) is int:
            return _kind_of(obj[name]) if name < len(obj) else (Kind.MISSING, None)
        return (Kind.OTHER, None) if hasattr(kind, name) else (Kind.MISSING, None)
    if type(name) is int:
        return Kind.MISSING, None
    found = _class_attribute(type(obj), name)
    if found is not _ABSENT and hasattr(type(found), '__set__'):   # a data descriptor
        if type(found).__name__ != 'member_descriptor':
            return Kind.OTHER, None
        try:
            return _kind_of(found.__get__(obj, type(obj)))
        except AttributeError:
            return Kind.MISSING, None
    own = getattr(obj, '__dict__', None)
    if own is not None and name in own:
        return _kind_of(own[name])
    if found is _ABSENT:
        return Kind.MISSING, None
    if type(found) is types.FunctionType:
        return Kind.METHOD, found
    if hasattr(type(found), '__get__'):
        return Kind.OTHER, None   # a classmethod, staticmethod or other descriptor
    return _kind_of(found)


_ABSENT = object()


def _class_attribute(kind, name):
    for klass in kind.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return _ABSENT


def _kind_of(value):
    kind = type(value)
    if value is None:
        return Kind.NONE, None
    if kind is bool:
        return Kind.BOOL, value
    if kind is int:
        return (Kind.INT, value) if -INT_BOUND < value < INT_BOUND else (Kind.OTHER, None)
    if kind is float:
        return Kind.FLOAT, value
    if kind is list or kind is tuple or is_node_class(kind):
        return Kind.NODE, value
    if kind is guards.EagerTensor:
        return Kind.TENSOR, value
    if kind is scalars.DynamicScalar:   # a relaxed number in the trace's view of an argument
        return {int: Kind.INT, float: Kind.FLOAT, bool: Kind.BOOL}[value.type], 0
    return Kind.OTHER, None


def tensor_spec(tensor):
    return (tensor.dtype, tuple(tensor.shape.as_list()))


class Column:
    """One attribute (or item) the recursion reads: its rows in the table, the kinds
    seen, and for tensors their (dtype, shape), for methods their functions
    (``specs``); per node class the kinds its nodes hold there (``by_class``) and a
    method's function (``methods``)."""

    def __init__(self, name, row, kinds, specs=(), by_class=None, methods=None):
        self.name, self.row, self.kinds = name, row, frozenset(kinds)
        self.specs = frozenset(specs)
        self.by_class = dict(by_class or {})   # class key -> frozenset of kinds
        self.methods = dict(methods or {})     # class key -> the function it defines

    @property
    def tag_row(self):
        return self.row + 1

    def kinds_of(self, ref):
        """The kinds ``ref``'s cell may hold: its class's when the class is known
        (``DeadVariant`` when no node of it was seen with this column: the guard
        rejects every such node, so the code reading it never runs)."""
        if ref.static is None:
            return self.kinds
        found = self.by_class.get(ref.static)
        if found is None:
            raise DeadVariant(Reason.RECURSION, 'no %s node seen' % key_name(ref.static))
        return found


class DeadVariant(Unsupported):
    """Code specialized to a node class that no node of the guarded structure can
    reach (the class's nodes were not seen with a column it reads)."""


class Schema:
    """The node classes and columns one recursive function reads (grown while its
    body is traced; ``stale`` once something the trace already used widened)."""

    def __init__(self, roots, persisted=None, key=None):
        self.roots = list(roots)     # the concrete roots of the traced call
        self.types = []              # node classes; a node's class id is its index
        self.columns = {}            # name -> Column
        self.rows = 1                # row 0: class ids
        self.stale = False
        self._persisted, self._key = persisted, key
        self._used_types = False
        # column -> the graph input of its stacked tensors (set by the recursion's build)
        self.tensor_input = None
        self.taping = False          # a tape may record the call (tensor columns refused)
        self.frames_per_level = 1    # converted frames one level of the recursion takes
        # function code -> kinds of value other than nodes its recursive calls pass
        self.passed_kinds = {}
        self.helpers = {}            # call key -> the build of a recursive helper given its nodes
        self._levels = 0             # (``levels`` where nothing is persisted)
        self._level_refusal = ''
        if persisted is not None:
            self.types = list(persisted.get(('types', key), ()))
        self._scan()

    def add_root(self, obj):
        if all(obj is not r for r in self.roots):
            self.roots.append(obj)
            self._scan()

    def reachable(self):
        """The traced call's nodes the known columns reach from the roots."""
        seen, todo, found = set(), list(self.roots), []
        while todo:
            obj = todo.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            found.append(obj)
            for name in self.columns:
                kind, value = cell(obj, name)
                if kind is Kind.NODE:
                    todo.append(value)
        return found

    def column(self, name):
        found = self.columns.get(name)
        if found is None:
            found = self.columns[name] = Column(
                name, self.rows, self._remembered(name), self._remembered((name, 'specs')),
                self._remembered((name, 'by_class'), {}), self._remembered((name, 'methods'), {}))
            self.rows += 2
            self._scan(fresh=name)
        return found

    @property
    def levels(self):
        """The depth a graph computing every node level by level covers, widened
        across traces (``recursion_levels.py``); 0 before one."""
        if self._persisted is None:
            return self._levels
        return self._persisted.get(('levels', self._key), 0)

    @levels.setter
    def levels(self, value):
        self._levels = value
        if self._persisted is not None:
            self._persisted[('levels', self._key)] = value

    @property
    def level_refusal(self):
        """Why the function's body never runs level by level (with ``levels`` -1)."""
        if self._persisted is None:
            return self._level_refusal
        return self._persisted.get(('level refusal', self._key), '')

    @level_refusal.setter
    def level_refusal(self, value):
        self._level_refusal = value
        if self._persisted is not None:
            self._persisted[('level refusal', self._key)] = value

    def types_used(self):
        self._used_types = True
        return list(self.types)

    def _remembered(self, name, default=()):
        if self._persisted is None:
            return default
        return self._persisted.get((self._key, name), default)

    def _scan(self, fresh=None):
        """The kinds of every column over every node the roots reach through node
        columns (a fixed point: a new node column reaches more nodes), overall and
        per node class."""
        seen, todo = set(), list(self.roots)
        kinds = {name: set(c.kinds) for name, c in self.columns.items()}
        specs = {name: set(c.specs) for name, c in self.columns.items()}
        by_class = {name: {k: set(v) for k, v in c.by_class.items()}
                    for name, c in self.columns.items()}
        methods = {name: dict(c.methods) for name, c in self.columns.items()}
        types = list(self.types)
        while todo:
            obj = todo.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            key = class_key(obj)
            if key not in types:
                types.append(key)
            for name in self.columns:
                kind, value = cell(obj, name)
                kinds[name].add(kind)
                by_class[name].setdefault(key, set()).add(kind)
                if kind is Kind.NODE:
                    todo.append(value)
                elif kind is Kind.TENSOR:
                    specs[name].add(tensor_spec(value))
                elif kind is Kind.METHOD:
                    specs[name].add(value)   # the function
                    if methods[name].setdefault(key, value) is not value:
                        self.stale = True   # the class's method changed
                        methods[name][key] = value
        for name, column in self.columns.items():
            new, new_specs = frozenset(kinds[name]), frozenset(specs[name])
            new_by = {k: frozenset(v) for k, v in by_class[name].items()}
            if new != column.kinds or new_specs != column.specs or new_by != column.by_class:
                if (column.kinds or column.specs) and name != fresh:
                    self.stale = True   # the trace already read it with fewer kinds
                column.kinds, column.specs, column.by_class = new, new_specs, new_by
            column.methods = methods[name]
            if self._persisted is not None:
                self._persisted[(self._key, name)] = column.kinds
                self._persisted[(self._key, (name, 'specs'))] = column.specs
                self._persisted[(self._key, (name, 'by_class'))] = dict(column.by_class)
                self._persisted[(self._key, (name, 'methods'))] = dict(column.methods)
        if types != self.types:
            self.stale = self.stale or self._used_types
            self.types = types
            if self._persisted is not None:
                self._persisted[('types', self._key)] = tuple(types)


class NodeRef:
    """A node of the encoded structure inside a traced recursive body: ``index`` a
    scalar int64 tensor (-1: None, when ``maybe_none``).  ``static``: its class key
    when the code is specialized to its class (a recursive function's own node
    parameter: ``isinstance`` and a list's length are then Python values).
    ``numbers``: the number kinds the cell may hold instead of a node (an item of a
    nested list: a word id), ``code`` its dispatch code (``code_of_kind``, or the
    node's class id); such a value may only be passed to a function of the user's
    (the recursion dispatches on it) or tested (``isinstance``, ``is None``)."""

    __slots__ = ('index', 'schema', 'table', 'maybe_none', 'derived', 'fields', 'checked',
                 'static', 'numbers', 'code', 'tag', 'origin')

    def __init__(self, index, schema, table, maybe_none=False, derived=False, static=None,
                 numbers=frozenset(), code=None, tag=None, origin=None):
        self.index, self.schema, self.table, self.maybe_none = index, schema, table, maybe_none
        self.derived = derived   # read from another node (a recursion on it descends)
        self.origin = origin     # (the NodeRef, column name) it was read from, if read
        self.static, self.numbers, self.code = static, frozenset(numbers), code
        self.tag = tag   # the cell's kind (a scalar tensor), where it may hold a number
        # The node's cells of the rows known now, gathered once where the node is made
        # (one gather and one unpack for all its reads; TF prunes them if unread).
        # Rows added later are gathered where read.  A None's are row 0's, unused.
        # The graphs where a check that the node is not None was added: a read there or
        # in a graph nested in one (a tf.cond branch) needs no other (a failed check
        # ends the run; the recursion writes nothing of the user's before it ends).
        self.checked = []
        known = schema.rows
        self.fields = tf.unstack(tf.gather(table, self.safe_index(), axis=1)[:known],
                                 num=known)

    def safe_index(self):
        """The index to gather at: a None's (-1) or a number's read as 0 (never used:
        its read's check fails first)."""
        if self.numbers:
            return tf.where(self.code >= 0, self.index, tf.zeros_like(self.index))
        return tf.maximum(self.index, 0) if self.maybe_none else self.index

    def cells(self, row):
        """The node's value in table row ``row`` (a scalar int64 tensor)."""
        if row < len(self.fields):
            return self.fields[row]
        return tf.gather(self.table[row], self.safe_index())

    def with_class(self, key):
        """This node, its class known to be ``key`` (code specialized to the class)."""
        ref = NodeRef.__new__(NodeRef)
        ref.index, ref.schema, ref.table, ref.fields = self.index, self.schema, self.table, \
            self.fields
        ref.maybe_none, ref.derived, ref.static = False, self.derived, key
        ref.numbers, ref.code, ref.checked, ref.tag = frozenset(), None, [], None
        ref.origin = self.origin
        return ref

    def holds_node(self):
        """A bool tensor: the cell holds a node (not None, not a number)."""
        if self.numbers:
            return tf.equal(self.tag, int(Kind.NODE))
        return tf.greater_equal(self.index, 0)

    def code_tensor(self):
        """Its dispatch code: the node's class id, -1 for None, ``code_of_kind`` for
        a number."""
        if self.static is not None:
            return tf.constant(self.schema.types_used().index(self.static), tf.int64)
        if self.code is not None:
            return self.code
        class_id = self.cells(0)
        if self.maybe_none:
            return tf.where(self.index < 0, tf.constant(-1, tf.int64), class_id)
        return class_id

    def _refuse(self, *args, **kwargs):
        refuse('using a node of the structure this way (janus reads its attributes and '
               'items, tests isinstance and `is None`, and passes it to your functions)')

    __bool__ = __len__ = __iter__ = __hash__ = __str__ = __format__ = __getitem__ = \
        __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __index__ = __int__ = \
        __float__ = __array__ = __call__ = _refuse

    def __repr__(self):
        return '<janus node ref>'


def is_node(value):
    return type(value) is NodeRef


def holds_node(values):
    return any(type(v) is NodeRef for v in values)


def refuse(what):
    raise Unsupported(Reason.RECURSION, 'janus does not convert %s inside a recursive '
                      'graph function' % what)


# -- reading nodes in the traced body ----------------------------------------

def _require_node(ref, what):
    """Checks (once per graph) that ``ref`` holds a node, where it may hold None or a
    number: a read of it fails as eagerly (the run re-runs in Python)."""
    if ref.static is not None or not (ref.maybe_none or ref.numbers) or _checked_here(ref):
        return
    if ref.numbers:
        _check(tf.greater_equal(ref.code, 0), 'the value whose %s is read is a node' % what)
    else:
        _check(tf.greater_equal(ref.index, 0), 'the node whose %s is read is not None' % what)
    ref.checked.append(tf.compat.v1.get_default_graph())


def attribute(ref, name):
    """``node.name`` (an int ``name``: an item of a list node): its column gathered at
    the node's index."""
    schema = ref.schema
    if type(name) is str and name.startswith('__'):
        refuse('reading %s of a node' % name)
    column = schema.column(name)
    label = column_label(name)
    kinds = column.kinds_of(ref)
    present = kinds - {Kind.MISSING}
    if not present:
        if ref.static is not None:   # every node of this class lacks it: eagerly an error
            raise DeadVariant(Reason.RECURSION, '%s has no %s' % (key_name(ref.static), label))
        refuse('reading %s of a node: no node has it' % label)
    if Kind.OTHER in present:
        refuse('reading %s of a node: some node holds a value janus does not encode there '
               '(a string, a variable, a property or a class or static method); it '
               'encodes nodes, lists, None, Python numbers, tensors and methods' % label)
    if Kind.METHOD in present:
        return _method(ref, column, kinds, present, name)
    _require_node(ref, label)
    value, tag = ref.cells(column.row), ref.cells(column.tag_row)
    if Kind.TENSOR in present:
        return _tensor_attribute(schema, column, ref.safe_index(), tag, present)
    numbers = present & set(_NUMBER_KINDS)
    if Kind.NODE in present:
        if Kind.MISSING in kinds:
            _check(tf.not_equal(tag, int(Kind.MISSING)), 'the node has %s' % label)
        if not numbers:
            return NodeRef(value, schema, ref.table, maybe_none=Kind.NONE in present,
                           derived=True, origin=(ref, name))
        node = tf.equal(tag, int(Kind.NODE))
        class_id = tf.gather(ref.table[0], tf.where(node, value, tf.zeros_like(value)))
        code = tf.where(node, class_id, -1 - tag)
        return NodeRef(value, schema, ref.table, maybe_none=Kind.NONE in present,
                       derived=True, numbers=numbers, code=code, tag=tag, origin=(ref, name))
    if present == {Kind.NONE} and Kind.MISSING not in kinds:
        return None
    if len(numbers) != 1 or present - numbers - {Kind.NONE}:
        refuse('reading %s of a node: its nodes hold values of different kinds there (%s)'
               % (label, ', '.join(sorted(k.name for k in kinds))))
    kind = next(iter(numbers))
    if kinds != {kind}:
        _check(tf.equal(tag, int(kind)), 'the node\'s %s is a %s' % (label, kind.name.lower()))
    if kind is Kind.FLOAT:
        return scalars.DynamicScalar(tf.bitcast(value, tf.float64), float)
    if kind is Kind.BOOL:
        return scalars.DynamicScalar(tf.not_equal(value, 0), bool)
    return scalars.DynamicScalar(value, int)


def _method(ref, column, kinds, present, name):
    """``node.name`` of a method column: the class's function bound to the node."""
    if ref.static is not None:
        found = column.methods.get(ref.static)
        if present != {Kind.METHOD} or found is None:
            refuse('calling .%s of a node whose objects shadow it' % name)
        return types.MethodType(found, ref)
    if present != {Kind.METHOD} or len(column.specs) != 1:
        refuse('calling .%s of a node: its nodes\' classes define it differently (janus '
               'calls one method for every node of unknown class)' % name)
    _require_node(ref, '.%s' % name)
    if Kind.MISSING in kinds:
        _check(tf.equal(ref.cells(column.tag_row), int(Kind.METHOD)),
               'the node has a method .%s' % name)
    return types.MethodType(next(iter(column.specs)), ref)


def attribute_is_none(ref, name):
    """``node.name is None`` without reading the value: a dynamic bool (or a Python
    one when the column's kinds decide), or None when the read itself must run (an
    attribute some node lacks, or of a kind janus does not encode: ``attribute``
    refuses or checks it)."""
    column = ref.schema.column(name)
    kinds = column.kinds_of(ref)
    if kinds & {Kind.MISSING, Kind.OTHER, Kind.METHOD} or not kinds:
        return None
    _require_node(ref, column_label(name))
    if Kind.NONE not in kinds:
        return False
    if kinds == {Kind.NONE}:
        return True
    return scalars.DynamicScalar(tf.equal(ref.cells(column.tag_row), int(Kind.NONE)), bool)


def _checked_here(ref):
    """Whether the current graph or one it is nested in checked ``ref`` is not None."""
    graph = tf.compat.v1.get_default_graph()
    while graph is not None:
        if any(graph is g for g in ref.checked):
            return True
        graph = getattr(graph, 'outer_graph', None)
    return False


def _tensor_attribute(schema, column, index, tag, present):
    """``node.vec`` of a column of tensors: a row of their stack, fed per run."""
    label = column_label(column.name)
    if present - {Kind.TENSOR} or len(column.specs) != 1:
        refuse('reading %s of a node: its nodes hold %s there (janus feeds a column of '
               'tensors of one dtype and shape)' % (label, 'tensors of several dtypes '
                                                    'or shapes' if len(column.specs) > 1 else
                                                    'tensors and other values'))
    if schema.taping:
        refuse('reading %s of a node under a GradientTape: a node\'s tensor is fed by value, '
               'so no gradient would reach it' % label)
    if column.kinds != {Kind.TENSOR}:
        _check(tf.equal(tag, int(Kind.TENSOR)), 'the node has %s' % label)
    # Fed by value: no tape watches a node's tensor through the graph (one watched
    # eagerly would get a gradient there; a known gap, DESIGN.md).
    return tf.stop_gradient(tf.gather(schema.tensor_input(column), index))


def _check(condition, description):
    scalars.assume(condition, description)


def check(condition, description):
    """A check in the traced recursion: a failure re-runs the call in Python."""
    _check(condition, description)


def fail_check(description):
    """A check that fails wherever it runs (code the guard proves unreachable)."""
    _check(tf.constant(False), description)


# -- lists and tuples ----------------------------------------------------------

def _sequence_length(ref, what):
    """A list node's length: a Python int when its class is known, else read from
    its class id (checked to be a list's or tuple's)."""
    if ref.static is not None:
        if type(ref.static) is not tuple:
            raise DeadVariant(Reason.RECURSION, '%s of a %s node' % (what, key_name(ref.static)))
        return ref.static[1]
    if ref.numbers:
        refuse('%s of a value that may be a number' % what)
    _require_node(ref, what)
    lengths = [key[1] if type(key) is tuple else -1 for key in ref.schema.types_used()]
    found = tf.gather(tf.constant(lengths, tf.int64), ref.cells(0))
    if min(lengths) < 0:
        _check(tf.greater_equal(found, 0), 'the node of %s is a list or tuple' % what)
    return scalars.DynamicScalar(found, int)


def length_bounds(ref):
    """(shortest, longest, length) of a list node whose length only the run knows:
    the lengths its possible classes have, and its length (a dynamic int)."""
    count = _sequence_length(ref, 'iterating')
    lengths = [key[1] for key in ref.schema.types_used() if type(key) is tuple]
    return min(lengths, default=0), max(lengths, default=0), count


def length(ref):
    """``len(node)`` of a list or tuple node."""
    return _sequence_length(ref, 'len()')


def items(ref):
    """The items of a list node whose length is known (``for c in t``, a
    comprehension, ``sum(...)``): the recursive function's own parameter."""
    count = _sequence_length(ref, 'iterating')
    if not isinstance(count, int):
        refuse('iterating over a list node whose length only the run knows (janus unrolls '
               'loops over the recursive function\'s own list parameter)')
    return [attribute(ref, k) for k in range(count)]


def item(ref, key):
    """``node[key]`` of a list or tuple node, ``key`` a Python int."""
    if type(key) is not int:
        refuse('indexing a node with a %s (janus reads items at Python int indices)'
               % type(key).__name__)
    if ref.static is not None:
        count = _sequence_length(ref, 'indexing')
        if not -count <= key < count:   # eagerly an IndexError on every such node
            raise DeadVariant(Reason.RECURSION, 'index %d out of range' % key)
        return attribute(ref, key % count)
    if key < 0:
        refuse('a negative index into a list node whose length only the run knows')
    # The item's tag says it exists (MISSING past a list's end, and on a node that is
    # no list): checked where it is read.
    return attribute(ref, key)


def unpacked(ref, count):
    """``a, b = node`` (``count`` targets) of a list or tuple node; ``count`` None
    (``f(*node)``, a starred target): all its items, its length known."""
    if count is None:
        return tuple(items(ref))
    found = _sequence_length(ref, 'unpacking')
    if isinstance(found, int):
        if found != count:   # eagerly a ValueError on every such node
            raise DeadVariant(Reason.RECURSION, 'unpacking %d items into %d' % (found, count))
    else:
        _check(tf.equal(found.tensor, count), 'the list unpacked has %d items' % count)
    return tuple(attribute(ref, k) for k in range(count))


def isinstance_test(ref, classes):
    """``isinstance(node, classes)``: a bool tensor, or a Python bool when the node's
    class is known or every class the structure holds answers alike."""
    if ref.static is not None:
        return issubclass(key_type(ref.static), classes)
    types = ref.schema.types_used()
    ids = [i for i, key in enumerate(types) if issubclass(key_type(key), classes)]
    none_matches = isinstance(None, classes)
    if ref.numbers:
        codes = ids + [code_of_kind(k) for k in ref.numbers
                       if isinstance(_NUMBER_KINDS[k](), classes)]
        if ref.maybe_none and none_matches:
            codes.append(code_of_kind(Kind.NONE))
        return tf.reduce_any(tf.equal(ref.code, tf.constant(codes or [-100], tf.int64)))
    if not ref.maybe_none and len(ids) in (0, len(types)):
        return bool(ids)
    class_id = ref.cells(0)
    found = tf.reduce_any(tf.equal(class_id, tf.constant(ids or [-1], tf.int64)))
    if not ref.maybe_none:
        return found
    is_none = tf.less(ref.index, 0)
    return tf.logical_or(is_none, found) if none_matches else \
        tf.logical_and(tf.logical_not(is_none), found)


def is_none_test(ref):
    """``node is None``: a bool tensor (False when it cannot be None)."""
    if not ref.maybe_none:
        return False
    if ref.numbers:
        return tf.equal(ref.code, code_of_kind(Kind.NONE))
    return tf.less(ref.index, 0)


def truth(ref):
    """``if node:`` of a node that cannot be None: True, unless a node class defines
    its own truth; a list node of known length: whether it has items (a node that
    may be None: write ``node is not None``)."""
    if ref.static is not None:
        if type(ref.static) is tuple:
            return ref.static[1] > 0
        kinds = [ref.static]
    else:
        kinds = ref.schema.types_used()
    for kind in kinds:
        kind = key_type(kind)
        if hasattr(kind, '__bool__') or hasattr(kind, '__len__'):
            refuse('the truth value of a node whose class defines __bool__/__len__')
    if ref.maybe_none or ref.numbers:
        refuse('the truth value of a node that may be None (write `node is not None`)')
    return True


# -- the host side: encoding and its guard -------------------------------------

class Deeper(str):
    """A guard miss only because a structure is deeper than the levels a graph
    computes (``recursion_levels``): the next graph is built at once, computing more
    (no imperative call first: eager TF that deep may overflow the C stack)."""

    rebuild_now = True   # read by the cache-miss path (api.JanusFunction._decide)


class Encoder:
    """Packs the structures under one recursive function's roots for one run."""

    def __init__(self, schema, root_sources, max_depth=None, call_columns=None):
        self.types = tuple(schema.types)
        self.max_depth = max_depth   # deeper misses: the graph computes that many levels
        # the columns a recursive call descends through (None: every node counts as reached)
        self.call_columns = call_columns
        self.type_ids = {kind: i for i, kind in enumerate(self.types)}
        self.columns = [(c.name, c.row, c.kinds) for c in
                        sorted(schema.columns.values(), key=lambda c: c.row)]
        # per column, per node class: the kinds it may hold there, and its method
        self.by_class = [schema.columns[name].by_class for name, _, _ in self.columns]
        self.class_methods = [schema.columns[name].methods for name, _, _ in self.columns]
        # name -> (dtype, shape) of the tensor columns the graph reads (fed stacked)
        self.tensor_specs = {c.name: next(iter(c.specs)) for c in schema.columns.values()
                             if Kind.TENSOR in c.kinds and len(c.specs) == 1}
        self.rows = schema.rows + 3   # whether a call reaches it, its depth, the roots: last
        self.frames_per_level = schema.frames_per_level
        self.root_sources = list(root_sources)
        self._pending = None   # (roots, Encoded) the guard encoded for the run about to start

    def roots(self, arguments, memo):
        return [source.value(arguments, memo) for source in self.root_sources]

    def encode(self, roots, check_depth=True):
        """The ``Encoded`` structure, or a string saying why it does not fit.

        One pass over the nodes in discovery order (the roots first), each attribute
        read as ``cell`` reads it, through the readers of the node's class
        (``_Readers``: worked out once per class per call, so a class changed between
        calls is read as it is now)."""
        index, nodes = {}, []
        for root in roots:
            if id(root) not in index:
                index[id(root)] = len(nodes)
                nodes.append(root)
        width = len(self.columns)
        values = [[] for _ in range(width)]
        tags = [[] for _ in range(width)]
        children = []                        # per node: (column, child's index) pairs
        tensors = [[] for _ in range(width)]  # per column: (node, tensor) pairs
        readers, classify = {}, _Classifier(self.type_ids)
        classes = []                         # per node: its class id
        forward = True   # every node edge leads to a node found later (no cycle possible)
        position = 0
        while position < len(nodes):
            obj = nodes[position]
            kind_of_obj = type(obj)
            key = (kind_of_obj, len(obj)) if kind_of_obj is list or kind_of_obj is tuple \
                else kind_of_obj
            read = readers.get(key)
            if read is None:
                if key not in self.type_ids:
                    return 'a node of class %s' % key_name(key)
                read = readers[key] = _Readers(key, self.columns, classify, self.by_class,
                                               self.class_methods)
            own = getattr(obj, '__dict__', None)
            plain = read.plain if own is not None else ()
            allowed = read.allowed
            classes.append(self.type_ids[key])
            mine = []
            for j, (name, _, _) in enumerate(self.columns):
                if j in plain and name in own:   # the common case, inline
                    value = own[name]
                    if value is None:
                        kind = Kind.NONE
                    elif type(value) is bool:
                        kind = Kind.BOOL
                    else:
                        kind, value = classify(value)
                else:
                    kind, value = read.cell(j, obj, own)
                if kind not in allowed[j]:
                    return '%s%s holds a %s' % (key_name(key), column_label(name),
                                                kind.name.lower())
                tags[j].append(kind)
                if kind is Kind.NODE:
                    target = index.get(id(value))
                    if target is None:
                        target = index[id(value)] = len(nodes)
                        nodes.append(value)
                    elif target <= position:
                        forward = False
                    mine.append((j, target))
                    values[j].append(target)
                elif kind is Kind.NONE:
                    values[j].append(-1)
                elif kind is Kind.INT or kind is Kind.BOOL:
                    values[j].append(int(value))
                elif kind is Kind.FLOAT:
                    values[j].append(float_bits(value))
                elif kind is Kind.TENSOR:
                    if tensor_spec(value) != self.tensor_specs.get(name):
                        return '%s%s holds a tensor %s%s' % ((key_name(key), column_label(name))
                                                            + tensor_spec(value))
                    tensors[j].append((position, value))
                    values[j].append(0)
                elif kind is Kind.METHOD:
                    if value is not read.methods[j]:
                        return '%s.%s is another method' % (key_name(key), name)
                    values[j].append(0)
                else:
                    values[j].append(0)
            children.append(mine)
            position += 1
        depth = self._depths(children, forward)
        if isinstance(depth, str):
            return depth
        problem = self._depth_problem(depth, check_depth)
        if problem:
            return problem
        count = len(nodes)
        table = np.zeros((self.rows, max(count, len(roots), 1)), np.int64)
        table[0, :] = -1   # columns past the nodes (as many as the roots) are no node
        table[0, :count] = classes
        table[DEPTH_ROW, :count] = depth
        table[REACHED_ROW, :count] = self._reached(children, len(set(map(id, roots))))
        for j, (_, row, _) in enumerate(self.columns):
            table[row, :count] = values[j]
            table[row + 1, :count] = tags[j]
        table[-1, :len(roots)] = [index[id(root)] for root in roots]
        return Encoded(table, self._stacks(tensors, count))

    def _stacks(self, tensors, count):
        """Per tensor column, its nodes' tensors stacked (zeros where a node has none)."""
        stacks = {}
        for j, (name, _, _) in enumerate(self.columns):
            spec = self.tensor_specs.get(name)
            if spec is None:
                continue
            dtype, shape = spec
            if count == 0:
                stacks[name] = tf.zeros((0,) + shape, dtype)
                continue
            found = dict(tensors[j])
            zeros = None
            if len(found) < count:
                zeros = tf.zeros(shape, dtype)
            stacks[name] = tf.stack([found.get(i, zeros) for i in range(count)])
        return stacks

    def _reached(self, children, roots):
        """Per node, 1 where a recursive call may reach it: the roots (the first
        ``roots`` nodes), and what they reach through the call columns."""
        if self.call_columns is None:
            return 1
        calls = {j for j, (name, _, _) in enumerate(self.columns) if name in self.call_columns}
        reached = [0] * len(children)
        todo = list(range(roots))
        while todo:
            node = todo.pop()
            if reached[node]:
                continue
            reached[node] = 1
            todo.extend(target for j, target in children[node] if j in calls)
        return reached

    def _depths(self, children, forward):
        """Each node's depth (1 + its deepest child's, over every node column), or a
        string naming a cycle.  ``forward``: every edge leads to a later node (a tree,
        found breadth first): depths in one backward pass."""
        if not forward:
            return self._depths_searched(children)
        depth = [0] * len(children)
        for node in range(len(children) - 1, -1, -1):
            row = children[node]
            if row:
                depth[node] = 1 + max([depth[target] for _, target in row])
            else:
                depth[node] = 1
        return depth

    def _depth_problem(self, depth, check_depth=True):
        """A structure too deep for eager Python's recursion (eager raises
        RecursionError there; the graph would not)."""
        if not check_depth:
            return None
        deepest = max(depth, default=0)
        if self.max_depth is not None and deepest > self.max_depth:
            return Deeper('a structure %d nodes deep (the graph computes %d levels)' % (
                deepest, self.max_depth))
        room = sys.getrecursionlimit() - _stack_depth() - 50
        # Eagerly each level takes the frames of the functions it runs through (a->b->a:
        # two), and a comprehension may add one.
        if (self.frames_per_level + 1) * (deepest + 2) > room:
            return 'a structure %d nodes deep (eager Python may exceed its recursion limit)' \
                % deepest
        return None

    def _depths_searched(self, children):
        """Each node's depth by a depth-first search, or a string naming a cycle."""
        count = len(children)
        depth = [0] * count
        state = [0] * count   # 0 new, 1 on the path, 2 done
        for start in range(count):
            if state[start]:
                continue
            stack = [(start, 0)]
            state[start] = 1
            while stack:
                node, child = stack[-1]
                row = children[node]
                if child < len(row):
                    stack[-1] = (node, child + 1)
                    column, target = row[child]
                    if state[target] == 1:
                        return 'a cycle through .%s' % self.columns[column][0]
                    if state[target] == 0:
                        state[target] = 1
                        stack.append((target, 0))
                    continue
                stack.pop()
                state[node] = 2
                depth[node] = 1 + max((depth[target] for _, target in row), default=0)
        return depth

    def guard_check(self, arguments, memo):
        roots = self.roots(arguments, memo)
        encoded = self.encode(roots)
        if isinstance(encoded, str):
            return encoded
        self._pending = (roots, encoded)
        return None

    def now(self, arguments):
        """The ``Encoded`` structure of the run now starting: the guard's, which it just
        encoded (every graph input of the run reads it: no user code runs between)."""
        roots = self.roots(arguments, {})
        pending = self._pending
        if pending is not None and len(pending[0]) == len(roots) and all(
                a is b for a, b in zip(pending[0], roots)):
            return pending[1]
        encoded = self.encode(roots, check_depth=False)   # the guard checked the depth
        if isinstance(encoded, str):
            raise RuntimeError('janus: the structure changed after its guard: ' + encoded)
        self._pending = (roots, encoded)
        return encoded


class Encoded:
    """One run's encoded structure: the int64 table and the tensor columns' stacks."""

    def __init__(self, table, stacks):
        self.table, self.stacks = table, stacks
        self._tensor = None

    def deepest(self):
        """The depth of the deepest node (0: no node)."""
        return int(self.table[DEPTH_ROW].max(initial=0))

    def table_tensor(self):
        if self._tensor is None:
            self._tensor = tf.constant(self.table)
        return self._tensor


_NONE_CELL = (Kind.NONE, None)


def float_bits(value):
    """A float's IEEE bits as an int64 (how the table holds a float)."""
    return int(np.float64(value).view(np.int64))


class _Classifier:
    """``_kind_of`` for one encoding: whether a class is a node class is worked out
    once per class (the node classes are the schema's; no user code runs between)."""

    def __init__(self, type_ids):
        self.type_ids = type_ids
        self.node_classes = {}

    def __call__(self, value):
        kind = type(value)
        if kind is int and -INT_BOUND < value < INT_BOUND:
            return Kind.INT, value
        if value is None:
            return _NONE_CELL
        if kind is list or kind is tuple:
            return Kind.NODE, value
        if kind in self.type_ids:
            known = self.node_classes.get(kind)
            if known is None:
                known = self.node_classes[kind] = is_node_class(kind)
            if known:
                return Kind.NODE, value
        return _kind_of(value)


class _Readers:
    """How ``cell`` reads each column of one node class, worked out from the class
    once: ``self.cell(j, obj, own)`` is ``cell(obj, name_j)`` (``own``: obj's
    __dict__); ``allowed[j]``: the kinds the class's nodes may hold there,
    ``methods[j]``: its method there."""

    __slots__ = ('plans', 'classify', 'plain', 'allowed', 'methods')

    def __init__(self, key, columns, classify, by_class, methods):
        self.classify = classify
        self.plans = [self._plan(key, name) for name, _, _ in columns]
        # columns read from the instance's __dict__ when there (no class data descriptor)
        self.plain = frozenset(j for j, plan in enumerate(self.plans) if plan[0] == 'dict')
        self.allowed = [found.get(key, frozenset()) for found in by_class]
        self.methods = [found.get(key) for found in methods]

    def _plan(self, key, name):
        if type(key) is tuple:   # a list or tuple of a known length
            if type(name) is int:
                return ('item', name, None) if name < key[1] else \
                    ('fixed', (Kind.MISSING, None), name)
            return ('fixed', (Kind.OTHER, None) if hasattr(key[0], name) else
                    (Kind.MISSING, None), name)
        if type(name) is int:
            return ('fixed', (Kind.MISSING, None), name)
        found = _class_attribute(key, name)
        if found is not _ABSENT and hasattr(type(found), '__set__'):   # a data descriptor
            if type(found).__name__ != 'member_descriptor':
                return ('fixed', (Kind.OTHER, None), name)
            return ('slot', found, key)
        if found is _ABSENT:
            return ('dict', (Kind.MISSING, None), name)
        if type(found) is types.FunctionType:
            return ('dict', (Kind.METHOD, found), name)
        if hasattr(type(found), '__get__'):
            return ('dict', (Kind.OTHER, None), name)   # another descriptor
        return ('dict', None, (name, found))

    def cell(self, j, obj, own):
        how, fallback, detail = self.plans[j]
        if how == 'item':
            return self.classify(obj[fallback])
        if how == 'dict':
            if fallback is not None:
                if own is not None and detail in own:
                    return self.classify(own[detail])
                return fallback
            if own is not None and detail[0] in own:
                return self.classify(own[detail[0]])
            return self.classify(detail[1])
        if how == 'slot':
            try:
                return self.classify(fallback.__get__(obj, detail))
            except AttributeError:
                return Kind.MISSING, None
        return fallback


def _stack_depth():
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


class StructureGuard:
    """STRUCTURE_MATCH: the objects under a recursive function's roots are of the
    classes and value kinds its graph reads (``Encoder.encode``)."""

    kind = GuardKind.STRUCTURE_MATCH

    def __init__(self, encoder_of, label):
        self.encoder_of, self.label = encoder_of, label   # encoder_of(): the Encoder, once traced

    @property
    def encoder(self):
        return self.encoder_of()

    def check(self, arguments, memo):
        try:
            problem = self.encoder.guard_check(arguments, memo)
        except Exception as e:  # noqa: BLE001 - a root is gone: the guard fails
            problem = 'unreadable (%s)' % type(e).__name__
        if problem is None:
            return None
        return Miss(self.kind, 'the structure under %s' % self.label, self._expected(), problem)

    def _expected(self):
        return 'classes %s, attributes %s' % (
            '/'.join(key_name(t) for t in self.encoder.types),
            ', '.join('%s: %s' % (column_label(name),
                                  '|'.join(sorted(k.name.lower() for k in kinds)))
                      for name, _, kinds in self.encoder.columns))

    def __repr__(self):
        return 'STRUCTURE_MATCH(%s: %s)' % (self.label, self._expected())
