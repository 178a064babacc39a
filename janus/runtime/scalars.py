"""Dynamic scalars: Python numbers whose value is a graph input, with Python's meaning.

Needs a ``TraceContext`` (``trace_context.current()``).  A Python ``int`` or
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
  asserted, or real ``tf.cond``/``tf.while_loop`` (``runtime/control/``).

Any other use (a shape, an index, a dict key, library code, ``range``) needs
the value itself: ``specialize`` raises ``NeedsValue`` naming the sources the
scalar came from, and the janus function redoes the trace with those sources
specialized by value again (default-deny: never a silent constant).
"""
import math
import operator
import sys

import numpy as np
import tensorflow as tf

from janus.reasons import Reason
from janus import call_signature, guards
from janus.runtime import fallible, shadow_heap
from janus.runtime.trace_context import AssumptionKind, Unsupported, current, need

INT_BOUND = guards.SCALAR_INT_BOUND   # every dynamic int stays strictly within +-this
EXACT_FLOAT_INT = 2 ** 53  # ints up to this convert to float64 exactly
TINY = guards.SCALAR_TINY  # |floats| below this (but nonzero) may meet TF's flush-to-zero
DTYPES = {int: tf.int64, float: tf.float64, bool: tf.bool}
_NUMBER = (int, float, bool)


class DynamicScalar:
    """A Python ``int``/``float``/``bool`` whose value is known only when the graph runs.

    ``tensor``: a scalar graph tensor (int64, float64 or bool); ``type``: the
    Python type eager code would have; ``lineage``: the relaxed sources it was
    computed from, as ``(uid, readable name)`` pairs (what ``NeedsValue``
    specializes when a use needs the value).
    """

    __slots__ = ('tensor', 'type', 'lineage', 'origin')

    def __init__(self, tensor, kind, lineage=frozenset(), origin=None):
        assert kind in DTYPES and tensor.dtype == DTYPES[kind], (kind, tensor.dtype)
        self.tensor, self.type, self.lineage = tensor, kind, frozenset(lineage)
        # The Source it was read from as it is (a relaxed location or argument), whose
        # Python value the call-time conversion of a zero reads (``_converted_float``);
        # None for a number the call computed.
        self.origin = origin

    def specialize(self, what):
        """Refuses a use that needs the value: the trace is redone with it constant."""
        need(self.lineage, what)

    def __repr__(self):
        return '<janus dynamic %s>' % self.type.__name__

    # Python protocols reaching a dynamic scalar directly come from code janus does
    # not convert (library code, builtins it does not model): they need the value.
    def _needs_value(self, *args, **kwargs):
        self.specialize('using a number from outside the call this way')

    __bool__ = __index__ = __int__ = __float__ = __complex__ = __len__ = __iter__ = \
        __hash__ = __format__ = __str__ = __getitem__ = __round__ = __trunc__ = \
        __floor__ = __ceil__ = __array__ = _needs_value
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _needs_value
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = \
        __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = \
        __rpow__ = __neg__ = __pos__ = __abs__ = _needs_value


def is_dynamic(value):
    return type(value) is DynamicScalar


def lineage_of(*values):
    out = frozenset()
    for value in values:
        if type(value) is DynamicScalar:
            out |= value.lineage
    return out


def lift(value):
    """A Python number as a DynamicScalar (a constant one): for merging a Python
    constant with a dynamic scalar of the same type (``wait = 0`` in one branch)."""
    kind = type(value)
    if kind is int and not -INT_BOUND < value < INT_BOUND:
        raise Unsupported(Reason.BIG_INT,
                          'janus does not carry the int %d (beyond +-2**62) as a graph value'
                          % value)
    return DynamicScalar(tf.constant(value, DTYPES[kind]), kind)


def rewrap(like, tensor):
    """``tensor`` (the same dtype) as a dynamic scalar like ``like``: after tf.cond/while."""
    return DynamicScalar(as_scalar(tensor), like.type, like.lineage)


def as_scalar(tensor):
    """``tensor``, one element janus itself made (a number's graph value carried
    through a tf.cond, a loop or a numpy_function), reshaped to a scalar.  Its
    shape may be unknown statically, but the reshape cannot fail: it is
    recorded as such (``fallible.py``; rollback plans rely on that)."""
    out = tf.reshape(tensor, [])
    if getattr(out, 'graph', None) is not None:
        fallible.cannot_fail(out.op)
    return out


