"""Runs your own Keras layers with a different ``call``: converted or instrumented.

Needs nothing run before it.  Keras's ``Layer.__call__`` (building, the
``training`` flag, masks, autocasting) dispatches to ``self.call``; setting
an instance attribute ``call`` for the duration of one call makes it
dispatch to janus's version of the user's method, and the class is left as
it was.  Used by the profiler (instrumented copy) and the tracer (converted).
``refuse_lazy_build`` keeps a trace from building a Keras optimizer.
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


# Methods of a Keras optimizer that build it (create its slot variables) when it is not built.
_BUILDING_METHODS = frozenset(('apply_gradients', 'apply', 'minimize', 'build'))


def refuse_lazy_build(callee):
    """Raises ConversionDeferred for a call that would build a Keras optimizer.

    Adam, RMSprop and friends create their slots on their first
    ``apply_gradients``.  A trace refuses to create variables (each run would
    need new ones), and it would refuse half-way, after Keras had marked the
    optimizer built: it would be left without slots.  So that call runs
    imperatively (eagerly building it, as eager code does) and a later call
    converts.
    """
    owner = getattr(callee, '__self__', None)
    if (owner is None or getattr(callee, '__name__', None) not in _BUILDING_METHODS
            or not whitelist.is_library_object(owner)
            or not callable(getattr(type(owner), 'apply_gradients', None))):
        return
    if getattr(owner, 'built', True) is False:
        from janus.errors import ConversionDeferred
        raise ConversionDeferred('%s is not built yet: its first %s() creates its variables, '
                                 'so this call runs imperatively and a later one converts'
                                 % (type(owner).__name__, callee.__name__))


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
