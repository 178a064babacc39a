"""The Python types janus models, and what it models of each: the one table.

Needs nothing run before it.  Converted code may meet any Python object, but
janus reproduces eager's meaning only for the types listed here (DESIGN.md,
"Guard exactly what the trace observed, or refuse").  An *outside* value (one
the call did not make: it has a source) of a modelled type is observed
through guards chosen by its model; a value of any other type is *opaque*:
its attributes are read one by one (each guarded), its methods run converted,
library objects go to library code, and every observation that would run the
type's own protocol (truth, ``len``, ``in``, iteration, indexing, comparison,
operators) is refused -- unless that protocol is ``object``'s own, which the
type guard already decides.

Per type the table gives a ``TypeModel``:

* ``kind``: CONSTANT (compared by value: ``VALUE_MATCH``, or a dynamic
  scalar), ENUM (a member: ``ID_MATCH``), LIST, TUPLE, DICT, DEQUE (ordered
  containers: their contents are guarded item by item), SET (no order janus
  can reproduce: only order-free observations);
* ``observes``: what of an outside value janus guards exactly -- ``truth``
  (``TRUTH_MATCH``), ``len`` (``LEN_MATCH``), ``in`` (``CONTAINS_MATCH``),
  ``items`` (the guarded contents: iteration, indexing, unpacking, equality,
  copies, library arguments; for a SET only the order-free uses);
* ``reads``: its methods that only read it (run on the guarded contents);
* ``changes``: its methods that change it, return None, and are replayed on
  the real object after the run (the shadow heap), in program order;
* ``item_writes``: ``obj[k] = v`` goes through the shadow heap.

Subclasses are models only where the table says so: namedtuples (TUPLE),
Keras's tracked list/dict/set (their tracking runs when the write is
replayed), and user subclasses of a modelled container that redefine none of
its attributes (``class History(list): def mean(self): ...``).  A subclass
that overrides anything (``__iter__``, ``append``), ``collections.UserList``
and friends, and every other type are opaque.  ``OrderedDict``,
``defaultdict`` and ``Counter`` are dicts whose truth, ``len`` and ``in`` are
dict's own: only those are modelled (their items, ``__missing__``, order
and arithmetic are not).
"""
from __future__ import annotations
import collections
import dataclasses
import enum
import sys
import typing

import tensorflow as tf


class Kind(enum.Enum):
    CONSTANT = 'constant'
    ENUM = 'enum'
    LIST = 'list'
    TUPLE = 'tuple'
    DICT = 'dict'
    DEQUE = 'deque'
    SET = 'set'


@dataclasses.dataclass(frozen=True)
class TypeModel:
    """What janus models of one Python type (see the module docstring)."""
    kind: Kind
    base: type                     # the builtin type whose protocol this is
    observes: frozenset = frozenset()
    reads: frozenset = frozenset()
    changes: frozenset = frozenset()
    item_writes: bool = False

    @property
    def container(self) -> bool:
        return self.kind not in (Kind.CONSTANT, Kind.ENUM)

    @property
    def ordered(self) -> bool:
        """Its contents have an order janus reproduces (iteration, indexing)."""
        return self.kind in (Kind.LIST, Kind.TUPLE, Kind.DICT, Kind.DEQUE)


_ALL = frozenset(('truth', 'len', 'in', 'items'))
_SEQUENCE_READS = frozenset(('index', 'count', '__getitem__'))
_SET_READS = frozenset(('issubset', 'issuperset', 'isdisjoint'))

CONSTANTS = (bool, int, float, complex, str, bytes, type(None))

# The table.  Exact types; subclasses: ``model_of``.
_TABLE: dict[type, TypeModel] = {kind: TypeModel(Kind.CONSTANT, kind, _ALL) for kind in CONSTANTS}
_TABLE.update({
    list: TypeModel(Kind.LIST, list, _ALL, _SEQUENCE_READS | {'copy'},
                    frozenset(('append', 'extend', 'insert')), item_writes=True),
    tuple: TypeModel(Kind.TUPLE, tuple, _ALL, _SEQUENCE_READS),
    dict: TypeModel(Kind.DICT, dict, _ALL,
                    frozenset(('get', 'items', 'keys', 'values', 'copy', '__getitem__')),
                    frozenset(('update',)), item_writes=True),
    collections.deque: TypeModel(Kind.DEQUE, collections.deque, _ALL,
                                 frozenset(('index', 'count', 'copy')),
                                 frozenset(('append', 'appendleft', 'extend', 'extendleft'))),
    set: TypeModel(Kind.SET, set, _ALL, _SET_READS,
                   frozenset(('add', 'discard', 'update', 'difference_update'))),
    frozenset: TypeModel(Kind.SET, frozenset, _ALL, _SET_READS),
})
# ``x op= y`` on a container of this kind: the method that does it in place (replayed).
INPLACE = {(Kind.LIST, 'Add'): 'extend', (Kind.DEQUE, 'Add'): 'extend',
           (Kind.DICT, 'BitOr'): 'update', (Kind.SET, 'BitOr'): 'update',
           (Kind.SET, 'Sub'): 'difference_update'}
# dict subclasses whose truth, len and `in` are dict's own (nothing else is modelled).
for _kind in (collections.OrderedDict, collections.defaultdict, collections.Counter):
    _TABLE[_kind] = TypeModel(Kind.DICT, dict, frozenset(('truth', 'len', 'in')))
# Library subclasses, by qualified name (Keras need not be imported): their reads are
# the base type's; their writes are replayed through their own methods (tracking).
_LIBRARY = {'keras.src.utils.tracking.TrackedList': list,
            'keras.src.utils.tracking.TrackedDict': dict,
            'keras.src.utils.tracking.TrackedSet': set}

