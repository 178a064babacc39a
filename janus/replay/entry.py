"""A cached graph and its replay: guards, the host program, the run, the write-back.

Needs a ``GraphEntry`` the tracer built (``graphgen/tracer.py``); nothing here
imports trace time.  ``GraphEntry.check`` tests the guards; ``GraphEntry.run``
runs the host program (``replay/host.py``), the graph (under janus's rewrite
options, ``replay/rewrites.py``), then rebuilds the return value and the
Python writes (``replay/templates.py``) and applies the writes in program
order.  ``replay/executor.py`` wraps a run with the rollback and turns TF's
errors into janus's outcomes.
"""
from __future__ import annotations
import inspect
import typing

import tensorflow as tf

from janus import guards
from janus.config import config
from janus.replay import host as host_module
from janus.replay import rewrites, xla
from janus.replay.executor import WriteBackFailed
from janus.replay.templates import NOT_TAKEN, Conditional, rebuild
from janus.heap import heap, shadow_heap



# Ops that compute nothing (``work_ops``).
_NO_WORK = frozenset(('Placeholder', 'Identity', 'IdentityN', 'NoOp', 'Const', 'ReadVariableOp',
                      'StopGradient', 'PlaceholderWithDefault'))
# Ops whose work grows with their inputs' sizes faster than their outputs': a big one
# counts as a region does (``work_ops``).
_HEAVY = frozenset(('Conv2D', 'Conv3D', 'DepthwiseConv2dNative', 'MatMul', 'BatchMatMulV2',
                    'BatchMatMulV3', 'Einsum', 'FusedBatchNormV3', 'Conv2DBackpropInput'))
_HEAVY_ELEMENTS = 4096
_REGIONS = frozenset(('While', 'StatelessWhile', 'If', 'StatelessIf', 'Case', 'StatelessCase',
                      'PartitionedCall', 'StatefulPartitionedCall'))

