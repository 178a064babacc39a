"""The stand-in protocol (``values/protocol.py``): janus's trace-time stand-ins for Python
values answer the operators through one dispatch, with eager's meaning.

Differential (eager vs janus on fresh objects, call by call): a relaxed Python number,
an outside NumPy array, text formatted after the run and a chosen container, each used
the way users write code, including the protocol's own method names (which no stand-in's
value has), and the cases where two stand-ins meet in one operation.
"""
import numpy as np
import tensorflow as tf

import janus
from conftest import differential
from janus.control import common
from janus.recursion.structures import NodeRef
from janus.trace.lazy_text import LazyText
from janus.trace.tracing import Chosen, ChosenMethod, UnmergedLocal
from janus.values import protocol
from janus.values.arrays import ArrayStandIn
from janus.values.scalars import DynamicScalar


def floats(n=8):
    return [((tf.constant([1.0, 2.0]), 0.5 + i), {}) for i in range(n)]


def test_every_stand_in_derives_from_the_protocol():
    for kind in (DynamicScalar, ArrayStandIn, NodeRef, UnmergedLocal, Chosen, ChosenMethod,
                 common.TensorList, common.TestValue, LazyText):
        assert issubclass(kind, protocol.StandIn), kind
    assert {'RANK', 'materialize', 'trace_attribute', 'trace_call'} <= protocol.NAMES


def test_protocol_names_are_no_attributes_of_a_relaxed_number():
    """``hasattr(n, 'materialize')`` is False and ``n.RANK`` raises, as for a float."""
    def make():
        def f(x, n):
            return (x * n, hasattr(n, 'materialize'), getattr(n, 'RANK', -1),
                    getattr(n, 'trace_truth', None))
        return f, None
    differential(make, floats())


def test_protocol_names_are_no_attributes_of_text_formatted_after_the_run():
    def make():
        def f(x, n):
            s = f'total {tf.reduce_sum(x)}'
            return x, hasattr(s, 'materialize'), getattr(s, 'RANK', 'none')
        return f, None
    differential(make, floats())


def test_a_protocol_name_read_raises_as_eagerly():
    def make():
        def f(x, n, k):
            if k:
                return x + n.RANK
            return x * n
        return f, None
    calls = [((tf.constant([1.0, 2.0]), 0.5 + i, i >= 5), {}) for i in range(8)]
    differential(make, calls)


def test_an_outside_array_with_a_relaxed_number_and_a_tensor():
    """Operators between an array stand-in, a dynamic number and a tensor, both ways,
    and an array indexed by a relaxed int."""
    table = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)

    def make():
        state = {'table': table.copy()}

        def f(x, n):
            t = state['table']
            i = int(n) % 3
            return (t[i] * x + n, x * t[i], t[i] < x, n * t[i] - t[i] / 2.0,
                    t.shape, t[i].sum())
        return f, state
    differential(make, floats(), state=lambda s: s['table'].tolist())


def test_a_chosen_container_answers_its_attribute_and_method():
    """A tensor-dependent ``if`` chose one of two outside lists; its ``append`` and its
    protocol-named attributes behave as the list's."""
    def make():
        state = {'low': [], 'high': []}

        def f(x, n):
            bucket = state['low'] if tf.reduce_sum(x) * n < 4.0 else state['high']
            bucket.append(1)
            return x * n, hasattr(bucket.append, 'trace_call'), hasattr(bucket, 'RANK')
        return f, state
    differential(make, floats(), state=lambda s: (list(s['low']), list(s['high'])))


def test_a_relaxed_number_still_converts():
    def make():
        def f(x, n):
            return x * n + (1.0 if n > 2.0 else -1.0)
        return f, None
    jf = differential(make, floats(10))
    assert janus.stats(jf)['graph_calls'] >= 3


def test_a_returned_local_two_sides_left_unmerged_traces_again_with_the_flag_fixed():
    """``if k: return x, 'text'`` / ``return x * n`` with ``k`` a relaxed flag: the return
    value cannot be one graph output; the refusal (made after the trace ended) notes
    the flag, and the next trace fixes its value, so calls keep running graphs (was: the
    refusal found no trace and every later call ran as plain Python)."""
    def make():
        def f(x, n, k):
            if k:
                return x, 'text'
            return x * n
        return f, None
    calls = [((tf.constant([1.0, 2.0]), 0.5 + i, i >= 6), {}) for i in range(9)]
    jf = differential(make, calls)
    assert janus.stats(jf)['imperative_calls'] == 0
    assert 'outside of a trace' not in janus.explain(jf)