# Names a user subclass may define without changing its base's behaviour.
_HARMLESS = frozenset(('__module__', '__qualname__', '__doc__', '__dict__', '__weakref__',
                       '__slots__', '__init__', '__annotations__', '__firstlineno__',
                       '__static_attributes__', '__orig_bases__', '__parameters__',
                       '__type_params__', '__classcell__'))
_ENUM = TypeModel(Kind.ENUM, object, _ALL)
_derived = {}


def model_of(value: typing.Any) -> TypeModel | None:
    """The ``TypeModel`` of ``value``'s type, or None (an opaque type)."""
    return model_of_type(type(value))


def model_of_type(kind: type) -> TypeModel | None:
    """The ``TypeModel`` of the type ``kind``, or None (an opaque type)."""
    found = _TABLE.get(kind)
    if found is not None:
        return found
    try:
        return _derived[kind]
    except KeyError:
        found = _derived[kind] = _derive(kind)
        return found
    except TypeError:   # an unhashable metaclass instance: opaque
        return None


def _derive(kind: type) -> TypeModel | None:
    if issubclass(kind, enum.Enum):
        return _ENUM
    library = _LIBRARY.get('%s.%s' % (kind.__module__, kind.__qualname__))
    if library is not None:
        return _TABLE[library]
    if is_namedtuple_class(kind):
        return _TABLE[tuple]
    base = next((b for b in kind.__mro__[1:] if b in _TABLE), None)
    if base is None or not _TABLE[base].container or not _redefines_nothing(kind, base):
        return None
    return _TABLE[base]


def _redefines_nothing(kind: type, base: type) -> bool:
    """Whether the classes between ``kind`` and ``base`` define no name ``base`` has."""
    names = set(dir(base)) - _HARMLESS
    for klass in kind.__mro__:
        if klass is base:
            return True
        if names.intersection(vars(klass)):
            return False
    return False


def is_namedtuple_class(kind: typing.Any) -> bool:
    """collections.namedtuple classes: pure data, their constructor runs no user code."""
    return (isinstance(kind, type) and issubclass(kind, tuple)
            and hasattr(kind, '_fields') and '__init__' not in kind.__dict__
            and getattr(kind.__new__, '__module__', '').startswith('namedtuple_'))


def observes(value: typing.Any, what: str) -> bool:
    """Whether janus guards observation ``what`` of an outside ``value`` exactly."""
    model = model_of(value)
    return model is not None and what in model.observes


def has_items(value: typing.Any) -> bool:
    """An ordered container whose contents janus guards (list, tuple, dict, deque...)."""
    model = model_of(value)
    return model is not None and model.ordered and 'items' in model.observes


def is_set(value: typing.Any) -> bool:
    model = model_of(value)
    return model is not None and model.kind is Kind.SET


def is_own_method(owner: typing.Any, name: str) -> bool:
    """Whether ``name`` is one of the methods of a modelled container's base type
    (``append`` of a list, of a ``TrackedList`` or of your ``History(list)``)."""
    model = model_of(owner)
    return (model is not None and model.container
            and callable(getattr(model.base, name, None)))


def is_constant(value: typing.Any, depth: int = 0) -> bool:
    """A Python constant, or a tuple of them: a set item or key janus can guard."""
    if type(value) in CONSTANTS:
        return True
    return type(value) is tuple and depth < 4 and all(is_constant(v, depth + 1) for v in value)


def holds_only_constants(value: typing.Any, depth: int = 0) -> bool:
    """Whether ``value`` is a Python constant, a list/tuple/dict of them, or an
    exception whose arguments and attributes are: text made of it is the same
    on every call (no graph value, no object whose text may change)."""
    if type(value) in CONSTANTS:
        return True
    if depth > 4:
        return False
    if isinstance(value, BaseException):
        parts = list(value.args) + list(getattr(value, '__dict__', {}).values())
    elif type(value) in (tuple, list):
        parts = list(value)
    elif type(value) is dict:
        parts = list(value.keys()) + list(value.values())
    else:
        return False
    return all(holds_only_constants(part, depth + 1) for part in parts)


def builtin_values_only(values: typing.Any, depth: int = 0) -> bool:
    """Whether ``values`` (and the lists, tuples, dicts and sets in them) hold only
    objects of Python's builtin types: what a builtin's own C code raises on them,
    it raises on eager's values too (a graph tensor lacks an eager one's
    ``__index__``: ``[1, 2][t]`` would raise only when traced)."""
    for value in values:
        kind = type(value)
        if kind.__module__ != 'builtins':
            return False
        if kind in (list, tuple, set, frozenset) and (
                depth > 3 or not builtin_values_only(value, depth + 1)):
            return False
        if kind is dict and (depth > 3 or not builtin_values_only(
                list(value.keys()) + list(value.values()), depth + 1)):
            return False
    return True


def truth_is_type_level(kind: type) -> bool:
    """Whether every instance of ``kind`` is true (no ``__bool__``/``__len__``)."""
    return getattr(kind, '__bool__', None) is None and getattr(kind, '__len__', None) is None


def protocol_is_object(kind: type, name: str) -> bool:
    """Whether ``kind``'s special method ``name`` is ``object``'s (or absent)."""
    return getattr(kind, name, None) is getattr(object, name, None)


def is_variable(value: typing.Any) -> bool:
    """A ``tf.Variable``, or a Keras 3 ``keras.Variable`` (a layer's ``add_weight``, an
    optimizer's learning rate: it reads and slices as its ``tf.Variable`` does)."""
    if isinstance(value, tf.Variable):
        return True
    keras_variables = sys.modules.get('keras.src.backend.common.variables')
    return keras_variables is not None and isinstance(value, keras_variables.Variable)
