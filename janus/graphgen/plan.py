"""The speculation plan: from profiled observations to per-site decisions.

Needs a ``profiler.Profile``.  For every evaluation of a branch test or a
loop during a trace, ``decide`` answers: the outcome to assume (a bool for a
test, a trip count for a ``for`` over a tensor), checked by a ``Janus>Assert``,
or ``DYNAMIC`` (build real ``tf.cond`` / ``tf.while_loop``).  It assumes a
site's outcomes only when every profiled call showed the very same sequence,
the sequence is no longer than ``config.max_unroll``, and the site never broke
an assumption before (the lattice is fixed → dynamic, one way only).

Two refinements, both decided by the runtime (``runtime/control/``) through
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
"""
import collections

from janus.config import config
from janus.decisions import DYNAMIC  # noqa: F401 - re-exported for the plan's users


class Plan:
    def __init__(self, profile, relaxed_sites, dynamic_scalars=frozenset(), unbuildable=None,
                 fallback_sequences=None, speculate_after=1):
        self.profile = profile
        self.relaxed = set(relaxed_sites)
        self.dynamic_scalars = frozenset(dynamic_scalars)   # relaxed number sources (uids)
        # (code, site) -> sequence: real control flow failed to build there, assume this
        self.unbuildable = dict(unbuildable or {})
        # (code, site) -> a site's most frequent outcomes in the profile
        self.fallback_sequences = dict(fallback_sequences or {})
        self.speculate_after = speculate_after     # calls a site must be seen in to be assumed
        self.evaluations = collections.Counter()   # (code, site) -> evaluations so far in this trace
        self.assumed = {}                          # (code, site) -> sequence assumed (for explain)
        self.chose_dynamic = {}                    # (code, site) -> the sequence it could assume
        self.failed = {}   # (code, site) -> (sequence, Reason, message): control flow failed

    def decide(self, key):
        """The assumed outcome of the next evaluation of site ``key``, or DYNAMIC."""
        index = self.evaluations[key]
        self.evaluations[key] += 1
        sequence = self._sequence(key)
        if sequence is None or index >= len(sequence) or len(sequence) > config.max_unroll + 1:
            return DYNAMIC
        self.assumed[key] = sequence
        return sequence[index]

    def _sequence(self, key):
        if key in self.unbuildable:
            return self.unbuildable[key]
        if key in self.relaxed:
            return None
        site = self.profile.sites.get(key)
        return site.single_sequence() if site is not None else None

    def prefers_dynamic(self, key, varies):
        """Whether to build real control flow at ``key`` although its outcome could be
        assumed: its test was computed from a relaxed number (``varies``), or the
        profile saw the site in fewer than ``speculate_after`` calls (the knob, at most
        the function's profile_calls); not where
        that failed before.  Records the choice."""
        if key in self.unbuildable or key not in self.assumed:
            return False
        site = self.profile.sites.get(key)
        seen = sum(site.sequences.values()) if site is not None else 0
        if not varies and seen >= self.speculate_after:
            return False
        self.chose_dynamic[key] = self.assumed.pop(key)
        return True

    def cannot_build(self, key, reason, context, value_needed=False):
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
        self.failed[key] = (sequence, reason, context)
        return True

    def is_dynamic_scalar(self, source):
        """Whether a number read from ``source`` is a graph input, not a constant."""
        return bool(self.dynamic_scalars) and source.uid() in self.dynamic_scalars

    def reset(self):
        self.evaluations.clear()
        self.assumed.clear()