# -- control flow: tests, tf.cond merges and tf.while_loop carries (values/protocol.py) --

def test_control_flow_asks_the_stand_ins_that_model_it():
    """The defaults leave a stand-in Python-tested, without a number, a tensor or a
    carry; a dynamic number, a test value and a grown list answer for themselves."""
    plain = protocol.StandIn()
    assert plain.trace_tested_in_graph() is False
    assert plain.trace_lineage() == frozenset()
    for answer in (plain.trace_test(), plain.trace_not(), plain.trace_number_type(),
                   plain.trace_tensor(), plain.trace_carry(plain, 'here'),
                   plain.trace_uncarry(None, 'here', frozenset())):
        assert answer is protocol.NOT_MODELLED
    overrides = {name: {kind.__name__ for kind in (DynamicScalar, common.TestValue,
                                                    common.TensorList, ArrayStandIn, NodeRef,
                                                    UnmergedLocal, Chosen, LazyText)
                        if getattr(kind, name) is not getattr(protocol.StandIn, name)}
                 for name in ('trace_tested_in_graph', 'trace_test', 'trace_not',
                              'trace_lineage', 'trace_number_type', 'trace_tensor',
                              'trace_carry', 'trace_uncarry')}
    assert overrides == {
        'trace_tested_in_graph': {'DynamicScalar', 'TestValue'},
        'trace_test': {'DynamicScalar', 'TestValue'},
        'trace_not': {'DynamicScalar', 'TestValue'},
        'trace_lineage': {'DynamicScalar', 'TestValue'},
        'trace_number_type': {'DynamicScalar'},
        'trace_tensor': {'DynamicScalar'},
        'trace_carry': {'DynamicScalar', 'TensorList'},
        'trace_uncarry': {'DynamicScalar', 'TensorList'}}


def test_a_relaxed_number_across_a_tensor_dependent_if_and_loop():
    """A relaxed float merged with a Python float by a tensor-dependent ``if`` (and a
    conditional expression), counted in a loop on it with an outside attribute the loop
    rebinds and a list it grows, and ``not`` of a test on it."""
    class Box:
        pass

    def make():
        box = Box()
        box.total = 0.0

        def f(x, n):
            if tf.reduce_sum(x) * n > 4.0:
                m = n
            else:
                m = 1.0
            scale = n if tf.reduce_sum(x) > 100.0 else 2.0
            i, out = 0, []
            while i < m:
                i += 1
                box.total = box.total + scale
                out.append(x * i)
            if not n > 3.0:
                scale = scale + 1.0
            return tf.stack(out), i, m, scale
        return f, box
    jf = differential(make, floats(), state=lambda box: box.total)
    assert janus.stats(jf)['graph_calls'] >= 4


# -- numbers answer their own operators and builtins (DynamicScalar, scalar_ops) --------

def ints(n=10):
    return [((tf.constant([1.0, 2.0]), 3 + i, 0.5 + i), {}) for i in range(n)]


def test_the_numbers_arithmetic_is_registered_into_their_class():
    """``scalar_ops`` sits above ``scalars``: it hands its operations to the class when
    ``import janus`` imports it (a fresh interpreter: no test imported it first)."""
    import subprocess
    import sys
    found = subprocess.run(
        [sys.executable, '-c', 'import janus; from janus.values.scalars import DynamicScalar; '
         'print(DynamicScalar.arithmetic.binop.__module__)'],
        capture_output=True, text=True, check=True).stdout.split()
    assert found[-1] == 'janus.values.scalar_ops'
    assert DynamicScalar.RANK < min(ArrayStandIn.RANK, NodeRef.RANK, LazyText.RANK)
    assert {'trace_unary', 'trace_identity', 'trace_operand', 'trace_builtin'} <= protocol.NAMES


def test_a_relaxed_number_answers_operators_unary_and_identity():
    def make():
        def f(x, k, n):
            return (x * n + k, k // 2, k % 3, n / 4, 2 ** k, k - n, n < k, 3 >= k,
                    k == 7, -k, +n, ~k, not k, k is None, n is not None, x < n,
                    n * x, 1 < k <= 11, (k % 2) == 0, -x / k)
        return f, None
    jf = differential(make, ints())
    assert janus.stats(jf)['graph_calls'] >= 5, janus.explain(jf)


