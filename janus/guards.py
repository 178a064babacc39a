"""Guards: assumptions checked in Python before a cached graph may run.

Needs nothing but TensorFlow and the type table (``pytypes``).  Two families
live here:

* the *argument signature* (``Signature``, its nodes from ``node_for``): a
  tree mirroring the call's arguments whose nodes check type, dtype, shape
  and Python values of each argument and flatten its tensors into graph
  inputs;
* *source guards* (``SourceGuard``): checks on values the traced code read
  from outside its arguments (globals, closure cells, attributes, items),
  each re-evaluated from its ``Source`` at call time.

A guard check returns ``None`` when it holds, else a ``Miss`` naming the guard
kind and the failing path, which the cache logs as the recompile reason.
"""
import collections
import enum
import math
import operator
import types

import numpy as np
import tensorflow as tf

from janus import pytypes, sources
from janus.config import config
from janus.reasons import Reason
from janus.sources import (ArgSource, AttrSource, CellSource, DefaultSource,  # noqa: F401
                           GlobalSource, ItemSource, ObjectSource, Source, TypeSource)

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
    LIBRARY_CONFIG = 'LIBRARY_CONFIG'  # Keras layers' trainable/settings as traced (runtime/library_config.py)
    ALIAS_MATCH = 'ALIAS_MATCH'    # the same outside objects are one object (f(a, a) vs f(a, b))
    TRUTH_MATCH = 'TRUTH_MATCH'    # bool(value) equal (`if obj.items:`), O(1)
    CONTAINS_MATCH = 'CONTAINS_MATCH'  # (key in value) equal (`'k' in obj.d`)
    HASATTR_MATCH = 'HASATTR_MATCH'  # an attribute the trace found missing is still missing
    FUNCTION_MATCH = 'FUNCTION_MATCH'  # an inlined function's __code__/__defaults__/__kwdefaults__ unchanged
    EQUALS_MATCH = 'EQUALS_MATCH'  # a flat list/tuple/dict of Python constants equal, one C-level compare
    SCALAR_MATCH = 'SCALAR_MATCH'  # a relaxed Python number (a graph input): same type, an int within +-2**62
    SET_MATCH = 'SET_MATCH'        # a set/frozenset of constants equal, item types and float signs too (order-free)


SCALAR_INT_BOUND = 2 ** 62   # a dynamic int stays strictly inside +-this (int64 never wraps)
# A dynamic float is zero, NaN, infinite or at least this large: TF's CPU kernels flush
# subnormals (below 2**-1022) to zero, Python keeps them; the margin covers results.
SCALAR_TINY = 2.0 ** -1000


def dynamic_float_ok(value):
    return not (0.0 < abs(value) < SCALAR_TINY)


# ``key``: what a relaxation would relax: a source's uid or an argument's path (or None).
Miss = collections.namedtuple('Miss', 'kind where expected actual key', defaults=(None,))


def _describe(value):
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], tf.DType):
        return 'tensor %s%s' % (value[0].name, value[1])
    if isinstance(value, EagerTensor):
        return 'tensor %s%s' % (value.dtype.name, list(value.shape))
    text = repr(value)
    return text if len(text) < 60 else text[:57] + '...'


