"""Measures the figures issue 39 tracks for the package's shape: each package's share of
``janus/``, modules over 800 lines, classes over 400, functions over 60, type hints.

    .venv/bin/python scripts/house_figures.py

Reads the sources with ``ast``; imports neither janus nor TensorFlow.
"""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIMITS = {'module': 800, 'class': 400, 'function': 60}


def measure():
    """{figure: value} over every module of ``janus/``."""
    total, packages, modules, classes, functions, hinted = 0, {}, [], [], [], 0
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
            size = getattr(node, 'end_lineno', 0) - getattr(node, 'lineno', 0) + 1
            if isinstance(node, ast.ClassDef):
                classes.append((size, '%s:%s' % (name, node.name)))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((size, '%s:%s' % (name, node.name)))
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                hinted += node.returns is not None or any(a.annotation is not None
                                                          for a in arguments)
    return {'lines': total, 'packages': packages, 'modules': modules, 'classes': classes,
            'functions': functions, 'hinted': hinted}


def main():
    figures = measure()
    total = figures['lines']
    print('janus/: %d lines' % total)
    for package, lines in sorted(figures['packages'].items(), key=lambda kv: -kv[1]):
        print('  %-22s %6d lines  %3.0f%%' % (package, lines, 100.0 * lines / total))
    for kind, plural in (('module', 'modules'), ('class', 'classes'), ('function', 'functions')):
        found = sorted(figures[plural], reverse=True)
        over = [item for item in found if item[0] > LIMITS[kind]]
        print('%s over %d lines: %d%s' % (plural, LIMITS[kind], len(over), ''.join(
            '\n  %5d  %s' % item for item in over[:10])))
    count = len(figures['functions'])
    print('functions with type hints: %d of %d (%.1f%%)'
          % (figures['hinted'], count, 100.0 * figures['hinted'] / count))


if __name__ == '__main__':
    main()
