"""Traces a converted function once into a guarded ``ConcreteFunction``.

Needs ``generator.convert`` to have produced the converted function and a
``call_signature.Signature`` for the call.  The result, a ``GraphEntry``, holds the
graph, its guards (argument signature + guards on outside values), its
in-graph assumptions, and how to rebuild the Python return value
(``templating.py``).

The deferred-update rule lives here: before the trace closes, every op that
changes state outside the graph (by its op definition, ``effects.py``:
variable assignments, optimizer updates, generator draws, iterator reads,
printing) gets a control dependency on every ``Janus>Assert`` of the graph,
so a run whose assertion fails has changed nothing.  While tracing, stdout
written by anything but janus's deferred print refuses the trace
(``trace/trace_output.py``); a graph that used Keras layers is guarded by
their settings (``library/library_config.py``); what Keras changes on them
while traced (their losses) is replayed per run, anything else holding a
graph tensor refuses (``library/library_state.py``).
"""
import dataclasses
import inspect
import logging
import os
import sys
import time

import tensorflow as tf
from tensorflow.python.framework import auto_control_deps_utils as acd_utils

from janus.reasons import Reason
from janus import errors
from janus.trace import call_signature
from janus.config import config
from janus.errors import ConversionError
from janus.graphgen import (effects, generator, hostcheck, nested, retrace, rollback,
                            templating)
from janus.graph.effects import PULL_CHECKS, PULLS_OUTSIDE, pulls_outside
from janus.replay.entry import GraphEntry
from janus.graph.ops import INVOKE_OP
from janus import control
from janus.graph import fallible, graph_analysis, ops
from janus.library import library_config, library_state
from janus.trace import calls, trace_context, trace_output, tracing
from janus.values import scalars


# -- deferred state updates -------------------------------------------------

def _contents(op, memo):
    """(runs a Janus>Assert, changes state): of the op itself or of what it calls."""
    if op in memo:
        return memo[op]
    memo[op] = (False, False)
    # An assertion a tf.cond branch also checks before the cond (``control.py``
    # hoists it there) is that outer check's duplicate: not an assertion here.
    asserts = op.type in ops.CHECK_OPS and op.name not in getattr(
        op.graph, control.HOISTED, ())
    called = effects.called_graphs(op)
    # An op that runs other graphs is judged by what they contain, not by its
    # own inputs (a tf.cond captures variable handles it may only read).
    mutates = _changes_state(op) if not called else False
    for graph in called:
        for inner in graph.get_operations():
            a, m = _contents(inner, memo)
            asserts, mutates = asserts or a, mutates or m
    if op.type in effects.CALL_OPS and not called:
        mutates = True  # a call we cannot look into: assume it changes state
    memo[op] = (asserts, mutates)
    return memo[op]


def _changes_state(op):
    """Whether ``op`` itself changes state, by its definition (``effects.py``)."""
    kind = effects.effect(op)
    if kind is effects.Effect.UNREPRODUCIBLE:
        raise errors.Unsupported(Reason.RANDOM_OPS, effects.unreproducible_reason(op),
                                 *_user_line(op))
    return kind is effects.Effect.CHANGE


_NOT_USERS = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
              os.sep + 'site-packages' + os.sep, os.sep + 'dist-packages' + os.sep)


def _user_line(op):
    """``(filename, lineno, source line)`` of the innermost line of your code that made
    ``op`` (its creation stack: the converted code keeps your file and lines), so a
    refusal found on the finished graph names that line, not the ``def``; Nones when
    none is known."""
    try:
        frames = list(op.traceback)
    except Exception:  # noqa: BLE001 - an op without a stack: the def's line, as before
        return None, None, None
    for frame in reversed(frames):
        name = frame.filename
        if name and not name.startswith('<') and not any(part in name for part in _NOT_USERS):
            return name, frame.lineno, _read_line(name, frame.lineno)
    return None, None, None


HOST_CHECKED = '_janus_host_checked'   # on a traced graph: ops hostcheck.py made redundant
LATE_CHECKS = '_janus_late_checks'     # on a traced graph: checks that run after a state change


