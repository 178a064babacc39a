"""The graph cache of one janus function: guarded entries, least recently used first out.

Needs ``graphgen.tracer`` entries.  ``lookup`` returns the first entry whose
guards all hold, checking the most recently used first, and the misses of the
others (the recompile reason the caller logs).  The cache keeps at most
``config.cache_size_limit`` graphs, evicting the least recently used; a
function that has built ``config.recompile_limit`` graphs builds no more.

Graphs that serve do not evict each other: when a graph built anew guards
exactly what an evicted one guarded (a bounded set of shapes or values
cycling through more call shapes than the cache holds, each call rebuilding
what the one before evicted), the cache holds twice as many, up to
``config.cache_size_max``.
"""
import collections

from janus.config import config


class GraphCache:
    def __init__(self):
        self._entries = collections.OrderedDict()  # key -> GraphEntry, LRU first
        self._next_key = 0
        self.evictions = 0
        self.capacity = None                 # grown past config.cache_size_limit (None: not)
        self._evicted = collections.deque(maxlen=64)   # guard descriptions of evicted graphs

    def __len__(self):
        return len(self._entries)

    def entries(self):
        return list(self._entries.values())

    def lookup(self, arguments):
        """(entry or None, [misses of the entries that did not match], newest first)."""
        misses = []
        for key in reversed(self._entries):
            entry = self._entries[key]
            miss = entry.check(arguments)
            if miss is None:
                self._entries.move_to_end(key)
                return entry, misses
            misses.append(miss)
        return None, misses

    def insert(self, entry):
        """Caches ``entry``; returns the entries evicted for it (least recently used).
        Nothing else holds them: what janus keeps per graph lives on its entry."""
        evicted = []
        described = _described(entry)
        if described in self._evicted:   # it evicted one that serves: hold more
            self.capacity = min(2 * self.limit(), max(config.cache_size_max, self.limit()))
        while len(self._entries) >= self.limit():
            gone = self._entries.popitem(last=False)[1]
            self._evicted.append(_described(gone))
            evicted.append(gone)
            self.evictions += 1
        self._entries[self._next_key] = entry
        self._next_key += 1
        return evicted

    def limit(self):
        """How many graphs the cache holds now."""
        return max(1, config.cache_size_limit, self.capacity or 0)

    def remove(self, entry):
        """Drops ``entry`` (its speculation broke); True when it was cached."""
        for key, cached in list(self._entries.items()):
            if cached is entry:
                del self._entries[key]
                return True
        return False

    def newest(self):
        return next(reversed(self._entries.values()), None)


def _described(entry):
    """What ``entry`` is specialized for, as one hashable value."""
    try:
        return tuple(entry.describe_guards())
    except Exception:  # noqa: BLE001 - an entry janus cannot describe matches nothing
        return object()