def test_a_relaxed_number_answers_its_builtins():
    import math

    def make():
        def f(x, k, n):
            return (abs(-k), round(n), round(n, 1), int(n), float(k), bool(k), min(k, 5),
                    max(n, 2.0), divmod(k, 4), math.floor(n), math.cos(n),
                    isinstance(k, int), isinstance(n, float), type(k) is int,
                    sum([k, 2, k]), max([k, 1, 4]), x * math.sqrt(n))
        return f, None
    jf = differential(make, ints())
    assert janus.stats(jf)['graph_calls'] >= 5, janus.explain(jf)


def test_a_relaxed_number_with_text_formatted_after_the_run_or_an_outside_set():
    """``n + text`` and ``n + self.seen`` raise eagerly; janus refuses them as it does
    for any operand (text formatted after the run, a set's order), never by fixing the
    number's value, and later calls keep the relaxed number."""
    def make():
        state = {'seen': {1, 2}}

        def f(x, k, n):
            if k == 8:
                return n + f'{tf.reduce_sum(x)}'
            if k == 10:
                return k | state['seen']
            if k == 11:
                return f'{k}' * 2 + '%d' % k
            return x * n + k
        return f, state
    jf = differential(make, ints(12), state=lambda s: sorted(s['seen']))
    text = janus.explain(jf)
    assert 'k: a graph input' in text and 'n: a graph input' in text, text


def test_a_builtin_hands_on_an_arrays_rows_and_asks_its_class():
    """``enumerate(a)``/``zip(a, ...)`` of an outside 2-d array give its rows (the array's
    ``trace_iterate``), ``isinstance(a, ...)`` the class it stands for (``trace_class``)."""
    table = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)

    def make():
        state = {'table': table.copy(), 'row': np.array([1.0, 2.0], dtype=np.float32)}

        def f(x, n):
            out = x * n
            for i, row in enumerate(state['table']):
                out = out + row * x * i
            for row, k in zip(state['table'], [1.0, 2.0]):
                out = out - x * row * k
            kinds = (isinstance(state['table'], (np.ndarray, list)),
                     isinstance(state['row'], tuple))
            if n > 6.0:
                return out, kinds, list(state['row'])
            return out, kinds
        return f, state
    differential(make, floats(), state=lambda s: s['table'].tolist())


# -- identity, `in`, unary and in-place operators (trace_identity, trace_contains,
#    trace_unary, trace_in_place, trace_attribute_is_none) --------------------------

class Tree:
    def __init__(self, v, left=None, right=None):
        self.v, self.left, self.right = v, left, right


def grown(i):
    """A tree of ``i % 4 + 1`` levels (a fresh object each call: the structure varies)."""
    tree = Tree(1.0)
    for level in range(i % 4):
        tree = Tree(float(level + 2), tree, Tree(0.5) if level % 2 else None)
    return tree


def trees(n=8):
    return [lambda i=i: ((grown(i), tf.constant([1.0, 2.0])), {}) for i in range(n)]


def test_a_node_answers_is_none_and_its_attribute_is_none():
    """``node is None``, ``node is not None`` and ``node.left is None`` in a recursion
    over the user's objects: the node answers them (tensor tests, no read)."""
    def make():
        def total(t, x):
            if t is None:
                return x * 0.0
            here = x * t.v if t.left is None else x * (t.v + 1.0)
            if t.right is not None:
                here = here + total(t.right, x)
            return here + total(t.left, x)
        return total, None
    jf = differential(make, trees())
    assert janus.stats(jf)['graph_calls'] >= 1


def test_a_node_compared_or_identified_with_another_refuses():
    """``a == b`` of nodes and ``a is b`` between two nodes refuse (RECURSION): the
    calls run as plain Python, with eager's results."""
    def make():
        def same(t, x):
            if t is None or t.left is None:
                return x
            return x * 2.0 if t.left == t.right else same(t.left, x) + 1.0
        return same, None
    jf = differential(make, trees())
    assert 'comparing a node' in ' '.join(janus.explain(jf).split())

    def make_identity():
        def same(t, x):
            if t is None or t.left is None:
                return x
            return x * 2.0 if t.left is t.right else same(t.left, x) + 1.0
        return same, None
    jf = differential(make_identity, trees())
    assert 'an identity test between nodes' in ' '.join(janus.explain(jf).split())


