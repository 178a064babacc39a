"""Branches on numbers that change every call (graphgen/plan.py, control/).

A test computed from a relaxed Python number (``if self.step % 10 == 0``) is
real control flow from the first graph: assuming its outcome would break at
the first call that takes the other path.  Where real control flow cannot be
built (the branch calls something janus does not convert), the outcome is
assumed instead and only the calls that take the other path run imperatively;
when that happens too often the graph is dropped (these tests run without graph
breaks; with them, the statement runs in Python once the other path is taken
again: tests/test_graph_breaks.py).  Every test compares janus
with eager on fresh objects after every call: returns, stdout, state.
"""
import contextlib
import io
import json
import os
import tempfile

import pytest
import keras
import tensorflow as tf

import janus
from conftest import assert_same, outcome

SAVED = []   # what ``save`` wrote, per side
LOG_FILE = os.path.join(tempfile.mkdtemp(prefix='janus_counter_branches_'), 'log.jsonl')


def save(tag, value):
    """Checkpointing or logging I/O: janus does not convert ``open``, so a branch that
    calls it cannot be a tf.cond."""
    with open(LOG_FILE, 'a') as f:
        f.write(json.dumps({'tag': tag, 'value': value}) + '\n')
    SAVED.append((tag, value))


class Trainer:
    def __init__(self, every, tag):
        self.w = tf.Variable([0.5, -0.25])
        self.step = 0
        self.lr = 0.1
        self.every = every
        self.tag = tag
        self.history = []

    def train(self, x):
        loss = tf.reduce_mean(tf.square(x * self.w - 1.0))
        self.w.assign_sub(self.lr * x)
        self.step += 1
        if self.step % 25 == 0:
            self.lr = self.lr * 0.5
        if self.step % self.every == 0:
            self.history.append(loss)
            print('step', self.step, 'lr', self.lr)
        return loss

    def train_and_save(self, x):
        loss = self.train(x)
        if self.step % self.every == 0:
            save(self.tag, self.step)
        return loss

    def train_and_save_mostly(self, x):
        loss = self.train(x)
        if self.step > 4 and self.step % self.every != 0:
            save(self.tag, self.step)
        return loss

    def state(self):
        return dict(w=self.w.numpy().tolist(), step=self.step, lr=self.lr,
                    history=[float(h) for h in self.history])


def differential(method, every, calls):
    """Runs ``calls`` calls of Trainer.<method> eagerly and under janus, comparing
    after each; returns the janus function."""
    eager, graph = Trainer(every, 'eager'), Trainer(every, 'janus')
    jf = janus.function(getattr(graph, method))
    del SAVED[:]
    for i in range(calls):
        x = tf.constant([1.0 + 0.25 * (i % 3), 2.0])
        seen = []
        for fn in (getattr(eager, method), jf):
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                seen.append((outcome(fn, x), printed.getvalue()))
        (e, e_out), (a, a_out) = seen
        assert e[0] == a[0] == 'ok', (i, e, a)
        assert_same(e[1], a[1], 'call %d' % i)
        assert e_out == a_out, (i, e_out, a_out)
        assert eager.state() == graph.state(), (i, eager.state(), graph.state())
        mine = [step for tag, step in SAVED if tag == 'janus']
        assert mine == [step for tag, step in SAVED if tag == 'eager'], i
    return jf


def test_every_n_branch_is_real_control_flow_from_the_first_graph():
    jf = differential('train', every=10, calls=60)
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 0, janus.explain(jf)
    assert stats['graphs_built'] <= 2, janus.explain(jf)
    assert stats['graph_calls'] >= 55, stats


@pytest.mark.usefixtures('without_graph_breaks')
def test_unconvertible_branch_is_assumed_and_its_rare_calls_run_imperatively():
    jf = differential('train_and_save', every=20, calls=100)
    stats = janus.stats(jf)
    report = janus.explain(jf)
    assert stats['graphs_built'] <= 2, report
    assert stats['fallbacks'] == 5, report    # calls 20, 40, 60, 80, 100
    assert stats['graph_calls'] >= 90, stats
    assert 'assumed instead' in report and 'kept while rare' in report, report


