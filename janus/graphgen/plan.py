"""The speculation plan: from profiled observations to per-site decisions.

Needs a ``profiler.Profile``.  For every evaluation of a branch test or a
loop during a trace, ``decide`` answers: the outcome to assume (a bool for a
test, a trip count for a ``for`` over a tensor), checked by a ``Janus>Assert``,
or ``DYNAMIC`` (build real ``tf.cond`` / ``tf.while_loop``).  It assumes a
site's outcomes only when every profiled call showed the very same sequence,
the sequence is no longer than ``config.max_unroll``, and the site never broke
an assumption before (the lattice is fixed → dynamic, one way only).

Two refinements, both decided by the runtime (``control/``) through
``prefers_dynamic`` / ``cannot_build``:

* A test computed from a relaxed Python number (a counter, a schedule: it
  changes between calls by definition) is real control flow from the first
  graph, not an outcome assumed until the number reaches the other side; so
  is a test the profile saw in fewer than ``config.speculate_after`` calls
  (after a cache miss, a new path may have been profiled once).
* A site whose real control flow cannot be built (its branch does something
  janus does not convert) is *assumed* instead, with the sequence the profile
  (or the graph before it broke) showed: the calls that take the other path run
  imperatively, the others keep the graph (``unbuildable``).  A site whose
  profile shows several sequences assumes the one it showed most often.

``SpeculationState`` is the policy across traces, one per function
(``function_state.FunctionState.speculation``): plans go out (``plan``, one per
trace) and broken assumptions come in (``after_break``).  Nothing else
decides what a trace assumes.
"""
from __future__ import annotations

import collections
import dataclasses
import enum
import typing
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from janus.config import config
from janus.errors import ConversionError
from janus.decisions import DYNAMIC  # noqa: F401 - re-exported for the plan's users
from janus.pyct.sites import SiteKey

if TYPE_CHECKING:
    from janus.profiler import Profile
    from janus.reasons import Reason
    from janus.replay.entry import GraphEntry
    from janus.sources import Source
    from janus.trace.tracing import Assumption


