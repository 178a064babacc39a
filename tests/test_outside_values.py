"""Outside values: everything a converted function reads that the call did not make.

Containers' truth and membership, NumPy arrays, user operand classes,
f-strings of tensors, arguments and defaults changed in place, aliasing,
globals and cells of one name, Enum modes, returned and unpacked outside
objects, callbacks handed to TF.  Every value the trace reads from outside
carries a source; every observation of it is guarded (it is re-checked
before each graph run) or refused (the call runs imperatively, the reason in
``janus.explain``).  Each test runs a program eagerly and under janus on
fresh objects, changes the program's state from outside between calls so
the first graph's assumption breaks mid-way, and compares returns,
exceptions, stdout, state and object identity after every call.

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import enum
import importlib.util

import numpy as np
import pytest
import tensorflow as tf

import janus
from conftest import assert_same, differential, outcome


@pytest.fixture(params=['hoisted', 'heap_ops'])
def heap_path(request):
    """Tests that read and write the heap run on both paths."""
    with janus.config.patch(heap_ops=request.param == 'heap_ops'):
        yield request.param


def c(value):
    return tf.constant(value)


def run_both(make, steps, state=None, same=None, capsys=None, enter=None, view=None,
             **janus_options):
    """``conftest.differential`` with the program's state changed between calls.

    ``make()`` returns (fn, program).  Each step is ``(change, call)``:
    ``change(program)`` (or None) changes the program's state from outside
    before the call, on each side; ``call(program)`` returns (args, kwargs)
    made from that side's objects.  After every call the outcomes, stdout
    (with ``capsys``), ``state(program)`` and ``same(program, result)`` (the
    identities the program relies on, as bools) must agree.  ``enter(program)``
    runs before each side's call (installs that side's module globals);
    ``view(result)`` is what of a return is compared by value.
    Returns the janus function, for counter assertions.
    """
    eager_fn, eager_program = make()
    plain, janus_program = make()
    janus_fn = janus.function(plain, **janus_options)
    sides = ((eager_fn, eager_program), (janus_fn, janus_program))
    for number, (change, call) in enumerate(steps):
        where = 'call %d' % number
        seen = []
        for fn, program in sides:
            if change is not None:
                change(program)
            if enter is not None:
                enter(program)
            args, kwargs = call(program)
            if capsys is not None:
                capsys.readouterr()
            result = outcome(fn, *args, **kwargs)
            printed = capsys.readouterr().out if capsys is not None else ''
            identity = same(program, result[1]) if same and result[0] == 'ok' else None
            if view is not None and result[0] == 'ok':
                result = ('ok', view(result[1]))
            seen.append((result, printed, identity, state(program) if state else None))
        (expected, e_out, e_same, e_state), (actual, a_out, a_same, a_state) = seen
        assert expected[0] == actual[0], '%s: eager %s, janus %s' % (where, expected, actual)
        if expected[0] == 'ok':
            assert_same(expected[1], actual[1], where)
        else:
            assert expected[1:] == actual[1:], where
        assert e_out == a_out, '%s stdout: eager %r, janus %r' % (where, e_out, a_out)
        assert e_same == a_same, '%s identity: eager %s, janus %s' % (where, e_same, a_same)
        if state is not None:
            assert_same(e_state, a_state, where + ' state')
    return janus_fn


def plan(call, n=10, changes=None):
    """n steps of ``call``; ``changes`` maps a call number to the outside change before it."""
    changes = changes or {}
    return [(changes.get(i), (lambda p, i=i: call(p, i))) for i in range(n)]


def converted(jf, graphs=None):
    """A graph was built and ran; ``graphs``: exactly that many were built."""
    stats = janus.stats(jf)
    assert stats['graphs_built'] >= 1 and stats['graph_calls'] > 0, janus.explain(jf)
    if graphs is not None:
        assert stats['graphs_built'] == graphs, janus.explain(jf)
    return stats


def imperative(jf, reason):
    """No graph for the refused code: every call after profiling ran imperatively,
    or ran the refused statement in Python (a graph break), for ``reason``."""
    stats = janus.stats(jf)
    report = janus.explain(jf)
    assert stats['graph_calls'] == 0, report
    assert stats['imperative_calls'] > 0 or stats['split_calls'] > 0, report
    assert reason in report, report
    return stats


class Box:
    """A plain user object holding whatever a test puts in it."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)


# ---------------------------------------------------------------------------
# `if self.items:` -- truthiness of an outside container (TRUTH_MATCH)
# ---------------------------------------------------------------------------

EMPTY = {'list': list, 'dict': dict, 'tuple': tuple}
PENDING = None


def _fill(kind, container):
    """The same container kind with one regularization loss registered."""
    loss = c(0.5)
    if kind == 'list':
        container.append(loss)
        return container
    if kind == 'dict':
        container['l2'] = loss
        return container
    return container + (loss,)


def _empty(kind, container):
    if kind == 'tuple':
        return ()
    container.clear()
    return container


@pytest.mark.parametrize('kind', ['list', 'dict', 'tuple'])
@pytest.mark.parametrize('where', ['attribute', 'global', 'closure', 'argument'])
def test_truth_of_an_outside_container_is_guarded(strict, kind, where):
    def make():
        program = Box(pending=EMPTY[kind]())
        cell = EMPTY[kind]()

        def body(x, pending):
            y = x * 2.0
            if pending:             # e.g. regularization losses registered later
                y = y * 10.0
            if not pending:
                y = y + 1.0
            return y

        if where == 'attribute':
            def step(model, x):
                return body(x, model.pending)
        elif where == 'global':
            def step(x):
                return body(x, PENDING)
        elif where == 'closure':
            def step(x):
                return body(x, cell)

            def get():
                return cell

            def put(value):
                nonlocal cell
                cell = value
            program.get, program.put = get, put
        else:
            def step(x, pending):
                return body(x, pending)
        return step, program

    def slot_get(p):
        return p.get() if where == 'closure' else p.pending

    def slot_put(p, value):
        if where == 'closure':
            p.put(value)
        else:
            p.pending = value

    def call(p, i):
        x = c([float(i), 1.0])
        if where == 'attribute':
            return (p, x), {}
        if where == 'argument':
            return (x, p.pending), {}
        return (x,), {}

    def enter(p):
        global PENDING
        PENDING = p.pending

    changes = {5: lambda p: slot_put(p, _fill(kind, slot_get(p))),
               9: lambda p: slot_put(p, _empty(kind, slot_get(p)))}
    jf = run_both(make, plan(call, 12, changes), state=lambda p: len(slot_get(p)),
                  enter=enter if where == 'global' else None)
    converted(jf)
    assert janus.stats(jf)['graphs_built'] <= 3
    if where != 'argument':
        assert 'TRUTH_MATCH' in janus.explain(jf)