def test_an_outside_array_in_place_unary_and_in():
    """``x += t[i]`` (a tensor the target: the tensor's operator) converts; ``-t[i]``,
    ``t[i] += x`` and ``v in t[i]`` refuse (NUMPY_ARRAY) and run as plain Python, with
    eager's results."""
    table = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)

    def make(use):
        def build():
            state = {'table': table.copy()}

            def f(x, n):
                t = state['table']
                row = t[int(n) % 3]
                x += row
                if use == 'negative':
                    return x, -row
                if use == 'in place':
                    row += x
                    return x
                if use == 'in':
                    return x, 3.0 in row
                return x * n
            return f, state
        return build
    for use in ('tensor target', 'negative', 'in place', 'in'):
        jf = differential(make(use), floats(), state=lambda s: s['table'].tolist())
        if use == 'tensor target':
            assert janus.stats(jf)['imperative_calls'] == 0
        else:
            assert 'NumPy array' in ' '.join(janus.explain(jf).split()), use


def test_not_of_an_array_or_of_text_is_decided_by_its_truth():
    """``not mask`` (an outside NumPy array) and ``not f'{y}'`` (text formatted after
    the run) are their truth's: the array's is refused as a truth value (the
    statement becomes a graph break), not as "a unary operator"; the numbers'
    ``trace_unary('Not')`` must leave them to it.  The function flips the mask
    itself on call 5."""
    def make():
        state = {'mask': np.array([1.0])}

        def f(x, flip):
            if flip:
                state['mask'] = np.array([0.0])
            flag = not state['mask']
            y = x * 2.0
            if flag:
                y = y + 1.0
            text = f'{y}'
            return y, flag, not text
        return f, state
    calls = [((tf.constant([float(i)]), i == 5), {}) for i in range(9)]
    jf = differential(make, calls, state=lambda s: s['mask'].tolist())
    text = ' '.join(janus.explain(jf).split())
    assert 'truth value of a NumPy array' in text and 'a unary operator' not in text


# -- a number the graph gives, asked of the protocol everywhere (helper P4) -------------

def test_a_number_the_graph_gives_is_asked_of_the_protocol():
    """``protocol.graph_number_type``/``graph_tensor``: a dynamic number answers its type
    and tensor; a Python number, a tensor and a stand-in that models no number: None."""
    held = tf.constant(3, tf.int64)
    number = DynamicScalar(held, int)
    assert protocol.graph_number_type(number) is int and protocol.is_graph_number(number)
    assert protocol.graph_tensor(number) is held
    for other in (3, 2.5, True, held, protocol.StandIn(), LazyText(['text'])):
        assert protocol.graph_number_type(other) is None, other
        assert not protocol.is_graph_number(other) and protocol.graph_tensor(other) is None


def test_a_relaxed_number_where_the_runtime_asked_its_kind():
    """A relaxed int and float in a chained comparison, as a slice bound and an index, as
    the key of ``in`` (a list, an outside set), formatted (an f-string, ``print``), stored
    on an outside object (a number write) and kept in a returned list."""
    class Box:
        pass

    def make():
        box = Box()
        box.seen, box.step = {4, 6, 9}, 0

        def f(x, k, n):
            rows = tf.range(20.0)
            box.step = k
            print('step', k, f'{n:.2f}')
            return (0 < k < n * 4 < 100, 2 < k > n, rows[:k], rows[k - 3], rows[1:k:2],
                    k in [4, 5, 6], k in box.seen, f'k={k} n={n!r}', [k, n, x * n])
        return f, box
    jf = differential(make, ints(), state=lambda box: (box.step, sorted(box.seen)))
    assert janus.stats(jf)['graph_calls'] >= 5, janus.explain(jf)