def condition(value):
    """``bool(value)`` of a dynamic scalar, as a scalar bool tensor (NaN is true)."""
    if value.type is bool:
        return value.tensor
    return tf.not_equal(value.tensor, tf.zeros([], value.tensor.dtype))


# -- reading -----------------------------------------------------------------------

def in_range(value):
    """Whether a Python value can be a dynamic scalar's value (the type guard's test)."""
    kind = type(value)
    if kind is int:
        return -INT_BOUND < value < INT_BOUND
    return kind is float and guards.dynamic_float_ok(value)


def read(ctx, source, value):
    """The dynamic scalar for a relaxed ``source`` whose value now is ``value``, or
    None when that value cannot be one (a bool, a str, an int beyond +-2**62)."""
    if not in_range(value):
        return None
    tensor = shadow_heap.hoist_scalar(ctx, source, type(value))
    return DynamicScalar(tensor, type(value), {(source.uid(), repr(source))}, source)


def from_inputs(arguments):
    """The traced arguments with every ``call_signature.ScalarInput`` (a relaxed number
    argument's graph input) made a DynamicScalar, in containers too."""
    def convert(value, source, depth=0):
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


def _holds_scalar_input(value, depth=0):
    if type(value) is call_signature.ScalarInput:
        return True
    if depth < 16 and (type(value) in (list, dict) or isinstance(value, tuple)):
        items = value.values() if type(value) is dict else value
        return any(_holds_scalar_input(v, depth + 1) for v in items)
    return False


_NUMERIC_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int8, tf.int16,
                   tf.int32, tf.int64, tf.uint8, tf.uint16, tf.uint32, tf.bool)


def from_tensor(callee, tensor):
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
    value = tf.reshape(tensor, [])
    if callee is bool:
        truth = value if dtype == tf.bool else tf.not_equal(value, tf.zeros([], dtype))
        return DynamicScalar(truth, bool)
    if dtype.is_floating and current().state_dependency(value) is None:   # see _no_underflow
        _assume(tf.logical_not(_subnormal(value)), '%s() of a tensor that is not subnormal '
                '(TF reads those as zero)' % callee.__name__)
    if callee is float:
        return DynamicScalar(tf.cast(value, tf.float64), float)   # exact for every dtype here
    if dtype.is_floating:
        wide = tf.cast(value, tf.float64)
        _assume(tf.logical_and(tf.math.is_finite(wide), tf.abs(wide) < float(INT_BOUND) / 2),
                'int() of a finite tensor within +-2**61')
        return DynamicScalar(tf.cast(wide, tf.int64), int)   # truncates, as int() does
    return DynamicScalar(_checked_int(tf.cast(value, tf.int64), 'int() of a tensor'), int)


_BITS = {tf.float16: (tf.int16, 0x7C00, 0x03FF), tf.bfloat16: (tf.int16, 0x7F80, 0x007F),
         tf.float32: (tf.int32, 0x7F800000, 0x007FFFFF),
         tf.float64: (tf.int64, 0x7FF0000000000000, 0x000FFFFFFFFFFFFF)}


def _subnormal(value):
    """Whether a float scalar is subnormal, read from its bits (integer ops: a
    flush-to-zero CPU mode cannot hide it)."""
    itype, exponent, mantissa = _BITS[value.dtype.base_dtype]
    bits = tf.bitcast(value, itype)
    return tf.logical_and(tf.equal(tf.bitwise.bitwise_and(bits, tf.constant(exponent, itype)), 0),
                          tf.not_equal(tf.bitwise.bitwise_and(bits, tf.constant(mantissa, itype)), 0))


# -- the checks Python makes -------------------------------------------------------

def _assume(condition_tensor, description):
    """A SCALAR assertion, carrying the lineage of the operation being built: when it
    breaks, those numbers are specialized by value again (``JanusFunction._relax``),
    so a domain left for good (a negative exponent) does not fail every call."""
    ctx = current()
    before = len(ctx.assumptions)
    ctx.assume(None, AssumptionKind.SCALAR, condition_tensor, description,
               lineno=_user_line(ctx))
    if len(ctx.assumptions) > before:
        ctx.assumptions[-1].lineage = getattr(ctx, 'scalar_lineage', frozenset())


class _Building:
    """Names the lineage of the operation being built, for its assertions."""

    def __init__(self, lineage):
        self.lineage = frozenset(lineage)

    def __enter__(self):
        ctx = current()
        self.saved = getattr(ctx, 'scalar_lineage', frozenset())
        ctx.scalar_lineage = self.saved | self.lineage

    def __exit__(self, *exc):
        current().scalar_lineage = self.saved


