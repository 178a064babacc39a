"""Structural invariants of the code base that the design relies on.

The runtime never imports the generator (the converter is handed to each
trace), and the profiler's and converter's site numberings are checked to
agree, not hoped to: a disagreement is a janus bug, and the call runs
imperatively with the reason in ``explain`` rather than pinning assumptions
to the wrong sites.
"""
import ast
import pathlib

import tensorflow as tf

import janus
from conftest import differential
from janus.pyct import sites

RUNTIME = pathlib.Path(janus.__file__).parent / 'runtime'


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_runtime_does_not_import_the_generator():
    offenders = [(str(path.relative_to(RUNTIME)), module) for path in sorted(RUNTIME.rglob('*.py'))
                 for module in _imports(path) if module.startswith('janus.graphgen')]
    assert offenders == []


# runtime/control/: each module imports only those before it (its __init__ lists them).
CONTROL_ORDER = ('common', 'values', 'branch_writes', 'hoisting', 'cond', 'loops', 'statements')


def test_control_modules_import_only_those_before_them():
    control = RUNTIME / 'control'
    assert sorted(p.stem for p in control.glob('*.py') if p.stem != '__init__') == \
        sorted(CONTROL_ORDER)
    offenders = []
    for rank, name in enumerate(CONTROL_ORDER):
        for module in _imports(control / (name + '.py')):
            if module.startswith('janus.runtime.control.'):
                imported = module.rsplit('.', 1)[1]
                if CONTROL_ORDER.index(imported) >= rank:
                    offenders.append((name, imported))
    assert offenders == []


def test_a_site_numbering_mismatch_runs_the_call_imperatively(monkeypatch):
    monkeypatch.setattr(sites, 'first_mismatch', lambda profiled, converted: 'site 0 vs None')

    def make():
        def f(x):
            if tf.reduce_sum(x) > 0:
                return x * 2.0
            return x - 1.0
        return f, None
    calls = [((tf.constant([float(i) - 3.0]),), {}) for i in range(7)]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] == 0
    assert 'numbered the sites' in janus.explain(jf)
