"""The README (and the documents it leads to: docs/, benchmarks/README.md) is what a
new user follows line by line: keep it true.

Fails when a file the README names is gone, when a command in it names a
script, example, module or flag that does not exist (or a bare ``python`` /
``horovodrun`` that only an activated venv would find), when a ``janus.*``
name or ``JANUS_*`` variable it mentions does not exist, or when a section
``scripts/readme_sections.py`` generates is stale.  Reads files only: runs no
demo, benchmark or script (fast; janus is already imported by conftest).
"""
import ast
import importlib.util
import itertools
import os
import re
import shlex

import pytest

import janus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_PATH = os.path.join(ROOT, 'README.md')
# The front door and the pages it links to (scripts/readme_sections.py's DOCUMENTS).
DOCUMENTS = ('README.md', 'docs/guide.md', 'docs/reference.md', 'benchmarks/README.md')
FRONT_DOOR_BYTES = 15 * 1024
FIRST_SCREEN_LINES = 50
# The benchmark table is benchmarks/paper_table.py's output, not hand-written.
TABLE = re.compile(r'<!-- paper-table:begin -->.*?<!-- paper-table:end -->', re.S)
# Where the README names a file relative to a package (`trace/observe.py`).
PATH_BASES = ('', 'janus', 'janus_ops')


