"""Guards: assumptions checked in Python before a cached graph may run.

Needs nothing but TensorFlow, the type table (``pytypes``) and ``sources``.
Two families of guards: the *argument signature* (``call_signature.py``,
built on the kinds and checks here), and the *source guards* here
(``SourceGuard``, ``AliasGuard``): checks on values the traced code read from
outside its arguments (globals, closure cells, attributes, items), each
re-evaluated from its ``Source`` at call time (``compile_checks``: all of a
graph's as one generated function).

A guard check returns ``None`` when it holds, else a ``Miss`` naming the guard
kind and the failing path, which the cache logs as the recompile reason.
"""
from __future__ import annotations
import collections
import enum
import math
import typing

import numpy as np
import tensorflow as tf

from janus import pytypes, sources
from janus.sources import (ArgSource, AttrSource, CellSource, DefaultSource,  # noqa: F401
                           GlobalSource, ItemSource, IteratorPositionSource,
                           IteratorSequenceSource, LenSource, ObjectSource, Source,
                           TypeSource)

EagerTensor = type(tf.constant(0))
PRIMITIVES = pytypes.CONSTANTS   # the table's constants (janus/pytypes.py)


class GuardKind(enum.Enum):
    TYPE_MATCH = 'TYPE_MATCH'      # type(value) is T
    DTYPE_MATCH = 'DTYPE_MATCH'    # tensor dtype equal
    SHAPE_MATCH = 'SHAPE_MATCH'    # tensor shape compatible with the graph's spec
    VALUE_MATCH = 'VALUE_MATCH'    # Python constant equal (type and value)
    ID_MATCH = 'ID_MATCH'          # the very same object
    LEN_MATCH = 'LEN_MATCH'        # sequence length equal
    KEYS_MATCH = 'KEYS_MATCH'      # dict keys equal, in order
    METHOD_MATCH = 'METHOD_MATCH'  # attribute is a bound method of the same function
    TENSOR_MATCH = 'TENSOR_MATCH'  # an eager tensor of this dtype, shape compatible (hoisted read)
    CODE_MATCH = 'CODE_MATCH'      # a Python function with the same code (its closure read per call)
    LIBRARY_CONFIG = 'LIBRARY_CONFIG'  # Keras layers' trainable/settings as traced (library/library_config.py)
    ALIAS_MATCH = 'ALIAS_MATCH'    # the same outside objects are one object (f(a, a) vs f(a, b))
    TRUTH_MATCH = 'TRUTH_MATCH'    # bool(value) equal (`if obj.items:`), O(1)
    CONTAINS_MATCH = 'CONTAINS_MATCH'  # (key in value) equal (`'k' in obj.d`)
    HASATTR_MATCH = 'HASATTR_MATCH'  # an attribute the trace found missing is still missing
    FUNCTION_MATCH = 'FUNCTION_MATCH'  # an inlined function's __code__/__defaults__/__kwdefaults__ unchanged
    EQUALS_MATCH = 'EQUALS_MATCH'  # a flat list/tuple/dict of Python constants equal, one C-level compare
    SCALAR_MATCH = 'SCALAR_MATCH'  # a relaxed Python number (a graph input): same type, an int within +-2**62
    SET_MATCH = 'SET_MATCH'        # a set/frozenset of constants equal, item types and float signs too (order-free)
    ARRAY_MATCH = 'ARRAY_MATCH'    # a NumPy ndarray of this dtype and this shape, relaxed dims any size (fed per run)
    DATASET_MATCH = 'DATASET_MATCH'  # a tf.data.Dataset of this type spec (element structure, dtypes, shapes; fed per run)
    ITERATOR_MATCH = 'ITERATOR_MATCH'  # a tf.data iterator of this element spec (its handle fed per run)
    COMPOSITE_MATCH = 'COMPOSITE_MATCH'  # a RaggedTensor/SparseTensor of this type spec, relaxed dims any size (components fed per run)
    STRUCTURE_MATCH = 'STRUCTURE_MATCH'  # the objects under a recursive function's roots have the classes and attribute kinds its graph reads (encoded per run)
    NUMBERS_MATCH = 'NUMBERS_MATCH'  # a non-empty list/tuple of Python numbers of one type TF converts to this dtype (fed per run)


SCALAR_INT_BOUND = 2 ** 62   # a dynamic int stays strictly inside +-this (int64 never wraps)
# A dynamic float is zero, NaN, infinite or at least this large: TF's CPU kernels flush
# subnormals (below 2**-1022) to zero, Python keeps them; the margin covers results.
SCALAR_TINY = 2.0 ** -1000


