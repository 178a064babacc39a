"""Checks after a tf.cond on a variable the call changed (tests/fuzzing/FINDINGS.md, 7).

A step counter kept in a ``tf.Variable`` (``self.step.assign_add(1)``), then
``if self.step % 10 == 0: self.logged += 1``: a tf.cond whose test reads the
changed variable, writing a Python number (a dynamic scalar whose range
check is hoisted before the cond).  A speculated check made after it (a
branch's assumed outcome on a chained comparison, a loop's assumed trip
count) must not be ordered after that cond: TF's automatic control
dependencies chain stateful ops without a resource input in program order,
and every state change waits for every check, so the graph held a cycle TF
refused at run time (janus recovered by running plain Python).  Each test
compares janus with eager on fresh objects after every call (returns,
stdout, state), breaks the speculated outcome mid-way, and requires graph
runs and no janus-internal event.
"""
import importlib.util
import os
import tempfile

import janus
import tensorflow as tf

from conftest import differential


def graph_ran_cleanly(jf):
    """Graphs ran, and janus never failed on its own (no cycle TF refused)."""
    stats = janus.stats(jf)
    report = janus.explain(jf)
    assert stats['graph_calls'] > 0, report
    assert 'internal error' not in report and 'nodes in a cycle' not in report, report
    return stats


class Logger:
    def __init__(self, every=3):
        self.step = tf.Variable(0, dtype=tf.int64)
        self.logged = 0
        self.every = every

    def state(self):
        return self.step.numpy(), self.logged


class LoopAfterLog(Logger):
    def forward(self, xs):
        self.step.assign_add(1)
        if self.step % self.every == 0:
            self.logged += 1
        total = tf.zeros([])
        for x in xs:                  # the trip count is assumed
            total += x
        return total


class BranchAfterLog(Logger):
    def forward(self, x):
        self.step.assign_add(1)
        if self.step % self.every == 0:
            self.logged += 1
        if -0.125 < tf.reduce_sum(x) < 100.0:   # the outcome is assumed
            return x * 2.0
        return x - 1.0


def _make(cls):
    def make():
        model = cls()
        return model.forward, model
    return make


def test_loop_trip_count_after_a_cond_on_the_changed_step():
    sizes = [2, 2, 2, 3, 3, 2, 3, 3, 1, 3, 2, 3]   # the profiled trip count, then others
    calls = [(lambda n=n, i=i: ((tf.constant([0.25 * (i % 4) + 0.5] * n),), {}))
             for i, n in enumerate(sizes)]
    jf = differential(_make(LoopAfterLog), calls, state=Logger.state)
    graph_ran_cleanly(jf)


def test_branch_on_a_chained_comparison_after_a_cond_on_the_changed_step():
    sums = [1.0, 2.0, 0.5, 1.5, 2.5, 1.0, -3.0, 1.0, 2.0, 150.0, 0.75, 1.25]
    calls = [(lambda s=s: ((tf.constant([s / 2, s / 2]),), {})) for s in sums]
    jf = differential(_make(BranchAfterLog), calls, state=Logger.state)
    graph_ran_cleanly(jf)


