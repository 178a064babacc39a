"""Conversion identity: a function is converted from its own code, with its own objects.

janus converts a function's source once per code object and wraps that
conversion around each function's own globals and closure cells.  Code
objects compare equal by value (two modules with one text have *equal*
code objects), a wrapper made with ``functools.wraps`` points at another
function's source, a dedented excerpt changes a method's multi-line string,
a file can hold other text than the code Python runs (rewritten, edited,
``exec``'d again under one name), and an id names another object once the
first is freed.  None of these may hand one function's conversion, file,
globals or source to another.  Each test runs a program eagerly and under
janus on fresh objects, changes its state from outside mid-way so an
assumption breaks, and compares returns, exceptions, stdout and state after
every call.
"""
import functools
import gc
import importlib.util
import itertools
import linecache
import sys
import weakref

import janus
from conftest import assert_same
from test_outside_values import Box, c, converted, imperative, plan, run_both

_serial = itertools.count()


def _load(path, name=None):
    """A fresh module from ``path`` (a new name each time: both sides get their own)."""
    name = name or 'janus_test_identity_%d' % next(_serial)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _warm(fn, *args):
    """Runs a janus function of ``fn`` until it has a graph (its conversion is cached)."""
    jf = janus.function(fn)
    for _ in range(5):
        jf(*args)
    converted(jf)
    return jf


# ---------------------------------------------------------------------------
# Two modules, one text: equal code objects, each module's own globals and file
# ---------------------------------------------------------------------------

_MODEL_MODULE = '''
import tensorflow as tf

OFFSET = 1.0


class Model:
    def __init__(self):
        self.steps = 0
        self.log = []

    def step(self, x):
        scale = lambda v: v * 2.0
        self.steps += 1
        self.log.append(scale.__module__)
        return scale(x) + OFFSET, scale.__module__


def summed(x):
    return x + (x * 2.0).numpy().sum()
'''


def test_two_modules_with_one_text_keep_their_own_globals(tmp_path):
    (tmp_path / 'model_a.py').write_text(_MODEL_MODULE)
    (tmp_path / 'model_b.py').write_text(_MODEL_MODULE)

    def make():
        a, b = _load(tmp_path / 'model_a.py'), _load(tmp_path / 'model_b.py')
        assert a.Model.step.__code__ == b.Model.step.__code__   # equal, not identical
        _warm(a.Model().step, c([1.0, 2.0]))     # module a's conversion exists first
        model = b.Model()
        return model.step, Box(model=model, module=b)

    def rebind_offset(p):
        p.module.OFFSET = -3.0

    jf = run_both(make, plan(lambda p, i: ((c([1.0, float(i)]),), {}), 9, {6: rebind_offset}),
                  state=lambda p: [p.model.steps, [n == p.module.__name__ for n in p.model.log]],
                  same=lambda p, r: (r[1] == p.module.__name__,),
                  view=lambda r: r[0])
    converted(jf)


def test_two_modules_with_one_text_name_their_own_file(tmp_path):
    (tmp_path / 'model_a.py').write_text(_MODEL_MODULE)
    (tmp_path / 'model_b.py').write_text(_MODEL_MODULE)
    a, b = _load(tmp_path / 'model_a.py'), _load(tmp_path / 'model_b.py')
    for module in (a, b):   # refused while tracing (.numpy() of a symbolic tensor)
        jf = janus.function(module.summed)
        for i in range(5):
            assert_same(module.summed(c(float(i))), jf(c(float(i))))
        imperative(jf, 'numpy')
        report = janus.explain(jf)
        other = b if module is a else a
        assert '%s:' % module.__file__ in report, report
        assert other.__file__ not in report, report


_HELPER_MODULE = '''
def helper(x, inner=None):
    if inner is None:
        return x + 1.0
    return inner(x) * 2.0
'''


