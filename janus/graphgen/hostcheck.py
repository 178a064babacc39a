"""Checks and Python calls on relaxed numbers, done on the host before a graph runs.

Needs a finished trace of the top graph (``tracer.trace``, at the end of its
body).  A graph computed from dynamic scalars (``runtime/scalars.py``) carries
small scalar chains: range checks (``Janus>Assert`` on an int sum, a float
divisor, a subnormal result), speculated tests on the numbers, and Python's own
math (``self.decay ** (self.step / 100)``, ``math.cos``) as a
``tf.numpy_function``.  On CPU each such op costs the executor more than the
arithmetic, and a ``numpy_function`` takes the GIL and a thread of TF's
inter-op pool in the middle of the step (a few percent of an LSTM step).

Every one of those values is known before the run: it depends only on the
relaxed numbers the call reads (hoisted scalar captures, number arguments) and
on constants.  ``build`` finds that part of the graph (the *host region*: ops of
a few exactly-modelled kinds, no control inputs, every input in the region) and
compiles it into a ``HostProgram`` that, per call, recomputes it in Python
before the graph runs, op for op with TF's CPU semantics (int64 wraps, float64
results below the normal range flush to zero, ``DivNoNan``'s zero, ``Cast``'s
rounding), then

* checks the region's ``Janus>Assert``s there: one that fails raises
  ``AssertionBroke`` for its assumption before anything ran (what the graph's
  failing assertion does, deferred updates included); in the graph the
  assertion's input becomes a constant ``True`` and state changes no longer
  wait for it;
* runs the region's Python calls (the ``numpy_function``s scalars.py made) and
  feeds their results to the graph as call-time inputs; one that raises ends the
  call as a ``GraphError`` before anything ran (what the same Python raising
  inside the graph does: the call re-runs imperatively);
* lets TF drop what only those checks and calls needed (stateless ops nothing
  consumes are pruned when the function is instantiated).

Nothing else changes: region values the graph still uses (the counter's new
value, the learning rate assigned) are computed in the graph as before, from
the same inputs, and equal the host's.  Any op janus does not model exactly
stays in the graph, with everything that depends on it.
"""
import math
import threading

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import tensor_util

_INT64_MIN, _INT64_MAX = -2 ** 63, 2 ** 63 - 1
_TWO64 = 2 ** 64
_NORMAL = 2.2250738585072014e-308   # float64's smallest normal number

_local = threading.local()   # the host values of the run in progress (fed inputs)


class HostRaised(Exception):
    """An op of the host region raised (Python's own error, or TF's for an integer
    division by zero): the graph would have failed there, before any state change."""


def _wrap(v):
    """An int64 result as TF's kernels leave it (two's complement wrap)."""
    if _INT64_MIN <= v <= _INT64_MAX:
        return v
    return (v - _INT64_MIN) % _TWO64 + _INT64_MIN


def _ftz(v):
    """A float64 result as TF's CPU kernels leave it: below the normal range, zero."""
    if -_NORMAL < v < _NORMAL and v != 0.0:
        return math.copysign(0.0, v)
    return v


