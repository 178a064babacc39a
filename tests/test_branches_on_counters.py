"""Branch hunt (commit 95797c0): counters and `% N` branches, dynamic-scalar tests,
sites assumed where real control flow cannot be built.  Each test runs eagerly and
under janus on fresh objects and compares every call exactly: returns (tensors
bit for bit, Python numbers by type and repr), stdout and the object's state."""
import contextlib
import io
import time

import pytest
import tensorflow as tf

import janus

SAVED = []


def save(tag, value):
    SAVED.append((tag, value))


def snap(v, depth=0):
    if isinstance(v, tf.Variable):
        t = tf.convert_to_tensor(v)
        return ('V', t.dtype.name, tuple(t.shape), t.numpy().tobytes())
    if isinstance(v, tf.Tensor):
        return ('T', v.dtype.name, tuple(v.shape), v.numpy().tobytes())
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [snap(x, depth + 1) for x in v])
    if isinstance(v, dict):
        return ('dict', [(k, snap(x, depth + 1)) for k, x in v.items()])
    if isinstance(v, float):
        return ('float', repr(v))
    if isinstance(v, (bool, int, str, type(None))):
        return (type(v).__name__, v)
    if hasattr(v, '__dict__') and depth == 0:
        return (type(v).__name__, snap(dict(vars(v)), depth + 1))
    return (type(v).__name__, repr(v))


def run(fn, *args):
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            result = ('ok', snap(fn(*args)))
    except Exception as e:  # noqa: BLE001 - the exception is the outcome
        result = ('raised', type(e).__name__, str(e))
    return result, out.getvalue()


def differential(cls, calls, method='f', between=None):
    eager, graph = cls(), cls()
    jf = janus.function(getattr(graph, method))
    for i in range(calls):
        if between is not None:
            between(i, eager)
            between(i, graph)
        x = tf.constant([1.0 + 0.25 * (i % 3), 2.0])
        e = run(getattr(eager, method), x)
        a = run(jf, x)
        assert e == a, (i, e, a)
        assert snap(eager) == snap(graph), (i, snap(eager), snap(graph))
    return janus.stats(jf)


# -- passing cases kept covered ---------------------------------------------------

class IntFloatMerge:
    """The number written on one path is an int, on the other a float."""
    def __init__(self):
        self.step = 0
        self.scale = 1.0

    def f(self, x):
        self.step += 1
        if self.step % 4 == 0:
            self.scale = 1
        else:
            self.scale = self.scale * 0.5
        return x * self.scale, self.scale


class ResetCounter:
    def __init__(self):
        self.step = 0
        self.epoch = 0
        self.lr = 0.1

    def f(self, x):
        self.step += 1
        if self.step >= 5:
            self.step = 0
            self.epoch += 1
            self.lr /= 2
        return x * self.lr + self.epoch


class PrintBeforeAssumed:
    """A print, a variable update and an append before a branch assumed instead."""
    def __init__(self):
        self.step = 0
        self.w = tf.Variable([1.0, -1.0])
        self.hist = []

    def f(self, x):
        self.step += 1
        loss = tf.reduce_sum(x * self.w)
        print('loss', loss, self.step)
        self.w.assign_add(0.5 * x)
        self.hist.append(loss)
        if self.step % 9 == 0:
            save('p', self.step)
            self.hist = []
        return loss


class RaisesEveryN:
    def __init__(self):
        self.step = 0
        self.w = tf.Variable(1.0)

    def f(self, x):
        self.step += 1
        self.w.assign_add(1.0)
        if self.step % 12 == 0:
            save('r', self.step)
            raise RuntimeError('nan at %d' % self.step)
        return x * self.w


class ElifChain:
    def __init__(self):
        self.step = 0
        self.lr = 0.1
        self.w = tf.Variable([1.0, 2.0])

    def f(self, x):
        self.step += 1
        if self.step < 3:
            lr = self.lr * self.step / 3
        elif self.step % 15 == 0:
            save('e', self.step)
            lr = self.lr
        elif self.step % 5 == 0:
            self.lr = self.lr * 0.5
            lr = self.lr
        else:
            lr = self.lr
        self.w.assign_sub(lr * x)
        return lr


class FloatClock:
    """A float accumulating 0.1 (inexact) tested against 1.0."""
    def __init__(self):
        self.t = 0.0
        self.fired = []

    def f(self, x):
        self.t += 0.1
        if self.t >= 1.0:
            self.fired.append(self.t)
            self.t -= 1.0
        return x * self.t