def test_module_level_counter_and_loop_over_a_list():
    """The fuzzer's program: a global step variable, a global Python count."""
    source = (
        'import tensorflow as tf\n'
        'STEP = tf.Variable(0, dtype=tf.int64)\n'
        'LOGGED = 0\n'
        'def forward(x):\n'
        '    global LOGGED\n'
        '    STEP.assign_add(1)\n'
        '    if STEP % 2 == 0:\n'
        '        LOGGED += 1\n'
        '    for e in x:\n'
        '        pass\n'
        '    return LOGGED\n')

    directory = tempfile.mkdtemp(prefix='janus_cond_cycles_')
    path = os.path.join(directory, 'counter_program.py')
    with open(path, 'w') as f:
        f.write(source)
    loaded = []

    def make():   # a fresh module per side: its own variable and count
        spec = importlib.util.spec_from_file_location('counter_program_%d' % len(loaded), path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        loaded.append(module)
        return module.forward, module

    sizes = [2, 2, 2, 1, 2, 2, 3, 3, 2]
    calls = [(lambda n=n: ((tf.constant([1.0] * n),), {})) for n in sizes]
    jf = differential(make, calls,
                      state=lambda m: (m.STEP.numpy(), m.LOGGED))
    graph_ran_cleanly(jf)


def test_several_checks_after_the_cond_and_a_second_update():
    """Two speculated checks after the cond, then another variable update: every
    update still waits for both checks (a broken one changes nothing)."""
    class Model(Logger):
        def __init__(self):
            super().__init__(every=2)
            self.w = tf.Variable([1.0, 2.0])

        def forward(self, x):
            self.step.assign_add(1)
            if self.step % self.every == 0:
                self.logged += 1
            for e in x:
                pass
            if 0.0 < tf.reduce_sum(x) < 10.0:
                self.w.assign_add(x[:2])
            return self.w * 1.0

    def make():
        model = Model()
        return model.forward, model

    values = [[1.0, 1.0], [0.5, 1.0], [1.0, 0.25], [1.0, 1.5], [0.5, 0.5],
              [1.0, 1.0, 1.0], [2.0, 0.5], [20.0, 1.0], [1.0, 0.5], [0.25, 0.25]]
    calls = [(lambda v=v: ((tf.constant(v),), {})) for v in values]
    jf = differential(make, calls,
                      state=lambda m: (m.step.numpy(), m.logged, m.w.numpy().tolist()))
    graph_ran_cleanly(jf)


def test_a_checked_loop_that_reads_the_changed_step():
    """The loop whose trip count is checked also reads the changed step: the
    graph runs, results as eager."""
    class Model(Logger):
        def forward(self, xs):
            self.step.assign_add(1)
            if self.step % self.every == 0:
                self.logged += int(1)
            out = []
            for x in xs:
                out.append(x + tf.cast(self.step, tf.float32))
            return out

    def make():
        model = Model()
        return model.forward, model

    sizes = [1, 1, 1, 2, 2, 1, 2, 2, 3]
    calls = [(lambda n=n: ((tf.constant([0.5] * n),), {})) for n in sizes]
    jf = differential(make, calls, state=Logger.state)
    graph_ran_cleanly(jf)


class Leaf:
    def __init__(self, value, scale):
        self.value, self.scale, self.left = value, scale, None


class Branch:
    def __init__(self, left, scale):
        self.left, self.scale = left, scale


def _depth_sum(node, t):
    if node.left is None:
        return t * (node.value + 1) * node.scale
    return _depth_sum(node.left, t) * node.scale + t


def test_recursion_checks_after_a_pull_from_an_outside_iterator():
    """A loop pulling from an outside dataset iterator, then recursive calls over
    Python objects (graph functions that check their structure inside): the
    pulls run in program order with what may fail after them, and the checks
    before every change.  Chaining the checks after the pull closed a cycle
    (tests/fuzz_findings_breaks/ finding 15: every such call ran plain Python
    after an internal error)."""
    class Model:
        def __init__(self):
            self.calls = 0

        def forward(self, x, trees, batches):
            seen = tf.constant(0, tf.int64)
            for batch in batches:     # drains the iterator
                seen += batch
            acc = tf.abs(x)
            for tree in trees:
                acc = acc + _depth_sum(tree, acc)
            self.calls += 1
            return acc, seen

    def forest(seed, depth):
        trees = []
        for j in range(3):
            node = Leaf(seed % 5 + j, 0.5 * (j + 1))
            for _ in range(depth + j % 2):
                node = Branch(node, 0.25 * (seed % 3 + 1))
            trees.append(node)
        return trees

    calls = [(lambda i=i: ((tf.constant([1.0, 0.5 + 0.25 * i]), forest(i, 1 + i % 3),
                            iter(tf.data.Dataset.range(i % 3))), {}))
             for i in range(8)]
    jf = differential(_make(Model), calls, state=lambda m: m.calls)
    graph_ran_cleanly(jf)

