"""A loop over an outside list or dict that its own body changes, as eager runs it:
a list loop (direct, through ``enumerate``/``zip``, or through a list iterator
passed in) sees the items appended and written by earlier steps; a dict loop
whose body adds a key raises RuntimeError (janus runs it imperatively).

Differential tests on fresh objects (``conftest.differential``), state after
every call.  A finding of this session's own hunt: the unrolled loop used to walk
a snapshot of the list taken before the loop, silently dropping the appended items.
"""
import collections

import tensorflow as tf

import janus
from tests.conftest import differential


class Queue:
    """A work queue as users keep one: items appended while it is walked."""

    def __init__(self):
        self.items = [1.0, 2.0]


def _state(queue):
    state = list(queue.items)
    queue.items[:] = [1.0, 2.0]   # both sides start the next call from the same queue
    return state


def _call(x):
    return lambda: ((tf.constant(x),), {})


def _graph_runs(jf):
    return janus.stats(jf)['graph_calls']


def test_a_loop_sees_items_its_body_appends():
    def make():
        queue = Queue()

        def drain(x):
            for v in queue.items:
                if v < 2.0:
                    queue.items.append(v + 10.0)
                x = x + v
            return x
        return drain, queue
    jf = differential(make, [_call(0.0)] * 6, state=_state)
    assert _graph_runs(jf) >= 2


def test_enumerate_and_a_list_iterator_see_appends_and_item_writes():
    def make():
        queue = Queue()
        queue.pending = iter(queue.items)

        def walk(x):
            for i, v in enumerate(queue.items):
                if i == 0:
                    queue.items.append(5.0)
                    queue.items[1] = 7.0
                x = x * 2.0 + v
            for v in queue.pending:
                x = x - v
                if v == 1.0:
                    queue.items.append(0.5)
            return x
        return walk, queue

    def state(queue):
        seen = (list(queue.items), queue.pending.__reduce__()[1:])
        queue.items[:] = [1.0, 2.0]
        queue.pending = iter(queue.items)
        return seen
    jf = differential(make, [_call(1.0)] * 6, state=state)
    assert _graph_runs(jf) >= 2


def test_a_dict_loop_that_adds_a_key_raises_as_eagerly():
    def make():
        table = {'a': 1.0}

        def grow(x):
            for key in table:
                table[key + 'x'] = x
            return x
        return grow, table
    differential(make, [_call(1.0)] * 5,
                 state=lambda t: (sorted(t), t.clear(), t.update({'a': 1.0})))


def test_a_deque_loop_that_appends_raises_as_eagerly():
    def make():
        history = collections.deque([1.0, 2.0], maxlen=4)

        def replay(x):
            for v in history:
                if v < 2.0:
                    history.append(v + 10.0)
                x = x + v
            return x
        return replay, history

    def state(history):
        seen = list(history)
        history.clear()
        history.extend([1.0, 2.0])
        return seen
    differential(make, [_call(1.0)] * 5, state=state)


def _table_state(table):
    seen = sorted(table.items())
    table.clear()
    table.update({'a': 1.0, 'b': 2.0})
    return seen


def test_a_loop_over_dict_items_that_adds_a_key_raises_as_eagerly():
    def make():
        table = {'a': 1.0, 'b': 2.0}

        def grow(x):
            for i, (key, v) in enumerate(table.items()):
                if v < 2.0:
                    table[key + 'x'] = v
                x = x + v * i
            return x
        return grow, table
    differential(make, [_call(1.0)] * 5, state=_table_state)


def test_a_loop_over_dict_items_that_rewrites_existing_keys_converts():
    def make():
        table = {'a': 1.0, 'b': 2.0}

        def rescale(x):
            for key, v in table.items():
                table[key] = v * 2.0
                x = x + v
            for v in table.values():
                x = x * v
            return x
        return rescale, table
    jf = differential(make, [_call(1.0)] * 5, state=_table_state)
    assert _graph_runs(jf) >= 2
