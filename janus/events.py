"""The kinds of event a janus function records per call, for ``janus.explain``.

Nothing must run before this module.  ``api.JanusFunction`` appends one
event per thing that happened to a call (a graph built, a fallback, a
relaxation...); the build loop (``graphgen/build.py``) reports its own
through a callback, by the same kinds.
"""
import enum


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
    SCALAR_PINNED = 'number kept constant'
    ASSUMED_INSTEAD = 'assumed instead'