def test_a_function_calling_its_twin_from_another_module(tmp_path):
    """Equal code objects are two functions: one calling the other is no recursion."""
    (tmp_path / 'twin_a.py').write_text(_HELPER_MODULE)
    (tmp_path / 'twin_b.py').write_text(_HELPER_MODULE)

    def make():
        a, b = _load(tmp_path / 'twin_a.py'), _load(tmp_path / 'twin_b.py')
        model = Box(a=a, b=b, calls=0)

        def step(x):
            model.calls += 1
            return model.a.helper(x, model.b.helper)
        return step, model

    def swap(model):
        model.a, model.b = model.b, model.a

    jf = run_both(make, plan(lambda model, i: ((c([1.0, float(i)]),), {}), 9, {6: swap}),
                  state=lambda model: model.calls)
    converted(jf)


def test_one_code_object_run_in_two_namespaces():
    """The fuzzer's pattern: one compiled module run in two namespaces (eager, janus)."""
    source = ('def step(box, x):\n'
              '    helper = lambda v: v + BIAS\n'
              '    box.calls += 1\n'
              '    return helper(x) * 2.0, helper.__module__, helper.__globals__ is NS\n')
    filename = '<janus test namespaces>'
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, 'exec')

    def run(name, bias):
        ns = {'__name__': name, 'BIAS': bias}
        ns['NS'] = ns
        exec(code, ns)   # noqa: S102 - the program under test
        return ns

    first = run('first_namespace', 100.0)
    made = []

    def make():
        ns = run('second_namespace_%d' % len(made), 1.0)
        made.append(ns)
        _warm(functools.partial(first['step'], Box(calls=0)), c(1.0))
        box = Box(calls=0)
        return functools.partial(ns['step'], box), Box(ns=ns, box=box)

    jf = run_both(make, plan(lambda p, i: ((c(float(i)),), {}), 8,
                             {5: lambda p: p.ns.update(BIAS=-5.0)}),
                  state=lambda p: p.box.calls,
                  view=lambda r: (r[0], r[1].rsplit('_', 1)[0], r[2]))
    converted(jf)


def test_one_code_object_exec_in_two_modules_from_one_file(tmp_path):
    """One code object (one compile of a file) run as two modules: one conversion,
    each module's globals."""
    path = tmp_path / 'shared_code.py'
    path.write_text(_MODEL_MODULE)
    code = compile(path.read_text(), str(path), 'exec')

    def module_from_code(bias):
        module = type(sys)('janus_test_identity_code_%d' % next(_serial))
        module.__file__ = str(path)
        sys.modules[module.__name__] = module
        exec(code, module.__dict__)   # noqa: S102 - the program under test
        module.OFFSET = bias
        return module

    def make():
        first, second = module_from_code(100.0), module_from_code(1.0)
        assert first.Model.step.__code__ is second.Model.step.__code__
        _warm(first.Model().step, c([1.0, 2.0]))
        model = second.Model()
        return model.step, Box(model=model, module=second)

    jf = run_both(make, plan(lambda p, i: ((c([1.0, float(i)]),), {}), 9,
                             {6: lambda p: setattr(p.module, 'OFFSET', 7.0)}),
                  state=lambda p: [p.model.steps, [n == p.module.__name__ for n in p.model.log]],
                  same=lambda p, r: (r[1] == p.module.__name__,),
                  view=lambda r: r[0])
    converted(jf)


# ---------------------------------------------------------------------------
# A wrapper's own code, never the source ``__wrapped__`` points at
# ---------------------------------------------------------------------------

def doubled(fn):
    @functools.wraps(fn)
    def call(*args):
        return fn(*args) * 2.0
    return call


def logged(fn):
    @functools.wraps(fn)
    def wrapper(self, x):
        self.wrapped_calls += 1
        return fn(self, x) - 1.0
    return wrapper


class Dense:
    def __init__(self):
        self.bias = c([0.5, 0.5])
        self.calls = 0
        self.wrapped_calls = 0

    @doubled
    def call(self, x):          # the wrapper's def is named ``call`` too
        self.calls += 1
        return x + self.bias

    @logged
    def apply(self, x):
        self.calls += 1
        return x * self.bias


