"""The argument signature: guards on a call's arguments, and the graph inputs they make.

Needs ``guards`` (the guard kinds, ``Miss``, the constant checks).  A
``Signature`` is a tree mirroring the call's arguments (its nodes from
``node_for``): each node checks type, dtype, shape and Python values of one
argument and flattens its tensors into graph inputs; ``placeholders`` rebuilds
the arguments from a traced graph's inputs.  A check returns ``None`` when it
holds, else a ``guards.Miss`` naming the guard kind and the failing path.
"""
import enum
import math
import operator
import types

import numpy as np
import tensorflow as tf
from tensorflow.python.data.ops import iterator_ops

from janus.config import config
from janus.guards import (PRIMITIVES, EagerTensor, GuardKind, Miss, describe_value,
                          dims_compatible, same_constant, scalar_ok, tensor_dims)
from janus.reasons import Reason
from janus.graph import effects
from janus.values import arrays


def _item_reader(names):
    """``arguments -> tuple of arguments[name]`` for ``names``, in one C call."""
    if not names:
        return lambda arguments: ()
    if len(names) == 1:
        name = names[0]
        return lambda arguments: (arguments[name],)
    return operator.itemgetter(*names)


class TensorNode:
    """An eager tensor argument: becomes one graph input with this spec."""

    def __init__(self, path, dtype, shape):
        self.path, self.dtype, self.shape = path, dtype, shape
        # The replay path checks these plain values (TensorShape methods cost ~1 us each).
        self._dtype_enum = dtype.as_datatype_enum
        self._dims = tuple(shape.as_list()) if shape.rank is not None else None

    def check(self, value):
        if type(value) is not EagerTensor:
            return Miss(GuardKind.TYPE_MATCH, self.path, 'tensor', describe_value(value))
        if value._datatype_enum() != self._dtype_enum:
            return Miss(GuardKind.DTYPE_MATCH, self.path, self.dtype.name, value.dtype.name)
        if not dims_compatible(self._dims, value._shape_tuple()):
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


class ArrayNode:
    """A NumPy ndarray argument (numbers or bools): one graph input fed with a copy of
    its values on every call, guarded by type, dtype and shape (ARRAY_MATCH: its rank,
    and every dimension the spec knows; one that differed between calls is relaxed to
    None, as for tensors); the trace sees an ``arrays.ArrayStandIn``."""

    def __init__(self, path, value, shape=None):
        self.path, self.dtype = path, value.dtype
        self.spec_shape = specialized(tf.TensorShape(value.shape if shape is None else shape))
        self.shape = tuple(self.spec_shape.as_list())   # None: any size there
        self.tf_dtype = tf.as_dtype(value.dtype)

    def check(self, value):
        if type(value) is np.ndarray and value.dtype == self.dtype and (
                value.shape == self.shape or dims_compatible(self.shape, value.shape)):
            return None
        return Miss(GuardKind.ARRAY_MATCH, self.path, describe_value((self.dtype, self.shape)),
                    describe_value(value))

    def flatten(self, value, out):
        out.append(arrays.feed(value))

    def placeholder(self, inputs, memo):
        stand_in = arrays.ArrayStandIn(next(inputs), self.dtype, self.shape)
        memo[id(self)] = stand_in
        return stand_in

    def specs(self, out):
        out.append(tf.TensorSpec(self.spec_shape, self.tf_dtype))

    def describe(self):
        return '%s: NumPy array %s%s' % (self.path, self.dtype, list(self.shape))


class _NoInputNode:
    """A signature node that feeds the graph nothing: the trace uses the value itself."""

    def flatten(self, value, out):
        pass

    def specs(self, out):
        pass


class DatasetNode:
    """A ``tf.data.Dataset`` argument: one variant input (the dataset's own graph, fed
    per call, so a new dataset of the same kind reuses the graph), guarded by its type
    spec (DATASET_MATCH: element structure, dtypes and shapes); the trace sees a graph
    dataset over that input (``tf.data.experimental.from_variant``)."""

    def __init__(self, path, value):
        self.path, self.spec = path, value._type_spec

    def check(self, value):
        if isinstance(value, tf.data.Dataset) and value._type_spec == self.spec \
                and not effects.dataset_keeps_state(value):
            return None
        return Miss(GuardKind.DATASET_MATCH, self.path, 'dataset %s' % (self.spec.element_spec,),
                    describe_value(value))

    def flatten(self, value, out):
        out.append(value._variant_tensor)

    def placeholder(self, inputs):
        return tf.data.experimental.from_variant(next(inputs), self.spec.element_spec)

    def specs(self, out):
        out.append(tf.TensorSpec([], tf.variant))

    def describe(self):
        return '%s: dataset of %s' % (self.path, self.spec.element_spec)


