"""The build loop: one graph for one call shape, traced again while a trace asks.

Needs the janus function's ``function_state.FunctionState`` and a way to
convert its function (``generator.convert``, wrapped by the caller so a
failure is remembered).  ``build`` makes the call's ``call_signature.Signature``,
refuses a call shape that failed before, converts the function once, and
traces it (``tracer.trace``).  A trace returns a ``retrace.TraceResult`` or
raises a ``retrace.Retrace`` request, honoured here and nowhere else:

* ``AssumeInstead``: sites whose real control flow failed to build are assumed
  in the next trace (this build's ``assume_instead``; ``graphgen/plan.py``);
* ``PinNumbers``: relaxed numbers whose value the trace needed are pinned;
* ``ExactShapes``: the rest of the build traces with the call's exact shapes
  (after the numbers the failed trace rewrites are made dynamic, if any are
  new: then the relaxed shapes are tried again first);
* ``RelaxEvolving``, and a built graph's ``evolving``: numbers the function
  rewrites become dynamic before the graph is cached.

A request that changes nothing leaves its error standing (after the numbers
it rewrites are tried dynamic, as for every failed trace).

**The bound.**  Each honoured request changes the policy one way, and nothing
in a build undoes it: assumed-instead sites only grow (the plan never reports
a site already assumed), a pinned number is never relaxed again, a number is
relaxed at most once before it is pinned, and exact shapes are asked for
once.  A build therefore traces at most (sites + 2 x number locations + 2)
times.  ``MAX_TRACES`` caps it regardless; reaching the cap is a janus bug,
reported as an internal error (the call shape runs imperatively from then on).
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from janus.trace import call_signature
from janus.config import config
from janus.errors import ConversionError
from janus.events import EventKind
from janus.graphgen import retrace, tracer
from janus.reasons import Reason

if TYPE_CHECKING:
    from janus.function_state import FunctionState
    from janus.graphgen.generator import Converted
    from janus.pyct.sites import SiteKey
    from janus.replay.entry import GraphEntry

MAX_TRACES = 32   # per build; the written bound above is far lower in practice


@dataclasses.dataclass(frozen=True)
class Refused:
    """No graph for this call: ``error`` says why.  ``signature``: the call shape
    to run imperatively from now on (None: only this call; it may convert later)."""
    error: ConversionError
    signature: typing.Optional[call_signature.Signature] = None
    internal: typing.Optional[Exception] = None   # janus's own failure behind ``error``


@dataclasses.dataclass(eq=False)
class _Build:
    """One build's changing inputs (the function's state holds the lasting ones)."""
    fn: typing.Callable               # the Python function traced
    state: typing.Any                 # function_state.FunctionState
    report: typing.Callable           # (EventKind, text, **payload): an event for explain
    assume_instead: dict = dataclasses.field(default_factory=dict)   # key -> sequence
    exact: bool = False               # trace with the call's exact shapes
    # The relaxed trace's error that asked for exact shapes: reported (once) when the
    # build settles on an exact-shape graph, not before (an exact trace may fail too).
    exact_because: typing.Optional[ConversionError] = None
    traces: int = 0
    structure_retraces: int = 0       # StructureWidened requests honoured (bounded)


def build(fn: Callable[..., Any], state: FunctionState, arguments: Mapping[str, Any],
          bound: inspect.BoundArguments, convert: Callable[[], Converted],
          report: Callable[..., object], *, profile_calls: int, distributed: bool,
          number: int) -> GraphEntry | Refused:
    """A ``replay.entry.GraphEntry`` of ``fn`` for this call, or ``Refused``.
    ``convert()``: the converted function, or raises ``ConversionError``;
    ``report(kind, text)`` records an event; ``number``: the function's graph
    count if this one is built."""
    run = _Build(fn, state, report)
    call_signature.record_shapes_of(arguments, state.profile.shapes)
    converted = None
    while True:
        shape_signature = _signature(state, arguments, exact=False)
        if isinstance(shape_signature, Refused):
            return shape_signature
        refusal = state.refusal_for(arguments)   # the negative cache
        if refusal is not None:
            return Refused(refusal)
        try:
            converted = converted or convert()
        except ConversionError as e:
            return Refused(e)
        outcome = _trace_once(run, converted, bound, arguments, shape_signature,
                              distributed, number, profile_calls)
        if outcome is not None:
            return outcome
        if run.traces >= MAX_TRACES:   # a janus bug: the call shape runs imperatively
            bug = AssertionError('janus traced one call shape %d times without settling '
                                 '(graphgen/build.py: the bound)' % run.traces)
            return Refused(ConversionError(Reason.INTERNAL_ERROR,
                                           'janus internal error while tracing: %s' % bug),
                           shape_signature, internal=bug)


def _trace_once(run: _Build, converted: Converted, bound: inspect.BoundArguments,
                arguments: Mapping[str, Any], shape_signature: call_signature.Signature,
                distributed: bool, number: int, profile_calls: int) -> GraphEntry | Refused | None:
    """The entry or ``Refused`` this trace settles on, or None: trace again."""
    state = run.state
    run.traces += 1
    signature = _signature(state, arguments, exact=True) if run.exact else shape_signature
    if isinstance(signature, Refused):
        return signature
    relax = config.relax_shapes  # type: ignore[attr-defined]
    heap_shapes = state.profile.shapes if relax and not run.exact else None
    try:   # the plan too: a janus bug making it refuses the call shape, as a tracer bug
        plan = state.speculation.plan(state.profile, state.recorder.last_call,
                                      state.scalars.dynamic, run.assume_instead, profile_calls,
                                      frozenset(state.scalars.pinned))
        with config.patch(specialize_shapes=True) if run.exact else contextlib.nullcontext():
            result = tracer.trace(run.fn, converted, bound, signature, plan,
                                  heap_shapes, distributed, number)
    except retrace.Retrace as request:
        # Rewritten numbers before exact shapes (which stay for the rest of the build):
        # made dynamic, the trace may take another path with the relaxed shapes.
        if isinstance(request, retrace.ExactShapes) and _relax_evolving(run, request.evolving):
            return None
        if _honour(run, request) or _relax_evolving(run, request.evolving):
            return None
        return Refused(request.error, shape_signature)
    except ConversionError as e:
        return Refused(e, shape_signature)
    except Exception as e:  # noqa: BLE001 - a tracer bug: this call shape runs imperatively
        return Refused(ConversionError(Reason.INTERNAL_ERROR,
                                       'janus internal error while tracing: %s: %s'
                                       % (type(e).__name__, e)), shape_signature, internal=e)
    if _relax_evolving(run, result.evolving):
        return None
    if run.exact_because is not None:
        run.report(EventKind.RELAXED_SHAPES_FAILED, '%s; built with exact shapes instead'
                   % run.exact_because, error=run.exact_because)
    return result.entry


def _signature(state: FunctionState, arguments: Mapping[str, Any],
               exact: bool) -> call_signature.Signature | Refused:
    """The call's ``call_signature.Signature`` (relaxed shapes unless ``exact``), or ``Refused``."""
    try:
        if exact:
            with config.patch(specialize_shapes=True):
                return call_signature.Signature(arguments, dynamic=state.scalars.dynamic,
                                        opaque=state.opaque_lists)
        shapes = state.profile.shapes if config.relax_shapes else None  # type: ignore[attr-defined]
        return call_signature.Signature(arguments, shapes, state.scalars.dynamic, state.opaque_lists)
    except call_signature.UnsupportedArgument as e:
        return Refused(ConversionError(e.reason, 'unsupported argument %s' % e))