def _user_line(ctx):
    """The line of user code being traced (the innermost converted frame)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code in ctx.code_objects:
            return frame.f_lineno
        frame = frame.f_back
    return None


def _checked_int(tensor, what):
    """An int64 result kept within +-INT_BOUND (Python ints do not wrap)."""
    bound = tf.constant(INT_BOUND, tf.int64)
    _assume(tf.logical_and(tensor < bound, tensor > -bound),
            '%s stays within +-2**62 (Python ints do not wrap)' % what)
    return tensor


def _exact_float(tensor):
    """|int| <= 2**53: its float64 is exact (Python compares and divides ints exactly)."""
    bound = tf.constant(EXACT_FLOAT_INT, tf.int64)
    _assume(tf.logical_and(tensor <= bound, tensor >= -bound),
            'an int mixed with floats stays within +-2**53')
    return tf.cast(tensor, tf.float64)


def _nonzero(tensor, what):
    _assume(tf.not_equal(tensor, tf.zeros([], tensor.dtype)),
            '%s is not zero (Python raises ZeroDivisionError)' % what)


# -- operands ----------------------------------------------------------------------

class _Operand:
    """A number operand: its Python type, its tensor (None: a Python constant)."""

    def __init__(self, value):
        if type(value) is DynamicScalar:
            self.type, self.tensor, self.value = value.type, value.tensor, None
        else:
            self.type, self.tensor, self.value = type(value), None, value

    def as_int(self):
        if self.tensor is None:
            return tf.constant(int(self.value), tf.int64)
        return tf.cast(self.tensor, tf.int64) if self.type is bool else self.tensor

    def as_float(self):
        if self.tensor is None:
            if type(self.value) is int and abs(self.value) > EXACT_FLOAT_INT:
                raise Unsupported(Reason.BIG_INT,
                                  'janus does not mix the int constant %d (beyond 2**53) with '
                                  'a float from outside the call' % self.value)
            return tf.constant(float(self.value), tf.float64)
        if self.type is float:
            return self.tensor
        if self.type is bool:
            return tf.cast(self.tensor, tf.float64)
        return _exact_float(self.tensor)

    def as_bool(self):
        if self.tensor is None:
            return tf.constant(bool(self.value))
        return self.tensor


def _constant_ok(value):
    """A Python constant that can meet a dynamic scalar in the graph."""
    kind = type(value)
    if kind is float:
        return guards.dynamic_float_ok(value)   # TF reads a subnormal operand as zero
    return kind in _NUMBER and (kind is not int or -INT_BOUND < value < INT_BOUND)


def _result_kind(op, left, right):
    """Python's result type of ``left op right`` for int/float/bool operands."""
    kinds = {left.type, right.type}
    if op in ('BitAnd', 'BitOr', 'BitXor') and kinds == {bool}:
        return bool
    if float in kinds or op == 'Div':
        return float
    return int


# -- binary operators ----------------------------------------------------------------

def binop(op, left, right, lineage):
    """``left op right`` with at least one dynamic scalar; the other a number or tensor."""
    with _Building(lineage):
        return _binop(op, left, right, lineage)


def _binop(op, left, right, lineage):
    for value in (left, right):
        if not (type(value) is DynamicScalar or _constant_ok(value)):
            if isinstance(value, (tf.Tensor, tf.Variable)):
                return _with_tensor(op, left, right, lineage)
            need(lineage, 'an operator between a number and a %s'
                             % type(value).__name__)
    a, b = _Operand(left), _Operand(right)
    kind = _result_kind(op, a, b)
    build = _INT_OPS.get(op) if kind is int else _FLOAT_OPS.get(op)
    if kind is bool:
        build = _BOOL_OPS.get(op)
    if build is None:
        need(lineage, 'the operator %s on a number from outside the call' % op)
    return DynamicScalar(build(a, b), kind, lineage)


def _int_add(a, b):
    return _checked_int(a.as_int() + b.as_int(), 'an int sum')


def _int_sub(a, b):
    return _checked_int(a.as_int() - b.as_int(), 'an int difference')


def _int_mul(a, b):
    x, y = a.as_int(), b.as_int()
    estimate = tf.abs(tf.cast(x, tf.float64) * tf.cast(y, tf.float64))
    _assume(estimate < float(INT_BOUND) / 2, 'an int product stays within +-2**61')
    return x * y