class GraphEntry:
    """One generated graph and the assumptions it was generated under."""

    def __init__(
            self, *, signature: typing.Any, bound_template: inspect.BoundArguments,
            concrete: typing.Any, call_time_readers: typing.Mapping[typing.Any, typing.Callable],
            output_template: object, writes: typing.Sequence[tuple[typing.Any, object]],
            host: host_module.HostProgram | None, source_guards: typing.Sequence,
            assumptions: typing.Mapping[int, typing.Any], inlined: typing.Sequence,
            assumed_sites: typing.Mapping, assumed_instead: frozenset, has_mutations: bool,
            safe_error_ops: typing.AbstractSet[str], uses_heap_ops: bool, op_writes: list[str],
            rollback: typing.Any, not_undoable: str | None, number: int, trace_seconds: float,
            recursive: typing.Iterable = (),
            xla_blockers: typing.Callable[[], tuple] = lambda: (None, None)) -> None:
        self.signature = signature               # call_signature.Signature: the argument guards
        self.bound_template = bound_template     # inspect.BoundArguments of the traced call
        self.concrete = concrete                 # the ConcreteFunction
        self._call_graph: typing.Callable[[list], typing.Any]
        self._call_graph = self._plain_call = _graph_caller(
            concrete, call_time_readers if config.fast_replay else None)
        self.xla_blockers = xla_blockers         # () -> (why no XLA, why not by janus's choice)
        self.xla: xla.XlaCaller | None = None    # xla.XlaCaller once jit is set
        self.output_template = output_template   # templates: the return value
        self.writes = writes                     # (write, template): Python writes, in order
        self.host = host                         # host.HostProgram or None: run before the graph
        self.source_guards = source_guards       # guards on outside values
        self.assumptions = assumptions           # id -> Assumption checked in the graph
        self.inlined = inlined                   # converted callees (explain)
        self.assumed_sites = assumed_sites       # (code, site) -> sequence assumed
        # Sites assumed only because real control flow failed to build there
        # (graphgen/plan.py), and how often they broke: kept here so that they go
        # with the graph.
        self.assumed_instead = assumed_instead
        self.assumed_breaks = 0
        self.has_mutations = has_mutations
        self.safe_error_ops = safe_error_ops     # errors there leave state untouched
        self.uses_heap_ops = uses_heap_ops
        self.op_writes = op_writes
        # rollback.Rollback: variables restored when a run fails after a change; else
        # why a failure after a state change cannot be undone (explain).
        self.rollback, self.not_undoable = rollback, not_undoable
        self.number = number                     # the function's graph count (explain)
        self.trace_seconds = trace_seconds
        self.recursive = list(recursive)         # recursive graph functions it calls (explain)
        self.runs = 0

    def check(self, arguments: typing.Mapping[str, typing.Any]) -> guards.Miss | None:
        """The first failing guard (a ``guards.Miss``), or None when all hold."""
        miss = self.signature.check(arguments)
        if miss:
            return miss
        check = self._check_sources
        if check is None:
            check = self._check_sources = self._compile_checks()
        return check(arguments)

    _check_sources: typing.Callable | None = None

    def _compile_checks(
            self) -> typing.Callable[[typing.Mapping[str, typing.Any]], guards.Miss | None]:
        """The source guards as one generated function (``guards.compile_checks``)."""
        found = list(self.source_guards)
        try:
            if config.fast_replay:
                return guards.compile_checks(found)
        except Exception:  # noqa: BLE001 - an optimization: the guards checked one by one
            pass
        check = guards.checked_in_order(found)
        return lambda arguments: check(arguments, {})

    def run(self, arguments: typing.Mapping[str, typing.Any]) -> typing.Any:
        """Runs the graph; once it finished (every assertion passed), writes the
        shadow heap back to the Python objects, in program order."""
        run_id = heap.begin_run() if self.uses_heap_ops else None
        shadow_heap.set_call_arguments(arguments, run_id)
        host = self.host
        try:
            flat = self.signature.flatten(arguments)
            if host is not None:
                host.run(arguments, flat)   # may raise AssertionBroke/GraphError: nothing ran
            outputs = rewrites.call_with_janus_rewrites(self._call_graph, flat)
        except BaseException:
            if run_id is not None:
                heap.discard(run_id)   # a failed run changes nothing
            raise
        finally:
            shadow_heap.set_call_arguments(None)
            if host is not None:
                host_module.clear()
        written = False   # a Python write applied (a rollback cannot undo it)
        try:   # every value is rebuilt before the first write: a failure there changed nothing
            if run_id is not None:
                heap.commit(run_id)
                written = True
            if not isinstance(outputs, (list, tuple)):
                outputs = [outputs]
            memo = {}   # one rebuilt object per container the call made, returned or written
            result = rebuild(self.output_template, outputs, arguments, memo)
            values, targets, sources = [], [], {}
            for write, template in self.writes:
                if isinstance(template, Conditional):
                    # A write made in a tensor-dependent branch: only on the path taken.
                    if not bool(rebuild(template.condition, outputs, arguments, memo)):
                        values.append(NOT_TAKEN)
                        targets.append(None)
                        continue
                    template = template.value
                values.append(rebuild(template, outputs, arguments, memo))
                # Its object as the statement saw it: resolved before any write applies.
                targets.append(write.target(arguments, sources))
            for (write, _), value, target in zip(self.writes, values, targets):
                if value is NOT_TAKEN:
                    continue
                # A failing setattr or item write applied nothing; a print or an
                # extend may have applied part of itself.
                written = written or write.partial
                write.apply(value, target)
                written = True
        except Exception as e:
            raise WriteBackFailed(e, self.has_mutations or written, written) from e
        return result

    def set_jit(self, mode: str) -> None:
        """Runs the graph as ``mode`` says ('off', 'on', 'auto': ``replay/xla.py``)."""
        if mode == 'off':
            self.xla, self._call_graph = None, self._plain_call
            return
        hard, soft = self.xla_blockers()
        self.xla = xla.XlaCaller(self.concrete, self._plain_call, mode,
                                 hard or (soft if mode == 'auto' else None))
        self._call_graph = self.xla

    def work_ops(self, limit: int) -> int:
        """How many ops the graph computes with, up to ``limit``: ops besides reading
        its inputs and variables, passing values on and janus's own checks; a loop,
        a branch or a function call counts as ``limit`` (its work is inside)."""
        count = 0
        for op in self.concrete.graph.get_operations():
            if op.type in _NO_WORK or op.type.startswith('Janus'):
                continue
            count += limit if op.type in _REGIONS or _heavy(op) else 1
            if count >= limit:
                return limit
        return count

    def describe_guards(self) -> list[str]:
        return self.signature.describe() + [repr(g) for g in self.source_guards]

    def describe_writes(self) -> list[str]:
        return [w.describe() for w, _ in self.writes] + getattr(self, 'op_writes', [])