def dynamic_float_ok(value: float) -> bool:
    return not (0.0 < abs(value) < SCALAR_TINY)


def scalar_ok(value: int | float | bool) -> bool:
    """Whether a Python int/float/bool can be a relaxed number's value (SCALAR_MATCH
    checks its type apart): every bool, an int within +-2**62, a float clear of the
    subnormals."""
    kind = type(value)
    if kind is float:
        return dynamic_float_ok(value)
    return kind is bool or -SCALAR_INT_BOUND < value < SCALAR_INT_BOUND


# ``key``: what a relaxation would relax: a source's uid or an argument's path (or None).
Miss = collections.namedtuple('Miss', 'kind where expected actual key', defaults=(None,))


def describe_value(value: typing.Any) -> str:
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], np.dtype):
        return 'array %s%s' % (value[0], list(value[1]))
    if type(value) is np.ndarray:
        return 'array %s%s' % (value.dtype, list(value.shape))
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], tf.DType):
        return 'tensor %s%s' % (value[0].name, value[1])
    if isinstance(value, EagerTensor):
        return 'tensor %s%s' % (value.dtype.name, list(value.shape))
    if type(value) is int and value.bit_length() > 64:
        return 'an int of %d bits' % value.bit_length()   # repr past 4,300 digits raises
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - the user's __repr__ (or Python's limits) raised
        return 'a %s' % type(value).__name__
    return text if len(text) < 60 else text[:57] + '...'


def same_constant(a: typing.Any, b: typing.Any) -> bool:
    """Python-constant equality that also says NaN == NaN and 1 != 1.0 != True."""
    if type(a) is not type(b):
        return False
    if type(a) is range:   # range(0) == range(5, 5), but their .start differ
        return (a.start, a.stop, a.step) == (b.start, b.stop, b.step)
    if isinstance(a, (float, np.floating)):   # NumPy's floats too (VALUE_MATCH of np.float32)
        if math.isnan(a) and math.isnan(b):
            return True
        # -0.0 == 0.0, but repr, copysign and 1 / x tell them apart
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


class SourceGuard:
    """One named check of a value re-read from a ``Source`` before each run."""

    def __init__(self, kind: GuardKind, source: Source, expected: typing.Any) -> None:
        self.kind, self.source, self.expected = kind, source, expected
        self._holds = _PREDICATES[kind](expected)   # built once: replay runs it every call

    def check(self, arguments: typing.Mapping[str, typing.Any], memo: dict) -> Miss | None:
        try:
            value = self.source.value(arguments, memo)
        except Exception as e:  # the attribute/key/name is gone: guard fails
            return Miss(self.kind, repr(self.source), describe_value(self.expected),
                        'unreadable (%s)' % type(e).__name__)
        if self._holds(value):
            return None
        return Miss(self.kind, repr(self.source), describe_value(self.expected),
                    describe_value(value),
                    (self.source.uid(), repr(self.source), self.expected, value))

    def __repr__(self) -> str:
        if self.kind is GuardKind.SCALAR_MATCH:
            return '%s(%r: any %s)' % (self.kind.value, self.source, self.expected.__name__)
        return '%s(%r == %s)' % (self.kind.value, self.source, describe_value(self.expected))

    def miss(self, value: typing.Any) -> Miss:
        """The Miss ``check`` returns for a value that fails the guard."""
        return Miss(self.kind, repr(self.source), describe_value(self.expected),
                    describe_value(value),
                    (self.source.uid(), repr(self.source), self.expected, value))

    def unreadable(self, error: BaseException) -> Miss:
        """The Miss ``check`` returns when reading the source raised ``error``."""
        return Miss(self.kind, repr(self.source), describe_value(self.expected),
                    'unreadable (%s)' % type(error).__name__)