def _safe_divisor(y):
    """``y`` asserted nonzero, and 1 where it is zero: TF's integer division raises on a
    zero divisor, racing the assertion (which decides: the call re-runs imperatively)."""
    _nonzero(y, 'the divisor')
    return tf.where(tf.equal(y, 0), tf.ones_like(y), y)


def _int_floordiv(a, b):
    return tf.math.floordiv(a.as_int(), _safe_divisor(b.as_int()))   # floors, as Python's //


def _int_mod(a, b):
    return tf.math.floormod(a.as_int(), _safe_divisor(b.as_int()))   # the divisor's sign


def _int_pow(a, b):
    x, y = a.as_int(), b.as_int()
    _assume(y >= 0, 'an int exponent is not negative (Python gives a float)')
    y = tf.maximum(y, tf.zeros([], tf.int64))   # TF raises on a negative one: the check says
    estimate = tf.abs(tf.pow(tf.cast(x, tf.float64), tf.cast(y, tf.float64)))
    _assume(estimate < float(INT_BOUND) / 2, 'an int power stays within +-2**61')
    return tf.pow(x, y)


def _divide(x, y):
    """``x / y`` of float64s, correctly rounded.  Not ``RealDiv``: grappler's constant
    folding turns a division by a constant into a multiplication by its reciprocal
    (5 / 3 gives 1.6666666666666665); it leaves ``DivNoNan`` alone, and the divisor
    is asserted nonzero first, so the two agree."""
    return tf.math.divide_no_nan(x, y)


def _float_div(a, b):
    x, y = a.as_float(), b.as_float()
    _nonzero(y, 'the divisor')
    return _no_underflow(_divide(x, y), tf.equal(x, 0.0))


def _python_float_divmod(x, y):
    """Python's float ``divmod`` (Objects/floatobject.c), op for op: ``//`` and ``%``
    of floats differ from floor(x / y) (``1 // 0.1`` is 9.0)."""
    zero = tf.zeros([], tf.float64)
    mod = tf.truncatemod(x, y)                            # C fmod
    div = _divide(x - mod, y)
    adjust = tf.logical_and(tf.not_equal(mod, zero), tf.not_equal(y < zero, mod < zero))
    mod = tf.where(adjust, mod + y, tf.where(tf.equal(mod, zero),
                                             _copysign(zero, y), mod))
    div = tf.where(adjust, div - 1.0, div)
    floor = tf.math.floor(div)
    floor = tf.where(div - floor > 0.5, floor + 1.0, floor)
    floor = tf.where(tf.equal(div, zero), _copysign(zero, _divide(x, y)), floor)
    return floor, mod


def _copysign(magnitude, sign):
    negative = tf.logical_or(sign < 0, tf.logical_and(tf.equal(sign, 0.0),
                                                      tf.math.reciprocal(sign) < 0))
    return tf.where(negative, -tf.abs(magnitude), tf.abs(magnitude))


def _float_floordiv(a, b):
    y = b.as_float()
    _nonzero(y, 'the divisor')
    _assume(tf.abs(y) >= 2.0 ** -900, 'a float divisor of // or % is not tiny (no '
                                      'subnormal remainders)')
    return _python_float_divmod(a.as_float(), y)[0]


def _float_mod(a, b):
    y = b.as_float()
    _nonzero(y, 'the divisor')
    _assume(tf.abs(y) >= 2.0 ** -900, 'a float divisor of // or % is not tiny (no '
                                      'subnormal remainders)')
    return _python_float_divmod(a.as_float(), y)[1]


def _float_pow(a, b):
    x, y = a.as_float(), b.as_float()
    _assume(x > 0, 'a float power has a positive base (Python raises or gives a complex '
                   'otherwise)')
    result = _python_call(operator.pow, [x, y], float)
    _assume(tf.math.is_finite(result), 'a float power does not overflow (Python raises '
                                       'OverflowError)')
    return result


_INT_OPS = {'Add': _int_add, 'Sub': _int_sub, 'Mult': _int_mul, 'FloorDiv': _int_floordiv,
            'Mod': _int_mod, 'Pow': _int_pow}
