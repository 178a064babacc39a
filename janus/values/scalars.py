"""Dynamic scalars: Python numbers whose value is a graph input, with Python's meaning.

Needs a ``TraceContext`` (``tracing.current()``).  A Python ``int`` or
``float`` read from outside the call (an attribute, item, global, cell or
argument) is first specialized as a constant under a VALUE guard.  Once its
source showed ``config.scalar_values`` distinct values, the janus function
relaxes that source (``Plan.dynamic_scalars``): later traces read it as a
``DynamicScalar``, a scalar graph input (int64 / float64) guarded by type and
range only, so ``self.step += 1`` is one graph for every step (JANUS's
constant -> dynamic lattice, paper section 4.2.2, applied to numbers).

A ``DynamicScalar`` keeps Python's semantics exactly or it is not used:

* arithmetic follows Python's result types (``int / int`` is a float, ``//``
  and ``%`` floor, ``bool`` arithmetic gives an int); int results stay within
  +-2**62 and every other domain Python guards (division by zero, int/float
  comparisons beyond 2**53) is a ``Janus>Assert``: a run outside it re-runs
  imperatively, where Python raises or computes with big ints;
* mixed with a tensor it converts to the tensor's dtype as eager's
  ``convert_to_tensor`` does (weak typing), for the dtypes where a cast gives
  bit-identical values; math functions (``math.cos``, ``round``, ``**``) run
  Python's own implementation in the graph (``tf.numpy_function``), so
  schedules compute eager's numbers to the last bit;
* written back, returned or printed it is a plain ``int``/``float``/``bool``;
* a test on it (``if self.step % 10 == 0``) is a tensor test: speculated and
  asserted, or real ``tf.cond``/``tf.while_loop`` (``control/``).

Any other use (a shape, an index, a dict key, library code, ``range``) needs
the value itself: ``specialize`` raises ``NeedsValue`` naming the sources the
scalar came from, and the janus function redoes the trace with those sources
specialized by value again (default-deny: never a silent constant).
"""
from __future__ import annotations
import contextlib
import dataclasses
import math
import operator
import sys
import types
import typing

import numpy as np
import tensorflow as tf

from janus import guards, pytypes
from janus.trace import call_signature
from janus.errors import Unsupported
from janus.reasons import Reason
from janus.graph import fallible, graph_analysis
from janus.heap import shadow_heap
from janus.trace.tracing import AssumptionKind, current, need, refuse_unmerged
from janus.values.protocol import NOT_MODELLED, GraphNumber, StandIn

INT_BOUND = guards.SCALAR_INT_BOUND   # every dynamic int stays strictly within +-this
EXACT_FLOAT_INT = 2 ** 53  # ints up to this convert to float64 exactly
TINY = guards.SCALAR_TINY  # |floats| below this (but nonzero) may meet TF's flush-to-zero
DTYPES = {int: tf.int64, float: tf.float64, bool: tf.bool}
NUMBER = (int, float, bool)


@dataclasses.dataclass(frozen=True)
class Arithmetic:
    """A dynamic number's operators and builtins, built in the graph with Python's
    meaning (``scalar_ops``).

    Why a record registered here rather than an import: ``scalar_ops`` builds its
    results as ``DynamicScalar``s and its checks with this module's ``assume``, so
    it sits above this module; the number's own protocol methods below cannot
    import it back (a cycle), nor import it in a function (``tests/test_layout.py``).
    ``scalar_ops`` hands its operations to the class when it is imported
    (``register_arithmetic``), as this module hands its conversion to TF
    (``tf.register_tensor_conversion_function`` at its end).  ``trace/observe.py``,
    which runs every operator of converted code, imports ``scalar_ops``, and
    ``import janus`` imports it: no trace runs before the registration."""

    binop: typing.Callable[..., typing.Any]     # (op, left, right, lineage)
    compare: typing.Callable[..., typing.Any]   # (op, left, right, lineage)
    unary: typing.Callable[..., typing.Any]     # (op, value)
    builtin: typing.Callable[..., typing.Any]   # (callee, args, lineage): NotImplemented if not modelled


# The special method the operators ask a stand-in with (``protocol.binary``'s
# ``forward``), as the operator's name ``scalar_ops`` builds.
_OPERATORS = {'__add__': 'Add', '__sub__': 'Sub', '__mul__': 'Mult', '__matmul__': 'MatMult',
              '__truediv__': 'Div', '__floordiv__': 'FloorDiv', '__mod__': 'Mod',
              '__pow__': 'Pow', '__lshift__': 'LShift', '__rshift__': 'RShift',
              '__or__': 'BitOr', '__xor__': 'BitXor', '__and__': 'BitAnd'}
_COMPARISONS = {'__eq__': 'Eq', '__ne__': 'NotEq', '__lt__': 'Lt', '__le__': 'LtE',
                '__gt__': 'Gt', '__ge__': 'GtE'}
