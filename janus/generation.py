"""The generate step of a janus function's call: a new cached graph for the call, a cut
at the statement its trace refused, or the reason there is none; and what a cache miss
relaxes so that the call generates at once.

Needs a janus function (``api.JanusFunction``, handed in) that decided to generate
under its lock, with the call's bound arguments.  ``generate`` gives up at once on a
failed conversion and past the recompile and failed-trace limits; else
``build.build`` (the build loop) traces.  A graph is counted and cached; a refusal
(``build.Refused``) becomes a graph break (``cuts.break_at``) where a statement can
run in Python, else joins the negative cache (``FunctionState.note_failed``) and the
call runs imperatively (``JanusFunction.give_up``).
"""
import functools

from janus import floor, guards
from janus.config import config
from janus.errors import ConversionDeferred, ConversionError
from janus.events import EventKind
from janus.graphgen import build, cuts, generator
from janus.reasons import Reason


def generate(jf, bound, arguments):
    """A new cached graph for this call, a ``segments.Split`` to run it with, or None
    (the reason is recorded)."""
    if jf.failed_conversion is not None:
        return jf.give_up(jf.failed_conversion)
    if jf.graphs_built >= config.recompile_limit:
        return _give_up_on_recompiles(jf)
    if jf.failed_traces >= config.failed_trace_limit:
        return jf.give_up(ConversionError(
            Reason.FAILED_TRACE_LIMIT, '%d traces failed (janus.config.failed_trace_limit): '
            'call shapes with no graph run imperatively' % jf.failed_traces))
    entry = build.build(jf.function, jf.state, arguments, bound, functools.partial(convert, jf),
                        jf.record_event, profile_calls=jf.profile_calls,
                        distributed=jf.distributed, number=jf.stats.graphs_built + 1)
    if isinstance(entry, build.Refused):
        return _refused(jf, entry)
    entry.set_jit(jf.xla_setting)
    jf.graphs_built += 1
    jf.stats.graphs_built += 1
    if jf.stats.graphs_built <= config.floor_warmup_graphs:
        floor.WARMUP_WORK.note()   # a first graph: warm-up; later ones, retraces
    jf.stats.evictions += len(jf.cache.insert(entry))
    if jf.split_owner is not None and \
            entry.work_ops(config.segment_min_ops) < config.segment_min_ops:
        cuts.run_plainly(jf.split_owner, jf.function, entry.work_ops(config.segment_min_ops))
    jf.record_event(EventKind.GRAPH_BUILT, 'graph #%d built in %.0f ms, %d guards' % (
        entry.number, entry.trace_seconds * 1e3, len(entry.describe_guards())),
        graph=entry.number)
    return entry


def relaxed_after_miss(jf, misses, arguments):
    """After ``misses``: whether something was relaxed for them (numbers, lists passed
    whole, deeper structures), so the call generates at once."""
    return (_relax_scalars(jf, arguments) | _pass_lists_whole(jf, misses, arguments)
            | _deeper_structures(misses))


def _relax_scalars(jf, arguments):
    """After a miss: numbers whose value changed become graph inputs (relaxation.py)."""
    relaxed = jf.scalars.relax_after_miss(jf.cache.newest(), arguments)
    for text in relaxed:
        jf.record_event(EventKind.SCALAR_RELAXED, text)
    return bool(relaxed)


def _deeper_structures(misses):
    """After a graph missed only because a structure is deeper than its levels
    (``recursion_levels``): the next graph, built at once, computes more."""
    return any(m.kind is guards.GuardKind.STRUCTURE_MATCH
               and getattr(m.actual, 'rebuild_now', False) for m in misses)


def _pass_lists_whole(jf, misses, arguments):
    """After a miss on a list argument's length (a history that grows every call):
    the list is passed as itself from now on, its items read through it at run
    time (call_signature.Signature ``opaque``), one graph for every length."""
    relaxed = [m.where for m in misses if m.kind is guards.GuardKind.LEN_MATCH
               and type(arguments.get(m.where)) is list and m.where not in jf.opaque_lists]
    for name in relaxed:
        jf.opaque_lists.add(name)
        jf.record_event(EventKind.LIST_PASSED_WHOLE, 'list argument %s changed length '
                        '(%s): passed as itself from now on, one graph for every length'
                        % (name, ', '.join('%s -> %s' % (m.expected, m.actual)
                                           for m in misses if m.where == name)))
    return bool(relaxed)


def _refused(jf, refused):
    """What a refused build leaves the call: a cut to run, or None (it runs imperatively)."""
    floor.WARMUP_WORK.note()   # a trace that failed: finding breaks is warm-up
    error = refused.error
    if refused.signature is not None and not _deferred(error):
        jf.failed_traces += 1   # a trace ran and failed (not a known failed shape)
    if refused.internal is not None:
        jf.record_janus_error('tracing', refused.internal)
    if not _deferred(error):   # deferred: this call only (an optimizer builds in it)
        _without_frames(error)   # kept: its frames would keep the trace's objects alive
        split = cuts.break_at(jf, error, refused.signature)
        if split is cuts.RECUT:   # the owner's next calls run the new cut
            jf.state.superseded = True
            rest = jf.safely('cutting a segment for the rest of the call',
                             cuts.cut_for_this_call, jf, error)
            if rest is not None:
                jf.state.split_always = rest
            return rest   # None: this call (and the old cut's others) run it plainly
        if split is not None:
            return split
        if refused.signature is not None:
            jf.state.note_failed(refused.signature, error)
        if error.reason is Reason.TRACE_TOO_LONG:
            jf.failed_conversion = error   # every call shape: no more long traces
    return jf.give_up(error)


def convert(jf):
    """``jf``'s converted function; raises the ConversionError that stopped it (kept:
    later calls give up at once)."""
    try:
        return generator.convert(jf.function)
    except ConversionError as e:
        jf.failed_conversion = _without_frames(e)
    except Exception as e:  # noqa: BLE001 - a converter bug: this function runs imperatively
        jf.record_janus_error('converting', e)   # explain shows the traceback
        jf.failed_conversion = ConversionError(
            Reason.INTERNAL_ERROR, 'janus internal error while %s: %s: %s'
            % ('converting', type(e).__name__, e))
    raise jf.failed_conversion


def _give_up_on_recompiles(jf):
    # What kept changing, and what to change: advising.storm_advice (logged once).
    return jf.give_up(ConversionError(
        Reason.RECOMPILE_LIMIT, 'recompile limit reached: built %d graphs '
        '(janus.config.recompile_limit); further cache misses run imperatively'
        % config.recompile_limit))


def _deferred(error):
    """Whether ``error`` (or what it was raised from) refused only for now."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, ConversionDeferred):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


def _without_frames(error):
    """``error`` kept for later calls, without its tracebacks (nor those of what it was
    raised from): their frames would keep the failed trace's graph and objects alive."""
    seen, chained = 0, error
    while chained is not None and seen < 8:
        chained.__traceback__ = None
        chained, seen = chained.__cause__ or chained.__context__, seen + 1
    return error
