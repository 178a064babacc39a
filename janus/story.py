"""``explain``'s first lines, the story of a janus function: what ran where (whole
graphs, split calls and their graph parts, plain Python), its time a call against
eager's as measured, and the one thing to change that would help most.

Needs nothing run before it; ``explain`` hands it a janus function and, for the last
line, the ``(where, advice)`` it picks (``explain.top_advice``).
"""
from __future__ import annotations
import statistics
import typing

from janus.floor import CallKind, Verdict
from janus.reasons import NOTHING


def ran(jf: typing.Any) -> str:
    """``ran: 177 calls as one graph; 20 split at line 17 (19 ran graph parts); ...``."""
    s = jf.stats
    parts = []
    if s.graph_calls:
        parts.append('%d as one graph' % s.graph_calls)
    if s.split_calls:
        lines = sorted({n for split in jf.state.splits.values() for n in split.python_lines})
        parts.append('%d split (%s %s in Python, the rest in graphs: %d of them ran graph '
                     'parts)' % (s.split_calls, 'lines' if len(lines) > 1 else 'line',
                                 ', '.join(str(n) for n in lines) or '?', s.graph_part_calls))
    if s.profiled_calls:
        parts.append('%d profiled (the warm-up)' % s.profiled_calls)
    if s.imperative_calls:
        parts.append('%d as plain Python' % s.imperative_calls)
    if s.fallbacks:
        parts.append('%d re-ran as plain Python after a graph\'s assumption broke'
                     % s.fallbacks)
    return 'ran %d calls: %s' % (s.calls, '; '.join(parts) or 'none yet')


def timing(jf: typing.Any) -> str | None:
    """``time a call: janus 0.35 ms against eager 17.1 ms (49x faster); ...``; None
    before any timed janus call."""
    floor = jf.state.floor
    janus = floor.samples[CallKind.JANUS]
    if not janus:
        return None
    mine = statistics.fmean(janus)
    eager = floor.samples[CallKind.EAGER]
    profiled = floor.samples[CallKind.PROFILED]
    if eager:
        theirs = statistics.median(eager)
        text = 'janus %s against eager %s (%s)' % (_ms(mine), _ms(theirs), _ratio(theirs, mine))
    elif profiled:
        text = ('janus %s; eager not timed (the fastest profiled call, eager with probes, '
                'took %s)' % (_ms(mine), _ms(min(profiled))))
    else:
        text = 'janus %s' % _ms(mine)
    warmup = floor.samples[CallKind.WARMUP]
    if warmup:
        text += '; warm-up %s once' % _ms(sum(warmup))
    if floor.last is Verdict.PLAIN:
        text += '; slower than eager when last measured, so calls run as plain Python for now'
    return 'time a call: ' + text


def change(where: str | None, advice: str | None) -> str:
    """``to change: at file:line: fix: ...``, or that nothing needs changing."""
    if advice is None or advice.startswith(NOTHING):
        return 'to change: nothing%s' % ('' if advice is None else
                                         ' (' + advice[len(NOTHING):] + ')')
    return 'to change: at %s: %s' % (where or '?', advice)


def _ms(seconds: float) -> str:
    return '%.3g ms' % (seconds * 1e3)


def _ratio(eager: float, janus: float) -> str:
    if janus <= 0:
        return 'faster'
    r = eager / janus
    return '%.2gx faster' % r if r >= 1 else '%.2gx eager\'s time' % (1 / r)