# Python's builtins of numbers ``scalar_ops.builtin`` models (and ``math``'s functions).
_NUMBER_BUILTINS = (float, int, bool, abs, round, max, min, divmod)


class DynamicScalar(StandIn):
    """A Python ``int``/``float``/``bool`` whose value is known only when the graph runs.

    ``tensor``: a scalar graph tensor (int64, float64 or bool); ``type``: the
    Python type eager code would have; ``lineage``: the relaxed sources it was
    computed from, as ``(uid, readable name)`` pairs (what ``NeedsValue``
    specializes when a use needs the value).
    """

    __slots__ = ('tensor', 'type', 'lineage', 'origin')

    def __init__(self, tensor: tf.Tensor, kind: type, lineage: typing.Iterable[tuple] = frozenset(),
                 origin: typing.Any = None) -> None:
        assert kind in DTYPES and tensor.dtype == DTYPES[kind], (kind, tensor.dtype)
        self.tensor, self.type, self.lineage = tensor, kind, frozenset(lineage)
        # The Source it was read from as it is (a relaxed location or argument), whose
        # Python value the call-time conversion of a zero reads (``_converted_float``);
        # None for a number the call computed.
        self.origin = origin

    def specialize(self, what: str) -> typing.NoReturn:
        """Refuses a use that needs the value: the trace is redone with it constant."""
        need(self.lineage, what)

    def __repr__(self) -> str:
        return '<janus dynamic %s>' % self.type.__name__

    def trace_class(self) -> type:
        return self.type   # the Python number it stands for

    def trace_unpack(self, count: int | None,
                     nested: typing.Callable[[tuple], typing.Any]) -> typing.NoReturn:
        self.specialize('unpacking a number')

    def trace_truth(self) -> typing.NoReturn:
        self.specialize('a Python-level truth test')   # tests on it are tensor tests (control/)

    # Its operators and builtins: ``scalar_ops``'s (``Arithmetic``).  A number answers
    # after every other stand-in where they meet (its arithmetic always ran after
    # their answers): an array's or a node's refusal stands.
    RANK = -1
    arithmetic: typing.ClassVar[Arithmetic]   # registered by scalar_ops (register_arithmetic)

    def trace_binary(self, left: typing.Any, right: typing.Any, forward: str, reflected: str,
                     symbol: str) -> typing.Any:
        if forward == '__mod__' and isinstance(left, (str, bytes)):
            return NOT_MODELLED   # ``'%d' % n``: text formatted after the run (observe)
        lineage = lineage_of(left, right)
        graph_operand = any(isinstance(v, (tf.Tensor, tf.Variable)) for v in (left, right))
        with fallible.made_by_the_user() if graph_operand else contextlib.nullcontext():
            # ``n < x`` with a tensor ``x`` of another shape raises unused, as eagerly
            if forward in _COMPARISONS:
                return self.arithmetic.compare(_COMPARISONS[forward], left, right, lineage)
            return self.arithmetic.binop(_OPERATORS[forward], left, right, lineage)

    def trace_unary(self, op: str) -> DynamicScalar:
        return self.arithmetic.unary(op, self)

    def trace_identity(self, other: typing.Any) -> bool:
        if other is None:   # a dynamic number is a number, never None
            return False
        need(lineage_of(self, other), 'an identity test on a number')

    def trace_builtin(self, callee: typing.Callable, args: tuple, kwargs: dict) -> typing.Any:
        """``isinstance``/``type`` answered from the Python type; Python's number
        builtins and ``math`` computed in the graph (``scalar_ops.builtin``)."""
        if callee in (isinstance, issubclass) and len(args) == 2 and not kwargs \
                and args[0] is self:
            return issubclass(self.type, args[1]) if callee is isinstance else callee(*args)
        if callee is type and len(args) == 1 and not kwargs:
            return self.type
        if kwargs or not (any(callee is f for f in _NUMBER_BUILTINS) or (
                isinstance(callee, types.BuiltinFunctionType)
                and getattr(callee, '__module__', None) == 'math')):
            return NOT_MODELLED
        result = self.arithmetic.builtin(callee, list(args), lineage_of(*args))
        return NOT_MODELLED if result is NotImplemented else result

    # Python protocols reaching a dynamic scalar directly come from code janus does
    # not convert (library code, builtins it does not model): they need the value.
    def _needs_value(self, *args: typing.Any, **kwargs: typing.Any) -> typing.Any:
        self.specialize('using a number from outside the call this way')

    __bool__ = __index__ = __int__ = __float__ = __complex__ = __len__ = __iter__ = \
        __hash__ = __format__ = __str__ = __getitem__ = __round__ = __trunc__ = \
        __floor__ = __ceil__ = __array__ = _needs_value
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _needs_value
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = \
        __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = \
        __rpow__ = __neg__ = __pos__ = __abs__ = _needs_value

    # -- control flow (helper P2) --
    def trace_tested_in_graph(self) -> bool:
        return True   # a test on it is a tensor test (``control/``)

    def trace_test(self) -> tf.Tensor:
        return condition(self)

    def trace_not(self) -> DynamicScalar:
        return DynamicScalar(tf.logical_not(condition(self)), bool, self.lineage)

    def trace_lineage(self) -> frozenset:
        return self.lineage

    def trace_number_type(self) -> type:
        return self.type

    def trace_tensor(self) -> tf.Tensor:
        return self.tensor

    def materialize(self) -> GraphNumber:
        """Returned or stored: a number of its type, the run's value of its tensor."""
        return GraphNumber(self.tensor, self.type)

    def trace_carry(self, value: typing.Any, where: str) -> typing.Any:
        """A loop carries a number of its type as a tensor: a dynamic one's own, a
        Python one's lifted (a constant)."""
        refuse_unmerged(self, value)
        if isinstance(value, StandIn) and value.trace_number_type() is self.type:
            return value.trace_tensor()   # a dynamic number of its type
        kind: typing.Any = self.type
        if type(value) is kind and in_range(value):
            return lift(value).tensor
        return NOT_MODELLED

    def trace_uncarry(self, carried: typing.Any, where: str, lineage: frozenset) -> DynamicScalar:
        return DynamicScalar(as_scalar(carried), self.type, self.lineage | lineage)