def defer_state_updates(graph, assert_ops, late_checks_ok=False):
    """Makes every state-changing op wait for every assertion; returns whether any exist.

    Ops that run other graphs (tf.cond, tf.while_loop, function calls) count
    as assertions or state changes by what they contain.  An assertion may
    only rest on values computed before the first state change: a stateful op
    (a variable read) created after it is ordered after it by TF's automatic
    control dependencies, which would close a cycle.

    A loop or branch that checks and changes state, or checks after a change
    (``late_checks``), cannot have its checks first: with ``late_checks_ok``
    (the graph gets a rollback of every variable it updates: ``LATE_CHECKS``)
    it is only ordered after the other checks, and a broken assumption in it
    restores the variables before the call re-runs imperatively.
    """
    memo = {}
    # Checks done on the host before the run, and what only they needed (hostcheck.py).
    on_host = getattr(graph, HOST_CHECKED, frozenset())
    ops = [op for op in graph.get_operations() if op not in on_host]
    contents = [(op,) + _contents(op, memo) for op in ops]
    mutating = [op for op, _, m in contents if m]
    asserting = (set(assert_ops) | {op for op, a, _ in contents if a}) - on_host
    first_change = min((op._id for op in mutating), default=None)
    # (a recursive graph function's call checks inside, like a loop that asserts)
    late = {op for op in asserting if (op.type == INVOKE_OP
                                       or not op.type.startswith('Janus>')) and (
        op in mutating or first_change is not None and op._id > first_change
        and any(t.dtype == tf.resource for t in op.inputs))}   # ordered after a change by TF
    if late and not late_checks_ok:
        first = min(late, key=lambda op: op._id)
        raise errors.Unsupported(
            Reason.STATE_CHANGE_AND_CHECK,
            'a tensor-dependent loop or branch both changes state and checks an assumption '
            '(%s); janus cannot order the change after the check' % first.type,
            *_user_line(first))
    setattr(graph, LATE_CHECKS, frozenset(late))
    asserting -= late
    if not mutating:
        return None
    before = _wait_for_everything_before(ops, mutating, first_change)
    if not asserting:
        return before
    pulls = _pull_checks(graph, asserting, mutating)
    for op in graph_analysis.ancestors(asserting - set(pulls)):
        if op in mutating or (op._id > first_change and op._is_stateful
                              and op not in asserting):
            raise errors.Unsupported(
                Reason.CHECK_AFTER_STATE_CHANGE,
                'an assumption depends on a state change made earlier in the same call (%s); '
                'janus cannot check it before the change' % op.type, *_user_line(op))
    for op in mutating:
        op._add_control_inputs([a for a in asserting if a not in op.control_inputs
                                and pulls.get(a) is not op])
    _order_checks_by_rule_alone(graph, asserting)
    return before


def _pull_checks(graph, asserting, mutating):
    """{check: pull} for the check that a pull from an outside iterator found an element
    (``effects.PULL_CHECKS``) when it may run after that pull: the pull is the
    graph's first state change (``_in_program_order`` runs every later change
    after it, through whatever handle) and the only one the check needs.
    When the check fails the pull found nothing and changed nothing; every other
    change waits for the check, and the pull for every other check, so a failed
    run changed nothing at all.  A second pull's check would follow the first
    pull: it stays refused."""
    recorded = getattr(graph, PULL_CHECKS, {})
    first = min(mutating, key=lambda op: op._id)
    for check in asserting:
        if recorded.get(check.name) == first.name and {
                op for op in graph_analysis.ancestors([check]) if op in mutating} == {first}:
            return {check: first}
    return {}


def _order_checks_by_rule_alone(graph, asserting):
    """Takes the checks out of TF's chain of stateful ops without a resource.

    TF's automatic control dependencies (added when the trace closes) order
    every stateful op without a resource input after the previous one in
    program order: a check (a ``Janus>Assert``, a loop's trip-count gate, a
    tf.cond that asserts) made after a tf.cond whose test read a changed
    variable would run after that cond, hence after the change, which the
    rule above makes wait for the check: a cycle TF refuses at run time.  A
    check changes nothing, so only the rule above orders it: it runs
    independently (before the function returns, beside everything else).  A
    check with a resource input stays ordered by that resource (what it reads
    must follow the writes before it; such a check after a change is refused).
    """
    manager = getattr(graph, 'experimental_acd_manager', None)
    if manager is None:
        return
    for op in asserting:
        if op.graph is graph and not any(t.dtype == tf.resource for t in op.inputs):
            manager.run_independently(op)


