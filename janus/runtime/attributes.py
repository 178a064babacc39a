"""Attribute reads and writes that run your own code: properties and ``__getattr__``.

Needs a ``TraceContext`` entered (``runtime/tracing.py``); converted code calls
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
  reads, branches, returns and raises, calling nothing but a few builtins and
  read-only container methods, as ``return self._flags[name]`` in a ``try``
  does) runs as it is, and its result is guarded by value like any attribute
  (the guard runs the lookup again before each run: it changes nothing).

Guarded too: the property (or ``__getattr__``) is still the one on the
class, found where the trace found it.  A custom ``__getattribute__`` and
library descriptors keep ``access.py``'s rules.
"""
import ast
import inspect
import textwrap
import types

from janus import guards
from janus.guards import GuardKind
from janus.runtime import access, calls, whitelist
from janus.runtime.tracing import current


def attr(obj, name):
    found = _user_code(obj, name, writing=False)
    if found is None:
        return access.attr(obj, name)
    function, args = found
    if function is _read_by_lookup:
        return function(*args)
    return calls.call(function, *args)


def setattr_(obj, name, value):
    found = _user_code(obj, name, writing=True)
    if found is None:
        return access.setattr_(obj, name, value)
    function, args = found
    calls.call(function, *(args + (value,)))
    return None


def _user_code(obj, name, writing):
    """(function, leading arguments) of the user code ``obj.name`` runs, or None."""
    kind = type(obj)
    if isinstance(obj, type) or kind.__getattribute__ is not object.__getattribute__:
        return None
    ctx = current()
    source = ctx.source_of(obj)
    if source is None or whitelist.is_library_object(obj):
        return None
    for klass in kind.__mro__:
        found = vars(klass).get(name)
        if found is None:
            continue
        if type(found) is not property:
            return None
        function = found.fset if writing else found.fget
        if not _is_user_function(function):
            return None
        _guard_class_entry(ctx, klass, name, found)
        return function, (obj,)
    getattr_hook = _defining(kind, '__getattr__')
    if writing or getattr_hook is None or name in (getattr(obj, '__dict__', None) or {}):
        return None
    klass, function = getattr_hook
    if not _is_user_function(function) or getattr(obj, '__dict__', None) is None:
        return None
    ctx.add_guard(GuardKind.CONTAINS_MATCH, guards.AttrSource(source, '__dict__'),
                  (dict, name, False))
    _guard_class_entry(ctx, klass, '__getattr__', function)
    if _is_pure_lookup(function):
        return _read_by_lookup, (ctx, obj, source, name)
    return function, (obj, name)


def _read_by_lookup(ctx, obj, source, name):
    """A pure ``__getattr__`` run as it is; its result guarded through its source."""
    return ctx.guard_value(guards.AttrSource(source, name), getattr(obj, name))


# What a pure lookup may call: builtins that read, exceptions it may raise, and
# read-only methods of the containers it looks in.
_PURE_CALLS = frozenset(('isinstance', 'hasattr', 'getattr', 'len', 'str', 'repr', 'type',
                         'AttributeError', 'KeyError', 'ValueError', 'LookupError'))
_PURE_METHODS = frozenset(('get', 'startswith', 'endswith', 'lower', 'upper', 'format'))
_PURE_NODES = (ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Return, ast.If,
               ast.Try, ast.ExceptHandler, ast.Raise, ast.Assign, ast.Expr, ast.Pass, ast.Name,
               ast.Attribute, ast.Subscript, ast.Constant, ast.Compare, ast.BoolOp, ast.UnaryOp,
               ast.IfExp, ast.Call, ast.Load, ast.Store, ast.JoinedStr, ast.FormattedValue,
               ast.Tuple, ast.cmpop, ast.boolop, ast.unaryop, ast.keyword, ast.BinOp,
               ast.operator)
_pure = {}


def _is_pure_lookup(function):
    """Whether ``function``'s source only reads (see ``_PURE_CALLS``): no stores but to
    plain locals, no ``global``/``nonlocal``, no loops, no other calls."""
    code = function.__code__
    if code not in _pure:
        _pure[code] = _pure_source(function)
    return _pure[code]


def _pure_source(function):
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return False
    for node in ast.walk(tree):
        if not isinstance(node, _PURE_NODES):
            return False
        if isinstance(node, ast.FunctionDef) and (node is not tree.body[0]
                                                  or node.decorator_list):
            return False
        if isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx,
                                                                               ast.Load):
            return False
        if isinstance(node, ast.Call) and not _pure_call(node.func):
            return False
    return True


def _pure_call(func):
    if isinstance(func, ast.Name):
        return func.id in _PURE_CALLS
    return isinstance(func, ast.Attribute) and func.attr in _PURE_METHODS


def _defining(kind, name):
    """(class, its ``name``) of the first class in ``kind``'s MRO defining ``name``."""
    for klass in kind.__mro__:
        if name in vars(klass):
            return klass, vars(klass)[name]
    return None


def _is_user_function(function):
    return isinstance(function, types.FunctionType) and not whitelist.is_library(function)


def _guard_class_entry(ctx, klass, name, expected):
    """The class still holds ``expected`` under ``name`` (a property, ``__getattr__``)."""
    namespace = guards.AttrSource(guards.ObjectSource(klass), '__dict__')
    ctx.add_guard(GuardKind.ID_MATCH, guards.ItemSource(namespace, name), expected)
