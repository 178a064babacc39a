"""The example models (examples/): janus trains each one exactly as eager does.

Differential: the same program, fresh objects per mode, same seeds and data;
losses, units, printed output and the whole observable state (weights,
optimizer slots and learning rates, Keras metrics, Python lists, carried RNN
state, step counters, Python-float schedules, best losses) compared after
every step, through the assumption changes each model brings (short last
batches, a flipped batch-norm flag, rollouts of varying length, a counter and
a schedule that change every step, "every N steps" branches, best-loss
tracking).  The subclasses below shorten the examples' intervals so that
every branch is taken within a few steps.  What janus did (graphs built,
imperative calls) is printed, not asserted: how many graphs these programs
need is the benchmark's business (``benchmarks/paper_table.py``), whether
janus computes eager's results is this file's.  This is the fast form of the
benchmark's convergence check (Figure 6).
"""
import contextlib
import io
import os
import sys

import numpy as np
import pytest

import janus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'examples'))

import a3c  # noqa: E402
import detector  # noqa: E402
import gan  # noqa: E402
import keras_loop  # noqa: E402
import lenet  # noqa: E402
import lstm_lm  # noqa: E402
import quickstart  # noqa: E402
import reinforce  # noqa: E402
import resnet  # noqa: E402
import tree_rnn  # noqa: E402


class LeNet(lenet.LeNet):
    milestones, log_every = (3, 6), 2       # learning rate halved twice, accuracy every 2nd step
    examples = 260                          # batches of 50: every 6th is a short one (10)


class ResNet(resnet.ResNet):
    eval_every, patience, decay_steps = 2, 1, 4   # evaluation at steps 0, 2, 4; schedule ends at 4


class LSTM(lstm_lm.LSTMLanguageModel):
    log_every, decay_steps = 2, 4


class A3C(a3c.A3C):
    log_every, anneal_updates = 3, 4        # the entropy bonus reaches its floor at update 4


class GAN(gan.GAN):
    decay_start, decay_steps, log_every = 3, 5, 2   # the learning rates reach 0 at step 8
    examples = 400                                  # batches of 128: every 4th is short (16)


class Reinforce(reinforce.Reinforce):
    log_every, max_frames = 3, 12           # short episodes; the print every 3rd


class Detector(detector.DetectorWorkload):
    log_every = 3                           # the refused line inside call() every 3rd call
    examples = 96


class KerasLoop(keras_loop.KerasLoop):
    print_every = 3
    examples = 300                          # epochs of 5 batches, the last one short (44)


# model: steps (enough to reach what each model changes: LeNet's short batches
# are steps 6 and 12, GAN's 4 and 8, the Keras loop's epochs end after steps 5 and 10)
CASES = {
    LeNet: 13,
    # Grappler's arithmetic optimizer reorders the sums of gradients at the residual
    # joins (float reassociation; exact with it off), which batch norm and momentum
    # amplify to ~1e-4 by step 5.  A wrong phase would be off by orders more.
    ResNet: (6, 1e-3),
    LSTM: 6,
    A3C: 8,
    GAN: 9,
    KerasLoop: 12,
    # Its breaks are found one call at a time (each re-cuts the function and its
    # segments profile anew): 24 episodes reach graphs for the frames and the update.
    Reinforce: 24,
    Detector: 10,
}


def assert_same_value(expected, actual, where, rtol):
    if isinstance(expected, tuple) and expected and expected[0] == 'tensor':
        assert isinstance(actual, tuple) and actual[:2] == expected[:2], \
            '%s: %r is not a %s tensor' % (where, actual, expected[1])
        np.testing.assert_allclose(actual[2], expected[2], rtol=rtol, atol=rtol, err_msg=where)
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for k, (e, a) in enumerate(zip(expected, actual)):
            assert_same_value(e, a, '%s[%d]' % (where, k), rtol)
    elif isinstance(expected, np.ndarray):
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol, err_msg=where)
    else:   # Python numbers, flags, strings: same type, same value, exactly
        assert type(actual) is type(expected) and actual == expected, \
            '%s: %r, eager %r' % (where, actual, expected)


def assert_same_state(expected, actual, where, rtol):
    assert list(expected) == list(actual), where
    for name in expected:
        assert_same_value(expected[name], actual[name], '%s: %s' % (where, name), rtol)


def printed(fn):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = fn()
    return result, out.getvalue()


def train_side_by_side(cls, steps, rtol=2e-4):
    eager, converted = cls('eager'), cls('janus')
    for step in range(steps):
        (expected_loss, expected_units), expected_out = printed(eager.step)
        (loss, units), out = printed(converted.step)
        where = '%s step %d' % (cls.name, step)
        assert units == expected_units, where
        assert out == expected_out, where
        np.testing.assert_allclose(float(loss), float(expected_loss), rtol=rtol, err_msg=where)
        assert_same_state(eager.observable_state(), converted.observable_state(), where, rtol)
    return eager, converted