def test_truth_of_a_list_in_a_while_and_a_boolean_expression(strict):
    """`while queue and budget:` / `x if self.items else y`: each observation guarded."""
    class Scheduler:
        def __init__(self):
            self.queue = []
            self.extra = {}

    def step(s, x):
        y = x * 1.0
        scaled = y * 3.0 if s.extra else y
        n = 0
        while s.queue and n < 2:   # only looks at truth; the queue is not consumed
            n += 1
        return scaled + float(n)

    changes = {4: lambda s: s.queue.append('job'), 6: lambda s: s.extra.update(k=1),
               8: lambda s: s.queue.clear()}
    jf = run_both(lambda: (step, Scheduler()),
                  plan(lambda s, i: ((s, c([float(i)])), {}), 11, changes),
                  state=lambda s: [len(s.queue), list(s.extra)])
    converted(jf)
    assert 'TRUTH_MATCH' in janus.explain(jf)


# ---------------------------------------------------------------------------
# `'k' in self.cache` -- membership in an outside container (CONTAINS_MATCH)
# ---------------------------------------------------------------------------

CACHE = None


@pytest.mark.parametrize('key', ['scale', 3, ('scale', 0)])
@pytest.mark.parametrize('where', ['attribute', 'global', 'closure', 'argument'])
def test_key_in_an_outside_dict_is_guarded(key, where):
    # A dict argument with tuple keys is not a graph argument (it runs imperatively).
    unsupported_argument = where == 'argument' and isinstance(key, tuple)

    def make():
        holder = Box(cache={})

        def body(x, cache):
            if key in cache:
                return x * cache[key]
            if key not in cache:
                return x + 1.0
            return x

        if where == 'attribute':
            def lookup(h, x):
                return body(x, h.cache)
        elif where == 'global':
            def lookup(x):
                return body(x, CACHE)
        elif where == 'closure':
            cache = holder.cache

            def lookup(x):
                return body(x, cache)
        else:
            def lookup(x, cache):
                return body(x, cache)
        return lookup, holder

    def call(h, i):
        x = c([1.0 + i, 2.0])
        if where == 'attribute':
            return (h, x), {}
        if where == 'argument':
            return (x, h.cache), {}
        return (x,), {}

    def enter(h):
        global CACHE
        CACHE = h.cache

    changes = {5: lambda h: h.cache.update({key: c(3.0)}),
               7: lambda h: h.cache.update({key: c(-2.0)}),     # a new value, same keys
               9: lambda h: h.cache.pop(key)}
    with janus.config.patch(strict=not unsupported_argument):
        jf = run_both(make, plan(call, 12, changes), state=lambda h: dict(h.cache),
                      enter=enter if where == 'global' else None)
    if unsupported_argument:   # a graph for the empty dict; imperative once the key is in
        assert 'dict keys must be str or int' in janus.explain(jf)
        return
    converted(jf)
    assert janus.stats(jf)['graphs_built'] <= 3, janus.explain(jf)
    if where != 'argument' and not isinstance(key, tuple):   # a tuple key: the keys guarded
        assert 'CONTAINS_MATCH' in janus.explain(jf)


@pytest.mark.parametrize('kind', ['list', 'tuple'])
def test_name_in_an_outside_list_or_tuple_is_guarded(strict, kind):
    class Model:
        def __init__(self):
            self.frozen = EMPTY[kind]()

        def step(self, x):
            y = x * 2.0
            if 'encoder' in self.frozen:
                y = tf.stop_gradient(y) * 0.5
            return y

    def freeze(m):
        m.frozen = m.frozen + EMPTY[kind](['encoder'])

    def unfreeze(m):
        m.frozen = EMPTY[kind]()

    jf = run_both(lambda: (Model.step, Model()),
                  plan(lambda m, i: ((m, c([float(i)])), {}), 11, {5: freeze, 8: unfreeze}),
                  state=lambda m: list(m.frozen))
    converted(jf)
    assert 'CONTAINS_MATCH' in janus.explain(jf)


def test_membership_in_an_outside_set_is_guarded_and_in_a_user_container_refused():
    class Registry:
        def __init__(self):
            self.items = []

        def __contains__(self, key):
            return key in self.items

    def make():
        holder = Box(names=set(), registry=Registry())

        def f(x):
            y = x * 1.0
            if 'a' in holder.names:
                y = y * 2.0
            if 'b' in holder.registry:
                y = y * 3.0
            return y
        return f, holder

    changes = {5: lambda h: h.names.add('a'), 7: lambda h: h.registry.items.append('b')}
    jf = run_both(make, plan(lambda h, i: ((c([1.0 + i]),), {}), 10, changes),
                  state=lambda h: [sorted(h.names), list(h.registry.items)])
    imperative(jf, '__contains__')   # the set alone converts (CONTAINS_MATCH)


# ---------------------------------------------------------------------------
# NumPy arrays held in the program: fed to the graph on every run, never baked in
# ---------------------------------------------------------------------------

MEAN = None


@pytest.mark.parametrize('where', ['attribute', 'global', 'closure', 'dict item'])
def test_numpy_array_from_outside_is_fed_to_the_graph_and_sees_updates(where):
    """Re-read when the graph runs (ARRAY_MATCH): in-place updates and replacements
    between calls are seen (a copy made when tracing would not see them)."""
    def make():
        norm = Box(mean=np.zeros(2, np.float32), stats={'mean': np.zeros(2, np.float32)})
        if where == 'attribute':
            def f(x):
                return x - norm.mean
        elif where == 'global':
            def f(x):
                return x - MEAN
        elif where == 'closure':
            mean = norm.mean

            def f(x):
                return x - mean
        else:
            def f(x):
                return x - norm.stats['mean']
        return f, norm

    def array(n):
        return n.stats['mean'] if where == 'dict item' else n.mean

    def update_in_place(n):
        array(n)[:] = 100.0          # running statistics updated in place

    def replace(n):
        if where == 'dict item':
            n.stats['mean'] = np.full(2, 7.0, np.float32)
        elif where != 'closure':
            n.mean = np.full(2, 7.0, np.float32)

    def enter(n):
        global MEAN
        MEAN = n.mean

    jf = run_both(make, plan(lambda n, i: ((c([1.0, 2.0 + i]),), {}), 10,
                             {5: update_in_place, 7: replace}),
                  state=lambda n: array(n).copy(),
                  enter=enter if where == 'global' else None)
    converted(jf, graphs=1)


def test_numpy_array_attribute_updated_in_place_by_the_function():
    class Counter:
        def __init__(self):
            self.steps = np.zeros(1, np.int64)
            self.total = np.zeros(2, np.float32)

        def step(self, x):
            self.steps[0] = self.steps[0] + 1
            self.total += 1.0
            return x * float(self.steps[0]) + self.total

    jf = run_both(lambda: (Counter.step, Counter()),
                  plan(lambda m, i: ((m, c([1.0, float(i)])), {}), 8,
                       {5: lambda m: m.steps.fill(40)}),
                  state=lambda m: [m.steps.copy(), m.total.copy()])
    # NumPy on the arrays (an item read as a NumPy scalar, `+=` in place) runs in
    # Python, statement by statement (graph breaks, NUMPY_ARRAY).
    assert janus.stats(jf)['graph_calls'] == 0 and 'NumPy' in janus.explain(jf)


