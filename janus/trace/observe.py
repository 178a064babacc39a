"""Observations of Python values: every way converted code looks at a value.

Needs a ``TraceContext`` (``tracing.current()``).  The converter routes
truthiness, ``in``, comparisons, arithmetic operators, unpacking, ``*``/``**``
spreading and f-strings here (``converters/observations.py``).  The rule is
default-deny: when an operand came from outside the call (it has a source),
each operator either records the guard that keeps what it observed valid on
a later call, or refuses (``Unsupported``: the call runs imperatively).  User
code that Python would run behind an operator (a class's ``__add__``,
``__rmul__``, ``__iadd__``) is converted and inlined like any user callee;
user ``__bool__``/``__eq__``/``__iter__``/``__format__`` and friends are
refused.  Values the call made itself are plain Python.  Text that needs the
run's values is a ``LazyText`` (``lazy_text.py``).
"""
import functools
import inspect
import operator
import sys
import types

import tensorflow as tf

from janus.reasons import Reason
from janus import guards, pytypes
from janus.config import config
from janus.guards import GuardKind
from janus.graph import fallible
from janus.library import whitelist
from janus.values import protocol, scalar_ops, scalars
from janus.values.scalars import DynamicScalar
from janus.values.protocol import NOT_MODELLED, StandIn
from janus.trace.lazy_text import LazyText, checked_text, holds_tensor, needs_run_values
from janus.trace.trace_context import Unsupported
from janus.library.whitelist import refuse_opaque
from janus.trace.tracing import current, refuse_unmerged

_BINARY = {
    'Add': ('__add__', '__radd__', '__iadd__', operator.add, '+'),
    'Sub': ('__sub__', '__rsub__', '__isub__', operator.sub, '-'),
    'Mult': ('__mul__', '__rmul__', '__imul__', operator.mul, '*'),
    'MatMult': ('__matmul__', '__rmatmul__', '__imatmul__', operator.matmul, '@'),
    'Div': ('__truediv__', '__rtruediv__', '__itruediv__', operator.truediv, '/'),
    'FloorDiv': ('__floordiv__', '__rfloordiv__', '__ifloordiv__', operator.floordiv, '//'),
    'Mod': ('__mod__', '__rmod__', '__imod__', operator.mod, '%'),
    'Pow': ('__pow__', '__rpow__', '__ipow__', operator.pow, '**'),
    'LShift': ('__lshift__', '__rlshift__', '__ilshift__', operator.lshift, '<<'),
    'RShift': ('__rshift__', '__rrshift__', '__irshift__', operator.rshift, '>>'),
    'BitOr': ('__or__', '__ror__', '__ior__', operator.or_, '|'),
    'BitXor': ('__xor__', '__rxor__', '__ixor__', operator.xor, '^'),
    'BitAnd': ('__and__', '__rand__', '__iand__', operator.and_, '&'),
}
_INPLACE = {name: getattr(operator, 'i' + fn.__name__.strip('_'))
            for name, (_, _, _, fn, _) in _BINARY.items()}
_UNARY = {'USub': ('__neg__', operator.neg), 'UAdd': ('__pos__', operator.pos),
          'Invert': ('__invert__', operator.invert)}
_COMPARE = {
    'Eq': ('__eq__', operator.eq), 'NotEq': ('__ne__', operator.ne),
    'Lt': ('__lt__', operator.lt), 'LtE': ('__le__', operator.le),
    'Gt': ('__gt__', operator.gt), 'GtE': ('__ge__', operator.ge),
    'Is': (None, operator.is_), 'IsNot': (None, operator.is_not),
    'In': ('__contains__', None), 'NotIn': ('__contains__', None),
}
# A comparison's special method tried on the right operand (``a < b``: ``b.__gt__(a)``).
_REFLECTED = {'__lt__': '__gt__', '__le__': '__ge__', '__gt__': '__lt__', '__ge__': '__le__',
              '__eq__': '__eq__', '__ne__': '__ne__'}


# -- what a value is, for the rules below -------------------------------------