class Plan:
    def __init__(self, profile: Profile, relaxed_sites: Iterable[SiteKey],
                 dynamic_scalars: Iterable[Any] = frozenset(),
                 unbuildable: Mapping[SiteKey, tuple[Any, ...]] | None = None,
                 fallback_sequences: Mapping[SiteKey, tuple[Any, ...]] | None = None,
                 speculate_after: int = 1, pinned: Iterable[Any] = frozenset()) -> None:
        self.profile = profile
        self.relaxed = set(relaxed_sites)
        self.dynamic_scalars = frozenset(dynamic_scalars)   # relaxed number sources (uids)
        # numbers a trace needed the values of (relaxation.py): a draw among them is not
        # made on the host again (trace/host_draws.py)
        self.pinned = frozenset(pinned)
        # (code, site) -> sequence: real control flow failed to build there, assume this
        self.unbuildable = dict(unbuildable or {})
        # (code, site) -> a site's most frequent outcomes in the profile
        self.fallback_sequences = dict(fallback_sequences or {})
        self.speculate_after = speculate_after     # calls a site must be seen in to be assumed
        # (code, site) -> evaluations so far in this trace
        self.evaluations: collections.Counter[SiteKey] = collections.Counter()
        # (code, site) -> sequence assumed (for explain)
        self._assumed: dict[SiteKey, tuple[Any, ...]] = {}
        # (code, site) -> the sequence it could assume
        self.chose_dynamic: dict[SiteKey, tuple[Any, ...]] = {}
        # (code, site) -> (sequence, Reason, message)
        self._failed: dict[SiteKey, tuple[Any, Reason, str]] = {}

    def decide(self, key: SiteKey) -> Any:
        """The assumed outcome of the next evaluation of site ``key``, or DYNAMIC."""
        index = self.evaluations[key]
        self.evaluations[key] += 1
        sequence = self._sequence(key)
        if (sequence is None or index >= len(sequence)
                or len(sequence) > config.max_unroll + 1):  # type: ignore[attr-defined]
            return DYNAMIC
        self._assumed[key] = sequence
        return sequence[index]

    def withdraw(self, key: SiteKey) -> None:
        """The runtime did not assume ``key`` after all (its test depends on a state
        change): the graph's record of assumed sites leaves it out."""
        self._assumed.pop(key, None)

    def assumed(self) -> dict[SiteKey, tuple[Any, ...]]:
        """(code, site) -> the outcome sequence this trace assumed there."""
        return dict(self._assumed)

    def failed(self) -> dict[SiteKey, tuple[tuple[Any, ...], Reason, str]]:
        """(code, site) -> (sequence, reason): sites whose real control flow failed to
        build in this trace and can be assumed in the next (``cannot_build``)."""
        return dict(self._failed)

    def _sequence(self, key: SiteKey) -> tuple[Any, ...] | None:
        if key in self.unbuildable:
            return self.unbuildable[key]
        if key in self.relaxed:
            return None
        site = self.profile.sites.get(key)
        return site.single_sequence() if site is not None else None

    def prefers_dynamic(self, key: SiteKey, varies: bool) -> bool:
        """Whether to build real control flow at ``key`` although its outcome could be
        assumed: its test was computed from a relaxed number (``varies``), or the
        profile saw the site in fewer than ``speculate_after`` calls (the knob, at most
        the function's profile_calls); not where
        that failed before.  Records the choice."""
        if key in self.unbuildable or key not in self._assumed:
            return False
        site = self.profile.sites.get(key)
        seen = sum(site.sequences.values()) if site is not None else 0
        if not varies and seen >= self.speculate_after:
            return False
        self.chose_dynamic[key] = self._assumed.pop(key)
        return True

    def cannot_build(self, key: SiteKey, reason: Reason, context: str,
                     value_needed: bool = False) -> bool:
        """Real control flow at ``key`` failed to build (for ``reason``, a ``Reason``;
        ``context``: the refusal's message): True when the site can be assumed
        instead (the janus function traces again, assuming it there).
        ``value_needed``: it failed for a relaxed number's value; unless the profile
        showed one sequence there, specializing the number (a graph per value) is
        better than an assumption its changing values would break."""
        sequence = self.chose_dynamic.get(key)
        if sequence is None and not value_needed:
            sequence = self.fallback_sequences.get(key)
        if sequence is None or key in self.unbuildable:
            return False
        self._failed[key] = (sequence, reason, context)
        return True

    def is_dynamic_scalar(self, source: Source) -> bool:
        """Whether a number read from ``source`` is a graph input, not a constant."""
        return bool(self.dynamic_scalars) and source.uid() in self.dynamic_scalars

    def reset(self) -> None:
        self.evaluations.clear()
        self._assumed.clear()


class Verdict(enum.Enum):
    """What becomes of a graph whose assumed-instead outcome broke (``after_break``)."""
    KEEP = 'keep'            # the other path is still rare: the graph stays
    REBUILD = 'rebuild'      # dropped; the next graph assumes the outcomes seen most now
    GIVE_UP = 'give up'      # dropped; its call shape runs imperatively from now on
    BREAK = 'graph break'    # the statement that failed to build runs in Python (segments.py)


@dataclasses.dataclass(frozen=True)
class BreakOutcome:
    """What one fallback changed in the speculation policy (``after_break``)."""
    relaxed: frozenset           # sites never assumed again (their graph is dropped)
    unbuildable: frozenset       # assumed-instead sites that broke (their graph: ``verdict``)
    verdict: typing.Optional[Verdict] = None   # None when ``unbuildable`` is empty
    breaks: int = 0              # the graph's assumed-instead breaks so far
    runs: int = 0                # the graph's runs so far
    break_error: typing.Any = None   # with Verdict.BREAK: the refusal naming the statement