def register_arithmetic(arithmetic: Arithmetic) -> None:
    """``scalar_ops``'s operations, the numbers' own (``Arithmetic``)."""
    DynamicScalar.arithmetic = arithmetic


def is_dynamic(value: typing.Any) -> bool:
    return type(value) is DynamicScalar


def number_type(value: typing.Any) -> type | None:
    """The Python number type (int, float or bool) ``value`` is or stands for; None
    for any other value."""
    if type(value) is DynamicScalar:
        return value.type
    return type(value) if type(value) in NUMBER else None


def lineage_of(*values: typing.Any) -> frozenset:
    out = frozenset()
    for value in values:
        if type(value) is DynamicScalar:
            out |= value.lineage
    return out


def lift(value: int | float | bool) -> DynamicScalar:
    """A Python number as a DynamicScalar (a constant one): for merging a Python
    constant with a dynamic scalar of the same type (``wait = 0`` in one branch)."""
    kind = type(value)
    if kind is int and not -INT_BOUND < value < INT_BOUND:
        raise Unsupported(Reason.BIG_INT,
                          'janus does not carry the int %d (beyond +-2**62) as a graph value'
                          % value)
    return DynamicScalar(tf.constant(value, DTYPES[kind]), kind)


def rewrap(like: DynamicScalar, tensor: tf.Tensor) -> DynamicScalar:
    """``tensor`` (the same dtype) as a dynamic scalar like ``like``: after tf.cond/while."""
    return DynamicScalar(as_scalar(tensor), like.type, like.lineage)


def as_scalar(tensor: tf.Tensor) -> tf.Tensor:
    """``tensor``, one element janus itself made (a number's graph value carried
    through a tf.cond, a loop or a numpy_function), reshaped to a scalar.  Its
    shape may be unknown statically, but the reshape cannot fail: it is
    recorded as such (``fallible.py``; rollback plans rely on that)."""
    out = tf.reshape(tensor, [])
    if getattr(out, 'graph', None) is not None:
        fallible.cannot_fail(out.op)
    return out


def condition(value: DynamicScalar) -> tf.Tensor:
    """``bool(value)`` of a dynamic scalar, as a scalar bool tensor (NaN is true)."""
    if value.type is bool:
        return value.tensor
    return tf.not_equal(value.tensor, tf.zeros([], value.tensor.dtype))


# -- reading -----------------------------------------------------------------------

def in_range(value: typing.Any) -> bool:
    """Whether a Python value can be a dynamic scalar's value (the type guard's test)."""
    return type(value) in NUMBER and guards.scalar_ok(value)


def read_relaxed(ctx: typing.Any, source: typing.Any, value: typing.Any) -> DynamicScalar | None:
    """The dynamic scalar for a relaxed ``source`` whose value now is ``value``, or
    None when that value cannot be one (a bool, a str, an int beyond +-2**62)."""
    if not in_range(value):
        return None
    tensor = shadow_heap.hoist_scalar(ctx, source, type(value))
    return DynamicScalar(tensor, type(value), {(source.uid(), repr(source))}, source)