def test_a_list_grown_in_a_tensor_loop_answers_library_calls():
    """``tf.stack``/``tf.concat``/``tf.add_n``/``tf.reduce_*`` of a list grown in a
    tensor-dependent loop: the grown list's ``trace_library_call``; another function of
    it refused with its reason (the call runs imperatively, as eager)."""
    assert {kind.__name__ for kind in (DynamicScalar, common.TestValue, common.TensorList,
                                       ArrayStandIn, NodeRef, UnmergedLocal, Chosen, LazyText)
            if kind.trace_library_call is not protocol.StandIn.trace_library_call} \
        == {'TensorList'}
    assert protocol.library_call(tf.stack, ([1.0], protocol.StandIn()), {'axis': 0}) \
        is protocol.NOT_MODELLED

    def make():
        def f(x, k):
            out = []
            while tf.reduce_sum(x) < 40.0:
                x = x * 2.0
                out.append(x)
            if k == 3:
                return tf.gather(out, 0)
            return (tf.stack(out, axis=1), tf.concat(out, 0), tf.add_n(out),
                    tf.reduce_sum(out, axis=0), tf.reduce_max(out))
        return f, None
    calls = [((tf.constant([1.0 + i, 2.0]), i), {}) for i in range(8)]
    jf = differential(make, calls)
    text = janus.explain(jf)
    assert janus.stats(jf)['graph_calls'] >= 4 and "not 'gather_v2'" in text, text


def test_text_formatted_after_the_run_is_a_str_to_type_and_isinstance():
    """Found by the review of the numbers' protocol (pre-existing): ``isinstance(t,
    str)`` and ``type(t) is str`` of ``t = f'{tf.reduce_sum(x)}'`` were False from the
    graph, where eagerly they are True: the text's stand-in now says it stands for a
    ``str`` (``LazyText.trace_class``), and ``isinstance`` of a stand-in asks that."""
    def make():
        def f(x, n):
            text = f'{tf.reduce_sum(x) * n}'
            kinds = (isinstance(text, str), type(text) is str, type(text).__name__,
                     isinstance(text, (int, bytes)), isinstance(text, object))
            return kinds, text
        return f, None
    calls = [((tf.constant([1.0, 2.0]), 3 + i), {}) for i in range(8)]
    jf = differential(make, calls)
    assert janus.stats(jf)['graph_calls'] >= 4


# -- what a run gives back for a stand-in (``materialize``; graphgen/templating.py) --

STAND_INS = (DynamicScalar, ArrayStandIn, NodeRef, UnmergedLocal, Chosen, ChosenMethod,
             common.TensorList, common.TestValue, LazyText)


def test_every_stand_in_says_what_a_run_gives_back_for_it():
    """Each stand-in answers ``materialize`` itself (a description the generation tier
    turns into a template, or its own refusal); none is left to the default, and each
    description has its template (``templating`` asserts that on import)."""
    assert [kind.__name__ for kind in STAND_INS
            if kind.materialize is protocol.StandIn.materialize] == []
    assert {kind.__name__ for kind in protocol.StandIn.__subclasses__()} \
        | {'Chosen'} == {kind.__name__ for kind in STAND_INS}


def test_stand_ins_returned_and_stored_come_back_as_eagerly():
    """A relaxed number, text formatted after the run, an outside array and a view of it,
    returned and stored: the number and the text from the run's values, the array the
    very one, one view per expression (``v`` returned twice and stored is one object; a
    second ``a[None]`` is another)."""
    class Box:
        pass

    def make():
        box = Box()

        def f(a, x, n):
            v = a[None]
            box.v, box.n = v, n * 2
            return v, v, a[None], a, n + 1, f'{tf.reduce_sum(x) * n:.2f}', x * n
        return f, box

    def state(box):
        return getattr(box, 'n', None), getattr(box, 'v', None)
    arrays = [np.arange(3.0), np.ones(3)]
    calls = [((arrays[i % 2], tf.constant([1.0, 2.0]), 0.5 + i), {}) for i in range(8)]
    jf = differential(make, calls, state)
    assert janus.stats(jf)['graph_calls'] >= 4

    fn = janus.function(make()[0])
    for i in range(6):
        v, w, other, a, _, _, _ = fn(arrays[0], tf.constant([1.0]), 1.5 + i)
        assert v is w and other is not v and a is arrays[0] and v.base is arrays[0]
    assert janus.stats(fn)['graph_calls'] >= 2