def _is_graph_value(value):
    return isinstance(value, (tf.Tensor, tf.Variable))


def user_dunder(value, name):
    """The user's own Python function behind ``type(value).name``, or None."""
    if name is None or type(value) in guards.PRIMITIVES or _is_graph_value(value) \
            or isinstance(value, StandIn):   # janus's own methods, never the user's
        return None
    try:
        found = inspect.getattr_static(type(value), name)
    except AttributeError:
        return None
    if isinstance(found, (staticmethod, classmethod)):
        found = found.__func__
    if isinstance(found, types.FunctionType) and not whitelist.is_library(found) \
            and not _is_standard_library(found):
        return found
    return None


def _is_standard_library(fn):
    """Special methods from Python's own modules (an Enum's ``__hash__``)."""
    module = (getattr(fn, '__module__', None) or '').split('.')[0]
    return module in sys.stdlib_module_names and module != '__main__'


# Special methods Python never calls behind an operator or a builtin on its own.
_CONSTRUCTION = frozenset(('__init__', '__new__', '__post_init__', '__del__', '__init_subclass__',
                           '__class_getitem__', '__getstate__', '__setstate__', '__reduce__',
                           '__reduce_ex__', '__copy__', '__deepcopy__', '__set_name__'))
_dunder_cache = {}


def has_user_dunders(value):
    """Whether a builtin given ``value`` (``len``, ``str``, ``sum``, ``sorted``...) could
    run the user's own special methods, unconverted."""
    kind = type(value)
    if kind in guards.PRIMITIVES or _is_graph_value(value):
        return False
    found = _dunder_cache.get(kind)
    if found is None:
        found = _dunder_cache[kind] = any(
            name.startswith('__') and name.endswith('__') and name not in _CONSTRUCTION
            and user_dunder(value, name) is not None
            for klass in kind.__mro__ if klass is not object for name in vars(klass))
    return found


def refuse_user_dunders(callee, args):
    """Default-deny for builtins: no argument (or item of one) may bring user code.
    ``isinstance``/``issubclass`` look at types only (not ``__call__``, ``__eq__``...)."""
    if callee in (isinstance, issubclass):
        return
    for value in args:
        items = value if type(value) in (list, tuple) else (value,)
        for item in items:
            if has_user_dunders(item):
                raise Unsupported(Reason.SPECIAL_METHODS,
                                  'janus does not convert %s() of a %s, whose class defines '
                                  'its own special methods' % (getattr(callee, '__name__', callee),
                                                               type(item).__name__))


def _refuse_user_code(value, names, what):
    for name in names:
        if user_dunder(value, name) is not None:
            raise Unsupported(Reason.SPECIAL_METHODS,
                              'janus does not convert %s of a %s, whose class defines %s'
                              % (what, type(value).__name__, name))


def _outside_container(ctx, value):
    """An outside container janus models (``janus/pytypes.py``): list, tuple, dict,
    deque, set and their modelled subclasses."""
    if ctx.provenance.source_of(value) is None:
        return False
    model = pytypes.model_of(value)
    return model is not None and model.container


def _changed(ctx, value):
    """Whether the call changed this outside container (``append``, ``x[0] = v``):
    then observations look at its guarded contents, changes applied."""
    return ctx.heap.differs(value)


def _now(ctx, value):
    """A changed outside container as this point of the call sees it, for order-free
    observations (truth, ``len``, ``in``, comparisons)."""
    return ctx.set_contents(value) if pytypes.is_set(value) else ctx.contents(value)


def _plain(ctx, value):
    """``value`` as plain Python may use it: an outside container becomes its
    guarded contents (tensors re-read every run; an outside set refuses)."""
    if isinstance(value, LazyText):
        value.refuse()
    if _outside_container(ctx, value):
        return ctx.contents(value)
    return value


