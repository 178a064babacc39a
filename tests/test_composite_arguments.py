"""RaggedTensor and SparseTensor arguments: their components fed per call under a
type-spec guard (``call_signature.CompositeNode``, COMPOSITE_MATCH), and loops over
a RaggedTensor's rows (``control/statements._ragged_for``): unrolled when the graph
knows how many rows, a tf.while_loop over the row index once that number varies.

Differential tests on fresh objects (``conftest.differential``): returns, state,
stdout and identity (a returned argument is that very object) after every call.
"""
import tensorflow as tf

import janus
from tests.conftest import differential


def _graph_runs(jf):
    return janus.stats(jf)['graph_calls']


def _sentences(i):
    """Token ids of a batch of sentences of varying lengths, as a text model gets them."""
    rows = [[1 + i, 2], [3], [4, 5, 6 + i], [7, i]][:2 + i % 3]
    return tf.ragged.constant(rows, dtype=tf.int32)


class Encoder:
    def __init__(self):
        self.table = tf.Variable(tf.reshape(tf.range(80.0), [20, 4]) / 10.0)
        self.sentences = 0


def test_a_loop_over_the_rows_of_a_ragged_batch_is_one_graph_for_every_batch(strict):
    """Bag-of-words encoding, a row at a time: a new batch (other lengths, other row
    counts) reuses the graph once the row count is relaxed (a tf.while_loop)."""
    def make():
        enc = Encoder()

        def encode(batch):
            total = tf.zeros([4])
            for sentence in batch:
                total += tf.reduce_mean(tf.gather(enc.table, sentence), axis=0)
                enc.sentences += 1
            return total
        return encode, enc

    calls = [lambda i=i: ((_sentences(i),), {}) for i in range(10)]
    jf = differential(make, calls, state=lambda e: e.sentences)
    assert _graph_runs(jf) >= 5 and janus.stats(jf)['graphs_built'] <= 3


def test_rows_in_a_comprehension_a_break_and_the_argument_returned():
    def make():
        def lengths(batch, limit):
            sizes = [tf.shape(row)[0] for row in batch]
            longest = tf.constant(0)
            for row in batch:
                if tf.size(row) > limit:
                    break
                longest = tf.maximum(longest, tf.size(row))
            return tf.stack(sizes), longest, batch
        return lengths, None

    calls = [lambda i=i: ((_sentences(i % 2), i % 3), {}) for i in range(8)]
    jf = differential(make, calls)
    assert _graph_runs(jf) >= 3


def test_a_sparse_argument_feeds_its_components():
    def make():
        def scale(features, w):
            dense = tf.sparse.to_dense(features)
            return tf.sparse.reduce_sum(features) * w + tf.reduce_sum(dense)
        return scale, None

    def batch(i):
        indices = [[0, i % 3], [1, (i + 1) % 3]]
        return tf.SparseTensor(indices, [float(i), 2.0], [2, 3])

    calls = [lambda i=i: ((batch(i), tf.constant(0.5 * i)), {}) for i in range(7)]
    jf = differential(make, calls)
    assert _graph_runs(jf) >= 4 and janus.stats(jf)['graphs_built'] == 1


def test_shape_reads_and_python_iteration_of_a_relaxed_ragged_argument():
    """``rt.shape`` / ``sp.shape`` are what eager sees (a relaxed row count would read
    None: an exact-shape graph instead), and ``list(rt)`` / ``a, *rest = rt`` take the
    rows the graph knows (Python's fallback iteration never ends in a graph)."""
    def make():
        seen = []

        def rows(rt, sp):
            seen.append((tuple(rt.shape.as_list()), tuple(sp.shape.as_list())))
            parts = list(rt)
            first, *rest = rt
            return tf.reduce_sum(parts[-1]) + tf.reduce_sum(first) + len(rest)
        return rows, seen

    def call(i):
        sp = tf.SparseTensor([[0, 0]], [1.0], [2 + i % 2, 3])
        return (_sentences(i), sp), {}

    differential(make, [lambda i=i: call(i) for i in range(7)], state=list)


def test_a_relaxed_composite_argument_shows_eager_shape():
    """Once the row count (or dense shape) varies, the graph's composite has unknown
    dimensions; Python reading ``.shape`` must still see eager's (a graph with exact
    shapes is built instead of reading None)."""
    def make():
        seen = []

        def widths(rt, sp):
            seen.append((tuple(rt.shape.as_list()), tuple(sp.shape.as_list())))
            return tf.reduce_sum(rt.flat_values) + tf.sparse.reduce_sum(sp)
        return widths, seen

    def call(i):
        sp = tf.SparseTensor([[0, 0]], [1.0], [2 + i % 2, 3])
        return (_sentences(i), sp), {}

    differential(make, [lambda i=i: call(i) for i in range(8)], state=list)