@pytest.mark.usefixtures('without_graph_breaks')
def test_assumed_outcome_breaking_often_drops_the_graph():
    """From step 5 on, 3 calls in 4 take the other path: more breaks than
    1 + ``assumed_break_rate`` x successful runs, so the graph is dropped and the calls
    run imperatively."""
    jf = differential('train_and_save_mostly', every=4, calls=30)
    stats = janus.stats(jf)
    report = janus.explain(jf)
    # Dropped, rebuilt on the profile's majority while it still favours the graph's
    # path; then the majority takes the path janus cannot convert: imperative.
    assert 2 <= stats['fallbacks'] <= 6, report
    assert stats['imperative_calls'] >= 18, stats
    assert 'had to assume' in report and "calls to 'open'" in report, report


@pytest.mark.usefixtures('without_graph_breaks')
def test_every_few_calls_keeps_the_graph():
    """Every 5th call takes the other path: the graph stays (it holds 4 calls in 5)."""
    jf = differential('train_and_save', every=5, calls=40)
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1 and stats['fallbacks'] == 8, janus.explain(jf)
    assert stats['graph_calls'] == 29, stats      # 40 calls: 3 profiled, 8 broke


@pytest.mark.usefixtures('without_graph_breaks')
def test_break_rate_is_a_knob():
    """With a rate of 0 and no rebuilds, the graph survives one break only (the free
    one), then the calls run imperatively."""
    with janus.config.patch(assumed_break_rate=0.0, assumed_rebuilds=0):
        jf = differential('train_and_save', every=8, calls=40)
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1, janus.explain(jf)
    assert stats['fallbacks'] == 2, janus.explain(jf)
    assert stats['graph_calls'] == 4 + 7, stats


@pytest.mark.usefixtures('without_graph_breaks')
def test_graph_built_on_a_call_taking_the_other_path():
    """Training resumed at step 16, saving every 20 steps: the call that builds the
    first graph (step 20) takes the branch janus cannot convert."""
    eager, graph = Trainer(20, 'eager'), Trainer(20, 'janus')
    eager.step = graph.step = 16
    jf = janus.function(graph.train_and_save)
    del SAVED[:]
    for i in range(60):
        x = tf.constant([1.0, 2.0])
        assert_same(eager.train_and_save(x), jf(x), 'call %d' % i)
        assert eager.state() == graph.state(), i
    assert SAVED[0::2] == [('eager', s) for _, s in SAVED[1::2]]
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1 and stats['graph_calls'] >= 53, janus.explain(jf)


@pytest.mark.usefixtures('without_graph_breaks')
def test_relaxed_tensor_branch_that_cannot_be_built_assumes_the_usual_outcome():
    """A tensor test whose assumption broke (the loss rose) and whose real control flow
    cannot be built: the next graph assumes what the profile showed most often."""
    class Watch:
        def __init__(self):
            self.best = tf.constant(100.0)

        def __call__(self, x):
            loss = tf.reduce_sum(x)
            if loss > self.best:
                save('watch', float(loss))
            else:
                self.best = loss
            return loss

    # improving, one rise (call 3: relaxed), improving, a rise among 15 runs (kept)
    inputs = [5.0, 4.0, 3.0, 6.0] + [2.0 - 0.05 * i for i in range(15)] + [9.0] + [
        1.0 - 0.05 * i for i in range(15)]
    eager, graph = Watch(), Watch()
    jf = janus.function(graph)
    del SAVED[:]
    for i, v in enumerate(inputs):
        x = tf.constant([v, 0.0])
        assert_same(eager(x), jf(x), 'call %d' % i)
        assert float(eager.best) == float(graph.best), i
    assert SAVED[0::2] == SAVED[1::2]
    stats = janus.stats(jf)
    assert stats['fallbacks'] == 2 and stats['graph_calls'] >= 28, janus.explain(jf)