@pytest.mark.parametrize('cls', list(CASES), ids=lambda cls: cls.name)
def test_janus_trains_each_example_like_eager(cls):
    steps, *tolerance = CASES[cls] if isinstance(CASES[cls], tuple) else (CASES[cls],)
    eager, converted = train_side_by_side(cls, steps, *tolerance)
    print('%s: %s' % (cls.name, converted.janus_stats()))
    for jf in converted.janus_functions():   # explain tells the story first
        head = janus.explain(jf).split('\n')[:10]
        assert head[1].startswith('  ran %d calls: ' % jf.stats.calls), head
        assert any(line.startswith('  to change: ') for line in head), head
        if jf.stats.graph_calls or jf.stats.graph_part_calls:   # to_code of every kind
            assert 'def ' in janus.to_code(jf), janus.explain(jf)


def test_the_examples_take_their_branches():
    """The shortened intervals do what they are for (checked on eager's run)."""
    eager = LeNet('eager')
    for _ in range(6):
        eager.step()
    assert eager.global_step == 6 and eager.lr == 0.0025 and len(eager.history) == 3
    eager = A3C('eager')
    for _ in range(4):
        eager.step()
    assert eager.updates == 4 and eager.entropy_weight == a3c.ENTROPY_MIN
    assert len(eager.losses) == 1


def test_keras_loop_prints_progress_and_epochs():
    eager = KerasLoop('eager')
    _, out = printed(lambda: [eager.step() for _ in range(11)])
    lines = out.splitlines()
    assert [line.split(':')[0] for line in lines] == [
        'step 3', 'epoch 1', 'step 6', 'step 9', 'epoch 2']
    assert eager.model.step == 11 and eager.epoch == 3


def test_recursive_tree_rnn_is_one_recursive_graph_function():
    _, converted = train_side_by_side(tree_rnn.TreeRNN, 6)
    stats = converted.janus_stats()
    # every step after the profiled ones is one graph, whatever the batch's trees
    assert stats['graphs_built'] == 1 and stats['graph_calls'] == 3, stats
    assert 'STRUCTURE_MATCH' in converted.explain()
    # every node of a depth at once (recursion_levels), not one call per node
    assert 'TreeRNN.encode(node) level by level' in ' '.join(converted.explain().split())


@pytest.mark.parametrize("cls", [LeNet, ResNet, LSTM, A3C, GAN, KerasLoop, Reinforce, Detector,
                                 tree_rnn.TreeRNN],
                         ids=lambda cls: cls.name)
def test_symbolic_versions_are_the_same_programs(cls):
    """The hand-written graphs (the benchmark's speed target) compute the same losses
    and print the same lines as the imperative programs."""
    eager, symbolic = cls('eager'), cls('symbolic')
    for step in range(4):
        (expected, _), expected_out = printed(eager.step)
        (loss, _), out = printed(symbolic.step)
        where = '%s step %d' % (cls.name, step)
        np.testing.assert_allclose(float(loss), float(expected), rtol=1e-4, err_msg=where)
        assert out == expected_out, where


def test_reinforce_at_full_length_finds_its_breaks_without_a_janus_error(monkeypatch):
    """Full-length episodes: a segment whose first line is a break found by its own
    trace (the discounted returns after the loop) once nested its cuts for the rest
    of the call without end (a RecursionError, hundreds of traces)."""
    import janus
    from janus.graphgen import tracer
    traced = []
    real = tracer.trace
    monkeypatch.setattr(tracer, 'trace', lambda *a, **k: traced.append(1) or real(*a, **k))
    _, converted = train_side_by_side(reinforce.Reinforce, 5)
    for jf in converted.janus_functions():
        assert 'internal error' not in janus.explain(jf), janus.explain(jf)
    assert len(traced) < 80, len(traced)


def test_quickstart_explains_what_the_readme_shows():
    """The README's first example prints (run with 200 steps) the explain lines the
    README quotes: the counts are deterministic, the times are not quoted."""
    readme = open(os.path.join(os.path.dirname(__file__), '..', 'README.md'),
                  encoding='utf-8').read()
    quoted = readme.split('```text\n', 1)[1].split('```', 1)[0].split('\n')
    with contextlib.redirect_stdout(io.StringIO()) as out:
        step = quickstart.main(200)
    assert out.getvalue().count('loss') == 4                  # every 50th step
    shown = janus.explain(step).split('\n')
    assert shown[:3] == quoted[:3], (shown[:6], quoted)
    advice = [line for line in shown[:10] if line.startswith('  to change:')]
    assert advice and advice[0] == quoted[4], (shown[:10], quoted)   # its first line


def test_quickstart_with_the_advice_applied_runs_one_graph_after_the_warm_up():
    """The README: with tf.print, all 197 calls after the warm-up run as one graph."""
    step = quickstart.main(200, tf_print=True)
    assert janus.explain(step).split('\n')[1] == '  ran 200 calls: 197 as one graph; 3 profiled (the warm-up)'
    assert 'all 197 calls after the warm-up run as one graph' in ' '.join(open(
        os.path.join(os.path.dirname(__file__), '..', 'README.md'), encoding='utf-8').read().split())