def test_wrapper_named_like_the_function_it_wraps():
    def rebias(layer):
        layer.bias = c([-1.0, 2.0])

    jf = run_both(lambda: (Dense.call, Dense()),
                  plan(lambda layer, i: ((layer, c([1.0, float(i)])), {}), 9, {6: rebias}),
                  state=lambda layer: [layer.calls, layer.bias])
    converted(jf)


def test_wrapper_with_its_own_name():
    def rebias(layer):
        layer.bias = c([3.0, 2.0])

    jf = run_both(lambda: (Dense.apply, Dense()),
                  plan(lambda layer, i: ((layer, c([1.0, float(i)])), {}), 9, {6: rebias}),
                  state=lambda layer: [layer.calls, layer.wrapped_calls, layer.bias])
    converted(jf)


# ---------------------------------------------------------------------------
# A method's multi-line string literal keeps its indentation
# ---------------------------------------------------------------------------

class Reporter:
    def __init__(self):
        self.log = []
        self.scale = 2.0

    def step(self, x):
        self.log.append("""step
            indented as written""")
        self.log.append(f"""scale
            {self.scale}""")
        return x * self.scale


def test_multiline_string_in_a_method_keeps_its_indentation():
    def make():
        reporter = Reporter()
        return reporter.step, reporter

    jf = run_both(make,
                  plan(lambda r, i: ((c([1.0, float(i)]),), {}), 8,
                       {5: lambda r: setattr(r, 'scale', 3.0)}),
                  state=lambda r: list(r.log))
    converted(jf)


# ---------------------------------------------------------------------------
# The file holds other text than the code Python runs
# ---------------------------------------------------------------------------

_GENERATED = ('import tensorflow as tf\n'
              '\n'
              'def step(box, x):\n'
              '    box.calls += 1\n'
              '    return x %s %s\n')