def _no_underflow(result, exact_zero):
    """TF's CPU kernels flush subnormal results to zero (FTZ), Python keeps them: a
    result is kept only if it is not below the normal range, or it is a zero the
    operands make exact (``exact_zero``, a bool tensor)."""
    if current().state_dependency(result) is not None:
        # Computed from a value a state change made (a branch that assigned a
        # variable): no assertion can run before that change.  Left unchecked: a
        # subnormal result there would be flushed (named in DESIGN.md).
        return result
    tiny = tf.constant(TINY, tf.float64)
    zero = tf.equal(result, 0.0)
    _assume(tf.logical_or(tf.logical_and(tf.logical_not(zero), tf.logical_not(tf.abs(result)
                                                                                < tiny)),
                          tf.logical_and(zero, exact_zero)),
            'a float result stays clear of the subnormal range (TF flushes it to zero)')
    return result


def _float_add(a, b):
    x, y = a.as_float(), b.as_float()
    return _no_underflow(x + y, tf.equal(x, -y))


def _float_sub(a, b):
    x, y = a.as_float(), b.as_float()
    return _no_underflow(x - y, tf.equal(x, y))


def _float_mul(a, b):
    x, y = a.as_float(), b.as_float()
    return _no_underflow(x * y, tf.logical_or(tf.equal(x, 0.0), tf.equal(y, 0.0)))


_FLOAT_OPS = {'Add': _float_add,
              'Sub': _float_sub,
              'Mult': _float_mul,
              'Div': _float_div, 'FloorDiv': _float_floordiv, 'Mod': _float_mod,
              'Pow': _float_pow}
_BOOL_OPS = {'BitAnd': lambda a, b: tf.logical_and(a.as_bool(), b.as_bool()),
             'BitOr': lambda a, b: tf.logical_or(a.as_bool(), b.as_bool()),
             'BitXor': lambda a, b: tf.math.logical_xor(a.as_bool(), b.as_bool())}


# -- comparisons and unary operators ---------------------------------------------------

_COMPARE = {'Eq': tf.equal, 'NotEq': tf.not_equal, 'Lt': tf.less, 'LtE': tf.less_equal,
            'Gt': tf.greater, 'GtE': tf.greater_equal}


def compare(op, left, right, lineage):
    """``left op right`` of numbers, at least one dynamic: a dynamic bool."""
    with _Building(lineage):
        return _compare(op, left, right, lineage)


def _compare(op, left, right, lineage):
    if op not in _COMPARE:
        need(lineage, 'the comparison %s on a number from outside the call' % op)
    for value in (left, right):
        if not (type(value) is DynamicScalar or _constant_ok(value)):
            if isinstance(value, (tf.Tensor, tf.Variable)):
                return _with_tensor(op, left, right, lineage, compare=True)
            need(lineage, 'comparing a number with a %s' % type(value).__name__)
    a, b = _Operand(left), _Operand(right)
    if float in (a.type, b.type):
        x, y = a.as_float(), b.as_float()
    else:
        x, y = a.as_int(), b.as_int()
    return DynamicScalar(_COMPARE[op](x, y), bool, lineage)


def unary(op, value):
    a = _Operand(value)
    if op == 'UAdd':
        return value if value.type is not bool else DynamicScalar(a.as_int(), int, value.lineage)
    if op == 'USub':
        if value.type is float:
            return DynamicScalar(-value.tensor, float, value.lineage)
        return DynamicScalar(-a.as_int(), int, value.lineage)   # within +-2**62 already
    if op == 'Not':
        return DynamicScalar(tf.logical_not(condition(value)), bool, value.lineage)
    if op == 'Invert' and value.type is not float:
        return DynamicScalar(-a.as_int() - 1, int, value.lineage)
    value.specialize('the operator %s on a number from outside the call' % op)


# -- with tensors: eager's weak typing ---------------------------------------------------

# (Python type, tensor dtype) pairs whose conversion graph casts reproduce exactly:
# ints wrap into int32 as eager's conversion does, go to float32 through a float64
# as eager's do; floats round to nearest.
_EXACT_CASTS = {(int, tf.int32), (int, tf.int64), (int, tf.float32), (int, tf.float64),
                (float, tf.float32), (float, tf.float64), (bool, tf.bool)}


def to_tensor(value, dtype=None):
    """The tensor eager's ``convert_to_tensor(value, dtype)`` gives for this number."""
    with _Building(value.lineage):
        return _to_tensor(value, dtype)


