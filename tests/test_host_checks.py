"""Checks and Python calls on relaxed numbers done on the host before the run
(graphgen/hostcheck.py, replay/host.py), and the faster call-time inputs of a run
(replay/entry.py).

The host recomputes a graph's scalar chains op for op with TF's CPU semantics:
every modelled op is compared bit for bit with TF's kernel on edge values.  The
programs are differential (conftest.differential: eager and janus side by side,
returns, exceptions, stdout and state compared after every call) and check that
the graph really ran, with its checks and Python calls on the host.
"""
import math
import struct

import numpy as np
import pytest
import tensorflow as tf

import janus
from conftest import differential
from janus.graphgen import hostcheck
from janus.replay import host as replay_host

INTS = [0, 1, -1, 7, -7, 3, 2 ** 31, -2 ** 31 - 5, 2 ** 53 + 1, 2 ** 62, -2 ** 62,
        2 ** 63 - 1, -2 ** 63, 123456789012345]
FLOATS = [0.0, -0.0, 1.0, -1.5, 0.1, 2.5, 3.5, -2.5, 1e308, -1e308, 1.7e308, math.inf,
          -math.inf, math.nan, 2.0 ** -1022, 3e-308, 1e-300, 1e-160, 2.0 ** 53 + 1.0,
          -0.49999999999999994, 9.3e18, -9.3e18, 123.456]
BOOLS = [False, True]
VALUES = {tf.int64: INTS, tf.float64: FLOATS, tf.bool: BOOLS}


def bits(value):
    """A value as compared: floats by their bits (any NaN is NaN), others as they are."""
    if isinstance(value, float):
        return 'nan' if math.isnan(value) else struct.pack('<d', value)
    return (type(value).__name__, value)


def graph_op(kind, dtypes, out_dtype):
    """``kind`` applied in a tf.function to scalar graph inputs (no constant folding)."""
    def build(*xs):
        if kind == 'Cast':
            return tf.cast(xs[0], out_dtype)
        return getattr(tf.raw_ops, kind)(**dict(zip(_ARGUMENTS[kind], xs)))
    return tf.function(build, input_signature=[tf.TensorSpec([], d) for d in dtypes])


_ARGUMENTS = {k: ('x', 'y') for k in ('AddV2', 'Sub', 'Mul', 'DivNoNan', 'FloorDiv',
                                      'FloorMod', 'Equal', 'NotEqual', 'Less',
                                      'LessEqual', 'Greater', 'GreaterEqual', 'LogicalAnd',
                                      'LogicalOr')}
_ARGUMENTS.update({k: ('x',) for k in ('Neg', 'Abs', 'Floor', 'Round', 'Reciprocal',
                                      'IsFinite', 'LogicalNot')})
_ARGUMENTS['SelectV2'] = ('condition', 't', 'e')


def host_function(kind, dtypes, out_dtype):
    """hostcheck's function for ``kind`` on operands of ``dtypes``, from a graph op."""
    graph = tf.Graph()
    with graph.as_default():
        inputs = [tf.compat.v1.placeholder(d, []) for d in dtypes]
        if kind == 'Cast':
            out = tf.cast(inputs[0], out_dtype)
        else:
            out = getattr(tf.raw_ops, kind)(**dict(zip(_ARGUMENTS[kind], inputs)))
    found = hostcheck._step(out.op, {})
    assert found is not None, kind
    return found[0]


def _cases():
    for kind in ('AddV2', 'Sub', 'Mul', 'FloorDiv', 'FloorMod'):
        yield kind, (tf.int64, tf.int64), tf.int64
    for kind in ('AddV2', 'Sub', 'Mul', 'DivNoNan'):
        yield kind, (tf.float64, tf.float64), tf.float64
    for kind in ('Equal', 'NotEqual', 'Less', 'LessEqual', 'Greater', 'GreaterEqual'):
        yield kind, (tf.int64, tf.int64), tf.bool
        yield kind, (tf.float64, tf.float64), tf.bool
    for kind in ('LogicalAnd', 'LogicalOr'):
        yield kind, (tf.bool, tf.bool), tf.bool
    for kind in ('Neg', 'Abs'):
        yield kind, (tf.int64,), tf.int64
    for kind in ('Neg', 'Abs', 'Floor', 'Round', 'Reciprocal'):
        yield kind, (tf.float64,), tf.float64
    yield 'IsFinite', (tf.float64,), tf.bool
    yield 'LogicalNot', (tf.bool,), tf.bool
    yield 'SelectV2', (tf.bool, tf.float64, tf.float64), tf.float64
    for source in (tf.int64, tf.float64, tf.bool):
        for target in (tf.int64, tf.float64, tf.bool):
            if source != target:
                yield 'Cast', (source,), target