def compile_checks(
        guards: typing.Sequence) -> typing.Callable[[typing.Mapping[str, typing.Any]], Miss | None]:
    """``check(arguments)``: the first Miss of ``guards`` checked in order with one
    memo (each ``SourceGuard.check``'s result), or None when all hold.

    The replay path checks every guard on every call; this is that loop as one
    generated Python function: each source read once, in the order the loop reads
    it, into a local (no memo dict, no method call per chain link); ID/TYPE
    guards compared inline, the others through their own predicate.  A guard of
    another kind (ALIAS_MATCH) and every guard after it run as they are, with a
    memo holding what was read before; so does a guard on a source of another kind
    (a ``sources.CounterSource``)."""
    writer = _CheckWriter()
    for index, guard in enumerate(guards):
        if type(guard) is not SourceGuard or not _compilable(guard.source):
            writer.check_the_rest(guards[index:])
            break
        writer.check(index, guard)
    else:
        writer.lines.append('    return None')
    source_text = '\n'.join(writer.lines)
    exec(compile(source_text, '<janus guards>', 'exec'), writer.namespace)  # noqa: S102
    check = writer.namespace['check']
    check.source = source_text
    return check


_LEAF_SOURCES = (sources.ArgSource, sources.CellSource, sources.ObjectSource)
_CHAINED_SOURCES = (sources.AttrSource, sources.ItemSource, sources.TypeSource,
                    sources.LenSource)


def _compilable(source: typing.Any) -> bool:
    kind = type(source)
    if kind in _CHAINED_SOURCES:
        return _compilable(source.base)
    return kind in _LEAF_SOURCES or kind in (sources.GlobalSource, sources.DefaultSource)


class _CheckWriter:
    """The source text of ``compile_checks``'s function, and the names it reads."""

    def __init__(self) -> None:
        self.namespace: dict[str, typing.Any] = {'_Miss': Miss}
        self.lines = ['def check(arguments):']
        self.names = {}        # id(source) -> local name
        self.memoized = []     # (id(source), local name) of sources the slow path memoizes

    def check(self, index: int, guard: SourceGuard) -> None:
        """The code checking ``guard`` (the ``index``-th)."""
        namespace, lines = self.namespace, self.lines
        namespace['g%d' % index] = guard
        code = []
        value = self.read(guard.source, code)
        if code:
            lines.append('    try:')
            lines.extend('        ' + line for line in code)
            lines.append('    except Exception as e:')
            lines.append('        return g%d.unreadable(e)' % index)
        namespace['e%d' % index] = guard.expected
        namespace['h%d' % index] = guard._holds
        if guard.kind is GuardKind.ID_MATCH:
            test = '%s is e%d' % (value, index)
        elif guard.kind is GuardKind.TYPE_MATCH:
            test = 'type(%s) is e%d' % (value, index)
        else:
            test = 'h%d(%s)' % (index, value)
        lines.append('    if not (%s):' % test)
        lines.append('        return g%d.miss(%s)' % (index, value))

    def check_the_rest(self, guards: typing.Sequence) -> None:
        """``guards`` checked as they are, with a memo of what was read so far."""
        self.namespace['rest'] = checked_in_order(guards)
        self.lines.append('    return rest(arguments, {%s})' % ', '.join(
            '%d: %s' % (key, name) for key, name in self.memoized))

    def read(self, source: typing.Any, out: list[str]) -> str:
        """Appends the code reading ``source`` (and its bases) to ``out``; its name."""
        names = self.names
        if id(source) in names and not isinstance(source, _LEAF_SOURCES):
            return names[id(source)]
        base = self.read(source.base, out) if type(source) in _CHAINED_SOURCES else None
        k = len(self.namespace)
        name = 'v%d' % k
        self.namespace[name] = None   # reserves the number
        out.append('%s = %s' % (name, self._expression(source, base, k)))
        if not isinstance(source, _LEAF_SOURCES):
            names[id(source)] = name
            self.memoized.append((id(source), name))
        return name

    def _expression(self, source: typing.Any, base: str | None, k: int) -> str:
        """The expression reading ``source`` (``base``: its base's local name)."""
        kind, namespace = type(source), self.namespace
        if kind is sources.ArgSource:
            namespace['n%d' % k] = source.name
            return 'arguments[n%d]' % k
        if kind is sources.CellSource:
            namespace['c%d' % k] = source.cell
            return 'c%d.cell_contents' % k
        if kind is sources.ObjectSource:
            namespace['o%d' % k] = source.obj
            return 'o%d' % k
        if kind is sources.AttrSource:
            namespace['n%d' % k] = source.name
            return 'getattr(%s, n%d)' % (base, k)
        if kind is sources.ItemSource:
            namespace['n%d' % k] = source.key
            return '%s[n%d]' % (base, k)
        if kind is sources.TypeSource:
            return 'type(%s)' % base
        if kind is sources.LenSource:
            return 'len(%s)' % base
        namespace['s%d' % k] = source   # GlobalSource, DefaultSource
        return 's%d.get(arguments, None)' % k


