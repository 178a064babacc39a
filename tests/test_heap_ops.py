"""Tests of the shadow-heap ops (janus_ops/heap_ops.cc) and janus.heap.heap, on their own.

Each op runs inside a small tf.function (and eagerly where it matters) against
plain Python objects: gets read the heap, sets write only the run's shadow,
commit/discard end the run.  Needs the op library built
(`pip install --no-build-isolation -e .`).
"""

import gc
import threading
import tracemalloc

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops

from janus.heap import heap

HEAP_OPS = (heap.GET_ATTR, heap.SET_ATTR, heap.GET_SUBSCR, heap.SET_SUBSCR)


class Obj:
    """A weakly referenceable heap object."""


def make_obj(**attrs):
    obj = Obj()
    obj.__dict__.update(attrs)
    return obj


@pytest.fixture
def run():
    """A run id in flight; discarded after the test if still open."""
    run_id = heap.begin_run()
    yield run_id
    try:
        heap.discard(run_id)
    except heap.HeapError:
        pass  # the test committed or discarded it


def rid(run_id):
    # np.int64, not a Python int: TF's eager scalar cache would keep every
    # distinct Python int (and its tensor) forever, which the leak tests see.
    return tf.constant(np.int64(run_id))


def dead_error():
    return pytest.raises(tf.errors.FailedPreconditionError, match=heap.DEAD_OBJECT_MARK)


# ------------------------------------------------------------------ gets


@pytest.mark.parametrize('value, dtype, shape', [
    (tf.reshape(tf.range(6, dtype=tf.float32), [2, 3]), tf.float32, [2, 3]),
    (np.arange(4, dtype=np.int64), tf.int64, [4]),
    (np.float64(2.5), tf.float64, []),
    (3, tf.int32, []),
    (3, tf.float32, []),
    (1.5, tf.float32, []),
    (True, tf.bool, []),
    (np.array([True, False]), tf.bool, [2]),
    (np.zeros([0, 3], np.float32), tf.float32, [0, 3]),
    (np.arange(6, dtype=np.float32).reshape(2, 3).T, tf.float32, [3, 2]),  # not C-contiguous
])
def test_get_attr_reads_heap_in_graph(run, value, dtype, shape):
    obj = make_obj(v=value)
    handle = heap.pin(obj)

    @tf.function
    def f(run_id):
        return heap.py_get_attr(run_id, handle, 'v', dtype, shape)

    result = f(rid(run))
    assert result.dtype == dtype and result.shape == shape
    expected = value.numpy() if isinstance(value, tf.Tensor) else np.asarray(value)
    np.testing.assert_array_equal(result.numpy(), expected.astype(dtype.as_numpy_dtype))


def test_get_static_shape_comes_from_shape_attr():
    @tf.function
    def f(run_id, handle):
        value = heap.py_get_attr(run_id, handle, 'v', tf.float32, [None, 4])
        assert value.shape.as_list() == [None, 4]
        return value

    obj = make_obj(v=tf.ones([3, 4]))
    run_id = heap.begin_run()
    assert f(rid(run_id), rid(heap.pin(obj))).shape == [3, 4]
    heap.discard(run_id)


def test_get_works_eagerly(run):
    obj = make_obj(v=tf.constant([1, 2]))
    value = heap.py_get_attr(run, heap.pin(obj), 'v', tf.int32)
    assert value.numpy().tolist() == [1, 2]


def test_get_reads_current_value_on_every_run():
    obj = make_obj(v=1.0)
    handle = heap.pin(obj)

    @tf.function
    def f(run_id):
        return heap.py_get_attr(run_id, handle, 'v', tf.float32, [])

    for value in (1.0, 2.0, 3.0):
        obj.v = value
        run_id = heap.begin_run()
        assert float(f(rid(run_id))) == value  # not folded into a constant
        heap.discard(run_id)


# ------------------------------------------------------------------ sets


def test_set_attr_writes_only_the_shadow(run):
    original = tf.zeros([2])
    obj = make_obj(v=original)
    handle = heap.pin(obj)

    @tf.function
    def f(run_id, x):
        heap.py_set_attr(run_id, handle, 'v', x)
        heap.py_set_attr(run_id, handle, 'fresh', x)

    f(rid(run), tf.ones([2]))
    assert obj.v is original and not hasattr(obj, 'fresh')


