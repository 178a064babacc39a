"""Structural invariants of the code base that the design relies on.

The import graph of ``janus/`` has no cycle, counting function-level imports,
and function-level janus imports come only from an allowlist with reasons.
Replay (``janus/replay/``) imports neither the generator nor trace time;
trace time never reaches the front door; ``operators`` is only the ``__jr``
namespace.  The runtime never imports the generator (the converter is handed to each
trace), and the profiler and the converter share one site numbering
(``pyct.frontend``), so assumptions cannot be pinned to the wrong sites.
"""
import ast
import pathlib

import tensorflow as tf

import janus
from conftest import differential
from janus.graphgen import generator
from janus.library import whitelist

JANUS = pathlib.Path(janus.__file__).parent
# The runtime tier: trace time's packages, one concept each (ARCHITECTURE.md section 3).
RUNTIME_PACKAGES = ('graph', 'trace', 'values', 'heap', 'control', 'recursion', 'library')
RUNTIME = tuple('janus.' + name for name in RUNTIME_PACKAGES)


def _in_runtime(module):
    return any(module == p or module.startswith(p + '.') for p in RUNTIME)


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def _module_name(path):
    parts = path.relative_to(JANUS.parent).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def _janus_imports(path, known):
    """(imported module, line, at function level) for each janus import in ``path``."""
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                       ast.Lambda))
            targets = []
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0 \
                    and child.module.split('.')[0] == 'janus':
                for alias in child.names:
                    full = child.module + '.' + alias.name
                    targets.append(full if full in known else child.module)
            elif isinstance(child, ast.Import):
                targets += [a.name for a in child.names if a.name.split('.')[0] == 'janus']
            found.extend((target, child.lineno, in_function) for target in targets)
            visit(child, nested)
    visit(ast.parse(path.read_text()), False)
    return found


def _import_graph():
    paths = {_module_name(p): p for p in JANUS.rglob('*.py')}
    return paths, {name: _janus_imports(path, paths) for name, path in paths.items()}


# The only function-level janus imports, each with its reason.
FUNCTION_LEVEL_ALLOWED = {}   # (importer, imported) -> why; none today


def test_the_import_graph_has_no_cycle():
    """Module-level and function-level imports both count."""
    paths, graph = _import_graph()
    edges = {name: {target for target, _, _ in imports if target in paths}
             for name, imports in graph.items()}
    state, cycle = {}, []

    def visit(name, stack):
        state[name] = 'open'
        for target in sorted(edges[name]):
            if state.get(target) == 'open':
                cycle.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target, stack + [target])
        state[name] = 'done'
    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert cycle == []


def test_function_level_janus_imports_only_from_the_allowlist():
    _, graph = _import_graph()
    found = sorted((name, target, line) for name, imports in graph.items()
                   for target, line, in_function in imports
                   if in_function and (name, target) not in FUNCTION_LEVEL_ALLOWED)
    assert found == []


# Trace-time modules replay may use: the heap ops' run-time callbacks, the op
# loader, and the write records (``Write.apply``) with the run's call arguments.
REPLAY_MAY_USE = {'janus.heap', 'janus.heap.heap', 'janus.graph', 'janus.graph.ops',
                  'janus.heap.shadow_heap'}


def _reaches(graph, start):
    seen, stack = set(), [start]
    while stack:
        for target, _, _ in graph.get(stack.pop(), ()):
            if target in graph and target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def test_replay_does_not_import_the_generator_or_trace_time():
    _, graph = _import_graph()
    offenders = sorted((name, target) for name, imports in graph.items()
                       if name.startswith('janus.replay')
                       for target, _, _ in imports
                       if target.startswith('janus.graphgen') or (
                           _in_runtime(target) and target not in REPLAY_MAY_USE))
    assert offenders == []


def test_trace_time_does_not_import_the_front_door():
    """Nothing trace time reaches imports api, explain or the replay package's entry."""
    _, graph = _import_graph()
    front = {'janus.api', 'janus.explain', 'janus.replay.entry', 'janus.replay.executor'}
    offenders = sorted((name, sorted(_reaches(graph, name) & front)) for name in graph
                       if _in_runtime(name) and _reaches(graph, name) & front)
    assert offenders == []


def test_operators_is_only_a_namespace_for_generated_code():
    """``__jr`` re-exports; no janus module but the tracer's generator binds it."""
    _, graph = _import_graph()
    users = sorted(name for name, imports in graph.items()
                   if any(target == 'janus.trace.operators' for target, _, _ in imports))
    assert users == ['janus.graphgen.generator']
    tree = ast.parse((JANUS / 'trace' / 'operators.py').read_text())
    assert all(isinstance(node, (ast.ImportFrom, ast.Expr)) for node in tree.body)


def test_runtime_does_not_import_the_generator():
    offenders = [(str(path.relative_to(JANUS)), module) for name in RUNTIME_PACKAGES
                 for path in sorted((JANUS / name).rglob('*.py'))
                 for module in _imports(path) if module.startswith('janus.graphgen')]
    assert offenders == []


