"""``call_through``: the function janus runs, converted like your own code, for a callable
without Python code of its own to convert (a Keras layer or model, a builtin, a callable
object of C code).  Imports nothing; must stay outside the runtime packages.

It lives apart from ``trace/callables.py`` because the whitelist treats every function of
the runtime packages (``whitelist.JANUS_RUNTIME``) as janus's own helper, called as it
is: ``call_through`` must be inlined as user code is, so that the callable it calls (your
layer) is dispatched by its own kind (``trace/calls.py``).
"""
from __future__ import annotations

import typing


def call_through(callable_: typing.Callable, /, *args: typing.Any,
                 **kwargs: typing.Any) -> typing.Any:
    """The function janus runs for a callable without Python code of its own to convert."""
    return callable_(*args, **kwargs)