def _wait_for_everything_before(ops, mutating, first_change):
    """State changes also wait for every op that does not need them.

    That is every op created before the first state change and every later one
    that reads no changed state (``tf.map_fn`` on the inputs after an optimizer
    step).  So a TF error in any of those ops (a bad reshape, an out-of-range
    gather, shapes a relaxed graph let through that eager's library code would
    have refused) stops the run before anything changed, and the call can be
    re-run imperatively to raise eager's own exception.  Returns those ops' names.
    """
    # Stateful ops created after the first change get ordered after it by TF's
    # automatic control dependencies (added when the trace closes): waiting for
    # them, or for anything that uses them, would close a cycle.
    late_stateful = _late_stateful(ops, set(mutating), first_change)
    after_changes = _descendants(ops, list(mutating) + late_stateful) | set(late_stateful)
    before = [op for op in ops if op not in mutating and op not in after_changes]
    consumed = set()
    for op in before:
        consumed.update(t.op for t in op.inputs)
        consumed.update(op.control_inputs)
    sinks = [op for op in before if op not in consumed]
    for op in mutating:
        op._add_control_inputs([s for s in sinks if s not in op.control_inputs
                                and s is not op])
    return SafeOps((op.name for op in before),
                   calls={op.name for op in before if effects.called_graphs(op)})


def _late_stateful(ops, mutating, first_change):
    """The stateful ops created after the first change that run after it.

    TF's automatic control dependencies order each resource's reads after its
    earlier writes and its writes after everything before it (as
    ``auto_control_deps_utils`` classifies an op's resource inputs), so a read
    of variables no earlier op writes may run before the first change.  It
    does where an op that may fail needs it (``fallible.infallible``): the
    forward pass after a learning-rate update or a dropout seed's advance runs
    first, and an error there leaves state untouched.  Other such reads stay
    after it: waiting for them would only hold the updates back."""
    written, late, free = set(), [], []   # written: ids of resource tensors (through Identity)
    for op in ops:   # in creation order
        reads, writes = acd_utils.get_read_write_resource_inputs(op)
        if op._id > first_change and op._is_stateful:
            if (op in mutating or writes or not reads or effects.called_graphs(op)
                    or effects.effect(op) is not effects.Effect.NONE
                    or any(id(rollback.through_identity(t)) in written for t in reads)):
                late.append(op)
            else:
                free.append(op)
        written.update(id(rollback.through_identity(t)) for t in writes)
    if free:
        needed = _feeding_fallible(ops)
        late.extend(op for op in free if op not in needed)
    return late


def _feeding_fallible(ops):
    """The ops some op that may fail at run time depends on (itself included)."""
    consumers = {}
    for op in ops:
        for source in [t.op for t in op.inputs] + list(op.control_inputs):
            consumers.setdefault(source, []).append(op)
    found = set()
    for op in reversed(ops):   # consumers first, mostly: fixpoint below for the rest
        if not fallible.infallible(op) or any(c in found for c in consumers.get(op, ())):
            found.add(op)
    changed = True
    while changed:
        changed = False
        for op in ops:
            if op not in found and any(c in found for c in consumers.get(op, ())):
                found.add(op)
                changed = True
    return found


class SafeOps(frozenset):
    """Names of the ops that run before any state change; ``calls``: those of them
    that run other graphs (a node inside one is named below it: ``map/while/...``)."""

    def __new__(cls, names=(), calls=()):
        self = super().__new__(cls, names)
        self.calls = frozenset(calls)
        return self


