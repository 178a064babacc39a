"""What a graph op does outside the graph: see ``janus/runtime/effects.py``.

The classification lives in the runtime (the runtime decides at trace time
whether a test depends on a state change made earlier in the call, and must
not import the generator); the tracer's deferred-update rule uses the same
definitions through this module.
"""
from janus.runtime.effects import (CALL_OPS, Effect, _OUTPUT_EFFECTS, _PURE_READS,  # noqa: F401
                                   called_graphs,
                                   _UNREPRODUCIBLE_RANDOM, effect, unreproducible_reason)
