"""Annotation keys attached to gast nodes (as an enum, like AutoGraph's anno)."""
from __future__ import annotations
import enum
import typing
import gast


class Key(enum.Enum):
    SITE = 'site'          # int: the node's profiling/assumption site id
    ORIGIN = 'origin'      # (filename, lineno): the user's source position
    BREAK_FLAG = 'break'   # str: a ``for`` loop's break flag (``jumps``): the loop stops on it
    HOISTED = 'hoisted'    # bool: a statement janus hoisted out of a graph break (segments run it)
    NEVER_SUPPRESSES = 'never_suppresses'   # bool: a ``with`` whose managers never end its body early


def set(node: gast.AST, key: Key,  # noqa: A001 - mirrors getattr/setattr naming
        value: object) -> None:
    annotations = getattr(node, '_janus_anno', None)
    if annotations is None:
        annotations = {}
        node._janus_anno = annotations
    annotations[key] = value


def get(node: gast.AST, key: Key, default: typing.Any = None) -> typing.Any:
    return getattr(node, '_janus_anno', {}).get(key, default)