def same_constant(a, b):
    """Python-constant equality that also says NaN == NaN and 1 != 1.0 != True."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a) and math.isnan(b):
            return True
        # -0.0 == 0.0, but repr, copysign and 1 / x tell them apart
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


class SourceGuard:
    """One named check of a value re-read from a ``Source`` before each run."""

    def __init__(self, kind, source, expected):
        self.kind, self.source, self.expected = kind, source, expected
        self._holds = _PREDICATES[kind](expected)   # built once: replay runs it every call

    def check(self, arguments, memo):
        try:
            value = self.source.value(arguments, memo)
        except Exception as e:  # the attribute/key/name is gone: guard fails
            return Miss(self.kind, repr(self.source), _describe(self.expected),
                        'unreadable (%s)' % type(e).__name__)
        if self._holds(value):
            return None
        return Miss(self.kind, repr(self.source), _describe(self.expected), _describe(value),
                    (self.source.uid(), repr(self.source), self.expected, value))

    def __repr__(self):
        if self.kind is GuardKind.SCALAR_MATCH:
            return '%s(%r: any %s)' % (self.kind.value, self.source, self.expected.__name__)
        return '%s(%r == %s)' % (self.kind.value, self.source, _describe(self.expected))

    def miss(self, value):
        """The Miss ``check`` returns for a value that fails the guard."""
        return Miss(self.kind, repr(self.source), _describe(self.expected), _describe(value),
                    (self.source.uid(), repr(self.source), self.expected, value))

    def unreadable(self, error):
        """The Miss ``check`` returns when reading the source raised ``error``."""
        return Miss(self.kind, repr(self.source), _describe(self.expected),
                    'unreadable (%s)' % type(error).__name__)


def compile_checks(guards):
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
_CHAINED_SOURCES = (sources.AttrSource, sources.ItemSource, sources.TypeSource)


def _compilable(source):
    kind = type(source)
    if kind in _CHAINED_SOURCES:
        return _compilable(source.base)
    return kind in _LEAF_SOURCES or kind in (sources.GlobalSource, sources.DefaultSource)


class _CheckWriter:
    """The source text of ``compile_checks``'s function, and the names it reads."""

    def __init__(self):
        self.namespace = {'_Miss': Miss}
        self.lines = ['def check(arguments):']
        self.names = {}        # id(source) -> local name
        self.memoized = []     # (id(source), local name) of sources the slow path memoizes

    def check(self, index, guard):
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

    def check_the_rest(self, guards):
        """``guards`` checked as they are, with a memo of what was read so far."""
        self.namespace['rest'] = checked_in_order(guards)
        self.lines.append('    return rest(arguments, {%s})' % ', '.join(
            '%d: %s' % (key, name) for key, name in self.memoized))

    def read(self, source, out):
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

    def _expression(self, source, base, k):
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
        namespace['s%d' % k] = source   # GlobalSource, DefaultSource
        return 's%d.get(arguments, None)' % k


def checked_in_order(guards):
    def check(arguments, memo):
        for guard in guards:
            miss = guard.check(arguments, memo)
            if miss:
                return miss
        return None
    return check


def _tensor_match(expected):
    dtype_enum = expected[0].as_datatype_enum
    dims = tuple(expected[1].as_list()) if expected[1].rank is not None else None
    return lambda v: (type(v) is EagerTensor and v._datatype_enum() == dtype_enum
                      and _dims_compatible(dims, _tensor_dims(v)))


# Per guard kind: expected -> predicate on the re-read value.
def _same_items(values, expected):
    """Item by item: the same type, and a float's sign (``==`` holds for 0.0 and -0.0,
    and for 1 and 1.0, which Python tells apart)."""
    return all(type(x) is type(y) and (type(x) is not float or
                                       math.copysign(1.0, x) == math.copysign(1.0, y))
               for x, y in zip(values, expected))


def _equals_match(snapshot, kinds):
    """A flat container of constants: equal, with the same key order (a dict's
    iteration order is what the trace saw), item types and float signs."""
    if type(snapshot) is dict:
        keys, values = list(snapshot), list(snapshot.values())
        return lambda v: (type(v) is dict and v == snapshot and list(v) == keys
                          and tuple(map(type, v)) == kinds and _same_items(v.values(), values))
    return lambda v: (type(v) is type(snapshot) and v == snapshot
                      and tuple(map(type, v)) == kinds and _same_items(v, snapshot))


def _tag(item):
    """A set item with what ``==`` forgets: its type, a float's sign of zero."""
    if type(item) is float:
        return float, item, math.copysign(1.0, item)
    if type(item) is tuple:
        return tuple, tuple(map(_tag, item))
    return type(item), item


def _set_match(snapshot):
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
    # A version compare; a fingerprint only after a change (runtime/library_config.py).
    GuardKind.LIBRARY_CONFIG: lambda e: e.holds,
    GuardKind.TENSOR_MATCH: _tensor_match,
    GuardKind.SCALAR_MATCH: lambda e: lambda v: type(v) is e and (
        dynamic_float_ok(v) if e is float else -SCALAR_INT_BOUND < v < SCALAR_INT_BOUND),
}