def from_inputs(arguments: typing.Mapping[str, typing.Any]) -> dict[str, typing.Any]:
    """The traced arguments with every ``call_signature.ScalarInput`` (a relaxed number
    argument's graph input) made a DynamicScalar, in containers too."""
    def convert(value: typing.Any, source: typing.Any, depth: int = 0) -> typing.Any:
        if type(value) is call_signature.ScalarInput:
            return DynamicScalar(as_scalar(value.tensor), value.type,
                                 {(call_signature.scalar_path_key(value.path), value.path)}, source)
        if depth < 16 and type(value) is list:   # keeps the one list object
            value[:] = [convert(v, guards.ItemSource(source, i), depth + 1)
                        for i, v in enumerate(value)]
        elif depth < 16 and type(value) is dict:
            for key in value:
                value[key] = convert(value[key], guards.ItemSource(source, key), depth + 1)
        elif depth < 16 and isinstance(value, tuple) and any(
                _holds_scalar_input(v) for v in value):
            items = [convert(v, guards.ItemSource(source, i), depth + 1)
                     for i, v in enumerate(value)]
            return type(value)(items) if type(value) is tuple else type(value)(*items)
        return value
    return {name: convert(value, guards.ArgSource(name)) for name, value in arguments.items()}


def _holds_scalar_input(value: typing.Any, depth: int = 0) -> bool:
    if type(value) is call_signature.ScalarInput:
        return True
    if depth < 16 and (type(value) in (list, dict) or isinstance(value, tuple)):
        items = value.values() if type(value) is dict else value
        return any(_holds_scalar_input(v, depth + 1) for v in items)
    return False


_NUMERIC_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int8, tf.int16,
                   tf.int32, tf.int64, tf.uint8, tf.uint16, tf.uint32, tf.bool)


def from_tensor(callee: type, tensor: tf.Tensor) -> DynamicScalar:
    """``float(t)`` / ``int(t)`` / ``bool(t)`` of a one-element graph tensor: the Python
    number eager code gets from the eager tensor, as a dynamic scalar
    (``best = float(loss)``).  It comes from no outside location, so a use that
    needs its value runs the call imperatively."""
    dtype = tensor.dtype.base_dtype
    if dtype not in _NUMERIC_DTYPES or not tensor.shape.is_fully_defined() \
            or tensor.shape.num_elements() != 1:
        raise Unsupported(Reason.NUMPY_IN_GRAPH,
                          'janus converts %s() of a one-element numeric tensor of known '
                          'shape only (got %s %s)' % (callee.__name__, dtype.name, tensor.shape))
    if tensor.shape.rank:
        try:   # eager converts through NumPy, whose rule for a one-element array applies
            callee(np.zeros(tensor.shape.as_list()))
        except TypeError as e:
            raise Unsupported(Reason.NUMPY_IN_GRAPH, '%s() of a %s tensor raises eagerly (%s)'
                              % (callee.__name__, tensor.shape, e)) from None
    value = tf.reshape(tensor, [])
    if callee is bool:
        truth = value if dtype == tf.bool else tf.not_equal(value, tf.zeros([], dtype))
        return DynamicScalar(truth, bool)
    if dtype.is_floating and graph_analysis.depends_on_state_change(value) is None:   # see _no_underflow
        assume(tf.logical_not(_subnormal(value)), '%s() of a tensor that is not subnormal '
                '(TF reads those as zero)' % callee.__name__)
    if callee is float:
        return DynamicScalar(tf.cast(value, tf.float64), float)   # exact for every dtype here
    if dtype.is_floating:
        wide = tf.cast(value, tf.float64)
        assume(tf.logical_and(tf.math.is_finite(wide), tf.abs(wide) < float(INT_BOUND) / 2),
                'int() of a finite tensor within +-2**61')
        return DynamicScalar(tf.cast(wide, tf.int64), int)   # truncates, as int() does
    return DynamicScalar(checked_int(tf.cast(value, tf.int64), 'int() of a tensor'), int)


_BITS = {tf.float16: (tf.int16, 0x7C00, 0x03FF), tf.bfloat16: (tf.int16, 0x7F80, 0x007F),
         tf.float32: (tf.int32, 0x7F800000, 0x007FFFFF),
         tf.float64: (tf.int64, 0x7FF0000000000000, 0x000FFFFFFFFFFFFF)}


def _subnormal(value: tf.Tensor) -> tf.Tensor:
    """Whether a float scalar is subnormal, read from its bits (integer ops: a
    flush-to-zero CPU mode cannot hide it)."""
    itype, exponent, mantissa = _BITS[value.dtype.base_dtype]
    bits = tf.bitcast(value, itype)
    return tf.logical_and(tf.equal(tf.bitwise.bitwise_and(bits, tf.constant(exponent, itype)), 0),
                          tf.not_equal(tf.bitwise.bitwise_and(bits, tf.constant(mantissa, itype)), 0))


# -- the checks Python makes -------------------------------------------------------

def assume(condition_tensor: tf.Tensor, description: str) -> None:
    """A SCALAR assertion, carrying the lineage of the operation being built: when it
    breaks, those numbers are specialized by value again (``JanusFunction._relax``),
    so a domain left for good (a negative exponent) does not fail every call."""
    ctx = current()
    before = len(ctx.assumptions)
    ctx.assume(None, AssumptionKind.SCALAR, condition_tensor, description,
               lineno=_user_line(ctx))
    if len(ctx.assumptions) > before:
        ctx.assumptions[-1].lineage = getattr(ctx, 'scalar_lineage', frozenset())


