"""The graph cache of one janus function: guarded entries, least recently used first out.

Needs ``graphgen.tracer`` entries.  ``lookup`` returns the first entry whose
guards all hold, checking the most recently used first, and the misses of the
others (the recompile reason the caller logs).  The cache keeps at most
``config.cache_size_limit`` graphs, evicting the least recently used; a
function that has built ``config.recompile_limit`` graphs builds no more.

Graphs that serve do not evict each other: once the cache has evicted as
many graphs as it holds (the call shapes in use outnumber it: a bounded set
of shapes or values cycling, each call rebuilding what the one before
evicted), it holds twice as many, up to ``config.cache_size_max``.  (Telling
a rebuilt graph from a new one would read every guard; a guard on a
structure a thousand deep is a thousand deep.)
"""
import collections

from janus.config import config


class GraphCache:
    def __init__(self):
        self._entries = collections.OrderedDict()  # key -> GraphEntry, LRU first
        self._next_key = 0
        self.evictions = 0
        self.capacity = None                 # grown past config.cache_size_limit (None: not)

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
        if len(self._entries) >= self.limit() and self.evictions >= self.limit():
            # a whole cache's worth evicted already: the graphs in use outnumber it
            self.capacity = min(2 * self.limit(), max(config.cache_size_max, self.limit()))
        while len(self._entries) >= self.limit():
            evicted.append(self._entries.popitem(last=False)[1])
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

