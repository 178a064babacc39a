"""The fall-back step of a janus function's call: a cached graph's run failed, so the
call re-runs (or runs cut at a break), and what broke is relaxed for the next graphs.

Needs a janus function (``api.JanusFunction``, handed in) whose replay raised one of
``replay.executor``'s failures.  ``after_failure`` picks the way: a broken assumption
re-runs the call profiled, or cut at the statement that made janus assume
(``cuts.split_for_other_path``); a TF error re-runs it for eager's result or
exception; a graph TF cannot run, or a failed write-back, is dropped and its call
shape runs imperatively (``FunctionState.note_failed``).  ``relax`` then decides what
the next graph no longer assumes (``plan.SpeculationState.after_break``).  User code
never runs twice in a call.
"""
import dataclasses

from janus.errors import ConversionError, JanusError
from janus.events import EventKind
from janus.graphgen import cuts
from janus.graphgen.plan import Verdict
from janus.reasons import Reason
from janus.replay.executor import AssertionBroke, GraphError, GraphInvalid, WriteBackFailed


def after_failure(jf, entry, failure, call):
    """The call's result after ``entry``'s run raised ``failure``."""
    if isinstance(failure, AssertionBroke):
        return _after_broken_assumption(jf, entry, failure, call)
    if isinstance(failure, GraphError):
        return _after_graph_error(jf, entry, failure, call)
    if isinstance(failure, WriteBackFailed):
        return _after_failed_write_back(jf, entry, failure, call)
    if isinstance(failure, GraphInvalid):
        return _after_invalid_graph(jf, entry, failure, call)
    jf.internal_error('running the graph', failure)
    return jf.run_plain(call)


def _after_broken_assumption(jf, entry, broke, call):
    split = jf.safely('cutting for the other path', cuts.split_for_other_path, jf, entry,
                      broke)
    if split is not None:
        return jf.run_split(split, call)
    jf.stats.fallbacks += 1
    kept = broke.assumption.site in entry.assumed_instead
    jf.record_event(EventKind.FALLBACK, 'assumption %r broke; re-ran imperatively%s' % (
        broke.assumption, ' (assumed where real control flow failed to build: kept while '
        'rare)' if kept else ''), filename=broke.assumption.filename,
        lineno=broke.assumption.lineno, assumption=broke.assumption.kind,
        sites=(broke.assumption.site,), kept=kept)
    try:
        result = jf.run_profiled(call, count=False, claimed=False)
    except Exception as e:
        # The call raised, eagerly too: an exceptional path, not a reason
        # to give up the assumption for the calls that do not raise.
        jf.record_event(EventKind.FALLBACK_RAISED, '%s; assumptions kept' % type(e).__name__)
        raise
    jf.safely('relaxing assumptions', relax, jf, entry, broke.assumption)
    return result


def _after_graph_error(jf, entry, error, call):
    restored = (' after restoring the %d variables it had updated' % error.restored
                if error.restored else '')
    jf.record_event(EventKind.GRAPH_ERROR, '%s (%s); re-ran imperatively%s for eager\'s result '
                    'or exception' % (type(error.error).__name__,
                                      str(error.error).strip()[:160], restored))
    try:
        return jf.run_profiled(call, count=False, claimed=False)
    finally:
        jf.safely('relaxing assumptions', relax, jf, entry, None)


def _after_failed_write_back(jf, entry, failure, call):
    """janus failed after the graph ran: re-run only if nothing changed yet.  The
    graph is dropped and its call shape runs imperatively from now on."""
    jf.safely('evicting the graph', _drop_failed_entry, jf, entry, failure)
    if failure.state_changed:
        jf.internal_error('writing back the graph\'s results', failure.error,
                          after_user_code=True)
        raise JanusError('janus failed after the graph of %s changed state, so the call '
                         'cannot be re-run (see janus.explain): %s'
                         % (jf.name, failure)) from failure.error
    jf.internal_error('writing back the graph\'s results', failure.error)
    return jf.run_plain(call)


def _after_invalid_graph(jf, entry, failure, call):
    """TF could not instantiate the graph (a janus bug): nothing ran.  The graph is
    dropped, its call shape runs imperatively, and this call runs as plain Python."""
    jf.safely('evicting the graph', _drop_failed_entry, jf, entry, failure)
    jf.internal_error('running the graph', failure.error)
    return jf.run_plain(call)


def _drop_failed_entry(jf, entry, failure):
    what = ('TF could not run the graph janus built' if isinstance(failure, GraphInvalid)
            else 'janus internal error while writing back a graph\'s results')
    with jf.lock:
        jf.cache.remove(entry)
        jf.state.note_failed(entry.signature, ConversionError(Reason.INTERNAL_ERROR,
                                                              '%s: %s' % (what, failure)))


def relax(jf, entry, assumption):
    """After a fallback: sites whose assumed outcomes broke are never assumed again;
    relaxed numbers whose SCALAR check broke are specialized by value again."""
    if assumption is not None and assumption.lineage:
        text = jf.scalars.pin(assumption.lineage, 'its check %r broke' % assumption)
        if text is not None:
            jf.cache.remove(entry)
            jf.record_event(EventKind.SCALAR_PINNED, text)
    with jf.lock:
        outcome = jf.speculation.after_break(entry, assumption, jf.recorder.last_call)
    if outcome.unbuildable:
        _after_unbuildable_break(jf, entry, outcome)
    if outcome.relaxed:
        jf.cache.remove(entry)
        jf.reprofile_budget = 0
        where = ', '.join(jf.site_name(key) for key in outcome.relaxed)
        jf.record_event(EventKind.RELAXED, '%s: assumed outcomes dropped, next graph builds '
                        'dynamic control flow there' % where, sites=tuple(outcome.relaxed))


def _after_unbuildable_break(jf, entry, outcome):
    """A graph whose sites are assumed only because real control flow failed to
    build there broke there: kept, rebuilt or given up (``plan.SpeculationState``)."""
    if outcome.verdict is Verdict.KEEP:
        return
    if outcome.verdict is Verdict.BREAK:
        with jf.lock:
            jf.cache.remove(entry)
        if cuts.break_at(jf, outcome.break_error, entry.signature) is not None:
            return
        outcome = dataclasses.replace(outcome, verdict=Verdict.REBUILD)
    where = ', '.join(jf.site_name(key) for key in outcome.unbuildable)
    text = ('%s: the outcome janus had to assume (real control flow failed to build there) '
            'broke in %d of %d runs' % (where, outcome.breaks, outcome.runs))
    with jf.lock:
        jf.cache.remove(entry)
        if outcome.verdict is Verdict.GIVE_UP:
            jf.state.note_failed(entry.signature,
                                 ConversionError(Reason.ASSUMED_OUTCOME_BREAKS, text))
    if outcome.verdict is Verdict.GIVE_UP:
        jf.record_event(EventKind.IMPERATIVE, text, reason=Reason.ASSUMED_OUTCOME_BREAKS,
                        sites=tuple(outcome.unbuildable))
    else:   # the outcomes may have changed for good (a warm-up ended): assume them anew
        jf.record_event(EventKind.GRAPH_DROPPED, '%s; graph dropped, the next one assumes the '
                        'outcomes the profile shows most often now' % text,
                        sites=tuple(outcome.unbuildable))