def _descendants(ops, roots):
    """The ops that depend on any of ``roots`` (by data or control), roots excluded."""
    consumers = {}
    for op in ops:
        for source in [t.op for t in op.inputs] + list(op.control_inputs):
            consumers.setdefault(source, []).append(op)
    found, stack = set(), list(roots)
    while stack:
        for consumer in consumers.get(stack.pop(), ()):
            if consumer not in found:
                found.add(consumer)
                stack.append(consumer)
    return found - set(roots)


# -- tracing ---------------------------------------------------------------

def _refuse_variable_creation(next_creator, **kwargs):
    raise errors.Unsupported(Reason.VARIABLE_CREATION,
                             'the function creates a tf.Variable on every call; create '
                             'variables outside it (or let a profiled call build the layer)')


def trace(fn, converted, bound, signature, plan, heap_shapes=None, distributed=False,
          number=None):
    """Generates the graph for ``bound`` (inspect.BoundArguments) under ``signature``:
    a ``retrace.TraceResult``; raises a ``retrace.Retrace`` request when a changed
    policy may make a failed trace succeed, else the ``ConversionError`` refusing it.

    ``heap_shapes``: relaxed shapes of tensors read from Python objects, kept
    across traces so a changing shape there is relaxed like an argument's.
    """
    started = time.perf_counter()
    ctx = _new_context(fn, converted, bound, plan, heap_shapes, distributed)
    try:
        entry = _traced_entry(ctx, fn, converted, bound, signature, distributed, number,
                              started)
    except ConversionError as error:
        request = _retrace_request(ctx, error, signature, heap_shapes)
        if request is None:
            raise
        raise request from error
    if entry.not_undoable is not None and entry.writes and not _fails_before_writes(ctx, entry):
        # An op may fail after a change janus cannot undo (an iterator draw, a print
        # op), and the Python writes and prints before it wait for the run's end:
        # eager's state at that error could be neither restored nor shown.  Judged on
        # the finished graph: no retrace request (another policy cannot change it).
        raise ConversionError(Reason.UNDOABLE_FAILURE,
                              'an op of this call may fail after a state change janus '
                              'cannot undo (%s), with a Python write before it'
                              % entry.not_undoable)
    return retrace.TraceResult(entry, frozenset(ctx.guards.evolving))


def _fails_before_writes(ctx, entry):
    """Whether every op that may fail after a state change runs in program order
    (``_in_program_order``) and comes before the call's first Python write."""
    last = getattr(entry.concrete.graph, FAILURES_IN_ORDER, None)
    mark = ctx.heap.writes.first_mark
    return last is not None and mark is not None and last <= mark


def _traced_entry(ctx, fn, converted, bound, signature, distributed, number, started):
    """The ``GraphEntry`` of one trace, or the ``ConversionError`` that stopped it
    (with the user's line where one is known)."""
    holder = {}
    body = _graph_body(ctx, converted, bound, signature, holder)
    body.__name__ = 'janus_' + fn.__name__
    try:
        with tf.variable_creator_scope(_refuse_variable_creation), trace_output.refused():
            concrete = tf.function(body, autograph=False).get_concrete_function(
                *signature.input_specs())
    except ConversionError as e:
        failed = _locate(_value_needed(ctx, e), ctx, converted, sys.exc_info()[2])
        if failed is e:
            raise   # as it is, its own cause kept
        raise failed from e
    except errors.TraceBudgetExceeded as e:   # not a statement's fault: no break, no retrace
        raise ConversionError(Reason.TRACE_TOO_LONG, str(e)) from None
    except Exception as e:  # any trace-time error: the call runs imperatively
        error = ConversionError(_trace_failure(e), '%s: %s' % (type(e).__name__, _text(e)))
        raise _locate(_value_needed(ctx, error), ctx, converted, sys.exc_info()[2]) from e
    finally:
        library_state.restore(ctx)   # Keras's changes at trace time are replayed per run
    _assert_acyclic(concrete.graph)
    _check_library_left_nothing(ctx)
    _add_guards_taken_after_the_trace(ctx, bound)
    closed = holder['closed']
    restore = (None, None)
    if getattr(concrete.graph, LATE_CHECKS, None):
        restore = rollback.late_checks_plan(concrete)   # refuses what it cannot undo
    elif config.restore_on_error and not distributed:
        restore = _rollback_plan(concrete, ctx)
    _errors_reach_handlers(ctx, concrete, restore, converted)
    assumed_sites = ctx.plan.assumed()
    return GraphEntry(
        signature=signature, bound_template=bound, concrete=concrete,
        call_time_readers=ctx.host.call_time_readers, output_template=closed.template,
        writes=closed.writes, host=closed.host, source_guards=ctx.guards.taken,
        assumptions={a.id: a for a in ctx.assumptions}, inlined=list(ctx.converted.values()),
        assumed_sites=assumed_sites,
        assumed_instead=frozenset(ctx.plan.unbuildable) & frozenset(assumed_sites),
        has_mutations=ctx.has_mutations, safe_error_ops=ctx.safe_error_ops or set(),
        uses_heap_ops=ctx.heap.run_id is not None, op_writes=list(ctx.heap.op_writes),
        rollback=restore[0], not_undoable=restore[1], number=number,
        trace_seconds=time.perf_counter() - started,
        recursive=[build.describe() for build in ctx.recursion.builds_made
                   if build.function is not None],
        xla_blockers=lambda: effects.xla_blockers(concrete.graph))   # asked when XLA is on