def _heavy(op: tf.Operation) -> bool:
    """A convolution, matrix product or normalization of a size whose eager run costs
    more than a janus call (one Conv2D of a small image takes a millisecond eagerly:
    run plainly, a segment holding only it would be slower than its graph)."""
    if op.type not in _HEAVY or not op.outputs:
        return False
    elements = op.outputs[0].shape.num_elements()
    return elements is None or elements >= _HEAVY_ELEMENTS


def _graph_caller(concrete: typing.Any,
                  readers: typing.Mapping[typing.Any, typing.Callable] | None = None
                  ) -> typing.Callable[[list], typing.Any]:
    """How a run feeds the graph its flat inputs.

    ``ConcreteFunction.__call__`` re-binds and re-casts every input against its
    structured signature (about 1 us per input).  ``Signature.check`` has
    already established what that re-check would: every flat input is an
    ``EagerTensor`` of the traced dtype and a compatible shape.  So the run goes
    straight to the flat call, which still records gradients and evaluates
    call-time captures as ``__call__`` does.  Should TensorFlow's flat entry
    point change, the public call is used.
    """
    if _FLAT_CALL_PARAMETERS != ('tensor_inputs', 'captured_inputs'):
        return lambda flat: concrete(*flat)
    call_flat = concrete._call_flat   # TF's own entry after its input re-check
    captured = _captured_reader(concrete, readers or {})
    if captured is None:
        def call(flat: list) -> typing.Any:
            return call_flat(flat, concrete.captured_inputs)
    else:
        def call(flat: list) -> typing.Any:
            return call_flat(flat, captured())
    call.captured_inputs = captured   # type: ignore[attr-defined]  # None: TF's own path
    return call


def _captured_reader(
        concrete: typing.Any,
        readers: typing.Mapping[typing.Any, typing.Callable]) -> typing.Callable[[], list] | None:
    """A faster ``concrete.captured_inputs``, or None where it cannot be had.

    TF wraps each call-time capture's closure to re-check its result against the
    capture's spec (about 15 us each, and a nest.flatten of all captures).  The
    call-time captures janus makes itself (``readers``: key -> its closure) give
    values their guards already checked (a hoisted tensor: TENSOR_MATCH; a
    relaxed number: a tensor of the exact dtype it makes itself), so their
    closures are called directly; every other capture is a plain tensor, passed
    as TF would.  Any other call-time capture: TF's own path."""
    try:
        entries = list(concrete._captured_inputs)
        wrapped = concrete.graph.function_captures.by_ref_external
    except AttributeError:
        return None
    key_of = {id(closure): key for key, closure in wrapped.items()}
    static, calls = [], []
    for index, entry in enumerate(entries):
        if callable(entry):
            reader = readers.get(key_of.get(id(entry)))
            if reader is None:
                return None
            calls.append((index, reader))
            entry = None
        elif not isinstance(entry, tf.Tensor):
            return None   # a composite: TF flattens it
        static.append(entry)
    if not calls:
        return lambda: static

    def read() -> list:
        values = list(static)
        for index, reader in calls:
            values[index] = reader()
        return values
    return read


def _flat_call_parameters() -> tuple[str, ...]:
    from tensorflow.python.eager.polymorphic_function import concrete_function
    method = getattr(concrete_function.ConcreteFunction, '_call_flat', None)
    if method is None:
        return ()
    return tuple(inspect.signature(method).parameters)[1:]


_FLAT_CALL_PARAMETERS = _flat_call_parameters()
