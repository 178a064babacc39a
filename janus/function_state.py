"""What a janus function knows about one definition of its Python function: one record.

Needs nothing run before it.  Everything janus learns or decides per
function while calls run (the profile, the graph cache, what failed to
convert, relaxed sites and numbers, the recompile budget...) is a field of
one ``FunctionState``, made for one definition (``__code__``,
``__defaults__``, ``__kwdefaults__``).  When the function is redefined in
place, ``api.JanusFunction`` replaces the record wholesale, so nothing
learned about the old body outlives it.  Only what belongs to the callable
itself (its name, lifetime counters, the event log) stays on the
``JanusFunction`` (``api.LIFETIME_ATTRIBUTES``).

What janus keeps per *graph* lives on the graph's ``GraphEntry``
(``graphgen/tracer.py``), so dropping or evicting a graph frees all of it.
"""
import dataclasses
import inspect
import typing

from janus import profiler
from janus.floor import Floor
from janus.cache import GraphCache
from janus.graphgen.nested import Routes
from janus.graphgen.plan import SpeculationState
from janus.relaxation import ScalarRelaxation

# Bounds on what a function keeps about call shapes that got no graph (memory stays
# bounded however many shapes a program tries; a forgotten one is traced again).
_FAILED_SIGNATURES = 64   # call shapes that failed to convert, the newest kept
_MISS_KEYS = 64           # guard locations whose missed values are kept (explain's advice)
_MISS_VALUES = 32         # values kept per location


def definition(function):
    """The parts of a function that may be rebound in place, by identity."""
    if function is None:
        return None
    return (function.__code__, function.__defaults__, function.__kwdefaults__)


def same_definition(function, defined_as):
    """Whether ``function`` is still defined as ``defined_as`` (three identity checks:
    on every call)."""
    if function is None:
        return True
    code, defaults, kwdefaults = defined_as
    return (function.__code__ is code and function.__defaults__ is defaults
            and function.__kwdefaults__ is kwdefaults)


@dataclasses.dataclass(frozen=True)
class FailedShape:
    """The negative cache's record: calls ``signature`` matches run imperatively, for
    ``error``.  (A list scanned oldest first, not a dict keyed by signature: a
    ``Signature`` is a set of guards, with relaxed dimensions, ``isinstance`` checks and
    value equality, not a key a call's arguments could be hashed to.)"""
    signature: typing.Any        # call_signature.Signature
    error: Exception             # the ConversionError it failed with


@dataclasses.dataclass(frozen=True)
class CutShape:
    """Calls ``signature`` matches run the function cut as ``split`` (a trace of theirs
    failed at a statement: graphgen/segments.py)."""
    signature: typing.Any        # call_signature.Signature
    split: typing.Any            # segments.Split


@dataclasses.dataclass(eq=False)
class FunctionState:
    """Per-definition state of one janus function (see the module docstring)."""

    defined_as: typing.Optional[tuple]          # definition() it was made for
    signature: typing.Optional[inspect.Signature]
    failed_conversion: typing.Optional[Exception] = None   # ConversionError of the function
    profile: profiler.Profile = dataclasses.field(default_factory=profiler.Profile)
    recorder: typing.Optional[profiler.Recorder] = None    # __post_init__: on ``profile``
    profiled_fn: typing.Any = None              # the probed twin (None: run plainly)
    positional_names: typing.Optional[tuple] = None   # __post_init__: api's fast bind
    cache: GraphCache = dataclasses.field(default_factory=GraphCache)
    graphs_built: int = 0                       # counted against config.recompile_limit
    failed_traces: int = 0                      # counted against config.failed_trace_limit
    failed_signatures: list = dataclasses.field(default_factory=list)   # FailedShape, oldest first
    speculation: SpeculationState = dataclasses.field(default_factory=SpeculationState)
    scalars: ScalarRelaxation = dataclasses.field(default_factory=ScalarRelaxation)
    opaque_lists: set = dataclasses.field(default_factory=set)   # list args passed as such
    miss_values: dict = dataclasses.field(default_factory=dict)  # (kind, where) -> values
    reprofile_budget: int = 0                   # profiled calls still due after a miss
    # Graph breaks (graphgen/segments.py): the function cut at a line, per line; the
    # call shapes that run each cut (a trace of theirs failed at that line); the cut
    # every call runs (the converter refused a statement); lines a cut was refused at.
    splits: dict = dataclasses.field(default_factory=dict)   # frozenset of lines -> Split
    split_signatures: list = dataclasses.field(default_factory=list)   # CutShape, oldest first
    split_always: typing.Any = None
    unsplittable: set = dataclasses.field(default_factory=set)
    recut: dict = dataclasses.field(default_factory=dict)   # lines -> the wider lines now cut
    unhoisted: set = dataclasses.field(default_factory=set)   # break lines cut with no hoisting
    # A segment whose failed trace made its owner cut again: only the calls of the
    # old cut still running reach it, and they run it plainly (no trace per call).
    superseded: bool = False
    floor: Floor = dataclasses.field(default_factory=Floor)   # measured against eager
    # Keras layers whose own call a break's refusal was in: run through janus functions
    # of their own while the cut function's skeleton runs (graphgen/nested.py).
    routes: Routes = dataclasses.field(default_factory=Routes)

    def __post_init__(self):
        self.recorder = profiler.Recorder(self.profile)
        self.positional_names = _positional_names(self.signature)

    def note_failed(self, signature, error):
        """A call shape that runs imperatively from now on, and why (bounded)."""
        self.failed_signatures.append(FailedShape(signature, error))
        del self.failed_signatures[:-_FAILED_SIGNATURES]

    def refusal_for(self, arguments):
        """The error of the oldest failed call shape ``arguments`` match, or None."""
        for failed in self.failed_signatures:
            if failed.signature.check(arguments) is None:
                return failed.error
        return None

    def note_split(self, signature, split):
        """Calls ``signature`` matches (None: every call) run ``split`` from now on."""
        if signature is None:
            self.split_always = split
            return
        self.split_signatures.append(CutShape(signature, split))
        del self.split_signatures[:-_FAILED_SIGNATURES]

    def replace_split(self, old, new):
        """The calls that ran cut ``old`` run cut ``new`` from now on."""
        assert old is not None and new is not None
        if self.split_always is old:
            self.split_always = new
        self.split_signatures = [CutShape(shape.signature, new) if shape.split is old else shape
                                 for shape in self.split_signatures]

    def split_for(self, arguments):
        """The cut the call with ``arguments`` runs, or None."""
        for shape in reversed(self.split_signatures):
            if shape.signature.check(arguments) is None:
                return shape.split
        return None

    def site_name(self, key):
        """A site as the user reads it: the function, the line and the statement kind."""
        info = self.profile.site_info.get(key)
        return '%s line %s (%s)' % (key[0].co_name, info.lineno if info else '?',
                                   info.kind if info else 'site')

    def note_miss_value(self, kind, where, value):
        """Remembers a value that missed a guard (bounded: explain's recompile advice)."""
        seen = self.miss_values.get((kind, where))
        if seen is None:
            if len(self.miss_values) >= _MISS_KEYS:
                return
            seen = self.miss_values[(kind, where)] = []
        if value not in seen and len(seen) < _MISS_VALUES:
            seen.append(value)


def fields():
    """The names of ``FunctionState``'s fields."""
    return tuple(f.name for f in dataclasses.fields(FunctionState))


def _positional_names(signature):
    """Parameter names when every parameter is a plain positional one, else None."""
    if signature is None:
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = list(signature.parameters.values())
    if all(p.kind in kinds for p in parameters):
        return tuple(p.name for p in parameters)
    return None