def _retrace_request(ctx, error, signature, heap_shapes):
    """The ``Retrace`` a failed trace asks for (None: ``error`` refuses the call
    shape).  The order is the build loop's: each request it honours makes
    progress that no later trace of the build undoes (``graphgen/build.py``)."""
    if error.reason is Reason.TRACE_TOO_LONG:
        return None   # another trace would take as long
    evolving = frozenset(ctx.guards.evolving)
    failed_sites = ctx.plan.failed()
    if failed_sites:   # a graph break there once the assumption breaks (plan.py)
        return retrace.AssumeInstead(error, evolving, failed_sites)
    if isinstance(error, errors.ScalarValueNeeded):
        return retrace.PinNumbers(error, evolving)
    if ctx.whole_arguments:
        return retrace.PassWhole(error, evolving, frozenset(ctx.whole_arguments))
    if ctx.recursion.structure_widened:
        return retrace.StructureWidened(error, evolving)
    if heap_shapes is not None and signature.has_unknown_dims() \
            and error.reason not in retrace.SHAPE_INDEPENDENT:
        return retrace.ExactShapes(error, evolving)
    if evolving:
        return retrace.RelaxEvolving(error, evolving)
    return None


def breaks_at_statement(error):
    """Whether the statement ``error`` stopped in becomes a graph break (runs in
    Python, ``graphgen/segments.py``) rather than an assumed path or a refusal."""
    return breaks_at_statement_line(error, error.statement_line)


def breaks_at_statement_line(error, line):
    """Whether a refusal ``error`` at statement ``line`` becomes a graph break.  janus's
    own failures do not: they stay visible as internal errors."""
    return (config.graph_breaks and line is not None
            and error.reason not in (Reason.INTERNAL_ERROR, Reason.TRACE_TOO_LONG,
                                     Reason.TRACEBACK_READ))


def _new_context(fn, converted, bound, plan, heap_shapes, distributed):
    """The ``TraceContext`` of one trace, with what the tracer hands it."""
    plan.reset()
    ctx = trace_context.TraceContext(fn, bound.arguments, plan, generator.convert,
                                     calls.call)
    ctx.shapes = heap_shapes
    if distributed:
        ctx.soft_conditions = []   # checked together by library.distributed.agree
    ctx.register_converted(fn.__code__, converted)
    ctx.refusals = []
    ctx.host.leaves = {}
    ctx.host.functions = {}
    ctx.host.draws = {}
    ctx.host.call_time_readers = {}
    library_config.install()
    library_state.install()
    return ctx


