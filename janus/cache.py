"""The graph cache of one janus function: guarded entries, least recently used first out.

Needs ``graphgen.tracer`` entries.  ``lookup`` returns the first entry whose
guards all hold, checking the most recently used first, and the misses of the
others (the recompile reason the caller logs).  The cache keeps at most
``config.cache_size_limit`` graphs, evicting the least recently used; a
function that has built ``config.recompile_limit`` graphs builds no more.
"""
import collections

from janus.config import config


class GraphCache:
    def __init__(self):
        self._entries = collections.OrderedDict()  # key -> GraphEntry, LRU first
        self._next_key = 0
        self.evictions = 0

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
        while len(self._entries) >= max(1, config.cache_size_limit):
            evicted.append(self._entries.popitem(last=False)[1])
            self.evictions += 1
        self._entries[self._next_key] = entry
        self._next_key += 1
        return evicted

    def remove(self, entry):
        """Drops ``entry`` (its speculation broke); True when it was cached."""
        for key, cached in list(self._entries.items()):
            if cached is entry:
                del self._entries[key]
                return True
        return False

    def newest(self):
        return next(reversed(self._entries.values()), None)