# ---------------------------------------------------------------------------
# A user class used as an operand: its dunders converted, run every call
# ---------------------------------------------------------------------------

class Scale:
    """`x * scale`, `scale * x`: reads self.s on every use."""

    def __init__(self, s):
        self.s = s

    def __mul__(self, other):
        return other * self.s

    def __rmul__(self, other):
        return other * self.s


class CountingOffset:
    """`x + offset` / `offset + x`, counting its uses (a side effect per call)."""

    def __init__(self, b):
        self.b = b
        self.uses = 0

    def __add__(self, other):
        self.uses += 1
        return other + self.b

    __radd__ = __add__


class Meter:
    """`self.meter += loss`: an in-place user operator on an outside object."""

    def __init__(self):
        self.total = tf.constant(0.0)

    def __iadd__(self, value):
        self.total = self.total + tf.reduce_sum(value)
        return self


@pytest.mark.parametrize('form', ['x * scale', 'scale * x', 'x / scale via __rmul__'])
@pytest.mark.parametrize('where', ['attribute', 'closure', 'argument'])
def test_user_operand_reads_its_state_every_call(strict, form, where):
    def make():
        holder = Box(scale=Scale(c(2.0)))

        def apply(x, scale):
            if form == 'x * scale':
                return x * scale
            if form == 'scale * x':
                return scale * x
            return (1.0 / x) * scale

        if where == 'attribute':
            def f(h, x):
                return apply(x, h.scale)
        elif where == 'closure':
            scale = holder.scale

            def f(x):
                return apply(x, scale)
        else:
            def f(x, scale):
                return apply(x, scale)
        return f, holder

    def call(h, i):
        x = c([1.0, 2.0 + i])
        if where == 'attribute':
            return (h, x), {}
        if where == 'argument':
            return (x, h.scale), {}
        return (x,), {}

    def retune(h):
        h.scale.s = c(5.0)          # a tensor: re-read, same graph

    def python_number(h):
        h.scale.s = 0.5             # a Python float: a new graph

    jf = run_both(make, plan(call, 11, {5: retune, 8: python_number}),
                  state=lambda h: h.scale.s)
    converted(jf)


def test_user_operand_side_effects_happen_every_call(strict):
    class Model:
        def __init__(self):
            self.offset = CountingOffset(c(1.0))
            self.meter = Meter()

        def step(self, x):
            y = x + self.offset          # __radd__, converted
            z = self.offset + y          # __add__
            self.meter += z              # __iadd__ on an outside object
            return z

    def retune(m):
        m.offset.b = c(-3.0)

    def replace(m):
        m.meter = Meter()

    with janus.config.patch(recompile_limit=20):
        run_both(lambda: (Model.step, Model()),
                 plan(lambda m, i: ((m, c([1.0, float(i)])), {}), 10, {5: retune, 7: replace}),
                 state=lambda m: [m.offset.uses, m.offset.b, m.meter.total],
                 same=lambda m, r: (type(m.meter) is Meter,))


def test_user_operand_without_side_effects_reuses_one_graph(strict):
    class Model:
        def __init__(self):
            self.scale = Scale(c(2.0))
            self.meter = Meter()

        def step(self, x):
            self.meter += x * self.scale
            return self.scale * x

    jf = run_both(lambda: (Model.step, Model()),
                  plan(lambda m, i: ((m, c([1.0, float(i)])), {}), 10,
                       {5: lambda m: setattr(m.scale, 's', c(-1.0)),
                        7: lambda m: setattr(m, 'meter', Meter())}),
                  state=lambda m: [m.scale.s, m.meter.total])
    converted(jf, graphs=1)


class Gate:
    def __init__(self):
        self.open = False

    def __bool__(self):
        return self.open


class Version:
    def __init__(self, number):
        self.number = number

    def __eq__(self, other):
        return self.number == getattr(other, 'number', other)

    __hash__ = None


@pytest.mark.parametrize('dunder', ['__bool__', '__eq__'])
def test_user_truth_and_comparison_dunders_run_imperatively(dunder):
    def make():
        holder = Box(gate=Gate(), version=Version(1))

        def f(x):
            if dunder == '__bool__':
                if holder.gate:
                    return x * 2.0
            elif holder.version == 2:
                return x * 3.0
            return x
        return f, holder

    def flip(h):
        h.gate.open = True
        h.version.number = 2

    jf = run_both(make, plan(lambda h, i: ((c([1.0 + i]),), {}), 8, {5: flip}),
                  state=lambda h: [h.gate.open, h.version.number])
    imperative(jf, dunder)


# ---------------------------------------------------------------------------
# Strings made from tensors: formatted after the run, from its values
# ---------------------------------------------------------------------------

def test_fstring_of_a_tensor_printed_and_returned(strict, capsys):
    class Trainer:
        def __init__(self):
            self.name = 'run-a'
            self.log = []

        def step(self, x):
            loss = tf.reduce_sum(x * 2.0)
            message = f"loss {loss}"
            print(message)
            print(f"{self.name}: {loss:.3f} {x!r}")
            self.log.append(f"[{loss}]")
            return message, str(loss), repr(x * 1.0), {'text': f"{x}"}

    jf = run_both(lambda: (Trainer.step, Trainer()),
                  plan(lambda m, i: ((m, c([float(i), 0.5])), {}), 9,
                       {6: lambda m: setattr(m, 'name', 'run-b')}),
                  state=lambda m: list(m.log), capsys=capsys)
    converted(jf)
    assert janus.stats(jf)['graphs_built'] == 2   # one per name


def test_fstring_of_python_values_and_of_a_nested_fstring(strict, capsys):
    def make():
        cfg = Box(epoch=0, tag='warmup')

        def f(x):
            y = tf.reduce_mean(x)
            inner = f"{y}"
            line = f"epoch {cfg.epoch} [{cfg.tag}] mean={inner}!"
            print(line, y, sep=' | ')
            return line

        return f, cfg

    jf = run_both(make, plan(lambda p, i: ((c([1.0, float(i)]),), {}), 9,
                             {5: lambda p: setattr(p, 'tag', 'main'),
                              7: lambda p: setattr(p, 'epoch', 1)}),
                  capsys=capsys)
    converted(jf)


def test_str_and_repr_of_outside_containers_of_tensors(capsys):
    """`str(self.state)`: the text of the run's values, as f"{self.state}" gives."""
    class Model:
        def __init__(self):
            self.state = [c(0.0), c(1.0)]
            self.pair = (c(2.0), 'tag')
            self.stats = {'loss': c(3.0)}

        def step(self, x):
            self.state[1] = x
            print(repr(self.pair))
            return str(self.state), format(self.stats), f"{self.state}", repr(self.pair)

    def retag(m):
        m.pair = (c(7.0), 'retagged')

    def new_loss(m):
        m.stats['loss'] = c(-1.0)

    run_both(lambda: (Model.step, Model()),
             plan(lambda m, i: ((m, c(float(i))), {}), 9, {5: retag, 7: new_loss}),
             state=lambda m: [m.state, m.pair, m.stats], capsys=capsys)


