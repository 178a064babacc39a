"""What a graph op does outside the graph: see ``janus/runtime/effects.py``; and
what keeps a graph from compiling with XLA (``xla_blocker``, for ``replay/xla.py``).

The classification lives in the runtime (the runtime decides at trace time
whether a test depends on a state change made earlier in the call, and must
not import the generator); the tracer's deferred-update rule uses the same
definitions through this module.
"""
from janus.runtime.effects import (CALL_OPS, Effect, _OUTPUT_EFFECTS, _PURE_READS,  # noqa: F401
                                   called_graphs,
                                   _UNREPRODUCIBLE_RANDOM, effect, unreproducible_reason)


# Ops XLA has no kernel for (checked before compiling, with janus's own).
_NOT_COMPILABLE = frozenset(('PyFunc', 'EagerPyFunc', 'PyFuncStateless', 'PrintV2',
                             'StringFormat', 'AsString', 'StringJoin'))


def xla_blocker(graph):
    """Why ``graph`` (or a function it calls) cannot compile with XLA, or None."""
    todo, seen = [graph], set()
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for op in current.get_operations():
            if op.type.startswith('Janus>'):
                return 'it checks janus\'s assumptions (%s)' % op.type
            if op.type in _NOT_COMPILABLE or op.type.startswith('Iterator') \
                    or 'Dataset' in op.type:
                return 'it holds %s, which XLA does not compile' % op.type
            todo.extend(called_graphs(op))
    return None