class AliasGuard:
    """ALIAS_MATCH: which of the outside objects the trace used are one object.

    A graph traced for ``f(a, a)`` routes both parameters' reads and writes
    through one object; ``f(a, b)`` needs another graph.  One guard for the
    whole partition: O(objects), each source read once per check (memo).
    """

    kind = GuardKind.ALIAS_MATCH

    def __init__(self, sources, expected):
        self.sources, self.expected = sources, expected

    @staticmethod
    def partition(sources, arguments, memo=None):
        """Per source, the index of the first source naming the same object."""
        memo = {} if memo is None else memo
        first = {}
        groups = []
        for index, source in enumerate(sources):
            groups.append(first.setdefault(id(source.value(arguments, memo)), index))
        return tuple(groups)

    def check(self, arguments, memo):
        try:
            actual = self.partition(self.sources, arguments, memo)
        except Exception as e:  # an object is gone: the guard fails
            return Miss(self.kind, 'outside objects', 'readable', type(e).__name__)
        if actual == self.expected:
            return None
        return Miss(self.kind, 'outside objects', self._describe(self.expected),
                    self._describe(actual))

    def _describe(self, groups):
        shared = ['%r is %r' % (self.sources[g], self.sources[i])
                  for i, g in enumerate(groups) if g != i]
        return ', '.join(shared) if shared else 'all distinct'

    def __repr__(self):
        return 'ALIAS_MATCH(%s)' % self._describe(self.expected)


# --------------------------------------------------------------------------
# The argument signature.
# --------------------------------------------------------------------------

def _read_dims(tensor):
    """An eager tensor's dims: its cached ``TensorShape``'s when ``.shape`` was
    read before (30 ns), else from the handle (250 ns)."""
    shape = tensor._tensor_shape
    return shape._dims if shape is not None else tensor._shape_tuple()


def _shape_tuple(tensor):
    return tensor._shape_tuple()


# An eager tensor's shape never changes, so the cached one is as good as the handle's.
_tensor_dims = _read_dims if hasattr(EagerTensor, '_tensor_shape') else _shape_tuple


def _item_reader(names):
    """``arguments -> tuple of arguments[name]`` for ``names``, in one C call."""
    if not names:
        return lambda arguments: ()
    if len(names) == 1:
        name = names[0]
        return lambda arguments: (arguments[name],)
    return operator.itemgetter(*names)


def _dims_compatible(expected, actual):
    """TensorShape.is_compatible_with on tuples (None: any rank / any size)."""
    if expected is None or expected == actual:
        return True
    return len(expected) == len(actual) and all(
        e is None or e == a for e, a in zip(expected, actual))


class TensorNode:
    """An eager tensor argument: becomes one graph input with this spec."""

    def __init__(self, path, dtype, shape):
        self.path, self.dtype, self.shape = path, dtype, shape
        # The replay path checks these plain values (TensorShape methods cost ~1 us each).
        self._dtype_enum = dtype.as_datatype_enum
        self._dims = tuple(shape.as_list()) if shape.rank is not None else None

    def check(self, value):
        if type(value) is not EagerTensor:
            return Miss(GuardKind.TYPE_MATCH, self.path, 'tensor', _describe(value))
        if value._datatype_enum() != self._dtype_enum:
            return Miss(GuardKind.DTYPE_MATCH, self.path, self.dtype.name, value.dtype.name)
        if not _dims_compatible(self._dims, value._shape_tuple()):
            return Miss(GuardKind.SHAPE_MATCH, self.path, str(self.shape), str(value.shape))
        return None

    def flatten(self, value, out):
        out.append(value)

    def placeholder(self, inputs):
        return next(inputs)

    def specs(self, out):
        out.append(tf.TensorSpec(self.shape, self.dtype))

    def describe(self):
        return '%s: %s%s' % (self.path, self.dtype.name, self.shape)


class _NoInputNode:
    """A signature node that feeds the graph nothing: the trace uses the value itself."""

    def flatten(self, value, out):
        pass

    def specs(self, out):
        pass


class ConstNode(_NoInputNode):
    """A Python constant (number, string, None): baked into the graph."""

    def __init__(self, path, value):
        self.path, self.value = path, value

    def check(self, value):
        if same_constant(value, self.value):
            return None
        return Miss(GuardKind.VALUE_MATCH, self.path, _describe(self.value), _describe(value),
                    (('argpath', self.path), self.path, self.value, value))

    def placeholder(self, inputs):
        return self.value

    def describe(self):
        return '%s == %r' % (self.path, self.value)


