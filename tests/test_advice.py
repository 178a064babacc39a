"""Advice that works: each test takes a program showing a reason, applies what
``explain`` says to change, and checks the break or fallback is gone with the
program's meaning unchanged (eager and janus side by side, fresh objects).  And
advice that says nothing is to change asks for no change.
"""
import re

import numpy as np
import tensorflow as tf

import janus
from janus.reasons import NOTHING, Reason

# A clause telling the user to do something: an imperative verb opening the advice
# or a clause of it.
_ORDER = re.compile(r'(?:^|[;:(]\s*|,\s*(?:or|and)\s+)(pass|use|move|decorate|call|keep|'
                    r'replace|define|make|remove|put|wrap|change|write)\b')


def test_advice_that_changes_nothing_asks_for_no_change():
    for reason in Reason:
        if reason.change:
            continue
        text = reason.advice[len(NOTHING):]
        assert not _ORDER.search(text), (reason.name, reason.advice)


class Trainer:
    """A hand-written step: a counter in ``self.step``, the loss logged every 10th."""

    def __init__(self, log):
        self.w = tf.Variable(tf.linspace(-1.0, 1.0, 8)[:, None])
        self.step = 0
        self.log = log

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(x @ self.w - y))
        self.w.assign_sub(0.05 * tape.gradient(loss, self.w))
        self.step += 1
        if self.step % 10 == 0:
            self.log(self, loss)
        return loss


def _print_numpy(trainer, loss):        # what explain says to change
    print('step', trainer.step, 'loss', loss.numpy())


def _tf_print(trainer, loss):           # its advice applied, self.step in the message
    tf.print('step', trainer.step, 'loss', loss)


def _tf_print_loss(trainer, loss):      # its advice applied, the loss alone
    tf.print('loss', loss)


def _run_both(capfd, log, steps=35):
    """Eager and janus on fresh trainers; their losses, weights and printed text."""
    x = tf.random.stateless_normal([16, 8], seed=[1, 2])
    y = tf.random.stateless_normal([16, 1], seed=[3, 4])
    sides = []
    for wrap in (lambda f: f, janus.function):
        trainer = Trainer(log)
        step = wrap(trainer.train_step)
        capfd.readouterr()
        losses = [float(step(x, y)) for _ in range(steps)]
        out, err = capfd.readouterr()
        sides.append((losses, trainer.w.numpy().tolist(), trainer.step, out + err, step))
    (e_losses, e_w, e_step, e_text, _), (j_losses, j_w, j_step, j_text, jf) = sides
    assert np.allclose(e_losses, j_losses, rtol=1e-6), (e_losses, j_losses)
    assert np.allclose(e_w, j_w, rtol=1e-6) and e_step == j_step
    assert e_text == j_text, (e_text, j_text)
    return jf


def test_print_of_numpy_breaks_and_tf_print_applied_runs_whole_graphs(capfd):
    before = janus.stats(_run_both(capfd, _print_numpy))
    assert before['split_calls'] > 0, before   # the advice's premise: a graph break
    for log in (_tf_print, _tf_print_loss):
        jf = _run_both(capfd, log)
        stats = janus.stats(jf)
        assert stats['split_calls'] == 0 and stats['imperative_calls'] == 0, janus.explain(jf)
        assert stats['graph_calls'] >= 30, janus.explain(jf)


def test_numpy_argument_advice_applied_runs_graphs():
    def scale(x):
        return tf.reduce_sum(x * 2.0)

    values = [np.full([3], i, np.float32) for i in range(8)]
    plain = janus.function(scale)
    for v in values:
        plain(v)
    assert janus.stats(plain)['graph_calls'] == 0, janus.explain(plain)   # the premise
    fixed = janus.function(scale)
    for v in values:   # the advice: tf.convert_to_tensor(value)
        assert float(fixed(tf.convert_to_tensor(v))) == float(scale(v))
    assert janus.stats(fixed)['graph_calls'] >= 4, janus.explain(fixed)
    assert janus.stats(fixed)['imperative_calls'] == 0, janus.explain(fixed)