def test_get_after_set_in_same_run_sees_shadow(run):
    obj = make_obj(v=tf.zeros([2, 2]))
    handle = heap.pin(obj)

    @tf.function
    def f(run_id, x):
        before = heap.py_get_attr(run_id, handle, 'v', tf.float32, [2, 2])
        with tf.control_dependencies([before]):
            written = heap.py_set_attr(run_id, handle, 'v', before + x)
        with tf.control_dependencies([written]):
            after = heap.py_get_attr(run_id, handle, 'v', tf.float32, [2, 2])
        return before, after

    before, after = f(rid(run), tf.fill([2, 2], 3.0))
    assert before.numpy().sum() == 0 and after.numpy().tolist() == [[3, 3], [3, 3]]
    assert obj.v.numpy().sum() == 0


def test_set_returns_operation_in_graph_none_eagerly(run):
    obj = make_obj()
    handle = heap.pin(obj)
    created = []

    @tf.function
    def f(run_id):
        created.append(heap.py_set_attr(run_id, handle, 'v', tf.constant(1)))

    f(rid(run))
    assert isinstance(created[0], tf.Operation) and created[0].type == heap.SET_ATTR
    assert heap.py_set_attr(run, handle, 'v', tf.constant(1)) is None


def test_commit_writes_back_eager_tensors(run):
    obj = make_obj(v=tf.zeros([2]))
    handle = heap.pin(obj)

    @tf.function
    def f(run_id, x):
        heap.py_set_attr(run_id, handle, 'v', x * 2.0)
        heap.py_set_attr(run_id, handle, 'flag', x > 1.0)
        heap.py_set_attr(run_id, handle, 'count', tf.constant(7, tf.int64))

    f(rid(run), tf.constant([1.0, 2.0]))
    heap.commit(run)
    for name, dtype, shape, values in [('v', tf.float32, [2], [2.0, 4.0]),
                                       ('flag', tf.bool, [2], [False, True]),
                                       ('count', tf.int64, [], 7)]:
        value = getattr(obj, name)
        assert isinstance(value, tf.Tensor) and hasattr(value, 'numpy'), name
        assert value.dtype == dtype and value.shape == shape, name
        assert value.numpy().tolist() == values, name
    with pytest.raises(heap.HeapError, match='not in flight'):
        heap.commit(run)  # a run ends at its commit


def test_commit_replays_first_write_order_last_value(run):
    d = {'a': 0}
    handle = heap.pin(d)
    for key, value in [('new1', 1), ('new2', 2), ('new1', 3), ('a', 4)]:
        heap.py_set_subscr(run, handle, key, tf.constant(value))
    heap.commit(run)
    assert list(d) == ['a', 'new1', 'new2']  # as eager code would have added them
    assert [int(d[k]) for k in d] == [4, 3, 2]


def test_discard_leaves_object_untouched(run):
    original = tf.ones([3])
    obj = make_obj(v=original)
    items = [1.0, 2.0]
    handle, items_handle = heap.pin(obj), heap.pin(items)

    @tf.function
    def f(run_id):
        heap.py_set_attr(run_id, handle, 'v', tf.zeros([3]))
        heap.py_set_attr(run_id, handle, 'other', tf.zeros([3]))
        heap.py_set_subscr(run_id, items_handle, 0, tf.constant(9.0))

    f(rid(run))
    heap.discard(run)
    assert obj.v is original and not hasattr(obj, 'other') and items == [1.0, 2.0]


def test_run_scope_commits_on_return_discards_on_raise():
    obj = make_obj(v=0)
    handle = heap.pin(obj)
    runs = len(heap.shadow)
    with heap.run_scope() as run_id:
        heap.py_set_attr(run_id, handle, 'v', tf.constant(1))
    assert int(obj.v) == 1
    with pytest.raises(tf.errors.InvalidArgumentError):
        with heap.run_scope() as run_id:
            heap.py_set_attr(run_id, handle, 'v', tf.constant(2))
            heap.py_get_attr(run_id, handle, 'v', tf.float32)  # dtype mismatch
    assert int(obj.v) == 1 and len(heap.shadow) == runs


def test_unknown_run_id_fails():
    obj = make_obj(v=1.0)  # pins hold objects weakly: keep them alive
    handle = heap.pin(obj)
    run_id = heap.begin_run()
    heap.discard(run_id)
    with pytest.raises(tf.errors.InvalidArgumentError, match='not in flight'):
        heap.py_get_attr(run_id, handle, 'v', tf.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match='not in flight'):
        heap.py_set_attr(run_id, handle, 'v', tf.constant(1.0))


# -------------------------------------------------------------- mismatches


