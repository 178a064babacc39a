"""Where a converted function's free names live: its module and its closure.

Needs nothing run before it.  Converted code reads every free name through
``operators.load(ns, name)`` with the ``FunctionNamespace`` it was bound to,
so the runtime knows each value's source (a module global or a closure cell).
"""
from __future__ import annotations

import builtins
import types

from janus import sources


class FunctionNamespace:
    """Globals, builtins and closure cells of one function.

    ``root``: for a function that is itself an argument (a new lambda every
    step), the Source it was passed as; its cells are then read through that
    source, so the next call's lambda is read, not this one's.
    """

    def __init__(self, fn: types.FunctionType, root: sources.Source | None = None) -> None:
        self.fn = fn
        self.globals = fn.__globals__
        builtins_ns = self.globals.get('__builtins__', builtins)
        self.builtins = builtins_ns if isinstance(builtins_ns, dict) else vars(builtins_ns)
        self.cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        self.cell_sources = {}
        if root is not None:
            closure = sources.AttrSource(root, '__closure__')
            for index, name in enumerate(fn.__code__.co_freevars):
                self.cell_sources[name] = sources.AttrSource(sources.ItemSource(closure, index),
                                                             'cell_contents')