@pytest.mark.parametrize('kind,dtypes,out_dtype', list(_cases()),
                         ids=lambda v: getattr(v, 'name', str(v)))
def test_host_ops_match_tf_kernels_bit_for_bit(kind, dtypes, out_dtype):
    import itertools
    graph = graph_op(kind, dtypes, out_dtype)
    host = host_function(kind, dtypes, out_dtype)
    pools = [VALUES[d] for d in dtypes]
    if len(dtypes) == 3:
        pools = [BOOLS, FLOATS[:12], FLOATS[8:]]
    for operands in itertools.product(*pools):
        if kind in ('FloorDiv', 'FloorMod') and operands[0] == -2 ** 63 and operands[1] == -1:
            continue   # TF's kernel traps there (a division overflow); never a valid value
        try:
            # 0-d NumPy arrays: TF's conversion caches Python scalars by value (-0.0 == 0.0).
            feeds = [tf.constant(np.array(v, dtype=d.as_numpy_dtype))
                     for v, d in zip(operands, dtypes)]
            expected = ('ok', graph(*feeds).numpy().item())
        except tf.errors.InvalidArgumentError:
            expected = ('raised',)
        try:
            actual = ('ok', host(*operands))
        except replay_host.HostRaised:
            actual = ('raised',)
        assert expected[0] == actual[0], (kind, operands, expected, actual)
        if expected[0] == 'ok':
            assert bits(expected[1]) == bits(actual[1]), (kind, operands, expected, actual)


# -- programs -------------------------------------------------------------------------

class Schedule:
    def __init__(self):
        self.step = 0
        self.base_lr = 0.002
        self.decay = 0.5
        self.w = tf.Variable([1.0, 2.0])
        self.lrs = []


def _entry(jf):
    return max(jf.cache.entries(), key=lambda e: e.runs)


def _consumers(entry, op_type):
    return [op for op in entry.concrete.graph.get_operations() if op.type == op_type
            and any(t.consumers() for t in op.outputs)]


def test_a_python_power_schedule_runs_on_the_host(strict):
    """``decay ** (step / 100)``: Python's pow before the run, not a numpy_function in it."""
    def make():
        s = Schedule()

        def step(x):
            s.step += 1
            lr = s.base_lr * s.decay ** (s.step / 100)
            s.w.assign_add(x * lr)
            s.lrs.append(lr)
            return lr
        return step, s
    jf = differential(make, [((tf.constant([1.0, -1.0]),), {}) for _ in range(30)],
                      state=lambda s: (s.step, s.lrs, s.w))
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 2 and stats['graph_calls'] >= 25, stats
    entry = _entry(jf)
    # Python's pow, and eager's conversion of lr (its sign of zero: scalars.py).
    assert entry.host is not None and entry.host.calls == 2 and entry.host.checks >= 3
    assert not _consumers(entry, 'PyFuncStateless')   # nothing in the graph needs it
    live_asserts = [op for op in entry.concrete.graph.get_operations()
                    if op.type == 'Janus>Assert' and op.inputs[0].op.type != 'Const']
    assert not live_asserts


def test_a_host_check_that_fails_changes_nothing_and_reruns():
    """A product outgrowing +-2**62 fails its range check on the host: the call runs
    imperatively (Python's big int), the variable is updated once, later calls too."""
    def make():
        s = Schedule()
        s.scale = 7

        def step(x):
            s.scale = s.scale * 1000
            s.w.assign_add(x)
            return s.scale
        return step, s
    calls = [((tf.constant([1.0, 1.0]),), {}) for _ in range(12)]
    jf = differential(make, calls, state=lambda s: (s.scale, s.w))
    stats = janus.stats(jf)
    assert stats['graph_calls'] >= 2 and stats['fallbacks'] >= 1, stats


def test_python_raising_on_the_host_is_eagers_exception():
    """``math.log`` of a number that turns negative: the host's ValueError ends the
    graph run before it starts; the call re-runs imperatively and raises eager's."""
    def make():
        s = Schedule()
        s.x = 5.0

        def step(t):
            s.x = s.x - 1.0
            s.w.assign_add(t)
            return t * math.log(s.x)
        return step, s
    calls = [((tf.constant([1.0, 2.0]),), {}) for _ in range(8)]
    jf = differential(make, calls, state=lambda s: (s.x, s.w))
    assert janus.stats(jf)['graph_calls'] >= 1