def test_a_returned_mixed_and_or_or_grown_list_is_refused_for_its_own_reason():
    """``return (self.n > 3) and tf.reduce_sum(x) > 0`` (a dynamic bool or a bool
    tensor) and a returned list grown in a tensor-dependent loop: each refused for what
    it is (was: "cannot return a TestValue / TensorList", naming janus's stand-in), and
    the call runs as plain Python, as eager."""
    from janus.reasons import Reason

    class Model:
        def __init__(self):
            self.n = 0

        def step(self, x):
            self.n += 1
            return (self.n > 3) and (tf.reduce_sum(x) > 0)

    def make():
        model = Model()
        return model.step, model
    calls = [((tf.constant([1.0 - 0.5 * i]),), {}) for i in range(8)]
    jf = differential(make, calls, lambda m: m.n)
    text = janus.explain(jf)
    assert 'TestValue' not in text and 'and/or' in text, text
    events = jf.__janus_function__.events
    assert {event.reason for event in events if event.reason} == {Reason.BRANCH_TYPES}

    def grown_maker():
        def grow(x):
            out = []
            while tf.reduce_sum(x) < 10.0:
                out.append(x)
                x = x * 2.0
            return out
        return grow, None
    jf = differential(grown_maker, [((tf.constant([1.0 + i]),), {}) for i in range(6)])
    text = janus.explain(jf)
    assert 'TensorList' not in text and 'returning or storing it' in text, text


def test_a_tuple_an_if_merged_with_a_relaxed_number_made_in_a_branch_runs_graphs():
    """Found by the review of ``materialize`` (pre-existing): ``t = before`` on one side,
    ``t = (x, n * 3)`` on the other, ``n`` relaxed: the merged tuple's side made in the
    branch held a number whose tensor is the branch's; templating took that side for
    "made outside the branches" and gave the branch's tensor as an output, so every
    trace failed (InaccessibleTensorError, a TF traceback in ``explain``)."""
    def make():
        def f(x, n):
            before = (x, n * 2)
            if tf.reduce_sum(x) > 0:
                t = before
            else:
                t = (x, n * 3)
            return t, before
        return f, None
    calls = [((tf.constant([1.0 if i % 2 == 0 else -1.0]), i), {}) for i in range(9)]
    jf = differential(make, calls)
    assert janus.stats(jf)['imperative_calls'] == 0 and janus.stats(jf)['graph_calls'] >= 4
    assert 'Inaccessible' not in janus.explain(jf)
    for args, _ in calls:   # ``t is before`` where the test took the first side, as eagerly
        t, before = jf(*args)
        assert (t is before) == (float(tf.reduce_sum(args[0])) > 0)


def test_one_number_or_text_returned_twice_and_stored_is_one_object():
    """Found by the review of ``materialize`` (pre-existing): ``m = n * 1000`` and ``s =
    f'{t}'`` returned twice and stored are one object each eagerly (``m is m2``, ``box.s
    is s``); a run gave a new one per place.  Now one per run, as a view is."""
    class Box:
        pass

    def make():
        box = Box()

        def f(x, n):
            s = f'{tf.reduce_sum(x)} and {n}'
            m = n * 1000
            box.s, box.m = s, m
            return s, s, m, m
        return f, box
    fn, box = make()
    jf = janus.function(fn)
    for i in range(8):
        s, s2, m, m2 = jf(tf.constant([1.0 + i]), i + 0.5)
        assert s is s2 and box.s is s and m is m2 and box.m is m, i
        assert s == f'{tf.constant(1.0 + i)} and {i + 0.5}' and m == (i + 0.5) * 1000
    assert janus.stats(jf)['graph_calls'] >= 4


def test_a_recursion_refused_for_its_result_names_the_users_type():
    """Found by the review of ``materialize`` (pre-existing): a recursive function
    returning text was refused as "returning a LazyText" (janus's class); the message now
    names what the code sees (``protocol.type_name``: a str; a node of the structure)."""
    class Node:
        def __init__(self, word=None, left=None, right=None):
            self.word, self.left, self.right = word, left, right
            self.is_leaf = word is not None

    def name(node):
        if node.is_leaf:
            return f'{node.word}'
        return name(node.left)

    def make():
        def g(t):
            return name(t)
        return g, None

    def tree(i):
        return ((Node(left=Node(left=Node(word=i), right=Node(word=3)), right=Node(word=4)),),
                {})
    jf = differential(make, [lambda i=i: tree(i) for i in range(6)])
    text = janus.explain(jf)
    assert 'LazyText' not in text and 'returning a str' in text, text
    assert protocol.type_name(common.TensorList(None, 'here')) == \
        'list grown in a tensor-dependent loop'
    assert protocol.type_name(3) == 'int' and protocol.type_name(protocol.StandIn()) == \
        'value janus computes in the graph'
