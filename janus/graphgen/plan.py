"""The speculation plan: from profiled observations to per-site decisions.

Needs a ``profiler.Profile``.  For every evaluation of a branch test or a
loop during a trace, ``decide`` answers: the outcome to assume (a bool for a
test, a trip count for a ``for`` over a tensor), checked by a ``Janus>Assert``,
or ``DYNAMIC`` (build real ``tf.cond`` / ``tf.while_loop``).  It assumes a
site's outcomes only when every profiled call showed the very same sequence,
the sequence is no longer than ``config.max_unroll``, and the site never broke
an assumption before (the lattice is fixed → dynamic, one way only).
"""
import collections

from janus.config import config
from janus.decisions import DYNAMIC  # noqa: F401 - re-exported for the plan's users


class Plan:
    def __init__(self, profile, relaxed_sites, dynamic_scalars=frozenset()):
        self.profile = profile
        self.relaxed = set(relaxed_sites)
        self.dynamic_scalars = frozenset(dynamic_scalars)   # relaxed number sources (uids)
        self.evaluations = collections.Counter()   # (code, site) -> evaluations so far in this trace
        self.assumed = {}                          # (code, site) -> sequence assumed (for explain)

    def decide(self, key):
        """The assumed outcome of the next evaluation of site ``key``, or DYNAMIC."""
        index = self.evaluations[key]
        self.evaluations[key] += 1
        if key in self.relaxed:
            return DYNAMIC
        site = self.profile.sites.get(key)
        sequence = site.single_sequence() if site is not None else None
        if sequence is None or index >= len(sequence) or len(sequence) > config.max_unroll + 1:
            return DYNAMIC
        self.assumed[key] = sequence
        return sequence[index]

    def is_dynamic_scalar(self, source):
        """Whether a number read from ``source`` is a graph input, not a constant."""
        return bool(self.dynamic_scalars) and source.uid() in self.dynamic_scalars

    def reset(self):
        self.evaluations.clear()
        self.assumed.clear()
