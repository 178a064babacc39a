"""Checks and Python calls on relaxed numbers, done on the host before a graph runs.

Needs a finished trace of the top graph (``tracer.trace``, at the end of its
body).  A graph computed from dynamic scalars (``values/scalars.py``) carries
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
import dataclasses
import logging
import math

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import tensor_util

from janus.config import config
from janus.replay.host import (HostProgram, HostRaised, HostStep, div_no_nan, fed_value,
                               float_to_int, ftz, int_floordiv, int_floormod, integral,
                               reciprocal, wrap, NORMAL)

_INT, _FLOAT, _BOOL = tf.int64, tf.float64, tf.bool
_DTYPES = (_INT, _FLOAT, _BOOL)
_PY = {_INT: int, _FLOAT: float, _BOOL: bool}
_NP = {_INT: np.int64, _FLOAT: np.float64, _BOOL: np.bool_}

# (op type, operand dtype) -> Python function of the operands' values.
_BINARY = {
    ('AddV2', _INT): lambda a, b: wrap(a + b), ('AddV2', _FLOAT): lambda a, b: ftz(a + b),
    ('Sub', _INT): lambda a, b: wrap(a - b), ('Sub', _FLOAT): lambda a, b: ftz(a - b),
    ('Mul', _INT): lambda a, b: wrap(a * b), ('Mul', _FLOAT): lambda a, b: ftz(a * b),
    ('DivNoNan', _FLOAT): div_no_nan,
    ('FloorDiv', _INT): int_floordiv, ('FloorMod', _INT): int_floormod,
}
_RAISING = (int_floordiv, int_floormod)   # TF's kernels raise on a zero divisor
_COMPARE = {'Equal': '==', 'NotEqual': '!=', 'Less': '<', 'LessEqual': '<=', 'Greater': '>',
            'GreaterEqual': '>='}
_LOGICAL = {'LogicalAnd': 'and', 'LogicalOr': 'or'}
# Source text of the binary ops run most, so the generated program needs no call.
_INLINE = {('AddV2', _INT): '_wrap({0} + {1})', ('AddV2', _FLOAT): '_ftz({0} + {1})',
           ('Sub', _INT): '_wrap({0} - {1})', ('Sub', _FLOAT): '_ftz({0} - {1})',
           ('Mul', _INT): '_wrap({0} * {1})', ('Mul', _FLOAT): '_ftz({0} * {1})'}
_UNARY = {
    ('Neg', _INT): lambda a: wrap(-a), ('Neg', _FLOAT): lambda a: -a,
    ('Abs', _INT): lambda a: wrap(abs(a)), ('Abs', _FLOAT): abs,
    ('Floor', _FLOAT): integral(math.floor), ('Round', _FLOAT): integral(round),
    ('Reciprocal', _FLOAT): reciprocal, ('IsFinite', _FLOAT): math.isfinite,
}
_CASTS = {(_INT, _FLOAT): float, (_FLOAT, _INT): float_to_int,
          (_BOOL, _INT): int, (_BOOL, _FLOAT): float,
          (_INT, _BOOL): lambda a: a != 0, (_FLOAT, _BOOL): lambda a: a != 0.0}
_PASS_THROUGH = ('Identity', 'StopGradient', 'Snapshot', 'Reshape')
# Ops whose float64 result can be below the normal range: with constant operands
# only, grappler may fold them without flushing, so they need a dynamic operand.
# No region value is ever subnormal (constants and relaxed numbers are guarded, these
# results flushed, Python calls' checked), so TF's reading subnormal operands as zero
# (DAZ) never matters here.  (``TruncateMod``, C's fmod run in software, can give a
# subnormal, unflushed: it stays in the graph.)
_FLOAT_RESULTS = ('AddV2', 'Sub', 'Mul', 'DivNoNan', 'Reciprocal')


def _scalar(tensor):
    return tensor.shape.rank == 0


def _const_value(op):
    """The Python value of a scalar int64/float64/bool ``Const``, or None."""
    tensor = op.outputs[0]
    if tensor.dtype not in _DTYPES or not _scalar(tensor):
        return None
    value = tensor_util.MakeNdarray(op.get_attr('value')).item()
    if tensor.dtype == _FLOAT and value != 0.0 and abs(value) < NORMAL:
        return None   # a subnormal operand TF's kernels would read as zero
    return _PY[tensor.dtype](value)


def _step(op, functions):
    """(function, operand count, source template or None) computing ``op``'s output on
    the host, or None when janus does not model ``op`` exactly."""
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
        return call, len(op.inputs), None
    if out.dtype not in _DTYPES or not _scalar(out):
        return None
    if kind in _PASS_THROUGH:
        source = op.inputs[0]
        if source.dtype != out.dtype or (kind == 'Reshape' and source.shape.rank not in (None, 0)
                                         and source.shape.num_elements() != 1):
            return None
        return _same, 1, '{0}'
    if kind == 'Cast':
        source = op.inputs[0].dtype
        if source == out.dtype:
            return _same, 1, '{0}'
        fn = _CASTS.get((source, out.dtype))
        return (fn, 1, None) if fn is not None else None
    operands = [t.dtype for t in op.inputs]
    if kind in ('SelectV2', 'Select') and len(operands) == 3 and operands[0] == _BOOL:
        return (lambda c, a, b: a if c else b), 3, '({1} if {0} else {2})'
    if len(operands) == 2 and operands[0] == operands[1]:
        if kind in _COMPARE and out.dtype == _BOOL:
            return _binary_fn(_COMPARE[kind]), 2, '({0} %s {1})' % _COMPARE[kind]
        if kind in _LOGICAL and operands[0] == _BOOL:
            return _binary_fn(_LOGICAL[kind]), 2, '({0} %s {1})' % _LOGICAL[kind]
        fn = _BINARY.get((kind, operands[0]))
        if fn is None or out.dtype != operands[0]:
            return None
        return fn, 2, _INLINE.get((kind, operands[0]))
    if len(operands) == 1:
        if kind == 'LogicalNot' and operands[0] == _BOOL:
            return (lambda a: not a), 1, '(not {0})'
        fn = _UNARY.get((kind, operands[0]))
        if fn is not None:
            return fn, 1, None
    return None


def _same(a):
    return a


def _binary_fn(operator_text):
    return eval('lambda a, b: a %s b' % operator_text)   # noqa: S307 - a fixed operator


def build(ctx, graph, flat_inputs, outputs):
    """Moves the host region's checks and Python calls out of ``graph`` (being traced).

    Returns (program or None, the neutralized Janus>Assert ops, the region's ops no
    longer needed in the graph); ``outputs`` (the graph's return list) is updated
    in place where it held a Python call's result."""
    leaves = ctx.host.leaves
    if not config.host_checks or leaves is None or ctx.soft_conditions is not None:
        return None, set(), set()
    draws = ctx.host.draws or {}
    try:
        found = _region(ctx, graph, flat_inputs, leaves)
    except Exception:  # noqa: BLE001 - an optimization: the graph keeps its checks
        logging.getLogger('janus').debug('janus: host checks skipped', exc_info=True)
        return None, set(), set()
    if found is None:
        return None, set(), set()
    if any(op not in found.calls for op in draws):
        return None, set(), set()   # a draw the host cannot make: the caller refuses them
    ops, region, slots, dynamic, calls, checks = (found.ops, found.region, found.slots,
                                                  found.dynamic, found.calls, found.checks)
    # Float results the graph still uses are fed from the host too (the same IEEE
    # doubles eager Python computes): with their checks gone, an intermediate
    # (``a * 3.0`` in ``a * 3.0 * 7.0``) has one consumer left, and grappler would
    # reassociate the chain (constant push-down), no longer eager's rounding.
    output_names = {getattr(t, 'name', None) for t in outputs}
    floats = [op for op in ops if op in region and op.type in _FLOAT_RESULTS
              and slots[op.outputs[0].name] in dynamic
              and (op.outputs[0].name in output_names
                   or any(c not in region for c in op.outputs[0].consumers()))]
    fed = []
    for op in calls + floats:
        tensor = op.outputs[0]
        slot = slots[tensor.name]
        key, reader = ('janus', 'host', op.name), fed_value(len(fed), _NP[tensor.dtype])
        placeholder = ctx.top_graph.capture_call_time_value(
            reader, tf.TensorSpec([], tensor.dtype), key=key)
        ctx.host.call_time_readers[key] = reader
        for consumer in list(tensor.consumers()):
            for index, consumed in enumerate(consumer.inputs):
                if consumed.name == tensor.name:
                    consumer._update_input(index, placeholder)
        outputs[:] = [placeholder if getattr(t, 'name', None) == tensor.name else t
                      for t in outputs]
        fed.append(slot)
    if checks:
        true = tf.constant(True)
        for op in checks:
            op._update_input(0, true)
    dead = _unneeded(ops, region, outputs)
    program = _sliced(found.constants, found.leaf_readers, found.steps, fed, dynamic)
    if program is not None:
        program.calls = len(calls)   # Python calls (the rest fed are float results)
        program.draws = [draws[op][0] for op in calls if op in draws]
    return program, set(checks), dead


@dataclasses.dataclass(frozen=True)
class HostRegion:
    """The part of a traced graph its host program computes (``_region``)."""
    ops: list            # every op of the graph, in creation order
    region: set          # the ops in the region
    slots: dict          # tensor name -> the program's slot for its value
    dynamic: set         # slots that depend on a leaf (read per call)
    constants: list      # (slot, value): Const ops
    leaf_readers: list   # (slot, reader(arguments, flat)): relaxed numbers
    steps: list          # HostStep, in graph order
    checks: list         # the Janus>Assert ops it checks
    calls: list          # the Python calls (PyFuncStateless ops) it runs


def _region(ctx, graph, flat_inputs, leaves):
    """The host region of ``graph``: its ops, values, checks and Python calls; None when
    there is nothing to move."""
    functions, draws = ctx.host.functions, ctx.host.draws or {}
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
        inputs = _operand_slots(op, slots)
        if (not inputs and op not in draws) or None in inputs:
            continue
        if op.type == 'Janus>Assert':
            assumption = _checked_assumption(op, assumptions)
            if assumption is not None:
                steps.append(HostStep(None, None, (inputs[0],), assumption=assumption))
                checks.append(op)
                region.add(op)
            continue
        found = _step(op, functions)
        if found is None:
            continue
        fn, arity, template = found
        if arity != len(inputs) or not any(i in dynamic for i in inputs) and op not in draws \
                and (op.type == 'PyFuncStateless' or op.type in _FLOAT_RESULTS):
            continue
        out = slot_of(op.outputs[0])
        if any(i in dynamic for i in inputs) or op in draws:
            dynamic.add(out)   # a draw is a new value every run (trace/host_draws.py)
        steps.append(HostStep(fn, out, tuple(inputs), template))
        region.add(op)
        if op.type == 'PyFuncStateless':
            calls.append(op)
    if not checks and not calls:
        return None
    return HostRegion(ops, region, slots, dynamic, constants, leaf_readers, steps, checks,
                      calls)


def _operand_slots(op, slots):
    """The slots of ``op``'s operands, None for one outside the region so far."""
    inputs = [slots.get(t.name) for t in op.inputs]
    if op.type == 'Reshape':
        return inputs[:1]   # the shape operand is read from the graph, not computed
    return inputs


def _checked_assumption(op, assumptions):
    """The assumption a ``Janus>Assert`` checks, when the host may check it: one that
    waits for something (control inputs) stays in the graph."""
    if op.control_inputs:
        return None
    return assumptions.get(op.get_attr('assumption_id'))


def _sliced(constants, leaves, steps, fed, dynamic):
    """The program computing only what the checks and the fed values need, with what
    depends on constants alone computed once, here."""
    known = dict(constants)
    kept = []
    for step in steps:
        fn, out, ins = step.fn, step.out, step.ins
        if step.is_check:
            if ins[0] in dynamic or not known.get(ins[0], False):
                kept.append(step)   # a constant check that fails: fails every run
            continue
        if out not in dynamic and out not in fed and all(i in known for i in ins):
            try:
                known[out] = fn(*[known[i] for i in ins])
                continue
            except HostRaised:
                pass   # raises on every run, as the graph would
        kept.append(step)
    needed = set(fed)
    for step in kept:
        if step.is_check:
            needed.add(step.ins[0])
        elif step.fn in _RAISING:
            needed.add(step.out)   # the graph no longer runs it: the host raises in its place
    steps = []
    for step in reversed(kept):
        if step.is_check or step.out in needed:
            steps.append(step)
            if not step.is_check:
                needed.update(step.ins)
    steps.reverse()
    constants = [(slot, value) for slot, value in known.items() if slot in needed]
    leaves = [(slot, reader) for slot, reader in leaves if slot in needed]
    return HostProgram(constants, leaves, steps, fed)


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
