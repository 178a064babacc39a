"""One traced per-item graph run for many items at once (TF's ``pfor`` converter).

Needs ``ops.py`` (janus's check ops) and a graph traced for one item, complete
(``recursion_levels.py`` traces a recursive function's body for one node of a
level, then runs it for every node of that level).

TF's ``pfor`` rewrites a graph computed for one item into one computed for a
batch of items, op by op, but only the ops the graph's *outputs* need: a check
(``Janus>Assert``) that no output needs, or a failing op the user asked for that
TF keeps in a graph's control outputs, would be silently dropped.  So while a
per-item graph is traced to be vectorized, every graph in it (its tf.cond
branches, its loop bodies, the graph itself) makes its outputs depend on those
ops (``gated``, called from ``control.common.kept_running``), and ``unreached``
finds any graph where that could not be done: that per-item graph is then not
vectorized at all.

This module also teaches ``pfor`` janus's check ops (a batch's conditions all
hold), ``ResourceGather`` (``tf.nn.embedding_lookup`` of a variable at a batch
of ids), ``Bitcast`` and a stateless ``tf.numpy_function`` (called per item).
"""
from __future__ import annotations
import typing
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import resource_variable_ops, script_ops
from tensorflow.python.ops.parallel_for import control_flow_ops as pfor_ops
from tensorflow.python.ops.parallel_for import pfor as pfor_lib

from janus.graph import effects, graph_analysis, ops

# Ops pfor runs as they are, whatever the batch (reads of a resource).
_PASSING = frozenset(pfor_lib.passthrough_stateful_ops)


class NotVectorized(Exception):
    """The per-item graph cannot run for a batch with the same meaning."""


def _stacked_check(pfor_input: typing.Any) -> tf.Tensor:
    """A check's condition over the batch: it holds for every item (for none, when a
    partition of the batch is empty: a branch no item takes)."""
    condition, stacked, _ = pfor_input.input(0)
    if stacked:
        return tf.reduce_all(condition)
    return tf.logical_or(condition, tf.equal(pfor_input.pfor.loop_len_vector[0], 0))


def _convert_assert(pfor_input: typing.Any) -> tf.Operation:
    return ops.janus_assert(_stacked_check(pfor_input), pfor_input.get_attr('assumption_id'),
                            pfor_input.get_attr('message'))


def _convert_checked_identity(pfor_input: typing.Any) -> typing.Any:
    value, stacked, _ = pfor_input.input(1)
    checked = ops.janus_checked_identity(
        _stacked_check(pfor_input), value, pfor_input.get_attr('assumption_id'),
        pfor_input.get_attr('message'))
    return pfor_lib.wrap(checked, stacked)


def _convert_resource_gather(pfor_input: typing.Any) -> typing.Any:
    """A variable's rows at a batch of index tensors: one gather at all of them."""
    indices, stacked, _ = pfor_input.input(1)
    handle = pfor_input.unstacked_input(0)
    if pfor_input.get_attr('batch_dims') != 0:
        raise ValueError('janus vectorizes ResourceGather with batch_dims=0 only')
    flat = tf.reshape(indices, [-1])
    rows = resource_variable_ops.resource_gather(handle, flat, dtype=pfor_input.get_attr('dtype'))
    shape = tf.concat([tf.shape(indices, out_type=tf.int64),
                       tf.shape(rows, out_type=tf.int64)[1:]], 0)
    return pfor_lib.wrap(tf.reshape(rows, shape), stacked)


def _convert_bitcast(pfor_input: typing.Any) -> typing.Any:
    """A reinterpretation of bits changes only the last axes: the batch's first stays.
    (janus's structure tables hold floats as their int64 bits.)"""
    value, stacked, _ = pfor_input.input(0)
    return pfor_lib.wrap(tf.bitcast(value, pfor_input.get_attr('type')), stacked)


def _convert_numpy_function(pfor_input: typing.Any) -> list:
    """A stateless ``tf.numpy_function`` (janus's Python-exact numbers,
    ``scalars.python_call``): one op that calls the function for each item."""
    token = pfor_input.get_attr('token')
    token = token.decode() if isinstance(token, bytes) else token
    func = script_ops._py_funcs.get(token)   # noqa: SLF001
    if func is None or isinstance(func, script_ops.EagerFunc):
        raise ValueError('no batch form of this numpy_function')
    inputs = [pfor_input.input(i) for i in range(pfor_input.num_inputs)]
    stacked = [flag for _, flag, _ in inputs]
    dtypes = [tf.as_dtype(t) for t in pfor_input.get_attr('Tout')]
    shapes = [out.shape for out in pfor_input.op.outputs]

    def each(*arrays: np.ndarray) -> list[np.ndarray]:
        count = next(len(a) for a, flag in zip(arrays, stacked) if flag)
        rows = []
        for i in range(count):
            out = func(*[a[i] if flag else a for a, flag in zip(arrays, stacked)])
            rows.append(out if isinstance(out, (tuple, list)) else [out])
        if not rows:
            return [np.zeros([0] + (s.as_list() if s.is_fully_defined() else []),
                             d.as_numpy_dtype) for s, d in zip(shapes, dtypes)]
        return [np.stack([np.asarray(row[j], d.as_numpy_dtype) for row in rows])
                for j, d in enumerate(dtypes)]
    out = tf.numpy_function(each, [t for t, _, _ in inputs], dtypes, stateful=False)
    return [pfor_lib.wrap(t, True) for t in out]