class Logger:
    def __init__(self):
        self.step = 0
        self.log = []

    def tuples(self, x):
        self.step += 1
        self.log.append(('step', self.step * 2, [self.step / 4]))
        return x + 1.0

    def extend_insert(self, x):
        self.step += 1
        self.log.extend([self.step, self.step + 1])
        self.log.insert(0, self.step % 3)
        return x

    def every_third_dict(self, x):
        self.step += 1
        if self.step % 3 == 0:
            self.log.append({'step': self.step, 'loss': x})
        return x

    def by_position(self, x):
        self.step += 1
        self.log.insert(self.step % 2, 5)   # the position needs the value: a graph per value
        return x


@pytest.mark.parametrize('method,graphs', [('tuples', 1), ('extend_insert', 1),
                                           ('every_third_dict', 1), ('by_position', 16)])
def test_lists_store_counters_as_python_numbers(method, graphs):
    """``log.append((tag, self.step))`` stores the number: written back as a Python
    int after the run, no need for its value in the trace."""
    eager, graph = Logger(), Logger()
    jf = janus.function(getattr(graph, method))
    for i in range(12):
        x = tf.constant(float(i))
        assert_same(getattr(eager, method)(x), jf(x), 'call %d' % i)
        assert eager.step == graph.step
        assert repr(eager.log) == repr(graph.log), (i, eager.log, graph.log)
        assert [type(v) for v in eager.log] == [type(v) for v in graph.log]
    assert janus.stats(jf)['graphs_built'] <= graphs, janus.explain(jf)


class WarmUp:
    """A warm-up phase that returns early; after it the other path, for good."""

    def __init__(self):
        self.w = tf.Variable(1.0)
        self.step = 0
        self.warmup = 8

    def train(self, x):
        self.step += 1
        if self.step <= self.warmup:
            return x * 0.0
        loss = tf.reduce_sum(x * self.w)
        self.w.assign_sub(0.01 * loss)
        return loss


def test_early_return_during_warm_up_follows_the_new_regime():
    """``if self.step <= warmup: return``: a test with a return inside cannot be a
    tf.cond, so its outcome is assumed; when the warm-up ends the graph breaks and is
    rebuilt on the outcome the calls now take, not run imperatively for good."""
    eager, graph = WarmUp(), WarmUp()
    jf = janus.function(graph.train)
    for i in range(40):
        x = tf.constant([1.0, 2.0 + i])
        assert_same(eager.train(x), jf(x), 'call %d' % i)
        assert (eager.step, float(eager.w)) == (graph.step, float(graph.w)), i
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 28, janus.explain(jf)


class Critic:
    """A WGAN-style step: the generator trains every n_critic-th step, in a branch
    that binds locals of its own (tape, g_loss) and rebinds one (grads)."""

    def __init__(self):
        keras.utils.set_random_seed(3)
        self.g = keras.Sequential([keras.layers.Dense(8, activation='relu'),
                                   keras.layers.Dense(4)])
        self.d = keras.Sequential([keras.layers.Dense(8, activation='relu'),
                                   keras.layers.Dense(1)])
        self.g.build((None, 2))
        self.d.build((None, 4))
        self.g_opt, self.d_opt = keras.optimizers.SGD(0.01), keras.optimizers.SGD(0.01)
        self.step = 0
        self.n_critic = 3
        self.g_losses = []

    def train_step(self, real):
        self.step += 1
        noise = tf.ones([4, 2]) * 0.1
        with tf.GradientTape() as tape:
            d_loss = tf.reduce_mean(self.d(self.g(noise))) - tf.reduce_mean(self.d(real))
        grads = tape.gradient(d_loss, self.d.trainable_variables)
        self.d_opt.apply_gradients(zip(grads, self.d.trainable_variables))
        if self.step % self.n_critic == 0:
            with tf.GradientTape() as tape:
                g_loss = -tf.reduce_mean(self.d(self.g(noise)))
            grads = tape.gradient(g_loss, self.g.trainable_variables)
            self.g_opt.apply_gradients(zip(grads, self.g.trainable_variables))
            self.g_losses.append(g_loss)
        return d_loss

    def state(self):
        return ([v.numpy().tolist() for v in self.g.weights + self.d.weights],
                [float(v) for v in self.g_losses], self.step)


