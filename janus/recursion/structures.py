"""Nodes of an encoded structure inside a traced recursive body, and what reads them.

Needs a ``TraceContext`` while a recursive graph function is traced
(``recursion/recursion.py``) and the function's ``schema.Schema``.  In the traced body
a node is a ``NodeRef`` (a scalar index tensor into the table ``structure_guard.Encoder``
packs): reading ``node.left`` gathers its column (another ``NodeRef``, a
``DynamicScalar`` number, or None), ``isinstance(node, Leaf)`` and ``node is None`` are
tensor tests; any other use of a node refuses (``Reason.RECURSION``).  A ``NodeRef``
answers attribute and item reads and writes, truth, unpacking, loops, identity tests
(``node is None``, ``node.left is None``) and comparisons (refused) itself
(``values/protocol.py``).
"""
import dataclasses
import types
import typing

import tensorflow as tf

from janus.errors import Unsupported
from janus.reasons import Reason
from janus.recursion.schema import (NUMBER_KINDS, DeadVariant, Kind, code_of_kind,
                                    column_label, key_name, key_type)
from janus.values import protocol, scalars
from janus.values.protocol import NOT_MODELLED, StandIn

# The special methods of the comparisons (``node == other``: refused).
_COMPARISONS = frozenset(('__eq__', '__ne__', '__lt__', '__le__', '__gt__', '__ge__'))


@dataclasses.dataclass(frozen=True, eq=False)
class Origin:
    """Where a node read in the body came from: the node and the column read."""
    node: 'NodeRef'
    column: typing.Any   # an attribute's name, or a list's item index


class NodeRef(StandIn):
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
    SHOWN_AS = 'node of the structure'

    def __init__(self, index, schema, table, maybe_none=False, derived=False, static=None,
                 numbers=frozenset(), code=None, tag=None, origin=None):
        self.index, self.schema, self.table, self.maybe_none = index, schema, table, maybe_none
        self.derived = derived   # read from another node (a recursion on it descends)
        self.origin = origin     # the Origin it was read from, if read
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

    def materialize(self):
        refuse('returning or storing a node of the structure')

    # The protocol (values/protocol.py): what converted code may do with a node.
    RANK = 2   # where a node meets an array (RANK 1) in one operation, the node answers

    def trace_attribute(self, name):
        return attribute(self, name)

    def trace_set_attribute(self, name, value):
        refuse('setting .%s of a node' % name)

    def trace_set_item(self, container, key, value):
        refuse('writing an item of a node, or indexing with one')

    def trace_item(self, key):
        return item(self, key)   # a list node in a recursion

    def trace_iterate(self, what):
        return items(self)   # a list node in a recursion, its length known

    def trace_unpack(self, count, nested):
        return nested(unpacked(self, count))   # a list node in a recursion: its items

    def trace_key(self, container):
        refuse('indexing with a node')

    def trace_truth(self):
        """``if node:`` of a node that cannot be None: True, unless a node class defines
        its own truth; a list node of known length: whether it has items (a node that
        may be None: write ``node is not None``)."""
        if self.static is not None:
            if type(self.static) is tuple:
                return self.static[1] > 0
            kinds = [self.static]
        else:
            kinds = self.schema.types_used()
        for kind in kinds:
            kind = key_type(kind)
            if hasattr(kind, '__bool__') or hasattr(kind, '__len__'):
                refuse('the truth value of a node whose class defines __bool__/__len__')
        if self.maybe_none or self.numbers:
            refuse('the truth value of a node that may be None (write `node is not None`)')
        return True

    def trace_identity(self, other):
        if other is not None:
            refuse('an identity test between nodes (only `node is None`)')
        return is_none_test(self)

    def trace_attribute_is_none(self, name):
        found = attribute_is_none(self, name)
        return NOT_MODELLED if found is None else found

    def trace_isinstance(self, classes):
        return isinstance_test(self, classes)

    def trace_binary(self, left, right, forward, reflected, symbol):
        if forward in _COMPARISONS:
            refuse('comparing a node')
        return NOT_MODELLED   # an arithmetic operator: Python's own (a TypeError)


def is_node(value):
    return type(value) is NodeRef


def holds_node(values):
    return any(type(v) is NodeRef for v in values)


def as_node(value):
    """``value`` where it is a node, else None (None, a number, any other value)."""
    return value if type(value) is NodeRef else None


def nodes_at(values):
    """The nodes among ``values``, by position."""
    return {position: value for position, value in enumerate(values) if is_node(value)}


# -- numbers crossing a recursive call (arguments, results, threaded numbers) --------
# A Python number or a dynamic one (``scalars.DynamicScalar``, a graph value): asked
# here only, wherever the recursion passes a number into or out of a graph function.

def dynamic_type(value):
    """The Python type of the number a dynamic number stands for; None for any other
    value."""
    return protocol.graph_number_type(value)


def number_type(value):
    """The Python type of ``value``, a dynamic number's that of the number it stands for."""
    return dynamic_type(value) or type(value)


def number_tensor(value, kind):
    """The number ``value`` (its Python type ``kind``) as a scalar graph value: a dynamic
    number's tensor, a Python number's constant."""
    if dynamic_type(value) is not None:
        return protocol.graph_tensor(value)
    return tf.constant(value, scalars.DTYPES[kind])


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
    numbers = present & set(NUMBER_KINDS)
    if Kind.NODE in present:
        if Kind.MISSING in kinds:
            _check(tf.not_equal(tag, int(Kind.MISSING)), 'the node has %s' % label)
        if not numbers:
            return NodeRef(value, schema, ref.table, maybe_none=Kind.NONE in present,
                           derived=True, origin=Origin(ref, name))
        node = tf.equal(tag, int(Kind.NODE))
        class_id = tf.gather(ref.table[0], tf.where(node, value, tf.zeros_like(value)))
        code = tf.where(node, class_id, -1 - tag)
        return NodeRef(value, schema, ref.table, maybe_none=Kind.NONE in present,
                       derived=True, numbers=numbers, code=code, tag=tag, origin=Origin(ref, name))
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
                       if isinstance(NUMBER_KINDS[k](), classes)]
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
