"""The graph cache: LRU eviction at cache_size_limit, no endless recompiling."""
import logging

import tensorflow as tf

import janus
from conftest import differential


def test_least_recently_used_graph_is_evicted(strict):
    def make():
        return (lambda x, k: x * k), None
    x = tf.constant([1.0, 2.0])
    ks = [1, 1, 1, 1, 2, 3, 1, 4, 2, 1]   # graphs for 1, 2, 3; 4 evicts 2 (LRU), then 2 again
    with janus.config.patch(cache_size_limit=3, reprofile_calls=0, relax_scalars=False):
        jf = differential(make, [((x, k), {}) for k in ks])
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 5 and stats['evictions'] == 2
    assert len(jf.cache) == 3
    assert stats['graph_calls'] == 7


def test_recompile_limit_logs_once_and_runs_imperatively(caplog):
    def make():
        return (lambda x, k: x + k), None
    x = tf.constant([1.0])
    with janus.config.patch(recompile_limit=2, cache_size_limit=8, relax_scalars=False), \
            caplog.at_level(logging.WARNING, logger='janus'):
        jf = differential(make, [((x, k), {}) for k in [0, 0, 0] + list(range(10))])
    stats = janus.stats(jf)
    assert stats['graphs_built'] == 2
    assert stats['imperative_calls'] == 8
    assert caplog.text.count('further cache misses run imperatively') == 1


def test_recompile_limit_is_an_error_in_strict_mode():
    import pytest
    jf = janus.function(lambda x, k: x + k, profile_calls=0)
    with janus.config.patch(recompile_limit=1, strict=True, reprofile_calls=0):
        jf(tf.constant(1.0), 1)
        with pytest.raises(janus.StrictModeError, match='recompile limit'):
            jf(tf.constant(1.0), 2)