def test_branch_locals_that_cannot_merge_are_fine_when_unused():
    eager, graph = Critic(), Critic()
    jf = janus.function(graph.train_step)
    for i in range(20):
        real = tf.constant([[0.5 + 0.1 * i, -1.0, 0.25, 2.0]] * 4)
        assert_same(eager.train_step(real), jf(real), 'call %d' % i)
        assert eager.state() == graph.state(), i
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1 and stats['graph_calls'] == 17, janus.explain(jf)


class OnePath:
    def __init__(self):
        self.step = 0
        self.out = []

    def used_later(self, x):
        self.step += 1
        if self.step % 3 == 0:
            extra = x * 2.0
        y = x + 1.0
        if self.step % 3 == 0:
            self.out.append(extra)       # bound there too: eagerly fine
        return y

    def identity_after(self, x):
        self.step += 1
        if self.step % 3 == 0:
            marker = x * 2.0
        else:
            marker = None
        return x if marker is None else marker


@pytest.mark.parametrize('method', ['used_later', 'identity_after'])
def test_branch_locals_used_after_the_if_keep_eagers_answers(method):
    """A local that is a tensor on one side and unbound (or None) on the other cannot
    be one graph value: a use after the if refuses, and janus specializes or assumes
    (never a wrong answer)."""
    eager, graph = OnePath(), OnePath()
    jf = janus.function(getattr(graph, method))
    for i in range(15):
        x = tf.constant([float(i), 1.0])
        assert_same(getattr(eager, method)(x), jf(x), 'call %d' % i)
        assert eager.step == graph.step
        assert [v.numpy().tolist() for v in eager.out] == [v.numpy().tolist() for v in graph.out]


def test_loop_on_a_changing_bound_with_checks_after_a_variable_update():
    """A while loop on a number that changes between calls (a tf.while_loop), whose
    body tests a variable updated earlier in the call and checks a counter's range:
    its checks cannot precede the update, so the loop is assumed instead (was: a graph
    with a cycle, a TF error at run time; found by the fuzzer, seed 'ci', program 171)."""
    def make():
        counter = tf.Variable(0)

        def f(x, p):
            acc = x * 1.0
            counter.assign_add(1)
            w = 0
            while w < p:
                w += 1
                if counter % 3 == 0:
                    acc = acc * 0.5
                acc = acc * 1.5
            return acc, w
        return f, counter
    (eager, e_counter), (graph, g_counter) = make(), make()
    jf = janus.function(graph)
    for i, p in enumerate([2, 2, 2, 2, 3, 4, 2, 3, 3, 5]):
        x = tf.constant([1.0, 2.0 + i])
        assert_same(eager(x, p), jf(x, p), 'call %d' % i)
        assert int(e_counter) == int(g_counter)
    # without the refusal the graph had a cycle: dropped as a janus internal error
    assert 'internal error' not in janus.explain(jf), janus.explain(jf)


class Accumulate:
    """Gradient accumulation: the optimizer applies every accum_steps-th step, in a
    branch on the counter, and its first apply builds Adam's slots."""

    def __init__(self):
        keras.utils.set_random_seed(5)
        self.model = keras.Sequential([keras.layers.Dense(4, activation='relu'),
                                       keras.layers.Dense(3)])
        self.model.build((None, 2))
        self.opt = keras.optimizers.Adam(1e-2)
        self.accum = [tf.Variable(tf.zeros_like(v), trainable=False)
                      for v in self.model.trainable_variables]
        self.step = 0
        self.accum_steps = 4
        self.log = []

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.model(x)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        grads = tape.gradient(loss, self.model.trainable_variables)
        for a, g in zip(self.accum, grads):
            a.assign_add(g / self.accum_steps)
        self.step += 1
        if self.step % self.accum_steps == 0:
            self.opt.apply_gradients(zip(self.accum, self.model.trainable_variables))
            for a in self.accum:
                a.assign(tf.zeros_like(a))
        if self.step % 5 == 0:
            self.log.append(float(loss))
            print(f'step {self.step}: loss {loss:.4f}')
        return loss

    def state(self):
        return ([v.numpy().tolist() for v in self.model.weights + self.accum], self.log,
                self.step)


