"""Helpers shared by the passes: building runtime calls and reporting errors."""
from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, NoReturn, Protocol

import gast

from janus.errors import ConversionError

if TYPE_CHECKING:
    from janus.reasons import Reason

RUNTIME = '__jr'     # the janus.trace.operators module, a closure of converted code
NAMESPACE = '__ns'   # the converted function's FunctionNamespace, also a closure
RESERVED = (RUNTIME, NAMESPACE)


class PassContext(Protocol):
    """What a pass knows of the function it converts (``generator._PassContext``)."""
    filename: str
    generator: bool   # converting a generator function (its own yields stay)

    def line(self, lineno: int | None) -> str | None:
        """The source text of line ``lineno`` of the file, or None."""


def load(name: str) -> gast.Name:
    return gast.Name(name, gast.Load(), None, None)


def runtime_attr(name: str) -> gast.Attribute:
    return gast.Attribute(load(RUNTIME), name, gast.Load())


def runtime_call(name: str, args: Iterable[gast.expr], keywords: Iterable[gast.keyword] = (),
                 like: gast.AST | None = None) -> gast.Call:
    call = gast.Call(runtime_attr(name), list(args), list(keywords))
    if like is not None:
        gast.copy_location(call, like)
    return call


def is_runtime_ref(node: gast.AST) -> bool:
    return (isinstance(node, gast.Attribute) and isinstance(node.value, gast.Name)
            and node.value.id == RUNTIME)


def is_runtime_call(node: gast.AST) -> bool:
    return isinstance(node, gast.Call) and is_runtime_ref(node.func)


def const(value: object) -> gast.Constant:
    return gast.Constant(value, None)


class Pass(gast.NodeTransformer):
    """Base pass: knows the user's file so it can name the offending line."""

    def __init__(self, ctx: PassContext) -> None:
        self.ctx = ctx

    def unsupported(self, node: gast.AST, reason: Reason, what: str) -> NoReturn:
        """Refuses ``node`` for ``reason`` (a ``Reason``); ``what``: the message."""
        lineno = getattr(node, 'lineno', None)
        raise ConversionError(reason, what, self.ctx.filename, lineno, self.ctx.line(lineno))


class CannotFold(Exception):
    """A jump sits where folding cannot move the code after it (a loop, a with),
    or folding would copy too much code."""


# Folding copies the code after an ``if`` into each of its paths that can fall
# through; nested partial jumps multiply the copies.  Beyond this many copied
# AST nodes the statement keeps its Python shape instead.
FOLD_BUDGET = 20000


def fold_jumps(block: Iterable[gast.stmt], jumps_in: Callable[[gast.AST], bool],
               lower_jump: Callable[[gast.stmt], list[gast.stmt] | None]
               ) -> tuple[list[gast.stmt], bool]:
    """Rewrites ``block`` so no statement of it jumps (return/break/continue).

    ``jumps_in(node)`` says whether ``node`` contains such a jump;
    ``lower_jump(stmt)`` gives the statements that replace a jump statement,
    or None if ``stmt`` is not one.  At an ``if`` that contains a jump, the
    code after the ``if`` (the *tail*) moves into each of its branches, so
    it runs exactly on the paths that did not jump (``if a: if b: return 1``
    puts the tail both into ``if b``'s else and into ``if a``'s else).
    Returns (statements, whether every path through them jumps); raises
    CannotFold, leaving ``block`` unchanged (the result is built from copies).
    """
    return _Folder(jumps_in, lower_jump).fold(list(block), ())


class _Folder:
    def __init__(self, jumps_in: Callable[[gast.AST], bool],
                 lower_jump: Callable[[gast.stmt], list[gast.stmt] | None]) -> None:
        self.jumps_in, self.lower_jump = jumps_in, lower_jump
        self.budget = FOLD_BUDGET

    def fold(self, block: list[gast.stmt],
             tail: Sequence[gast.stmt]) -> tuple[list[gast.stmt], bool]:
        """``block`` followed by ``tail`` (the code after the enclosing ``if``s), folded."""
        out: list[gast.stmt] = []
        for index, stmt in enumerate(block):
            lowered = self.lower_jump(stmt)
            if lowered is not None:
                return out + lowered, True
            if isinstance(stmt, gast.If) and self.jumps_in(stmt):
                rest = block[index + 1:] + list(tail)
                body, body_jumps = self.fold(stmt.body, self._copy(rest))
                orelse, else_jumps = self.fold(stmt.orelse, self._copy(rest))
                folded = copy.copy(stmt)   # keeps the site annotation; stmt stays as it was
                folded.body, folded.orelse = body or [gast.Pass()], orelse
                return out + [folded], body_jumps and else_jumps
            if self.jumps_in(stmt):
                raise CannotFold()
            out.append(stmt)
        if not tail:
            return out, False
        rest, jumps = self.fold(list(tail), ())
        return out + rest, jumps

    def _copy(self, stmts: list[gast.stmt]) -> list[gast.stmt]:
        """Fresh copies of ``stmts`` (later passes rewrite nodes in place)."""
        copies = copy.deepcopy(stmts)
        self.budget -= sum(1 for stmt in copies for _ in gast.walk(stmt))
        if self.budget < 0:
            raise CannotFold()
        return copies
