"""Guards checked by one generated function (guards.compile_checks) give exactly what
checking them one by one gives: the same first Miss."""
import pytest
import tensorflow as tf

import janus
from janus import guards

GLOBAL_SCALE = 2.0


class Inner:
    def __init__(self):
        self.factor = 3.0
        self.table = {'a': 1.0, 'b': tf.constant([1.0, 2.0])}


class Model:
    def __init__(self):
        self.inner = Inner()
        self.items = [tf.constant([1.0, 1.0]), 0.5]
        self.kind = 'relu'
        self.v = tf.Variable([1.0, 1.0])


def make():
    model = Model()
    offset = [1.0]

    def step(x, m, other, scale=4.0):
        y = x * m.inner.factor * GLOBAL_SCALE * scale + m.items[0] * m.items[1] + offset[0]
        y = y + m.inner.table['b'] * m.inner.table['a']
        if m.kind == 'relu':
            y = tf.nn.relu(y)
        if m is other:
            y = y * 2.0
        return y + m.v
    return step, model


def _entry():
    step, model = make()
    jf = janus.function(step)
    x = tf.constant([1.0, -1.0])
    for _ in range(5):
        jf(x, model, object())
    entry = jf.cache.newest()
    assert entry is not None and janus.stats(jf)['graph_calls'] >= 1, janus.explain(jf)
    return step, model, entry


def _both(entry, arguments):
    """(the guards checked one by one, the compiled check)."""
    slow = guards.checked_in_order(list(entry.source_guards))(arguments, {})
    return slow, guards.compile_checks(list(entry.source_guards))(arguments)


def _arguments(model, other=None, scale=4.0):
    return {'x': tf.constant([1.0, -1.0]), 'm': model, 'other': other or object(),
            'scale': scale}


def test_all_hold_alike():
    _, model, entry = _entry()
    slow, fast = _both(entry, _arguments(model))
    assert slow is None and fast is None


@pytest.mark.parametrize('change', [
    'value', 'type', 'identity', 'deleted attribute', 'missing item', 'list length',
    'global', 'alias', 'tensor shape'])
def test_the_same_first_miss(change):
    global GLOBAL_SCALE
    step, model, entry = _entry()
    arguments = _arguments(model)
    saved = GLOBAL_SCALE
    try:
        if change == 'value':
            model.kind = 'tanh'
        elif change == 'type':
            model.items[1] = 1
        elif change == 'identity':
            model.v = tf.Variable([1.0, 1.0])
        elif change == 'deleted attribute':
            del model.kind
        elif change == 'missing item':
            del model.inner.table['a']
        elif change == 'list length':
            model.items.pop()
        elif change == 'global':
            GLOBAL_SCALE = 3.0
        elif change == 'alias':
            arguments = _arguments(model, other=model)
        elif change == 'tensor shape':
            model.items[0] = tf.constant([1.0, 1.0, 1.0])
        slow, fast = _both(entry, arguments)
    finally:
        GLOBAL_SCALE = saved
    assert slow is not None, change
    assert fast == slow, (change, slow, fast)


def test_entries_check_through_the_compiled_function():
    _, model, entry = _entry()
    assert entry.check(_arguments(model)) is None
    assert 'def check(arguments)' in entry._check_sources.source
    model.kind = 'tanh'
    assert entry.check(_arguments(model)).kind is guards.GuardKind.VALUE_MATCH