def test_text_of_new_containers_holding_outside_ones(capsys):
    """`f"{(self.names, step)}"`, `'%s' % (self.names,)`: the outside list as it is now."""
    class Model:
        def __init__(self):
            self.names = ['enc', 'dec']
            self.parts = [c(1.0)]

        def step(self, x):
            line = f"{(self.names, 1)}"
            print('layers %s' % (self.names,))
            return x * 2.0, line, f"{[self.parts, x]}"

    def rename(m):
        m.names[1] = 'decoder'
        m.parts[0] = c(5.0)

    run_both(lambda: (Model.step, Model()),
             plan(lambda m, i: ((m, c(float(i))), {}), 9, {5: rename}),
             state=lambda m: [m.names, m.parts], capsys=capsys)


@pytest.mark.parametrize('form', ['%', 'format', 'len', 'concat'])
def test_computing_with_a_string_of_a_tensor_runs_imperatively(form, capsys):
    def make():
        def f(x):
            loss = tf.reduce_sum(x)
            if form == '%':
                text = 'loss %s' % loss
            elif form == 'format':
                text = 'loss {}'.format(loss)
            elif form == 'len':
                text = 'n=%d' % len(f"{loss}")
            else:
                text = f"{loss}" + '!'
            print(text)
            return text
        return f, None

    jf = run_both(make, plan(lambda p, i: ((c([float(i)]),), {}), 6), capsys=capsys)
    stats = janus.stats(jf)
    assert stats['graph_calls'] == 0
    assert stats['imperative_calls'] > 0 or stats['split_calls'] > 0
    assert 'graph value' in janus.explain(jf), janus.explain(jf)


# ---------------------------------------------------------------------------
# Arguments and mutable defaults changed in place by the function
# ---------------------------------------------------------------------------

def test_list_and_dict_arguments_changed_in_place(strict, heap_path):
    """`history.append(loss)`, `stats['calls'] = n` on new arguments every call."""
    def make():
        def record(x, history, stats):
            loss = tf.reduce_sum(x)
            history[0] = history[0] + 1.0
            history.append(loss)
            history.extend([loss * 2.0])
            stats['calls'] = 1
            stats['last'] = loss
            stats['seen'] = True
            return x + 1.0, history
        return record, Box()

    def call(p, i):
        p.history, p.stats = [c(float(i))], {'calls': 0}
        return (c([float(i), 1.0]), p.history, p.stats), {}

    jf = run_both(make, plan(call, 8), state=lambda p: [p.history, p.stats],
                  same=lambda p, r: (r[1] is p.history,), view=lambda r: r[0])
    converted(jf, graphs=1)


def test_reading_an_argument_after_changing_it_in_place_sees_the_change(capsys):
    def make():
        def record(x, history, stats):
            history.append(x)
            stats['n'] = len(history)
            print(f"{len(history)} items, last {history[-1]}")
            return tf.add_n(history)
        return record, None

    jf = run_both(make, plan(lambda p, i: ((c(float(i)), [c(1.0)] * (i % 2 + 1), {}), {}), 7),
                  capsys=capsys)
    assert janus.stats(jf)['graph_calls'] >= 2   # one graph per history length


def test_one_list_argument_grows_across_calls_and_is_cleared_from_outside():
    def make():
        def record(x, history):
            history.append(x * 2.0)
            history += [x]
            history.extend([x + 1.0])
            return tf.add_n(history[-3:]), len(history)
        return record, Box(history=[])

    run_both(make, plan(lambda p, i: ((c([float(i)]), p.history), {}), 10,
                        {6: lambda p: p.history.clear()}),
             state=lambda p: list(p.history))


@pytest.mark.parametrize('default', ['list', 'dict'])
def test_mutable_default_of_the_janus_function_accumulates(default):
    def make():
        if default == 'list':
            def f(x, acc=[]):
                acc.append(1)
                return x * float(len(acc))
        else:
            def f(x, acc={}):
                acc['n'] = acc.get('n', 0) + 1
                return x * float(acc['n'])
        return f, f

    def acc_of(fn):
        return fn.__defaults__[0]

    changes = {6: lambda fn: acc_of(fn).clear()}
    with janus.config.patch(recompile_limit=20):
        run_both(make, plan(lambda p, i: ((c([1.0]),), {}), 10, changes),
                 state=lambda fn: (list(acc_of(fn)) if default == 'list'
                                   else dict(acc_of(fn))))


def test_helper_given_an_attribute_list_appends_to_it(strict, heap_path):
    def log_to(history, value):
        history.append(value)

    class Model:
        def __init__(self):
            self.history = []
            self.w = c(2.0)

        def step(self, x):
            loss = tf.reduce_sum(x * self.w)
            log_to(self.history, loss)
            return loss

    def reset(m):
        m.history = []

    jf = run_both(lambda: (Model.step, Model()),
                  plan(lambda m, i: ((m, c([1.0, float(i)])), {}), 10, {6: reset}),
                  state=lambda m: list(m.history),
                  same=lambda m, r: (len(m.history),))
    converted(jf, graphs=1)


# ---------------------------------------------------------------------------
# Aliasing between arguments: f(a, a) then f(a, b) (ALIAS_MATCH)
# ---------------------------------------------------------------------------

class Cell:
    def __init__(self, v):
        self.v = tf.constant(v)


def _alias_calls(order):
    """Box objects a and b per side; ``order`` says which pairs are passed."""
    def call(p, i):
        first, second = order[i]
        return (getattr(p, first), getattr(p, second)), {}
    return call


@pytest.mark.parametrize('order', ['aa then ab', 'ab then aa'])
def test_aliased_arguments_read_and_write_the_right_object(strict, heap_path, order):
    def make():
        def f(a, b):
            b.v = b.v + 1.0
            return a.v * 10.0 + b.v
        return f, Box(a=Cell(1.0), b=Cell(100.0))

    pairs = ['aa'] * 5 + ['ab'] * 3 + ['aa'] * 2
    if order == 'ab then aa':
        pairs = ['ab'] * 5 + ['aa'] * 3 + ['ab'] * 2
    jf = run_both(make, plan(_alias_calls(pairs), 10), state=lambda p: [p.a.v, p.b.v])
    converted(jf, graphs=2)
    assert 'ALIAS_MATCH' in janus.explain(jf)


