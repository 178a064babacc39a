"""Hoisting a graph break's tensor work out of it (``probs = model(obs).numpy()``).

Runs on the mangled gast function ``segments.split`` cuts, before the cut.  A
statement at a break line runs in Python, all of it, eagerly: in
``probs = tf.nn.softmax(self.policy(obs[None]))[0].numpy()`` the forward pass
too.  Where such a statement's first work is the receiver of a value read
(``.numpy()``, ``.item()``, ``.tolist()``), the receiver gets a statement of
its own just before it, ``__janus_hoisted_0 = tf.nn.softmax(...)[0]``, marked
``anno.Key.HOISTED`` (the cut puts it in the segment before the break, not in
Python), and the statement reads the name instead.

Same meaning, by construction:

* the receiver is the first code the statement runs: only names and
  constants are evaluated before it (no attribute, item or call, so no user
  code moves across it), and nothing on the way to it is conditional
  (``and``/``or``, conditional expressions, chained comparisons,
  comprehensions and lambdas are not looked into);
* the receiver holds a call (there is work to hoist) and no walrus;
* the new name is janus's own (never the user's, never mangled).

A hoisted receiver janus cannot put in a graph either breaks at the same
line; the function is then cut again without hoisting there (``whole`` in
``segments.split``, kept by ``api.JanusFunction``).
"""
from __future__ import annotations

from collections.abc import Container, Iterator
from typing import Any

import gast

from janus.pyct import anno

PREFIX = '__janus_hoisted_'
_VALUE_READS = ('numpy', 'item', 'tolist')


def hoist(tree: gast.FunctionDef, lines: Container[int]) -> set[int]:
    """Hoists out of the simple statements of ``tree`` at ``lines``; returns the lines
    where it did."""
    done, counter = set(), [0]
    for block in _blocks(tree):
        out = []
        for stmt in block:
            if stmt.lineno in lines and not hasattr(stmt, 'body'):
                made = _hoisted(stmt, counter)
                if made is not None:
                    out.append(made)
                    done.add(stmt.lineno)
            out.append(stmt)
        block[:] = out
    return done


def _blocks(tree: gast.AST) -> Iterator[list[gast.stmt]]:
    """Every statement list of ``tree``'s own scope (nested functions and classes aside)."""
    stack = [tree.body]
    while stack:
        block = stack.pop()
        yield block
        for stmt in block:
            if isinstance(stmt, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
                continue
            for field in ('body', 'orelse', 'finalbody'):
                inner = getattr(stmt, field, None)
                if inner:
                    stack.append(inner)
            for handler in getattr(stmt, 'handlers', ()):
                stack.append(handler.body)
            for case in getattr(stmt, 'cases', ()):
                stack.append(case.body)


def _hoisted(stmt: gast.stmt, counter: list[int]) -> gast.Assign | None:
    """The statement computing ``stmt``'s first work, rewriting ``stmt`` to read it;
    None when there is none to hoist."""
    if not isinstance(stmt, (gast.Assign, gast.Expr, gast.Return, gast.AnnAssign)):
        return None   # (``x += ...`` loads ``x`` first)
    root = stmt.value
    if root is None:
        return None
    receiver = _first_receiver(root)
    if receiver is None:
        return None
    parent, field, index = receiver
    node = getattr(parent, field) if index is None else getattr(parent, field)[index]
    name = PREFIX + str(counter[0])
    counter[0] += 1
    load = gast.copy_location(gast.Name(name, gast.Load(), None, None), node)
    load.end_lineno, load.end_col_offset = node.end_lineno, node.end_col_offset
    if index is None:
        setattr(parent, field, load)
    else:
        getattr(parent, field)[index] = load
    made = gast.Assign([gast.Name(name, gast.Store(), None, None)], node)
    for part in (made, made.targets[0]):
        gast.copy_location(part, node)
        part.end_lineno, part.end_col_offset = node.end_lineno, node.end_col_offset
    anno.set(made, anno.Key.HOISTED, True)
    return made


def _first_receiver(root: gast.expr) -> tuple[gast.AST, str, int | None] | None:
    """(parent, field, index) of the receiver of the first value read evaluated in
    ``root``, when only names and constants are evaluated before it; else None."""
    for parent, field, index in _first_work(root):
        node = getattr(parent, field) if index is None else getattr(parent, field)[index]
        if isinstance(node, gast.Call) and not node.args and not node.keywords \
                and isinstance(node.func, gast.Attribute) and node.func.attr in _VALUE_READS:
            receiver = node.func.value
            if _has_call(receiver) and not _has_walrus(receiver) and not _reads_value(receiver):
                return node.func, 'value', None   # (else the innermost read's receiver)
    return None


def _first_work(root: gast.expr) -> Iterator[tuple[Any, str, int | None]]:
    """The chain of (parent, field, index) from ``root`` down to the first code it
    runs: at each node, its first child in evaluation order that is not a name or a
    constant (those before it are); it stops where Python may skip a child or this
    pass does not know the order."""
    parent, field, index = _Holder(root), 'value', None
    while True:
        yield parent, field, index
        node = getattr(parent, field) if index is None else getattr(parent, field)[index]
        working = [(p, f, i) for p, f, i in _ordered_children(node)
                   if not _inert(getattr(p, f) if i is None else getattr(p, f)[i])]
        if not working:
            return
        parent, field, index = working[0]


def _ordered_children(node: gast.AST) -> list[tuple[gast.AST, str, int | None]]:
    """``node``'s children in evaluation order as (node, field, index), or [] where
    Python may skip some or this pass does not know the order."""
    if isinstance(node, gast.Call):
        return [(node, 'func', None)] + [(node, 'args', i) for i in range(len(node.args))]
    if isinstance(node, (gast.Attribute, gast.Starred)):
        return [(node, 'value', None)]
    if isinstance(node, gast.Subscript):
        return [(node, 'value', None), (node, 'slice', None)]
    if isinstance(node, gast.BinOp):
        return [(node, 'left', None), (node, 'right', None)]
    if isinstance(node, gast.UnaryOp):
        return [(node, 'operand', None)]
    if isinstance(node, (gast.Tuple, gast.List)) and node.elts:
        return [(node, 'elts', i) for i in range(len(node.elts))]
    if isinstance(node, gast.Compare) and len(node.comparators) == 1:
        return [(node, 'left', None), (node, 'comparators', 0)]
    return []


def _inert(node: gast.AST) -> bool:
    return all(isinstance(n, (gast.Name, gast.Constant, gast.Load, gast.expr_context))
               for n in gast.walk(node))


def _reads_value(node: gast.AST) -> bool:
    return any(isinstance(n, gast.Call) and isinstance(n.func, gast.Attribute)
               and n.func.attr in _VALUE_READS for n in gast.walk(node))


def _has_call(node: gast.AST) -> bool:
    return any(isinstance(n, gast.Call) for n in gast.walk(node))


def _has_walrus(node: gast.AST) -> bool:
    return any(isinstance(n, (gast.NamedExpr, gast.Lambda, gast.ListComp, gast.SetComp,
                              gast.DictComp, gast.GeneratorExp, gast.Yield, gast.YieldFrom,
                              gast.Await)) for n in gast.walk(node))


class _Holder:
    def __init__(self, value: gast.expr) -> None:
        self.value = value
