"""The measured floor: a janus function never keeps running slower than its eager calls.

Needs ``config`` only.  ``api.JanusFunction`` asks ``Floor.plain_now()`` before
each call and reports every call's wall time with how it ran (``CallKind``).
A function with graph breaks is timed whole (skeleton and segments), and each
segment has a floor of its own, so a slow segment runs plainly while the
others keep their graphs.

The discipline, as relaxing's: measure, decide, and measure again after a
bounded number of calls.

* **Warm-up is not steady cost.**  A call is warm-up when it, a segment of it
  or a janus function it calls ran a profiled call, built one of its first
  ``config.floor_warmup_graphs`` graphs or failed a trace (``WARMUP_WORK``):
  the profiled calls, the first traces, finding the breaks of a split
  function one by one (a call shape whose trace failed is not traced again).
  A function's later graphs (a retrace, a cache miss) are steady cost, as are
  fallbacks' re-runs and re-profiled calls: a function that keeps retracing
  pays for it here.
* **Decide on a window.**  After ``config.floor_window`` steady janus calls,
  their mean time (less the slowest one: one pause is noise) is compared with
  eager's median.  Eager's time comes from plain
  calls: the calls the floor ran plainly while it held, or else the next
  ``config.floor_eager_calls`` calls, run plainly to measure it; a plain call
  ``_FAR_FASTER`` times slower than janus ends that sampling.  Only the first
  decision may skip the sampling: when janus is far faster than even the
  profiled calls (the user's code run eagerly, plus probes).
* **Then hold, and check again.**  Janus slower than eager by more than
  ``config.floor_margin``: the next calls run plainly; janus faster: it keeps
  running.  Either way the decision is measured again after
  ``config.floor_recheck`` calls, twice as many after each decision that
  repeats the one before (at most 64 times as many), so a program whose speed
  changes later is followed, and one that does not is rarely disturbed.  A
  decision to keep janus is rechecked no sooner than its eager sampling costs
  at most ``config.floor_sampling_share`` of the calls' time: a function 50x
  faster than eager is rechecked every few thousand calls.

Plain calls are the user's function itself: eager's results, state and
exceptions by construction.  ``Floor.decisions`` is what ``explain`` shows.
"""
from __future__ import annotations
import collections
import dataclasses
import enum
import math
import statistics
import typing

from janus.config import config

_MAX_BACKOFF = 64      # the recheck interval grows to at most this many times the knob
_SAMPLES = 32          # recent times kept per kind
_FAR_FASTER = 8        # janus this many times faster than the profiled calls: no eager sampling


def _steady(window: typing.Sequence[float]) -> float:
    """Janus's time a call over the window: the mean without its one slowest call (a
    pause of the machine's, a graph's first run on a shape, is not steady cost; a
    retrace every other call still is)."""
    return statistics.fmean(sorted(window)[:-1]) if len(window) >= 4 else statistics.fmean(window)


class CallKind(enum.Enum):
    """How a timed call ran."""
    PROFILED = 'profiled'   # warm-up: the probed twin (eager plus probes)
    WARMUP = 'warm-up'      # profiled or first traced (itself, a segment, a callee)
    JANUS = 'janus'         # a graph, a split call, a fallback, a re-profile, a later trace
    EAGER = 'eager'         # plain Python: the user's function itself


class Verdict(enum.Enum):
    KEEP = 'janus keeps running'
    PLAIN = 'runs plainly'


class _WarmupWork:
    """How many profiled calls and first graphs janus has made in this process: a call
    during which the count moved did warm-up work (itself, a segment, a callee)."""
    count = 0

    def note(self) -> None:
        self.count += 1


WARMUP_WORK = _WarmupWork()


@dataclasses.dataclass(frozen=True)
class Decision:
    """One measurement and what the floor made of it (``explain``)."""
    call: int
    janus_s: float          # janus's mean time a call over the window
    eager_s: float          # eager's, as measured (or, before any plain call, the profiled)
    verdict: Verdict
    calls: int              # how many calls until it is measured again
    against: str = 'eager'  # what ``eager_s`` timed: plain calls, or the profiled ones

    def describe(self) -> str:
        ratio = self.eager_s / self.janus_s if self.janus_s > 0 else float('inf')
        return ('call %d: janus %.3g ms a call, %s %.3g ms (%.2fx): %s for %d calls'
                % (self.call, self.janus_s * 1e3, self.against, self.eager_s * 1e3, ratio,
                   self.verdict.value, self.calls))