def test_aliased_list_arguments_and_an_identity_test(strict, heap_path):
    def make():
        def f(xs, ys):
            ys[0] = ys[0] + 1.0
            if xs is ys:
                return xs[0] * 2.0
            return xs[0] * 10.0 + ys[0]
        return f, Box(a=[c(1.0)], b=[c(50.0)])

    pairs = ['aa'] * 5 + ['ab'] * 3 + ['aa'] * 2 + ['ba'] * 2
    jf = run_both(make, plan(_alias_calls(pairs), 12), state=lambda p: [p.a, p.b])
    converted(jf)
    assert 'ALIAS_MATCH' in janus.explain(jf)


def test_tied_weights_untied_from_outside(strict, heap_path):
    """Two attribute paths to one object (tied embeddings), untied mid-way."""
    class Model:
        def __init__(self):
            self.encoder = Cell(1.0)
            self.decoder = self.encoder

        def step(self, x):
            self.encoder.v = self.encoder.v + tf.reduce_sum(x)
            return self.decoder.v * 2.0

    def untie(m):
        m.decoder = Cell(-5.0)

    def tie(m):
        m.decoder = m.encoder

    jf = run_both(lambda: (Model.step, Model()),
                  plan(lambda m, i: ((m, c([1.0, float(i)])), {}), 12, {5: untie, 9: tie}),
                  state=lambda m: [m.encoder.v, m.decoder.v],
                  same=lambda m, r: (m.encoder is m.decoder,))
    converted(jf)


# ---------------------------------------------------------------------------
# Globals of one name in two modules; cells of one name in two closures
# ---------------------------------------------------------------------------

_LAYER_MODULE = '''
import tensorflow as tf

SCALE = tf.constant({scale})
BIAS = {bias}


def scaled(x):
    return x * SCALE + BIAS
'''


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_modules_globals_with_one_name(strict, tmp_path):
    (tmp_path / 'layer_a.py').write_text(_LAYER_MODULE.format(scale=2.0, bias=1))
    (tmp_path / 'layer_b.py').write_text(_LAYER_MODULE.format(scale=3.0, bias=10))
    made = []

    def make():
        n = len(made)
        a = _load(tmp_path / 'layer_a.py', 'janus_test_layer_a_%d' % n)
        b = _load(tmp_path / 'layer_b.py', 'janus_test_layer_b_%d' % n)
        made.append(n)

        def f(x):
            return a.scaled(x) + b.scaled(x) * 100.0
        return f, Box(a=a, b=b)

    def rebind_a(p):
        p.a.SCALE = c(-1.0)

    def rebind_b(p):
        p.b.BIAS = 7

    jf = run_both(make, plan(lambda p, i: ((c([1.0, float(i)]),), {}), 10,
                             {5: rebind_a, 7: rebind_b}),
                  state=lambda p: [p.a.SCALE, p.b.SCALE, p.a.BIAS, p.b.BIAS])
    converted(jf, graphs=2)    # BIAS is a Python int: a new graph after it changes


def test_two_closures_cells_with_one_name(strict):
    def make_scaler(w):
        class Scaler:
            def __call__(self, x):
                return x * w

            def set(self, value):
                nonlocal w
                w = value
        return Scaler()

    def make_offset(b):
        def offset(x):
            return x + b
        return offset

    def make():
        first, second = make_scaler(c(2.0)), make_scaler(c(3.0))
        plus, minus = make_offset(c(1.0)), make_offset(c(-1.0))

        def g(x):
            return first(x) + second(x) * 10.0 + plus(x) * minus(x)
        return g, Box(first=first, second=second)

    jf = run_both(make, plan(lambda p, i: ((c([1.0, float(i)]),), {}), 10,
                             {5: lambda p: p.second.set(c(-4.0)),
                              7: lambda p: p.first.set(c(0.5))}))
    converted(jf, graphs=1)


# ---------------------------------------------------------------------------
# Enum modes
# ---------------------------------------------------------------------------

class Mode(enum.Enum):
    TRAIN = 'train'
    EVAL = 'eval'
    PREDICT = 'predict'


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


DROPOUT = {Mode.TRAIN: 0.5, Mode.EVAL: 1.0, Mode.PREDICT: 1.0}
MODE = Mode.TRAIN


MODES = [Mode.TRAIN] * 5 + [Mode.EVAL] * 3 + [Mode.TRAIN] * 2 + [Mode.PREDICT] * 2


@pytest.mark.parametrize('test', ['is', '==', 'dict key'])
def test_enum_mode_argument_selects_the_graph(strict, test):
    def make():
        def f(x, mode):
            if test == 'is':
                if mode is Mode.TRAIN:
                    return x * 0.5
                elif mode is Mode.EVAL:
                    return x
                return x * -1.0
            if test == '==':
                return x * 0.5 if mode == Mode.TRAIN else x + (mode != Mode.EVAL)
            return x * DROPOUT[mode]
        return f, None

    jf = run_both(make, plan(lambda p, i: ((c([4.0]), MODES[i]), {}), len(MODES)))
    converted(jf, graphs=3)


def test_enum_member_name_and_value(capsys):
    """`mode.value` / `mode.name`: the current member's, in returns, numbers and text."""
    class Model:
        def __init__(self):
            self.mode = Mode.TRAIN

        def step(self, x, level):
            print(f"{self.mode.name} at level {level.value}")
            return x * float(len(self.mode.value)) * float(level), self.mode.name

    levels = [Level.LOW] * 6 + [Level.HIGH] * 4
    jf = run_both(lambda: (Model.step, Model()),
                  plan(lambda m, i: ((m, c([1.0, float(i)]), levels[i]), {}), 10,
                       {5: lambda m: setattr(m, 'mode', Mode.PREDICT),
                        8: lambda m: setattr(m, 'mode', Mode.EVAL)}),
                  capsys=capsys)
    assert janus.stats(jf)['calls'] == 10


@pytest.mark.parametrize('where', ['attribute', 'global'])
def test_enum_mode_in_outside_state_flipped_from_outside(strict, where):
    class Model:
        def __init__(self):
            self.mode = Mode.TRAIN
            self.level = Level.LOW

        def step(self, x):
            mode = self.mode if where == 'attribute' else MODE
            y = x * 0.5 if mode is Mode.TRAIN else x
            if self.level >= Level.HIGH:
                y = y * 2.0
            return y, mode is Mode.EVAL

    def set_mode(value):
        def change(m):
            m.mode = value
        return change

    def enter(m):
        global MODE
        MODE = m.mode

    changes = {5: set_mode(Mode.EVAL), 7: set_mode(Mode.TRAIN),
               9: lambda m: setattr(m, 'level', Level.HIGH)}
    jf = run_both(lambda: (Model.step, Model()),
                  plan(lambda m, i: ((m, c([4.0, float(i)])), {}), 11, changes),
                  enter=enter if where == 'global' else None)
    converted(jf, graphs=3)


# ---------------------------------------------------------------------------
# An item written, then the whole container read, in one call
# ---------------------------------------------------------------------------