def _graph_body(ctx, converted, bound, signature, holder):
    """The Python function ``tf.function`` traces: the converted function on the
    graph's inputs, then its outputs, write-back templates, host checks, the
    order of checks and state changes, and the unused ops kept running.
    Fills ``holder['closed']`` (a ``ClosedGraph``)."""
    def body(*flat_inputs):
        ctx.top_graph = ctx.heap.writes.graph = tf.compat.v1.get_default_graph()
        placeholders = signature.placeholders(flat_inputs)
        for scalar in _scalar_inputs(placeholders.values()):
            ctx.host.leaves[scalar.tensor.name] = ('flat', scalar.tensor.name, scalar.type)
        arguments = scalars.from_inputs(placeholders)
        ctx.provenance.register_arguments(arguments, ctx.tensors, signature.opaque)
        call_args = inspect.BoundArguments(bound.signature, arguments)
        tracing.enter_trace(ctx)
        ctx.stack.append(converted)
        try:
            result = converted.py_fn(*call_args.args, **call_args.kwargs)
        finally:
            ctx.stack.pop()
            tracing.exit_trace()
        if ctx.refusals:
            raise errors.Unsupported(*ctx.refusals[0])
        if ctx.soft_conditions:
            raise errors.Unsupported(Reason.DISTRIBUTED_AGREEMENT,
                                     'a distributed step made assumptions after its '
                                     'agreement (janus.library.distributed.agree)')
        holder['closed'] = _close_graph(ctx, result, flat_inputs)
        return holder['closed'].outputs
    return body


@dataclasses.dataclass(frozen=True)
class ClosedGraph:
    """What closing a trace's graph made, besides the graph itself."""
    outputs: list       # the graph's output tensors
    template: object    # how to rebuild the Python return value from ``outputs``
    writes: list        # (write, template): the Python writes, in program order
    host: object        # replay.host.HostProgram or None: run before each run


def _close_graph(ctx, result, flat_inputs):
    outputs, template, writes = templating.templates_of(result, ctx.heap.writes, ctx)
    graph = tf.compat.v1.get_default_graph()
    host, checked, unneeded = hostcheck.build(ctx, graph, flat_inputs, outputs)
    if ctx.host.draws and (host is None or len(host.draws) != len(ctx.host.draws)):
        # A draw the host program cannot make (it would run in the graph, maybe twice):
        # traced again with those draws refused, a graph break at each (host_draws.py).
        tracing.need(frozenset(lineage for _, lineage in ctx.host.draws.values()),
                     'a draw janus makes before the run only in the top graph')
    setattr(graph, HOST_CHECKED, frozenset(checked | unneeded))
    ctx.safe_error_ops = defer_state_updates(graph, [op for op in ctx.assert_ops
                                                     if op not in checked],
                                             late_checks_ok=rollback.late_checks_allowed(ctx))
    ctx.has_mutations = ctx.safe_error_ops is not None
    if ctx.has_mutations and (getattr(graph, PULLS_OUTSIDE, False)
                              or pulls_outside(graph)):
        _in_program_order(graph, ctx.safe_error_ops, checked | unneeded)
    # An op that may fail runs even when nothing uses its result, as eagerly.
    fallible.keep_unused(graph, outputs, skip=checked | unneeded)
    return ClosedGraph(outputs, template, writes, host)


FAILURES_IN_ORDER = '_janus_failures_in_order'   # on a traced graph: the newest op that may
# fail after a state change, when all of them run in program order with the changes


def _in_program_order(graph, before, on_host):
    """Orders the state changes and the ops that may fail after one as the program
    made them, one after the other: an error there leaves exactly the changes made
    before it, as eagerly.  A graph pulling from an outside iterator (which no run
    can undo) then raises that error as eager does, as long as no Python write
    came before it (``_traced_entry``).  Checks stay first (deferred updates)."""
    memo = {}
    events = [op for op in graph.get_operations()
              if op.name not in before and op not in on_host
              and (_contents(op, memo)[1] or not fallible.infallible(op))]
    if events:
        # What the first change waits for (the checks: a recursive function's call
        # that asserts inside, made after it) runs before every change already;
        # chaining it after one would close a cycle.
        first_waits_for = graph_analysis.ancestors([events[0]]) - {events[0]}
        events = [events[0]] + [op for op in events[1:] if op not in first_waits_for]
    for earlier, later in zip(events, events[1:]):
        if earlier not in later.control_inputs:
            later._add_control_inputs([earlier])
    failing = [op._id for op in events if not fallible.infallible(op)]
    setattr(graph, FAILURES_IN_ORDER, max(failing, default=0))


