"""Runs your own Keras layers with a different ``call``: converted or instrumented.

Needs nothing run before it.  Keras's ``Layer.__call__`` (building, the
``training`` flag, masks, autocasting) dispatches to ``self.call``; while
some thread runs the layer with janus's version of the user's method, the
layer has an instance attribute ``call`` that dispatches *per thread*: the
thread that asked (``calling``) gets janus's version, every other thread the
layer's own ``call``, so a model being traced is never seen in its
converted form by another thread (serving or evaluating it meanwhile).  The
class is left as it was.  Used by the profiler (probed twin) and the
tracer (converted).  ``refuse_lazy_build`` keeps a trace from building a
Keras optimizer, ``refuse_first_call_in_region`` from building a layer in a
branch that may not run.
"""
from __future__ import annotations

import contextlib
import inspect
import threading
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import tensorflow as tf

from janus.errors import ConversionDeferred, Unsupported
from janus.reasons import Reason
from janus.library import whitelist


def user_call(layer: object) -> types.FunctionType | None:
    """The layer's own ``call`` function, if the user wrote it (else None)."""
    if whitelist.is_library_object(layer) or not hasattr(layer, 'built'):
        return None
    call = getattr(type(layer), 'call', None)
    if isinstance(call, types.FunctionType) and not whitelist.is_library(call):
        return call
    return None


# Methods of a Keras optimizer that build it (create its slot variables) when it is not built.
_BUILDING_METHODS = frozenset(('apply_gradients', 'apply', 'minimize', 'build'))


def refuse_lazy_build(callee: Callable[..., Any]) -> None:
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
        raise ConversionDeferred(Reason.LAYER_NOT_BUILT,
                                 '%s is not built yet: its first %s() creates its variables, '
                                 'so this call runs imperatively and a later one converts'
                                 % (type(owner).__name__, callee.__name__))


def refuse_first_call_in_region(layer: object, region_depth: int) -> None:
    """Refuses a Keras layer's first call inside a tf.cond branch or tf.while_loop
    body (``region_depth`` > 0).  Keras builds a layer on its first call and marks it
    built; a trace runs every branch, so the mark would stay even on calls where the
    branch does not run, where eagerly the layer stays unbuilt (its weights, if it
    has any, could not be made there either).  The refusal lets the site's outcome
    be assumed instead: a call that takes the branch runs imperatively and builds
    the layer as eager code does."""
    if (region_depth and getattr(layer, 'built', True) is False
            and callable(getattr(type(layer), 'call', None))):
        raise Unsupported(Reason.LAYER_FIRST_CALLED_IN_BRANCH,
                          '%s is not built yet and its first call is inside a '
                          'tensor-dependent branch or loop: Keras would mark it built even '
                          'on calls that do not run it' % type(layer).__name__)


@contextlib.contextmanager
def calling(layer: object, replacement: Callable[..., Any]) -> Iterator[None]:
    """Within the block, ``layer(...)`` in this thread runs ``replacement`` as its
    ``call``; in other threads it runs the layer's own."""
    stack = _replacements().setdefault(id(layer), [])
    _Dispatch.enter(layer)
    stack.append(replacement)
    try:
        yield
    finally:
        stack.pop()
        if not stack:
            del _replacements()[id(layer)]
        _Dispatch.exit(layer)


_local = threading.local()


def _replacements() -> dict[int, list[Callable[..., Any]]]:
    """This thread's replaced calls: id(layer) -> stack of replacements."""
    if not hasattr(_local, 'replacements'):
        _local.replacements = {}
    return _local.replacements


class _Dispatch:
    """The instance ``call`` of a layer some thread runs with a replacement.

    Installed when the first thread enters ``calling`` for the layer, removed
    (the layer's own instance ``call``, if it had one, put back) when the last
    one leaves.
    """

    _lock = threading.Lock()
    _installed: dict[int, _Dispatch] = {}   # id(layer) -> _Dispatch

    def __init__(self, layer: object) -> None:
        self.had_own = 'call' in vars(layer)
        self.saved = vars(layer).get('call')
        self.users = 0

    @classmethod
    def enter(cls, layer: object) -> None:
        with cls._lock:
            dispatch = cls._installed.get(id(layer))
            if dispatch is None:
                dispatch = cls._installed[id(layer)] = cls(layer)
                object.__setattr__(layer, 'call', dispatch.function(layer))
            dispatch.users += 1

    @classmethod
    def exit(cls, layer: object) -> None:
        with cls._lock:
            dispatch = cls._installed[id(layer)]
            dispatch.users -= 1
            if dispatch.users == 0:
                del cls._installed[id(layer)]
                if dispatch.had_own:
                    object.__setattr__(layer, 'call', dispatch.saved)
                else:
                    object.__delattr__(layer, 'call')

    def function(self, layer: object) -> Callable[..., Any]:
        """The dispatching function (it holds the layer only while installed)."""
        key = id(layer)

        def call(*args: Any, **kwargs: Any) -> Any:
            stack = _replacements().get(key)
            if stack:
                return stack[-1](*args, **kwargs)
            return self.own_call(layer)(*args, **kwargs)
        # Keras reads ``inspect.signature(layer.call)`` (its error messages list the
        # arguments by name): the layer's own, not the dispatcher's (*args, **kwargs).
        try:
            call.__signature__ = inspect.signature(  # type: ignore[attr-defined]
                self.own_call(layer))
        except (TypeError, ValueError, AttributeError):
            pass
        return call

    def own_call(self, layer: object) -> Any:
        """What ``layer.call`` is without janus: its instance attribute or its class's."""
        if self.had_own:
            return self.saved
        for klass in type(layer).__mro__:
            if 'call' in vars(klass):
                attribute = vars(klass)['call']
                get = getattr(type(attribute), '__get__', None)
                return get(attribute, layer, type(layer)) if get is not None else attribute
        raise AttributeError('%r object has no attribute \'call\'' % type(layer).__name__)


def relaxed_where_spec_fixes(layer: object, args: Sequence[Any],
                             kwargs: Mapping[str, Any]) -> str | None:
    """Describes the first input size ``layer``'s input spec fixes (Dense's last axis)
    that a graph with relaxed shapes knows only as None, else None.

    Keras checks a layer's inputs against its spec in Python and passes an unknown
    size: the graph would then fail at its MatMul with TF's error where eager raises
    Keras's ValueError.  The caller traces again with the call's exact shapes."""
    if not isinstance(layer, tf.keras.layers.Layer):
        return None
    spec = layer.input_spec
    if spec is None and isinstance(layer, tf.keras.Sequential) and layer.layers:
        return relaxed_where_spec_fixes(layer.layers[0], args, kwargs)   # Keras 3: no spec
    if not spec or not layer.built:
        return None
    inputs = args[0] if args else kwargs.get('inputs')
    specs, tensors = tf.nest.flatten(spec), tf.nest.flatten(inputs)
    if len(specs) != len(tensors):
        return None   # Keras raises its own error for that, at trace time too
    for spec, tensor in zip(specs, tensors):
        shape = getattr(tensor, 'shape', None)
        if spec is None or not isinstance(shape, tf.TensorShape) or shape.rank is None:
            continue
        fixed = dict(getattr(spec, 'axes', None) or {})
        fixed.update((axis, size) for axis, size in enumerate(getattr(spec, 'shape', None) or ())
                     if size is not None)
        for axis, size in fixed.items():
            if size is not None and -shape.rank <= axis < shape.rank and shape[axis] is None:
                return ('%s checks that axis %d of its input is %d, a size the graph with '
                        'relaxed shapes knows only at run time' % (layer.name, axis, size))
    return None