@dataclasses.dataclass(eq=False)
class SpeculationState:
    """Per function: what its traces may assume (``plan``), and what broken
    assumptions taught it (``after_break``).  One-way: a relaxed site is never
    assumed again; only an assumption forced by unbuildable control flow is
    kept after it breaks, while the other path stays rare."""

    relaxed_sites: typing.Set[SiteKey] = dataclasses.field(default_factory=set)   # dynamic
    assumed_drops: int = 0     # graphs dropped for assumed-instead outcomes' breaks
    # Assumed-instead sites whose failure names a statement a graph break can take
    # (``tracer.breaks_at_statement``): key -> that refusal.
    breakable: dict = dataclasses.field(default_factory=dict)

    def note_breakable(self, sites: Iterable[SiteKey], error: ConversionError) -> None:
        """``sites`` are assumed because of ``error``, which a graph break could take."""
        kept = ConversionError(error.reason, error.context, error.filename, error.lineno,
                               error.source_line)   # not its frames: they hold the trace
        kept.statement_line = error.statement_line
        kept.route = getattr(error, 'route', None)   # the callee it was in (nested.py)
        for key in sites:
            self.breakable.setdefault(key, kept)

    def plan(self, profile: Profile, last_call: Mapping[SiteKey, tuple[Any, ...]],
             dynamic_scalars: Iterable[Any], assume_instead: Mapping[SiteKey, tuple[Any, ...]],
             profile_calls: int, pinned: Iterable[Any] = frozenset()) -> Plan:
        """The ``Plan`` of one trace.  ``assume_instead``: sites whose real control
        flow failed to build in an earlier trace of this call shape; ``pinned``: numbers
        whose values a trace needed."""
        return Plan(profile, self.relaxed_sites, dynamic_scalars, assume_instead,
                    usual_sequences(profile, last_call),
                    min(config.speculate_after, profile_calls),  # type: ignore[attr-defined]
                    pinned)

    def after_break(self, entry: GraphEntry, assumption: Assumption | None,
                    observed: Mapping[SiteKey, tuple[Any, ...]]) -> BreakOutcome:
        """A run of ``entry`` (a GraphEntry) fell back: ``assumption`` broke (None: a
        graph error), and ``observed`` is what the imperative re-run did per site."""
        broken: set[SiteKey] = set()
        if assumption is not None and assumption.speculative:
            broken.add(assumption.site)  # type: ignore[arg-type]  # a speculative one has one
        for key, assumed in entry.assumed_sites.items():
            if key in observed and observed[key] != assumed:
                broken.add(key)
        # Assumed because real control flow failed to build: the graph stays, and the
        # calls that take the other path run imperatively, while they are rare.
        unbuildable = broken & entry.assumed_instead
        broken -= unbuildable
        self.relaxed_sites |= broken
        verdict = self._unbuildable_verdict(entry) if unbuildable else None
        breakable = [self.breakable[key] for key in unbuildable if key in self.breakable]
        if breakable and entry.assumed_breaks >= 2:
            # The other path is taken, not just on the call the graph was built on:
            # a break there costs a segment call per run, a kept assumption a whole
            # imperative re-run per break.
            return BreakOutcome(frozenset(broken), frozenset(unbuildable), Verdict.BREAK,
                                entry.assumed_breaks, entry.runs, breakable[0])
        return BreakOutcome(frozenset(broken), frozenset(unbuildable), verdict,
                            entry.assumed_breaks, entry.runs)

    def _unbuildable_verdict(self, entry: GraphEntry) -> Verdict:
        """The graph stays while its other path is rare enough
        (``config.assumed_break_rate``; one break is free: the graph may have been
        built on a call that takes the other path)."""
        entry.assumed_breaks += 1
        rate = config.assumed_break_rate  # type: ignore[attr-defined]
        if entry.assumed_breaks <= rate * entry.runs + 1:
            return Verdict.KEEP
        self.assumed_drops += 1
        if self.assumed_drops > config.assumed_rebuilds:  # type: ignore[attr-defined]
            return Verdict.GIVE_UP
        return Verdict.REBUILD


def usual_sequences(profile: Profile,
                    last_call: Mapping[SiteKey, tuple[Any, ...]]) -> dict[SiteKey, tuple[Any, ...]]:
    """Each profiled site's most frequent outcomes (a tie goes to the last call's):
    what a trace assumes there if its real control flow fails to build."""
    usual: dict[SiteKey, tuple[Any, ...]] = {}
    for key, site in profile.sites.items():
        if site.sequences:
            usual[key] = max(site.sequences, key=lambda seq, site=site: (  # type: ignore[misc]
                site.sequences[seq], last_call.get(key) == seq))
    return usual
