"""Arithmetic, comparisons and builtins on dynamic scalars, with Python's meaning.

Needs ``scalars`` (``DynamicScalar``, the checks Python makes, the mixing with
tensors).  ``binop``, ``compare``, ``unary`` and ``builtin`` build the graph
ops for an operation on at least one dynamic scalar, following Python's result
types, with a ``Janus>Assert`` for every domain Python guards (``scalars.py``'s
docstring has the rules); an operation janus cannot model exactly needs the
numbers' values (``tracing.need``).
"""
from __future__ import annotations
import math
import operator
import typing

import tensorflow as tf

from janus import guards
from janus.reasons import Reason
from janus.graph import graph_analysis
from janus.values import protocol, scalars
from janus.values.protocol import StandIn
from janus.values.scalars import (EXACT_FLOAT_INT, INT_BOUND, NUMBER, TINY, Building,
                                   DynamicScalar, assume, checked_int, condition, exact_float,
                                   nonzero, python_call, with_tensor)
from janus.trace.trace_context import Unsupported
from janus.trace.tracing import current, need


# -- operands ----------------------------------------------------------------------

class _Operand:
    """A number operand: its Python type, its tensor (None: a Python constant)."""

    def __init__(self, value: typing.Any) -> None:
        self.value: typing.Any
        kind = protocol.graph_number_type(value)
        if kind is not None:
            self.type, self.tensor, self.value = kind, protocol.graph_tensor(value), None
        else:
            self.type, self.tensor, self.value = type(value), None, value

    def as_int(self) -> tf.Tensor:
        if self.tensor is None:
            return tf.constant(int(self.value), tf.int64)
        return tf.cast(self.tensor, tf.int64) if self.type is bool else self.tensor

    def as_float(self) -> tf.Tensor:
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
        return exact_float(self.tensor)

    def as_bool(self) -> tf.Tensor:
        if self.tensor is None:
            return tf.constant(bool(self.value))
        return self.tensor


def _operand_ok(value: typing.Any) -> bool:
    """A dynamic number, or a Python constant that can meet one in the graph."""
    kind = type(value)
    if kind is DynamicScalar:
        return True
    if kind is float:
        return guards.dynamic_float_ok(value)   # TF reads a subnormal operand as zero
    return kind in NUMBER and (kind is not int or -INT_BOUND < value < INT_BOUND)


def _result_kind(op: str, left: _Operand, right: _Operand) -> type:
    """Python's result type of ``left op right`` for int/float/bool operands."""
    kinds = {left.type, right.type}
    if op in ('BitAnd', 'BitOr', 'BitXor') and kinds == {bool}:
        return bool
    if float in kinds or op == 'Div':
        return float
    return int


# -- binary operators ----------------------------------------------------------------

def _taken(value: typing.Any) -> typing.Any:
    """The other operand of a number's operator, as the operators take any operand
    (``observe._plain``): a stand-in may refuse (text formatted after the run); an
    outside container is its guarded contents (an outside set refuses: its order)."""
    if isinstance(value, StandIn):
        value.trace_operand()   # refuses, or NOT_MODELLED: taken as it is
    return current().contents(value)


def binop(op: str, left: typing.Any, right: typing.Any,
          lineage: typing.AbstractSet[tuple]) -> typing.Any:
    """``left op right`` with at least one dynamic scalar; the other a number or tensor."""
    with Building(lineage):
        return _binop(op, left, right, lineage)


def _operator_binop(op: str, left: typing.Any, right: typing.Any,
                    lineage: typing.AbstractSet[tuple]) -> typing.Any:
    """``binop`` of the operands converted code gives (``DynamicScalar.trace_binary``)."""
    return binop(op, _taken(left), _taken(right), lineage)


def _operator_compare(op: str, left: typing.Any, right: typing.Any,
                      lineage: typing.AbstractSet[tuple]) -> typing.Any:
    """``compare`` of the operands converted code gives (``DynamicScalar.trace_binary``)."""
    return compare(op, _taken(left), _taken(right), lineage)