def test_the_runtime_packages_are_janus_runtime():
    """The whitelist calls every runtime package's helpers, never converts them."""
    assert set(whitelist.JANUS_RUNTIME) == set(RUNTIME)
    assert all((JANUS / name / '__init__.py').exists() for name in RUNTIME_PACKAGES)


# control/: each module imports only those before it (its __init__ lists them).
CONTROL_ORDER = ('common', 'values', 'branch_writes', 'hoisting', 'cond', 'loops', 'datasets',
                 'outside_iterators', 'exceptions', 'statements')


def test_control_modules_import_only_those_before_them():
    control = JANUS / 'control'
    assert sorted(p.stem for p in control.glob('*.py') if p.stem != '__init__') == \
        sorted(CONTROL_ORDER)
    offenders = []
    for rank, name in enumerate(CONTROL_ORDER):
        for module in _imports(control / (name + '.py')):
            if module.startswith('janus.control.'):
                imported = module.rsplit('.', 1)[1]
                if CONTROL_ORDER.index(imported) >= rank:
                    offenders.append((name, imported))
    assert offenders == []


def test_the_profiler_and_the_generator_share_one_site_numbering():
    """One parse and one numbering per code object (``pyct.frontend``): the sites the
    profiler recorded are the very ``Site`` objects the converted function carries."""
    def make():
        def f(x):
            if tf.reduce_sum(x) > 0:
                return x * 2.0
            return x - 1.0
        return f, None
    calls = [((tf.constant([float(i) - 3.0]),), {}) for i in range(7)]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] >= 1
    code = jf.function.__code__
    converted = generator.convert(jf.function)
    recorded = {site_id: site for (site_code, site_id), site in jf.profile.site_info.items()
                if site_code is code}
    assert recorded and all(converted.sites[i] is site for i, site in recorded.items())


# The tiers, lowest first: a module imports only from its own tier and those below it
# (ARCHITECTURE.md section 3).  Replay and generation share a tier; replay never imports
# the generator (above).
FOUNDATION = ('janus.config', 'janus.errors', 'janus.reasons', 'janus.guards', 'janus.sources',
              'janus.pytypes', 'janus.decisions', 'janus.events', 'janus.call_through',
              'janus.pyct')
# The profiler is the pipeline's first stage (profile -> generate): the generator reads it.
GENERATION = ('janus.graphgen', 'janus.replay', 'janus.profiler')


def _tier(module):
    for rank, prefixes in enumerate((FOUNDATION, RUNTIME, GENERATION)):
        if any(module == p or module.startswith(p + '.') for p in prefixes):
            return rank
    return 3   # the front door: janus itself, api and the rest of janus/*.py


def _type_checking_lines(path):
    """Lines of the imports under ``if TYPE_CHECKING:``: names for hints only, which
    run nothing (a hint may name a higher tier's record)."""
    lines = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.If) and getattr(node.test, 'id', None) == 'TYPE_CHECKING':
            lines.update(child.lineno for stmt in node.body for child in ast.walk(stmt)
                         if isinstance(child, (ast.Import, ast.ImportFrom)))
    return lines


def test_each_tier_imports_only_from_its_own_and_those_below():
    paths, graph = _import_graph()
    offenders = sorted((name, target) for name, imports in graph.items()
                       for target, line, _ in imports
                       if target in graph and _tier(target) > _tier(name)
                       and line not in _type_checking_lines(paths[name]))
    assert offenders == []


def test_every_module_of_the_top_level_is_in_a_named_tier():
    """A new module in janus/*.py is the front door unless FOUNDATION names it; the
    front door's modules are listed so that a new one is placed on purpose."""
    front_door = {'janus', 'janus.api', 'janus.generation', 'janus.fallback',
                  'janus.function_state', 'janus.cache', 'janus.floor', 'janus.relaxation',
                  'janus.explain', 'janus.story', 'janus.advising', 'janus.optimizer',
                  'janus.distributed'}
    top = {_module_name(path) for path in JANUS.glob('*.py')}
    assert top == front_door | {m for m in FOUNDATION if m != 'janus.pyct'} | {'janus.profiler'}


def test_no_module_reaches_into_another_modules_private_names():
    """``from janus.x import _name`` or ``x._name`` on a janus module: a private name is
    its module's own; what another module needs is public (dunders aside)."""
    paths, _ = _import_graph()
    found = []
    for name, path in paths.items():
        tree = ast.parse(path.read_text())
        modules = {}   # local name -> the janus module it binds
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                    and node.module.split('.')[0] == 'janus':
                for alias in node.names:
                    full = node.module + '.' + alias.name
                    if full in paths:
                        modules[alias.asname or alias.name] = full
                    elif alias.name.startswith('_') and not alias.name.startswith('__'):
                        found.append((name, node.module, alias.name))
        found += [(name, modules[node.value.id], node.attr) for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id in modules and node.attr.startswith('_')
                  and not node.attr.startswith('__')]
    assert sorted(set(found)) == []
