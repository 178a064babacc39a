"""Parses a Python function's source into a gast ``FunctionDef``.

Nothing must run before this module.  Line numbers in the returned tree are
the lines of the user's file, so code compiled from it reports user lines.

A lambda is found by its exact position, not only by its line: Python 3.11
code objects carry the column span of every instruction
(``code.co_positions()``), so of two lambdas on one line (``opt.minimize(lambda:
a, lambda: b)``, two ``sorted(key=lambda ...)``) the one whose body holds the
code's instructions is the lambda that made ``fn``.
"""
import ast
import inspect
import types

import gast


class NoSource(Exception):
    """The function has no retrievable source (builtin, exec, interactive)."""


def function_source(fn):
    """Returns (source, filename, first_lineno) of ``fn``'s definition, as in the file
    (indented as there: dedenting would change multi-line strings and columns)."""
    try:
        lines, first_lineno = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError) as e:
        raise NoSource('no source for %s: %s' % (getattr(fn, '__qualname__', fn), e))
    return ''.join(lines), filename, first_lineno


# An indented definition parses as the block of this line: every string, column and
# line of it stays as in the file (the line numbers shift by one, undone below).
_BLOCK_HEADER = 'if 1:\n'


def _parse_excerpt(source):
    """(module, lines added in front) for ``source``, indented or not."""
    if source[:1] in (' ', '\t'):
        return ast.parse(_BLOCK_HEADER + source), 1
    return ast.parse(source), 0


def parse_function(fn):
    """Returns (gast FunctionDef or Lambda, filename, source_lines).

    The node's line numbers are those of the user's file, and
    ``source_lines[0]`` is the node's first line.
    """
    if fn.__code__.co_name == '<lambda>':
        found = _lambda_in_file(fn)
        if found is not None:
            return found
    source, filename, first_lineno = function_source(fn)
    try:
        module, added = _parse_excerpt(source)
    except SyntaxError as e:
        raise NoSource('source of %s does not parse on its own (%s)'
                       % (fn.__qualname__, e.msg))
    body = module.body[0].body if added else module.body
    node = _find_definition(body, fn, first_lineno - added)
    ast.increment_lineno(node, first_lineno - 1 - added)
    tree = gast.ast_to_gast(node)
    return tree, filename, source.splitlines()[node.lineno - first_lineno:]


def _find_definition(body, fn, first_lineno):
    """The definition of ``fn`` among the parsed statements ``body`` (whose line 1 is
    the file's line ``first_lineno``; columns are the file's)."""
    code = fn.__code__
    if code.co_name == '<lambda>':
        nodes = (n for statement in body for n in ast.walk(statement))
        return _pick_lambda(nodes, code, first_lineno - 1, 0)
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            return node
    raise NoSource('source of %s does not start with its def' % fn.__qualname__)


# filename -> (its text, its parsed module): a lambda made anew every step is parsed
# against one parse of its file (the text is compared, so an edited file parses again).
_modules = {}


def _lambda_in_file(fn):
    """(tree, filename, source_lines) of the lambda ``fn`` found in a parse of its whole
    file, or None when the file cannot be read or parsed (the caller falls back to
    ``inspect.getsourcelines``).  A whole-file parse also finds a lambda that starts
    in the middle of a statement (``opt.minimize(\\n    lambda: ..., vars)``)."""
    try:
        lines, _ = inspect.findsource(fn)
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError):
        return None
    text = ''.join(lines)
    cached = _modules.get(filename)
    if cached is not None and cached[0] == text:
        module = cached[1]
    else:
        try:
            module = ast.parse(text)
        except (SyntaxError, ValueError):
            return None
        if len(_modules) > 32:
            _modules.clear()
        _modules[filename] = (text, module)
    node = _pick_lambda(ast.walk(module), fn.__code__, 0, 0)
    tree = gast.ast_to_gast(node)   # a new tree: the cached module stays as parsed
    return tree, filename, [line.rstrip('\n') for line in lines[node.lineno - 1:node.end_lineno]]


def _pick_lambda(nodes, code, line_offset, col_offset):
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
        def span(node):
            return ((node.lineno + line_offset, node.col_offset + col_offset),
                    (node.end_lineno + line_offset, node.end_col_offset + col_offset))

        def holds(node):
            (start, end) = span(node.body)
            return all(start <= first and last <= end for first, last in positions)
        inside = [n for n in candidates if holds(n)]
        if inside:
            return min(inside, key=lambda n: (span(n)[1][0] - span(n)[0][0],
                                              span(n)[1][1] - span(n)[0][1]))
    raise NoSource('cannot tell which lambda on line %d is %s (its code carries no column '
                   'positions; Python runs with -X no_debug_ranges?)'
                   % (code.co_firstlineno, code.co_qualname))


def _positions(code):
    """((line, col), (end_line, end_col)) of every instruction that has a full position."""
    out = []
    for line, end_line, col, end_col in code.co_positions():
        if None not in (line, end_line, col, end_col) and (col, end_col) != (0, 0):
            out.append(((line, col), (end_line, end_col)))
    return out


def source_line(source_lines, first_lineno, lineno):
    index = lineno - first_lineno
    if 0 <= index < len(source_lines):
        return source_lines[index]
    return None


def is_plain_function(fn):
    return isinstance(fn, types.FunctionType)
