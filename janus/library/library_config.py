"""Guards the configuration of the Keras layers a graph uses, O(1) per call.

Needs Keras to be imported by the program (else there is nothing to guard).
Library objects are captured by identity, but what a Keras layer computes
also depends on Python settings changed between calls: ``bn.trainable =
False`` switches batch normalization to inference mode, ``dropout.rate =
0.0`` turns dropout off.  A graph traced before such a change would silently
keep the old behaviour.

So janus wraps ``keras.layers.Layer``'s ``trainable`` setter and its
``__setattr__`` (public attributes set to or from a Python constant, only
when the value changes): either bumps a process-wide ``version``.  A graph
that used Keras layers carries one ``LIBRARY_CONFIG`` guard holding the
version and a fingerprint
(``trainable`` and every public Python-constant or function attribute, such
as ``activation``, of each layer it reached, sublayers included).  Per call the guard compares one integer; only
after some layer anywhere changed does it recompute the fingerprint, and a
graph whose own layers are configured as when it was traced (a GAN toggling
``trainable`` back and forth) is used again.
"""
from __future__ import annotations

import dis
import functools
import sys
import threading
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from janus import guards, sources
from janus.library import whitelist

version = 0
_VERSION = sources.CounterSource(sys.modules[__name__], 'version', 'keras layer settings version')
_lock = threading.Lock()
_installed = False


def _bump() -> None:
    global version
    version += 1


def _wrap_setter(layer_class: type[Any]) -> None:
    prop = layer_class.__dict__['trainable']

    def set_trainable(self, value: bool) -> None:
        prop.fset(self, value)
        _bump()
    layer_class.trainable = property(prop.fget, set_trainable, prop.fdel, prop.__doc__)


def _is_setting(value: object) -> bool:
    """Python constants and functions (``layer.activation = tanh``) are settings the
    fingerprint covers; tensors written back by janus's shadow heap are not."""
    return type(value) in guards.PRIMITIVES or isinstance(
        value, (types.FunctionType, types.BuiltinFunctionType, functools.partial))


def _janus_own(value: object) -> bool:
    """janus's own function on a layer (``layers.calling``'s per-thread ``call``
    dispatch, made anew each time a cut function routes the layer): not a setting."""
    return isinstance(value, types.FunctionType) and whitelist.is_janus_runtime(value)


def _same_setting(old: object, new: object) -> bool:
    if type(old) in guards.PRIMITIVES:
        return guards.same_constant(old, new)
    return old is new


def _wrap_setattr(layer_class: Any) -> None:
    original = layer_class.__setattr__
    missing = object()

    def __setattr__(self, name: str, value: object) -> None:
        if not name.startswith('_') and (_is_setting(value)
                                         or _is_setting(self.__dict__.get(name))):
            old = self.__dict__.get(name, missing)
            if old is missing or not _same_setting(old, value):
                _bump()
        original(self, name, value)
    layer_class.__setattr__ = __setattr__


def install() -> None:
    """Wraps Keras's Layer once, if the program imported Keras; idempotent."""
    global _installed
    if _installed or 'keras' not in sys.modules:
        return
    with _lock:
        if _installed:
            return
        from keras import layers
        _wrap_setter(layers.Layer)
        _wrap_setattr(layers.Layer)
        _installed = True


def _layer_class() -> type[Any] | None:
    keras = sys.modules.get('keras')
    return getattr(getattr(keras, 'layers', None), 'Layer', None) if keras else None


def _fingerprint(layers: Sequence[Any], handled: Sequence[frozenset[str]]
                 ) -> tuple[tuple[bool, tuple[tuple[str, type, object], ...]], ...]:
    """What of each layer's configuration a graph depends on (its identity is
    guarded elsewhere): ``trainable``, its public Python constants and functions.  Your
    subclasses' too: Keras code may read them behind janus's own guards.  Left out:
    the attributes the traced code itself read or wrote through janus (``self.step``
    of a Keras model), which janus's own guards and writes already cover."""
    prints = []
    for layer, skip in zip(layers, handled):
        settings = tuple((k, type(v), v)   # functions compare by identity
                         for k, v in vars(layer).items()
                         if not k.startswith('_') and k not in skip and _is_setting(v)
                         and not _janus_own(v))
        prints.append((layer.trainable, settings))
    return tuple(prints)


class Snapshot:
    """The version and the used layers' fingerprint a graph was traced under."""

    def __init__(self, layers: list[Any], handled: list[frozenset[str]]) -> None:
        self.layers = layers
        self.handled = handled   # per layer: attribute names janus guards or writes itself
        self.version = version
        self.fingerprint = _fingerprint(layers, handled)

    def holds(self, current_version: int) -> bool:
        if current_version == self.version:
            return True
        if _fingerprint(self.layers, self.handled) != self.fingerprint:
            return False
        self.version = current_version   # a change elsewhere: this graph still fits
        return True

    def __repr__(self) -> str:
        return 'settings of %d layers as at version %d' % (len(self.layers), self.version)




@functools.lru_cache(maxsize=None)
def _user_managed(kind: type) -> frozenset[str]:
    """Attribute names your own methods of ``kind`` assign (``self.calls += 1`` in a
    model's ``call``, ``self.log_every = n`` in its ``__init__``), less those Keras's own
    classes define: your code reads them through janus, which guards what it reads;
    Keras code never looks them up, so they are not settings a graph silently keeps
    (a counter bumped every call would otherwise miss every graph of the layer's)."""
    library = [klass for klass in kind.__mro__ if whitelist.is_library(klass)]
    names = set()
    for klass in kind.__mro__:
        if whitelist.is_library(klass) or klass is object:
            continue
        for value in vars(klass).values():
            code = getattr(getattr(value, '__func__', value), '__code__', None)
            if code is not None:
                names |= _stored_attributes(code)
    return frozenset(n for n in names if not any(hasattr(k, n) for k in library))


def _stored_attributes(code: types.CodeType) -> set[str]:
    """Names of the attributes ``code`` (and code nested in it) assigns."""
    found = {ins.argval for ins in dis.get_instructions(code) if ins.opname == 'STORE_ATTR'}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _stored_attributes(const)
    return found


def guard_for(objects: Iterable[object],
              handled: Mapping[int, Iterable[str]] | None = None) -> guards.SourceGuard | None:
    """A LIBRARY_CONFIG guard over the Keras layers among ``objects`` (and their
    sublayers), or None when there are none.  ``handled``: id(object) -> names of the
    attributes the trace read or wrote through janus (left out of the fingerprint)."""
    handled = handled or {}
    layer_class = _layer_class()
    if layer_class is None:
        return None
    layers, seen = [], set()
    for obj in objects:
        if isinstance(obj, layer_class):
            for layer in obj._flatten_layers(include_self=True, recursive=True):
                if id(layer) not in seen:
                    seen.add(id(layer))
                    layers.append(layer)
    if not layers:
        return None
    skips = [frozenset(handled.get(id(layer), ()))
             | _user_managed(type(layer))  # type: ignore[arg-type]  # a class is hashable
             for layer in layers]
    return guards.SourceGuard(guards.GuardKind.LIBRARY_CONFIG, _VERSION,
                              Snapshot(layers, skips))