def _refuse_opaque_text(ctx, value, depth=0):
    """Text of an outside object janus does not model (a Counter, a user object whose
    text is its address) would be frozen into the graph: refused."""
    if depth > 8:
        return
    model = pytypes.model_of(value)
    if ctx.provenance.source_of(value) is not None and not whitelist.is_library_object(value) \
            and (model is None or model.container):
        raise Unsupported(Reason.FORMATTING,
                          'janus does not convert formatting a %s from outside the call '
                          '(its text would be frozen into the graph)' % type(value).__name__)
    elif type(value) in (list, tuple):
        for item in value:
            _refuse_opaque_text(ctx, item, depth + 1)
    elif type(value) is dict:
        for item in value.values():
            _refuse_opaque_text(ctx, item, depth + 1)


def plain_deep(ctx, value, depth=0):
    """``_plain`` inside containers the call made too (``f"{(self.names, 1)}"``), for
    observations that read everything (formatting); identities are not kept."""
    value = _plain(ctx, value)
    if depth > 8 or ctx.provenance.source_of(value) is not None:
        return value
    if type(value) in (list, tuple):
        return ctx.provenance.made(type(value)(plain_deep(ctx, v, depth + 1) for v in value))
    if type(value) is dict:
        return ctx.provenance.made({k: plain_deep(ctx, v, depth + 1) for k, v in value.items()})
    return value


# -- truthiness ---------------------------------------------------------------

def truth(value):
    """``bool(value)`` of a Python value at a test: guarded when it came from outside."""
    ctx = current()
    if isinstance(value, StandIn):   # text, an array, a node, a dynamic number...
        found = value.trace_truth()
        if found is not NOT_MODELLED:
            return found
    _refuse_user_code(value, ('__bool__', '__len__'), 'the truth value')
    source = ctx.provenance.source_of(value)
    if source is None:
        ctx.provenance.of(value, 'a truth test')
        return bool(value)
    if _outside_container(ctx, value):
        if _changed(ctx, value):
            return bool(_now(ctx, value))   # its length is guarded by contents
        outcome = bool(value)
        ctx.guards.add(GuardKind.TRUTH_MATCH, source, (type(value), outcome))
        return outcome
    refuse_opaque(value, ('__bool__', '__len__'), 'the truth value of')
    return bool(value)


def size_of(callee, value):
    """``len(x)`` / ``bool(x)`` of an outside container: LEN_MATCH / TRUTH_MATCH."""
    if callee is bool:
        return truth(value)
    ctx = current()
    if _changed(ctx, value):
        return len(_now(ctx, value))   # its length is guarded by contents
    source = ctx.provenance.source_of(value)
    if type(value) is list and ctx.top_graph is not None:
        length = guards.LenSource(source)
        if ctx.plan.is_dynamic_scalar(length):   # relaxed: one graph for every length
            ctx.guards.add(GuardKind.TYPE_MATCH, source, list)
            return scalars.read_relaxed(ctx, length, len(value))
    ctx.guards.add(GuardKind.LEN_MATCH, source, (type(value), len(value)))
    return len(value)


def not_value(value):
    """``not value`` outside a test (a tensor's ``not`` raises as eagerly)."""
    if isinstance(value, tf.Tensor):
        return not value
    if isinstance(value, StandIn):   # a dynamic number's ``not``: a dynamic bool
        found = value.trace_unary('Not')
        if found is not NOT_MODELLED:
            return found
    return not truth(value)


def eager_converted(value, other):
    """A Python number meeting a tensor in an operator, converted as eager code
    converts it: by eager's own conversion, at trace time, baked in as a constant.
    A graph's conversion differs: it rounds an int to float32 once (eager goes
    through a float64) and wraps an int beyond int64 where eager raises."""
    if type(value) not in (int, float) or not _is_graph_value(other):
        return value
    dtype = other.dtype.base_dtype
    with tf.init_scope():   # eager's conversion: its rounding and its exceptions
        converted = tf.convert_to_tensor(value, dtype=dtype)
    return tf.constant(converted.numpy(), dtype=dtype)


# -- comparisons ----------------------------------------------------------------