def _to_tensor(value, dtype):
    # What eager's conversion is asked for: part of its cache's key.
    key_dtype = None if dtype is None else tf.as_dtype(dtype).base_dtype
    constant = tf.get_static_value(value.tensor)
    if constant is not None and value.type is float:   # a lifted constant (a Python zero)
        return _eager_constant(float(constant), key_dtype)
    if dtype is None:
        if value.type is int:
            bound = tf.constant(2 ** 31, tf.int64)
            _assume(tf.logical_and(value.tensor < bound, value.tensor >= -bound),
                    'an int converted to a tensor fits int32 (eager picks int64 otherwise)')
            return tf.cast(value.tensor, tf.int32)
        if value.type is float:
            big = tf.constant(float(np.finfo(np.float32).max), tf.float64)
            x = value.tensor
            _assume(tf.logical_or(tf.abs(x) <= big, tf.logical_not(tf.math.is_finite(x))),
                    'a float converted to a tensor fits float32 (eager raises otherwise)')
        dtype = tf.float32 if value.type is float else tf.bool
    dtype = tf.as_dtype(dtype).base_dtype
    if (value.type, dtype) not in _EXACT_CASTS:
        value.specialize('converting a Python %s to a %s tensor' % (value.type.__name__,
                                                                    dtype.name))
    if value.type is float and dtype == tf.float32 \
            and current().state_dependency(value.tensor) is None:   # see _no_underflow
        _assume(tf.logical_or(tf.equal(value.tensor, 0.0), tf.logical_not(
            tf.abs(value.tensor) < 2.0 ** -120)), 'a float converted to float32 stays '
            'clear of its subnormal range (TF flushes it to zero)')
    if value.type is int and dtype == tf.float32:
        # Eager converts an int to float32 through a float64 (two roundings).
        return tf.cast(tf.cast(value.tensor, tf.float64), tf.float32)
    if value.type is float:
        return _converted_float(value, key_dtype, dtype)
    return tf.cast(value.tensor, dtype)


def _converted_float(value, key_dtype, dtype):
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
        if ctx.state_dependency(value.tensor) is None:   # see _no_underflow
            _assume(tf.logical_not(zero), 'a float converted to a tensor under tf.device is '
                    'not zero (eager\'s conversion cache decides the sign of a zero)')
        return cast
    if value.origin is not None:   # read as it is: eager's conversion of it, at call time
        eager_zero = shadow_heap.hoist_eager_zero(ctx, value.origin, key_dtype, dtype)
    else:   # computed by the call: eager's conversion of it, by Python when it is known
        key = (id(tf.compat.v1.get_default_graph()), value.tensor.ref(), key_dtype)
        if key not in ctx.zero_signs:   # converted again: eager's cache gives the same
            ctx.zero_signs[key] = _python_call(_ZeroSign(key_dtype), [value.tensor], float)
        eager_zero = tf.cast(ctx.zero_signs[key], dtype)
    return tf.where(zero, eager_zero, cast)


class _ZeroSign:
    """Python's part of converting a computed float: for a zero, the sign eager's
    conversion gives it (and teaches the cache, as eager would); else unused."""

    def __init__(self, key_dtype):
        self.key_dtype = key_dtype
        self.__name__ = 'the conversion of a float to a tensor'

    def __call__(self, number):
        if number != 0.0:
            return 0.0
        converted = tf.convert_to_tensor(number, dtype=self.key_dtype)
        return math.copysign(0.0, float(converted.numpy()))


def _eager_constant(number, key_dtype):
    """A Python float constant converted as eager converts it (its rounding, its
    exceptions, its cache's sign of zero), baked in: the cache's entry for a zero,
    once made, stays."""
    with tf.init_scope():
        converted = tf.convert_to_tensor(number, dtype=key_dtype)
    return tf.constant(converted.numpy(), dtype=converted.dtype)


def eager_zeros(callee, args, kwargs):
    """``tf.maximum(x, 0.0)``: a Python float zero given to one of TF's elementwise
    functions converts through eager's cache, which decides its sign; passed as a
    constant DynamicScalar, TF converts it through ``to_tensor``, as eagerly."""
    def lifted(v):
        return lift(v) if type(v) is float and v == 0.0 else v
    new_args, new_kwargs = [lifted(v) for v in args], {k: lifted(v) for k, v in kwargs.items()}
    if all(a is b for a, b in zip(new_args, args)) and all(
            new_kwargs[k] is kwargs[k] for k in kwargs):
        return args, kwargs
    if not library_call_allows(callee, new_args, new_kwargs):
        return args, kwargs
    return new_args, new_kwargs


def _in_device_scope():
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