def test_number_arguments_are_read_by_the_host(strict):
    """A relaxed number argument (a graph input of the call) feeds a Python call."""
    def make():
        w = tf.Variable(0.0)

        def step(x, temperature):
            scale = math.cos(temperature / 10.0)
            w.assign_add(scale)
            return x * scale
        return step, w
    calls = [((tf.constant([1.0, 2.0]), 0.5 + i), {}) for i in range(20)]
    jf = differential(make, calls, state=lambda w: w)
    stats = janus.stats(jf)
    assert stats['graph_calls'] >= 14, stats
    # math.cos, and eager's conversion of scale (its sign of zero: scalars.py).
    assert _entry(jf).host is not None and _entry(jf).host.calls == 2


def test_graphs_keep_their_checks_with_the_host_off(strict):
    def make():
        s = Schedule()

        def step(x):
            s.step += 1
            return x * (s.decay ** (s.step / 100))
        return step, s
    with janus.config.patch(host_checks=False):
        jf = differential(make, [((tf.constant([1.0]),), {}) for _ in range(12)],
                          state=lambda s: s.step)
    entry = _entry(jf)
    assert entry.host is None and _consumers(entry, 'PyFuncStateless')


# -- call-time inputs -----------------------------------------------------------------

def test_fast_call_time_inputs_are_tfs_own():
    class Model:
        def __init__(self):
            self.bias = tf.constant([1.0, 2.0])
            self.scale = 0.5
            self.v = tf.Variable([3.0, 4.0])

    m = Model()

    def step(x):
        return x * m.scale + m.bias + m.v

    jf = janus.function(step)
    for i in range(8):
        m.scale = 0.5 + i
        m.bias = tf.constant([1.0 + i, 2.0])
        jf(tf.constant([1.0, 1.0]))
    entry = jf.cache.newest()
    fast = entry._call_graph.captured_inputs
    assert fast is not None
    from janus.heap import shadow_heap
    arguments = {'x': tf.constant([1.0, 1.0])}
    shadow_heap.set_call_arguments(arguments)
    try:
        ours, tfs = fast(), entry.concrete.captured_inputs
    finally:
        shadow_heap.set_call_arguments(None)
    assert len(ours) == len(tfs)
    for a, b in zip(ours, tfs):
        assert a.dtype == b.dtype
        if a.dtype != tf.resource:
            assert np.array_equal(a.numpy(), b.numpy())


def test_scalar_tensors_are_reused_only_for_the_same_bits():
    from janus.trace.call_signature import ScalarTensors
    floats = ScalarTensors(float)
    a = floats.tensor(0.0)
    assert floats.tensor(0.0) is a
    negative = floats.tensor(-0.0)
    assert negative is not a and math.copysign(1.0, negative.numpy()) == -1.0
    nan = floats.tensor(math.nan)
    assert floats.tensor(math.nan) is not nan
    ints = ScalarTensors(int)
    one = ints.tensor(1)
    assert ints.tensor(1) is one and ints.tensor(2).numpy() == 2
    assert one.dtype == tf.int64 and a.dtype == tf.float64


def test_an_unused_integer_division_by_zero_still_raises():
    """The graph no longer runs a division only the host needs: the host raises for it."""
    def make():
        s = Schedule()
        s.n = 4

        def step(x):
            s.n = s.n - 1
            _ = tf.constant(12, tf.int64) // s.n   # unused: eager raises at n == 0
            s.w.assign_add(x)
            return x * 2.0
        return step, s
    calls = [((tf.constant([1.0, 2.0]),), {}) for _ in range(7)]
    differential(make, calls, state=lambda s: (s.n, s.w))


def test_explain_tells_host_checks_from_graph_checks():
    """A check on a relaxed counter runs on the host before the graph; explain says so
    (it used to list every check as made in the graph)."""
    class Stepper:
        def __init__(self):
            self.step = 0

        def run(self, x):
            self.step += 1
            if self.step % 50 == 0:
                x = x * 2.0
            return tf.reduce_sum(x * x)
    stepper = Stepper()
    jf = janus.function(stepper.run)
    for _ in range(8):
        jf(tf.ones([3]))
    text = janus.explain(jf)
    assert 'checked on the host before the run' in text, text