class ScalarInput:
    """What a ``ScalarNode`` gives the trace: a scalar graph input standing for a
    Python number (the tracer makes it a ``runtime.scalars.DynamicScalar``)."""

    def __init__(self, tensor, kind, path):
        self.tensor, self.type, self.path = tensor, kind, path


class ScalarTensors:
    """The graph input for a relaxed number: a scalar int64/float64 eager tensor, the
    last one reused while the number stays the same to the bit (a learning rate
    changes rarely; a tensor costs microseconds to make)."""

    __slots__ = ('dtype', 'last')

    def __init__(self, kind):
        self.dtype = np.float64 if kind is float else np.int64
        self.last = (None, None)   # (number, tensor), replaced as one (threads)

    def tensor(self, value):
        number, tensor = self.last
        if type(value) is type(number) and value == number and (
                type(value) is not float
                or math.copysign(1.0, value) == math.copysign(1.0, number)):
            return tensor   # equal and the same sign of zero (NaN is never equal): same bits
        # A 0-d NumPy array: TF's conversion caches scalars (NumPy's too) by value,
        # and -0.0 == 0.0.
        tensor = tf.constant(np.array(value, dtype=self.dtype))
        self.last = (value, tensor)
        return tensor


class ScalarNode:
    """A relaxed Python int/float argument: a scalar graph input, guarded by type and
    range (SCALAR_MATCH), not by value."""

    def __init__(self, path, kind):
        self.path, self.type = path, kind
        self.dtype = tf.int64 if kind is int else tf.float64

    def check(self, value):
        if type(value) is self.type and (dynamic_float_ok(value) if self.type is float
                                         else -SCALAR_INT_BOUND < value < SCALAR_INT_BOUND):
            return None
        return Miss(GuardKind.SCALAR_MATCH, self.path, self.type.__name__, _describe(value))

    def flatten(self, value, out):
        if self._tensors is None:
            self._tensors = ScalarTensors(self.type)
        out.append(self._tensors.tensor(value))

    _tensors = None

    def placeholder(self, inputs):
        return ScalarInput(next(inputs), self.type, self.path)

    def specs(self, out):
        out.append(tf.TensorSpec([], self.dtype))

    def describe(self):
        return '%s: dynamic %s' % (self.path, self.type.__name__)


def scalar_path_key(path):
    """The relaxation key of a Python number argument at ``path``."""
    return ('argpath', path)


class IdentityNode(_NoInputNode):
    """An object the graph captures as is (a variable, a layer, a function)."""

    def __init__(self, path, obj):
        self.path, self.obj = path, obj

    def check(self, value):
        if value is self.obj:
            return None
        return Miss(GuardKind.ID_MATCH, self.path, _describe(self.obj), _describe(value))

    def placeholder(self, inputs):
        return self.obj

    def describe(self):
        return '%s is %s' % (self.path, _describe(self.obj))


class FunctionNode(_NoInputNode):
    """A Python function passed as an argument (``lambda: model(batch)``, new each
    step): guarded by its code, not its identity; what its closure holds is
    read through ``__closure__[i].cell_contents`` sources of this argument."""

    def __init__(self, path, fn):
        self.path, self.fn = path, fn
        self.code = fn.__code__
        self.closure_size = len(fn.__closure__ or ())

    def check(self, value):
        if (type(value) is types.FunctionType and value.__code__ is self.code
                and len(value.__closure__ or ()) == self.closure_size):
            return None
        return Miss(GuardKind.CODE_MATCH, self.path, self.code.co_name, _describe(value))

    def placeholder(self, inputs):
        return self.fn

    def describe(self):
        return '%s: function with the code of %s' % (self.path, self.code.co_name)


class BoundMethodNode(_NoInputNode):
    """``obj.method`` passed as an argument (a new bound method every access):
    guarded by its function and its object's type; what the method reads from
    the object is guarded through ``m.__self__`` sources."""

    def __init__(self, path, method):
        self.path, self.method = path, method
        self.func, self.self_type = method.__func__, type(method.__self__)

    def check(self, value):
        if (type(value) is types.MethodType and value.__func__ is self.func
                and type(value.__self__) is self.self_type):
            return None
        return Miss(GuardKind.METHOD_MATCH, self.path, self.func.__qualname__, _describe(value))

    def placeholder(self, inputs):
        return self.method

    def describe(self):
        return '%s: a %s bound method' % (self.path, self.func.__qualname__)


