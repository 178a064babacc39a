"""Runs your own Keras layers with a different ``call``: converted or instrumented.

Needs nothing run before it.  Keras's ``Layer.__call__`` (building, the
``training`` flag, masks, autocasting) dispatches to ``self.call``; setting
an instance attribute ``call`` for the duration of one call makes it
dispatch to janus's version of the user's method, and the class is left as
it was.  Used by the profiler (instrumented copy) and the tracer (converted).
"""
import contextlib
import types

from janus.runtime import whitelist


def user_call(layer):
    """The layer's own ``call`` function, if the user wrote it (else None)."""
    if whitelist.is_library_object(layer) or not hasattr(layer, 'built'):
        return None
    call = getattr(type(layer), 'call', None)
    if isinstance(call, types.FunctionType) and not whitelist.is_library(call):
        return call
    return None


@contextlib.contextmanager
def calling(layer, replacement):
    """Within the block, ``layer(...)`` runs ``replacement`` as its ``call``."""
    had_own, saved = 'call' in vars(layer), vars(layer).get('call')
    object.__setattr__(layer, 'call', replacement)
    try:
        yield
    finally:
        if had_own:
            object.__setattr__(layer, 'call', saved)
        else:
            object.__delattr__(layer, 'call')
