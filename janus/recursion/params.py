"""The parameters of a recursive function over a structure: what each one is given and
how it becomes the graph function's inputs.

Needs nothing traced to sort a call's arguments (``arguments``, ``param_of``); a
``TraceContext`` and the build's ``schema.Schema`` while its body is traced
(``recursion/recursion.py``).  A node parameter is an int64 index into the encoded
table, a tensor or a dynamic number is an input of its own, a Python constant and an
object every recursive call passes on unchanged (a variable, a layer, a state object)
are no input: the body reads them as they are.
"""
import dataclasses
import enum
import inspect
import typing

import tensorflow as tf

from janus import guards, pytypes
from janus.config import config
from janus.recursion import schema, structures
from janus.values import protocol, scalars

MAX_VARIANTS = 32   # node classes beyond which a body is traced once for all of them


class ParamKind(enum.Enum):
    """What a parameter of a recursive function is given."""
    NODE = 'node'       # a node of the structure (an index into its table)
    TENSOR = 'tensor'
    SCALAR = 'scalar'   # a Python number the trace relaxed (a dynamic number)
    CONST = 'const'     # a Python constant, passed through the recursion unchanged
    OBJECT = 'object'   # an object every recursive call passes on unchanged (a state object)


_INPUTS = (ParamKind.NODE, ParamKind.TENSOR, ParamKind.SCALAR)


@dataclasses.dataclass(frozen=True, eq=False)
class Param:
    """One parameter: its kind and what else decides its calls (a tensor's
    ``TensorSpec``, a number's Python type, the constant, the object)."""
    kind: ParamKind
    value: typing.Any = None

    @property
    def is_input(self):
        """Whether the graph function takes it as an input."""
        return self.kind in _INPUTS

    def key(self):
        """What of it decides which build a call runs (``recursion.call``)."""
        if self.kind is ParamKind.OBJECT:
            return (self.kind, id(self.value))
        if self.kind is ParamKind.CONST:
            return (self.kind, type(self.value), repr(self.value))
        if self.kind is ParamKind.TENSOR:
            return (self.kind, self.value.dtype, tuple(self.value.shape.as_list())
                    if self.value.shape.rank is not None else None)
        return (self.kind, self.value)

    def spec(self):
        """The graph input's spec (an input parameter's)."""
        if self.kind is ParamKind.NODE:
            return tf.TensorSpec([], tf.int64)
        if self.kind is ParamKind.TENSOR:
            return self.value
        return tf.TensorSpec([], scalars.DTYPES[self.value])


def arguments(fn, args, kwargs, receiver):
    """(the call's arguments in parameter order, the method's own object or None)."""
    signature = inspect.signature(fn)
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in signature.parameters.values()):
        structures.refuse('a recursive function with *args or **kwargs (%s)' % fn.__qualname__)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    values = list(bound.arguments.values())
    if receiver:
        return values[1:], values[0]
    return values, None


def param_of(value):
    """The parameter a call's argument ``value`` makes."""
    if schema.is_node_value(value) or structures.is_node(value):
        return Param(ParamKind.NODE)
    if isinstance(value, tf.Tensor):
        return Param(ParamKind.TENSOR, tf.TensorSpec(value.shape, value.dtype))
    number = structures.dynamic_type(value)
    if number is not None:
        return Param(ParamKind.SCALAR, number)
    if pytypes.is_constant(value):
        return Param(ParamKind.CONST, value)
    if isinstance(value, (tf.Variable, tf.Module)):
        return Param(ParamKind.OBJECT, value)   # a variable or a layer every call passes on
    structures.refuse('a recursive call given a %s (janus passes nodes, tensors and Python '
                      'constants)' % protocol.type_name(value))


