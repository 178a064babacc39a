"""The generator pipeline: parse → number sites → passes → compile.

Needs nothing run before it.  ``convert(fn)`` returns a ``Converted``: a
Python function with the same parameters whose every call, attribute,
subscript, free-name read, loop iterable, context manager and assert goes
through ``janus.trace.operators``.  Tracing that function (``tracer.py``)
yields the specialized graph.  Conversions are cached per code object, by
identity and weakly (``frontend.ByCode``); each function gets its own ``Converted``
around it (its globals and cells: two modules' functions with one text, or
two closures of one ``def``, share a conversion, never each other's
objects).  A failure raises ``ConversionError`` naming the user's line.
"""
from __future__ import annotations

import copy
import dataclasses
import types
from collections.abc import Sequence

import astunparse
import gast

from janus.reasons import Reason
from janus.errors import ConversionError
from janus.graphgen.converters import (attributes, calls, common, control, declared,
                                       exceptions, jumps, literals, names, observations,
                                       returns, unsupported)
from janus.pyct import frontend, mangling, parser, recompile
from janus.trace import operators
from janus.trace.namespace import FunctionNamespace

# The pipeline, in order.  Each pass is one module under converters/.
PASSES = (
    declared.RouteDeclaredNames,
    unsupported.RejectUnsupported,
    literals.RegisterMade,
    returns.LowerReturns,
    jumps.LowerJumps,
    control.RouteControl,
    attributes.RouteAttributesAndItems,
    observations.RouteObservations,
    calls.RouteCalls,
    names.ResolveFreeNames,
    exceptions.RouteTry,
)


class Converted:
    """A converted function and what explain/to_code show of it: ``fn``'s own (its
    globals, its cells) around the conversion of its code object (``_Compiled``)."""

    def __init__(self, fn: types.FunctionType, compiled: _Compiled) -> None:
        self.fn = fn
        # The factory's globals are fn's module, so any name this converter missed
        # still means what it means in the user's code, and functions the converted
        # code defines are fn's module's (__globals__, __module__), as eagerly.
        self.make = types.FunctionType(compiled.factory_code, fn.__globals__, '__janus_factory')
        self.py_fn = self.bind(FunctionNamespace(fn))
        self.filename = compiled.filename
        self.sites = compiled.sites
        self.code_objects = compiled.code_objects
        self.source = compiled.source

    def bind(self, namespace: FunctionNamespace) -> types.FunctionType:
        """The converted function, reading free names from ``namespace``."""
        return self.make(operators, namespace)


@dataclasses.dataclass(frozen=True)
class _Compiled:
    """The conversion of one code object: nothing of any one function made from it."""
    factory_code: types.CodeType   # takes (runtime, namespace), returns the converted def
    source: str                    # the converted source (janus.to_code)
    filename: str
    sites: dict                    # site id -> sites.Site
    code_objects: frozenset        # the converted code and the code nested in it


@dataclasses.dataclass(frozen=True)
class _Failed:
    """A code object that does not convert: the error's parts (not the raised error,
    whose traceback would keep the function and its frames alive)."""
    reason: Reason
    context: str | None
    filename: str | None
    lineno: int | None
    source_line: str | None

    def error(self) -> ConversionError:
        return ConversionError(self.reason, self.context, self.filename, self.lineno,
                               self.source_line)


class _PassContext:
    def __init__(self, filename: str, source_lines: Sequence[str], first_lineno: int,
                 generator: bool = False) -> None:
        self.filename = filename
        self.source_lines = source_lines
        self.first_lineno = first_lineno
        self.generator = generator   # converting a generator function (its own yields stay)

    def line(self, lineno: int | None) -> str | None:
        if lineno is None:
            return None
        return parser.source_line(self.source_lines, self.first_lineno, lineno)


_by_code = frontend.ByCode()   # code object -> _Compiled or _Failed


def convert(fn: types.FunctionType) -> Converted:
    """Converts ``fn`` (a plain Python function); raises ConversionError.

    The ``Converted`` is ``fn``'s own (its globals, its closure cells) around
    the conversion of its code object, made once (a lambda made anew every
    step is converted once)."""
    return Converted(fn, _convert(fn))