@pytest.mark.parametrize('value, dtype, shape, what', [
    (tf.zeros([2]), tf.int32, [2], 'float32 tensor'),
    (np.zeros([2], np.float64), tf.float32, [2], 'NumPy float64'),
    (1.5, tf.int32, [], 'float'),
    (True, tf.int32, [], 'bool'),
    (2 ** 40, tf.int32, [], 'out of range'),
    ('text', tf.float32, [], 'str'),
    (None, tf.float32, [], 'NoneType'),
])
def test_dtype_mismatch_names_attribute(run, value, dtype, shape, what):
    obj = make_obj(weights=value)
    handle = heap.pin(obj)

    @tf.function
    def f(run_id):
        return heap.py_get_attr(run_id, handle, 'weights', dtype, shape)

    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        f(rid(run))
    assert '.weights' in info.value.message and heap.MISMATCH_MARK in info.value.message
    assert what in info.value.message


def test_shape_mismatch_names_attribute(run):
    obj = make_obj(weights=tf.zeros([3, 5]))
    handle = heap.pin(obj)

    @tf.function
    def f(run_id):
        return heap.py_get_attr(run_id, handle, 'weights', tf.float32, [None, 4])

    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r'JANUS_HEAP_MISMATCH: Janus>PyGetAttr \.weights .*'
                             r'\[3,5\].*\[\?,4\]'):
        f(rid(run))


def test_missing_attribute_and_raising_property_are_invalid_argument(run):
    class Tricky:
        @property
        def broken(self):
            raise RuntimeError('property exploded')

    obj = Tricky()
    handle = heap.pin(obj)
    with pytest.raises(tf.errors.InvalidArgumentError, match="AttributeError.*'absent'"):
        heap.py_get_attr(run, handle, 'absent', tf.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match='RuntimeError: property exploded'):
        heap.py_get_attr(run, handle, 'broken', tf.float32)


def test_string_values_rejected_when_graph_is_built():
    with tf.Graph().as_default():
        with pytest.raises(TypeError):
            heap.py_get_attr(1, 1, 'name', tf.string)


# ------------------------------------------------------------ dead objects


def test_dead_object_fails_with_precondition_not_crash(run):
    obj = make_obj(v=tf.ones([2]))
    handle = heap.pin(obj)

    @tf.function
    def f(run_id, h):
        return heap.py_get_attr(run_id, h, 'v', tf.float32, [2])

    assert f(rid(run), rid(handle)).shape == [2]
    del obj
    gc.collect()
    with dead_error() as info:
        f(rid(run), rid(handle))
    assert '.v' in info.value.message
    with dead_error():
        heap.py_set_attr(run, handle, 'v', tf.ones([2]))
    # The process and the ops are fine afterwards.
    alive = make_obj(v=tf.ones([2]))
    assert f(rid(run), rid(heap.pin(alive))).shape == [2]


def test_released_handle_is_dead(run):
    items = [1.0]
    handle = heap.pin(items)
    heap.release(handle)
    with dead_error():
        heap.py_get_subscr(run, handle, 0, tf.float32)


def test_unknown_handle_is_invalid_argument(run):
    with pytest.raises(tf.errors.InvalidArgumentError, match='unknown heap handle'):
        heap.py_get_attr(run, 2 ** 60, 'v', tf.float32)


# ------------------------------------------------------------- subscripts


def test_subscr_on_list(run):
    items = [tf.constant(1.0), np.float32(2.0), 3.0]
    handle = heap.pin(items)

    @tf.function
    def f(run_id, x):
        first = heap.py_get_subscr(run_id, handle, 0, tf.float32, [])
        last = heap.py_get_subscr(run_id, handle, -1, tf.float32, [])
        with tf.control_dependencies([first, last]):
            written = heap.py_set_subscr(run_id, handle, 2, x)
        with tf.control_dependencies([written]):
            # -1 and 2 are the same item: the read sees the shadow.
            again = heap.py_get_subscr(run_id, handle, -1, tf.float32, [])
        return first, last, again

    first, last, again = f(rid(run), tf.constant(30.0))
    assert (float(first), float(last), float(again)) == (1.0, 3.0, 30.0)
    assert items[2] == 3.0
    heap.commit(run)
    assert isinstance(items[2], tf.Tensor) and float(items[2]) == 30.0


def test_subscr_on_dict_with_string_and_int_keys(run):
    table = {'w': np.ones([2], np.float32), 7: tf.constant(5)}
    handle = heap.pin(table)

    @tf.function
    def f(run_id, key):
        w = heap.py_get_subscr(run_id, handle, key, tf.float32, [2])
        seven = heap.py_get_subscr(run_id, handle, 7, tf.int32, [])
        written = heap.py_set_subscr(run_id, handle, 'sum', tf.reduce_sum(w) + 1.0)
        with tf.control_dependencies([written]):
            total = heap.py_get_subscr(run_id, handle, 'sum', tf.float32, [])
        return w, seven, total

    w, seven, total = f(rid(run), tf.constant('w'))
    assert w.numpy().tolist() == [1, 1] and int(seven) == 5 and float(total) == 3.0
    assert 'sum' not in table
    heap.commit(run)
    assert float(table['sum']) == 3.0