class ObjectNode(_NoInputNode):
    """Any other object: only its type is guarded here; what the trace reads
    from it is guarded through ``AttrSource``/``ItemSource`` guards."""

    def __init__(self, path, obj):
        self.path, self.type, self.obj = path, type(obj), obj

    def check(self, value):
        if type(value) is self.type:
            return None
        return Miss(GuardKind.TYPE_MATCH, self.path, self.type.__name__, type(value).__name__)

    def placeholder(self, inputs):
        return self.obj

    def describe(self):
        return '%s: %s' % (self.path, self.type.__name__)


class SequenceNode:
    """A list or tuple argument: type and length guarded, items recursively."""

    def __init__(self, path, value, children):
        self.path, self.type, self.children = path, type(value), children

    def check(self, value):
        if type(value) is not self.type:
            return Miss(GuardKind.TYPE_MATCH, self.path, self.type.__name__, type(value).__name__)
        if len(value) != len(self.children):
            return Miss(GuardKind.LEN_MATCH, self.path, len(self.children), len(value))
        for child, item in zip(self.children, value):
            miss = child.check(item)
            if miss:
                return miss
        return None

    def flatten(self, value, out):
        for child, item in zip(self.children, value):
            child.flatten(item, out)

    def placeholder(self, inputs, memo):
        items = [_placeholder(child, inputs, memo) for child in self.children]
        built = items if self.type is list else _rebuild_tuple(self.type, items)
        return _one_object(self, built, memo)

    def specs(self, out):
        for child in self.children:
            child.specs(out)

    def describe(self):
        return '%s: %s of %d' % (self.path, self.type.__name__, len(self.children))


class DictNode:
    """A dict argument with constant keys: keys guarded (in order), values recursively."""

    def __init__(self, path, value, children):
        self.path, self.keys, self.children = path, list(value), children

    def check(self, value):
        if type(value) is not dict:
            return Miss(GuardKind.TYPE_MATCH, self.path, 'dict', type(value).__name__)
        if list(value) != self.keys:
            return Miss(GuardKind.KEYS_MATCH, self.path, self.keys, list(value))
        for key, child in zip(self.keys, self.children):
            miss = child.check(value[key])
            if miss:
                return miss
        return None

    def flatten(self, value, out):
        for key, child in zip(self.keys, self.children):
            child.flatten(value[key], out)

    def placeholder(self, inputs, memo):
        built = {key: _placeholder(child, inputs, memo)
                 for key, child in zip(self.keys, self.children)}
        return _one_object(self, built, memo)

    def specs(self, out):
        for child in self.children:
            child.specs(out)

    def describe(self):
        return '%s: dict%r' % (self.path, self.keys)


def _placeholder(node, inputs, memo):
    if isinstance(node, (SequenceNode, DictNode)):
        return node.placeholder(inputs, memo)
    return node.placeholder(inputs)


def _one_object(node, built, memo):
    """A container passed twice (``f(lst, lst)``) is one object in the trace too."""
    first = getattr(node, 'same_as', None) or node
    return memo.setdefault(id(first), built)


def _rebuild_tuple(tuple_type, items):
    if tuple_type is tuple:
        return tuple(items)
    return tuple_type(*items)  # namedtuple


class UnsupportedArgument(Exception):
    """An argument janus will not put behind a graph (the call runs imperatively):
    ``reason`` (a ``Reason``) and ``context`` (which argument, what it is)."""

    def __init__(self, reason, context):
        self.reason, self.context = reason, context
        super().__init__(context)


def _is_identity_object(value):
    """Objects a graph may capture by identity: TF/Keras state and code objects."""
    if isinstance(value, (tf.Variable, tf.Module, type, tf.DType, tf.TensorShape)):
        return True
    if callable(value) and not hasattr(value, '__dict__'):
        return True  # builtins and C functions
    module = getattr(type(value), '__module__', '') or ''
    if module.startswith(('tensorflow', 'keras', 'tf_keras')):
        return True
    return isinstance(value, (types.FunctionType, types.ModuleType, types.MethodType))


