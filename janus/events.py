"""The kinds of event a janus function records per call, for ``janus.explain``.

Needs only ``reasons``.  ``api.JanusFunction`` appends one ``Event``
per thing that happened to a call (a graph built, a fallback, a
relaxation...); the build loop (``graphgen/build.py``) reports its own
through a callback, by the same kinds.
"""
import dataclasses
import enum
from typing import Any, Optional, Tuple

from janus.reasons import Reason


class EventKind(enum.StrEnum):
    """What ``explain`` lists per call: how janus ran it and why."""
    FALLBACK = 'fallback'
    FALLBACK_RAISED = 'fallback raised'
    GRAPH_ERROR = 'graph error'
    RELAXED = 'relaxed'
    RECURSIVE_CALL = 'recursive call'
    GRAPH_BUILT = 'graph built'
    RELAXED_SHAPES_FAILED = 'relaxed shapes failed'
    IMPERATIVE = 'imperative'
    CACHE_MISS = 'cache miss'
    INTERNAL_ERROR = 'internal error'
    PROFILING = 'profiling'
    REDEFINED = 'redefined'
    SCALAR_RELAXED = 'number relaxed'
    LIST_PASSED_WHOLE = 'list passed whole'
    GRAPH_DROPPED = 'graph dropped'
    SCALAR_PINNED = 'number kept constant'
    ASSUMED_INSTEAD = 'assumed instead'
    GRAPH_BREAK = 'graph break'
    FLOOR = 'measured floor'


@dataclasses.dataclass(frozen=True)
class Event:
    """One thing ``explain`` lists: ``detail`` is for people; ``explain`` reads the other
    fields.  ``where``: the user's file:line it concerns; ``advice``: what to change
    (both filled in by ``advising.annotate``).  The payload: ``reason`` (why, a
    ``Reason``), ``filename``/``lineno`` (the line that stopped a conversion or whose
    assumption broke), ``sites`` (the profile sites it concerns), ``assumption`` (a
    broken assumption's kind) and ``kept`` (its graph stays), ``miss`` (a cache
    miss's ``guards.Miss``), ``graph`` (the number of the graph it built)."""
    call: int
    kind: EventKind
    detail: str
    traceback: Optional[str] = None
    where: Optional[str] = None
    advice: Optional[str] = None
    reason: Optional[Reason] = None
    filename: Optional[str] = None
    lineno: Optional[int] = None
    sites: Tuple[Any, ...] = ()
    assumption: Any = None
    kept: bool = False
    miss: Any = None
    graph: Optional[int] = None
