"""Tensor-dependent ``if`` statements and expressions as real tf.cond.

``dynamic_if`` runs both branches into a tf.cond, merging the locals they
rebind (``values.py``) and their writes to Python state (``branch_writes.py``),
with the assertions they make hoisted (``hoisting.py``); ``cond_values`` does
the same for an expression (``x if t else y``, ``and``/``or``).  Needs a
``TraceContext``; called from ``statements.py``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from janus.pyct.sites import SiteKey
from janus.reasons import Reason
from janus.errors import ConversionError
from janus.control.branch_writes import BranchEffects, join
from janus.control.common import (BranchRaised, TestValue, condition_tensor, describe_site,
                                          in_traced_region, is_tensor, kept_running, lineage_of,
                                          snapshot_of, taping, truth_output, variables_read)
from janus.values.scalars import number_type
from janus.control.hoisting import hoist_assertions, hoist_beside_changes, mark_hoisted
from janus.control.values import (CannotMerge, as_output, cannot_merge, dummy, merge,
                                          merge_values, noted, outputs_apart, refusal)
from janus.graph.graph_analysis import depends_on_state_change
from janus.trace.trace_context import Unsupported
from janus.trace.tracing import AssumptionKind, current

if TYPE_CHECKING:
    from janus.trace.namespace import FunctionNamespace
    from janus.trace.trace_context import TraceContext


def cond_values(ns: FunctionNamespace, site: int, pred: tf.Tensor, true_thunk: Callable[[], Any],
                false_thunk: Callable[[], Any], lineage: frozenset = frozenset()) -> Any:
    """tf.cond of two expressions; both must give tensors, or numbers (a dynamic
    scalar): a Python value cannot depend on a tensor.  Values of different kinds
    whose truth is known (``self.step > 3 and loss < 1.0``) give a ``TestValue``."""
    ctx = current()
    variables, seen, truths = {}, {}, {}
    where = describe_site(ns, site)
    assumptions = len(ctx.assumptions)

    def wrap(thunk: Callable[[], Any], branch: bool, truth_only: bool = False) -> Callable[[], Any]:
        def run() -> Any:
            value = in_traced_region(thunk)
            variables[branch] = variables_read()
            truths[branch] = truth_output(value)
            if not (is_tensor(value) or number_type(value) is not None
                    or truths[branch] is not None):
                raise Unsupported(Reason.BRANCH_TYPES,
                                  '%s: in a tensor-dependent conditional, the %s branch gives a '
                                  '%s, not a tensor' % (where, 'true' if branch else 'false',
                                                        type(value).__name__))
            seen[branch] = value
            truth_out = truths[branch] if truths[branch] is not None else tf.constant(False)
            return kept_running(((tf.constant(0) if truth_only else as_output(value)),
                                  truth_out))
        return run

    def mergeable() -> bool:
        try:
            merge_values(seen[True], seen[False], None, cannot_merge, lineage)
            return True
        except CannotMerge:
            return False
    try:
        result, truth_result = tf.cond(pred, wrap(true_thunk, True), wrap(false_thunk, False))
    except (ValueError, TypeError):
        if len(seen) == 2 and not mergeable():
            if truths[True] is not None and truths[False] is not None:
                # The values cannot meet in one output (a dtype clash): only the truths.
                del ctx.assumptions[assumptions:]
                _, truth_result = tf.cond(pred, wrap(true_thunk, True, True),
                                          wrap(false_thunk, False, True))
                _check_one_sided_variables(ns, site, variables)
                return TestValue(truth_result, where, lineage)
            merge_values(seen[True], seen[False], None, refusal(where, 'the value', lineage),
                          lineage)
        raise
    _check_one_sided_variables(ns, site, variables)
    if not mergeable() and truths[True] is not None and truths[False] is not None:
        return TestValue(truth_result, where, lineage)
    return noted(pred, seen[True], seen[False], merge_values(
        seen[True], seen[False], result, refusal(where, 'the value', lineage), lineage))


def _check_one_sided_variables(ns: FunctionNamespace, site: int,
                               variables: Mapping[bool, set[int]]) -> None:
    """Eagerly, a variable used only by the branch not taken gets a None gradient
    (optimizers skip it); through tf.cond it gets zeros (momentum, Adam and weight
    decay still move it).  Under a GradientTape that is not the same program."""
    values = list(variables.values())
    if taping() and len(values) == 2 and values[0] != values[1]:
        raise Unsupported(Reason.BRANCH_GRADIENT_VARIABLES,
                          '%s: under a GradientTape, the two sides of a tensor-dependent '
                          'conditional read different variables; their gradients would be '
                          'zeros, not None' % describe_site(ns, site))


class _Attempt:
    """One try at tracing both sides of a tf.cond: what each side left in the
    locals (``seen``), read (``variables``), wrote (``found``) and took as the
    other side's exports (``used``).  ``dynamic_if`` tries again, knowing more,
    when the sides' exports or kinds of locals did not match."""

    def __init__(self, frame: _IfFrame, known: Mapping[bool, list[Any]], apart: set[int]) -> None:
        self.frame, self.known, self.apart = frame, known, apart
        self.seen: dict[bool, Any] = {}
        self.variables: dict[bool, set[int]] = {}
        self.found: dict[bool, BranchEffects] = {}
        self.used: dict[bool, list[Any]] = {}

    def branch(self, fn: Callable[[], Any], tag: bool) -> Callable[[], Any]:
        """The tf.cond branch function of side ``tag`` running ``fn``."""
        def run() -> Any:
            return self._run(fn, tag)
        return run

    def _run(self, fn: Callable[[], Any], tag: bool) -> Any:
        frame = self.frame
        frame.set_state(frame.init)
        frame.heap.restore(frame.base)
        region = frame.heap.open_region()
        try:
            in_traced_region(fn)
            self.variables[tag] = variables_read()
        except ConversionError:   # janus's own (Unsupported, deferred): not the user's
            raise
        except Exception as e:  # the branch raises: handled by dynamic_if as an assumption
            raise BranchRaised(tag, e) from e
        finally:
            frame.heap.close_region(region)
        if [snapshot_of(v) for v in frame.init] != frame.before:
            raise Unsupported(Reason.BRANCH_CHANGES_PYTHON,
                              '%s: a tensor-dependent branch changes a Python list or '
                              'dict in place; janus keeps Python values Python' % frame.where)
        self.seen[tag] = frame.get_state()
        self.found[tag] = BranchEffects(frame.heap, frame.base, region, frame.where)
        # The other side's exports as stand-ins: known once it was traced (tf.cond
        # traces the true side first), else from an earlier attempt.
        other = self.found[not tag].exports.specs() if (not tag) in self.found \
            else self.known.get(not tag, [])
        self.used[tag] = other
        mine = tuple(self.found[tag].exports.tensors)
        stand_ins = tuple(dummy(spec, frame.where) for spec in other)
        return kept_running((tuple(tf.constant(0) if i in self.apart else as_output(v)
                                   for i, v in enumerate(self.seen[tag])),
                             mine if tag else stand_ins, stand_ins if tag else mine))

    def exports_mismatch(self) -> bool:
        return len(self.found) == 2 and any(
            self.used[tag] != self.found[not tag].exports.specs() for tag in (True, False))


