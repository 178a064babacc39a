"""Undoing a failed run's variable updates, so the call can be re-run eagerly.

Needs a traced ``ConcreteFunction`` (``graphgen/tracer.py``) and the names of
its ops that run before any state change (``tracer.defer_state_updates``).
State changes wait for every assertion and for every op that does not need
them, so most TF errors stop a run before anything changed.  What remains
are ops that run after a change: ones that read a changed variable (a
``tf.gather`` at a cursor the call just advanced), or ones TF orders after it
(a variable read created later).  If any of those can fail at run time, the
graph gets a ``Rollback``: before each run it keeps the values of the
variables the graph may update (a read each; TF copies a kept buffer on the
next in-place update, so the cost is a copy of those variables per run), and
when the run fails after a change it assigns them back.  Nothing else changed
(Python writes wait for the run to finish), so the call can then be re-run
imperatively and the user sees eager's exception with eager's state.

Only variables an op may update before some fallible op ran are kept (an
optimizer step that waits for the gradients it applies is not).  A graph
gets none when every op that may run after a change cannot fail
(``infallible``: forwarding, reads, arithmetic, matmuls, reductions and
variable updates whose shapes are known where they must agree: an ordinary
training step), when it changes state that cannot be undone (a dataset
iterator, ``tf.print``, a hash table, a call janus cannot look into: the
reason is kept for ``explain``, and an error there still surfaces as the
graph's own), or when ``config.restore_on_error`` is off.  Invariant
(asserted): a rollback restores variables only, by their resource handles.
"""
from __future__ import annotations

from collections.abc import Container, Iterable
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from janus.config import config
from janus.errors import Unsupported
from janus.reasons import Reason
from janus.replay.rollback import Rollback
from janus.graph import effects
from janus.graph.fallible import infallible

if TYPE_CHECKING:
    from janus.trace.trace_context import TraceContext


class NotUndoable(Exception):
    """The graph changes state that a rollback cannot restore (the reason)."""


def plan(concrete: Any, before: Container[str] | None,
         on_host: Container[tf.Operation] = frozenset()) -> tuple[Rollback | None, str | None]:
    """(Rollback or None, reason or None) for a traced graph.

    ``before``: names of the top graph's ops that run before any state change
    (errors there need no rollback); None when the graph changes no state.
    ``on_host``: ops whose checks ran on the host before the run (hostcheck.py).
    Only variables that an op may update before some fallible op ran are
    kept: an update that waits for every fallible op (an optimizer step after
    the gradients it applies) never runs when one of them fails."""
    graph = concrete.graph
    if before is None:
        return None, None
    ops = graph.get_operations()
    clean = getattr(graph, effects.CLEAN_PULLS, ())   # fail as eager's next() does
    fallible = [op for op in ops if op.name not in before and op not in on_host
                and op.name not in clean and not infallible(op)]
    if not fallible:
        return None, None
    waiting = _waiting_for_all(ops, fallible)
    try:
        handles = updated_variables(graph, skip=waiting)  # type: ignore[arg-type]  # a set
    except NotUndoable as e:
        return None, str(e)
    return (Rollback(handles) if handles else None), None


def _waiting_for_all(ops: Iterable[tf.Operation],
                     fallible: Iterable[tf.Operation]) -> set[tf.Operation] | None:
    """The ops that run only after every op in ``fallible`` finished.

    Only through edges that survive grappler: a control edge, or a data edge
    into an op that computes from the value.  A tf.cond or a call may lose an
    input whose output nobody uses once grappler specializes its function
    (``acc + tf.gather(...)`` fed to a branch whose result is dead: the update
    after the cond then runs before the gather fails), and a shape op on a
    static shape is folded to a constant."""
    consumers: dict[tf.Operation, list[tf.Operation]] = {}
    for op in ops:
        sources = list(op.control_inputs)
        if op.type not in _MAY_DROP_INPUTS:
            sources += [t.op for t in op.inputs]
        for source in sources:
            consumers.setdefault(source, []).append(op)
    waiting = None
    for root in fallible:
        found, stack = set(), [root]
        while stack:
            for consumer in consumers.get(stack.pop(), ()):
                if consumer not in found:
                    found.add(consumer)
                    stack.append(consumer)
        waiting = found if waiting is None else waiting & found
        if not waiting:
            break
    return waiting