def compare(op, left, right):
    ctx = current()
    refuse_unmerged(left, right)
    if op in ('In', 'NotIn'):
        found = _contains(ctx, right, left)
        return found if op == 'In' else not found
    if op in ('Is', 'IsNot'):
        found = protocol.identity(left, right)   # a node's ``node is None``, a number's
        if found is not NOT_MODELLED:
            return found if op == 'Is' else (tf.logical_not(found)
                                             if isinstance(found, tf.Tensor) else not found)
        if ctx.tensors.is_merged_tuple(left) or ctx.tensors.is_merged_tuple(right):
            raise Unsupported(Reason.BRANCH_TYPES,
                              'janus does not convert an identity test on a tuple merged after '
                              'a tensor-dependent if (eagerly it is the object one side made)')
        if isinstance(left, tf.Tensor) and isinstance(right, tf.Tensor):
            same = ctx.tensors.same(left, right)   # graph inputs: the eager tensors they stand for
            return same if op == 'Is' else not_value(same)
        return _COMPARE[op][1](left, right)   # identities of outside objects: ALIAS_MATCH
    if isinstance(left, StandIn) or isinstance(right, StandIn):   # a node's, an array's, a number's
        dunder = _COMPARE[op][0]
        found = protocol.binary(left, right, dunder, _REFLECTED[dunder], op)
        if found is not NOT_MODELLED:
            return found
    if _is_graph_value(left) or _is_graph_value(right):
        with fallible.made_by_the_user():   # ``x < y`` of mismatched shapes raises unused
            return _COMPARE[op][1](eager_converted(left, right), eager_converted(right, left))
    dunder = _COMPARE[op][0]
    names = (dunder, '__eq__', '__ne__', '__lt__', '__le__', '__gt__', '__ge__')
    for value in (left, right):
        _refuse_user_code(value, names, 'a comparison')
    return _COMPARE[op][1](_deep(ctx, left, names), _deep(ctx, right, names))


def _deep(ctx, value, names):
    """Guards everything a comparison of ``value`` may read."""
    if isinstance(value, LazyText):
        value.refuse()
    if _outside_container(ctx, value):
        if _changed(ctx, value):
            return _now(ctx, value)
        ctx.guard_deep(value)
    elif ctx.provenance.source_of(value) is not None:
        refuse_opaque(value, names, 'comparing')
    return value


def compare_chain(ops, *thunks):
    """``a < b < c``: pairwise, left to right, stopping at the first false Python one.
    A comparison that is a graph value (a dynamic bool, a scalar bool tensor) is
    and-ed with the rest, as Python's ``(a < b) and (b < c)`` gives; the operands
    after it are then evaluated in any case, so they must not write state."""
    ctx = current()
    left = thunks[0]()
    result = None
    for op, thunk in zip(ops, thunks[1:]):
        graph_so_far = result is not None and _is_graph_truth(result)
        writes = len(ctx.heap.writes)
        right = thunk()
        if graph_so_far and len(ctx.heap.writes) != writes:
            raise Unsupported(Reason.CHAINED_COMPARISON,
                              'janus does not convert a chained comparison whose later '
                              'operands change state after a tensor-dependent comparison')
        step = compare(op, left, right)
        result = step if result is None else _chain_and(result, step)
        if not _is_graph_truth(result) and not result:
            return result
        left = right
    return result


def _is_graph_truth(value):
    return protocol.is_graph_number(value) or isinstance(value, tf.Tensor)


def _chain_and(so_far, step):
    """``so_far and step`` where ``so_far`` is true if it is a Python value."""
    if not _is_graph_truth(so_far):
        return step
    if protocol.is_graph_number(so_far) and (protocol.is_graph_number(step) or type(step) is bool):
        other = scalars.condition(step) if type(step) is not bool else tf.constant(step)
        return DynamicScalar(tf.logical_and(scalars.condition(so_far), other), bool,
                             so_far.lineage | scalars.lineage_of(step))
    if isinstance(so_far, tf.Tensor) and isinstance(step, tf.Tensor) \
            and so_far.shape.rank == 0 and step.shape.rank == 0 \
            and so_far.dtype == tf.bool and step.dtype == tf.bool:
        return tf.logical_and(so_far, step)   # eager's `and` of bool scalars: one of them
    raise Unsupported(Reason.CHAINED_COMPARISON,
                      'janus does not convert this chained comparison (its result type '
                      'would depend on run-time values)')


