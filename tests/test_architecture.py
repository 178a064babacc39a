"""ARCHITECTURE.md names the code as it is: every `module.function` it cites exists.

A name is checked when its first part is a janus module's file name
(``tracer.trace``, ``statements._decide_test``, ``api.JanusFunction._relax``):
the rest must be a top-level function, class or assignment of that module,
then a method or class attribute.  Read with ``ast``; nothing is imported.
"""
import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
JANUS = ROOT / 'janus'


def _modules():
    """{short name: [paths]} of janus's modules (a short name may be ambiguous)."""
    found = {}
    for path in JANUS.rglob('*.py'):
        name = path.parent.name if path.stem == '__init__' else path.stem
        found.setdefault(name, []).append(path)
    return found


def _knobs():
    """``config.<knob>`` names: the keys of ``_Config._DEFAULTS`` and its methods."""
    tree = ast.parse((JANUS / 'config.py').read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == '_DEFAULTS' for t in node.targets):
            names.update(k.arg for k in node.value.keywords)
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
    return names


def _members(tree):
    """{top-level name: {member names}} of a module (members of classes only)."""
    top = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            top[node.name] = set()
        elif isinstance(node, ast.ClassDef):
            members = set()
            for item in ast.walk(node):
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    members.add(item.name)
                elif isinstance(item, ast.Assign):
                    members.update(t.id for t in item.targets if isinstance(t, ast.Name))
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
                elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store):
                    members.add(item.attr)
            top[node.name] = members
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    top[target.id] = set()
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                top[(alias.asname or alias.name).split('.')[0]] = set()
    return top


def test_every_cited_name_exists():
    text = (ROOT / 'ARCHITECTURE.md').read_text()
    modules = _modules()
    knobs = _knobs()
    parsed = {}
    missing, checked = [], 0
    for span in re.findall(r'`([A-Za-z_][\w.]*)(?:\([^`]*\))?`', text):
        parts = span.split('.')
        if len(parts) < 2 or parts[0] not in modules or parts[0] == 'janus' \
                or parts[-1] in ('py', 'md'):
            continue
        if parts[0] == 'config':
            checked += 1
            if parts[1] not in knobs:
                missing.append(span)
            continue
        candidates = []
        for path in modules[parts[0]]:
            if path not in parsed:
                parsed[path] = _members(ast.parse(path.read_text()))
            candidates.append(parsed[path])
        ok = any(parts[1] in top and (len(parts) == 2 or parts[2] in top[parts[1]]
                                      or not top[parts[1]])
                 for top in candidates)
        checked += 1
        if not ok:
            missing.append(span)
    assert checked > 100   # the scan works
    assert missing == [], 'ARCHITECTURE.md cites names the code does not have: %s' % missing


def test_every_module_and_package_is_placed():
    """Section 3 ("Where things live") names every janus module under its package's
    bullet, and section 4 every mechanism's entry point (a new module gets a place)."""
    text = (ROOT / 'ARCHITECTURE.md').read_text()
    where = text.split('## 3. Where things live', 1)[1].split('\n## ', 1)[0]
    bullets = {}
    current = None   # a sub-bullet without a folder of its own belongs to the one above
    for bullet in re.split(r'\n\s*- ', where):
        head = re.match(r'`(janus[\w/]*/|janus/\*\.py)`', bullet)
        if head:
            current = head.group(1)
            bullets[current] = bullet
        elif current is not None:
            bullets[current] += bullet
    missing = []
    for path in sorted(JANUS.rglob('*.py')):
        if path.stem == '__init__' or '__pycache__' in path.parts:
            continue
        folder = path.parent.relative_to(ROOT).as_posix()
        bullet = bullets.get('janus/*.py' if folder == 'janus' else folder + '/')
        if bullet is None or '`%s`' % path.stem not in bullet:
            missing.append(path.relative_to(ROOT).as_posix())
    assert missing == [], 'ARCHITECTURE.md section 3 does not place: %s' % missing
    mechanisms = text.split('## 4. The mechanisms', 1)[1]
    for word in ('Graph breaks', 'nest into callees', 'Recursion', 'Datasets', 'pfor',
                 'shadow heap', 'floor'):
        assert word in mechanisms, word