@pytest.mark.parametrize('read', ['add_n', 'for loop', 'stack', 'sum'])
def test_item_write_then_whole_list_read(heap_path, read):
    class Buffer:
        def __init__(self):
            self.items = [c(1.0), c(2.0), c(3.0)]

        def push(self, x):
            self.items[0] = x
            self.items[2] = x * 2.0
            if read == 'add_n':
                total = tf.add_n(self.items)
            elif read == 'for loop':
                total = 0.0
                for item in self.items:
                    total = total + item
            elif read == 'stack':
                total = tf.reduce_sum(tf.stack(self.items))
            else:
                total = sum(self.items)
            return total, self.items[1]

    def grow(b):
        b.items.append(c(100.0))

    def replace(b):
        b.items = [c(-1.0), c(-2.0), c(-3.0)]

    jf = run_both(lambda: (Buffer.push, Buffer()),
                  plan(lambda b, i: ((b, c(10.0 * (i + 1))), {}), 10, {5: grow, 7: replace}),
                  state=lambda b: list(b.items))
    converted(jf)


@pytest.mark.parametrize('path', ['hoisted', 'heap_ops'])
def test_item_write_past_the_end_of_an_outside_list_raises_as_eagerly(path):
    class Buffer:
        def __init__(self):
            self.items = [c(1.0), c(2.0), c(3.0)]

        def push(self, x):
            self.items[0] = x
            self.items[2] = x * 2.0
            return tf.add_n(self.items)

    def shrink(b):
        b.items = [c(-1.0), c(-2.0)]     # items[2] = ... raises IndexError from now on

    with janus.config.patch(heap_ops=path == 'heap_ops'):
        run_both(lambda: (Buffer.push, Buffer()),
                 plan(lambda b, i: ((b, c(10.0 * (i + 1))), {}), 10, {5: shrink}),
                 state=lambda b: list(b.items))


@pytest.mark.parametrize('path', ['hoisted', 'heap_ops'])
@pytest.mark.parametrize('read', ['add_n', 'items[2]'])
def test_item_write_by_negative_index_then_read(path, read):
    class Buffer:
        def __init__(self):
            self.items = [c(1.0), c(2.0), c(3.0)]

        def push(self, x):
            self.items[-1] = x
            if read == 'add_n':
                return tf.add_n(self.items)
            return self.items[2] * 1.0

    with janus.config.patch(heap_ops=path == 'heap_ops'):
        run_both(lambda: (Buffer.push, Buffer()),
                 plan(lambda b, i: ((b, c(10.0 * (i + 1))), {}), 8,
                      {6: lambda b: b.items.append(c(100.0))}),
                 state=lambda b: list(b.items))


@pytest.mark.parametrize('read', ['values()', 'items()', 'get', 'copy()', 'keys'])
def test_item_write_then_whole_dict_read(heap_path, read):
    """`self.values['a'] = x` then `self.values.values()` (or .items(), .get, .copy())."""
    class Stats:
        def __init__(self):
            self.values = {'a': c(1.0), 'b': c(2.0)}

        def update(self, x):
            self.values['a'] = x
            if read == 'values()':
                total = tf.add_n(list(self.values.values()))
            elif read == 'items()':
                total = tf.add_n([value for _, value in self.values.items()])
            elif read == 'get':
                total = self.values.get('a') + self.values.get('b', 0.0)
            elif read == 'copy()':
                snapshot = self.values.copy()
                total = snapshot['a'] + snapshot['b']
            else:
                total = tf.add_n([self.values[key] for key in self.values])
            return total, list(self.values)

    jf = run_both(lambda: (Stats.update, Stats()),
                  plan(lambda s, i: ((s, c(float(i))), {}), 9,
                       {5: lambda s: s.values.update(c=c(30.0)),
                        7: lambda s: s.values.update(b=c(-2.0))}),
                  state=lambda s: dict(s.values))
    assert janus.stats(jf)['calls'] == 9


def test_item_write_then_list_copy(heap_path):
    class Buffer:
        def __init__(self):
            self.items = [c(1.0), c(2.0)]

        def push(self, x):
            self.items[0] = x
            snapshot = self.items.copy()
            return snapshot[0] + snapshot[1]

    run_both(lambda: (Buffer.push, Buffer()),
             plan(lambda b, i: ((b, c(float(i))), {}), 8,
                  {5: lambda b: b.items.__setitem__(1, c(20.0))}),
             state=lambda b: list(b.items))


# ---------------------------------------------------------------------------
# Returning an outside object: the object itself, as it is now
# ---------------------------------------------------------------------------

@pytest.mark.parametrize('kind', ['dict', 'list', 'nested'])
def test_returning_outside_hparams_returns_the_object(strict, heap_path, kind):
    class Trainer:
        def __init__(self):
            self.hparams = {'lr': 0.1, 'epoch': 0}
            self.layers = ['dense', 'dense']

        def step(self, x):
            y = x * 2.0
            if kind == 'dict':
                return y, self.hparams
            if kind == 'list':
                return y, self.layers
            return y, {'config': (self.hparams, self.layers), 'same': [self.layers]}

    def same(tr, result):
        if kind == 'dict':
            return (result[1] is tr.hparams,)
        if kind == 'list':
            return (result[1] is tr.layers,)
        return (result[1]['config'][0] is tr.hparams, result[1]['config'][1] is tr.layers,
                result[1]['same'][0] is tr.layers)

    changes = {5: lambda tr: tr.hparams.update(epoch=5) or tr.layers.append('out'),
               6: lambda tr: tr.hparams.update(epoch=6),
               8: lambda tr: setattr(tr, 'hparams', {'lr': 0.1, 'epoch': 8})
               or setattr(tr, 'layers', ['conv'])}
    jf = run_both(lambda: (Trainer.step, Trainer()),
                  plan(lambda tr, i: ((tr, c([1.0, float(i)])), {}), 10, changes),
                  state=lambda tr: [dict(tr.hparams), list(tr.layers)], same=same)
    converted(jf)


def test_returning_an_outside_list_the_call_appended_to(strict, heap_path):
    class Model:
        def __init__(self):
            self.history = []

        def step(self, x):
            self.history.append(tf.reduce_sum(x))
            return self.history, self

    def truncate(m):
        del m.history[:2]

    jf = run_both(lambda: (Model.step, Model()),
                  plan(lambda m, i: ((m, c([1.0, float(i)])), {}), 9, {6: truncate}),
                  state=lambda m: list(m.history),
                  same=lambda m, r: (r[0] is m.history, r[1] is m), view=lambda r: r[0])
    # the returned list's length changes every call: correct, whether or not in a graph
    assert janus.stats(jf)['calls'] == 9


# ---------------------------------------------------------------------------
# Unpacking outside containers: `h, c = self.state`, `[*self.parts]`
# ---------------------------------------------------------------------------