def _with_tensor(op, left, right, lineage, compare=False):
    """``tensor op number`` / ``number op tensor``: the number takes the tensor's dtype,
    as the tensor's own operator converts a Python number eagerly."""
    tensor = left if isinstance(left, (tf.Tensor, tf.Variable)) else right
    dtype = tensor.dtype.base_dtype

    def convert(value):
        if type(value) is DynamicScalar:
            return to_tensor(value, dtype)
        return value
    fn = _TENSOR_COMPARE.get(op) if compare else _TENSOR_BINARY.get(op)
    if fn is None:
        need(lineage, 'the operator %s between a number and a tensor' % op)
    return fn(convert(left), convert(right))


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
_VARIABLE_METHODS = ('assign', 'assign_add', 'assign_sub')


def library_call_allows(callee, args, kwargs):
    """Whether ``callee`` may get the dynamic scalars in ``args``/``kwargs`` as they are
    (each a top-level argument, never inside a list: a list of numbers is a shape)."""
    self_object = getattr(callee, '__self__', None)
    if _is_variable(self_object) and getattr(callee, '__name__', '') in _VARIABLE_METHODS:
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


def _is_variable(value):
    """A ``tf.Variable`` or a Keras 3 ``keras.Variable`` (an optimizer's learning rate)."""
    if isinstance(value, tf.Variable):
        return True
    keras_variables = sys.modules.get('keras.src.backend.common.variables')
    return keras_variables is not None and isinstance(value, keras_variables.Variable)


def contains(key, items, lineage):
    """``key in items`` for a dynamic number and a container of numbers: Python's
    ``any(key is e or key == e)``, as an OR of equalities (a NaN key, equal to nothing
    but possibly identical to an item, falls back)."""
    if not all(type(item) is DynamicScalar or _constant_ok(item) for item in items):
        need(lineage, '`in` on a container holding other things than numbers')
    if key.type is float:
        _assume(tf.equal(key.tensor, key.tensor), 'a number looked up with `in` is not NaN')
    found = tf.constant(False)
    for item in items:
        found = tf.logical_or(found, compare('Eq', key, item, lineage).tensor)
    return DynamicScalar(found, bool, lineage)


def holds_dynamic(value, depth=0):
    if type(value) is DynamicScalar:
        return True
    if depth < 8 and (type(value) in (list, dict) or isinstance(value, tuple)):
        items = value.values() if type(value) is dict else value
        return any(holds_dynamic(v, depth + 1) for v in items)
    return False


def lineage_deep(values, depth=0):
    """The lineage of every dynamic scalar in ``values`` (containers walked)."""
    out = frozenset()
    for value in values:
        if type(value) is DynamicScalar:
            out |= value.lineage
        elif depth < 8 and (type(value) in (list, dict) or isinstance(value, tuple)):
            items = value.values() if type(value) is dict else value
            out |= lineage_deep(items, depth + 1)
    return out


def _convert_for_tf(value, dtype=None, name=None, as_ref=False):
    return to_tensor(value, dtype)


tf.register_tensor_conversion_function(DynamicScalar, _convert_for_tf)


# -- builtins and math -----------------------------------------------------------------------

# Functions whose normal-range inputs can have a subnormal result (flushed to zero in
# TF's threads): their zero results re-run imperatively.
_UNDERFLOWING = frozenset({math.exp, math.pow, math.ldexp, operator.pow, math.erfc}
                          | ({math.exp2} if hasattr(math, 'exp2') else set()))


def _python_call(fn, tensors, kind):
    """``fn(*values)`` run by Python itself when the graph runs: eager's exact numbers
    (TF's own transcendental kernels may differ in the last bit)."""
    def run(*values):
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
    functions = current().host_functions
    if functions is not None:   # graphgen/hostcheck.py may run it before the graph instead
        functions[out.op] = (run, DTYPES[kind])
    return as_scalar(out)


_MATH_FLOAT = {math.sqrt, math.exp, math.log, math.log2, math.log10, math.cos, math.sin,
               math.tan, math.tanh, math.atan, math.exp2 if hasattr(math, 'exp2') else math.exp,
               math.pow, math.fabs, math.hypot, math.atan2, math.log1p, math.expm1,
               math.copysign, math.fmod, math.asin, math.acos, math.sinh, math.cosh,
               math.atanh, math.asinh, math.acosh, math.erf, math.erfc, math.radians,
               math.degrees}
_MATH_INT = {math.floor, math.ceil, math.trunc}


def builtin(callee, args, lineage):
    """``callee(*args)`` for a builtin or ``math`` function of numbers, at least one
    dynamic; ``NotImplemented`` when janus does not model it (the caller specializes)."""
    with _Building(lineage):
        return _builtin(callee, args, lineage)