def _convert(fn: types.FunctionType) -> _Compiled:
    """The ``_Compiled`` conversion of ``fn``'s code object (cached); raises
    ConversionError."""
    compiled = _by_code.get(fn.__code__)
    if compiled is None:
        try:
            compiled = _convert_code(fn)
        except ConversionError as e:
            compiled = _Failed(e.reason, e.context, e.filename, e.lineno, e.source_line)
        _by_code.put(fn.__code__, compiled)
    if isinstance(compiled, _Failed):
        raise compiled.error()
    return compiled


def _convert_code(fn: types.FunctionType) -> _Compiled:
    import inspect
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise ConversionError(Reason.GENERATOR,
                              'janus does not convert coroutines (%s)'
                              % fn.__qualname__, fn.__code__.co_filename, fn.__code__.co_firstlineno)
    try:
        parsed = frontend.front_end(fn)   # the profiler's parse and site numbering
    except parser.NoSource as e:
        raise ConversionError(e.reason, str(e), fn.__code__.co_filename,
                              fn.__code__.co_firstlineno) from e
    tree = copy.deepcopy(parsed.tree)   # the site annotations with it
    tree = mangling.mangle(tree, mangling.owner_class(fn))   # self.__x as in the class body
    filename, site_map = parsed.filename, parsed.sites
    ctx = _PassContext(filename, parsed.source_lines, parsed.first_lineno,
                       generator=inspect.isgeneratorfunction(fn))
    tree = _as_function_def(tree)
    for pass_cls in PASSES:
        tree = pass_cls(ctx).visit(tree)
    factory_code = _compile(fn, tree, filename)
    return _Compiled(factory_code, _unparse(tree), filename, site_map,
                     frozenset(_all_code_objects(factory_code)))


def _as_function_def(tree: gast.AST) -> gast.FunctionDef:
    """Strips decorators and defaults (callers pass bound arguments); lambdas become defs."""
    if isinstance(tree, gast.Lambda):
        body = [gast.copy_location(gast.Return(tree.body), tree.body)]
        tree = gast.copy_location(
            gast.FunctionDef('__janus_lambda', tree.args, body, [], None, None, []), tree)
    tree.decorator_list = []
    tree.returns = None
    tree.args.defaults = []
    tree.args.kw_defaults = [None] * len(tree.args.kwonlyargs)
    for arg in list(tree.args.args) + list(tree.args.posonlyargs) + list(tree.args.kwonlyargs):
        arg.annotation = None
    return tree


def _compile(fn: types.FunctionType, tree: gast.FunctionDef, filename: str) -> types.CodeType:
    """The code of a factory taking the runtime and namespace that returns ``tree``
    compiled (with ``fn``'s ``__future__`` features)."""
    factory_args = gast.arguments([gast.Name(n, gast.Param(), None, None) for n in common.RESERVED],
                                  [], None, [], [], None, [])
    factory = gast.FunctionDef('__janus_factory', factory_args,
                               [tree, gast.Return(common.load(tree.name))], [], None, None, [])
    gast.copy_location(factory, tree)
    gast.copy_location(factory.body[1], tree)
    module = gast.gast_to_ast(gast.Module([factory], []))
    import ast
    ast.fix_missing_locations(module)
    code = compile(module, filename, 'exec', flags=recompile.future_flags(fn.__code__),
                   dont_inherit=True)
    return next(c for c in code.co_consts if isinstance(c, types.CodeType))


def _all_code_objects(code: types.CodeType) -> set[types.CodeType]:
    found = {code}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _all_code_objects(const)
    return found


def _unparse(tree: gast.AST) -> str:
    """Source text of a converted tree (ast.unparse prints slices in tuples correctly;
    astunparse is the fallback)."""
    import ast
    node = gast.gast_to_ast(tree)
    try:
        return ast.unparse(ast.fix_missing_locations(node)).strip()
    except Exception:  # pragma: no cover - very old Pythons
        return astunparse.unparse(node).strip()