def _exec_file(path, text, name):
    path.write_text(text)
    module = type(sys)(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    exec(compile(text, str(path), 'exec'), module.__dict__)   # noqa: S102 - the program
    return module


def test_code_exec_again_under_one_file_name(tmp_path):
    """Code written to one path and run, again and again: a function converts only while
    the file holds its text; an older one runs imperatively (never the newer text)."""
    path = tmp_path / 'generated.py'

    def make():
        n = next(_serial)
        old = _exec_file(path, _GENERATED % ('+', '1.0'), 'janus_test_gen_old_%d' % n)
        new = _exec_file(path, _GENERATED % ('*', '100.0'), 'janus_test_gen_new_%d' % n)
        box = Box(calls=0, new=new)
        return functools.partial(old.step, box), box

    jf = run_both(make, plan(lambda box, i: ((c([1.0, float(i)]),), {}), 8,
                             {5: lambda box: setattr(box, 'calls', 10)}),
                  state=lambda box: box.calls)
    imperative(jf, 'not the code Python runs')

    def make_new():
        n = next(_serial)
        _exec_file(path, _GENERATED % ('+', '1.0'), 'janus_test_gen_old_%d' % n)
        new = _exec_file(path, _GENERATED % ('*', '100.0'), 'janus_test_gen_new_%d' % n)
        box = Box(calls=0)
        return functools.partial(new.step, box), box

    jf = run_both(make_new, plan(lambda box, i: ((c([1.0, float(i)]),), {}), 8,
                                 {5: lambda box: setattr(box, 'calls', 10)}),
                  state=lambda box: box.calls)
    converted(jf)


def test_module_edited_after_import(tmp_path):
    path = tmp_path / 'edited.py'

    def make():
        path.write_text(_GENERATED % ('+', '1.0'))
        module = _load(path)
        path.write_text(_GENERATED % ('-', '5.0'))   # edited, not reloaded
        box = Box(calls=0)
        return functools.partial(module.step, box), box

    jf = run_both(make, plan(lambda box, i: ((c([2.0, float(i)]),), {}), 8,
                             {5: lambda box: setattr(box, 'calls', -1)}),
                  state=lambda box: box.calls)
    imperative(jf, 'not the code Python runs')


# ---------------------------------------------------------------------------
# Functions made in a loop: one code object, each its own cells
# ---------------------------------------------------------------------------

def _make_layers(scales):
    layers = []
    for scale in scales:
        def layer(x, scale=scale):   # one code object, each its own default
            return x * scale
        layers.append(layer)
    return layers


def _make_closures(scales):
    def make(scale):
        state = Box(scale=scale)

        def apply(x):
            return x * state.scale + scale
        apply.weights = state
        return apply
    return [make(s) for s in scales]


def test_closures_made_in_a_loop_each_keep_their_own_cells():
    def make():
        closures = _make_closures([c(1.0), c(2.0), c(-3.0)])
        assert len({f.__code__ for f in closures}) == 1
        jfs_first = [janus.function(f) for f in closures[:2]]   # shared conversion first
        for jf in jfs_first:
            for _ in range(4):
                jf(c([1.0, 1.0]))
        return closures[2], Box(closures=closures)

    jf = run_both(make, plan(lambda p, i: ((c([1.0, float(i)]),), {}), 9,
                             {6: lambda p: setattr(p.closures[2].weights, 'scale', c(10.0))}),
                  state=lambda p: [f.weights.scale for f in p.closures])
    converted(jf)


def test_one_janus_function_calls_closures_made_in_a_loop():
    def make():
        closures = _make_closures([c(1.0), c(2.0), c(-3.0)])
        layers = _make_layers([c(0.5), c(4.0)])

        def forward(x):
            for apply in closures:
                x = apply(x)
            for layer in layers:
                x = layer(x)
            return x
        return forward, Box(closures=closures, layers=layers)

    def rescale(p):
        p.closures[1].weights.scale = c(-2.0)

    jf = run_both(make, plan(lambda p, i: ((c([1.0, float(i)]),), {}), 10, {6: rescale}),
                  state=lambda p: [f.weights.scale for f in p.closures])
    converted(jf)


def test_function_attributes_named_like_janus_own():
    """``update_wrapper`` copies a function's ``__dict__`` onto its janus function: a
    user's ``step.state``/``step.events`` must not replace janus's records."""
    def make():
        model = Box(steps=0)

        def step(x):
            model.steps += 1
            return x * 2.0
        step.state, step.events, step.name = 'warm', ['created'], 'train step'
        return step, model

    jf = run_both(make, plan(lambda model, i: ((c([1.0, float(i)]),), {}), 8,
                             {5: lambda model: setattr(model, 'steps', 100)}),
                  state=lambda model: model.steps)
    converted(jf)


# ---------------------------------------------------------------------------
# Freed code objects: their ids come back for other code
# ---------------------------------------------------------------------------

def test_code_ids_reused_after_the_old_code_was_freed(tmp_path):
    """Functions made from text, run, and dropped, one after the other: a new code
    object often lands at a freed one's address (its id), and must convert as itself."""
    path = tmp_path / 'generated.py'
    for n in range(12):
        op, constant = '+-*'[n % 3], float(n + 1)
        text = _GENERATED % (op, constant)

        def make():
            module = _exec_file(path, text, 'janus_test_ids_%d' % next(_serial))
            box = Box(calls=0)
            return functools.partial(module.step, box), box
        jf = run_both(make, plan(lambda box, i: ((c([1.0, float(i)]),), {}), 6),
                      state=lambda box: box.calls)
        converted(jf)
        del jf, make
        gc.collect()


def test_a_converted_closure_is_freed_with_its_function():
    """What janus keeps per code object keeps no function, globals or cell alive."""
    class Weights:
        def __init__(self):
            self.value = c([1.0, 2.0])

    def make(weights):
        def step(x):
            return x * weights.value
        return step

    weights = Weights()
    jf = janus.function(make(weights))
    for i in range(5):
        assert_same(jf(c([1.0, float(i)])), c([1.0, float(i)]) * weights.value)
    converted(jf)
    freed = weakref.ref(weights)
    del jf, weights
    gc.collect()
    assert freed() is None