def test_gradient_accumulation_converts_once_the_optimizer_is_built():
    """Adam's first apply happens in the branch: that call runs imperatively (janus does
    not build optimizer slots in a trace, not even in a tf.cond branch, where it used to
    be mistaken for the branch raising); then one graph."""
    eager, graph = Accumulate(), Accumulate()
    jf = janus.function(graph.train_step)
    for i in range(24):
        x = tf.constant([[0.5 * i, 1.0], [-1.0, 0.25 * i]])
        y = tf.constant([i % 3, (i + 1) % 3])
        seen = []
        for fn in (eager.train_step, jf):
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                seen.append((fn(x, y), printed.getvalue()))
        assert_same(seen[0][0], seen[1][0], 'call %d' % i)
        assert seen[0][1] == seen[1][1]
        assert eager.state() == graph.state(), i
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1 and stats['fallbacks'] == 0, janus.explain(jf)
    assert stats['graph_calls'] == 20, stats


def _history_step(x, history, step):
    loss = tf.reduce_sum(x * x)
    if step % 3 == 0:
        history.append(loss)
    history.append(step)
    return loss


@pytest.mark.parametrize('fresh_list_every', [0, 7])
def test_list_argument_that_grows_is_passed_as_itself(fresh_list_every):
    """``train(x, history, step)`` with a history list that grows: after its length
    changed once the list is passed as itself (written through it after the run), not
    one graph per length; a new list object from time to time is written just the same.
    (Reading ``history[-1]`` or ``len(history)`` still guards the length.)"""
    eager_history, graph_history = [], []
    jf = janus.function(_history_step)
    for i in range(30):
        if fresh_list_every and i % fresh_list_every == 0:
            eager_history, graph_history = [tf.constant(1.0)], [tf.constant(1.0)]
        x = tf.constant([0.5 * i, 1.0])
        assert_same(_history_step(x, eager_history, i), jf(x, graph_history, i), 'call %d' % i)
        assert [float(v) for v in eager_history] == [float(v) for v in graph_history], i
        assert [type(v) for v in eager_history] == [type(v) for v in graph_history], i
    stats = janus.stats(jf)
    assert stats['graphs_built'] <= 3 and stats['graph_calls'] >= 25, janus.explain(jf)


def _aliased_lists(x, grows, same):
    grows.append(1)
    return x + len(same)


def test_a_list_passed_twice_stays_one_object():
    """``f(x, A, A)``: appending through one parameter changes the other's length, in
    the call.  A growing list passed twice is not passed as itself (fuzzer seed 'ci',
    programs 65, 107, 150, 162, 327, 419, 449: the trace saw two lists)."""
    eager_list, graph_list = [1], [1]
    jf = janus.function(_aliased_lists)
    for i in range(12):
        x = tf.constant([0.5 * i, 1.0])
        other = graph_list if i % 5 else [7]
        eager_other = eager_list if i % 5 else [7]
        assert_same(_aliased_lists(x, eager_list, eager_other),
                    jf(x, graph_list, other), 'call %d' % i)
        assert eager_list == graph_list, i


class BestStep:
    """A number written under a tf.cond and read after it: the read (of the value
    before the write, on the path not taken) comes after the write in the trace."""

    def __init__(self):
        self.step = 0
        self.best_step = 0

    def train(self, x):
        self.step += 1
        if self.step % 4 == 0:
            self.best_step = self.step
        return x + self.best_step


def test_a_number_written_in_a_branch_and_read_after_it_is_dynamic_at_once():
    eager, graph = BestStep(), BestStep()
    jf = janus.function(graph.train)
    for i in range(30):
        x = tf.constant([1.0, float(i)])
        assert_same(eager.train(x), jf(x), 'call %d' % i)
        assert (eager.step, eager.best_step) == (graph.step, graph.best_step), i
        assert type(graph.best_step) is int
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 1 and stats['graph_calls'] == 27, janus.explain(jf)
