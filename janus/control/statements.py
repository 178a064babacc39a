"""The control-flow statements converted code calls (``__jr.if_stmt`` and friends),
and the decision each makes.

Every test or loop is decided per evaluation: a Python value runs as plain
Python (its inputs are guarded); a tensor (or a dynamic scalar,
``scalars.py``) whose outcome the plan assumes runs only the assumed path and
adds a ``Janus>Assert`` of the assumption; any other tensor builds real
control flow (``cond.py``, ``loops.py``).  Needs a ``TraceContext`` carrying a
``Plan``.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from janus import pytypes
from janus.config import config
from janus.decisions import DYNAMIC
from janus.errors import ConversionDeferred, ConversionError
from janus.pyct.sites import SiteKey
from janus.reasons import Reason
from janus.guards import GuardKind
from janus.recursion import structures
from janus.trace import observe
from janus.values.protocol import NOT_MODELLED, StandIn
from janus.control.common import (CannotBuild, condition_tensor, is_tensor,
                                          is_test_tensor, lineage_of, python_truth, static_truth,
                                          taping, tensor_flags, bool_tensor)
from janus.control import datasets, exceptions, outside_iterators
from janus.control.cond import cond_values, dynamic_if
from janus.control.loops import dynamic_for, dynamic_while
from janus.graph.graph_analysis import depends_on_state_change
from janus.trace.trace_context import Unsupported
from janus.trace.tracing import AssumptionKind, NeedsValue, current

if TYPE_CHECKING:
    from janus.trace.namespace import FunctionNamespace


def not_(value: Any) -> Any:
    """``not value`` in a test: a tensor's negation stays a tensor, a stand-in the
    graph tests negates itself (``trace_not``: a dynamic scalar's is a dynamic bool)."""
    if isinstance(value, StandIn):
        negated = value.trace_not()
        if negated is not NOT_MODELLED:
            return negated
    return tf.logical_not(bool_tensor(value)) if is_tensor(value) else not python_truth(value)


def _decide_test(ns: FunctionNamespace, site: int, value: Any, what: str,
                 can_build: bool = True) -> tuple[Any, bool]:
    """(outcome, assumed): the branch to take for a tensor test, or (DYNAMIC, False).

    A test that depends on a state change made earlier in the same call is never
    assumed: its Janus>Assert would have to run before the change (the deferred-
    update rule, ``graphgen/tracer.py``), so it becomes real control flow.  Nor
    is a test computed from a relaxed number (``self.step % 10 == 0``): the
    number changes every call, so the assumption would break at the first call
    that takes the other path (``graphgen/plan.py``); ``can_build``: the caller
    can build real control flow at all."""
    ctx = current()
    ctx.check_deadline()
    key = SiteKey(ns.fn.__code__, site)
    outcome = ctx.decide(key)
    condition = condition_tensor(value)
    static = static_truth(condition)
    if static is not None:
        return static, False
    if outcome is DYNAMIC:
        return DYNAMIC, False
    if depends_on_state_change(condition) is not None:
        ctx.plan.withdraw(key)   # not assumed after all (explain)
        return DYNAMIC, False
    if can_build and ctx.plan.prefers_dynamic(key, varies=bool(lineage_of(value))):
        return DYNAMIC, False
    condition = condition if outcome else tf.logical_not(condition)
    ctx.assume(key, AssumptionKind.BRANCH, condition, '%s is %s' % (what, outcome))
    return outcome, True


# -- spec-form statements (they keep return/break/continue) -------------------

def test(ns: FunctionNamespace, site: int, value: Any) -> Any:
    if not is_test_tensor(value):
        return python_truth(value)
    outcome, _ = _decide_test(ns, site, value, 'condition', can_build=False)
    if outcome is DYNAMIC:
        change = depends_on_state_change(condition_tensor(value))
        if change is not None:   # never assumed: its check would precede the change
            raise Unsupported(Reason.STATE_DEPENDENT_JUMP,
                              'a tensor-dependent condition that depends on a state change '
                              'made earlier in the same call (%s), in a statement with '
                              'return/break/continue inside: janus cannot make it a '
                              'tf.cond/tf.while_loop yet' % change.type)
        with _or_assume(ns, site):   # else assumed, as the profile shows it most often
            raise Unsupported(Reason.RETURN_IN_DYNAMIC_CONTROL,
                              'a tensor-dependent condition whose outcome varied between '
                              'calls, in a statement with return/break/continue inside: janus '
                              'cannot make it a tf.cond/tf.while_loop yet')
    return outcome


def unrolled_items(ns: FunctionNamespace, site: int | None, iterable: Any,
                   allow_dynamic: bool) -> Any:
    """The slices of a tensor a loop runs over, when their number is known or assumed."""
    ctx = current()
    if iterable.shape.rank == 0:
        raise TypeError('iteration over a 0-d tensor')
    outcome: Any = ctx.decide(SiteKey(ns.fn.__code__, site)) if site is not None else DYNAMIC
    length = iterable.shape[0] if iterable.shape.rank is not None else None
    if length is not None and length <= config.max_unroll:  # type: ignore[attr-defined]
        return tf.unstack(iterable, num=length) if length else []
    soft = ctx.soft_conditions is not None   # a distributed step: no unchecked slicing
    if (length is None and outcome is not DYNAMIC
            and outcome <= config.max_unroll  # type: ignore[attr-defined]
            and not soft and depends_on_state_change(iterable) is None):
        # Slices only once the count is known good: a data dependency on the check.
        iterable = ctx.assume(SiteKey(ns.fn.__code__, site),  # type: ignore[arg-type]
                              AssumptionKind.TRIP_COUNT,
                              tf.equal(tf.shape(iterable)[0], outcome),
                              'the loop runs %d times' % outcome, gate=iterable)
        return tf.unstack(iterable, num=outcome) if outcome else []
    if allow_dynamic:
        return None
    raise Unsupported(Reason.DYNAMIC_ITERATION,
                      'a loop over a tensor whose length varied between calls (or exceeds '
                      'janus.config.max_unroll=%d), with return/break/continue inside: janus '
                      'cannot make it a tf.while_loop yet'
                      % config.max_unroll)  # type: ignore[attr-defined]


# -- functionalized statements ---------------------------------------------------

def if_stmt(ns: FunctionNamespace, site: int, test_value: Any, true_fn: Callable[[], Any],
            false_fn: Callable[[], Any], get_state: Callable[[], Sequence[Any]],
            set_state: Callable[[Sequence[Any]], object], names: Sequence[str] = ()) -> Any:
    if not is_test_tensor(test_value):
        return (true_fn if python_truth(test_value) else false_fn)()
    outcome, _ = _decide_test(ns, site, test_value, 'condition')
    if outcome is not DYNAMIC:
        return (true_fn if outcome else false_fn)()
    flagged_get = lambda: tensor_flags(get_state(), names)  # noqa: E731
    with _or_assume(ns, site):
        return dynamic_if(ns, site, test_value, true_fn, false_fn, flagged_get, set_state)


def while_stmt(ns: FunctionNamespace, site: int, test_fn: Callable[[], Any],
               body_fn: Callable[[], Any], get_state: Callable[[], Sequence[Any]],
               set_state: Callable[[Sequence[Any]], object], names: Sequence[str] = ()) -> None:
    while True:
        value = test_fn()
        if not is_test_tensor(value):
            if not python_truth(value):
                return
            body_fn()
            continue
        outcome, _ = _decide_test(ns, site, value, 'loop condition')
        if outcome is DYNAMIC:
            flagged_get = lambda: tensor_flags(get_state(), names)  # noqa: E731
            with _or_assume(ns, site):
                dynamic_while(ns, site, test_fn, body_fn, flagged_get, set_state,
                               lineage_of(value))
            return _at_least_once(ns, site, condition_tensor(value))
        if not outcome:
            return
        body_fn()


def for_stmt(ns: FunctionNamespace, site: int, iterable: Any, body_fn: Callable[[Any], Any],
             get_state: Callable[[], Sequence[Any]], set_state: Callable[[Sequence[Any]], object],
             names: Sequence[str] = (), stop: Callable[[], Any] | None = None) -> None:
    """``for``; ``stop`` (a loop with ``break``, ``jumps``) reads its break flag: once
    it is a Python True no item is taken (a generator or iterator is not pulled past
    the break, as eagerly); a tensor flag guards the body instead (and ends a loop
    over a dataset)."""
    if datasets.is_dataset_value(iterable):
        return datasets.dataset_for(ns, site, iterable, body_fn,
                                    lambda: tensor_flags(get_state(), names), set_state, stop)
    if isinstance(iterable, tf.RaggedTensor):
        return _ragged_for(ns, site, iterable, body_fn,
                           lambda: tensor_flags(get_state(), names), set_state, stop)
    if structures.is_node(iterable) and iterable.static is None:
        return _node_items_for(ns, site, iterable, body_fn,
                               lambda: tensor_flags(get_state(), names), set_state, stop)
    if not is_tensor(iterable):
        items = loop_iterable(ns, None, iterable)
        one_shot = stop is not None and iter(iterable) is iterable   # a generator, an iterator
        for item in items:
            body_fn(item)
            if _stopped(stop, one_shot):
                return
        return
    items = unrolled_items(ns, site, iterable, allow_dynamic=True)
    if items is not None:
        for item in items:
            body_fn(item)
            if _stopped(stop):
                return
        return
    dynamic_for(ns, site, iterable, body_fn, lambda: tensor_flags(get_state(), names),
                 set_state)
    _at_least_once(ns, site, tf.shape(iterable)[0] > 0)


def _ragged_for(ns: FunctionNamespace, site: int, ragged: tf.RaggedTensor,
                body_fn: Callable[[Any], Any], get_state: Callable[[], Sequence[Any]],
                set_state: Callable[[Sequence[Any]], object],
                stop: Callable[[], Any] | None) -> None:
    """``for row in rt``: eagerly the rows ``rt[0]``, ``rt[1]``...  A known number of
    rows is unrolled; else a tf.while_loop over the row index, as AutoGraph builds."""
    rows = _ragged_rows(ragged)
    if rows is not None:
        for row in rows:
            body_fn(row)
            if _stopped(stop):
                return
        return
    count = ragged.nrows()
    dynamic_for(ns, site, tf.range(count), lambda i: body_fn(ragged[i]), get_state, set_state)
    _at_least_once(ns, site, count > 0)


def _node_items_for(ns: FunctionNamespace, site: int, ref: Any, body_fn: Callable[[Any], Any],
                    get_state: Callable[[], Sequence[Any]],
                    set_state: Callable[[Sequence[Any]], object],
                    stop: Callable[[], Any] | None) -> None:
    """``for c in node.children`` in a recursion, of a list node whose length only
    the run knows: one iteration per item of the longest such list, each past the
    shortest one's length under a tensor test (``dynamic_if``)."""
    shortest, longest, count = structures.length_bounds(ref)
    if stop is not None or longest > config.max_unroll:  # type: ignore[attr-defined]
        structures.refuse('a loop over a list node whose length only the run knows, with '
                          'break/return in it or over %d items (janus.config.max_unroll)'
                          % longest)
    for k in range(longest):
        if k < shortest:
            body_fn(structures.item(ref, k))
        else:
            dynamic_if(ns, site, tf.less(tf.constant(k, tf.int64), count.tensor),
                       lambda k=k: body_fn(structures.item(ref, k)), lambda: None,
                       get_state, set_state)


def _ragged_rows(ragged: Any) -> list[Any] | None:
    """The rows of a RaggedTensor whose number of rows the graph knows (and unrolls)."""
    count = tf.get_static_value(ragged.nrows())
    if count is None or count > config.max_unroll:  # type: ignore[attr-defined]
        return None
    return observe.ragged_rows(ragged, 'a loop over')


def _stopped(stop: Callable[[], Any] | None, one_shot: bool = False) -> bool:
    """Whether the loop's break flag is up.  A flag only the graph knows (a break
    under a tensor test) guards the body, but a one-shot iterator (a generator,
    ``enumerate`` of one) would still be pulled past the break: refused."""
    if stop is None:
        return False
    flag = stop()
    if one_shot and not isinstance(flag, bool):
        raise Unsupported(Reason.DYNAMIC_ITERATION,
                          'janus does not convert a loop over a generator or iterator with a '
                          'break under a tensor-dependent test (the graph would pull it past '
                          'the break)')
    return flag is True


def ifexp(ns: FunctionNamespace, site: int, test_value: Any, body: Callable[[], Any],
          orelse: Callable[[], Any]) -> Any:
    if not is_test_tensor(test_value):
        return body() if python_truth(test_value) else orelse()
    outcome, _ = _decide_test(ns, site, test_value, 'condition')
    if outcome is not DYNAMIC:
        return body() if outcome else orelse()
    with _or_assume(ns, site):
        return cond_values(ns, site, condition_tensor(test_value), body, orelse,
                            lineage_of(test_value))


def boolop(ns: FunctionNamespace, site: int, is_and: bool, *thunks: Callable[[], Any]) -> Any:
    return _boolop_from(ns, site, is_and, thunks, 0, thunks[0]())


def _boolop_from(ns: FunctionNamespace, site: int, is_and: bool,
                 thunks: Sequence[Callable[[], Any]], index: int, value: Any) -> Any:
    if index == len(thunks) - 1:
        return value
    go_on = lambda: _boolop_from(ns, site, is_and, thunks, index + 1, thunks[index + 1]())  # noqa: E731
    if not is_test_tensor(value):
        return go_on() if python_truth(value) == is_and else value
    outcome, _ = _decide_test(ns, site, value, 'operand %d of %s' % (index, 'and' if is_and else 'or'))
    if outcome is not DYNAMIC:
        return go_on() if outcome == is_and else value
    stop = lambda: value  # noqa: E731
    with _or_assume(ns, site):
        return cond_values(ns, site, condition_tensor(value), go_on if is_and else stop,
                            stop if is_and else go_on, lineage_of(value))


# -- dynamic control flow ----------------------------------------------------------

@contextlib.contextmanager
def _or_assume(ns: FunctionNamespace, site: int) -> Iterator[None]:
    """Real control flow at ``site`` that fails to build, where the site's outcome
    could be assumed instead (``Plan.cannot_build``), ends the trace with
    ``CannotBuild``: the janus function traces again assuming it there."""
    try:
        yield
    except ConversionDeferred:
        raise   # this call only (a Keras optimizer not built yet): the next trace builds it
    except ConversionError as e:
        key = SiteKey(ns.fn.__code__, site)
        if current().region_depth == 0 and current().plan.cannot_build(
                key, e.reason, str(e), value_needed=isinstance(e, NeedsValue)):
            raise CannotBuild(key, e) from e
        raise


def _at_least_once(ns: FunctionNamespace, site: int, first_test: tf.Tensor) -> None:
    """Under a GradientTape, a tf.while_loop that reads variables gives them zero
    gradients when it runs no iteration, where eager code gives None: assume it
    runs at least once (the paper's trip-count assumption, its weakest form)."""
    ctx = current()
    if not (taping() and ctx.last_loop_reads_variables):
        return
    # Not a speculation to relax (the loop is already dynamic): a call with no
    # iteration just runs imperatively, and the graph stays.
    ctx.assume(SiteKey(ns.fn.__code__, site), AssumptionKind.NONEMPTY_LOOP, first_test,
               'the loop runs at least once (eager gradients would be None otherwise)')


# -- a loop's Python iterable, and `assert` ----------------------------------------

def loop_iterable(ns: FunctionNamespace, site: int | None, iterable: Any) -> Iterator[Any]:
    """``__jr.iter``: a loop's iterable (a ``for`` over a Python value, a
    comprehension).  Outside lists are guarded; tensors are unrolled when safe."""
    if isinstance(iterable, tf.Tensor):
        return iter(unrolled_items(ns, site, iterable, allow_dynamic=False))
    if isinstance(iterable, StandIn):   # a list node in a recursion, an array: its items
        found = iterable.trace_iterate('iterating over')
        if found is not NOT_MODELLED:
            return iter(found)
    if observe.is_graph_ragged(iterable):
        return iter(observe.ragged_rows(iterable, 'a comprehension over'))
    if datasets.is_dataset_value(iterable):
        datasets.refuse_python_loop()
    ctx = current()
    source = ctx.provenance.source_of(iterable)
    if source is None:
        ctx.provenance.of(iterable, 'a loop')   # made by this call: iterating it is plain Python
        viewed = ctx.provenance.viewed_container(iterable)
        if viewed is not None:   # ``for k, v in self.d.items()``: the dict must not change
            return outside_iterators.unchanged_while_iterated(ctx, viewed, list(iterable))
        if observe.user_dunder(iterable, '__iter__') or observe.user_dunder(iterable,
                                                                              '__getitem__'):
            raise Unsupported(Reason.SPECIAL_METHODS,
                              'janus does not convert a loop over a %s, whose class defines '
                              '__iter__/__getitem__' % type(iterable).__name__)
        return iter(iterable)
    if outside_iterators.is_sequence_iterator(iterable):
        return outside_iterators.outside_items(ctx, iterable, source)
    if type(iterable) is range:   # immutable: guarded by start, stop and step
        ctx.guards.add(GuardKind.VALUE_MATCH, source, iterable)
        return iter(iterable)
    model = pytypes.model_of(iterable)
    if type(iterable) is list:   # the body's appends and writes are seen, as eagerly
        return outside_iterators.list_items(ctx, iterable)
    # has_items: a modelled type, so ``model`` is not None there.
    if pytypes.has_items(iterable) and model is not None and model.kind is not pytypes.Kind.DICT \
            or pytypes.is_set(iterable):   # a set refuses (its order); a deque is a copy
        items = ctx.view(iterable)   # the items themselves, guarded
        if model is not None and model.kind is pytypes.Kind.DEQUE:
            return outside_iterators.unchanged_while_iterated(ctx, iterable, items)   # (eagerly: RuntimeError)
        return iter(items)
    if pytypes.has_items(iterable):
        if ctx.heap.differs(iterable):
            keys = list(ctx.view(iterable))   # keys as changed so far
        else:
            ctx.guards.add(GuardKind.KEYS_MATCH, source, list(iterable))
            keys = list(iterable)
        return outside_iterators.unchanged_while_iterated(ctx, iterable, keys)
    raise Unsupported(Reason.OUTSIDE_VALUE,
                      'janus does not convert a loop over a %s from outside the call'
                      % type(iterable).__name__)




@exceptions.raises_for_user
def assert_(condition: Any, lineno: int, message_thunk: Callable[[], Any]) -> None:
    """``assert``: a tensor condition becomes a ``Janus>Assert`` in the graph."""
    if not isinstance(condition, tf.Tensor):
        if not observe.truth(condition):
            raise AssertionError(message_thunk())
        return
    current().assume(None, AssumptionKind.ASSERT, bool_tensor(condition),
                     'assert statement holds', lineno=lineno)
