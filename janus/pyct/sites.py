"""Numbers the AST sites the profiler observes and assumptions refer to.

Runs right after parsing.  A site is a node whose run-time behaviour the
profiler records (calls; branches and loops when those are profiled) and
whose id an assumption carries, so a failure maps back to a source line.
"""
from __future__ import annotations
import types
import typing

import gast

from janus.pyct import anno

SITE_NODES = (gast.Call, gast.If, gast.IfExp, gast.For, gast.While, gast.BoolOp,
              gast.Assert, gast.Break, gast.Continue, gast.Return)


class SiteKey(typing.NamedTuple):
    """A site as the profile, the plan and assumptions key it: the code object it is
    in (callees' sites are distinct) and its id in that code's numbering."""
    code: types.CodeType
    site: int


class Site:
    __slots__ = ('id', 'kind', 'lineno', 'text', 'position')

    def __init__(self, site_id: int, kind: str, lineno: int | None, text: str | None,
                 position: tuple | None = None) -> None:
        self.id, self.kind, self.lineno, self.text = site_id, kind, lineno, text
        # (kind, lineno, col, end lineno, end col): the same node in another parse of
        # the same source (a graph-break segment's copy of its owner's statements)
        self.position = position

    def __repr__(self) -> str:
        return 'site %d (%s, line %s)' % (self.id, self.kind, self.lineno)


def number_sites(tree: gast.AST, source_lines: typing.Sequence[str],
                 first_lineno: int) -> dict[int, Site]:
    """Annotates every site node with an id; returns {id: Site}."""
    sites = {}
    for node in gast.walk(tree):
        if isinstance(node, SITE_NODES):
            site_id = len(sites)
            lineno = getattr(node, 'lineno', None)
            text = None
            if lineno is not None and 0 <= lineno - first_lineno < len(source_lines):
                text = source_lines[lineno - first_lineno].strip()
            position = (type(node).__name__, lineno, getattr(node, 'col_offset', None),
                        getattr(node, 'end_lineno', None), getattr(node, 'end_col_offset', None))
            sites[site_id] = Site(site_id, type(node).__name__, lineno, text,
                                  position if None not in position else None)
            anno.set(node, anno.Key.SITE, site_id)
    return sites