def node_for(value, path, shapes=None, seen=None, dynamic=frozenset()):
    """Builds the signature node for one argument value.

    ``shapes`` maps tensor paths to the relaxed shape seen so far, so a
    dimension that already varied is left unknown in the new spec.
    ``seen`` (id -> node, or None while building) finds containers passed
    twice (they stay one object in the trace) and cyclic ones (refused).
    """
    seen = {} if seen is None else seen
    kind = type(value)
    if kind is list or isinstance(value, tuple) or kind is dict:
        first = seen.get(id(value), False)
        if first is None:
            raise UnsupportedArgument(Reason.SELF_CONTAINING_ARGUMENT,
                                      '%s: a container that contains itself' % path)
        seen[id(value)] = None   # in progress
        node = _container_node(value, path, shapes, seen, dynamic)
        if first:
            node.same_as = first
        seen[id(value)] = first or node
        return node
    if isinstance(value, enum.Enum):
        return IdentityNode(path, value)   # Mode.TRAIN and Mode.EVAL are different graphs
    if kind is EagerTensor:
        shape = value.shape
        if shapes is not None and path in shapes:
            shape = relax(shapes[path], shape)
        return TensorNode(path, value.dtype, specialized(shape))
    if kind in PRIMITIVES:
        if (kind is float and dynamic_float_ok(value)
                or kind is int and -SCALAR_INT_BOUND < value < SCALAR_INT_BOUND) \
                and scalar_path_key(path) in dynamic:
            return ScalarNode(path, kind)
        return ConstNode(path, value)
    if isinstance(value, tf.Tensor):
        raise UnsupportedArgument(Reason.SYMBOLIC_ARGUMENT,
                                  '%s: a symbolic tensor (janus function called inside a graph)'
                                  % path)
    if type(value).__module__ == 'numpy':
        raise UnsupportedArgument(Reason.NUMPY_ARGUMENT,
                                  '%s: a NumPy value (%s); pass a tf.Tensor to get a graph'
                                  % (path, type(value).__name__))
    if (type(value) is types.MethodType and type(value.__func__) is types.FunctionType
            and not _is_library_function(value.__func__)):
        return BoundMethodNode(path, value)
    if (type(value) is types.FunctionType and value.__defaults__ is None
            and not value.__kwdefaults__ and not _is_library_function(value)):
        return FunctionNode(path, value)
    if _is_identity_object(value):
        return IdentityNode(path, value)
    return ObjectNode(path, value)


def _container_node(value, path, shapes, seen, dynamic):
    if type(value) is dict:
        if not all(type(k) in (str, int) for k in value):
            raise UnsupportedArgument(Reason.DICT_KEY_ARGUMENT,
                                      '%s: dict keys must be str or int constants' % path)
        children = [node_for(v, '%s[%r]' % (path, k), shapes, seen, dynamic)
                    for k, v in value.items()]
        return DictNode(path, value, children)
    children = [node_for(v, '%s[%d]' % (path, i), shapes, seen, dynamic)
                for i, v in enumerate(value)]
    return SequenceNode(path, value, children)


def _is_library_function(fn):
    module = fn.__module__ or ''
    return module.split('.')[0] in ('tensorflow', 'keras', 'tf_keras')


def specialized(shape):
    """``shape``, or only its rank when shape specialization is off (the ablation)."""
    if config.specialize_shapes or shape.rank is None:
        return shape
    return tf.TensorShape([None] * shape.rank)


def relax(old, new):
    """The most specific shape compatible with both (``(32,8)``+``(17,8)`` → ``(None,8)``)."""
    return tf.TensorShape(old).most_specific_compatible_shape(tf.TensorShape(new))


def record_shapes(value, path, shapes, depth=0):
    """Accumulates, per tensor path, the relaxed shape of every call seen."""
    if depth > 16:
        return   # deep or cyclic nesting: such arguments are refused by node_for
    if type(value) is EagerTensor:
        shapes[path] = relax(shapes[path], value.shape) if path in shapes else value.shape
    elif type(value) is list or isinstance(value, tuple):
        for i, v in enumerate(value):
            record_shapes(v, '%s[%d]' % (path, i), shapes, depth + 1)
    elif type(value) is dict:
        for k, v in value.items():
            record_shapes(v, '%s[%r]' % (path, k), shapes, depth + 1)