class Building:
    """Names the lineage of the operation being built, for its assertions."""

    def __init__(self, lineage: typing.AbstractSet[tuple]) -> None:
        self.lineage = frozenset(lineage)

    def __enter__(self) -> None:
        ctx = current()
        self.saved = getattr(ctx, 'scalar_lineage', frozenset())
        ctx.scalar_lineage = self.saved | self.lineage

    def __exit__(self, *exc: typing.Any) -> None:
        current().scalar_lineage = self.saved


def _user_line(ctx: typing.Any) -> int | None:
    """The line of user code being traced (the innermost converted frame)."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code in ctx.code_objects:
            return frame.f_lineno
        frame = frame.f_back
    return None


def checked_int(tensor: tf.Tensor, what: str) -> tf.Tensor:
    """An int64 result kept within +-INT_BOUND (Python ints do not wrap)."""
    bound = tf.constant(INT_BOUND, tf.int64)
    assume(tf.logical_and(tensor < bound, tensor > -bound),
            '%s stays within +-2**62 (Python ints do not wrap)' % what)
    return tensor


def exact_float(tensor: tf.Tensor) -> tf.Tensor:
    """|int| <= 2**53: its float64 is exact (Python compares and divides ints exactly)."""
    bound = tf.constant(EXACT_FLOAT_INT, tf.int64)
    assume(tf.logical_and(tensor <= bound, tensor >= -bound),
            'an int mixed with floats stays within +-2**53')
    return tf.cast(tensor, tf.float64)


def nonzero(tensor: tf.Tensor, what: str) -> None:
    assume(tf.not_equal(tensor, tf.zeros([], tensor.dtype)),
            '%s is not zero (Python raises ZeroDivisionError)' % what)


# -- with tensors: eager's weak typing ---------------------------------------------------

# (Python type, tensor dtype) pairs whose conversion graph casts reproduce exactly:
# ints wrap into int32 as eager's conversion does, go to float32 through a float64
# as eager's do; floats round to nearest.
_EXACT_CASTS = {(int, tf.int32), (int, tf.int64), (int, tf.float32), (int, tf.float64),
                (float, tf.float32), (float, tf.float64), (bool, tf.bool)}


def to_tensor(value: typing.Any, dtype: tf.DType | None = None) -> tf.Tensor:
    """The tensor eager's ``convert_to_tensor(value, dtype)`` gives for this number."""
    with Building(value.lineage):
        return _to_tensor(value, dtype)


def _to_tensor(value: typing.Any, dtype: tf.DType | None) -> tf.Tensor:
    # What eager's conversion is asked for: part of its cache's key.
    key_dtype = None if dtype is None else tf.as_dtype(dtype).base_dtype
    constant = tf.get_static_value(value.tensor)
    if constant is not None and value.type is float:   # a lifted constant (a Python zero)
        return _eager_constant(float(constant), key_dtype)
    if dtype is None:
        if value.type is int:
            bound = tf.constant(2 ** 31, tf.int64)
            assume(tf.logical_and(value.tensor < bound, value.tensor >= -bound),
                    'an int converted to a tensor fits int32 (eager picks int64 otherwise)')
            return tf.cast(value.tensor, tf.int32)
        if value.type is float:
            big = tf.constant(float(np.finfo(np.float32).max), tf.float64)
            x = value.tensor
            assume(tf.logical_or(tf.abs(x) <= big, tf.logical_not(tf.math.is_finite(x))),
                    'a float converted to a tensor fits float32 (eager raises otherwise)')
        dtype = tf.float32 if value.type is float else tf.bool
    dtype = tf.as_dtype(dtype).base_dtype
    if (value.type, dtype) not in _EXACT_CASTS:
        value.specialize('converting a Python %s to a %s tensor' % (value.type.__name__,
                                                                    dtype.name))
    if value.type is float and dtype == tf.float32 \
            and graph_analysis.depends_on_state_change(value.tensor) is None:   # see _no_underflow
        assume(tf.logical_or(tf.equal(value.tensor, 0.0), tf.logical_not(
            tf.abs(value.tensor) < 2.0 ** -120)), 'a float converted to float32 stays '
            'clear of its subnormal range (TF flushes it to zero)')
    if value.type is int and dtype == tf.float32:
        # Eager converts an int to float32 through a float64 (two roundings).
        return tf.cast(tf.cast(value.tensor, tf.float64), tf.float32)
    if value.type is float:
        return _converted_float(value, key_dtype, dtype)
    return tf.cast(value.tensor, dtype)


