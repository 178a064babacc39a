"""Attribute reads and writes that run your own code: properties and ``__getattr__``.

Needs a ``TraceContext`` entered (``trace/tracing.py``); converted code calls
``attr``/``setattr_`` here (``operators.py``), and everything that runs no user
code goes on to ``access.py``.

On an object from outside the call (it has a source), ``obj.name`` runs
what Python would run, converted like a method (``calls.call`` inlines it,
so what it reads of ``self`` is guarded through ``obj``'s source):

* a property of your class: its getter (``obj.name = v``: its setter);
* an attribute Python does not find (not in the object's ``__dict__``, not on
  its class), on a class of yours with ``__getattr__`` (a flags or config
  object): ``__getattr__(obj, name)``.  Guarded: the name is still missing
  from the object's ``__dict__``.  A *pure* lookup (``_is_pure_lookup``: it only
  reads the object's own dicts, lists and constants and the name, branches,
  returns and raises, as ``return self._flags[name]`` in a ``try`` does) runs
  as it is, while the call has written nothing yet, and its result is guarded
  by value like any attribute (the guard runs the lookup again before each
  run: it changes nothing).

Guarded too: the property (or ``__getattr__``) is still the one on the
class, found where the trace found it.  A custom ``__getattribute__`` and
library descriptors keep ``access.py``'s rules.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
import types
from typing import TYPE_CHECKING, Any

from janus import guards
from janus.guards import GuardKind
from janus.library import whitelist
from janus.values.protocol import NOT_MODELLED, StandIn
from janus.trace import access, calls, observe
from janus.heap.shadow_heap import MISSING, Slot
from janus.trace.tracing import current

if TYPE_CHECKING:
    from janus.sources import Source
    from janus.trace.trace_context import TraceContext


def attr(obj: Any, name: str) -> Any:
    found = _user_code(obj, name, writing=False)
    if found is None:
        return access.attr(obj, name)
    function, args = found
    if function is _read_by_lookup:
        return function(*args)
    return calls.call(function, *args)


def attr_is_none(obj: Any, name: str, op: str) -> Any:
    """``obj.name is None`` (``op`` 'Is') or ``is not None`` ('IsNot'): on a node of a
    recursive graph function, its kind tested without reading the value (a number or
    None there needs no check that it is a number); otherwise the read, then the test."""
    if isinstance(obj, StandIn):
        found = obj.trace_attribute_is_none(name)
        if found is not NOT_MODELLED:
            return found if op == 'Is' else observe.not_value(found)
    return observe.compare(op, attr(obj, name), None)


def setattr_(obj: Any, name: str, value: Any) -> None:
    found = _user_code(obj, name, writing=True)
    if found is None:
        return access.setattr_(obj, name, value)
    function, args = found
    calls.call(function, *(args + (value,)))
    return None


def _user_code(obj: Any, name: str,
               writing: bool) -> tuple[Any, tuple[Any, ...]] | None:
    """(function, leading arguments) of the user code ``obj.name`` runs, or None."""
    kind = type(obj)
    if isinstance(obj, type) or kind.__getattribute__ is not object.__getattribute__:
        return None
    ctx = current()
    source = ctx.provenance.source_of(obj)
    if source is None or whitelist.is_library_object(obj):
        return None
    for klass in kind.__mro__:
        if name not in vars(klass):
            continue
        found = vars(klass)[name]   # a class attribute that is None shadows a property too
        if type(found) is not property:
            return None
        function = found.fset if writing else found.fget
        if not _is_user_function(function):
            return None
        _guard_class_entry(ctx, klass, name, found)
        return function, (obj,)
    getattr_hook = _defining(kind, '__getattr__')
    if writing or getattr_hook is None or name in (getattr(obj, '__dict__', None) or {}) \
            or ctx.heap.read(obj, Slot.name(name)) is not MISSING:   # the call set it
        return None
    klass, function = getattr_hook
    if not _is_user_function(function) or getattr(obj, '__dict__', None) is None:
        return None
    ctx.guards.add(GuardKind.CONTAINS_MATCH, guards.AttrSource(source, '__dict__'),
                   (dict, name, False))
    _guard_class_entry(ctx, klass, '__getattr__', function)
    if not ctx.heap.writes and _is_pure_lookup(function, obj):
        # Nothing written yet in the call: the real object is what the lookup would see.
        return _read_by_lookup, (ctx, obj, source, name)
    return function, (obj, name)


def _read_by_lookup(ctx: TraceContext, obj: Any, source: Source, name: str) -> Any:
    """A pure ``__getattr__`` run as it is; its result guarded through its source."""
    return ctx.guard_value(guards.AttrSource(source, name), getattr(obj, name))


# A pure lookup: reads of the object's own builtin containers and of the name, with
# no code of yours or of a library run: the only calls it may make.
_EXCEPTIONS = frozenset(('AttributeError', 'KeyError', 'LookupError', 'ValueError'))
_CONTAINER_READS = frozenset(('get', 'keys', 'values', 'items', '__getitem__', '__contains__'))
_NAME_READS = frozenset(('startswith', 'endswith', 'lower', 'upper', 'isupper', 'islower'))
_BUILTIN_VALUES = (dict, list, tuple, str, int, float, bool, type(None), frozenset)
_STATEMENTS = (ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Return, ast.If,
               ast.Try, ast.ExceptHandler, ast.Raise, ast.Assign, ast.Pass)
_EXPRESSIONS = (ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.Compare, ast.BoolOp,
                ast.UnaryOp, ast.IfExp, ast.Call, ast.Load, ast.Store, ast.Tuple, ast.cmpop,
                ast.boolop, ast.Not, ast.BinOp, ast.Mod, ast.JoinedStr, ast.FormattedValue)
_pure = {}


def _is_pure_lookup(function: types.FunctionType, obj: Any) -> bool:
    """Whether ``__getattr__`` only reads: its source (``_pure_source``) reads the
    object's attributes that hold builtin values now (``self._flags[name]``), calls
    nothing but exception classes, ``isinstance`` and read-only methods of those
    containers and of the name, and stores only to locals."""
    code = function.__code__
    if code not in _pure:
        _pure[code] = _pure_source(function)
    own = getattr(obj, '__dict__', None)
    read = _pure[code]
    return read is not None and own is not None and all(
        type(own.get(a, _MISSING_ATTRIBUTE)) in _BUILTIN_VALUES for a in read)


_MISSING_ATTRIBUTE = object()


def _pure_source(function: types.FunctionType) -> frozenset[str] | None:
    """The names of ``self``'s attributes a pure ``__getattr__`` reads, or None."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        definition: Any = tree.body[0]
        this, name = [a.arg for a in definition.args.args][:2]
    except (OSError, TypeError, SyntaxError, ValueError, IndexError, AttributeError):
        return None
    if definition.decorator_list:
        return None
    read = set()
    for node in ast.walk(definition):
        if not isinstance(node, _STATEMENTS + _EXPRESSIONS):
            return None
        if isinstance(node, ast.FunctionDef) and node is not definition:
            return None
        if isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx,
                                                                               ast.Load):
            return None
        if isinstance(node, ast.Attribute):
            if not (isinstance(node.value, ast.Name) and node.value.id == this
                    or _is_own(node.value, this) and node.attr in _CONTAINER_READS
                    or isinstance(node.value, ast.Name) and node.value.id == name
                    and node.attr in _NAME_READS):
                return None
            if _is_own(node, this):
                read.add(node.attr)
        elif isinstance(node, ast.Subscript) and not _is_own(node.value, this):
            return None
        elif isinstance(node, ast.Call) and not (
                isinstance(node.func, ast.Name) and node.func.id in _EXCEPTIONS | {'isinstance'}
                or isinstance(node.func, ast.Attribute)):
            return None
        elif isinstance(node, ast.BinOp) and not (isinstance(node.op, ast.Mod) and isinstance(
                node.left, ast.Constant) and isinstance(node.left.value, str)):
            return None
    return frozenset(read)


def _is_own(node: ast.AST, this: str) -> bool:
    """``self.x`` (``this`` being the name of ``__getattr__``'s first parameter)."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
        and node.value.id == this


def _defining(kind: type, name: str) -> tuple[type, Any] | None:
    """(class, its ``name``) of the first class in ``kind``'s MRO defining ``name``."""
    for klass in kind.__mro__:
        if name in vars(klass):
            return klass, vars(klass)[name]
    return None


def _is_user_function(function: object) -> bool:
    return isinstance(function, types.FunctionType) and not whitelist.is_library(function)


def _guard_class_entry(ctx: TraceContext, klass: type, name: str, expected: object) -> None:
    """The class still holds ``expected`` under ``name`` (a property, ``__getattr__``)."""
    namespace = guards.AttrSource(guards.ObjectSource(klass), '__dict__')
    ctx.guards.add(GuardKind.ID_MATCH, guards.ItemSource(namespace, name), expected)
