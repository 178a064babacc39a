"""Graph-break surgery on a janus function: cutting it at a refused statement, cutting
it again, and the janus functions its segments run through.

Needs ``segments.split`` (the cut itself) and a janus function (``api.JanusFunction``,
handed in: no import cycle) whose trace refused a statement, or whose graph's assumption
broke where a statement could not be in a graph.  ``break_at`` decides the cut a refusal
makes (remembered in the function's ``FunctionState``: ``splits``, ``recut``,
``unhoisted``, ``unsplittable``); each segment of a cut runs through a janus function of
its own, which knows its place (``SegmentPlace``): a refusal in a segment makes its owner
cut itself again (``recut``), a segment with too little tensor work runs as plain Python
(``run_plainly``).  DESIGN.md ("Graph breaks") states the invariants.
"""
import dataclasses
import typing

from janus import profiler
from janus.trace import callables
from janus.config import config
from janus.errors import ConversionError
from janus.events import EventKind
from janus.graphgen import segments, tracer
from janus.pyct import frontend, parser
from janus.reasons import Reason

RECUT = object()   # break_at: a segment's owner took the break (it cut itself anew)
# Segments cut for the rest of a call inside one another (each one break further along
# one run of statements): a bound, so a janus bug cannot nest them without end.
REST_OF_CALL_DEPTH = 16


@dataclasses.dataclass(frozen=True)
class SegmentPlace:
    """Where a segment's janus function sits: slot ``slot`` of ``owner``'s cut at
    ``lines``; ``slot`` None for a part of a segment cut for the rest of one call
    (``cut_for_this_call``), ``depth`` such cuts deep."""
    owner: typing.Any          # the api.JanusFunction that was cut
    lines: frozenset
    slot: typing.Optional[int]
    depth: int = 0


def break_at(jf, error, signature):
    """The ``segments.Split`` that runs the statement ``error`` stopped in in Python
    and the rest of ``jf``'s function in segments, from now on for the calls
    ``signature`` matches (None: every call; the converter refused the statement);
    ``RECUT`` when ``jf`` is a segment whose owner cut itself again; None when there
    is no such cut."""
    if jf.strict:
        return None   # strict mode claims the whole function converts: a break raises
    line = error.statement_line
    static = error is jf.failed_conversion
    if line is None and static and error.lineno is not None \
            and error.filename == jf.function.__code__.co_filename:
        line = error.lineno   # the converter refused a statement of this function
    if line is None or not tracer.breaks_at_statement_line(error, line):
        return None
    route(jf, error, line)
    place = jf.split_owner
    if place is not None:   # a segment: its owner cuts itself there too
        return RECUT if recut(place.owner, place.lines, line, error) else None
    lines = frozenset((line,))
    made = jf.state.splits.get(lines) or cut(jf, error, lines, line)
    if made is not None and (static or signature is not None):
        jf.state.note_split(None if static else signature, made)
    return made


def split_for_other_path(jf, entry, broke):
    """The cut this call runs instead of an imperative re-run, or None.

    The broken assumption was made only because a statement under it cannot be in a
    graph (``print(loss.numpy())`` under ``if self.step % 10 == 0``), and it broke
    before anything changed (``AssertionBroke``: checked on the host, or the graph's
    write-back never ran).  The call runs the function cut at that statement, and the
    graph stays for the calls that take the assumed path: the nine in ten steps that
    log nothing keep the whole-function graph."""
    site = broke.assumption.site
    error = jf.speculation.breakable.get(site)
    if (error is None or site not in entry.assumed_instead or jf.strict
            or not config.graph_breaks or jf.split_owner is not None):
        return None
    line = error.statement_line
    if line is None or not tracer.breaks_at_statement_line(error, line):
        return None
    route(jf, error, line)
    lines = frozenset((line,))
    with jf.lock:
        made = jf.state.splits.get(lines)
        if made is None:
            made = cut(jf, error, lines, line)
            if made is not None:
                jf.record_event(EventKind.GRAPH_BREAK, 'calls that take the other path at %s '
                                'run the function cut at line %d; the graph stays for the '
                                'others' % (jf.site_name(site), line), lineno=line,
                                filename=jf.function.__code__.co_filename)
        if made is not None:
            entry.assumed_breaks += 1
            if entry.assumed_breaks > max(2, entry.runs):
                # the other path is the usual one now: its calls go straight to the cut
                jf.cache.remove(entry)
                jf.state.note_split(entry.signature, made)
    return made