def _converted_float(value: DynamicScalar, key_dtype: tf.DType | None,
                     dtype: tf.DType) -> tf.Tensor:
    """A dynamic float as eager's conversion gives it.  Eager converts a Python number
    through a process-wide cache keyed by (type, value, requested dtype, device), and
    ``0.0 == -0.0``: a float zero converts to the sign of the first float zero ever
    converted for that dtype and device, whatever its own sign (non-finite floats are
    never cached; equal nonzero floats have equal bits).  So a zero takes its sign
    from eager's own conversion of the number (inserting into the cache as eager
    would): at call time for a number read as it is, by a Python call (run on the
    host before the graph where it can be) for one the call computed.  One converted
    under a device scope of the call must not be zero (a SCALAR assertion: such a
    run re-runs imperatively; unchecked, like the subnormal checks, for a number
    computed from a value a state change made)."""
    ctx = current()
    cast = tf.cast(value.tensor, dtype)
    zero = tf.equal(value.tensor, tf.zeros([], value.tensor.dtype))
    if _in_device_scope():   # eager converts under another device name: another entry
        if graph_analysis.depends_on_state_change(value.tensor) is None:   # see _no_underflow
            assume(tf.logical_not(zero), 'a float converted to a tensor under tf.device is '
                    'not zero (eager\'s conversion cache decides the sign of a zero)')
        return cast
    if value.origin is not None:   # read as it is: eager's conversion of it, at call time
        eager_zero = shadow_heap.hoist_eager_zero(ctx, value.origin, key_dtype, dtype)
    else:   # computed by the call: eager's conversion of it, by Python when it is known
        key = (id(tf.compat.v1.get_default_graph()), value.tensor.ref(), key_dtype)
        if key not in ctx.zero_signs:   # converted again: eager's cache gives the same
            ctx.zero_signs[key] = python_call(_ZeroSign(key_dtype), [value.tensor], float)
        eager_zero = tf.cast(ctx.zero_signs[key], dtype)
    return tf.where(zero, eager_zero, cast)


class _ZeroSign:
    """Python's part of converting a computed float: for a zero, the sign eager's
    conversion gives it (and teaches the cache, as eager would); else unused."""

    def __init__(self, key_dtype: tf.DType | None) -> None:
        self.key_dtype = key_dtype
        self.__name__ = 'the conversion of a float to a tensor'

    def __call__(self, number: float) -> float:
        if number != 0.0:
            return 0.0
        converted = tf.convert_to_tensor(number, dtype=self.key_dtype)
        return math.copysign(0.0, float(converted.numpy()))


def _eager_constant(number: float, key_dtype: tf.DType | None) -> tf.Tensor:
    """A Python float constant converted as eager converts it (its rounding, its
    exceptions, its cache's sign of zero), baked in: the cache's entry for a zero,
    once made, stays."""
    with tf.init_scope():
        converted = tf.convert_to_tensor(number, dtype=key_dtype)
    return tf.constant(converted.numpy(), dtype=converted.dtype)


def eager_zeros(
        callee: typing.Callable, args: typing.Sequence,
        kwargs: typing.Mapping[str, typing.Any]) -> tuple[typing.Sequence, typing.Mapping]:
    """``tf.maximum(x, 0.0)``: a Python float zero given to one of TF's elementwise
    functions converts through eager's cache, which decides its sign; passed as a
    constant DynamicScalar, TF converts it through ``to_tensor``, as eagerly."""
    def lifted(v: typing.Any) -> typing.Any:
        return lift(v) if type(v) is float and v == 0.0 else v
    new_args, new_kwargs = [lifted(v) for v in args], {k: lifted(v) for k, v in kwargs.items()}
    if all(a is b for a, b in zip(new_args, args)) and all(
            new_kwargs[k] is kwargs[k] for k in kwargs):
        return args, kwargs
    if not library_call_allows(callee, new_args, new_kwargs):
        return args, kwargs
    return new_args, new_kwargs


def _in_device_scope() -> bool:
    """Whether the trace is inside a ``with tf.device(...)`` of the call's code: eager
    code converts there under another device name (another cache entry)."""
    return bool(tf.compat.v1.get_default_graph()._device_functions_outer_to_inner)


_TENSOR_BINARY = {'Add': operator.add, 'Sub': operator.sub, 'Mult': operator.mul,
                  'MatMult': operator.matmul, 'Div': operator.truediv,
                  'FloorDiv': operator.floordiv, 'Mod': operator.mod, 'Pow': operator.pow,
                  'BitAnd': operator.and_, 'BitOr': operator.or_, 'BitXor': operator.xor,
                  'LShift': operator.lshift, 'RShift': operator.rshift}
_TENSOR_COMPARE = {'Eq': operator.eq, 'NotEq': operator.ne, 'Lt': operator.lt,
                   'LtE': operator.le, 'Gt': operator.gt, 'GtE': operator.ge}


def with_tensor(op: str, left: typing.Any, right: typing.Any, lineage: typing.AbstractSet[tuple],
                compare: bool = False) -> typing.Any:
    """``tensor op number`` / ``number op tensor``: the number takes the tensor's dtype,
    as the tensor's own operator converts a Python number eagerly."""
    tensor = left if isinstance(left, (tf.Tensor, tf.Variable)) else right
    dtype = tensor.dtype.base_dtype

    def convert(value: typing.Any) -> typing.Any:
        if type(value) is DynamicScalar:
            return to_tensor(value, dtype)
        return value
    fn = _TENSOR_COMPARE.get(op) if compare else _TENSOR_BINARY.get(op)
    if fn is None:
        need(lineage, 'the operator %s between a number and a tensor' % op)
    return fn(convert(left), convert(right))   # type: ignore[misc]  # need() raised on None