def _occurrences(values, target, depth=0):
    """How often the object ``target`` is among ``values`` (containers walked): a list
    passed twice (``f(a, a)``, ``f(a, [a])``) stays rebuilt, one object in the trace."""
    count = 0
    for value in values:
        if value is target:
            count += 1
        elif depth < 8 and (type(value) in (list, dict) or isinstance(value, tuple)):
            count += _occurrences(value.values() if type(value) is dict else value, target,
                                  depth + 1)
    return count


class Signature:
    """The argument signature of one graph: one node per bound parameter."""

    def __init__(self, arguments, shapes=None, dynamic=frozenset(), opaque=frozenset()):
        """``dynamic``: relaxation keys (``scalar_path_key``) of number arguments that
        become graph inputs (``ScalarNode``) instead of constants; ``opaque``: names
        of list arguments passed as the objects themselves (``ObjectNode``: type
        guarded, what the trace reads guarded through their ``ArgSource``), not
        rebuilt around their items (a history list that grows every call)."""
        self.names = list(arguments)
        self.opaque = frozenset(n for n in opaque if type(arguments.get(n)) is list
                                and _occurrences(arguments.values(), arguments[n]) == 1)
        seen = {}
        self.nodes = [ObjectNode(n, arguments[n]) if n in self.opaque else
                      node_for(arguments[n], n, shapes, seen, dynamic) for n in self.names]
        # Every argument a tensor (the common training step): the replay path reads
        # all of them at once and compares whole lists (one C-level compare each).
        self._tensors_only = all(type(node) is TensorNode for node in self.nodes)
        if self._tensors_only:
            self._read_all = _item_reader(self.names)
            self._types = [EagerTensor] * len(self.nodes)
            self._dtype_enums = [node._dtype_enum for node in self.nodes]
            self._all_dims = [node._dims for node in self.nodes]

    def check(self, arguments):
        if self._tensors_only and self._tensor_arguments_hold(arguments):
            return None
        for node, name in zip(self.nodes, self.names):
            miss = node.check(arguments[name])
            if miss:
                return miss
        return None

    def _tensor_arguments_hold(self, arguments):
        values = self._read_all(arguments)
        if list(map(type, values)) != self._types:
            return False   # the node-by-node check names the miss
        if [value._datatype_enum() for value in values] != self._dtype_enums:
            return False
        dims = list(map(_tensor_dims, values))
        # Equal dims hold at once; a relaxed (None) dimension needs the per-axis rule.
        return dims == self._all_dims or all(map(_dims_compatible, self._all_dims, dims))

    def flatten(self, arguments):
        if self._tensors_only:
            return list(self._read_all(arguments))
        out = []
        for node, name in zip(self.nodes, self.names):
            node.flatten(arguments[name], out)
        return out

    def constant_values(self, arguments):
        """(path, constant traced, value now) for every Python constant in the signature
        (containers walked while their structure still matches)."""
        found = []

        def walk(node, value):
            if type(node) is ConstNode:
                found.append((node.path, node.value, value))
            elif isinstance(node, SequenceNode) and isinstance(value, (list, tuple)) \
                    and len(value) == len(node.children):
                for child, item in zip(node.children, value):
                    walk(child, item)
            elif isinstance(node, DictNode) and type(value) is dict \
                    and list(value) == node.keys:
                for key, child in zip(node.keys, node.children):
                    walk(child, value[key])
        for node, name in zip(self.nodes, self.names):
            if name in arguments:
                walk(node, arguments[name])
        return found

    def input_specs(self):
        out = []
        for node in self.nodes:
            node.specs(out)
        return out

    def has_relaxed_dims(self):
        """Whether a tensor input has an unknown rank or a None dimension."""
        return any(spec.shape.rank is None or None in spec.shape.as_list()
                   for spec in self.input_specs())

    def placeholders(self, inputs):
        inputs, memo = iter(inputs), {}
        return {name: _placeholder(node, inputs, memo)
                for node, name in zip(self.nodes, self.names)}

    def describe(self):
        lines = []

        def walk(node):
            if isinstance(node, (SequenceNode, DictNode)):
                lines.append(node.describe())
                for child in node.children:
                    walk(child)
            else:
                lines.append(node.describe())
        for node in self.nodes:
            walk(node)
        return lines


def record_shapes_of(arguments, shapes):
    for name, value in arguments.items():
        record_shapes(value, name, shapes)