def route(jf, error, line):
    """A refusal inside a Keras layer's own call or a user function, breaking at
    ``line``: while the cut function runs, that callee runs through janus functions
    of its own, so only the refused line itself runs in Python
    (``graphgen/nested.py``)."""
    found = getattr(error, 'route', None)
    owner = jf.split_owner.owner if jf.split_owner is not None else jf
    if found is None or not owner.state.routes.add(line, found):
        return
    layers = '' if not found.layers else ' for %d layer%s' % (
        len(found.layers), 's' if len(found.layers) > 1 else '')
    owner.record_event(EventKind.GRAPH_BREAK, 'line %d runs in Python, and %s (line %s, '
                       'where janus refused) runs through janus of its own%s'
                       % (line, found.name, found.line, layers),
                       lineno=line, filename=owner.function.__code__.co_filename)


def recut(owner, lines, line, error):
    """A segment of ``owner``'s cut at ``lines`` failed at ``line``: the calls that ran
    that cut run one at ``lines`` and ``line`` from now on (cuts stay one level deep: a
    segment call costs a janus call).  False when there is no such cut."""
    state = owner.state
    with owner.lock:
        while lines in state.recut:   # another segment of it re-cut it already
            lines = state.recut[lines]
        wider = lines | {line}
        if wider == lines:
            return _unhoist(owner, lines, line, error)
        made = state.splits.get(wider) or cut(owner, error, wider, line,
                                              reuse=state.splits.get(lines))
        if made is None:
            return False
        old = state.splits.pop(lines, None)   # every call shape moves on: freed
        if old is not None:
            state.replace_split(old, made)
        state.recut[lines] = wider
        return True


def _unhoist(owner, lines, line, error):
    """A segment of the cut at ``lines`` failed at ``line``, a break already: when
    janus hoisted tensor work out of it (``hoist.py``), that work failed to convert
    too, and the cut is made again with the statement whole in Python (once).
    True, as ``recut``: the failing call runs plainly, later calls the cut."""
    state = owner.state
    old = state.splits.get(lines)
    if old is None or line not in old.hoisted or line in state.unhoisted:
        return True
    state.unhoisted.add(line)
    del state.splits[lines]
    made = cut(owner, error, lines, line, reuse=old)
    if made is None:
        state.splits[lines] = old
        return True
    state.replace_split(old, made)
    return True


def cut(jf, error, lines, line, reuse=None):
    """``jf``'s function cut at ``lines`` (remembered), or None (the reason recorded);
    ``line``: the one ``error`` refused, new in ``lines``; ``reuse``: the cut this
    one replaces, whose segments the new cut leaves as they were keep their janus
    functions (profile, graphs, measured floor), not traced again."""
    state = jf.state
    if lines in state.unsplittable:
        return None
    try:
        made = segments.split(jf.function, sorted(lines), whole=state.unhoisted,
                              routing=any(n in state.routes.by_line for n in lines))
    except segments.NothingToCut:
        state.unsplittable.add(lines)   # the refusal stands, as it is
        return None
    except (segments.CannotSplit, parser.NoSource) as e:   # no source: cut nothing
        state.unsplittable.add(lines)
        jf.record_event(EventKind.GRAPH_BREAK, 'janus cannot cut the function at line %d: %s'
                        % (line, e),
                        reason=Reason.CANNOT_SPLIT, filename=error.filename, lineno=line)
        return None
    except Exception as e:  # noqa: BLE001 - a splitter bug: the function runs as before
        jf.internal_error('cutting the function at a graph break', e)
        state.unsplittable.add(lines)
        return None
    made.slots[:] = _segment_functions(jf, made, lines, reuse)
    state.splits[lines] = made
    cause = error.error if isinstance(getattr(error, 'error', None), ConversionError) \
        else error   # real control flow failed to build around the statement
    graphs = ', '.join('lines %d-%d' % (p.first_line, p.last_line) for p in made.segments)
    jf.record_event(EventKind.GRAPH_BREAK, 'line %d runs in Python (%s); %s' % (
                        line, cause.context, '%s run as graphs of their own' % graphs if graphs
                        else 'the code it calls runs through janus of its own'),
                    error=cause, lineno=line, filename=jf.function.__code__.co_filename)
    return made