# Library functions that may receive a dynamic scalar itself: TF converts it as it
# converts a Python number there (the conversion function below picks the dtype the
# op asks for).  Anything else (shapes, lists, Python code in libraries) gets the
# value: ``NeedsValue``.
_ELEMENTWISE = ('cast', 'convert_to_tensor', 'maximum', 'minimum', 'add', 'subtract',
                'multiply', 'divide', 'truediv', 'pow', 'exp', 'sqrt', 'abs', 'square',
                'clip_by_value', 'where', 'sigmoid', 'tanh', 'negative', 'sign', 'less',
                'greater', 'less_equal', 'greater_equal', 'equal', 'not_equal',
                'scalar_mul', 'add_n', 'fill')
_TENSOR_FUNCTIONS = {getattr(tf, name) for name in _ELEMENTWISE if hasattr(tf, name)} | {
    getattr(tf.math, name) for name in _ELEMENTWISE + ('log', 'rsqrt', 'multiply_no_nan',
                                                         'divide_no_nan', 'log1p', 'expm1')
    if hasattr(tf.math, name)}
_SHAPE_ARGUMENTS = {tf.fill: (0, 'dims'), tf.add_n: (0, 'inputs')}
# Library functions taking a shape (a list of ints) as one argument: there a shape
# holding dynamic ints is packed into an int64 tensor, TF inferring its constant
# parts statically; one graph serves every value (``packed_shape_call``).
_SHAPE_FUNCTIONS = {tf.reshape: (1, 'shape'), tf.zeros: (0, 'shape'), tf.ones: (0, 'shape'),
                    tf.fill: (0, 'dims'), tf.tile: (1, 'multiples'),
                    tf.broadcast_to: (1, 'shape'), tf.eye: (0, 'num_rows')}
_VARIABLE_METHODS = ('assign', 'assign_add', 'assign_sub')
_SHAPE_BOUND = 2 ** 31   # a packed dimension this large or more: the call runs imperatively


def library_call_allows(callee: typing.Callable, args: typing.Sequence,
                        kwargs: typing.Mapping[typing.Any, typing.Any]) -> bool:
    """Whether ``callee`` may get the dynamic scalars in ``args``/``kwargs`` as they are
    (each a top-level argument, never inside a list: a list of numbers is a shape)."""
    self_object = getattr(callee, '__self__', None)
    if pytypes.is_variable(self_object) and getattr(callee, '__name__', '') in _VARIABLE_METHODS:
        allowed = True
    else:
        try:
            allowed = callee in _TENSOR_FUNCTIONS
        except TypeError:
            allowed = False
    if not allowed:
        return False
    index, keyword = _SHAPE_ARGUMENTS.get(callee, (None, None))
    if index is not None and (len(args) > index and holds_dynamic(args[index])
                              or holds_dynamic(kwargs.get(keyword))):
        return False
    nested = [v for v in list(args) + list(kwargs.values())
              if type(v) is not DynamicScalar and holds_dynamic(v)]
    return not nested


def _shape_position(callee: typing.Any) -> tuple[int, str] | None:
    """(index, keyword) of the shape argument of ``callee`` (``_SHAPE_FUNCTIONS``), or None."""
    try:
        return _SHAPE_FUNCTIONS.get(callee)
    except TypeError:   # an unhashable callable
        return None


def shape_argument(callee: typing.Callable, args: typing.Sequence,
                   kwargs: typing.Mapping[str, typing.Any]) -> typing.Any:
    """The shape ``callee`` (a ``_SHAPE_FUNCTIONS`` one) is called with, or None."""
    where = _shape_position(callee)
    if where is None:
        return None
    index, keyword = where
    return args[index] if len(args) > index else kwargs.get(keyword)


def refuse_lenient_shape(callee: typing.Callable, args: typing.Sequence,
                         kwargs: typing.Mapping[str, typing.Any]) -> None:
    """Refuses a shape of Python numbers holding a float or a bool (``tf.zeros((2.0,
    3))``: eager raises, a graph builds it as the int) or a dimension of 2**31 or more
    (a graph wraps a size past 2**63 elements to zero).  The statement runs in Python,
    where eager raises (a graph break, or the call imperatively)."""
    shape = shape_argument(callee, args, kwargs)
    for item in shape if type(shape) in (list, tuple) else [shape]:
        if isinstance(item, (bool, float, np.bool_, np.floating)) or (
                type(item) is DynamicScalar and item.type is not int):
            raise Unsupported(Reason.TRACE_FAILED,
                              'janus does not convert a shape holding a %s (eagerly TF '
                              'raises; a graph would take it as an int)' % type(item).__name__)
        if isinstance(item, (int, np.integer)) and abs(int(item)) >= _SHAPE_BOUND:
            raise Unsupported(Reason.TRACE_FAILED,
                              'janus does not convert a shape with a dimension of 2**31 or '
                              'more (a graph wraps a size past 2**63 elements to zero; '
                              'eagerly TF raises)')


