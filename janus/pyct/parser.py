"""Parses a Python function's source into a gast ``FunctionDef``.

Nothing must run before this module.  Line numbers in the returned tree are
the lines of the user's file, so code compiled from it reports user lines.

The definition is found in a parse of its whole file (cached per file, the
text compared, so an edited file parses again): a ``def`` by its name and
first line, a lambda by its position.  Its columns and string literals are
the file's (a dedented excerpt would strip the indentation eager code keeps
in a method's multi-line string literal).
The source is read for the function's code object, never for what
``__wrapped__`` names (``inspect.getsourcelines`` follows it: a
``functools.wraps`` wrapper would be converted as the function it wraps).
``parse_function`` returns a definition only if it compiles to that code
object (``recompile.mismatch``): a file rewritten or edited after the
definition, or source text shared by other code under one file name, gives
no source rather than another function's.

A lambda is found by its exact position, not only by its line: Python 3.11
code objects carry the column span of every instruction
(``code.co_positions()``), so of two lambdas on one line (``opt.minimize(lambda:
a, lambda: b)``, two ``sorted(key=lambda ...)``) the one whose body holds the
code's instructions is the lambda that made ``fn``.
"""
from __future__ import annotations
import ast
import dataclasses
import inspect
import textwrap
import types
import typing

import gast

from janus.reasons import Reason
from janus.pyct import recompile


class NoSource(Exception):
    """The function has no retrievable source (builtin, exec, interactive), or the
    source its file holds now is not the code Python runs (``reason``)."""

    def __init__(self, message: str, reason: Reason = Reason.NO_SOURCE) -> None:
        self.reason = reason
        super().__init__(message)


@dataclasses.dataclass(frozen=True)
class _ParsedFile:
    """One parse of a source file: its text, module and the names its module-level
    imports bind (they decide how Python compiled ``name.method()`` calls)."""
    text: str
    module: ast.Module
    imported: frozenset


def function_source(fn: types.FunctionType) -> tuple[str, str, int]:
    """Returns (source, filename, first_lineno) of ``fn``'s definition: the block at its
    code's first line, dedented (``inspect.getsourcelines`` without following
    ``__wrapped__``)."""
    try:
        lines, start = inspect.findsource(fn)
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError) as e:
        raise NoSource('no source for %s: %s' % (getattr(fn, '__qualname__', fn), e)) from e
    return textwrap.dedent(''.join(inspect.getblock(lines[start:]))), filename, start + 1


def parse_function(fn: types.FunctionType) -> tuple[gast.AST, str, list[str]]:
    """Returns (gast FunctionDef or Lambda, filename, source_lines).

    The node's line numbers are those of the user's file, and
    ``source_lines[0]`` is the node's first line.  Raises NoSource unless the
    node compiles to ``fn``'s code object.
    """
    found = _in_file(fn)
    if found is None:   # the file does not parse as a whole: the definition alone
        candidates, imported = [_in_block(fn)], None
    else:
        candidates, imported = found
    problem = 'it is not at line %d' % fn.__code__.co_firstlineno
    for tree, filename, source_lines in candidates:
        problem = recompile.mismatch(tree, fn, imported)   # type: ignore[assignment]
        if problem is None:
            return tree, filename, source_lines
    raise NoSource('the source of %s in its file is not the code Python runs (%s): the file '
                   'was rewritten or edited after the definition'
                   % (fn.__qualname__, problem), Reason.SOURCE_CHANGED)


# filename -> _ParsedFile: functions of one file (a lambda made anew every step) are
# found in one parse of it.
_files = {}


def _parsed_file(filename: str, lines: typing.Sequence[str]) -> _ParsedFile | None:
    """The cached parse of ``lines`` (the text of ``filename``), or None if it does not parse."""
    text = ''.join(lines)
    cached = _files.get(filename)
    if cached is not None and cached.text == text:
        return cached
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    if len(_files) > 32:
        _files.clear()
    parsed = _files[filename] = _ParsedFile(text, module, _imported_names(module))
    return parsed