@dataclasses.dataclass(eq=False)
class Floor:
    """One function's timings and the floor's current state (one per definition)."""
    samples: dict = dataclasses.field(default_factory=lambda: {
        kind: collections.deque(maxlen=_SAMPLES) for kind in CallKind})
    window: list = dataclasses.field(default_factory=list)   # steady janus times since a decision
    eager: list = dataclasses.field(default_factory=list)    # eager times since a decision
    plain_left: int = 0        # calls still to run plainly (holding, or sampling eager)
    sampling: bool = False     # the plain calls measure eager for a pending decision
    keep_left: int = 0         # janus calls before its speed is measured again
    backoff: int = 1           # multiplier of config.floor_recheck; doubles on a repeat
    last: typing.Optional[Verdict] = None
    decisions: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=16))

    def plain_now(self) -> bool:
        """Whether this call runs plainly (the floor holds, or eager is being timed)."""
        if not config.measured_floor or self.plain_left <= 0:
            return False
        self.plain_left -= 1
        return True

    def note(self, kind: CallKind, seconds: float, call_number: int) -> Decision | None:
        """A call of ``kind`` took ``seconds``; may decide (a ``Decision``, else None)."""
        if not config.measured_floor:
            return None
        self.samples[kind].append(seconds)
        if kind is CallKind.EAGER:
            self.eager = self.eager[-_SAMPLES:] + [seconds]
            # one sample far slower than janus decides (sampling a whole forward and
            # backward pass eagerly three times costs more than many janus calls save)
            far = self.window and seconds > _FAR_FASTER * _steady(self.window)
            if self.sampling and (self.plain_left == 0 or far):
                self.sampling, self.plain_left = False, 0
                return self._decide(call_number)
            return None
        if kind is not CallKind.JANUS:
            return None
        self.window.append(seconds)
        if len(self.window) > config.floor_window:
            del self.window[0]   # the newest calls only
        if self.keep_left > 0:   # kept: measured again only after these calls
            self.keep_left -= 1
            if self.keep_left > 0:
                return None
        if len(self.window) < config.floor_window:
            return None
        janus = _steady(self.window)
        profiled = sorted(self.samples[CallKind.PROFILED])[:2]
        if self.last is None and profiled and janus * _FAR_FASTER < profiled[-1]:
            # the profiled calls are eager plus probes: janus is far faster than eager
            return self._record(call_number, janus, profiled[-1], Verdict.KEEP,
                                'profiled calls')
        if self.eager:   # timed since the last decision (the floor held)
            return self._decide(call_number)
        self.plain_left, self.sampling = config.floor_eager_calls, True
        return None

    def _decide(self, call_number: int) -> Decision:
        janus = _steady(self.window)
        eager = statistics.median(self.eager)
        verdict = Verdict.PLAIN if janus > eager * (1 + config.floor_margin) else Verdict.KEEP
        return self._record(call_number, janus, eager, verdict)

    def _record(self, call_number: int, janus: float, eager: float, verdict: Verdict,
                against: str = 'eager') -> Decision:
        self.backoff = min(self.backoff * 2, _MAX_BACKOFF) if verdict is self.last else 1
        self.last = verdict
        calls = config.floor_recheck * self.backoff
        if verdict is Verdict.PLAIN:
            self.plain_left, self.keep_left = calls, 0
        else:
            # the next check samples eager calls, each worth eager/janus graph calls: so
            # many calls apart that the sampling costs at most floor_sampling_share
            cost = config.floor_eager_calls * eager / max(janus, 1e-9)
            calls = max(calls, math.ceil(cost / config.floor_sampling_share))
            self.plain_left, self.keep_left = 0, calls
        self.window, self.eager = [], []
        decision = Decision(call_number, janus, eager, verdict, calls, against)
        self.decisions.append(decision)
        return decision

    def describe(self) -> str:
        """Mean times so far by kind, for ``explain``'s first screen."""
        parts = []
        for kind in (CallKind.JANUS, CallKind.EAGER, CallKind.PROFILED, CallKind.WARMUP):
            times = self.samples[kind]
            if times:
                parts.append('%s %.3g ms (%d)' % (kind.value, statistics.fmean(times) * 1e3,
                                                  len(times)))
        return ', '.join(parts)