def packed_shape_call(
        callee: typing.Callable, args: typing.Sequence,
        kwargs: typing.Mapping[str, typing.Any]) -> tuple[typing.Sequence, typing.Mapping] | None:
    """(args, kwargs) of ``callee`` (a ``_SHAPE_FUNCTIONS`` one) with its shape, a list
    or tuple of ints some of them dynamic, as one int64 tensor: ``tf.reshape(h, (rows,
    -1))`` with ``rows`` a graph input.  TF computes the same values from a shape
    tensor as from the ints; what it knows statically is the constant dimensions, and
    a read of one the numbers left unknown needs their values (``shapes.py``: the
    trace is redone with them constant).  None when the call is not of that form."""
    where = _shape_position(callee)
    if where is None:
        return None
    index, keyword = where
    args, kwargs = list(args), dict(kwargs)
    shape = shape_argument(callee, args, kwargs)
    if type(shape) not in (list, tuple) or not holds_dynamic(shape) \
            or not all(number_type(d) is int for d in shape):
        return None
    others = [v for i, v in enumerate(args) if i != index] + [
        v for k, v in kwargs.items() if k != keyword]
    if any(holds_dynamic(v) for v in others):
        return None
    lineage = lineage_deep(list(shape))
    ctx = current()
    ctx.number_shapes = ctx.number_shapes | lineage
    with Building(lineage):   # a graph wraps a size past 2**63 elements; eager raises
        for d in shape:
            if type(d) is DynamicScalar:
                assume(d.tensor < tf.constant(_SHAPE_BOUND, tf.int64),
                       'a dimension computed from a number stays below 2**31 (larger '
                       'ones run imperatively)')
    packed = tf.stack([d.tensor if type(d) is DynamicScalar else tf.constant(d, tf.int64)
                       for d in shape])
    if len(args) > index:
        args[index] = packed
    else:
        kwargs[keyword] = packed
    return args, kwargs


def holds_dynamic(value: typing.Any, depth: int = 0) -> bool:
    if type(value) is DynamicScalar:
        return True
    if depth < 8 and (type(value) in (list, dict) or isinstance(value, tuple)):
        items = value.values() if type(value) is dict else value
        return any(holds_dynamic(v, depth + 1) for v in items)
    return False


def lineage_deep(values: typing.Any, depth: int = 0) -> frozenset:
    """The lineage of every dynamic scalar in ``values`` (containers walked)."""
    out = frozenset()
    for value in values:
        if type(value) is DynamicScalar:
            out |= value.lineage
        elif depth < 8 and (type(value) in (list, dict) or isinstance(value, tuple)):
            items = value.values() if type(value) is dict else value
            out |= lineage_deep(items, depth + 1)
    return out


def _convert_for_tf(value: DynamicScalar, dtype: tf.DType | None = None, name: str | None = None,
                    as_ref: bool = False) -> tf.Tensor:
    return to_tensor(value, dtype)


tf.register_tensor_conversion_function(DynamicScalar, _convert_for_tf)


# -- builtins and math -----------------------------------------------------------------------

# Functions whose normal-range inputs can have a subnormal result (flushed to zero in
# TF's threads): their zero results re-run imperatively.
_UNDERFLOWING = frozenset({math.exp, math.pow, math.ldexp, operator.pow, math.erfc}
                          | ({math.exp2} if hasattr(math, 'exp2') else set()))


def python_call(fn: typing.Callable, tensors: typing.Sequence[tf.Tensor], kind: type) -> tf.Tensor:
    """``fn(*values)`` run by Python itself when the graph runs: eager's exact numbers
    (TF's own transcendental kernels may differ in the last bit)."""
    def run(*values: np.ndarray) -> np.ndarray:
        result = fn(*(v.item() for v in values))
        if kind is float and (0.0 < abs(result) < TINY
                              or result == 0.0 and fn in _UNDERFLOWING):
            # TF runs this in a thread that flushes subnormals: a zero or tiny result
            # may be one; the call re-runs imperatively, where Python computes it.
            raise FloatingPointError('janus: a result of %s near the subnormal range'
                                     % getattr(fn, '__name__', 'a math function'))
        return np.asarray(result, dtype=DTYPES[kind].as_numpy_dtype)
    with fallible.not_the_users():
        out = tf.numpy_function(run, tensors, DTYPES[kind], stateful=False)
    functions = current().host.functions
    if functions is not None:   # graphgen/hostcheck.py may run it before the graph instead
        functions[out.op] = (run, DTYPES[kind])
    return as_scalar(out)