def _binop(op: str, left: typing.Any, right: typing.Any,
           lineage: typing.AbstractSet[tuple]) -> typing.Any:
    for value in (left, right):
        if not _operand_ok(value):
            if isinstance(value, (tf.Tensor, tf.Variable)):
                return with_tensor(op, left, right, lineage)
            need(lineage, 'an operator between a number and a %s'
                             % type(value).__name__)
    a, b = _Operand(left), _Operand(right)
    kind = _result_kind(op, a, b)
    build = _INT_OPS.get(op) if kind is int else _FLOAT_OPS.get(op)
    if kind is bool:
        build = _BOOL_OPS.get(op)
    if build is None:
        need(lineage, 'the operator %s on a number from outside the call' % op)
    return DynamicScalar(build(a, b), kind, lineage)   # type: ignore[misc]  # need() raised on None


def _int_add(a: _Operand, b: _Operand) -> tf.Tensor:
    return checked_int(a.as_int() + b.as_int(), 'an int sum')


def _int_sub(a: _Operand, b: _Operand) -> tf.Tensor:
    return checked_int(a.as_int() - b.as_int(), 'an int difference')


def _int_mul(a: _Operand, b: _Operand) -> tf.Tensor:
    x, y = a.as_int(), b.as_int()
    estimate = tf.abs(tf.cast(x, tf.float64) * tf.cast(y, tf.float64))
    assume(estimate < float(INT_BOUND) / 2, 'an int product stays within +-2**61')
    return x * y


def _safe_divisor(y: tf.Tensor) -> tf.Tensor:
    """``y`` asserted nonzero, and 1 where it is zero: TF's integer division raises on a
    zero divisor, racing the assertion (which decides: the call re-runs imperatively)."""
    nonzero(y, 'the divisor')
    return tf.where(tf.equal(y, 0), tf.ones_like(y), y)


def _int_floordiv(a: _Operand, b: _Operand) -> tf.Tensor:
    return tf.math.floordiv(a.as_int(), _safe_divisor(b.as_int()))   # floors, as Python's //


def _int_mod(a: _Operand, b: _Operand) -> tf.Tensor:
    return tf.math.floormod(a.as_int(), _safe_divisor(b.as_int()))   # the divisor's sign


def _int_pow(a: _Operand, b: _Operand) -> tf.Tensor:
    x, y = a.as_int(), b.as_int()
    assume(y >= 0, 'an int exponent is not negative (Python gives a float)')
    y = tf.maximum(y, tf.zeros([], tf.int64))   # TF raises on a negative one: the check says
    estimate = tf.abs(tf.pow(tf.cast(x, tf.float64), tf.cast(y, tf.float64)))
    assume(estimate < float(INT_BOUND) / 2, 'an int power stays within +-2**61')
    return tf.pow(x, y)