def _contains(ctx, container, key):
    found = protocol.contains(container, key)   # an array refuses
    if found is not NOT_MODELLED:
        return found
    if isinstance(container, tf.Tensor) or isinstance(key, LazyText):
        return key in container
    source = ctx.provenance.source_of(container)
    if protocol.is_graph_number(key) and (pytypes.has_items(container)
                                          or pytypes.is_set(container)):
        # Guarded contents, this call's changes applied.
        items = _now(ctx, container) if source is not None and pytypes.is_set(container) \
            else plain_deep(ctx, container)
        return scalar_ops.contains(key, list(items), key.lineage | scalars.lineage_deep(items))
    _refuse_user_code(container, ('__contains__', '__iter__', '__getitem__'), '`in`')
    if source is None:
        ctx.provenance.of(container, '`in`')
        return key in container
    if not pytypes.observes(container, 'in'):
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          'janus does not convert `in` on a %s from outside the call'
                          % type(container).__name__)
    if has_user_dunders(key):
        raise Unsupported(Reason.SPECIAL_METHODS,
                          'janus does not convert `in` with a %s (its __hash__/__eq__ would '
                          'run unconverted)' % type(key).__name__)
    if _changed(ctx, container):
        return key in _now(ctx, container)   # every item guarded by contents
    if pytypes.is_constant(key) and not _holds_nan(key):
        found = key in container
        ctx.guards.add(GuardKind.CONTAINS_MATCH, source, (type(container), key, found))
        return found
    if not pytypes.has_items(container):
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          'janus does not convert `in` on a %s from outside the call with a '
                          '%s key' % (type(container).__name__, type(key).__name__))
    ctx.guard_deep(container)
    return key in container


def _holds_nan(key):
    """NaN is found by identity only: a guard holding the traced NaN would not
    answer for the NaN a later call computes."""
    if type(key) is tuple:
        return any(map(_holds_nan, key))
    return type(key) in (float, complex) and key != key


# -- arithmetic operators --------------------------------------------------------

def binop(op, left, right):
    ctx = current()
    if isinstance(left, StandIn) or isinstance(right, StandIn):   # an array's, a number's
        forward, reflected, _, _, symbol = _BINARY[op]
        found = protocol.binary(left, right, forward, reflected, symbol)
        if found is not NOT_MODELLED:
            return found
    if _is_graph_value(left) or _is_graph_value(right):
        with fallible.made_by_the_user():   # ``a @ b`` of mismatched shapes raises unused
            return _binop(ctx, op, left, right)
    return _binop(ctx, op, left, right)


def _binop(ctx, op, left, right):
    forward, reflected, _, fn, symbol = _BINARY[op]
    if _is_graph_value(left) and _is_graph_value(right):
        return fn(left, right)
    if op == 'Mod' and isinstance(left, (str, bytes)):
        right = plain_deep(ctx, _plain(ctx, right))   # '%s' % (self.names,) reads the items
        if needs_run_values(right):
            if not isinstance(left, str) or holds_tensor(right):
                # A tensor's value can make the format raise (``'%d' % inf``) after
                # the graph changed state; numbers from outside are tried out below.
                raise Unsupported(Reason.FORMATTING,
                                  "janus does not convert '%'-formatting of a graph value; "
                                  "use an f-string")
            return checked_text(LazyText([(right, '%', left)]))   # formatted after the run
        return fn(left, right)
    left, right = _plain(ctx, left), _plain(ctx, right)
    if _is_graph_value(left) or _is_graph_value(right):
        left, right = eager_converted(left, right), eager_converted(right, left)
    for value, name in ((left, forward), (right, reflected)):
        if ctx.provenance.source_of(value) is not None and user_dunder(value, name) is None:
            refuse_opaque(value, (name,), "the operator '%s' on" % symbol)
    if user_dunder(left, forward) is None and user_dunder(right, reflected) is None:
        # A new object (``self.lists + [x]``), holding the outside items themselves.
        return ctx.provenance.made_result(fn(left, right))
    if user_dunder(left, forward) is None and (_is_graph_value(left)
                                               or whitelist.is_library_object(left)):
        # A tensor's own operator would call the user's reflected method itself,
        # unconverted: call it here, converted.
        return _dispatch(ctx, right, left, reflected, forward, symbol, swapped=True)
    return _dispatch(ctx, left, right, forward, reflected, symbol)