def test_subscr_errors_are_reported_at_the_op(run):
    items, frozen = [1.0], (1.0,)
    with pytest.raises(tf.errors.InvalidArgumentError, match='IndexError'):
        heap.py_get_subscr(run, heap.pin(items), 5, tf.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match='IndexError'):
        heap.py_set_subscr(run, heap.pin(items), 5, tf.constant(1.0))
    with pytest.raises(tf.errors.InvalidArgumentError, match='KeyError'):
        heap.py_get_subscr(run, heap.pin({}), 'missing', tf.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match='item assignment'):
        heap.py_set_subscr(run, heap.pin(frozen), 0, tf.constant(1.0))


# ------------------------------------------------------ handles and leaks


def test_handle_is_stable_and_weakly_held():
    obj = make_obj()
    handle = heap.pin(obj)
    assert heap.pin(obj) == handle == heap.handle_of(obj)
    assert heap.registry.resolve(handle) is obj
    size = len(heap.registry)
    del obj
    gc.collect()
    assert len(heap.registry) == size - 1  # a weak entry goes with its object
    with pytest.raises(heap.DeadObjectError, match=heap.DEAD_OBJECT_MARK):
        heap.registry.resolve(handle)
    assert heap.pin(make_obj()) != handle  # handles are never reused


def test_strong_entries_need_every_pin_released():
    items = []
    handle = heap.pin(items)
    assert heap.pin(items) == handle
    heap.release(handle)
    assert heap.registry.resolve(handle) is items
    heap.release(handle)
    with pytest.raises(heap.DeadObjectError):
        heap.registry.resolve(handle)


def test_owner_death_releases_its_pins():
    class Owner:
        pass

    owner, other = Owner(), Owner()
    items = [1]
    handle = heap.pin(items, owner)
    assert heap.pin(items, owner) == handle  # an owner pins an object once
    heap.pin(items, other)
    del owner
    gc.collect()
    assert heap.registry.resolve(handle) is items  # `other` still pins it
    del other
    gc.collect()
    with pytest.raises(heap.DeadObjectError):
        heap.registry.resolve(handle)


def _growth(step, count):
    """(bytes, gc-tracked objects) still allocated after ``count`` calls of step(i).

    Bytes are Python allocations (tracemalloc); TF's C++ tensors are not
    traced, but every one the heap could leak is owned by a Python object.
    """
    for i in range(200):  # warm caches (tf.function traces, lru_cache, dicts)
        step(i)
    gc.collect()
    objects = len(gc.get_objects())
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(count):
            step(i)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return grown, len(gc.get_objects()) - objects


def test_no_leak_over_10000_register_release_cycles_with_graph_runs():
    @tf.function
    def f(run_id, handle, items_handle):
        value = heap.py_get_attr(run_id, handle, 'v', tf.float32, [4])
        item = heap.py_get_subscr(run_id, items_handle, 0, tf.float32, [])
        written = heap.py_set_attr(run_id, handle, 'v', value + item)
        with tf.control_dependencies([written]):
            return heap.py_get_attr(run_id, handle, 'v', tf.float32, [4])

    def step(i):
        # New objects every call: one held weakly, one strongly (a list).
        obj, items = make_obj(v=np.full([4], i, np.float32)), [np.float32(i)]
        handle, items_handle = heap.pin(obj), heap.pin(items)
        run_id = heap.begin_run()
        f(rid(run_id), rid(handle), rid(items_handle))
        heap.commit(run_id) if i % 2 else heap.discard(run_id)
        heap.release(handle)
        heap.release(items_handle)

    registered, runs = len(heap.registry), len(heap.shadow)
    grown, objects = _growth(step, 10_000)
    assert len(heap.registry) == registered and len(heap.shadow) == runs
    assert grown < 64 * 1024, grown  # a leaked list per call would be >1 MB
    assert objects < 100, objects


def test_no_leak_over_10000_objects_pinned_by_dying_owners():
    class Graph:
        pass

    def step(i):
        owner = Graph()
        heap.pin([i] * 8, owner)          # strongly held (lists have no weakrefs)
        heap.pin(make_obj(v=i), owner)    # weakly held, dies at once

    registered = len(heap.registry)
    grown, objects = _growth(step, 10_000)
    assert len(heap.registry) == registered
    assert grown < 64 * 1024 and objects < 100, (grown, objects)


