"""Regenerates the documentation sections that are read off the code, not written by hand.

Each section sits between ``<!-- readme_sections:NAME:begin -->`` and
``<!-- readme_sections:NAME:end -->`` in one of the documents (``DOCUMENTS``:
README.md, docs/*.md, benchmarks/README.md), once:

    requirements  what scripts/setup_env.sh installs into .venv (JANUS_REQUIREMENTS)
    knobs         every knob of janus/config.py: default, environment variable, comment
    layout        every module, op file, example, benchmark and script, with the
                  first sentence of its docstring (or header comment)

    .venv/bin/python scripts/readme_sections.py            # rewrite the documents
    .venv/bin/python scripts/readme_sections.py --check    # exit 1 if one is stale

Reads the sources as text (``ast``, ``tokenize``): imports neither janus nor
TensorFlow, so it runs in well under a second.  The benchmark table has its own
generator (``benchmarks/paper_table.py --update-readme``, into benchmarks/README.md).
"""
import argparse
import ast
import difflib
import io
import os
import re
import shlex
import subprocess
import sys
import tokenize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, 'README.md')
# The documents a user reads, the front door first (tests/test_readme.py checks them all).
DOCUMENTS = ('README.md', 'docs/guide.md', 'docs/reference.md', 'benchmarks/README.md')
BEGIN, END = '<!-- readme_sections:%s:begin -->', '<!-- readme_sections:%s:end -->'


def _read(path):
    with open(os.path.join(ROOT, path), encoding='utf-8') as f:
        return f.read()


def first_sentence(text):
    """The first sentence of the first paragraph, on one line (a period inside
    parentheses or followed by a non-space does not end it)."""
    paragraph = ' '.join(text.strip().split('\n\n')[0].split())
    depth = 0
    for i, char in enumerate(paragraph):
        depth += {'(': 1, ')': -1}.get(char, 0)
        if char == '.' and depth == 0 and (i + 1 == len(paragraph) or paragraph[i + 1] == ' '):
            return paragraph[:i + 1]
    return paragraph


def _markdown(text):
    """RST literals (``x``) as Markdown code (`x`); pipes escaped for tables."""
    return text.replace('``', '`').replace('|', '\\|')


# -- requirements ----------------------------------------------------------

def requirements():
    """JANUS_REQUIREMENTS=(...) of scripts/setup_env.sh, as a list of strings."""
    match = re.search(r'^JANUS_REQUIREMENTS=\((.*?)\)', _read('scripts/setup_env.sh'),
                      re.M | re.S)
    words = []
    for line in match.group(1).splitlines():
        words += shlex.split(line, comments=True)
    return words


def render_requirements():
    return '`%s`' % ' '.join(requirements())


# -- knobs -----------------------------------------------------------------

def knobs():
    """[(name, default source text, comment)] of _Config._DEFAULTS in janus/config.py."""
    source = _read('janus/config.py')
    comments = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip('#').strip()
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], 'id', None) == '_DEFAULTS'):
            return [(kw.arg, ast.get_source_segment(source, kw.value),
                     comments.get(kw.value.end_lineno, ''))
                    for kw in node.value.keywords]
    raise SystemExit('janus/config.py: no _DEFAULTS = dict(...) found')


def render_knobs():
    lines = ['| knob | default | environment | what it does |', '|---|---|---|---|']
    for name, default, comment in knobs():
        lines.append('| `%s` | `%s` | `JANUS_%s` | %s |'
                     % (name, default, name.upper(), _markdown(comment)))
    return '\n'.join(lines)


# -- layout ----------------------------------------------------------------

def _docstring(path):
    doc = ast.get_docstring(ast.parse(_read(path)))
    return first_sentence(doc) if doc else ''


def _header_comment(path, prefix):
    """First sentence of the comment block at the top of a file (after a #!)."""
    lines = []
    for line in _read(path).splitlines():
        if line.startswith('#!'):
            continue
        if not line.startswith(prefix):
            break
        lines.append(line[len(prefix):].strip())
    return first_sentence('\n'.join(lines))


def _registered_ops(path):
    return re.findall(r'REGISTER_OP\("([^"]+)"\)', _read(path))


def _tracked():
    """Paths git tracks (None outside a git checkout): files not yet added (a
    colleague's work in progress) stay out of the layout, as in a clean clone."""
    try:
        out = subprocess.run(['git', 'ls-files'], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return set(out.splitlines())


def _files(folder, suffixes):
    found, tracked = [], _tracked()
    for directory, subdirs, names in os.walk(os.path.join(ROOT, folder)):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(('.', '__')))
        for name in sorted(names):
            path = os.path.relpath(os.path.join(directory, name), ROOT)
            if name.endswith(suffixes) and (tracked is None or path in tracked):
                found.append(path)
    return sorted(found, key=lambda p: (os.path.dirname(p), os.path.basename(p) != '__init__.py',
                                        os.path.basename(p)))