class _IfFrame:
    """What every attempt at a tensor-dependent ``if`` starts from."""

    def __init__(self, ctx: TraceContext, get_state: Callable[[], Sequence[Any]],
                 set_state: Callable[[Sequence[Any]], object], where: str) -> None:
        self.heap, self.get_state, self.set_state, self.where = ctx.heap, get_state, set_state, where
        self.init = get_state()
        self.before = [snapshot_of(v) for v in self.init]
        self.base = ctx.heap.checkpoint()

    def reset(self) -> None:
        self.set_state(self.init)
        self.heap.restore(self.base)


def dynamic_if(ns: FunctionNamespace, site: int, test_value: Any, true_fn: Callable[..., Any],
               false_fn: Callable[..., Any], get_state: Callable[[], Sequence[Any]],
               set_state: Callable[[Sequence[Any]], object]) -> Any:
    ctx = current()
    where = describe_site(ns, site)
    frame = _IfFrame(ctx, get_state, set_state, where)
    pred = condition_tensor(test_value)
    lineage = lineage_of(test_value)
    hoisted = None
    if depends_on_state_change(pred) is not None:
        hoisted = hoist_assertions(ctx, frame.init, set_state, frame.base, [true_fn, false_fn])
    assumptions = len(ctx.assumptions)
    # tag -> specs of what that branch exports (from an earlier attempt)
    known: dict[bool, list[Any]] = {}
    apart: set[int] = set()   # positions of locals the two sides give as different kinds of value
    for _ in range(4):
        attempt = _Attempt(frame, known, apart)
        try:
            outputs = tf.cond(pred, attempt.branch(true_fn, True), attempt.branch(false_fn, False))
        except BranchRaised as raised:
            # `if t: raise ...`: assume the raising branch is not taken; if it is,
            # the call re-runs imperatively and raises the real exception there.
            frame.reset()
            del ctx.assumptions[assumptions:]
            other = not raised.branch
            condition = pred if other else tf.logical_not(pred)
            ctx.assume(SiteKey(ns.fn.__code__, site), AssumptionKind.RAISE, condition,
                       'the branch that raises %s is not taken' % type(raised.error).__name__)
            return (true_fn if other else false_fn)()
        except (ValueError, TypeError, AssertionError):
            frame.reset()
            if attempt.exports_mismatch():
                known = {tag: attempt.found[tag].exports.specs() for tag in (True, False)}
                del ctx.assumptions[assumptions:]
                continue   # trace again, each side knowing what the other exports
            if len(attempt.seen) == 2 and outputs_apart(attempt.seen) - apart:
                apart |= outputs_apart(attempt.seen)
                del ctx.assumptions[assumptions:]
                continue   # trace again, those locals not carried out (UnmergedLocal)
            raise
        break
    else:
        raise Unsupported(Reason.BRANCH_TYPES,
                          '%s: janus could not match what the two sides of a tensor-dependent '
                          'if write' % where)
    frame.heap.restore(frame.base)
    _check_one_sided_variables(ns, site, attempt.variables)
    _join_branches(ctx, attempt, outputs, hoisted)
    set_state(merge(ns, site, attempt.seen, outputs[0], pred, lineage))
    join(ctx, frame.base, pred, attempt.found, where, lineage)


def _join_branches(ctx: TraceContext, attempt: _Attempt, outputs: Sequence[Any],
                   hoisted: list[int] | None) -> None:
    """The branches' graphs after the tf.cond: their assertions hoisted or marked,
    their exports given the cond's outputs."""
    found = attempt.found
    graphs = [found[True].exports.graph, found[False].exports.graph]
    if hoisted is not None:
        mark_hoisted(graphs, hoisted)
    else:
        hoist_beside_changes(ctx, graphs)
    _, true_exports, false_exports = outputs
    found[True].exports.outputs = list(true_exports)
    found[False].exports.outputs = list(false_exports)
