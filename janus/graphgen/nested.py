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
(``library/layers.calling``):

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

* **closures and callbacks.**  A ``def`` inside the cut function (a closure made anew
  by each call) is routed by where it was written, through one janus function per
  ``def`` whose cells are loaded from the closure at hand before each call; library
  code the statement calls (``strategy.run(step_fn, args=...)`` of a strategy that
  calls it right there, eagerly) is handed routed functions among its arguments as
  their janus functions.  A closure rebinding its cells (``nonlocal``) is not routed;
  nor is a function ``tf.map_fn`` and the like trace into graphs of their own.  Run
  eagerly, ``tf.map_fn`` runs its body converted by AutoGraph, whose builtins mean
  other things than Python's (``float()`` of a tensor is a cast, ``print`` of one is
  ``tf.print``, an exception's message lists your frames): a janus function would
  run it with Python's meaning, so the statement runs it as eager does.
"""
from __future__ import annotations

import contextlib
import dataclasses
import dis
import sysconfig
import threading
import types
import typing
import weakref
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from janus.library import layers

if TYPE_CHECKING:
    from janus.graphgen.generator import Converted

_SEARCH_DEPTH = 64   # frames of a failed trace looked at (a trace's stack is shallow)


@dataclasses.dataclass(frozen=True)
class Route:
    """The user code a break's refusal was in: a layer's ``call`` and the layers that
    run it, or (``layers`` empty) a plain function or method of the user's, or a
    function the cut function defines (a closure, made anew by each call)."""
    code: typing.Any              # the user callee's code object
    name: str                     # ``Block.call``, ``compute_loss``, for explain
    layers: tuple                 # weakrefs of the layers running it (none: a function)
    line: typing.Optional[int] = None   # the refused line inside it (explain)

    @property
    def key(self) -> tuple[str, int, str]:
        return code_key(self.code)

    def live_layers(self) -> list[Any]:
        return [layer for layer in (ref() for ref in self.layers) if layer is not None]


def code_key(code: types.CodeType) -> tuple[str, int, str]:
    """Where a function's code was written: the same for the code janus converted, the
    skeleton's compilation and the user's own (one ``def``, compiled three ways)."""
    return code.co_filename, code.co_firstlineno, code.co_name


def find_route(tb: types.TracebackType | None, own_codes: Container[types.CodeType],
               function_codes: Container[types.CodeType],
               converted: Mapping[types.CodeType, Converted]) -> Route | None:
    """The ``Route`` of a refusal whose traceback is ``tb``: the first user code below
    the function's own statements' frames (``own_codes``), not the function itself
    (``function_codes``: every code object of its conversion, its lambdas and nested
    defs too), that the trace converted (``converted``: original code -> converted
    function).  None when there is none."""
    frames: list[tuple[types.FrameType, int]] = []
    while tb is not None and len(frames) < _SEARCH_DEPTH:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    own = [i for i, (frame, _) in enumerate(frames) if frame.f_code in own_codes]
    if not own:
        return None
    outer_self = frames[own[0]][0].f_locals.get('self')
    originals: dict[types.CodeType, tuple[types.CodeType, Converted]] = {}
    for code, made in list(converted.items()):
        for inner in _codes_of(made):
            originals.setdefault(inner, (code, made))
    first = True   # the first converted callee: the statement calls it itself
    for frame, _ in frames[own[-1] + 1:]:
        if _library_in_between(frame):
            first = False   # ``tf.map_fn(body, ...)``: the library traces it (no route)
        if frame.f_code in function_codes:
            if first and frame.f_code.co_name != '<lambda>' and _closure_routable(frame.f_code):
                # ``def step_fn(...)`` in the function, called by the statement or
                # handed to library code that calls it (``strategy.run(step_fn)``)
                return Route(frame.f_code, _users_qualname(frame.f_code), (),
                             _innermost_line(frames, None, frame.f_code))
            first = False
            continue
        if frame.f_code not in originals:
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


def _library_in_between(frame: types.FrameType) -> bool:
    """A TF or Keras frame between the statement and the callee other than a
    strategy's ``run`` (which calls it right there): the callee is not called by the
    statement itself, nor handed on by ``_handing_on``."""
    module = frame.f_globals.get('__name__', '') or ''
    return (module.split('.')[0] in ('tensorflow', 'keras')
            and not module.startswith('tensorflow.python.distribute')
            and not module.startswith(('tensorflow.python.util', 'keras.src.utils',
                                       'tensorflow.python.autograph.impl')))


def _users_file(filename: str) -> bool:
    """Whether ``filename`` is code of yours: not the standard library's, nor an
    installed package's (janus converts those as it meets them, but routes only yours)."""
    return not filename.startswith(_NOT_YOURS)