def checked_in_order(guards: typing.Sequence) -> typing.Callable[..., Miss | None]:
    def check(arguments: typing.Mapping[str, typing.Any], memo: dict) -> Miss | None:
        for guard in guards:
            miss = guard.check(arguments, memo)
            if miss:
                return miss
        return None
    return check


def _read_dims(tensor: tf.Tensor) -> tuple:
    """An eager tensor's dims: its cached ``TensorShape``'s when ``.shape`` was
    read before (30 ns), else from the handle (250 ns)."""
    shape = tensor._tensor_shape
    return shape._dims if shape is not None else tensor._shape_tuple()


def _shape_tuple(tensor: tf.Tensor) -> tuple:
    return tensor._shape_tuple()


# An eager tensor's shape never changes, so the cached one is as good as the handle's.
tensor_dims = _read_dims if hasattr(EagerTensor, '_tensor_shape') else _shape_tuple


def dims_compatible(expected: tuple | None, actual: tuple) -> bool:
    """TensorShape.is_compatible_with on tuples (None: any rank / any size)."""
    if expected is None or expected == actual:
        return True
    return len(expected) == len(actual) and all(
        e is None or e == a for e, a in zip(expected, actual))


def _tensor_match(expected: tuple) -> typing.Callable[[typing.Any], bool]:
    dtype_enum = expected[0].as_datatype_enum
    dims = tuple(expected[1].as_list()) if expected[1].rank is not None else None
    return lambda v: (type(v) is EagerTensor and v._datatype_enum() == dtype_enum
                      and dims_compatible(dims, tensor_dims(v)))


def _array_match(dtype: np.dtype, shape: tuple) -> typing.Callable[[typing.Any], bool]:
    """A NumPy array of ``dtype``, its shape ``shape`` (None: any size there)."""
    if None not in shape:
        return lambda v: type(v) is np.ndarray and v.shape == shape and v.dtype == dtype
    return lambda v: (type(v) is np.ndarray and v.dtype == dtype
                      and dims_compatible(shape, v.shape))


INT32_BOUND = 2 ** 31


def numbers_dtype(value: typing.Any) -> tf.DType | None:
    """The dtype TF converts ``value`` to, when it is a non-empty flat list or tuple of
    Python numbers of one type (bools, ints, floats), else None: a list of ints is
    int32 where every item fits, int64 otherwise (as ``tf.constant``)."""
    if type(value) not in (list, tuple) or not value:
        return None
    kind = type(value[0])
    if kind not in (bool, int, float) or any(type(item) is not kind for item in value):
        return None
    if kind is int:
        if all(-INT32_BOUND <= item < INT32_BOUND for item in value):
            return tf.int32
        return tf.int64 if all(-2 ** 63 <= item < 2 ** 63 for item in value) else None
    return tf.bool if kind is bool else tf.float32


def numbers_key(source: Source) -> tuple:
    """The relaxation key of the list of numbers at ``source`` (``relaxation.py``; a
    graph input once relaxed, ``shadow_heap.hoist_numbers``)."""
    return ('numbers', source.uid())


def _numbers_match(container: type, dtype: tf.DType) -> typing.Callable[[typing.Any], bool]:
    return lambda v: type(v) is container and numbers_dtype(v) == dtype


# Per guard kind: expected -> predicate on the re-read value.
def _same_items(values: typing.Iterable, expected: typing.Iterable) -> bool:
    """Item by item: the same type, and a float's sign (``==`` holds for 0.0 and -0.0,
    and for 1 and 1.0, which Python tells apart)."""
    return all(type(x) is type(y) and (type(x) is not float or
                                       math.copysign(1.0, x) == math.copysign(1.0, y))
               for x, y in zip(values, expected))


def _equals_match(snapshot: typing.Any, kinds: tuple) -> typing.Callable[[typing.Any], bool]:
    """A flat container of constants: equal, with the same key order (a dict's
    iteration order is what the trace saw), item types and float signs."""
    if type(snapshot) is dict:
        keys, values = list(snapshot), list(snapshot.values())
        return lambda v: (type(v) is dict and v == snapshot and list(v) == keys
                          and tuple(map(type, v)) == kinds and _same_items(v.values(), values))
    return lambda v: (type(v) is type(snapshot) and v == snapshot
                      and tuple(map(type, v)) == kinds and _same_items(v, snapshot))


