"""Measures the figures issue 39 tracks for the package's shape: each package's share of
``janus/``, modules over 800 lines, classes over 400, functions over 60, type hints, kind
checks on janus's stand-in values, and reads of tuple positions.

    .venv/bin/python scripts/house_figures.py

Reads the sources with ``ast``; imports neither janus nor TensorFlow.
"""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIMITS = {'module': 800, 'class': 400, 'function': 60}
# The runtime tier's packages (tests/test_layout.py RUNTIME_PACKAGES).
RUNTIME = ('graph', 'trace', 'values', 'heap', 'control', 'recursion', 'library')
# janus's stand-ins for Python values while a trace runs: an ``isinstance`` on one is a
# kind check a value protocol would replace (issue 39, item 1).
STAND_INS = {'DynamicScalar', 'NodeRef', 'ArrayStandIn', 'Chosen', 'ChosenMethod',
             'UnmergedLocal', 'TensorList', 'TestValue'}


def _type_names(node):
    """The names a type argument of ``isinstance`` mentions (``scalars.DynamicScalar``)."""
    return {n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(node)
            if isinstance(n, (ast.Attribute, ast.Name))}


# The predicates that ask the same of a value (``arrays.is_stand_in(value)``).
STAND_IN_PREDICATES = {'is_stand_in', 'is_dynamic', 'is_node_value', 'is_node'}


def _is_kind_check(node):
    """``isinstance(v, DynamicScalar)``, ``type(v) is DynamicScalar``, ``arrays.is_stand_in(v)``."""
    if isinstance(node, ast.Call):
        name = getattr(node.func, 'attr', getattr(node.func, 'id', None))
        if name == 'isinstance' and len(node.args) == 2:
            return bool(_type_names(node.args[1]) & STAND_INS)
        return name in STAND_IN_PREDICATES
    return (isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.Is, ast.IsNot))
            and isinstance(node.left, ast.Call) and getattr(node.left.func, 'id', '') == 'type'
            and bool(_type_names(node.comparators[0]) & STAND_INS))


def _is_position_read(node):
    """``x[0]``, ``x[-1]``: an item read by a constant int position (a tuple read by position,
    where a record would name the field)."""
    index = node.slice.operand if isinstance(node.slice, ast.UnaryOp) else node.slice
    return (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
            and isinstance(index, ast.Constant) and type(index.value) is int)


def measure():
    """{figure: value} over every module of ``janus/``."""
    total, packages, modules, classes, functions, hinted = 0, {}, [], [], [], 0
    kind_checks, position_reads = 0, 0
    for path in sorted((ROOT / 'janus').rglob('*.py')):
        if '__pycache__' in path.parts:
            continue
        source = path.read_text()
        lines = source.count('\n')
        total += lines
        relative = path.relative_to(ROOT / 'janus')
        package = 'janus/' + relative.parts[0] + '/' if len(relative.parts) > 1 else 'janus/*.py'
        packages[package] = packages.get(package, 0) + lines
        name = path.relative_to(ROOT).as_posix()
        modules.append((lines, name))
        for node in ast.walk(ast.parse(source)):
            kind_checks += _is_kind_check(node)
            position_reads += isinstance(node, ast.Subscript) and _is_position_read(node)
            size = getattr(node, 'end_lineno', 0) - getattr(node, 'lineno', 0) + 1
            if isinstance(node, ast.ClassDef):
                classes.append((size, '%s:%s' % (name, node.name)))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((size, '%s:%s' % (name, node.name)))
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                hinted += node.returns is not None or any(a.annotation is not None
                                                          for a in arguments)
    return {'lines': total, 'packages': packages, 'modules': modules, 'classes': classes,
            'functions': functions, 'hinted': hinted, 'kind_checks': kind_checks,
            'position_reads': position_reads}


def main():
    figures = measure()
    total = figures['lines']
    print('janus/: %d lines' % total)
    for package, lines in sorted(figures['packages'].items(), key=lambda kv: -kv[1]):
        print('  %-22s %6d lines  %3.0f%%' % (package, lines, 100.0 * lines / total))
    tier = sum(figures['packages'].get('janus/%s/' % name, 0) for name in RUNTIME)
    print('  the runtime tier (%s): %d lines, %.0f%%' % (', '.join(RUNTIME), tier,
                                                        100.0 * tier / total))
    for kind, plural in (('module', 'modules'), ('class', 'classes'), ('function', 'functions')):
        found = sorted(figures[plural], reverse=True)
        over = [item for item in found if item[0] > LIMITS[kind]]
        print('%s over %d lines: %d%s' % (plural, LIMITS[kind], len(over), ''.join(
            '\n  %5d  %s' % item for item in over[:10])))
    count = len(figures['functions'])
    print('kind checks on stand-in values (isinstance, type() is, is_stand_in): %d' % figures['kind_checks'])
    print('reads of constant positions (x[0]): %d' % figures['position_reads'])
    print('functions with type hints: %d of %d (%.1f%%)'
          % (figures['hinted'], count, 100.0 * figures['hinted'] / count))


if __name__ == '__main__':
    main()
