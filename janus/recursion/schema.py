"""What a recursion over Python structures reads: the schema of its node classes and columns.

Needs nothing traced: ``recursion/recursion.py`` grows a ``Schema`` while it traces a
recursive function's body (``structures.py`` reads nodes through it), and
``structure_guard.py`` encodes each run's structure by it.  The JANUS paper reads tree
nodes from the Python heap inside the graph; janus encodes them on the host instead
(issue 21's measured design: ~14 us per tree, against the GIL per attribute).

A ``Schema`` is what the recursion reads: the node classes it meets (a list or tuple's
class includes its length, its items are columns ``0..n-1``) and, per attribute read
(a *column*), the kinds of value seen there (another node, None, an int, a float, a
bool, absent), overall and per class.  ``cell`` reads one attribute as the encoder
does, without running code.
"""
import enum
import types

import tensorflow as tf

from janus import guards
from janus.errors import Unsupported
from janus.reasons import Reason
from janus.library import whitelist
from janus.values import scalars

INT_BOUND = guards.SCALAR_INT_BOUND


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


NUMBER_KINDS = {Kind.INT: int, Kind.FLOAT: float, Kind.BOOL: bool}
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
            return kind_of(obj[name]) if name < len(obj) else (Kind.MISSING, None)
        return (Kind.OTHER, None) if hasattr(kind, name) else (Kind.MISSING, None)
    if type(name) is int:
        return Kind.MISSING, None
    found = class_attribute(type(obj), name)
    if found is not ABSENT and hasattr(type(found), '__set__'):   # a data descriptor
        if type(found).__name__ != 'member_descriptor':
            return Kind.OTHER, None
        try:
            return kind_of(found.__get__(obj, type(obj)))
        except AttributeError:
            return Kind.MISSING, None
    own = getattr(obj, '__dict__', None)
    if own is not None and name in own:
        return kind_of(own[name])
    if found is ABSENT:
        return Kind.MISSING, None
    if type(found) is types.FunctionType:
        return Kind.METHOD, found
    if hasattr(type(found), '__get__'):
        return Kind.OTHER, None   # a classmethod, staticmethod or other descriptor
    return kind_of(found)


ABSENT = object()


def class_attribute(kind, name):
    for klass in kind.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return ABSENT


def kind_of(value):
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