# Ops whose data inputs grappler may drop: function calls and control flow
# (specialized to the outputs used) and shape ops (folded where shapes are static).
_MAY_DROP_INPUTS = frozenset(effects.CALL_OPS) | frozenset((
    'If', 'StatelessIf', 'While', 'StatelessWhile', 'Case', 'StatelessCase', 'Shape', 'ShapeN',
    'Size', 'Rank'))


def updated_variables(graph: tf.Graph, skip: Container[tf.Operation] = frozenset()
                      ) -> list[tuple[tf.Tensor, tf.DType]]:
    """(handle, dtype) of every variable the graph's ops (but those in ``skip``)
    may update; raises ``NotUndoable`` for a state change other than a
    variable update."""
    inputs = _updated_inputs(graph, {}, skip)
    variables = {id(v.handle): v for v in graph.variables}
    captured = {id(internal): external for external, internal in graph.captures}
    handles = []
    for index in sorted(inputs):
        placeholder = graph.inputs[index]
        external = captured.get(id(placeholder))
        variable = variables.get(id(external)) if external is not None else None
        if variable is None:
            raise NotUndoable('the graph changes a resource that is not a variable it '
                              'captured (%s)' % placeholder.name)
        handles.append((variable.handle, variable.dtype))
    return handles


# Ops whose inputs map to a called graph's inputs from this offset on.
_BRANCH_OFFSET = {'If': 1, 'StatelessIf': 1, 'Case': 1, 'StatelessCase': 1}


def _updated_inputs(graph: tf.Graph, memo: dict[int, set[int]],
                    skip: Container[tf.Operation] = frozenset()) -> set[int]:
    """Indices into ``graph.inputs`` of the resources its ops (but ``skip``) change."""
    if id(graph) in memo:
        return memo[id(graph)]
    memo[id(graph)] = found = set()
    index_of = {id(t): i for i, t in enumerate(graph.inputs)}
    for op in graph.get_operations():
        if op in skip:
            continue
        for tensor in changed_resources(op, memo):
            if id(tensor) not in index_of and effects.is_run_local(tensor):
                continue   # an iterator the run made: gone when the run ends
            if id(tensor) not in index_of:
                raise NotUndoable('%s changes a resource made inside the graph (%s)'
                                  % (op.type, op.name))
            found.add(index_of[id(tensor)])
    return found


def changed_resources(op: tf.Operation, memo: dict[int, set[int]] | None = None) -> list[tf.Tensor]:
    """The resource tensors of ``op``'s graph that ``op`` (or a graph it runs)
    changes, seen through ``Identity``; raises ``NotUndoable`` for a change
    that is not to a resource (a print, a file) or that janus cannot see."""
    memo = {} if memo is None else memo
    called = effects.called_graphs(op)
    if called:
        offset = _BRANCH_OFFSET.get(op.type, 0)
        return [through_identity(op.inputs[offset + i]) for inner in called
                for i in _updated_inputs(inner, memo)]
    if op.type in effects.CALL_OPS:
        raise NotUndoable('the graph calls a function janus cannot look into (%s)' % op.name)
    if effects.effect(op) is not effects.Effect.CHANGE:
        return []
    resources = [through_identity(t) for t in op.inputs if t.dtype == tf.resource]
    if not resources:
        raise NotUndoable('%s has an effect outside TF (%s)' % (op.type, op.name))
    return resources


def through_identity(tensor: tf.Tensor) -> tf.Tensor:
    """The tensor an ``Identity`` chain forwards (a resource handle's placeholder)."""
    while tensor.op.type == 'Identity' and tensor.op.inputs:
        tensor = tensor.op.inputs[0]
    return tensor


def late_checks_allowed(ctx: TraceContext) -> bool:
    """Whether checks may run after a state change (``tracer.defer_state_updates``):
    only where a broken one can be undone (not in a distributed step, whose ranks
    agree on their assumptions before any change instead)."""
    return config.restore_on_error and ctx.soft_conditions is None  # type: ignore[attr-defined]


def late_checks_plan(concrete: Any) -> tuple[Rollback, None]:
    """(Rollback, None) for a graph with checks after a state change: every variable
    it may update is kept before each run and restored when one of those checks
    breaks (``replay/executor.py``); a change it cannot undo refuses the graph."""
    try:
        handles = updated_variables(concrete.graph)
    except NotUndoable as e:
        raise Unsupported(Reason.STATE_CHANGE_AND_CHECK,
                          'a tensor-dependent loop or branch checks an assumption after a state '
                          'change janus cannot undo if the check fails (%s)' % e) from None
    return Rollback(handles), None