def _honour(run: _Build, request: retrace.Retrace) -> bool:
    """Changes the policy as ``request`` asks; False when that changes nothing."""
    if isinstance(request, retrace.AssumeInstead):
        if tracer.breaks_at_statement(request.error):
            run.state.speculation.note_breakable(request.sites, request.error)
        return _assume_instead(run, request.sites)
    if isinstance(request, retrace.PinNumbers):
        text = run.state.scalars.pin(request.error.lineage, str(request.error))
        if text is not None:
            run.report(EventKind.SCALAR_PINNED, text)
        return text is not None
    if isinstance(request, retrace.ExactShapes):
        if run.exact:
            return False
        run.exact = True
        # Kept for the event's text only: without its frames (the failed trace's graph).
        run.exact_because = request.error.with_traceback(None)
        return True
    if isinstance(request, retrace.PassWhole):
        new = request.names - run.state.opaque_lists
        run.state.opaque_lists |= new
        return bool(new)
    if isinstance(request, retrace.StructureWidened):
        run.structure_retraces += 1   # kinds only widen: a few traces see them all
        return run.structure_retraces <= 3
    return False   # RelaxEvolving: the caller's fallback step does it


def _assume_instead(run: _Build, sites: Mapping[SiteKey, tuple[Any, Reason, str]]) -> bool:
    """Sites whose real control flow failed to build are assumed in the next trace."""
    fresh = {key: value for key, value in sites.items() if key not in run.assume_instead}
    for key, (sequence, reason, context) in fresh.items():
        run.assume_instead[key] = sequence
        run.report(EventKind.ASSUMED_INSTEAD, '%s: real control flow failed to build (%s); '
                   'its outcome is assumed instead, and calls that take the other path '
                   'run imperatively' % (run.state.site_name(key), context),
                   reason=reason, sites=(key,))
    return bool(fresh)


def _relax_evolving(run: _Build, evolving: frozenset) -> bool:
    """Numbers the trace read as constants and the function rewrites become dynamic
    (True: trace again)."""
    relaxed = run.state.scalars.relax_evolving(evolving)
    for text in relaxed:
        run.report(EventKind.SCALAR_RELAXED, text)
    return bool(relaxed)