# ------------------------------------------------------------ concurrency


def test_interleaved_runs_do_not_see_each_other():
    obj = make_obj(v=tf.constant(0.0))
    handle = heap.pin(obj)
    first, second = heap.begin_run(), heap.begin_run()
    heap.py_set_attr(first, handle, 'v', tf.constant(1.0))
    heap.py_set_attr(second, handle, 'v', tf.constant(2.0))
    assert float(heap.py_get_attr(first, handle, 'v', tf.float32)) == 1.0
    assert float(heap.py_get_attr(second, handle, 'v', tf.float32)) == 2.0
    heap.discard(first)
    assert float(heap.py_get_attr(second, handle, 'v', tf.float32)) == 2.0
    heap.commit(second)
    assert float(obj.v) == 2.0


def test_concurrent_runs_on_threads_are_isolated():
    obj = make_obj(v=tf.constant(-1.0))
    handle = heap.pin(obj)

    @tf.function
    def f(run_id, x):
        written = heap.py_set_attr(run_id, handle, 'v', x)
        with tf.control_dependencies([written]):
            return heap.py_get_attr(run_id, handle, 'v', tf.float32, [])

    wrong = []

    def worker(thread_number):
        for i in range(200):
            mine = float(thread_number * 1000 + i)
            run_id = heap.begin_run()
            seen = float(f(rid(run_id), tf.constant(mine)))
            heap.discard(run_id)
            if seen != mine:
                wrong.append((mine, seen))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong
    assert float(obj.v) == -1.0


def test_unordered_ops_in_one_graph_run_in_parallel_safely():
    # tf.function chains all stateful ops in program order (automatic control
    # dependencies), so this graph is built without them: its 32 heap ops
    # are free to run at once on TF's inter-op threads.
    objs = [make_obj(v=np.full([8], i, np.float32)) for i in range(16)]
    handles = [heap.pin(o) for o in objs]

    def body(run_id):
        values = [heap.py_get_attr(run_id, h, 'v', tf.float32, [8]) for h in handles]
        sets = [heap.py_set_attr(run_id, h, 'w', value * 2.0)
                for h, value in zip(handles, values)]
        with tf.control_dependencies(sets):  # keeps the sets from being pruned
            return tf.add_n(values)

    f = tf.compat.v1.wrap_function(body, [tf.TensorSpec([], tf.int64)])
    assert not any(op.control_inputs for op in f.graph.get_operations()
                   if op.type in HEAP_OPS)
    for _ in range(50):
        run_id = heap.begin_run()
        assert f(rid(run_id)).numpy().tolist() == [120.0] * 8
        heap.commit(run_id)
    assert [float(o.w[0]) for o in objs] == [2.0 * i for i in range(16)]


# ------------------------------------------------------- op registration


def _build_op(op_type):
    """Builds one op of ``op_type`` in a fresh graph and returns it."""
    with tf.Graph().as_default() as graph:
        if op_type == heap.GET_ATTR:
            heap.py_get_attr(1, 1, 'v', tf.float32)
        elif op_type == heap.SET_ATTR:
            heap.py_set_attr(1, 1, 'v', tf.ones([2]))
        elif op_type == heap.GET_SUBSCR:
            heap.py_get_subscr(1, 1, 'k', tf.float32)
        else:
            heap.py_set_subscr(1, 1, 0, tf.ones([2]))
    return next(op for op in graph.get_operations() if op.type == op_type)


@pytest.mark.parametrize('op_type', HEAP_OPS)
def test_ops_are_stateful_and_registered_without_gradient(op_type):
    op = _build_op(op_type)
    assert op.op_def.is_stateful  # never pruned, folded or deduplicated
    assert tf_ops.get_gradient_function(op) is None  # not LookupError


def test_gradient_stops_at_heap_reads(run):
    obj = make_obj(scale=tf.constant(3.0))
    handle = heap.pin(obj)

    @tf.function
    def f(run_id, x):
        scale = heap.py_get_attr(run_id, handle, 'scale', tf.float32, [])
        return scale * x * x

    x = tf.constant(2.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(rid(run), x)
    assert float(tape.gradient(y, x)) == 12.0  # through x; the heap is a constant

    @tf.function
    def inner(run_id):
        scale = heap.py_get_attr(run_id, handle, 'scale', tf.float32, [])
        return tf.gradients(scale, [run_id])

    assert inner(rid(run)) == [None]