def _builtin(callee, args, lineage):
    if not all(type(a) is DynamicScalar or _constant_ok(a) for a in args):
        return NotImplemented
    operands = [_Operand(a) for a in args]
    if callee is float and len(args) == 1:
        return DynamicScalar(operands[0].as_float() if args[0].type is not int
                             else tf.cast(operands[0].as_int(), tf.float64), float, lineage)
    if callee is int and len(args) == 1:
        return _to_int(args[0], lineage)
    if callee is bool and len(args) == 1:
        return DynamicScalar(condition(args[0]), bool, lineage)
    if callee is abs and len(args) == 1:
        a = operands[0]
        kind = int if a.type is bool else a.type
        return DynamicScalar(tf.abs(a.as_float() if kind is float else a.as_int()), kind,
                             lineage)
    if callee in (max, min) and len(args) >= 2:
        return _extreme(callee, args, lineage)
    if callee is round and len(args) == 1:
        a = args[0]
        if a.type is not float:
            return builtin(int, args, lineage)
        return _checked_round(a, lineage)
    if callee is round and len(args) == 2 and type(args[1]) is int and is_dynamic(args[0]):
        digits = args[1]
        if args[0].type is not float:   # round(True, 1) is the int 1
            if digits < 0:
                need(lineage, 'round() of an int to tens')
            return DynamicScalar(operands[0].as_int(), int, lineage)
        # CPython rounds floats to decimal digits correctly (dtoa): run its round.
        return DynamicScalar(_python_call(lambda v: round(v, digits), [args[0].tensor], float),
                             float, lineage)
    if callee is divmod and len(args) == 2:
        return (binop('FloorDiv', args[0], args[1], lineage),
                binop('Mod', args[0], args[1], lineage))
    if callee in _MATH_INT and len(args) == 1 and args[0].type is not float:
        return DynamicScalar(operands[0].as_int(), int, lineage)   # floor(int) is the int
    if callee in _MATH_FLOAT or callee in _MATH_INT:
        kind = int if callee in _MATH_INT else float
        tensors = [a.as_float() if a.type is not int else tf.cast(a.as_int(), tf.float64)
                   for a in operands]
        if kind is int:
            _assume(tf.math.is_finite(tensors[0]), '%s of a finite number'
                    % callee.__name__)
            _assume(tf.abs(tensors[0]) < float(INT_BOUND) / 2,
                    '%s of a number within +-2**61' % callee.__name__)
        # Python raises ValueError/OverflowError outside a function's domain; the graph's
        # run then fails before any state changes and the call re-runs imperatively.
        return DynamicScalar(_python_call(callee, tensors, kind), kind, lineage)
    return NotImplemented


def _to_int(value, lineage):
    if value.type is not float:
        return DynamicScalar(_Operand(value).as_int(), int, lineage)
    x = value.tensor
    _assume(tf.logical_and(tf.math.is_finite(x), tf.abs(x) < float(INT_BOUND) / 2),
            'int() of a finite float within +-2**61')
    return DynamicScalar(tf.cast(x, tf.int64), int, lineage)   # truncates, as int() does


def _checked_round(value, lineage):
    x = value.tensor
    _assume(tf.logical_and(tf.math.is_finite(x), tf.abs(x) < float(INT_BOUND) / 2),
            'round() of a finite float within +-2**61')
    return DynamicScalar(tf.cast(tf.math.round(x), tf.int64), int, lineage)   # half to even


def _extreme(callee, args, lineage):
    """``max``/``min`` as Python computes them: the first extreme operand, by ``>``/``<``
    (NaN never wins a comparison), and that operand's type."""
    kinds = {type(a) if type(a) is not DynamicScalar else a.type for a in args}
    if len(kinds) != 1:
        need(lineage, '%s() of numbers of different types (its result type '
                         'depends on the values)' % callee.__name__)
    kind = kinds.pop()
    if kind is bool:
        need(lineage, '%s() of bools' % callee.__name__)
    operands = [_Operand(a) for a in args]
    pick = (lambda o: o.as_float()) if kind is float else (lambda o: o.as_int())
    best = pick(operands[0])
    better = tf.greater if callee is max else tf.less
    for operand in operands[1:]:
        candidate = pick(operand)
        best = tf.where(better(candidate, best), candidate, best)
    return DynamicScalar(best, kind, lineage)