def _dispatch(ctx, left, right, forward, reflected, symbol, swapped=False):
    """Python's binary-operator protocol, with the user's dunders converted."""
    order = [(left, forward, right), (right, reflected, left)]
    if not swapped and type(right) is not type(left) and isinstance(right, type(left)) \
            and user_dunder(right, reflected) is not None:
        order.reverse()   # a subclass's reflected method goes first, as in Python
    for obj, name, other in order:
        result = _call_dunder(ctx, obj, name, other)
        if result is not NotImplemented:
            return result
    first, second = (right, left) if swapped else (left, right)
    raise TypeError("unsupported operand type(s) for %s: '%s' and '%s'"
                    % (symbol, type(first).__name__, type(second).__name__))


def _call_dunder(ctx, obj, name, other):
    user = user_dunder(obj, name)
    if user is not None:
        return ctx.call_user(user, obj, other)   # converted and inlined
    method = getattr(type(obj), name, None)
    if method is None:
        return NotImplemented
    return method(obj, other)


def inplace(op, target, value):
    """``target op= value``: in place where Python does it in place.

    An outside container changed in place (``self.log += [x]``, ``self.seen |=
    {k}``) is written back through the shadow heap (the method that does it,
    ``pytypes.INPLACE``, replayed after the run), so every other name for it sees
    the change, as eagerly.
    """
    ctx = current()
    found = protocol.in_place(target, value, _BINARY[op][4])   # an array refuses
    if found is not NOT_MODELLED:
        return found
    source = ctx.provenance.source_of(target)
    model = pytypes.model_of(target)
    if source is None and model is not None and model.container:
        ctx.provenance.of(target, '%s=' % _BINARY[op][4])   # the call's own: in place, plain
        if op in ('Add', 'BitOr') and _outside_container(ctx, value):
            return _INPLACE[op](target, ctx.view(value))   # the items themselves
        return _INPLACE[op](target, _plain(ctx, value))   # made by the call: Python's own
    method = pytypes.INPLACE.get((model.kind, op)) if model is not None else None
    if method is not None and (model.kind is not pytypes.Kind.SET
                               or isinstance(value, (set, frozenset))) \
            and callable(getattr(type(target), method, None)):
        # The items themselves for a list or dict (calls gives a view).
        plain = value if model.kind in (pytypes.Kind.LIST, pytypes.Kind.DICT) \
            else _plain(ctx, value)
        ctx.call_user(getattr(target, method), plain)
        return target
    if method is not None:
        return binop(op, target, value)   # raises Python's TypeError (a set |= a list)
    forward, reflected, in_place, fn, symbol = _BINARY[op]
    if user_dunder(target, in_place) is not None:
        result = _call_dunder(ctx, target, in_place, _plain(ctx, value))
        if result is not NotImplemented:
            return result
    return binop(op, target, value)


def unary(op, value):
    name, fn = _UNARY[op]
    if isinstance(value, StandIn):   # text, an array: refused; a number's: built in the graph
        found = value.trace_unary(op)
        if found is not NOT_MODELLED:
            return found
    user = user_dunder(value, name)
    if user is None:
        return fn(value)
    return current().call_user(user, value)   # converted and inlined


# -- unpacking and spreading --------------------------------------------------------