def _check_library_left_nothing(ctx):
    """Library code may keep a graph tensor, or swallow janus's refusal: not converted."""
    leak = library_state.leaked(ctx, ctx.provenance.kept)
    if leak is not None:
        raise ConversionError(
            Reason.LIBRARY_SIDE_EFFECT, 'library code kept a graph tensor in %s while janus '
            'traced it (it would keep it, not one value per call); janus does not convert that '
            'call' % leak)
    if ctx.needs_value:   # library code swallowed the refusal: the trace is not used
        raise _value_needed(ctx, ConversionError(Reason.NUMBER_VALUE_NEEDED, 'library code used '
                                                 'a number from outside the call'))


def _add_guards_taken_after_the_trace(ctx, bound):
    alias = ctx.provenance.alias_guard(bound.arguments)
    if alias is not None:
        ctx.guards.take(alias)
    # Taken after the trace: Keras sets its own attributes while it builds a call.
    config_guard = library_config.guard_for(ctx.provenance.kept, ctx.attributes_used)
    if config_guard is not None:
        ctx.guards.take(config_guard)
    losses_guard = library_state.guard_for(ctx)
    if losses_guard is not None:
        ctx.guards.take(losses_guard)


def _assert_acyclic(graph):
    """Invariant (DESIGN.md, deferred state updates): the graph janus hands to TF,
    its automatic control dependencies included, has no cycle.  TF would refuse
    it only when it runs; a cycle here is janus's bug, met at trace time (the
    call shape runs imperatively, the event says so)."""
    ops = graph.get_operations()
    waiting = {op: len(op.inputs) + len(op.control_inputs) for op in ops}
    consumers = {}
    for op in ops:
        for source in [t.op for t in op.inputs] + list(op.control_inputs):
            consumers.setdefault(source, []).append(op)
    ready = [op for op, n in waiting.items() if n == 0]
    done = 0
    while ready:
        op = ready.pop()
        done += 1
        for consumer in consumers.get(op, ()):
            waiting[consumer] -= 1
            if waiting[consumer] == 0:
                ready.append(consumer)
    stuck = sorted(op.name for op, n in waiting.items() if n > 0)
    assert done == len(ops), ('janus built a graph with a cycle (ops on or after it: %s)'
                              % ', '.join(stuck[:8]))


def _errors_reach_handlers(ctx, concrete, restore, converted):
    """A ``try`` body's op that may fail at run time: eager would run the handler, so
    every error of the graph must re-run the call imperatively (``replay/executor.py``).
    Refuses the statement (a graph break at it) when one could surface as the graph's
    own: after a state change no rollback undoes (``control/exceptions.py``)."""
    region = control.exceptions.may_fail_inside(ctx.try_regions)
    if region is None or not ctx.has_mutations or restore[0] is not None:
        return
    graph = concrete.graph
    safe = ctx.safe_error_ops or set()
    on_host = getattr(graph, HOST_CHECKED, frozenset())
    if all(op.name in safe or op in on_host or fallible.infallible(op)
           for op in graph.get_operations()):
        return
    error = ConversionError(
        Reason.TRY_STATEMENT, 'the body of this try statement may fail at run time, where '
        'the graph may already have changed what janus cannot undo (%s); eager would run '
        'the handler' % (restore[1] or 'janus.config.restore_on_error is off'),
        region.filename, region.line, _read_line(region.filename, region.line))
    error.statement_line = _own_statement_line(region.frames, converted)
    raise error


def _own_statement_line(frames, converted):
    """``_statement_line`` for the (code, line) frames of a region, innermost first."""
    for code, line in frames:
        if code is converted.py_fn.__code__ or (
                code in converted.code_objects
                and (code.co_name.startswith('__') or code.co_name in _OWN_NESTED)):
            return line
    return None


def _rollback_plan(concrete, ctx):
    """(Rollback or None, why not undoable or None): ``graphgen/rollback.py``."""
    try:
        return rollback.plan(concrete, ctx.safe_error_ops,
                             getattr(concrete.graph, HOST_CHECKED, frozenset()))
    except Exception as e:  # noqa: BLE001 - without one, an error after a change is the graph's
        return None, 'janus could not work out what to restore: %s: %s' % (type(e).__name__, e)


