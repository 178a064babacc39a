"""The measured floor: a janus function never keeps running slower than its eager calls.

Needs ``config`` only.  ``api.JanusFunction`` asks ``Floor.plain_now()`` before
each call and reports every call's wall time with how it ran (``CallKind``).
A function with graph breaks is timed whole (skeleton and segments), and each
segment has a floor of its own, so a slow segment runs plainly while the
others keep their graphs.

The discipline, as relaxing's: measure, decide, and measure again after a
bounded number of calls.

* **Warm-up is not steady cost.**  The profiled calls and the calls that built
  one of the function's first ``config.floor_warmup_graphs`` graphs are
  warm-up.  A graph built after those (a retrace, a cache miss, a relaxed
  graph) is steady cost, as are fallbacks' re-runs and re-profiled calls: a
  function that keeps retracing pays for it here.
* **Decide on a window.**  After ``config.floor_window`` steady janus calls,
  their mean time is compared with eager's.  Eager's time comes from plain
  calls: the calls the floor runs plainly, and, where none was timed, the
  next ``config.floor_eager_calls`` calls, run plainly to measure it, afresh
  at each recheck of a decision to keep janus (the program may have changed).
  The first decision skips that sampling when janus is clearly faster than
  even the profiled calls (which run the user's code eagerly, plus probes).
* **Then hold, and check again.**  Janus slower than eager by more than
  ``config.floor_margin``: the next calls run plainly; janus faster: it keeps
  running.  Either way the decision is measured again after
  ``config.floor_recheck`` calls, twice as many after each decision that
  repeats the one before (at most 64 times as many), so a program whose speed
  changes later is followed, and one that does not is rarely disturbed.

Plain calls are the user's function itself: eager's results, state and
exceptions by construction.  ``Floor.decisions`` is what ``explain`` shows.
"""
import collections
import dataclasses
import enum
import statistics
import typing

from janus.config import config

_MAX_BACKOFF = 64      # the recheck interval grows to at most this many times the knob
_SAMPLES = 32          # recent times kept per kind


class CallKind(enum.Enum):
    """How a timed call ran."""
    PROFILED = 'profiled'   # warm-up: the probed twin (eager plus probes)
    WARMUP = 'warm-up'      # built one of the function's first graphs
    JANUS = 'janus'         # a graph, a split call, a fallback, a re-profile, a later trace
    EAGER = 'eager'         # plain Python: the user's function itself


class Verdict(enum.Enum):
    KEEP = 'janus keeps running'
    PLAIN = 'runs plainly'


@dataclasses.dataclass(frozen=True)
class Decision:
    """One measurement and what the floor made of it (``explain``)."""
    call: int
    janus_ms: float
    eager_ms: float
    verdict: Verdict
    calls: int              # how many calls until it is measured again

    def describe(self):
        ratio = self.eager_ms / self.janus_ms if self.janus_ms > 0 else float('inf')
        return ('call %d: janus %.3g ms a call, eager %.3g ms (%.2fx eager): %s for %d calls'
                % (self.call, self.janus_ms, self.eager_ms, ratio, self.verdict.value,
                   self.calls))


@dataclasses.dataclass(eq=False)
class Floor:
    """One function's timings and the floor's current state (one per definition)."""
    samples: dict = dataclasses.field(default_factory=lambda: {
        kind: collections.deque(maxlen=_SAMPLES) for kind in CallKind})
    window: list = dataclasses.field(default_factory=list)   # steady janus times since a decision
    plain_left: int = 0        # calls still to run plainly (holding, or sampling eager)
    sampling: bool = False     # the plain calls measure eager for a pending decision
    keep_left: int = 0         # janus calls before its speed is measured again
    backoff: int = 1           # multiplier of config.floor_recheck; doubles on a repeat
    last: typing.Optional[Verdict] = None
    decisions: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=16))

    def plain_now(self):
        """Whether this call runs plainly (the floor holds, or eager is being timed)."""
        if not config.measured_floor or self.plain_left <= 0:
            return False
        self.plain_left -= 1
        return True

    def note(self, kind, seconds, call_number):
        """A call of ``kind`` took ``seconds``; may decide (a ``Decision``, else None)."""
        if not config.measured_floor:
            return None
        self.samples[kind].append(seconds)
        if kind is CallKind.EAGER:
            if self.sampling and self.plain_left == 0:
                self.sampling = False
                return self._decide(call_number)
            return None
        if kind is not CallKind.JANUS:
            return None
        self.window.append(seconds)
        if self.keep_left > 0:
            self.keep_left -= 1
            if self.keep_left > 0:
                return None
            self.window = self.window[-config.floor_window:]
        if len(self.window) < config.floor_window:
            return None
        janus = statistics.fmean(self.window)
        profiled = sorted(self.samples[CallKind.PROFILED])[:2]
        if self.last is None and profiled and janus * 2 < profiled[-1]:
            return self._record(call_number, janus, profiled[-1], Verdict.KEEP)
        if not self.samples[CallKind.EAGER] or self.last is Verdict.KEEP:
            # eager's time is needed, and a fresh one: the program may have changed
            self.samples[CallKind.EAGER].clear()
            self.plain_left, self.sampling = config.floor_eager_calls, True
            return None
        return self._decide(call_number)

    def _decide(self, call_number):
        janus = statistics.fmean(self.window) if self.window else 0.0
        eager = statistics.median(self.samples[CallKind.EAGER])
        verdict = Verdict.PLAIN if janus > eager * (1 + config.floor_margin) else Verdict.KEEP
        return self._record(call_number, janus, eager, verdict)

    def _record(self, call_number, janus, eager, verdict):
        self.backoff = min(self.backoff * 2, _MAX_BACKOFF) if verdict is self.last else 1
        self.last = verdict
        calls = config.floor_recheck * self.backoff
        if verdict is Verdict.PLAIN:
            self.plain_left, self.keep_left = calls, 0
        else:
            self.plain_left, self.keep_left = 0, calls
        self.window = []
        decision = Decision(call_number, janus * 1e3, eager * 1e3, verdict, calls)
        self.decisions.append(decision)
        return decision

    def describe(self):
        """Mean times so far by kind, for ``explain``'s first screen."""
        parts = []
        for kind in (CallKind.JANUS, CallKind.EAGER, CallKind.PROFILED, CallKind.WARMUP):
            times = self.samples[kind]
            if times:
                parts.append('%s %.3g ms (%d)' % (kind.value, statistics.fmean(times) * 1e3,
                                                  len(times)))
        return ', '.join(parts)
