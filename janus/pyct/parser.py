"""Parses a Python function's source into a gast ``FunctionDef``.

Nothing must run before this module.  Line numbers in the returned tree are
the lines of the user's file, so code compiled from it reports user lines.
"""
import ast
import inspect
import textwrap
import types

import gast


class NoSource(Exception):
    """The function has no retrievable source (builtin, exec, interactive)."""


def function_source(fn):
    """Returns (source, filename, first_lineno) of ``fn``'s definition."""
    try:
        lines, first_lineno = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError) as e:
        raise NoSource('no source for %s: %s' % (getattr(fn, '__qualname__', fn), e))
    return textwrap.dedent(''.join(lines)), filename, first_lineno


def parse_function(fn):
    """Returns (gast FunctionDef or Lambda, filename, source_lines).

    The node's line numbers are those of the user's file.
    """
    source, filename, first_lineno = function_source(fn)
    try:
        module = ast.parse(source)
    except SyntaxError as e:
        raise NoSource('source of %s does not parse on its own (%s)'
                       % (fn.__qualname__, e.msg))
    node = _find_definition(module, fn)
    ast.increment_lineno(node, first_lineno - 1)
    tree = gast.ast_to_gast(node)
    return tree, filename, source.splitlines()


def _find_definition(module, fn):
    code = fn.__code__
    if code.co_name == '<lambda>':
        lambdas = [n for n in ast.walk(module) if isinstance(n, ast.Lambda)
                   and [a.arg for a in n.args.args] == list(code.co_varnames[:code.co_argcount])]
        if len(lambdas) != 1:
            raise NoSource('cannot tell which lambda on its line is %s' % fn.__qualname__)
        return lambdas[0]
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            return node
    raise NoSource('source of %s does not start with its def' % fn.__qualname__)


def source_line(source_lines, first_lineno, lineno):
    index = lineno - first_lineno
    if 0 <= index < len(source_lines):
        return source_lines[index]
    return None


def is_plain_function(fn):
    return isinstance(fn, types.FunctionType)