def _scalar_inputs(values, depth=0):
    """The ``call_signature.ScalarInput``s (number arguments' graph inputs) in ``values``."""
    for value in values:
        if type(value) is call_signature.ScalarInput:
            yield value
        elif depth < 16 and (type(value) in (list, dict) or isinstance(value, tuple)):
            yield from _scalar_inputs(value.values() if type(value) is dict else value,
                                      depth + 1)


def _value_needed(ctx, error):
    """``error``, or the ScalarValueNeeded it stands for when a use of a dynamic scalar
    needed its value (the janus function then traces with those numbers constant)."""
    if not ctx.needs_value or isinstance(error, errors.ScalarValueNeeded):
        return error
    return errors.ScalarValueNeeded(ctx.needs_value, error.reason, error.context,
                                    error.filename, error.lineno, error.source_line)


def _text(error):
    """``str(error)``; an exception made in the trace may hold a value only the run has
    (``raise ValueError(v)`` of a dynamic number), whose text cannot be made now."""
    try:
        return str(error)
    except Exception:  # noqa: BLE001 - its arguments need the trace that just ended
        return '(its message holds values only the graph run has)'


def _trace_failure(error):
    """The Reason for a TF or Python exception raised while tracing: a graph tensor's
    missing ``numpy``/``item`` (the user asked for a value only the run has), else
    the line fails when traced."""
    if isinstance(error, AttributeError) and getattr(error, 'name', None) in ('numpy', 'item'):
        return Reason.NUMPY_IN_GRAPH
    return Reason.TRACE_FAILED


def _locate(error, ctx, converted, tb):
    """Attaches the user's source line (the innermost converted frame) to ``error``,
    and the line of ``converted``'s own statement the trace was in (its outermost
    frame: a graph break goes there, ``ConversionError.statement_line``)."""
    statement = _statement_line(tb, converted)
    if error.lineno is None:
        error = _with_user_line(error, ctx, tb)
    error.statement_line = statement
    error.route = None
    if statement is not None:
        try:   # the Keras layer whose own call the refusal is in (nested.py)
            error.route = nested.find_route(
                tb, _own_codes(converted),
                set(converted.code_objects) | {converted.py_fn.__code__},
                ctx.converted)
        except Exception:  # noqa: BLE001 - an optimization: the statement runs whole
            logging.getLogger('janus').debug('janus: no nested route', exc_info=True)
    return error


# Code nested in a converted function that is still its own statements: the bodies and
# tests the converter makes of loops and branches, and comprehensions.  A nested def or
# lambda of the user's is a callee: a failure in it breaks at the statement calling it.
_OWN_NESTED = ('<listcomp>', '<dictcomp>', '<setcomp>', '<genexpr>')


def _own_codes(converted):
    """The code objects of ``converted``'s own statements (``_statement_line``'s)."""
    return {converted.py_fn.__code__} | {
        code for code in converted.code_objects
        if code.co_name.startswith('__') or code.co_name in _OWN_NESTED}


def _statement_line(tb, converted):
    """The line of ``converted``'s own statement the failure happened in: its deepest
    frame in the function's own code."""
    line = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code is converted.py_fn.__code__ or (
                code in converted.code_objects
                and (code.co_name.startswith('__') or code.co_name in _OWN_NESTED)):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _with_user_line(error, ctx, tb):
    filename = lineno = None
    while tb is not None:
        if tb.tb_frame.f_code in ctx.code_objects:
            filename, lineno = tb.tb_frame.f_code.co_filename, tb.tb_lineno
        tb = tb.tb_next
    if lineno is None:
        return error
    line = _read_line(filename, lineno)
    if isinstance(error, errors.ScalarValueNeeded):
        return errors.ScalarValueNeeded(error.lineage, error.reason, error.context, filename,
                                        lineno, line)
    return ConversionError(error.reason, error.context, filename, lineno, line)


def _read_line(filename, lineno):
    import linecache
    return linecache.getline(filename, lineno) or None
