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

* **plain functions and methods too.**  When the first user code below the statement
  is a function or method of the user's (``loss = compute_loss(model, x, y)``,
  ``self.forward(x)``), not a layer's ``call``, the route names its code and no
  layers.  The skeleton's Python statements call through ``routed`` (``segments.py``
  rewrites ``f(...)`` there to ``__jr.routed(f)(...)``): while the cut function
  runs, a callee whose code is a route's runs through a janus function of its own,
  one per function object (per instance for a bound method), kept with the
  function's state; any other callee is called as it is.

A closure made anew by each call (a ``def`` inside the statement's function) is not
routed: a janus function per closure object would never get past its profile.
"""
import contextlib
import dataclasses
import sysconfig
import threading
import types
import typing
import weakref

from janus.runtime import layers

_SEARCH_DEPTH = 64   # frames of a failed trace looked at (a trace's stack is shallow)


@dataclasses.dataclass(frozen=True)
class Route:
    """The user code a break's refusal was in: a layer's ``call`` and the layers that
    run it, or (``layers`` empty) a plain function or method of the user's."""
    code: typing.Any              # the user callee's code object
    name: str                     # ``Block.call``, ``compute_loss``, for explain
    layers: tuple                 # weakrefs of the layers running it (none: a function)
    line: typing.Optional[int] = None   # the refused line inside it (explain)

    def live_layers(self):
        return [layer for layer in (ref() for ref in self.layers) if layer is not None]


def find_route(tb, own_codes, function_codes, converted):
    """The ``Route`` of a refusal whose traceback is ``tb``: the first user code below
    the function's own statements' frames (``own_codes``), not the function itself
    (``function_codes``: every code object of its conversion, its lambdas and nested
    defs too), that the trace converted (``converted``: original code -> converted
    function).  None when there is none."""
    frames = []
    while tb is not None and len(frames) < _SEARCH_DEPTH:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    own = [i for i, (frame, _) in enumerate(frames) if frame.f_code in own_codes]
    if not own:
        return None
    outer_self = frames[own[0]][0].f_locals.get('self')
    originals = {}
    for code, made in list(converted.items()):
        for inner in _codes_of(made):
            originals.setdefault(inner, (code, made))
    first = True   # the first converted callee: the statement calls it itself
    for frame, _ in frames[own[-1] + 1:]:
        if frame.f_code in function_codes or frame.f_code not in originals:
            continue
        code, made = originals[frame.f_code]
        layer = frame.f_locals.get('self')
        call = layers.user_call(layer) if layer is not None else None
        if call is not None and call.__code__ is code:
            running = [layer] + [other for other in _layers_under(outer_self)
                                 if other is not layer and layers.user_call(other) is call]
            return Route(code, call.__qualname__, tuple(weakref.ref(x) for x in running),
                         _innermost_line(frames, made))
        if first and frame.f_code is made.py_fn.__code__ and _users_file(code.co_filename):
            return Route(code, code.co_qualname, (), _innermost_line(frames, made))
        # A def or lambda nested in a callee, or code of the standard library or an
        # installed package (``statistics.mean``): not routed; a layer below may be.
        first = False
    return None


_NOT_YOURS = tuple(path for path in {sysconfig.get_paths()[key] for key in
                                     ('stdlib', 'platstdlib', 'purelib', 'platlib')} if path)


def _users_file(filename):
    """Whether ``filename`` is code of yours: not the standard library's, nor an
    installed package's (janus converts those as it meets them, but routes only yours)."""
    return not filename.startswith(_NOT_YOURS)


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
    """A cut function's routes and the janus function of each layer and function on
    them (one owner: ``FunctionState.routes``).  ``make(callable)`` makes a janus
    function."""

    def __init__(self):
        self.by_line = {}        # break line -> Route
        self._functions = {}     # id(layer) -> (weakref of the layer, janus function)
        # (id(function), id(instance)) -> (weakrefs of both or None, janus function)
        self._callees = {}

    def add(self, line, route):
        """Records ``route`` for the break at ``line``; True when it is new."""
        if line in self.by_line:
            return False
        self.by_line[line] = route
        return True

    @contextlib.contextmanager
    def entered(self, make):
        """Within the block, each routed layer's ``call`` runs through its janus
        function (``layers.calling``: this thread only), and so does each routed
        function the skeleton calls (``routed``)."""
        codes = {route.code for route in self.by_line.values() if not route.layers}
        with contextlib.ExitStack() as stack:
            for route in self.by_line.values():
                for layer in route.live_layers():
                    stack.enter_context(layers.calling(layer, self._function(layer, make)))
            if codes:
                stack.enter_context(_routing(codes, lambda fn: self._callee(fn, make)))
            yield

    def functions(self):
        """(layer or function, janus function) routed so far, still alive."""
        found = [(ref(), jf) for ref, jf in self._functions.values() if ref() is not None]
        for refs, jf in self._callees.values():
            if all(ref() is not None for ref in refs):
                found.append((refs[0](), jf))
        return found

    def _callee(self, fn, make):
        """The janus function of a routed function or bound method (one per function
        object, and per instance for a method)."""
        bound = isinstance(fn, types.MethodType)
        function = fn.__func__ if bound else fn
        owner = fn.__self__ if bound else None
        key = (id(function), id(owner))
        found = self._callees.get(key)
        if found is not None and found[0][0]() is function and (
                owner is None or found[0][1]() is owner):
            return found[1]
        try:
            refs = (weakref.ref(function),) + ((weakref.ref(owner),) if bound else ())
        except TypeError:
            return fn   # an instance without weak references: called as it is
        self._callees[key] = (refs, make(fn))
        return self._callees[key][1]

    def _function(self, layer, make):
        found = self._functions.get(id(layer))
        if found is None or found[0]() is not layer:
            call = layers.user_call(layer)
            found = self._functions[id(layer)] = (weakref.ref(layer),
                                                  make(call.__get__(layer, type(layer))))
        return found[1]


# -- calls the skeleton's Python statements make ------------------------------------

_local = threading.local()


@contextlib.contextmanager
def _routing(codes, janus_of):
    """Within the block, ``routed`` in this thread hands a callee whose code is in
    ``codes`` to ``janus_of`` (the innermost cut function's routes win)."""
    stack = _local.__dict__.setdefault('stack', [])
    stack.append((codes, janus_of))
    try:
        yield
    finally:
        stack.pop()


def routed(fn):
    """What a skeleton's Python statement calls for ``fn`` (``segments.py`` rewrites
    ``f(...)`` to ``__jr.routed(f)(...)``): the janus function of a routed user
    function or method while its cut function runs, else ``fn`` itself."""
    stack = _local.__dict__.get('stack')
    if not stack:
        return fn
    code = getattr(fn, '__code__', None) if type(fn) is types.FunctionType else (
        getattr(fn.__func__, '__code__', None) if type(fn) is types.MethodType else None)
    codes, janus_of = stack[-1]
    if code is None or code not in codes:
        return fn
    return janus_of(fn)
