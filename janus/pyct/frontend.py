"""The front end, once per code object: a function's source parsed, its sites numbered.

Needs nothing run before it.  The profiler (``profiler.py``: it probes the
code at the sites) and the generator (``graphgen/generator.py``: it converts
the tree) both start from ``front_end(fn)``: one parse (checked against the
code Python runs, ``parser.parse_function``) and one numbering
(``sites.number_sites``), so a site id names the same node for both by
construction.  The tree is shared and read-only: the generator converts a
deep copy of it.  Caches here and in the generator are keyed by a code
object's identity (``ByCode``), never by its value.
"""
from __future__ import annotations
import dataclasses
import threading
import typing
import weakref
import types

import gast

from janus.pyct import parser, sites


@dataclasses.dataclass(frozen=True)
class FrontEnd:
    """One parse of one function, its site nodes annotated (``anno.Key.SITE``)."""
    tree: gast.AST            # the def or lambda; read-only (copy it to transform it)
    filename: str
    source_lines: typing.List[str]
    first_lineno: int
    sites: typing.Dict[int, sites.Site]   # site id -> Site


class ByCode:
    """code object -> value, by the code object's identity, held weakly.

    Code objects compare equal by value: two modules' functions with the same
    text on the same lines have *equal* code objects (the file name is not
    compared), so a dict keyed by them handed one module's conversion (its
    file name, its globals) to the other.  An id is unique only while its
    object lives: an entry goes when its code object is freed (the weakref's
    callback), before the id can name another code object."""

    def __init__(self) -> None:
        self._entries = {}   # id(code) -> (weakref to code, value)

    def get(self, code: types.CodeType) -> typing.Any:
        entry = self._entries.get(id(code))
        if entry is None or entry[0]() is not code:   # an id alone is never trusted
            return None
        return entry[1]

    def put(self, code: types.CodeType, value: object) -> None:
        key = id(code)
        entries = self._entries

        def forget(ref: weakref.ref) -> None:
            if entries.get(key, (None,))[0] is ref:
                del entries[key]
        entries[key] = (weakref.ref(code, forget), value)

    def __len__(self) -> int:
        return len(self._entries)


_parsed = ByCode()   # code object -> FrontEnd
_lock = threading.Lock()


def front_end(fn: types.FunctionType) -> FrontEnd:
    """``fn``'s ``FrontEnd`` (parsed once per code object); raises
    ``parser.NoSource`` or ``SyntaxError`` when its source cannot be had (not
    remembered: the file may be fixed)."""
    code = fn.__code__
    with _lock:
        found = _parsed.get(code)
    if found is not None:
        return found
    tree, filename, source_lines = parser.parse_function(fn)
    found = FrontEnd(tree, filename, source_lines, tree.lineno,
                     sites.number_sites(tree, source_lines, tree.lineno))
    with _lock:
        first = _parsed.get(code)   # another thread's, parsed meanwhile
        if first is not None:
            return first
        _parsed.put(code, found)
    return found


def register(code: types.CodeType, parsed: FrontEnd) -> None:
    """``parsed`` is the front end of ``code``: janus compiled ``code`` from its tree
    (a graph break's segment, ``graphgen/segments.py``), so there is no file to read."""
    with _lock:
        _parsed.put(code, parsed)
