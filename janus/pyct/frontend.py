"""The front end, once per code object: a function's source parsed, its sites numbered.

Needs nothing run before it.  The profiler (``profiler.py``: it probes the
code at the sites) and the generator (``graphgen/generator.py``: it converts
the tree) both start from ``front_end(fn)``: one parse (checked against the
code Python runs, ``parser.parse_function``) and one numbering
(``sites.number_sites``), so a site id names the same node for both by
construction.  The tree is shared and read-only: the generator converts a
deep copy of it.
"""
import dataclasses
import threading
import typing
import weakref

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


_parsed = weakref.WeakKeyDictionary()   # code object -> FrontEnd
_lock = threading.Lock()


def front_end(fn):
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
        return _parsed.setdefault(code, found)