def test_unpacked_rnn_state_advances_every_call(strict, heap_path):
    class LSTMish:
        def __init__(self):
            self.state = (tf.zeros([2]), tf.zeros([2]))
            self.parts = [c([1.0]), c([2.0])]

        def step(self, x):
            h, cell = self.state
            cell = cell + x
            h = tf.tanh(cell) + h
            self.state = (h, cell)
            return h, tf.concat([*self.parts], 0)

    def reset(m):
        m.state = (tf.ones([2]), tf.zeros([2]))

    def new_parts(m):
        m.parts = [c([5.0]), c([6.0])]

    jf = run_both(lambda: (LSTMish.step, LSTMish()),
                  plan(lambda m, i: ((m, c([1.0, 0.5])), {}), 10, {6: reset, 8: new_parts}),
                  state=lambda m: [m.state, m.parts])
    converted(jf, graphs=1)


@pytest.mark.parametrize('kind', ['list', 'tuple', 'dict'])
def test_star_and_double_star_spreading_of_outside_containers(strict, heap_path, kind):
    def combine(*parts, **named):
        total = tf.add_n(list(parts))
        for name in named:
            total = total * named[name]
        return total

    def make():
        holder = Box(parts=[c(1.0), c(2.0)], named={'w': c(3.0)})
        if kind == 'tuple':
            holder.parts = tuple(holder.parts)

        def f(x):
            first, *rest = holder.parts
            if kind == 'dict':
                return combine(x, first, **holder.named), len(rest)
            return combine(x, *holder.parts), [*rest]
        return f, holder

    def retune(h):
        h.named = {'w': c(-1.0)}
        h.parts = type(h.parts)([c(10.0), c(20.0)])

    def grow(h):
        h.parts = type(h.parts)([c(1.0), c(2.0), c(4.0)])
        h.named['v'] = c(0.5)

    jf = run_both(make, plan(lambda h, i: ((c(float(i)),), {}), 10, {5: retune, 7: grow}),
                  state=lambda h: [list(h.parts), dict(h.named)])
    converted(jf)


def test_outside_containers_given_to_methods_of_new_objects(heap_path):
    """`parts.extend(self.parts)`, `cfg.update(self.defaults)`, `'/'.join(self.names)`:
    a new object filled from outside containers sees them as they are now."""
    class Model:
        def __init__(self):
            self.parts = [c(1.0), c(2.0)]
            self.defaults = {'scale': 2.0}
            self.names = ['enc', 'dec']

        def step(self, x):
            parts = [x]
            parts.extend(self.parts)
            cfg = {'scale': 1.0}
            cfg.update(self.defaults)
            label = '/'.join(self.names)
            return tf.add_n(parts) * cfg['scale'], label, 'names {}'.format(self.names)

    changes = {5: lambda m: m.parts.__setitem__(0, c(10.0)),
               6: lambda m: m.defaults.update(scale=5.0),
               7: lambda m: m.names.append('head')}
    run_both(lambda: (Model.step, Model()),
             plan(lambda m, i: ((m, c(float(i))), {}), 10, changes),
             state=lambda m: [m.parts, m.defaults, m.names])


def test_unpacking_a_state_of_the_wrong_length_raises_as_eagerly(heap_path):
    class Model:
        def __init__(self):
            self.state = (c(0.0), c(0.0))

        def step(self, x):
            h, cell = self.state
            self.state = (h + x, cell - x)
            return h

    run_both(lambda: (Model.step, Model()),
             plan(lambda m, i: ((m, c(float(i))), {}), 10,
                  {5: lambda m: setattr(m, 'state', (c(1.0), c(2.0), c(3.0))),
                   7: lambda m: setattr(m, 'state', [c(5.0), c(6.0)])}),
             state=lambda m: m.state)


# ---------------------------------------------------------------------------
# Writing to objects obtained by unpacking or iterating outside containers
# ---------------------------------------------------------------------------

class Accumulator:
    def __init__(self):
        self.total = tf.constant(0.0)


@pytest.mark.parametrize('how', ['unpack', 'star', 'for loop', 'dict values'])
def test_write_to_an_unpacked_outside_object_runs_every_call(strict, heap_path, how):
    class Metrics:
        def __init__(self):
            self.pair = (Accumulator(), Accumulator())
            self.by_name = {'loss': self.pair[0], 'acc': self.pair[1]}

        def step(self, x):
            if how == 'unpack':
                loss, _ = self.pair
                loss.total = loss.total + tf.reduce_sum(x)
            elif how == 'star':
                *_, last = self.pair
                last.total = last.total - tf.reduce_sum(x)
            elif how == 'for loop':
                for acc in self.pair:
                    acc.total = acc.total + tf.reduce_max(x)
            else:
                for acc in self.by_name.values():
                    acc.total = acc.total + tf.reduce_min(x)
            return x * 2.0

    def replace(m):
        m.pair = (Accumulator(), m.pair[0])
        m.by_name = {'loss': m.pair[0], 'acc': m.pair[1]}

    jf = run_both(lambda: (Metrics.step, Metrics()),
                  plan(lambda m, i: ((m, c([1.0, float(i)])), {}), 10, {6: replace}),
                  state=lambda m: [a.total for a in m.pair],
                  same=lambda m, r: (m.pair[0] is m.by_name['loss'],
                                     m.pair[1] is m.by_name['acc']))
    converted(jf)


# ---------------------------------------------------------------------------
# User functions handed to TF (tf.map_fn, tf.cond, tf.scan)
# ---------------------------------------------------------------------------

ROW_SCALE = tf.constant(2.0)


def scale_row(row):
    return row * ROW_SCALE


def test_map_fn_callback_reads_a_global_rebound_later(strict):
    def make():
        def f(x):
            return tf.map_fn(scale_row, x)
        return f, Box(scale=c(2.0))

    def enter(p):
        global ROW_SCALE
        ROW_SCALE = p.scale

    def rebind(p):
        p.scale = c(-1.0)

    try:
        jf = run_both(make, plan(lambda p, i: ((c([[1.0, 2.0], [3.0, float(i)]]),), {}), 9,
                                 {5: rebind}), enter=enter)
    finally:
        globals()['ROW_SCALE'] = tf.constant(2.0)
    converted(jf)


BRANCH_GAIN = tf.constant(2.0)


def test_cond_scan_and_while_callbacks_read_globals_cells_and_attributes(strict):
    def make():
        decay = c(0.5)
        model = Box(python_gain=1.0, bias=c(0.0), scale=c(2.0))

        def set_decay(value):
            nonlocal decay
            decay = value
        model.set_decay = set_decay

        def ema(acc, v):
            return acc * decay + v * model.python_gain      # a closure cell, an attribute

        def f(x, flag):
            y = tf.cond(flag, lambda: x * BRANCH_GAIN, lambda: x - BRANCH_GAIN)   # a global
            smoothed = tf.scan(ema, y)
            _, total = tf.while_loop(lambda i, s: i < 2,
                                     lambda i, s: (i + 1, s + model.bias), (0, smoothed))
            return total
        return f, model

    def enter(m):
        global BRANCH_GAIN
        BRANCH_GAIN = m.scale

    changes = {4: lambda m: m.set_decay(c(0.9)),
               5: lambda m: setattr(m, 'scale', c(-3.0)),
               6: lambda m: setattr(m, 'bias', c(10.0)),
               8: lambda m: setattr(m, 'python_gain', 4.0)}
    try:
        jf = run_both(make, plan(lambda m, i: ((c([1.0, 2.0, float(i)]), c(i % 2 == 0)), {}),
                                 11, changes),
                      state=lambda m: [m.scale, m.bias, m.python_gain], enter=enter)
    finally:
        globals()['BRANCH_GAIN'] = tf.constant(2.0)
    converted(jf)