def _load_sections():
    spec = importlib.util.spec_from_file_location(
        'readme_sections', os.path.join(ROOT, 'scripts', 'readme_sections.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read(path):
    with open(os.path.join(ROOT, path), encoding='utf-8') as f:
        return f.read()


def _readme():
    """Every document, one after the other (the README first)."""
    return '\n'.join(_read(path) for path in DOCUMENTS)


def _prose():
    return TABLE.sub('', _readme())


def _fenced_blocks(text):
    """[(language, body)] of the ``` blocks."""
    return re.findall(r'^```(\w*)\n(.*?)^```', text, re.M | re.S)


def _inline_code(text):
    without_blocks = re.sub(r'^```.*?^```', '', text, flags=re.M | re.S)
    return [span.replace('\n', ' ') for span in re.findall(r'`([^`]+)`', without_blocks)]


COMMAND_START = re.compile(r'^(bash |(\.venv|~/janus-env)/bin/\w+ |python3? |horovodrun )')
SHELL_BLOCKS = ('', 'sh', 'bash', 'shell')   # ```text and ```python blocks are not commands


def _commands():
    """Every shell command the README gives: lines of shell (or unlabelled) fenced
    blocks, and inline code that starts like a command (`pip ...` in prose is a
    description, not a command).  Comments stripped, `&&` split."""
    text = _prose()
    lines = []
    for language, body in _fenced_blocks(text):
        if language in SHELL_BLOCKS:
            lines += body.splitlines()
    lines += [span for span in _inline_code(text) if COMMAND_START.match(span)]
    commands = []
    for line in lines:
        line = re.sub(r'(^|\s)#.*$', '', line).strip()
        commands += [part.strip() for part in re.split(r'&&|;|\|\|', line) if part.strip()]
    return commands


def _expand_braces(path):
    match = re.search(r'\{([^{}]*)\}', path)
    if not match:
        return [path]
    return list(itertools.chain.from_iterable(
        _expand_braces(path[:match.start()] + choice + path[match.end():])
        for choice in match.group(1).split(',')))


def _exists(path):
    return any(os.path.exists(os.path.join(ROOT, base, path)) for base in PATH_BASES)


PATH_LIKE = re.compile(r'(?<![\w./~$<-])(\.?[\w-]+/(?:[\w.{},-]+/?)*)')


def _named_paths():
    """Repository paths the README names, in inline code and in command blocks."""
    text = _prose()
    spans = _inline_code(text) + [body for language, body in _fenced_blocks(text)
                                  if language != 'python']
    found = set()
    for span in spans:
        for match in PATH_LIKE.finditer(span):
            path = match.group(1).rstrip('.,')
            if '://' in span[max(0, match.start() - 3):match.end()]:
                continue
            found.add(path)
    return sorted(found)


def test_generated_sections_are_up_to_date():
    sections = _load_sections()
    assert sections.DOCUMENTS == DOCUMENTS
    for path, (current, fresh) in sections.rendered().items():
        assert fresh == current, (
            '%s is stale: run `.venv/bin/python scripts/readme_sections.py` and commit it' % path)


def test_the_readme_is_a_front_door():
    """Small, and its first screen says how to install, how to run, and what happens
    to a ``print(loss.numpy())``."""
    readme = _read('README.md')
    assert len(readme.encode('utf-8')) <= FRONT_DOOR_BYTES, len(readme.encode('utf-8'))
    first = '\n'.join(readme.split('\n')[:FIRST_SCREEN_LINES])
    for needed in ('bash scripts/demo.sh', 'bash scripts/test.sh', 'print(loss.numpy())'):
        assert needed in first, needed


def test_every_link_between_documents_resolves():
    problems = []
    for path in DOCUMENTS + ('ARCHITECTURE.md', 'DESIGN.md'):
        for target in re.findall(r'\]\(([^)#\s]+)(?:#[^)]*)?\)', _read(path)):
            if '://' in target:
                continue
            if not os.path.exists(os.path.join(ROOT, os.path.dirname(path), target)):
                problems.append('%s links to %s' % (path, target))
    assert problems == [], problems


def test_every_file_the_readme_names_exists():
    paths = _named_paths()
    assert 'janus/api.py' in paths and 'trace/observe.py' in paths   # the scan works
    missing = [path for path in paths
               if not path.startswith('.venv/')
               and not all(_exists(p) for p in _expand_braces(path))]
    assert missing == [], 'README.md names files that do not exist: %s' % missing


def _flags_of(script):
    """Every --flag string literal of a Python script and of the local modules it
    imports (examples import common.py, which holds their argparse)."""
    flags, seen, todo = set(), set(), [os.path.join(ROOT, script)]
    while todo:
        path = todo.pop()
        if path in seen or not os.path.exists(path):
            continue
        seen.add(path)
        tree = ast.parse(open(path, encoding='utf-8').read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                flags.update(re.findall(r'^--[\w-]+$', node.value))
            elif isinstance(node, ast.Import):
                todo += [os.path.join(os.path.dirname(path), alias.name + '.py')
                         for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                todo.append(os.path.join(os.path.dirname(path), node.module + '.py'))
    return flags


def _forwarded_script(shell_script):
    """The Python script a scripts/*.sh runs with its own arguments ("$@"), if any."""
    source = open(os.path.join(ROOT, shell_script), encoding='utf-8').read()
    match = re.search(r'"\$VENV_PYTHON"\s+(\S+\.py)\s+"\$@"', source)
    return match.group(1) if match else None


def _check_python_command(words, problems, command):
    """words: what follows `.venv/bin/python`."""
    if not words:
        return
    if words[0] == '-m':
        module = words[1]
        if not (_exists(module.replace('.', '/') + '.py')
                or _exists(module.replace('.', '/') + '/__main__.py')
                or importlib.util.find_spec(module) is not None):
            problems.append('%s: no module %s' % (command, module))
        return
    if words[0] == '-c':
        try:
            compile(words[1], '<README>', 'exec')
        except SyntaxError as e:
            problems.append('%s: %s' % (command, e))
        return
    script = words[0]
    if not _exists(script):
        problems.append('%s: no file %s' % (command, script))
        return
    _check_flags(script, words[1:], problems, command)


def _check_flags(script, arguments, problems, command):
    known = _flags_of(script)
    for word in arguments:
        flag = word.split('=')[0]
        if flag.startswith('--') and flag not in known:
            problems.append('%s: %s has no flag %s' % (command, script, flag))


def test_every_readme_command_names_what_exists():
    commands = _commands()
    assert any(c.startswith('bash scripts/test.sh') for c in commands)   # the scan works
    problems = []
    for command in commands:
        words = shlex.split(command)
        program = words[0]
        if program in ('python', 'pip', 'horovodrun'):
            problems.append('%s: a fresh shell has no %s from .venv (use .venv/bin/%s)'
                            % (command, program, program))
        elif program == 'bash':
            script = words[1]
            if not _exists(script):
                problems.append('%s: no file %s' % (command, script))
            elif _forwarded_script(script):
                _check_flags(_forwarded_script(script), words[2:], problems, command)
            elif script == 'scripts/test.sh':
                problems += ['%s: no file %s' % (command, w) for w in words[2:]
                             if not w.startswith('-') and not _exists(w.split('::')[0])]
        elif program.endswith('/python') or program.endswith('/python3'):
            if program.startswith('.venv/') or program.startswith('~/'):
                _check_python_command(words[1:], problems, command)
        elif program.endswith('/horovodrun'):
            python = next(i for i, w in enumerate(words) if w.endswith('/python'))
            _check_python_command(words[python + 1:], problems, command)
        elif program.endswith('/pip'):
            for word in words[2:]:
                target = word.split('[')[0]
                if target.startswith('.') and not os.path.isdir(os.path.join(ROOT, target)):
                    problems.append('%s: no directory %s' % (command, target))
        elif program == '.venv/bin/ruff':
            if words[1:] != ['check', '.'] or 'ruff' not in open(os.path.join(ROOT, '.ci/run')).read():
                problems.append('%s: not the linter command .ci/run runs' % command)
        elif program.startswith('VENV_PYTHON='):
            if not _exists(words[2]):
                problems.append('%s: no file %s' % (command, words[2]))
        elif program not in ('python3', 'source', 'tox'):
            problems.append('%s: unknown kind of command (teach tests/test_readme.py)' % command)
    assert problems == [], '\n'.join(problems)


def test_readme_install_command_matches_setup_py():
    setup = open(os.path.join(ROOT, 'setup.py'), encoding='utf-8').read()
    assert "name='janus-tf'" in setup
    prose = _prose()
    assert 'janus-tf' in prose
    extras = set(re.findall(r"'(\w+)': \[", setup.split('extras_require=')[1].split(')')[0]))
    for extra in re.findall(r'\.\[(\w+)\]', prose):
        assert extra in extras, 'README installs extra %r, setup.py has %s' % (extra, extras)
    assert 'pip install janus ' not in prose and 'pip install janus\n' not in prose


def test_janus_names_and_environment_variables_exist():
    prose = _prose()
    problems = []
    for dotted in sorted(set(re.findall(r'`(janus(?:\.\w+)+)', prose))):
        value = janus
        for part in dotted.split('.')[1:]:
            if not hasattr(value, part):
                problems.append('%s: janus has no %s' % (dotted, part))
                break
            value = getattr(value, part)
    knobs = {name for name, _, _ in _load_sections().knobs()}
    for variable in sorted(set(re.findall(r'\bJANUS_(\w+)', prose))):
        if variable.lower() not in knobs:
            problems.append('JANUS_%s: janus/config.py has no knob %s'
                            % (variable, variable.lower()))
    assert problems == [], problems


def test_every_op_and_module_is_in_the_readme():
    prose = _prose()
    ops = re.findall(r'REGISTER_OP\("([^"]+)"\)', ''.join(
        open(os.path.join(ROOT, 'janus_ops', name), encoding='utf-8').read()
        for name in os.listdir(os.path.join(ROOT, 'janus_ops')) if name.endswith('.cc')))
    assert ops and all(op in prose for op in ops)
    for directory, _, names in os.walk(os.path.join(ROOT, 'janus')):
        for name in names:
            if name.endswith('.py') and name != '__init__.py':
                path = os.path.relpath(os.path.join(directory, name), ROOT)
                assert '`%s`' % path in prose, path


@pytest.mark.parametrize('script', sorted(
    name for name in os.listdir(os.path.join(ROOT, 'scripts')) if name.endswith('.sh')))
def test_scripts_are_valid_bash(script):
    import subprocess
    done = subprocess.run(['bash', '-n', os.path.join(ROOT, 'scripts', script)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