def _tag(item: typing.Any) -> tuple:
    """A set item with what ``==`` forgets: its type, a float's sign of zero."""
    if type(item) is float:
        return float, item, math.copysign(1.0, item)
    if type(item) is tuple:
        return tuple, tuple(map(_tag, item))
    return type(item), item


def _set_match(snapshot: typing.AbstractSet) -> typing.Callable[[typing.Any], bool]:
    """A set or frozenset of constants, compared without looking at its order (janus
    models only order-free observations of sets: pytypes.py)."""
    kind, size, tags = type(snapshot), len(snapshot), frozenset(map(_tag, snapshot))
    return lambda v: (type(v) is kind and len(v) == size and v == snapshot
                      and frozenset(map(_tag, v)) == tags)


_PREDICATES = {
    GuardKind.ID_MATCH: lambda e: lambda v: v is e,
    GuardKind.TYPE_MATCH: lambda e: lambda v: type(v) is e,
    GuardKind.VALUE_MATCH: lambda e: lambda v: same_constant(v, e),
    GuardKind.LEN_MATCH: lambda e: lambda v: type(v) is e[0] and len(v) == e[1],
    # A dict subclass's own type is guarded where it was read (TYPE_MATCH/ID_MATCH).
    GuardKind.KEYS_MATCH: lambda e: lambda v: isinstance(v, dict) and list(v) == e,
    GuardKind.METHOD_MATCH: lambda e: lambda v: getattr(v, '__func__', None) is e,
    GuardKind.TRUTH_MATCH: lambda e: lambda v: type(v) is e[0] and bool(v) == e[1],
    GuardKind.CONTAINS_MATCH: lambda e: lambda v: type(v) is e[0] and (e[1] in v) == e[2],
    GuardKind.HASATTR_MATCH: lambda e: lambda v: hasattr(v, e[0]) == e[1],
    GuardKind.FUNCTION_MATCH: lambda e: lambda v: (v.__code__ is e[0] and v.__defaults__ is e[1]
                                                   and v.__kwdefaults__ is e[2]),
    GuardKind.EQUALS_MATCH: lambda e: _equals_match(*e),
    GuardKind.SET_MATCH: _set_match,
    # A version compare; a fingerprint only after a change (library/library_config.py).
    GuardKind.LIBRARY_CONFIG: lambda e: e.holds,
    GuardKind.TENSOR_MATCH: _tensor_match,
    GuardKind.ARRAY_MATCH: lambda e: _array_match(*e),
    GuardKind.NUMBERS_MATCH: lambda e: _numbers_match(*e),
    GuardKind.SCALAR_MATCH: lambda e: lambda v: type(v) is e and scalar_ok(v),
}


class AliasGuard:
    """ALIAS_MATCH: which of the outside objects the trace used are one object.

    A graph traced for ``f(a, a)`` routes both parameters' reads and writes
    through one object; ``f(a, b)`` needs another graph.  One guard for the
    whole partition: O(objects), each source read once per check (memo).
    """

    kind = GuardKind.ALIAS_MATCH

    def __init__(self, sources: typing.Sequence[Source], expected: tuple[int, ...]) -> None:
        self.sources, self.expected = sources, expected

    @staticmethod
    def partition(sources: typing.Sequence[Source], arguments: typing.Mapping[str, typing.Any],
                  memo: dict | None = None) -> tuple[int, ...]:
        """Per source, the index of the first source naming the same object."""
        memo = {} if memo is None else memo
        first = {}
        groups = []
        for index, source in enumerate(sources):
            groups.append(first.setdefault(id(source.value(arguments, memo)), index))
        return tuple(groups)

    def check(self, arguments: typing.Mapping[str, typing.Any], memo: dict) -> Miss | None:
        try:
            actual = self.partition(self.sources, arguments, memo)
        except Exception as e:  # an object is gone: the guard fails
            return Miss(self.kind, 'outside objects', 'readable', type(e).__name__)
        if actual == self.expected:
            return None
        return Miss(self.kind, 'outside objects', self._describe(self.expected),
                    self._describe(actual))

    def _describe(self, groups: tuple[int, ...]) -> str:
        shared = ['%r is %r' % (self.sources[g], self.sources[i])
                  for i, g in enumerate(groups) if g != i]
        return ', '.join(shared) if shared else 'all distinct'

    def __repr__(self) -> str:
        return 'ALIAS_MATCH(%s)' % self._describe(self.expected)