def _codes_of(converted: Converted) -> set[types.CodeType]:
    return set(converted.code_objects) | {converted.py_fn.__code__}


def _innermost_line(frames: Sequence[tuple[types.FrameType, int]], converted: Converted | None,
                    code: types.CodeType | None = None) -> int | None:
    codes = _codes_of(converted) if converted is not None else {code}
    lines = [lineno for frame, lineno in frames if frame.f_code in codes]
    return lines[-1] if lines else None


def _nested_code(code: types.CodeType | None, key: tuple[str, int, str],
                 depth: int = 0) -> types.CodeType | None:
    """The code of the ``def`` written at ``key`` among ``code``'s nested code."""
    if code is None or depth > 8:
        return None
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if code_key(const) == key:
                return const
            found = _nested_code(const, key, depth + 1)
            if found is not None:
                return found
    return None


def _users_qualname(code: types.CodeType) -> str:
    """``Trainer.train_step.<locals>.step_fn``, not the converted code's own
    (``__janus_factory.<locals>.`` before it)."""
    return code.co_qualname.rsplit('__janus_factory.<locals>.', 1)[-1]


def _closure_routable(code: types.CodeType) -> bool:
    """Whether a function the cut function defines can run through one janus function
    for every closure made of it: it rebinds none of its free variables (``nonlocal``),
    so its cells are only read, and copying them in before each call is its meaning."""
    return not any(ins.opname in ('STORE_DEREF', 'DELETE_DEREF')
                   and ins.argval in code.co_freevars for ins in dis.get_instructions(code))


def _layers_under(obj: Any) -> list[Any]:
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


def _is_layer(value: object) -> bool:
    return hasattr(value, '_flatten_layers') and hasattr(value, 'built')


class Routes:
    """A cut function's routes and the janus function of each layer and function on
    them (one owner: ``FunctionState.routes``).  ``make(callable)`` makes a janus
    function."""

    def __init__(self) -> None:
        self.by_line: dict[int, Route] = {}   # break line -> Route
        # id(layer) -> (weakref of the layer, janus function)
        self._functions: dict[int, tuple[weakref.ref, Any]] = {}
        # (id(function), id(instance)) -> (weakrefs of both or None, janus function)
        self._callees: dict[tuple[Any, ...], tuple[tuple[weakref.ref, ...], Any]] = {}

    def add(self, line: int, route: Route) -> bool:
        """Records ``route`` for the break at ``line``; True when it is new."""
        if line in self.by_line:
            return False
        self.by_line[line] = route
        return True

    @contextlib.contextmanager
    def entered(self, make: Callable[[Callable[..., Any]], Any], owner: object) -> Iterator[None]:
        """Within the block, each routed layer's ``call`` runs through its janus
        function (``layers.calling``: this thread only), and so does each routed
        function the skeleton calls (``routed``).  ``owner``: the cut function (the
        user's own), whose code holds the closures it defines."""
        codes = {route.key for route in self.by_line.values() if not route.layers}
        with contextlib.ExitStack() as stack:
            for route in self.by_line.values():
                for layer in route.live_layers():
                    stack.enter_context(layers.calling(layer, self._function(layer, make)))
            if codes:
                stack.enter_context(_routing(codes, lambda fn: self._callee(fn, make, owner)))
            yield

    def functions(self) -> list[tuple[Any, Any]]:
        """(layer or function, janus function) routed so far, still alive."""
        found = [(ref(), jf) for ref, jf in self._functions.values() if ref() is not None]
        for refs, jf in self._callees.values():
            if not refs:
                found.append((jf.fn, jf))   # a closure's proxy
            elif all(ref() is not None for ref in refs):
                found.append((refs[0](), jf))
        return found

    def _callee(self, fn: Any, make: Callable[[Callable[..., Any]], Any],
                owner: object) -> Callable[..., Any]:
        """The janus function of a routed function or bound method (one per function
        object, and per instance for a method; one per ``def`` for closures)."""
        if type(fn) is types.FunctionType and (fn.__closure__ or '<locals>' in fn.__qualname__):
            found = self._closure(fn, make, owner)   # a def the cut function runs each call
            if found is not None:
                return found
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

    def _closure(self, fn: types.FunctionType, make: Callable[[Callable[..., Any]], Any],
                 owner: object) -> Any:
        """A closure made anew by each call of the cut function: one janus function runs
        a proxy of it (the user's own code of that ``def``, found in ``owner``'s, its
        globals and defaults, cells of its own), whose cells are loaded with this
        closure's contents, by name, before each call (guarded there as any cell is).
        None when the ``def`` is not the cut function's (one made once elsewhere)."""
        # per thread: two threads running the cut function load cells of their own
        key = ('closure', threading.get_ident()) + code_key(fn.__code__)
        found = self._callees.get(key)
        if found is None:
            code = _nested_code(getattr(owner, '__code__', None), code_key(fn.__code__))
            if code is None or set(code.co_freevars) - set(fn.__code__.co_freevars):
                return None
            proxy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                                       tuple(types.CellType() for _ in code.co_freevars))
            proxy.__kwdefaults__, proxy.__qualname__ = fn.__kwdefaults__, fn.__qualname__
            proxy.__module__ = fn.__module__
            found = self._callees[key] = ((), make(proxy))
        proxy = found[1].fn
        proxy.__defaults__, proxy.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
        theirs = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        for name, mine in zip(proxy.__code__.co_freevars, proxy.__closure__):
            try:
                mine.cell_contents = theirs[name].cell_contents
            except ValueError:   # unbound when the closure was made
                try:
                    del mine.cell_contents
                except ValueError:
                    pass
        return found[1]

    def _function(self, layer: object, make: Callable[[Callable[..., Any]], Any]) -> Any:
        found = self._functions.get(id(layer))
        if found is None or found[0]() is not layer:
            call = layers.user_call(layer)   # a routed layer's is the user's
            method = call.__get__(layer, type(layer))  # type: ignore[union-attr]
            found = self._functions[id(layer)] = (weakref.ref(layer), make(method))
        return found[1]


