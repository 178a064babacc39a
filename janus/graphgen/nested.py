"""Breaks nest into Keras layers: the user ``call`` a refusal happened in runs through
janus of its own while the statement calling it runs in Python.

Needs a failed trace's traceback (``find_route``, from ``tracer._locate``) and, when
a cut function runs, ``api.JanusFunction`` (``Routes``, handed a factory: no import
cycle).

A trace refused inside a callee breaks at the statement of the function that calls
it (``ConversionError.statement_line``): ``logits = self.model(x)`` runs in Python,
and with it the whole forward pass, eagerly, for one line janus refused deep inside
a layer's ``call()``.  Dynamo compiles every frame on its own, so a break splits only
the frame it is in; AutoGraph converts callees through ``converted_call``.  janus
does the former for Keras layers, the callee janus already runs through a hook
(``runtime/layers.calling``):

* **found at the failure.**  ``find_route`` walks the failed trace's frames below the
  statement to the first user code the trace converted.  When that is the user
  ``call`` of a Keras layer (``self`` of that frame), the break gets a ``Route``: the
  code of that ``call``, and the layers running it, that one and every layer with
  the same ``call`` reachable from the function's own ``self`` (the blocks of a
  model, called in a loop by one statement).
* **run through janus.**  While the cut function's skeleton runs, each layer of its
  routes runs its ``call`` through a janus function of its own (``Routes``: one
  per layer, made at the first run, kept with the function's state): profiled,
  traced, guarded, cut at the refused line in turn (recursively, a route of its
  own where the refusal is deeper).  Keras's ``__call__`` around it runs as
  eagerly; a tape the skeleton opened records the janus function's graphs, and
  ``tape.gradient`` runs their gradient functions.
* **the same meaning.**  A janus function runs the layer's own ``call`` with its
  arguments (a plain call where janus runs plainly), so what the statement does
  is what eager does; the hook is per thread and leaves with the skeleton call.

Routes only Keras layers' user ``call``: a plain function or method of the user's
called by the statement still runs in Python whole (``explain`` says so).
"""
import contextlib
import dataclasses
import typing
import weakref

from janus.runtime import layers

_SEARCH_DEPTH = 64   # frames of a failed trace looked at (a trace's stack is shallow)


@dataclasses.dataclass(frozen=True)
class Route:
    """The user ``call`` a break's refusal was in, and the layers that run it."""
    code: typing.Any              # the user call's code object
    name: str                     # ``Block.call``, for explain
    layers: tuple                 # weakrefs of the layers running it
    line: typing.Optional[int] = None   # the refused line inside it (explain)

    def live_layers(self):
        return [layer for layer in (ref() for ref in self.layers) if layer is not None]


def find_route(tb, own_codes, function_codes, converted_of):
    """The ``Route`` of a refusal whose traceback is ``tb``: the first user code below
    the function's own statements' frames (``own_codes``) is a Keras layer's user
    ``call`` (``converted_of(code)``: the converted function of an original code
    object, or None), not the function itself (``function_codes``: every code object
    of its conversion, its lambdas and nested defs too).  None when it is not."""
    frames = []
    while tb is not None and len(frames) < _SEARCH_DEPTH:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    own = [i for i, (frame, _) in enumerate(frames) if frame.f_code in own_codes]
    if not own:
        return None
    outer_self = frames[own[0]][0].f_locals.get('self')
    for frame, _ in frames[own[-1] + 1:]:
        if frame.f_code in function_codes:
            continue
        layer = frame.f_locals.get('self')
        call = layers.user_call(layer) if layer is not None else None
        converted = converted_of(call.__code__) if call is not None else None
        if converted is None or frame.f_code not in _codes_of(converted):
            continue
        running = [layer] + [other for other in _layers_under(outer_self)
                             if other is not layer and layers.user_call(other) is call]
        return Route(call.__code__, call.__qualname__, tuple(weakref.ref(x) for x in running),
                     _innermost_line(frames, converted))
    return None


def _codes_of(converted):
    return set(converted.code_objects) | {converted.py_fn.__code__}


def _innermost_line(frames, converted):
    codes = _codes_of(converted)
    lines = [lineno for frame, lineno in frames if frame.f_code in codes]
    return lines[-1] if lines else None


def _layers_under(obj):
    """Keras layers reachable from ``obj``: its own sublayers if it is a layer, else
    those of the layers among its attributes."""
    found = []
    roots = [obj] if _is_layer(obj) else [v for v in getattr(obj, '__dict__', {}).values()
                                          if _is_layer(v)]
    for root in roots:
        try:
            found += list(root._flatten_layers(include_self=True))
        except Exception:  # noqa: BLE001 - a layer Keras cannot walk: only the one found
            continue
    return found


def _is_layer(value):
    return hasattr(value, '_flatten_layers') and hasattr(value, 'built')


class Routes:
    """A cut function's routes and the janus function of each layer on them (one
    owner: ``FunctionState.routes``).  ``make(bound_call)`` makes a janus function."""

    def __init__(self):
        self.by_line = {}        # break line -> Route
        self._functions = {}     # id(layer) -> (weakref of the layer, janus function)

    def add(self, line, route):
        """Records ``route`` for the break at ``line``; True when it is new."""
        if line in self.by_line:
            return False
        self.by_line[line] = route
        return True

    @contextlib.contextmanager
    def entered(self, make):
        """Within the block, each routed layer's ``call`` runs through its janus
        function (``layers.calling``: this thread only)."""
        with contextlib.ExitStack() as stack:
            for route in self.by_line.values():
                for layer in route.live_layers():
                    stack.enter_context(layers.calling(layer, self._function(layer, make)))
            yield

    def functions(self):
        """(layer, janus function) of the layers routed so far, still alive."""
        return [(ref(), jf) for ref, jf in self._functions.values() if ref() is not None]

    def _function(self, layer, make):
        found = self._functions.get(id(layer))
        if found is None or found[0]() is not layer:
            call = layers.user_call(layer)
            found = self._functions[id(layer)] = (weakref.ref(layer),
                                                  make(call.__get__(layer, type(layer))))
        return found[1]
