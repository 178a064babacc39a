"""The generator pipeline: parse → number sites → passes → compile.

Needs nothing run before it.  ``convert(fn)`` returns a ``Converted``: a
Python function with the same parameters whose every call, attribute,
subscript, free-name read, loop iterable, context manager and assert goes
through ``janus.runtime.operators``.  Tracing that function (``tracer.py``)
yields the specialized graph.  Conversions are cached per function object;
a failure raises ``ConversionError`` naming the user's line.
"""
import types
import weakref

import astunparse
import gast

from janus.errors import ConversionError
from janus.graphgen.converters import (attributes, calls, common, control, declared, jumps,
                                       literals, names, observations, returns, unsupported)
from janus.pyct import mangling, parser, sites
from janus.runtime.namespace import FunctionNamespace

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
)


class Converted:
    """A converted function and what explain/to_code show of it."""

    def __init__(self, fn, make, source, filename, sites_by_id, code_objects):
        self.fn = fn
        self.make = make
        self.py_fn = self.bind(FunctionNamespace(fn))
        self.filename = filename
        self.sites = sites_by_id
        self.code_objects = code_objects
        self.source = source

    def bind(self, namespace):
        """The converted function, reading free names from ``namespace``."""
        from janus.runtime import operators
        return self.make(operators, namespace)


class _PassContext:
    def __init__(self, filename, source_lines, first_lineno):
        self.filename = filename
        self.source_lines = source_lines
        self.first_lineno = first_lineno

    def line(self, lineno):
        if lineno is None:
            return None
        return parser.source_line(self.source_lines, self.first_lineno, lineno)


_cache = weakref.WeakKeyDictionary()
_by_code = {}   # code object -> (make, source, filename, sites, code objects) or ConversionError


def convert(fn):
    """Converts ``fn`` (a plain Python function); cached, raises ConversionError."""
    code, hit = _cache.get(fn, (None, None))
    if code is not fn.__code__:
        hit = None   # never converted, or its __code__ was rebound since
    if isinstance(hit, ConversionError):
        raise hit
    if hit is not None:
        return hit
    try:
        result = _convert(fn)
    except ConversionError as e:
        _cache[fn] = (fn.__code__, e)
        raise
    _cache[fn] = (fn.__code__, result)
    return result


def _convert(fn):
    """Converts ``fn``; the expensive part is shared by functions of one code object
    (a lambda made anew every step is converted once)."""
    compiled = _by_code.get(fn.__code__)
    if compiled is None:
        try:
            compiled = _convert_code(fn)
        except ConversionError as e:
            compiled = e
        _by_code[fn.__code__] = compiled
    if isinstance(compiled, ConversionError):
        raise compiled
    return Converted(fn, *compiled)


def _convert_code(fn):
    import inspect
    if inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn):
        raise ConversionError('janus does not convert generators or coroutines (%s)'
                              % fn.__qualname__, fn.__code__.co_filename, fn.__code__.co_firstlineno)
    try:
        tree, filename, source_lines = parser.parse_function(fn)
    except parser.NoSource as e:
        raise ConversionError(str(e), fn.__code__.co_filename, fn.__code__.co_firstlineno)
    tree = mangling.mangle(tree, mangling.owner_class(fn))   # self.__x as in the class body
    first_lineno = tree.lineno
    ctx = _PassContext(filename, source_lines, first_lineno)
    site_map = sites.number_sites(tree, source_lines, first_lineno)
    tree = _as_function_def(tree)
    for pass_cls in PASSES:
        tree = pass_cls(ctx).visit(tree)
    make, code_objects = _compile(fn, tree, filename)
    return make, _unparse(tree), filename, site_map, code_objects


def _as_function_def(tree):
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


def _compile(fn, tree, filename):
    """Compiles ``tree`` inside a factory taking the runtime and namespace."""
    factory_args = gast.arguments([gast.Name(n, gast.Param(), None, None) for n in common.RESERVED],
                                  [], None, [], [], None, [])
    factory = gast.FunctionDef('__janus_factory', factory_args,
                               [tree, gast.Return(common.load(tree.name))], [], None, None, [])
    gast.copy_location(factory, tree)
    gast.copy_location(factory.body[1], tree)
    module = gast.gast_to_ast(gast.Module([factory], []))
    import ast
    ast.fix_missing_locations(module)
    code = compile(module, filename, 'exec')
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    # The factory's globals are the user's module, so any name this converter
    # missed still means what it means in the user's code.
    make = types.FunctionType(factory_code, fn.__globals__, '__janus_factory')
    return make, _all_code_objects(factory_code)


def _all_code_objects(code):
    found = {code}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _all_code_objects(const)
    return found


def _unparse(tree):
    """Source text of a converted tree (ast.unparse prints slices in tuples correctly;
    astunparse is the fallback)."""
    import ast
    node = gast.gast_to_ast(tree)
    try:
        return ast.unparse(ast.fix_missing_locations(node)).strip()
    except Exception:  # pragma: no cover - very old Pythons
        return astunparse.unparse(node).strip()