def _imported_names(module: ast.Module) -> frozenset[str]:
    """Names bound by import statements in module scope (not in a def or class body)."""
    names, pending = set(), list(module.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(alias.asname or alias.name.split('.')[0]
                         for alias in node.names if alias.name != '*')
        pending.extend(child for child in ast.iter_child_nodes(node)  # type: ignore[misc]
                       if isinstance(child, ast.stmt)
                       or isinstance(child, (ast.excepthandler, ast.match_case)))
    return frozenset(names)


def _in_file(fn: types.FunctionType) -> tuple[list[tuple], frozenset] | None:
    """([(tree, filename, source_lines)] of the definitions in ``fn``'s whole file that
    may be ``fn``'s, the names the file's imports bind), or None when the file cannot
    be read or parsed as a whole.  A whole-file parse also finds a lambda that starts
    in the middle of a statement (``opt.minimize(\\n    lambda: ..., vars)``)."""
    try:
        lines, _ = inspect.findsource(fn)
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError):
        return None
    parsed = _parsed_file(filename, lines)
    if parsed is None:
        return None
    code = fn.__code__
    if code.co_name == '<lambda>':
        nodes = [_pick_lambda(ast.walk(parsed.module), code, 0, 0)]
    else:
        nodes = [node for node in ast.walk(parsed.module)   # type: ignore[misc]
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and node.name == code.co_name and _first_line(node) == code.co_firstlineno]
    # new trees: the cached module stays as parsed
    return [(gast.ast_to_gast(node), filename,
             [line.rstrip('\n') for line in lines[node.lineno - 1:node.end_lineno]])
            for node in nodes], parsed.imported


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A def's code object's first line: its first decorator's, else the def's."""
    return min([d.lineno for d in node.decorator_list] + [node.lineno])


def _in_block(fn: types.FunctionType) -> tuple[gast.AST, str, list[str]]:
    """(tree, filename, source_lines) of ``fn`` parsed from its definition's block alone."""
    source, filename, first_lineno = function_source(fn)
    try:
        module = ast.parse(source)
    except SyntaxError as e:
        raise NoSource('source of %s does not parse on its own (%s)'
                       % (fn.__qualname__, e.msg)) from e
    node = _find_definition(module, fn, source, first_lineno)
    ast.increment_lineno(node, first_lineno - 1)
    tree = gast.ast_to_gast(node)
    return tree, filename, source.splitlines()[node.lineno - first_lineno:]


def _find_definition(module: ast.Module, fn: types.FunctionType, source: str,
                     first_lineno: int) -> typing.Any:
    code = fn.__code__
    if code.co_name == '<lambda>':
        # ``source`` was dedented: its columns are the file's less the common indent.
        first = next((line for line in source.splitlines() if line.strip()), '')
        indent = _indent_of(fn, first_lineno) - (len(first) - len(first.lstrip()))
        return _pick_lambda(ast.walk(module), code, first_lineno - 1, indent)
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            return node
    raise NoSource('source of %s does not start with its def' % fn.__qualname__)


def _indent_of(fn: types.FunctionType, lineno: int) -> int:
    """The indent, in characters, of line ``lineno`` of ``fn``'s file (0 if unknown)."""
    try:
        lines, _ = inspect.findsource(fn)
    except (OSError, TypeError):
        return 0
    line = lines[lineno - 1] if 0 < lineno <= len(lines) else ''
    return len(line) - len(line.lstrip())


def _pick_lambda(nodes: typing.Iterable[ast.AST], code: types.CodeType, line_offset: int,
                 col_offset: int) -> ast.Lambda:
    """The ``ast.Lambda`` among ``nodes`` that compiled to ``code``.

    ``line_offset``/``col_offset``: what to add to a node's positions to get the
    file's (the parsed text may be a dedented excerpt).  A candidate starts on the
    code's first line and has its parameters; of several, the code's instruction
    positions lie inside exactly the one whose body holds them all (the innermost
    such lambda: an outer one's body holds an inner one's instructions too)."""
    params = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    candidates = [n for n in nodes if isinstance(n, ast.Lambda)
                  and n.lineno + line_offset == code.co_firstlineno
                  and [a.arg for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs]
                  == params]
    if len(candidates) == 1:
        return candidates[0]
    positions = _positions(code)
    if positions:
        def span(node: typing.Any) -> tuple[tuple[int, int], tuple[int, int]]:
            return ((node.lineno + line_offset, node.col_offset + col_offset),
                    (node.end_lineno + line_offset, node.end_col_offset + col_offset))

        def holds(node: ast.Lambda) -> bool:
            (start, end) = span(node.body)
            return all(start <= first and last <= end for first, last in positions)
        inside = [n for n in candidates if holds(n)]
        if inside:
            return min(inside, key=lambda n: (span(n)[1][0] - span(n)[0][0],
                                              span(n)[1][1] - span(n)[0][1]))
    raise NoSource('cannot tell which lambda on line %d is %s (its code carries no column '
                   'positions; Python runs with -X no_debug_ranges?)'
                   % (code.co_firstlineno, code.co_qualname))


def _positions(code: types.CodeType) -> list[tuple[tuple, tuple]]:
    """((line, col), (end_line, end_col)) of every instruction that has a full position."""
    out = []
    for line, end_line, col, end_col in code.co_positions():
        if None not in (line, end_line, col, end_col) and (col, end_col) != (0, 0):
            out.append(((line, col), (end_line, end_col)))
    return out


def source_line(source_lines: typing.Sequence[str], first_lineno: int,
                lineno: int) -> str | None:
    index = lineno - first_lineno
    if 0 <= index < len(source_lines):
        return source_lines[index]
    return None


def is_plain_function(fn: object) -> bool:
    return isinstance(fn, types.FunctionType)