# -- calls the skeleton's Python statements make ------------------------------------

_local = threading.local()


@contextlib.contextmanager
def _routing(codes: Container[tuple[str, int, str]],
             janus_of: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    """Within the block, ``routed`` in this thread hands a callee whose code is in
    ``codes`` to ``janus_of`` (the innermost cut function's routes win)."""
    stack = _local.__dict__.setdefault('stack', [])
    stack.append((codes, janus_of))
    try:
        yield
    finally:
        stack.pop()


def _key_of(fn: object) -> tuple[str, int, str] | None:
    code = getattr(fn, '__code__', None) if type(fn) is types.FunctionType else (
        getattr(fn.__func__, '__code__', None) if type(fn) is types.MethodType else None)
    return code_key(code) if code is not None else None


def routed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """What a skeleton's Python statement calls for ``fn`` (``segments.py`` rewrites
    ``f(...)`` to ``__jr.routed(f)(...)``): the janus function of a routed user
    function or method while its cut function runs; for library code, ``fn`` handing
    routed functions among its arguments on as their janus functions
    (``strategy.run(step_fn, args=...)``); else ``fn`` itself."""
    stack = _local.__dict__.get('stack')
    if not stack:
        return fn
    codes, janus_of = stack[-1]
    key = _key_of(fn)
    if key is not None and key in codes:
        return janus_of(fn)
    if _calls_back_eagerly(fn):
        return _handing_on(fn, codes, janus_of)
    return fn


def _calls_back_eagerly(fn: object) -> bool:
    """Library code that calls a function it is handed as it is, eagerly, in this
    thread: a distribution strategy's ``run`` (the default and one-device strategies
    call it right there).  Not ``tf.map_fn`` and the like, which convert it with
    AutoGraph and trace it into a graph of their own."""
    owner = getattr(fn, '__self__', None)
    return (type(fn) is types.MethodType and fn.__name__ == 'run'
            and isinstance(owner, tf.distribute.Strategy)
            and type(owner).__name__ in _EAGER_STRATEGIES)


# Strategies whose ``run`` calls the function in this thread, eagerly.
_EAGER_STRATEGIES = ('_DefaultDistributionStrategy', 'OneDeviceStrategy', 'OneDeviceStrategyV1')


def _handing_on(fn: Callable[..., Any], codes: Container[tuple[str, int, str] | None],
                janus_of: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Callable[..., Any]:
    """``fn`` called with the routed functions among its arguments replaced by their
    janus functions (library code calling them back runs them through janus; inside a
    graph of its own, a janus function traces through)."""
    def call(*args: Any, **kwargs: Any) -> Any:
        args = [janus_of(a) if _key_of(a) in codes else a  # type: ignore[assignment]
                for a in args]
        kwargs = {k: janus_of(v) if _key_of(v) in codes else v for k, v in kwargs.items()}
        return fn(*args, **kwargs)
    return call