class IteratorNode:
    """A ``tf.data`` iterator argument (``iter(ds)``, kept across steps): its resource
    handle is a graph input, so the graph pulls from the caller's own iterator
    (another iterator of the same element spec reuses the graph: ITERATOR_MATCH).
    A pull changes it for good: ``graphgen/tracer.py`` lets only the test that the
    pull found an element run after it (when it found none, nothing changed)."""

    def __init__(self, path, value):
        self.path, self.spec = path, value._type_spec

    def check(self, value):
        if type(value) is iterator_ops.OwnedIterator and value._type_spec == self.spec:
            return None
        return Miss(GuardKind.ITERATOR_MATCH, self.path,
                    'iterator of %s' % (self.spec._element_spec,), describe_value(value))

    def flatten(self, value, out):
        out.append(value._iterator_resource)

    def placeholder(self, inputs):
        return self.spec._from_components([next(inputs)])

    def specs(self, out):
        out.append(tf.TensorSpec([], tf.resource))

    def describe(self):
        return "%s: iterator of %s" % (self.path, self.spec._element_spec)


class CompositeNode:
    """A ``tf.RaggedTensor`` or ``tf.SparseTensor`` argument: its component tensors are
    graph inputs, guarded by its type spec with relaxed dimensions (COMPOSITE_MATCH:
    ragged rank, dtypes); the trace sees the composite rebuilt over them."""

    def __init__(self, path, value, shape):
        self.path, self.kind = path, type(value)
        if self.kind is tf.RaggedTensor:
            self.spec = tf.RaggedTensorSpec(shape, value.dtype, value.ragged_rank,
                                            value.row_splits.dtype)
        else:
            self.spec = tf.SparseTensorSpec(shape, value.dtype)
        self._components = self.spec._component_specs

    def check(self, value):
        if type(value) is self.kind and self.spec.is_compatible_with(value._type_spec):
            return None
        return Miss(GuardKind.COMPOSITE_MATCH, self.path, str(self.spec), describe_value(value))

    def flatten(self, value, out):
        out.extend(self.spec._to_components(value))

    def placeholder(self, inputs):
        return self.spec._from_components([next(inputs) for _ in self._components])

    def specs(self, out):
        out.extend(self._components)

    def describe(self):
        return '%s: %s' % (self.path, self.spec)


class ConstNode(_NoInputNode):
    """A Python constant (number, string, None): baked into the graph."""

    def __init__(self, path, value):
        self.path, self.value = path, value

    def check(self, value):
        if same_constant(value, self.value):
            return None
        return Miss(GuardKind.VALUE_MATCH, self.path, describe_value(self.value), describe_value(value),
                    (('argpath', self.path), self.path, self.value, value))

    def placeholder(self, inputs):
        return self.value

    def describe(self):
        return '%s == %r' % (self.path, self.value)


class ScalarInput:
    """What a ``ScalarNode`` gives the trace: a scalar graph input standing for a
    Python number (the tracer makes it a ``values.scalars.DynamicScalar``)."""

    def __init__(self, tensor, kind, path):
        self.tensor, self.type, self.path = tensor, kind, path


class ScalarTensors:
    """The graph input for a relaxed number: a scalar int64/float64 eager tensor, the
    last one reused while the number stays the same to the bit (a learning rate
    changes rarely; a tensor costs microseconds to make)."""

    __slots__ = ('dtype', 'last')

    def __init__(self, kind):
        self.dtype = {float: np.float64, int: np.int64, bool: np.bool_}[kind]
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
    """A relaxed Python int/float/bool argument: a scalar graph input, guarded by type
    and range (SCALAR_MATCH), not by value."""

    def __init__(self, path, kind):
        self.path, self.type = path, kind
        self.dtype = {float: tf.float64, int: tf.int64, bool: tf.bool}[kind]

    def check(self, value):
        if type(value) is self.type and scalar_ok(value):
            return None
        return Miss(GuardKind.SCALAR_MATCH, self.path, self.type.__name__, describe_value(value))

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
        return Miss(GuardKind.ID_MATCH, self.path, describe_value(self.obj), describe_value(value))

    def placeholder(self, inputs):
        return self.obj

    def describe(self):
        return '%s is %s' % (self.path, describe_value(self.obj))


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
        return Miss(GuardKind.CODE_MATCH, self.path, self.code.co_name, describe_value(value))

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
        return Miss(GuardKind.METHOD_MATCH, self.path, self.func.__qualname__, describe_value(value))

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


class SameArrayNode:
    """An ndarray passed again (``f(a, a)``): the stand-in of its first occurrence, one
    object in the trace too; checked like it (ALIAS_MATCH says it is the same one)."""

    def __init__(self, path, first):
        self.path, self.first = path, first

    def check(self, value):
        miss = self.first.check(value)
        return miss._replace(where=self.path) if miss else None

    def flatten(self, value, out):
        pass

    def placeholder(self, inputs, memo):
        return memo[id(self.first)]

    def specs(self, out):
        pass

    def describe(self):
        return '%s: the NumPy array %s' % (self.path, self.first.path)