def _int_floordiv(a, b):
    if b == 0:
        raise HostRaised('Integer division by zero')
    return _wrap(a // b)


def _int_floormod(a, b):
    if b == 0:
        raise HostRaised('Integer division by zero')
    return _wrap(a % b)


def _div_no_nan(a, b):
    return 0.0 if b == 0.0 else _ftz(a / b)


def _reciprocal(a):
    if a == 0.0:
        return math.copysign(math.inf, a)
    return _ftz(1.0 / a)


def _truncate_mod(a, b):
    if b == 0.0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
        return math.nan
    return _ftz(math.fmod(a, b))


def _integral(fn):
    """``Floor``/``Round`` of a float64: the sign of a zero result is the operand's."""
    def apply(a):
        if math.isinf(a) or math.isnan(a):
            return a
        r = float(fn(a))
        return math.copysign(0.0, a) if r == 0.0 else r
    return apply


def _float_to_int(a):
    """``Cast`` float64 -> int64: truncation; NaN and out of range give INT64_MIN (x86)."""
    if math.isfinite(a) and -9.223372036854775808e18 <= a < 9.223372036854775808e18:
        return int(a)
    return _INT64_MIN


_INT, _FLOAT, _BOOL = tf.int64, tf.float64, tf.bool
_DTYPES = (_INT, _FLOAT, _BOOL)
_PY = {_INT: int, _FLOAT: float, _BOOL: bool}
_NP = {_INT: np.int64, _FLOAT: np.float64, _BOOL: np.bool_}

# (op type, operand dtype) -> Python function of the operands' values.
_BINARY = {
    ('AddV2', _INT): lambda a, b: _wrap(a + b), ('AddV2', _FLOAT): lambda a, b: _ftz(a + b),
    ('Sub', _INT): lambda a, b: _wrap(a - b), ('Sub', _FLOAT): lambda a, b: _ftz(a - b),
    ('Mul', _INT): lambda a, b: _wrap(a * b), ('Mul', _FLOAT): lambda a, b: _ftz(a * b),
    ('DivNoNan', _FLOAT): _div_no_nan,
    ('FloorDiv', _INT): _int_floordiv, ('FloorMod', _INT): _int_floormod,
    ('TruncateMod', _FLOAT): _truncate_mod,
}
_COMPARE = {'Equal': lambda a, b: a == b, 'NotEqual': lambda a, b: a != b,
            'Less': lambda a, b: a < b, 'LessEqual': lambda a, b: a <= b,
            'Greater': lambda a, b: a > b, 'GreaterEqual': lambda a, b: a >= b}
_LOGICAL = {'LogicalAnd': lambda a, b: a and b, 'LogicalOr': lambda a, b: a or b}
_UNARY = {
    ('Neg', _INT): lambda a: _wrap(-a), ('Neg', _FLOAT): lambda a: -a,
    ('Abs', _INT): lambda a: _wrap(abs(a)), ('Abs', _FLOAT): abs,
    ('Floor', _FLOAT): _integral(math.floor), ('Round', _FLOAT): _integral(round),
    ('Reciprocal', _FLOAT): _reciprocal, ('IsFinite', _FLOAT): math.isfinite,
    ('LogicalNot', _BOOL): lambda a: not a,
}
_CASTS = {(_INT, _FLOAT): float, (_FLOAT, _INT): _float_to_int,
          (_BOOL, _INT): int, (_BOOL, _FLOAT): float,
          (_INT, _BOOL): lambda a: a != 0, (_FLOAT, _BOOL): lambda a: a != 0.0}
_PASS_THROUGH = ('Identity', 'StopGradient', 'Snapshot', 'Reshape')
# Ops whose float64 result can be below the normal range: with constant operands
# only, grappler may fold them without flushing, so they need a dynamic operand.
_FLOAT_RESULTS = ('AddV2', 'Sub', 'Mul', 'DivNoNan', 'TruncateMod', 'Reciprocal')


def _scalar(tensor):
    return tensor.shape.rank == 0


def _const_value(op):
    """The Python value of a scalar int64/float64/bool ``Const``, or None."""
    tensor = op.outputs[0]
    if tensor.dtype not in _DTYPES or not _scalar(tensor):
        return None
    value = tensor_util.MakeNdarray(op.get_attr('value')).item()
    if tensor.dtype == _FLOAT and value != 0.0 and abs(value) < _NORMAL:
        return None   # a subnormal operand TF's kernels would read as zero
    return _PY[tensor.dtype](value)


def _step(op, functions):
    """(function, operand count) computing ``op``'s output on the host, or None."""
    if op.control_inputs or len(op.outputs) != 1:
        return None
    out = op.outputs[0]
    kind = op.type
    if kind == 'PyFuncStateless' and op in functions:
        run, dtype = functions[op]
        if out.dtype != dtype or dtype not in _DTYPES:
            return None
        numpy_types = [_NP.get(t.dtype) for t in op.inputs]
        if None in numpy_types:
            return None

        def call(*values):
            try:
                return _PY[dtype](np.asarray(run(*[t(v) for t, v in zip(numpy_types, values)]))
                                  .item())
            except Exception as e:  # noqa: BLE001 - Python raised: the graph would have
                raise HostRaised('%s: %s' % (type(e).__name__, e)) from e
        return call
    if out.dtype not in _DTYPES or not _scalar(out):
        return None
    if kind in _PASS_THROUGH:
        source = op.inputs[0]
        if source.dtype != out.dtype or (kind == 'Reshape' and source.shape.rank not in (None, 0)
                                         and source.shape.num_elements() != 1):
            return None
        return (lambda a: a), 1
    if kind == 'Cast':
        source = op.inputs[0].dtype
        if source == out.dtype:
            return (lambda a: a), 1
        fn = _CASTS.get((source, out.dtype))
        return (fn, 1) if fn is not None else None
    operands = [t.dtype for t in op.inputs]
    if kind in ('SelectV2', 'Select') and len(operands) == 3 and operands[0] == _BOOL:
        return (lambda c, a, b: a if c else b), 3
    if len(operands) == 2 and operands[0] == operands[1]:
        if kind in _COMPARE and out.dtype == _BOOL:
            return _COMPARE[kind], 2
        if kind in _LOGICAL and operands[0] == _BOOL:
            return _LOGICAL[kind], 2
        fn = _BINARY.get((kind, operands[0]))
        return (fn, 2) if fn is not None and out.dtype == operands[0] else None
    if len(operands) == 1:
        fn = _UNARY.get((kind, operands[0]))
        if fn is not None:
            return fn, 1
    return None


class HostProgram:
    """The host region of one graph: per call, its values, checks and Python calls."""

    def __init__(self, size, constants, leaves, steps, fed):
        self.size = size
        self.constants = constants   # [(slot, value)]
        self.leaves = leaves         # [(slot, reader)]: reader(arguments, flat) -> value
        self.steps = steps           # [(fn, out slot, in slots)] / [(None, assumption, slot)]
        self.fed = fed               # slots fed to the graph, in the captures' order
        self.checks = sum(1 for fn, _, _ in steps if fn is None)

    def run(self, arguments, flat):
        """Computes the region; raises AssertionBroke / GraphError (nothing ran yet)."""
        from janus.executor import AssertionBroke, GraphError
        values = [None] * self.size
        for slot, value in self.constants:
            values[slot] = value
        for slot, reader in self.leaves:
            values[slot] = reader(arguments, flat)
        try:
            for fn, out, ins in self.steps:
                if fn is None:
                    if not values[ins]:
                        raise AssertionBroke(out)
                else:
                    values[out] = fn(*[values[i] for i in ins])
        except HostRaised as e:
            raise GraphError(e) from None
        _local.values = values

    def describe(self):
        return '%d checks, %d Python calls before the run' % (self.checks, len(self.fed))


def clear():
    _local.values = None


def _fed_value(slot, numpy_type):
    def read_now():
        return tf.constant(np.array(_local.values[slot], dtype=numpy_type))
    return read_now


def build(ctx, graph, flat_inputs, outputs):
    """Moves the host region's checks and Python calls out of ``graph`` (being traced).

    Returns (program or None, the neutralized Janus>Assert ops, the region's ops no
    longer needed in the graph); ``outputs`` (the graph's return list) is updated
    in place where it held a Python call's result."""
    leaves = getattr(ctx, 'host_leaves', None)
    if leaves is None or getattr(ctx, 'soft_conditions', None) is not None:
        return None, set(), set()
    functions = getattr(ctx, 'host_functions', {})
    flat_index = {t.name: i for i, t in enumerate(flat_inputs)}
    assumptions = {a.id: a for a in ctx.assumptions}
    slots, dynamic = {}, set()   # tensor name -> slot; slots that depend on a leaf
    constants, leaf_readers, steps = [], [], []
    region, checks, calls = set(), [], []

    def slot_of(tensor):
        slots[tensor.name] = len(slots)
        return slots[tensor.name]

    ops = graph.get_operations()
    for op in ops:
        if op.type == 'Placeholder':
            reader = _leaf_reader(leaves.get(op.outputs[0].name), flat_index)
            if reader is not None:
                slot = slot_of(op.outputs[0])
                leaf_readers.append((slot, reader))
                dynamic.add(slot)
                region.add(op)
            continue
        if op.type == 'Const':
            value = _const_value(op)
            if value is not None:
                constants.append((slot_of(op.outputs[0]), value))
                region.add(op)
            continue
        inputs = [slots.get(t.name) for t in op.inputs]
        if op.type == 'Reshape':
            inputs = inputs[:1]   # the shape operand is read from the graph, not computed
        if not inputs or None in inputs:
            continue
        if op.type == 'Janus>Assert':
            if op.control_inputs:
                continue
            assumption = assumptions.get(op.get_attr('assumption_id'))
            if assumption is None:
                continue
            steps.append((None, assumption, inputs[0]))
            checks.append(op)
            region.add(op)
            continue
        found = _step(op, functions)
        if found is None:
            continue
        fn, arity = (found, len(op.inputs)) if op.type == 'PyFuncStateless' else found
        if arity != len(inputs) or not any(i in dynamic for i in inputs) and (
                op.type == 'PyFuncStateless' or op.type in _FLOAT_RESULTS):
            continue
        out = slot_of(op.outputs[0])
        if any(i in dynamic for i in inputs):
            dynamic.add(out)
        steps.append((fn, out, inputs))
        region.add(op)
        if op.type == 'PyFuncStateless':
            calls.append(op)
    if not checks and not calls:
        return None, set(), set()
    fed = []
    for op in calls:
        tensor = op.outputs[0]
        slot = slots[tensor.name]
        placeholder = ctx.top_graph.capture_call_time_value(
            _fed_value(slot, _NP[tensor.dtype]), tf.TensorSpec([], tensor.dtype),
            key=('janus', 'host', op.name))
        for consumer in list(tensor.consumers()):
            for index, consumed in enumerate(consumer.inputs):
                if consumed is tensor:
                    consumer._update_input(index, placeholder)
        outputs[:] = [placeholder if t is tensor else t for t in outputs]
        fed.append(slot)
    if checks:
        true = tf.constant(True)
        for op in checks:
            op._update_input(0, true)
    dead = _unneeded(ops, region, outputs)
    return HostProgram(len(slots), constants, leaf_readers, steps, fed), set(checks), dead


def _leaf_reader(leaf, flat_index):
    """reader(arguments, flat) -> the Python value of a registered scalar input."""
    if leaf is None:
        return None
    where, what, kind = leaf
    if where == 'source':
        source = what
        return lambda arguments, flat: kind(source.value(arguments, {}))
    index = flat_index.get(what)
    if index is None:
        return None
    return lambda arguments, flat: kind(flat[index].numpy().item())


def _unneeded(ops, region, outputs):
    """The stateless region ops nothing in the graph needs any more."""
    needed = {t.op for t in outputs}
    for op in reversed(ops):
        if op not in region or op in needed or op._is_stateful:
            needed.add(op)
            needed.update(t.op for t in op.inputs)
            needed.update(op.control_inputs)
    return {op for op in region if op not in needed}
