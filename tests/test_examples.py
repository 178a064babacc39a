"""The example models (examples/): janus trains each one exactly as eager does.

Differential: the same program, fresh objects per mode, same seeds and data;
losses, units and the whole observable state (weights, optimizer slots,
Python lists, carried RNN state) compared after every step, through the
assumption changes each model brings (short last batches, a flipped
batch-norm flag, rollouts of varying length).  Counters show what janus did.
This is the fast form of the benchmark's convergence check (Figure 6).
"""
import os
import sys

import numpy as np
import pytest

import janus

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'examples'))

import a3c  # noqa: E402
import gan  # noqa: E402
import lenet  # noqa: E402
import lstm_lm  # noqa: E402
import resnet  # noqa: E402
import tree_rnn  # noqa: E402

class ResNetEvaluatingOften(resnet.ResNet):
    eval_every = 2


# model: (steps, what janus must have done by then[, tolerance])
CASES = {
    # batch 50 over 1010 images: step 21 is short (re-profiled), step 42 builds (None, ...)
    lenet.LeNet: (44, dict(graphs_built=2, fallbacks=0, cache_misses=2)),
    # evaluation (self.training = False) every 5 steps: one graph per phase
    # evaluation at steps 0, 2, 4 (self.training = False): one graph per phase.
    # Grappler's arithmetic optimizer reorders the sums of gradients at the residual
    # joins (float reassociation; exact with it off), which batch norm and momentum
    # amplify to ~1e-4 by step 5.  A wrong phase would be off by orders more.
    ResNetEvaluatingOften: (6, dict(graphs_built=2, fallbacks=0, graph_calls=5), 1e-3),
    lstm_lm.LSTMLanguageModel: (6, dict(graphs_built=1, graph_calls=3, fallbacks=0)),
    # act() and train(); rollouts of varying length from the start: a dynamic loop
    a3c.A3C: (8, dict(graphs_built=2, fallbacks=0, imperative_calls=0)),
    # batch 128 over 1010 images: step 8 is short, step 16 builds (None, ...)
    gan.GAN: (17, dict(graphs_built=2, fallbacks=0)),
}


def assert_same_state(expected, actual, where, rtol):
    assert list(expected) == list(actual), where
    for name in expected:
        e, a = expected[name], actual[name]
        if isinstance(e, list):
            assert len(e) == len(a), '%s: %s' % (where, name)
            for k, (x, y) in enumerate(zip(e, a)):
                np.testing.assert_allclose(x, y, rtol=rtol, atol=rtol,
                                           err_msg='%s: %s[%d]' % (where, name, k))
        elif isinstance(e, np.ndarray):
            np.testing.assert_allclose(e, a, rtol=rtol, atol=rtol, err_msg=where + ': ' + name)
        else:
            assert e == a, '%s: %s' % (where, name)


def train_side_by_side(cls, steps, rtol=2e-4):
    eager, converted = cls('eager'), cls('janus')
    for step in range(steps):
        expected_loss, expected_units = eager.step()
        loss, units = converted.step()
        where = '%s step %d' % (cls.name, step)
        assert units == expected_units, where
        np.testing.assert_allclose(float(loss), float(expected_loss), rtol=rtol, err_msg=where)
        assert_same_state(eager.observable_state(), converted.observable_state(), where, rtol)
    return converted


@pytest.mark.parametrize('cls', list(CASES), ids=lambda cls: cls.name)
def test_janus_trains_each_example_like_eager(cls, strict):
    steps, expected, *tolerance = CASES[cls]
    converted = train_side_by_side(cls, steps, *tolerance)
    stats = converted.janus_stats()
    assert {k: stats[k] for k in expected} == expected, converted.explain()


def test_recursive_tree_rnn_runs_imperatively_and_says_so():
    converted = train_side_by_side(tree_rnn.TreeRNN, 5, rtol=0)
    stats = converted.janus_stats()
    assert stats['graph_calls'] == 0 and stats['imperative_calls'] == 2
    assert 'janus does not convert recursive calls (TreeRNN.encode)' in converted.explain()


def test_symbolic_versions_compute_the_same_losses():
    """The hand-written graphs are the same models (the benchmark's upper bound)."""
    for cls in (lstm_lm.LSTMLanguageModel, a3c.A3C, tree_rnn.TreeRNN):
        eager, symbolic = cls('eager'), cls('symbolic')
        for step in range(4):
            np.testing.assert_allclose(float(symbolic.step()[0]), float(eager.step()[0]),
                                       rtol=1e-4, err_msg='%s step %d' % (cls.name, step))