def layout_rows():
    """[(path, what it is)] for the layout table."""
    rows = [('README.md', 'The front door: what janus is, the quick start, a first example, '
             'what converts, the headline numbers.'),
            ('docs/guide.md', 'Using janus: how a call runs, graph breaks, the measured floor, '
             'control flow, Python state, training, what is not converted yet.'),
            ('docs/reference.md', 'Setup details, every knob, and this table.'),
            ('benchmarks/README.md', "The demo's numbers and the paper's evaluation, with the "
             'commands that print them.'),
            ('DESIGN.md', first_sentence(_read('DESIGN.md').split('\n', 1)[0].lstrip('# '))
             .capitalize() + ': the decisions behind each part, and why.'),
            ('ARCHITECTURE.md', 'The life of a call (replay, generate, fallback) as ordered lists '
             'of functions, a glossary, and where things live.'),
            ('LICENSE', 'Apache License 2.0.'),
            ('setup.py', _docstring('setup.py')),
            ('pyproject.toml', _header_comment('pyproject.toml', '#')),
            ('tox.ini', _header_comment('tox.ini', '#'))]
    for path in _files('janus', ('.py',)):
        if os.path.basename(path) == '__init__.py':
            rows.append((os.path.dirname(path) + '/', _docstring(path)))
        else:
            rows.append((path, _docstring(path)))
    rows.append(('janus_ops/', _docstring('janus_ops/__init__.py')))
    for path in _files('janus_ops', ('.cc',)):
        description = re.sub(r'^[\w>, ]+:\s*', '', _header_comment(path, '//'))
        ops = ', '.join('`%s`' % op for op in _registered_ops(path))
        rows.append((path, 'Ops %s: %s' % (ops, description)))
    for folder in ('examples', 'benchmarks'):
        rows += [(path, _docstring(path)) for path in _files(folder, ('.py',))]
    rows.append(('tests/', 'The test suite (pytest; `bash scripts/test.sh`); '
                 '`tests/conftest.py`: ' + _docstring('tests/conftest.py')))
    rows.append(('tests/fuzzing/', _docstring('tests/fuzzing/__init__.py')))
    for path in _files('scripts', ('.sh', '.py')):
        rows.append((path, _docstring(path) if path.endswith('.py')
                     else _header_comment(path, '#')))
    rows.append(('.ci/run', _header_comment('.ci/run', '#')))
    return rows


def render_layout():
    lines = ['| path | what it is |', '|---|---|']
    for path, what in layout_rows():
        lines.append('| `%s` | %s |' % (path, _markdown(what)))
    return '\n'.join(lines)


SECTIONS = {'requirements': render_requirements, 'knobs': render_knobs, 'layout': render_layout}


def render(text, names=None):
    """``text`` with each generated section it holds (of ``names``; all by default)
    regenerated."""
    for name, make in SECTIONS.items():
        begin, end = BEGIN % name, END % name
        start, stop = text.find(begin), text.find(end)
        if (names is not None and name not in names) or start < 0:
            continue
        if stop < start:
            raise SystemExit('markers %s ... %s: no end' % (begin, end))
        body = make()
        block = '\n%s\n' % body if '\n' in body else body   # tables on lines of their own
        text = text[:start + len(begin)] + block + text[stop:]
    return text


def rendered():
    """{document: (current text, regenerated text)}; every section in exactly one."""
    found = {}
    for path in DOCUMENTS:
        current = _read(path)
        found[path] = (current, render(current))
        for name in SECTIONS:
            if BEGIN % name in current:
                found.setdefault(name, []).append(path)
    for name in SECTIONS:
        if len(found.get(name, [])) != 1:
            raise SystemExit('section %s is in %s, not in exactly one of %s'
                             % (name, found.get(name, []), ', '.join(DOCUMENTS)))
        del found[name]
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--check', action='store_true',
                        help='change nothing; exit 1 (with a diff) if a document is stale')
    args = parser.parse_args(argv)
    stale = 0
    for path, (current, fresh) in rendered().items():
        if fresh == current:
            print('%s: already up to date' % path)
        elif args.check:
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(True), fresh.splitlines(True), path, 'regenerated'))
            print('%s is stale: run .venv/bin/python scripts/readme_sections.py' % path)
            stale = 1
        else:
            with open(os.path.join(ROOT, path), 'w', encoding='utf-8') as f:
                f.write(fresh)
            print('%s: regenerated' % path)
    return stale


if __name__ == '__main__':
    sys.exit(main())