def _register() -> None:
    registry = pfor_lib._pfor_converter_registry   # noqa: SLF001 - TF has no public one
    for op_type, converter in (('Janus>Assert', _convert_assert),
                               ('Janus>CheckedIdentity', _convert_checked_identity),
                               ('ResourceGather', _convert_resource_gather),
                               ('Bitcast', _convert_bitcast),
                               ('PyFuncStateless', _convert_numpy_function)):
        if op_type not in registry:
            pfor_lib.RegisterPFor(op_type)(converter)


_register()


def _must_run(graph: tf.Graph) -> list[tf.Operation]:
    """The ops of ``graph`` that run whether or not an output needs them: stateful
    ops (checks, control flow holding them) and the graph's kept control outputs."""
    found = [op for op in graph.get_operations()
             if op._is_stateful and op.type not in _PASSING]   # noqa: SLF001
    found += [op for op in graph.control_outputs if op not in found]
    return found


def gated(graph: tf.Graph, outputs: list) -> list:
    """``outputs`` (a flat list), each made to depend on the ops of ``graph`` that must
    run but that no output needs (so a vectorized graph keeps them)."""
    tensors = [t for t in outputs if isinstance(t, tf.Tensor)]
    if not tensors:
        return outputs
    needed = graph_analysis.ancestors([t.op for t in tensors])
    loose = [op for op in _must_run(graph) if op not in needed]
    if not loose:
        return outputs
    with tf.control_dependencies(loose):
        return [tf.identity(t) if isinstance(t, tf.Tensor) else t for t in outputs]


def unreached(graph: tf.Graph, outputs: typing.Sequence) -> str | None:
    """A description of an op ``graph`` (or a function it calls) must run that its
    outputs do not need, or of an op janus cannot vectorize; None when there is none."""
    seen, todo = set(), [(graph, [t.op for t in outputs])]
    while todo:
        current, roots = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        needed = graph_analysis.ancestors(roots)
        for op in _must_run(current):
            if op not in needed:
                return '%s (%s) that nothing it returns needs' % (op.type, op.name)
        for op in current.get_operations():
            if op.type == ops.INVOKE_OP:
                return 'a call of a recursive graph function (%s)' % op.name
            for called in effects.called_graphs(op):
                todo.append((called, [t.op for t in called.outputs]))
    return None


def stacked(graph: tf.Graph, items: typing.Sequence[tuple[tf.Tensor, tf.Tensor]],
            shared: typing.Sequence[tuple[tf.Tensor, tf.Tensor]],
            outputs: typing.Sequence[tf.Tensor], count: tf.Tensor | int) -> list:
    """``outputs`` of the per-item ``graph`` computed for ``count`` items at once, in
    the current graph: ``items`` pairs each of ``graph``'s per-item placeholders with
    a tensor of every item's value (stacked on a first axis of ``count``),
    ``shared`` each of its other placeholders with the value every item shares;
    what ``graph`` captures is the same for every item.  Raises ``NotVectorized``
    where TF's converter has no batch form of an op."""
    loop_var = tf.raw_ops.PlaceholderWithDefault(input=tf.constant(0), shape=[])
    converter = pfor_lib.PFor(loop_var, count, graph.get_operations(),
                              fallback_to_while_loop=False,
                              pfor_config=pfor_ops.PForConfig())
    for placeholder, values in items:
        converter._add_conversion(placeholder, pfor_lib.wrap(values, True))   # noqa: SLF001
    for placeholder, value in shared:
        converter._add_conversion(placeholder, pfor_lib.wrap(value, False))   # noqa: SLF001
    for external, internal in graph.captures:
        converter._add_conversion(internal, pfor_lib.wrap(external, False))   # noqa: SLF001
    try:
        return [converter.convert(t) for t in outputs]
    except (ValueError, NotImplementedError, TypeError) as e:
        raise NotVectorized(first_line(e)) from e


def first_line(error: BaseException) -> str:
    """The line of a (TF-wrapped) error that says what failed."""
    lines = [line.strip() for line in str(error).split('\n') if line.strip()]
    found = [line for line in lines if 'vectorization' in line or 'Error' in line]
    return (found or lines or [type(error).__name__])[0][:200]