def _segment_functions(jf, made, lines, reuse):
    """The janus functions of ``made``'s segments: those of ``reuse``'s segments with
    the same code as they were, new ones for the others."""
    kept = _reusable_segments(reuse)
    parts = []
    for index, part in enumerate(made.segments):
        old_part, old_slot = kept.get(part.key, (None, None))
        if old_slot is not None:   # the same code: the segment as it was
            made.segments[index] = old_part
            if callables.is_janus_function(old_slot):
                old_slot.split_owner = SegmentPlace(jf, lines, index)
            parts.append(old_slot)
            continue
        # The function's own calls profiled these statements already (under other
        # site numbers): a segment profiles fewer calls before its graph.
        segment = jf.part_function(part.function)
        segment.split_owner = SegmentPlace(jf, lines, index)
        if not part.in_loop:
            jf.safely('carrying the profile over to a segment', carry_profile, segment, jf)
        parts.append(segment)
    return parts


def cut_for_this_call(segment, error):
    """``segment``'s trace failed at a statement and its owner cut itself again there
    for its next calls: the calls of the old cut still running run this segment cut at
    that statement too, so the statements after it are traced now, and a break among
    them reaches the owner in this call, not one call later (every break a call
    reaches is found in that call).  Its parts report to the owner; they go with the
    old cut.  None when it cannot be cut."""
    line = error.statement_line if error.statement_line is not None else error.lineno
    place = segment.split_owner
    depth = place.depth + 1
    if depth > REST_OF_CALL_DEPTH:
        return None
    try:   # the statement whole: its hoisted receiver failed too, or will
        made = segments.split(segment.function, [line], whole=(line,))
    except segments.CannotSplit:   # NothingToCut among them: plainly, then
        return None
    if any(part.first_line <= line <= part.last_line for part in made.segments):
        return None   # the statement is not one of this segment's own (its prologue's line)
    parts = []
    for part in made.segments:
        rest = segment.part_function(part.function)
        rest.split_owner = SegmentPlace(place.owner, place.lines, None, depth)
        if not part.in_loop:
            carry_profile(rest, segment)
        parts.append(rest)
    made.slots[:] = parts
    return made


def carry_profile(segment, owner):
    """``segment`` (run at most once per call of ``owner``) starts with what
    ``owner``'s profiled calls observed of its statements: its first call traces."""
    with owner.lock:
        if not owner.profile.calls:
            return
        profiler.carry_over(owner.profile, segment.profile, owner.function.__code__,
                            segment.function.__code__,
                            frontend.front_end(segment.function).sites)


def run_plainly(place, function, ops):
    """The segment at ``place`` (whose function is ``function``) built a graph of
    ``ops`` tensor ops, fewer than ``config.segment_min_ops`` (list appends, Python
    arithmetic, one reduction): the skeleton calls it as plain Python from now on,
    which costs less than a janus call."""
    owner, index = place.owner, place.slot
    split = owner.state.splits.get(place.lines)
    if split is None or index is None or split.slots[index] is function \
            or split.segments[index].function is not function:
        return   # (the cut at ``lines`` was made again since: not this segment's)
    split.slots[index] = function
    part = split.segments[index]
    owner.record_event(EventKind.GRAPH_BREAK, 'lines %d-%d %s: they run as plain Python from '
                       'now on' % (part.first_line, part.last_line, 'do no tensor work'
                                   if not ops else 'run %d tensor op%s, less than a graph '
                                   'call costs' % (ops, 's' if ops > 1 else '')),
                       lineno=part.first_line, filename=owner.function.__code__.co_filename)


def _reusable_segments(split):
    """{segment key: (Segment, slot)} of ``split``'s segments a new cut may take over
    (not one whose failed trace made the cut again)."""
    if split is None:
        return {}
    return {part.key: (part, slot) for part, slot in zip(split.segments, split.slots)
            if not (callables.is_janus_function(slot) and slot.state.superseded)}