class PrintFormats:
    def __init__(self):
        self.step = 0
        self.lr = 0.1

    def f(self, x):
        self.step += 1
        self.lr = self.lr * 0.7 + 0.01
        if self.step % 2 == 0:
            print(self.lr, repr(self.lr), str(self.step / 3))
            print(f'{self.lr:.3e} {self.lr:g} {self.step:>5d} {self.lr!r} {self.step / 7}')
        else:
            print('odd', self.step, 'lr=%s' % self.lr, '{:.10f}'.format(self.lr))
        return x * self.lr


class TypedAppends:
    def __init__(self):
        self.step = 0
        self.lr = 1.0
        self.hist = []

    def f(self, x):
        self.step += 1
        self.lr = self.lr / 2
        loss = tf.reduce_sum(x)
        if self.step % 2 == 0:
            self.hist.append((self.step, self.lr, loss, self.step / 2, self.step // 2,
                              self.step == 4))
        return loss


class NegativeModulo:
    def __init__(self):
        self.step = -10

    def f(self, x):
        self.step += 3
        if self.step % 4 == 1 or self.step // 3 == -1:
            x = x + 1.0
        if -self.step % 5 == 2:
            x = x * 3.0
        return x, self.step % -4, self.step // -3


class WhileCountdown:
    def __init__(self):
        self.k = 0
        self.acc = []

    def f(self, x):
        self.k = self.k + 3
        y = x
        while self.k > 0:
            y = y * 1.5
            self.k -= 2
        self.acc.append(self.k)
        return y


class BestAfterWarmup:
    """`if self.step > 2 and loss < self.best`, best changed from outside."""
    def __init__(self):
        self.step = 0
        self.best = tf.constant(10.0)
        self.marks = []

    def f(self, x):
        self.step += 1
        loss = tf.reduce_sum(x * x) - 0.5 * self.step
        if self.step > 2 and loss < self.best:
            self.best = loss
            self.marks.append(self.step)
        return loss


def best_from_outside(i, obj):
    if i == 7:
        obj.best = 4.0
    if i == 10:
        obj.best = float('inf')
    if i == 13:
        obj.best = None
    if i == 15:
        obj.best = tf.constant(-3.5)


@pytest.mark.parametrize('cls,calls', [
    (IntFloatMerge, 12), (ResetCounter, 16), (PrintBeforeAssumed, 30), (RaisesEveryN, 30),
    (ElifChain, 32), (FloatClock, 25), (PrintFormats, 12), (TypedAppends, 10),
    (NegativeModulo, 12), (WhileCountdown, 10)])
def test_counter_branch_matches_eager(cls, calls):
    del SAVED[:]
    differential(cls, calls)
    assert len(SAVED) % 2 == 0 and SAVED[0::2] == SAVED[1::2], SAVED


def test_counter_branches_get_one_graph():
    stats = differential(ElifChain, 32)
    assert stats['graphs_built'] <= 2, stats
    assert stats['graph_calls'] >= 25, stats
    stats = differential(FloatClock, 25)
    assert stats['graphs_built'] <= 2 and stats['graph_calls'] >= 20, stats


def test_best_changed_from_outside_matches_eager():
    differential(BestAfterWarmup, 18, between=best_from_outside)


def test_assumed_branch_with_print_before_it_prints_once():
    del SAVED[:]
    stats = differential(PrintBeforeAssumed, 30)
    assert stats['fallbacks'] <= 3 and stats['graph_calls'] >= 24, stats


# -- bugs ----------------------------------------------------------------------------

class Resumed:
    """Every-20 checkpoint stamp (time.time(): janus does not convert it), resumed at 16."""
    def __init__(self, step=16):
        self.step = step
        self.w = tf.Variable([1.0, 2.0])
        self.marks = []

    def train(self, x):
        loss = tf.reduce_sum(x * self.w)
        self.w.assign_sub(0.01 * x)
        self.step += 1
        if self.step % 20 == 0:
            self.marks.append(time.time() > 0)
        return loss


def test_unconvertible_every_n_branch_from_step_0_is_assumed():
    t = Resumed(0)
    jf = janus.function(t.train)
    for _ in range(60):
        jf(tf.constant([1.0, 0.5]))
    stats = janus.stats(jf)   # whole-function graphs, then graph segments around a break
    assert stats['graph_calls'] + stats['graph_part_calls'] >= 50, janus.explain(jf)


def test_unconvertible_every_n_branch_taken_at_the_first_trace_is_assumed():
    """Found by a bug hunt (.bughunt/repro_hunt_1.py): the failed first trace's rewritten
    counter was never made dynamic, so the function ran imperatively for good."""
    t = Resumed(16)     # calls 1-3 profile steps 17-19; call 4 traces step 20
    jf = janus.function(t.train)
    for _ in range(60):
        jf(tf.constant([1.0, 0.5]))
    stats = janus.stats(jf)   # whole-function graphs, then graph segments around a break
    assert stats['graph_calls'] + stats['graph_part_calls'] >= 50, janus.explain(jf)