def _placeholder(node, inputs, memo):
    if isinstance(node, (SequenceNode, DictNode, ArrayNode, SameArrayNode)):
        return node.placeholder(inputs, memo)
    return node.placeholder(inputs)


def _one_object(node, built, memo):
    """A container passed twice (``f(lst, lst)``) is one object in the trace too."""
    first = getattr(node, 'same_as', None) or node
    return memo.setdefault(id(first), built)


def _rebuild_tuple(tuple_type, items):
    """The trace's copy of a tuple argument: built as ``tuple.__new__`` builds it,
    so no ``__new__``/``__init__`` of a namedtuple subclass of the user's runs
    (it would run at trace time, and could change the items or print)."""
    if tuple_type is tuple:
        return tuple(items)
    return tuple.__new__(tuple_type, items)  # namedtuple


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
        return _shared_container_node(value, path, shapes, seen, dynamic)
    if isinstance(value, enum.Enum):
        return IdentityNode(path, value)   # Mode.TRAIN and Mode.EVAL are different graphs
    if kind is EagerTensor:
        return TensorNode(path, value.dtype, _relaxed_shape(value, path, shapes))
    if kind in PRIMITIVES:
        if kind in (float, int, bool) and scalar_ok(value) and scalar_path_key(path) in dynamic:
            return ScalarNode(path, kind)
        return ConstNode(path, value)
    if kind in (tf.RaggedTensor, tf.SparseTensor) and _eager_composite(value):
        return CompositeNode(path, value, _relaxed_shape(value, path, shapes))
    if isinstance(value, tf.Tensor):
        raise UnsupportedArgument(Reason.SYMBOLIC_ARGUMENT,
                                  '%s: a symbolic tensor (janus function called inside a graph)'
                                  % path)
    if arrays.is_numeric_array(value):
        return _array_node(value, path, shapes, seen)
    if kind is range:
        return ConstNode(path, value)   # immutable: guarded by start, stop and step
    if isinstance(value, (np.number, np.bool_)) and not isinstance(value, np.complexfloating):
        return ConstNode(path, value)   # immutable, guarded by value (its type included)
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
    if isinstance(value, tf.data.Dataset) and not effects.dataset_keeps_state(value):
        return DatasetNode(path, value)   # one that does is the object itself (IdentityNode)
    if type(value) is iterator_ops.OwnedIterator:
        return IteratorNode(path, value)
    if _is_identity_object(value):
        return IdentityNode(path, value)
    return ObjectNode(path, value)


def _shared_container_node(value, path, shapes, seen, dynamic):
    """A list, tuple or dict argument's node; one passed again is marked the same
    object as its first (``same_as``), one that contains itself is refused."""
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


def _relaxed_shape(value, path, shapes):
    """The spec's shape of a tensor argument: its shape widened by those seen so far at
    ``path`` (a dimension that varied is unknown), through ``specialized``."""
    shape = value.shape
    if shapes is not None and path in shapes:
        shape = widen_shape(shapes[path], shape)
    return specialized(shape)


def _array_node(value, path, shapes, seen):
    """A NumPy array argument's node; one passed again is ``SameArrayNode`` of its first."""
    first = seen.get(id(value))
    if first is not None:
        return SameArrayNode(path, first)
    shape = None if shapes is None else shapes.get(array_shape_key(path, value))
    node = seen[id(value)] = ArrayNode(path, value, shape)
    return node


def _eager_composite(value):
    return all(type(c) is EagerTensor for c in tf.nest.flatten(value, expand_composites=True))


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


def widen_shape(old, new):
    """The most specific shape compatible with both (``(32,8)``+``(17,8)`` → ``(None,8)``)."""
    return tf.TensorShape(old).most_specific_compatible_shape(tf.TensorShape(new))


def array_shape_key(path, array):
    """Where ``shapes`` keeps the relaxed shape of NumPy arrays of ``array``'s rank at
    ``path``: one per rank (a rank change is a miss, never relaxed)."""
    return ('array', path, array.ndim)


def record_shapes(value, path, shapes, depth=0):
    """Accumulates, per tensor path (per NumPy array path and rank), the relaxed shape
    of every call seen."""
    if depth > 16:
        return   # deep or cyclic nesting: such arguments are refused by node_for
    if type(value) is EagerTensor or type(value) in (tf.RaggedTensor, tf.SparseTensor):
        shapes[path] = widen_shape(shapes[path], value.shape) if path in shapes else value.shape
    elif arrays.is_numeric_array(value):
        key = array_shape_key(path, value)
        shapes[key] = widen_shape(shapes[key], value.shape) if key in shapes \
            else tf.TensorShape(value.shape)
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
        self.opaque = frozenset(n for n in opaque if type(arguments.get(n)) in (list, tuple)
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
        dims = list(map(tensor_dims, values))
        # Equal dims hold at once; a relaxed (None) dimension needs the per-axis rule.
        return dims == self._all_dims or all(map(dims_compatible, self._all_dims, dims))

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

    def has_unknown_dims(self):
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