class Parameters:
    """A build's parameters, and what its recursive calls were seen to pass them."""

    def __init__(self, params, values, label):
        self.params, self.label = list(params), label
        # the first call's arguments: an object every recursive call passes on is kept
        self.first_values = [v if p.kind is ParamKind.NODE else None
                             for p, v in zip(params, values)]
        self.maybe_none = set()    # node parameters a recursive call passes None or maybe-None
        self.varied = set()        # node positions a recursive call passed another node
        self.node_values = {}      # position -> the NodeRef the body was given there

    def __iter__(self):
        return iter(self.params)

    def kinds(self):
        return [param.kind for param in self.params]

    def dispatch_position(self, node_schema):
        """The node parameter the body is specialized on: the only one (with
        ``config.recursion_specializes``), else None (nodes of unknown class)."""
        positions = [i for i, param in enumerate(self.params) if param.kind is ParamKind.NODE]
        if len(positions) != 1 or not config.recursion_specializes \
                or len(node_schema.types) > MAX_VARIANTS:
            return None
        return positions[0]

    def input_of(self, position):
        """The flat input index of parameter ``position``."""
        return sum(1 for param in self.params[:position] if param.is_input)

    def specs(self):
        """The graph inputs' specs, one per input parameter."""
        return [param.spec() for param in self.params if param.is_input]

    def shared_specs(self):
        """The graph inputs besides the node (tensors, numbers) a call passes: a
        recursive call must pass them on unchanged to run level by level."""
        return [param.spec() for param in self.params
                if param.kind in (ParamKind.TENSOR, ParamKind.SCALAR)]

    def values_of(self, flat, position, value, node_schema, table):
        """The body's arguments from its flat inputs (``flat``, an iterator: the
        threaded numbers follow), the parameter at ``position`` given ``value``
        (None: every node parameter a NodeRef of unknown class)."""
        values = []
        for index, param in enumerate(self.params):
            if param.kind is ParamKind.NODE:
                given = next(flat)
                values.append(value if index == position else structures.NodeRef(
                    given, node_schema, table, maybe_none=index in self.maybe_none))
            elif param.kind is ParamKind.TENSOR:
                values.append(next(flat))
            elif param.kind is ParamKind.SCALAR:
                values.append(scalars.DynamicScalar(next(flat), param.value))
            else:
                values.append(param.value)
        return values

    def passed_on(self, ctx):
        """Node parameters every recursive call passes on unchanged (a state object
        given along: ``rec(node.left, st)``) become objects of the body, read and
        written as outside objects; True when one did (trace again)."""
        changed = False
        for position, param in enumerate(self.params):
            if param.kind is ParamKind.NODE and position not in self.varied \
                    and self.first_values[position] is not None:
                obj = self.first_values[position]
                if ctx.provenance.source_of(obj) is None:
                    continue
                self.params[position] = Param(ParamKind.OBJECT, obj)
                changed = True
        return changed

    def passed(self, position, param, value, node_schema):
        """The graph inputs a recursive call's argument ``value`` gives the parameter
        ``param`` at ``position`` (none for a constant or an object passed on)."""
        if param.kind is ParamKind.NODE:
            return self._passed_node(position, value, node_schema)
        if param.kind is ParamKind.TENSOR:
            tensor = tf.convert_to_tensor(value) if structures.dynamic_type(value) is None \
                else None
            if tensor is None or tensor.dtype != param.value.dtype \
                    or not param.value.shape.is_compatible_with(tensor.shape):
                structures.refuse('a recursive call of %s given another kind of value (%s) '
                                  'where a %s was passed' % (self.label, value, param.value))
            return [tensor]
        if param.kind is ParamKind.SCALAR:
            if structures.number_type(value) is param.value:
                return [structures.number_tensor(value, param.value)]
            structures.refuse('a recursive call of %s given a %s where a %s was passed'
                              % (self.label, protocol.type_name(value), param.value.__name__))
        if param.kind is ParamKind.OBJECT:
            if value is not param.value:
                structures.refuse('a recursive call of %s given another object where the '
                                  'first call passed one on' % self.label)
            return []
        if not (pytypes.is_constant(value) and guards.same_constant(value, param.value)):
            structures.refuse('a recursive call of %s given %r where the first call passed %r '
                              '(janus passes constants through a recursion unchanged)'
                              % (self.label, value, param.value))
        return []

    def _passed_node(self, position, value, node_schema):
        node = structures.as_node(value)   # None: given None or another value
        if node is not None and node.numbers:
            structures.refuse('a recursive call of %s given a value that may be a number, '
                              'with several node parameters' % self.label)
        if value is not self.node_values.get(position):
            self.varied.add(position)   # a node of the structure, not passed on
        if value is None or (node is not None and node.maybe_none):
            if position not in self.maybe_none:
                self.maybe_none.add(position)
                node_schema.stale = True   # the parameter may be None: trace again
            if value is None:
                return [tf.constant(-1, tf.int64)]
        if node is None:
            structures.refuse('a recursive call of %s given a %s where a node was passed'
                              % (self.label, protocol.type_name(value)))
        return [node.index]
