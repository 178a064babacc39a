"""Sources: where a value the trace obtained from outside the call lives.

Needs nothing run before it.  A ``Source`` re-evaluates its value for a new
call (``value(arguments, memo)``), so a guard can re-check it and a hoisted
input can re-read it.  Every source has a ``uid()`` that is unique to the
location it names: two modules' globals of one name, or two closures' cells
of one name, never share a key (guards and hoisted graph inputs are keyed by
it).  ``repr`` is for people (explain, logs), never for identity.

The invariant the trace keeps (DESIGN.md, "Outside values carry their
source"): every object the traced code can reach either has a source in
``TraceContext`` or is registered there as made by the call; one with
neither is never taken for the call's own (the trace refuses it).
"""
from __future__ import annotations
import abc
import types
import typing


class Source(abc.ABC):
    """Base: ``value(arguments, memo)`` re-evaluates the value for a new call.

    ``memo`` caches each source once per guard check, so many guards on
    items of one property (``model.trainable_variables[i]``) read it once.
    """

    def value(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> typing.Any:
        key = id(self)
        if key not in memo:
            memo[key] = self.get(arguments, memo)
        return memo[key]

    @abc.abstractmethod
    def get(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> typing.Any:
        """The value at this location for a call with ``arguments``."""

    @abc.abstractmethod
    def uid(self) -> tuple:
        """A hashable name unique to the location (not to the text of ``repr``)."""



class CounterSource(Source):
    """A process-wide version counter kept as ``module.<name>`` (Keras layer settings,
    losses added): read from the module on every check, named by ``label``."""

    def __init__(self, module: types.ModuleType, name: str, label: str) -> None:
        self.module, self.name, self.label = module, name, label

    def get(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> typing.Any:
        return getattr(self.module, self.name)

    def uid(self) -> tuple:
        return (self.label,)

    def __repr__(self) -> str:
        return self.label

class ArgSource(Source):
    """A parameter of the janus function, by name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def get(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> typing.Any:
        return arguments[self.name]   # type: ignore[index]  # a call's, never None

    def value(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> typing.Any:
        return arguments[self.name]   # type: ignore[index]  # a leaf: cheaper than the memo

    def uid(self) -> tuple:
        return ('arg', self.name)

    def __repr__(self) -> str:
        return self.name


class GlobalSource(Source):
    """A module-level name (or a builtin when the module does not define it)."""

    def __init__(self, namespace: dict[str, typing.Any], name: str,
                 builtins_ns: typing.Mapping[str, typing.Any]) -> None:
        self.namespace, self.name, self.builtins_ns = namespace, name, builtins_ns

    def get(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> typing.Any:
        try:
            return self.namespace[self.name]
        except KeyError:
            return self.builtins_ns[self.name]

    def uid(self) -> tuple:
        return ('global', id(self.namespace), self.name)

    def __repr__(self) -> str:
        return 'G[%s.%s]' % (self.namespace.get('__name__', '?'), self.name)


class CellSource(Source):
    """A closure cell of the decorated (or an inlined) function, by cell identity."""

    def __init__(self, cell: types.CellType, name: str) -> None:
        self.cell, self.name = cell, name

    def get(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> typing.Any:
        return self.cell.cell_contents

    value = get   # a leaf: cheaper than the memo

    def uid(self) -> tuple:
        return ('cell', id(self.cell), self.name)   # the source keeps the cell alive

    def __repr__(self) -> str:
        return 'closure %r' % self.name


class DefaultSource(Source):
    """A default argument value of a user function (``def f(x, seen=[])``)."""

    def __init__(self, fn: types.FunctionType, name: str) -> None:
        self.fn, self.name = fn, name
        code = fn.__code__
        positional = code.co_varnames[:code.co_argcount]   # positional-only ones included
        # Where the default lives: an index from the end of __defaults__, or None
        # for a keyword-only parameter (in __kwdefaults__).
        self._from_end = len(positional) - positional.index(name) if name in positional else None

    def get(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> typing.Any:
        if self._from_end is None:
            return self.fn.__kwdefaults__[self.name]   # type: ignore[index]
        return self.fn.__defaults__[-self._from_end]   # type: ignore[index]

    def uid(self) -> tuple:
        return ('default', id(self.fn), self.name)   # the source keeps the function alive

    def __repr__(self) -> str:
        return '%s.<default %s>' % (self.fn.__qualname__, self.name)


class ObjectSource(Source):
    """An object the trace pinned by identity (an inlined callee): re-read as itself,
    so guards can re-check what may change in place on it (``fn.__defaults__``)."""

    def __init__(self, obj: typing.Any) -> None:
        self.obj = obj

    def get(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> typing.Any:
        return self.obj

    value = get   # a leaf: cheaper than the memo

    def uid(self) -> tuple:
        return ('object', id(self.obj))   # the source keeps the object alive

    def __repr__(self) -> str:
        return getattr(self.obj, '__qualname__', None) or type(self.obj).__name__


class AttrSource(Source):
    def __init__(self, base: Source, name: str) -> None:
        self.base, self.name = base, name

    def get(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> typing.Any:
        return getattr(self.base.value(arguments, memo), self.name)

    def uid(self) -> tuple:
        return ('attr', self.base.uid(), self.name)

    def __repr__(self) -> str:
        return '%r.%s' % (self.base, self.name)


class ItemSource(Source):
    def __init__(self, base: Source, key: typing.Any) -> None:
        self.base, self.key = base, key

    def get(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> typing.Any:
        return self.base.value(arguments, memo)[self.key]

    def uid(self) -> tuple:
        try:
            hash(self.key)
            item = self.key
        except TypeError:
            item = ('unhashable', repr(self.key))
        return ('item', self.base.uid(), type(self.key), item)

    def __repr__(self) -> str:
        return '%r[%r]' % (self.base, self.key)


class LenSource(Source):
    """``len(obj)`` of the container at ``base``: a relaxed length (a list whose
    length changes every call, read as a dynamic scalar, ``trace/observe.py``)."""

    def __init__(self, base: Source) -> None:
        self.base = base

    def get(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> int:
        return len(self.base.value(arguments, memo))

    def uid(self) -> tuple:
        return ('len', self.base.uid())

    def __repr__(self) -> str:
        return 'len(%r)' % (self.base,)


class TypeSource(Source):
    """``type(obj)`` of the object at ``base`` (``cls = type(self)``, ``self.__class__``):
    a class reached through an instance, re-read from that instance every call."""

    def __init__(self, base: Source) -> None:
        self.base = base

    def get(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> type:
        return type(self.base.value(arguments, memo))

    def uid(self) -> tuple:
        return ('type', self.base.uid())

    def __repr__(self) -> str:
        return 'type(%r)' % (self.base,)


# The iterator types whose state Python exposes without advancing them
# (``__reduce__``: the sequence and the position) and sets back (``__setstate__``).
SEQUENCE_ITERATORS = (type(iter([])), type(iter(())), type(iter(range(0))))
EXHAUSTED = -1   # the position of a list or tuple iterator that reached its end


def iterator_state(iterator: typing.Iterator) -> tuple[typing.Any, typing.Any]:
    """(sequence, position) of a list, tuple or range iterator, read without
    advancing it; an exhausted list or tuple iterator has released its sequence:
    ``((), EXHAUSTED)``."""
    reduced = iterator.__reduce__()
    if len(reduced) < 3:
        return (), EXHAUSTED
    return reduced[1][0], reduced[2]


class IteratorSequenceSource(Source):
    """The list, tuple or range a list/tuple/range iterator at ``base`` walks."""

    def __init__(self, base: Source) -> None:
        self.base = base

    def get(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> typing.Sequence:
        return iterator_state(self.base.value(arguments, memo))[0]

    def uid(self) -> tuple:
        return ('iterator sequence', self.base.uid())

    def __repr__(self) -> str:
        return '%r.<sequence>' % (self.base,)


class IteratorPositionSource(Source):
    """How many items the list/tuple/range iterator at ``base`` has given out
    (``EXHAUSTED`` once a list or tuple iterator reached its end)."""

    def __init__(self, base: Source) -> None:
        self.base = base

    def get(self, arguments: typing.Mapping[str, typing.Any] | None, memo: dict) -> int:
        return iterator_state(self.base.value(arguments, memo))[1]

    def uid(self) -> tuple:
        return ('iterator position', self.base.uid())

    def __repr__(self) -> str:
        return '%r.<position>' % (self.base,)
