"""Value relaxation of Python numbers: when a constant becomes a graph input.

Needs ``graphgen.tracer`` entries (their guards).  A Python ``int``/``float``
read from outside the call or passed as an argument is specialized as a
constant (VALUE_MATCH).  When a cache miss shows that a location holds a new
value of the same type, and the location has shown ``config.scalar_values``
distinct values, it is *relaxed*: later graphs read it as a dynamic scalar
(``values/scalars.py``), one graph for every value.  The lattice goes one
way per location, constant -> dynamic, except that a trace which needed the
value itself (a shape, an index, library code: ``errors.ScalarValueNeeded``)
*pins* the location back to constants for good.

Two container observations relax the same way: the length of an outside list
that changes (LEN_MATCH; ``len(rewards)`` becomes a dynamic scalar read through
``sources.LenSource``), and a flat list of numbers of one type whose values
change (EQUALS_MATCH; passed to TF, ``tf.one_hot(actions, n)``, it becomes a
graph input fed per run, ``shadow_heap.hoist_numbers``).

Keys are sources' ``uid()`` for outside values (``guards.numbers_key`` for lists of
numbers) and ``call_signature.scalar_path_key`` for arguments; each comes with
a readable name for ``explain``.
"""
from __future__ import annotations
import typing
from janus import guards, sources
from janus.trace import call_signature
from janus.config import config

_NUMBERS = (int, float, bool)   # a bool flag that flips too: real control flow on it


class ScalarRelaxation:
    """Per janus function: which number locations are dynamic, which are pinned."""

    def __init__(self) -> None:
        self.dynamic = set()     # relaxation keys read as dynamic scalars
        self.pinned = {}         # key -> why its value is needed (never relaxed again)
        self.values = {}         # key -> distinct values seen by misses, in order
        self.names = {}          # key -> readable name

    def relax_after_miss(self, entry: typing.Any,
                         arguments: typing.Mapping[str, typing.Any]) -> list[str]:
        """Relaxes every number location the newest ``entry`` specialized whose value
        changed (type unchanged); returns the descriptions of the ones relaxed."""
        if not config.relax_scalars or entry is None:
            return []
        relaxed = []
        for key, name, old, new in _changed_numbers(entry, arguments):
            if key in self.dynamic or key in self.pinned:
                continue
            seen = self.values.setdefault(key, [old])
            if new not in seen:
                seen.append(new)
            self.names[key] = name
            if len(seen) >= max(2, config.scalar_values):
                self.dynamic.add(key)
                what = ('list of numbers (a graph input)' if type(new) is tuple
                        else type(new).__name__)
                relaxed.append('relaxed %s to a dynamic %s after %d values (%s): one graph '
                               'serves every value' % (name, what, len(seen), _values(seen)))
        return relaxed

    def relax_evolving(self, evolving: typing.Iterable[tuple]) -> list[str]:
        """Numbers a new graph read as constants and rewrites (``self.step += 1``): the
        next call would miss, so they are dynamic before the graph is cached.  Returns
        the descriptions of the ones relaxed (none: keep the graph)."""
        if not config.relax_scalars:
            return []
        relaxed = []
        for key, name in sorted(evolving, key=repr):
            if key in self.dynamic or key in self.pinned:
                continue
            self.dynamic.add(key)
            self.names[key] = name
            relaxed.append('relaxed %s to a dynamic number: the function rewrites it (one '
                           'graph serves every value)' % name)
        return relaxed

    def pin(self, lineage: typing.Iterable[tuple], reason: str) -> str | None:
        """A trace needed these numbers' values: constants again, for good.  Returns
        the description, or None when nothing new was pinned."""
        fresh = [(key, name) for key, name in lineage if key not in self.pinned]
        if not fresh:
            return None
        for key, name in fresh:
            self.dynamic.discard(key)
            self.pinned[key] = reason
            self.names[key] = name
        return 'kept %s specialized by value (a graph per value): %s' % (
            ', '.join(sorted(name for _, name in fresh)), reason)

    def describe(self) -> list[str]:
        """One line per relaxed or pinned location, for explain."""
        lines = ['%s: a graph input (one graph serves its values%s)' % (
            self.names.get(k, k), _seen(self.values.get(k, [])))
            for k in sorted(self.dynamic, key=repr)]
        lines += ['%s: specialized by value: %s' % (self.names.get(k, k), why)
                  for k, why in sorted(self.pinned.items(), key=lambda kv: repr(kv[0]))]
        return lines


def _seen(values: typing.Sequence) -> str:
    """``, seen: 1, 2`` for the values graph misses saw; nothing when none did (a
    number the function rewrites is relaxed without one)."""
    return ', seen: %s' % _values(values) if values else ''


def _values(values: typing.Sequence, limit: int = 6) -> str:
    shown = ', '.join(_brief(v) for v in values[:limit])
    return shown + (', ...' if len(values) > limit else '')


def _brief(value: typing.Any) -> str:
    """A value seen, as explain shows it (a list of numbers cut short)."""
    if type(value) is int and value.bit_length() > 64:
        return 'an int of %d bits' % value.bit_length()   # repr past 4,300 digits raises
    text = repr(value)
    return text if len(text) < 40 else text[:37] + '...'


def _changed_numbers(entry: typing.Any, arguments: typing.Mapping[str, typing.Any]) -> list[tuple]:
    """(key, name, old, new) for every VALUE guard of ``entry`` on a number whose
    value now differs with the same type."""
    found = []
    for node_path, old, new in entry.signature.constant_values(arguments):
        if _same_number_type(old, new) and old != new:
            found.append((call_signature.scalar_path_key(node_path), node_path, old, new))
    memo = {}
    for guard in entry.source_guards:
        kind = getattr(guard, 'kind', None)
        if kind not in _RELAXABLE or isinstance(guard.source, sources.IteratorPositionSource):
            continue   # (where a loop starts over an outside iterator: what it unrolls)
        try:
            new = guard.source.value(arguments, memo)
        except Exception:  # noqa: BLE001 - the location is gone: nothing to relax
            continue
        if kind is guards.GuardKind.VALUE_MATCH:
            if _same_number_type(guard.expected, new) and not guards.same_constant(
                    guard.expected, new):
                found.append((guard.source.uid(), repr(guard.source), guard.expected, new))
        elif kind is guards.GuardKind.LEN_MATCH:
            container, length = guard.expected
            if type(new) is container and container is list and len(new) != length:
                source = sources.LenSource(guard.source)
                found.append((source.uid(), repr(source), length, len(new)))
        else:   # EQUALS_MATCH: a list of numbers with new values
            snapshot = guard.expected[0]
            if (type(new) is type(snapshot) and new != snapshot
                    and guards.numbers_dtype(snapshot) is not None
                    and guards.numbers_dtype(new) == guards.numbers_dtype(snapshot)):
                found.append((guards.numbers_key(guard.source), repr(guard.source),
                              tuple(snapshot), tuple(new)))
    return found


_RELAXABLE = (guards.GuardKind.VALUE_MATCH, guards.GuardKind.LEN_MATCH,
              guards.GuardKind.EQUALS_MATCH)


def _same_number_type(old: typing.Any, new: typing.Any) -> bool:
    return type(old) is type(new) and type(old) in _NUMBERS