def test_py_function_callback_runs_in_python_every_call():
    """tf.py_function / tf.numpy_function run their Python on every run, reading globals then."""
    def make():
        program = Box(calls=0, offset=1.0)

        def add_offset(t):
            program.calls += 1
            return t + program.offset

        def as_numpy(a):
            return (a * 2.0).astype(np.float32)

        def f(x):
            y = tf.py_function(add_offset, [x], tf.float32)
            return tf.numpy_function(as_numpy, [y], tf.float32)
        return f, program

    jf = run_both(make, plan(lambda p, i: ((c([1.0, float(i)]),), {}), 9,
                             {5: lambda p: setattr(p, 'offset', -4.0)}),
                  state=lambda p: [p.calls, p.offset])
    assert janus.stats(jf)['calls'] == 9


# ---------------------------------------------------------------------------
# Mutable defaults of inlined callees
# ---------------------------------------------------------------------------

def test_callee_default_list_appended_every_call():
    def make():
        def helper(x, seen=[]):
            seen.append(1)
            return x * float(len(seen))

        def f(x):
            return helper(x)
        return f, helper

    with janus.config.patch(recompile_limit=20):
        run_both(make, plan(lambda h, i: ((c([1.0]),), {}), 10,
                            {6: lambda h: h.__defaults__[0].clear()}),
                 state=lambda h: list(h.__defaults__[0]))


def test_callee_default_log_and_memo_convert(strict, heap_path):
    def make():
        def log(value, sink=[]):
            sink.append(value)

        def weight(name, memo={}):
            if name not in memo:
                memo[name] = tf.constant(3.0)
            return memo[name]

        def f(x):
            y = x * weight('w')
            log(y)
            return y
        return f, Box(log=log, weight=weight)

    def clear_log(h):
        h.log.__defaults__[0].clear()

    def forget(h):
        h.weight.__defaults__[0].clear()

    jf = run_both(make, plan(lambda h, i: ((c([1.0, float(i)]),), {}), 11,
                             {6: clear_log, 8: forget}),
                  state=lambda h: [list(h.log.__defaults__[0]), dict(h.weight.__defaults__[0])])
    converted(jf)


# ---------------------------------------------------------------------------
# Aliasing made by the call: `t.a = lst; t.b = lst`
# ---------------------------------------------------------------------------

@pytest.mark.parametrize('kind', ['list', 'dict', 'tuple of lists'])
def test_one_new_object_stored_twice_stays_one_object(strict, heap_path, kind):
    class Holder:
        def __init__(self):
            self.a = None
            self.b = None
            self.log = []

        def step(self, x):
            if kind == 'list':
                made = [x, x * 2.0]
            elif kind == 'dict':
                made = {'x': x, 'y': x * 2.0}
            else:
                inner = [x]
                made = (inner, inner)
            self.a = made
            self.b = made
            self.log.append(made)
            return made

    def same(h, result):
        out = (h.a is h.b, result is h.a, h.log[-1] is result)
        if kind == 'tuple of lists':
            out += (result[0] is result[1],)
        return out

    jf = run_both(lambda: (Holder.step, Holder()),
                  plan(lambda h, i: ((h, c(float(i))), {}), 8,
                       {5: lambda h: setattr(h, 'log', [])}),
                  state=lambda h: [h.a, h.b], same=same)
    converted(jf)


def test_outside_object_stored_under_a_second_name(strict, heap_path):
    class Model:
        def __init__(self):
            self.current = [c(0.0)]
            self.previous = None

        def step(self, x):
            self.previous = self.current
            self.current = [x]
            return tf.add_n(self.previous) + x

    def replace(m):
        m.current = [c(5.0), c(6.0)]

    def call(m, i):
        m.before = m.current
        return (m, c(float(i))), {}

    jf = run_both(lambda: (Model.step, Model()), plan(call, 9, {6: replace}),
                  state=lambda m: [m.current, m.previous],
                  same=lambda m, r: (m.previous is m.before, m.current is not m.before))
    converted(jf)


# -- functions rebound in place ---------------------------------------------------

def test_rebinding_defaults_and_code_of_helpers_and_of_the_function(strict):
    """A notebook tweaks ``helper.__defaults__`` or hot-patches ``__code__``: eager runs
    the new definition on the next call, and so does janus (FUNCTION_MATCH on inlined
    callees; the janus function's own definition is re-read)."""
    def make():
        def helper(x, scale=2.0):
            return x * scale

        def doubled(x):
            return x + x

        def halved(x):
            return x * 0.5

        def step(x, bias=1.0):
            return helper(x) + doubled(x) + bias
        return step, (helper, doubled, halved)

    def calls():
        for i in range(12):
            yield i, ((tf.constant([float(i), 1.0]),), {})

    eager_fn, (e_helper, e_doubled, e_halved) = make()
    plain_fn, (j_helper, j_doubled, j_halved) = make()
    jf = janus.function(plain_fn)
    for i, (args, kwargs) in calls():
        if i == 5:
            for helper in (e_helper, j_helper):
                helper.__defaults__ = (10.0,)
        if i == 7:
            e_doubled.__code__, j_doubled.__code__ = e_halved.__code__, j_halved.__code__
        if i == 9:
            eager_fn.__defaults__, plain_fn.__defaults__ = (-3.0,), (-3.0,)
        assert_same(eager_fn(*args, **kwargs), jf(*args, **kwargs), 'call %d' % i)
    assert janus.stats(jf)['graph_calls'] > 0
    assert 'redefined' in janus.explain(jf)


@pytest.mark.parametrize('observe', ['in', '==', 'sorted'])
def test_observations_after_an_item_write_see_the_write(strict, observe):
    """Found by the fuzzer (seeds L/129, H/716): ``counts[0] += 1`` then ``2 in counts``
    looked at the caller's list as it was before the write."""
    def make():
        def f(x, counts):
            counts[0] = counts[0] + 1
            if observe == 'in':
                seen = 2 in counts
            elif observe == '==':
                seen = counts == [2, 2]
            else:
                seen = sorted(counts)[0] == 2
            return x * 2.0 if seen else x
        return f, None
    lists = [[1, 2], [1, 2], [1, 2], [2, 3, 1], [1, 2], [2, 3, 1], [1, 5]]
    calls = [lambda v=v, i=i: ((tf.constant(float(i)), list(v)), {})
             for i, v in enumerate(lists)]
    differential(make, calls)