def _divide(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """``x / y`` of float64s, correctly rounded.  Not ``RealDiv``: grappler's constant
    folding turns a division by a constant into a multiplication by its reciprocal
    (5 / 3 gives 1.6666666666666665); it leaves ``DivNoNan`` alone, and the divisor
    is asserted nonzero first, so the two agree."""
    return tf.math.divide_no_nan(x, y)


def _float_div(a: _Operand, b: _Operand) -> tf.Tensor:
    x, y = a.as_float(), b.as_float()
    nonzero(y, 'the divisor')
    return _no_underflow(_divide(x, y), tf.equal(x, 0.0))


def _python_float_divmod(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
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


def _copysign(magnitude: tf.Tensor, sign: tf.Tensor) -> tf.Tensor:
    negative = tf.logical_or(sign < 0, tf.logical_and(tf.equal(sign, 0.0),
                                                      tf.math.reciprocal(sign) < 0))
    return tf.where(negative, -tf.abs(magnitude), tf.abs(magnitude))


def _float_floordiv(a: _Operand, b: _Operand) -> tf.Tensor:
    y = b.as_float()
    nonzero(y, 'the divisor')
    assume(tf.abs(y) >= 2.0 ** -900, 'a float divisor of // or % is not tiny (no '
                                      'subnormal remainders)')
    return _python_float_divmod(a.as_float(), y)[0]


def _float_mod(a: _Operand, b: _Operand) -> tf.Tensor:
    y = b.as_float()
    nonzero(y, 'the divisor')
    assume(tf.abs(y) >= 2.0 ** -900, 'a float divisor of // or % is not tiny (no '
                                      'subnormal remainders)')
    return _python_float_divmod(a.as_float(), y)[1]


def _float_pow(a: _Operand, b: _Operand) -> tf.Tensor:
    x, y = a.as_float(), b.as_float()
    assume(x > 0, 'a float power has a positive base (Python raises or gives a complex '
                   'otherwise)')
    result = python_call(operator.pow, [x, y], float)
    assume(tf.math.is_finite(result), 'a float power does not overflow (Python raises '
                                       'OverflowError)')
    return result


_INT_OPS = {'Add': _int_add, 'Sub': _int_sub, 'Mult': _int_mul, 'FloorDiv': _int_floordiv,
            'Mod': _int_mod, 'Pow': _int_pow}
def _no_underflow(result: tf.Tensor, exact_zero: tf.Tensor) -> tf.Tensor:
    """TF's CPU kernels flush subnormal results to zero (FTZ), Python keeps them: a
    result is kept only if it is not below the normal range, or it is a zero the
    operands make exact (``exact_zero``, a bool tensor)."""
    if graph_analysis.depends_on_state_change(result) is not None:
        # Computed from a value a state change made (a branch that assigned a
        # variable): no assertion can run before that change.  Left unchecked: a
        # subnormal result there would be flushed (named in DESIGN.md).
        return result
    tiny = tf.constant(TINY, tf.float64)
    zero = tf.equal(result, 0.0)
    assume(tf.logical_or(tf.logical_and(tf.logical_not(zero), tf.logical_not(tf.abs(result)
                                                                                < tiny)),
                          tf.logical_and(zero, exact_zero)),
            'a float result stays clear of the subnormal range (TF flushes it to zero)')
    return result


def _float_add(a: _Operand, b: _Operand) -> tf.Tensor:
    x, y = a.as_float(), b.as_float()
    return _no_underflow(x + y, tf.equal(x, -y))


def _float_sub(a: _Operand, b: _Operand) -> tf.Tensor:
    x, y = a.as_float(), b.as_float()
    return _no_underflow(x - y, tf.equal(x, y))


def _float_mul(a: _Operand, b: _Operand) -> tf.Tensor:
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


def compare(op: str, left: typing.Any, right: typing.Any,
            lineage: typing.AbstractSet[tuple]) -> typing.Any:
    """``left op right`` of numbers, at least one dynamic: a dynamic bool."""
    with Building(lineage):
        return _compare(op, left, right, lineage)


def _compare(op: str, left: typing.Any, right: typing.Any,
             lineage: typing.AbstractSet[tuple]) -> typing.Any:
    if op not in _COMPARE:
        need(lineage, 'the comparison %s on a number from outside the call' % op)
    for value in (left, right):
        if not _operand_ok(value):
            if isinstance(value, (tf.Tensor, tf.Variable)):
                return with_tensor(op, left, right, lineage, compare=True)
            need(lineage, 'comparing a number with a %s' % type(value).__name__)
    a, b = _Operand(left), _Operand(right)
    if float in (a.type, b.type):
        x, y = a.as_float(), b.as_float()
    else:
        x, y = a.as_int(), b.as_int()
    return DynamicScalar(_COMPARE[op](x, y), bool, lineage)


def unary(op: str, value: DynamicScalar) -> DynamicScalar:   # type: ignore[return]  # need()
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


def builtin(callee: typing.Callable, args: typing.Sequence,
            lineage: typing.AbstractSet[tuple]) -> typing.Any:
    """``callee(*args)`` for a builtin or ``math`` function of numbers, at least one
    dynamic; ``NotImplemented`` when janus does not model it (the caller specializes)."""
    with Building(lineage):
        return _builtin(callee, args, lineage)


def _builtin(callee: typing.Callable, args: typing.Sequence,
             lineage: typing.AbstractSet[tuple]) -> typing.Any:
    if not all(map(_operand_ok, args)):
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
    if callee is round and len(args) == 2 and type(args[1]) is int:
        # ``args[0]`` is the dynamic one: ``trace_builtin`` asks a number among the args
        digits = args[1]
        if args[0].type is not float:   # round(True, 1) is the int 1
            if digits < 0:
                need(lineage, 'round() of an int to tens')
            return DynamicScalar(operands[0].as_int(), int, lineage)
        # CPython rounds floats to decimal digits correctly (dtoa): run its round.
        return DynamicScalar(python_call(lambda v: round(v, digits), [args[0].tensor], float),
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
            assume(tf.math.is_finite(tensors[0]), '%s of a finite number'
                    % callee.__name__)
            assume(tf.abs(tensors[0]) < float(INT_BOUND) / 2,
                    '%s of a number within +-2**61' % callee.__name__)
        # Python raises ValueError/OverflowError outside a function's domain; the graph's
        # run then fails before any state changes and the call re-runs imperatively.
        return DynamicScalar(python_call(callee, tensors, kind), kind, lineage)
    return NotImplemented


def _to_int(value: typing.Any, lineage: typing.AbstractSet[tuple]) -> DynamicScalar:
    if value.type is not float:
        return DynamicScalar(_Operand(value).as_int(), int, lineage)
    x = value.tensor
    assume(tf.logical_and(tf.math.is_finite(x), tf.abs(x) < float(INT_BOUND) / 2),
            'int() of a finite float within +-2**61')
    return DynamicScalar(tf.cast(x, tf.int64), int, lineage)   # truncates, as int() does


def _checked_round(value: DynamicScalar, lineage: typing.AbstractSet[tuple]) -> DynamicScalar:
    x = value.tensor
    assume(tf.logical_and(tf.math.is_finite(x), tf.abs(x) < float(INT_BOUND) / 2),
            'round() of a finite float within +-2**61')
    return DynamicScalar(tf.cast(tf.math.round(x), tf.int64), int, lineage)   # half to even


def _extreme(callee: typing.Callable, args: typing.Sequence,
             lineage: typing.AbstractSet[tuple]) -> DynamicScalar:
    """``max``/``min`` as Python computes them: the first extreme operand, by ``>``/``<``
    (NaN never wins a comparison), and that operand's type."""
    kinds = {_Operand(a).type for a in args}
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


def contains(key: DynamicScalar, items: typing.Iterable,
             lineage: typing.AbstractSet[tuple]) -> DynamicScalar:
    """``key in items`` for a dynamic number and a container of numbers: Python's
    ``any(key is e or key == e)``, as an OR of equalities (a NaN key, equal to nothing
    but possibly identical to an item, falls back)."""
    if not all(map(_operand_ok, items)):
        need(lineage, '`in` on a container holding other things than numbers')
    if key.type is float:
        assume(tf.equal(key.tensor, key.tensor), 'a number looked up with `in` is not NaN')
    found = tf.constant(False)
    for item in items:
        found = tf.logical_or(found, compare('Eq', key, item, lineage).tensor)
    return DynamicScalar(found, bool, lineage)


_MATH_FLOAT = {math.sqrt, math.exp, math.log, math.log2, math.log10, math.cos, math.sin,
               math.tan, math.tanh, math.atan, math.exp2 if hasattr(math, 'exp2') else math.exp,
               math.pow, math.fabs, math.hypot, math.atan2, math.log1p, math.expm1,
               math.copysign, math.fmod, math.asin, math.acos, math.sinh, math.cosh,
               math.atanh, math.asinh, math.acosh, math.erf, math.erfc, math.radians,
               math.degrees}
_MATH_INT = {math.floor, math.ceil, math.trunc}


scalars.register_arithmetic(scalars.Arithmetic(
    binop=_operator_binop, compare=_operator_compare, unary=unary, builtin=builtin))