def unpack(value, shape=None):
    """``a, b = value`` / ``f(*value)`` / ``[*value]`` / ``f(**value)``: an outside
    container gives its guarded items (tensors re-read every run).  ``shape``: the
    target's nesting (``a, (b, c) = ...``: ``(None, (None, None))``, ``STARRED`` for a
    starred name), so an item a nested target unpacks is unpacked here too."""
    ctx = current()
    if isinstance(value, StandIn):   # text, an array, a number, a node of a recursion...
        found = value.trace_unpack(None if shape is None or STARRED in shape else len(shape),
                                   functools.partial(_nested, shape))
        if found is not NOT_MODELLED:
            return found
    if isinstance(value, tf.Tensor):
        return value
    if is_graph_ragged(value):
        return ragged_rows(value, 'unpacking')
    _refuse_user_code(value, ('__iter__', '__getitem__', '__len__', 'keys'), 'unpacking')
    source = ctx.provenance.source_of(value)
    if source is None:
        ctx.provenance.of(value, 'unpacking')
    elif _outside_container(ctx, value):
        value = ctx.view(value)   # the items themselves, each read guarded (a set refuses)
    elif not whitelist.is_library_object(value):
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          'janus does not convert unpacking a %s from outside the call'
                          % type(value).__name__)
    if shape is None or type(value) not in (list, tuple) or not any(shape):
        return value
    return _unpack_nested(value, shape)


STARRED = '*'


def _nested(shape, items):
    """``items``, each one a nested target of ``shape`` takes unpacked in turn."""
    return items if shape is None or not any(shape) else _unpack_nested(items, shape)


def _unpack_nested(items, shape):
    """``items`` with each one a nested target unpacks passed through ``unpack``; a
    length that does not fit is left for Python to raise eager's ValueError."""
    if STARRED in shape:
        before = shape.index(STARRED)
        after = len(shape) - before - 1
        if len(items) < before + after:
            return items
        middle = len(items) - before - after
        shape = shape[:before] + (None,) * middle + shape[before + 1:]
    if len(items) != len(shape):
        return items
    return tuple(unpack(item, sub) if sub else item for item, sub in zip(items, shape))


def ragged_rows(value, what):
    """The rows of a graph RaggedTensor that Python would iterate (``list(rt)``, ``a, b =
    rt``): the graph knows how many (unrolled), else refused.  Python's fallback,
    ``rt[0], rt[1], ...``, never ends in a graph (no IndexError there)."""
    count = tf.get_static_value(value.nrows())
    if count is None or count > config.max_unroll:
        raise Unsupported(Reason.DYNAMIC_ITERATION,
                          'janus does not convert %s a RaggedTensor whose number of rows only '
                          'the run knows (loop over it with for)' % what)
    return [value[i] for i in range(int(count))]


def is_graph_ragged(value):
    return isinstance(value, tf.RaggedTensor) \
        and not isinstance(value.flat_values, guards.EagerTensor)


def each(items, shape):
    """The items of a loop whose target unpacks (``for a, (b, c) in pairs``), each
    through ``unpack`` (a Python-shaped loop or a comprehension)."""
    for item in items:
        yield unpack(item, shape)


# -- text --------------------------------------------------------------------------

_CONVERSIONS = {-1: None, 115: 's', 114: 'r', 97: 'a'}


def format_value(value, conversion, spec):
    """One ``{value!c:spec}`` of an f-string."""
    ctx = current()
    refuse_unmerged(value, spec)   # ``{msg!r}`` would show janus's placeholder
    # Text and a number the run gives are rendered after the run.
    if not (isinstance(value, LazyText) or protocol.is_graph_number(value)):
        _refuse_user_code(value, ('__format__', '__str__', '__repr__'), 'formatting')
        value = plain_deep(ctx, value)
        _refuse_opaque_text(ctx, value)
    conversion = _CONVERSIONS.get(conversion, conversion)
    if isinstance(spec, LazyText):
        spec.refuse()
    spec = spec or ''
    if needs_run_values(value):
        return checked_text(LazyText([(value, conversion, spec)]))
    return LazyText([(value, conversion, spec)]).render([value])
