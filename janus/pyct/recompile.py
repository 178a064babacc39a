"""Recompiling a function's parsed source as Python compiled it, and checking the parse.

Nothing must run before this module.  janus reads a function's source from
its file (``inspect``, through ``linecache``), but Python runs the function's
code object, compiled from whatever the file held when it was defined.  The
two part ways when the file was rewritten or edited after the definition
(code written to one path and ``exec``'d again and again, an edited module
not reloaded), or when the text found is another definition's.  Converting
that text would run other code than eager does, so ``mismatch`` compiles the
parsed definition the way its code object was compiled (the same free
variables, ``__future__`` flags, private-name mangling and the names the
module's imports bind: Python 3.11 compiles ``np.sum(x)`` differently when
``np`` was imported at module level) and compares the
two: the bytecode, names, locals, free/cell variables, argument counts and
constants (nested code objects alike).  Only positions and qualified names
may differ (the copy is compiled inside a factory), so an in-line class
body's ``__qualname__`` constant is compared as the qualified name it is.
"""
from __future__ import annotations
import __future__
import ast
import copy
import inspect
import types
import typing

import gast

from janus.pyct import mangling

# The ``__future__`` features a code object records in ``co_flags`` (nested scopes are
# always on, and their bit is CO_NESTED).
_FUTURE_FLAGS = 0
for _name in __future__.all_feature_names:
    if _name != 'nested_scopes':
        _FUTURE_FLAGS |= getattr(__future__, _name).compiler_flag

# The flags that change what a call does (the rest record where the code was compiled).
_KIND_FLAGS = (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS | inspect.CO_GENERATOR
               | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR)


_DEFS = (gast.FunctionDef, gast.AsyncFunctionDef)


def future_flags(code: types.CodeType) -> int:
    """``compile`` flags for recompiling ``code``'s source: its ``__future__`` features."""
    return code.co_flags & _FUTURE_FLAGS


def mismatch(tree: gast.AST, fn: types.FunctionType,
             imported: typing.Collection[str] | None = None) -> str | None:
    """None when ``tree`` (a gast FunctionDef or Lambda, as parsed, with the file's line
    numbers) compiles to ``fn``'s code; else what differs, as text.  ``imported``: the
    names the file's module-level imports bind (None: unknown, taken as none)."""
    code = fn.__code__
    try:
        copied = _compile_alone(tree, fn, imported or ())
    except (SyntaxError, ValueError, StopIteration) as e:
        return 'its source does not compile on its own (%s)' % e
    return _first_difference(_fingerprint(code), _fingerprint(copied))


def _compile_alone(tree: gast.AST, fn: types.FunctionType,
                   imported: typing.Collection[str]) -> types.CodeType:
    """The code object of ``tree`` compiled inside a factory whose parameters are
    ``fn``'s free variables (so they stay free variables, as in ``fn``), in a module
    whose imports bind ``imported``.  A ``def`` binds its name as a global of the
    factory unless the name is one of those variables: a recursive call by name then
    reads what it reads in ``fn`` (a global, or the enclosing function's cell)."""
    code = fn.__code__
    node = mangling.mangle(copy.deepcopy(tree), mangling.owner_class(fn))
    _strip_enclosing_parts(node)
    body = [gast.copy_location(node if isinstance(node, _DEFS) else gast.Expr(node), node)]
    if isinstance(node, _DEFS) and node.name not in code.co_freevars:
        body.insert(0, gast.copy_location(gast.Global([node.name]), node))
    params = gast.arguments([gast.Name(n, gast.Param(), None, None) for n in code.co_freevars],
                            [], None, [], [], None, [])
    factory = gast.FunctionDef('__janus_recompiled', params, body, [], None, None, [])
    gast.copy_location(factory, node)
    imports = [gast.copy_location(gast.Import([gast.alias(name, None)]), node)
               for name in sorted(imported)]
    module = gast.gast_to_ast(gast.Module(imports + [factory], []))
    ast.fix_missing_locations(module)
    compiled = compile(module, code.co_filename, 'exec', flags=future_flags(code),
                       dont_inherit=True)
    factory_code = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    return next(c for c in factory_code.co_consts
                if isinstance(c, types.CodeType) and c.co_name == code.co_name)


def _strip_enclosing_parts(node: gast.AST) -> None:
    """Drops what the enclosing code evaluates (decorators, defaults, annotations):
    none of it is in the function's own code object."""
    if isinstance(node, _DEFS):
        node.decorator_list, node.returns = [], None
    args = node.args
    args.defaults = []
    args.kw_defaults = [None] * len(args.kwonlyargs)
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            arg.annotation = None


def _fingerprint(code: types.CodeType) -> tuple:
    """What of a code object its source determines, positions and qualified name aside."""
    return (('name', code.co_name),
            ('arguments', (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
                           code.co_flags & _KIND_FLAGS)),
            ('locals', code.co_varnames),
            ('free variables', code.co_freevars),
            ('cell variables', code.co_cellvars),
            ('names', code.co_names),
            ('constants', tuple(_constant(c, code) for c in code.co_consts)),
            ('bytecode', code.co_code))


def _constant(value: typing.Any, owner: types.CodeType) -> tuple:
    """A constant as compared: by type and value (``1``, ``1.0`` and ``True`` differ,
    so do ``0.0`` and ``-0.0``); a nested code object by its fingerprint."""
    if isinstance(value, types.CodeType):
        return ('code', _fingerprint(value))
    if type(value) is str and value == owner.co_qualname and _is_class_body(owner):
        return ('qualified name',)   # the __qualname__ a class body stores
    if type(value) in (tuple, frozenset):
        return (type(value), type(value)(_constant(v, owner) for v in value))
    if type(value) in (float, complex):
        return (type(value), repr(value))
    return (type(value), value)


def _is_class_body(code: types.CodeType) -> bool:
    return not code.co_flags & inspect.CO_NEWLOCALS


def _first_difference(original: tuple, recompiled: tuple) -> str | None:
    for (what, want), (_, got) in zip(original, recompiled):
        if want != got:
            if what == 'constants':
                return _nested_difference(want, got) or 'its constants differ'
            return 'its %s differ' % what if what != 'bytecode' else 'its bytecode differs'
    return None


def _nested_difference(want: tuple, got: tuple) -> str | None:
    """The difference inside the first nested code object that differs, if any."""
    for a, b in zip(want, got):
        if a != b and a[0] == 'code' and b[0] == 'code':
            return _first_difference(a[1], b[1])
    return None
