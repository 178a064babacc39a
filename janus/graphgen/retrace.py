"""What one trace hands the build loop: a ``TraceResult``, or a ``Retrace`` request.

Needs only ``errors`` and ``reasons``.  ``tracer.trace`` returns a ``TraceResult`` when it built
a graph and raises a ``Retrace`` when a trace failed in a way that a changed
policy may fix; any other ``ConversionError`` is a refusal of the call shape.
``graphgen/build.py`` honours the requests, within its bound.  Each request
carries the error that stands when honouring it changes nothing, and the
numbers the trace read as constants and rewrites (``evolving``): made
dynamic, a trace may take another path.
"""
from __future__ import annotations

import dataclasses
import typing

from janus.errors import ConversionError, ScalarValueNeeded
from janus.reasons import Reason

# Refusals no dimension of the arguments can change (the statement is refused
# whatever a trace knows of shapes): a trace with unknown dimensions that fails
# for one of these does not ask for a trace with the call's exact shapes.  Any
# other refusal may (an unknown trip count makes a loop a tf.while_loop whose
# list janus cannot return; exact shapes unroll it).
SHAPE_INDEPENDENT = frozenset((Reason.NUMPY_IN_GRAPH, Reason.OUTSIDE_TAPE,
                               Reason.TRY_STATEMENT, Reason.MATCH_STATEMENT,
                               Reason.INLINE_CLASS, Reason.INLINE_IMPORT,
                               Reason.ZERO_ARGUMENT_SUPER, Reason.GENERATOR))


@dataclasses.dataclass(frozen=True)
class TraceResult:
    """A graph built by one trace."""
    entry: typing.Any                 # replay.entry.GraphEntry
    evolving: frozenset = frozenset()   # (relaxation key, name): rewritten numbers read as constants


class Retrace(Exception):
    """A failed trace's request to trace the call shape again with a policy change."""

    def __init__(self, error: ConversionError, evolving: frozenset = frozenset()) -> None:
        super().__init__(str(error))
        self.error = error          # what stands if the request changes nothing
        self.evolving = evolving


class AssumeInstead(Retrace):
    """Real control flow failed to build at ``sites``; assume their outcomes instead
    (``graphgen/plan.py``: ``Plan.cannot_build``).  ``sites``: (code, site) ->
    (sequence to assume, its ``Reason``, the refusal's message)."""

    def __init__(self, error: ConversionError, evolving: frozenset, sites: dict) -> None:
        super().__init__(error, evolving)
        self.sites = sites


class PinNumbers(Retrace):
    """The trace needed the value of relaxed numbers: specialize them again
    (``relaxation.ScalarRelaxation.pin``)."""

    error: ScalarValueNeeded


class ExactShapes(Retrace):
    """The trace failed with relaxed (None) dimensions, which may be what broke it:
    trace again with the call's exact shapes."""


class StructureWidened(Retrace):
    """A recursive function's structure showed more classes or kinds of value after
    its graph function was built (``recursion/structures.py``): trace again, the
    profile now knowing them all."""


class PassWhole(Retrace):
    """A recursion over a nested list or tuple inside list or tuple arguments, which
    the call signature rebuilt item by item (one graph per shape): trace again with
    those arguments passed as themselves (``call_signature.Signature`` ``opaque``),
    the structure guarded by the recursion's ``STRUCTURE_MATCH``."""

    def __init__(self, error: ConversionError, evolving: frozenset, names: frozenset) -> None:
        super().__init__(error, evolving)
        self.names = names


class RelaxEvolving(Retrace):
    """The trace failed while reading rewritten numbers as constants: trace again with
    them dynamic (``relaxation.ScalarRelaxation.relax_evolving``)."""
