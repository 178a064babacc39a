"""TreeRNN sentiment classifier over Python parse trees (TreeNN, the paper's Table 2, batch 25).

The imperative program: sentences are binary parse trees of Python ``Node``
objects; a recursive method ``encode`` returns a leaf's word embedding or
``tanh([encode(left), encode(right)] @ W + b)``, a linear classifier reads the
root vector, and ``train_step`` loops over the batch's trees under one
``GradientTape`` (cross-entropy, Adagrad).  The data set is an SST-like
synthetic corpus (250 sentences of 4-16 words over 150 words, each with a
hidden polarity; a random parse per sentence; label: is the root's sentiment
positive, where "not" as a left child negates its sibling subtree).

janus runs ``encode`` in the graph for every node of the batch's trees, one
depth at a time (leaves first, each level's nodes at once): before each step it
encodes the trees (the attributes ``encode`` reads, and each node's depth) into
one table the graph reads; ``--explain`` shows the ``STRUCTURE_MATCH`` guard.
With ``JANUS_RECURSION_RUNS_LEVELS=0`` it runs one graph function call per node
(``Janus>Invoke``) instead.

``symbolic`` is the same model written the way a graph needs it without
recursion: each batch's trees are linearized in post-order (children before
parents) into flat arrays, and a ``tf.function`` gathers every leaf's
embedding at once, then runs a ``tf.while_loop`` over the internal nodes,
reading children from and writing parents to a ``TensorArray``.  That
linearization runs inside ``step()`` on every step, so it counts in
symbolic's throughput (janus and eager need no such preprocessing).

    python examples/tree_rnn.py --mode eager|janus|symbolic [--steps 12] [--explain]
"""
import keras
import numpy as np
import tensorflow as tf

import common

BATCH, SENTENCES, VOCAB, HIDDEN, CLASSES = 25, 250, 150, 64, 2
MIN_WORDS, MAX_WORDS = 4, 16
NOT = 0   # the word id of the negation word


class Node:
    """A parse-tree node: a leaf holds a word id, an internal node two children."""

    def __init__(self, word=None, left=None, right=None):
        self.word, self.left, self.right = word, left, right
        self.is_leaf = word is not None   # a plain attribute: what a user's tree has


def parse(words, rng):
    """A random binary tree over ``words`` (uniform split points): a stand-in parser."""
    if len(words) == 1:
        return Node(word=int(words[0]))
    split = int(rng.integers(1, len(words)))
    return Node(left=parse(words[:split], rng), right=parse(words[split:], rng))


def sentiment(node, polarity):
    """The hidden score: polarities summed; "not" as a left child negates its sibling."""
    if node.is_leaf:
        return int(polarity[node.word])
    if node.left.is_leaf and node.left.word == NOT:
        return -sentiment(node.right, polarity)
    return sentiment(node.left, polarity) + sentiment(node.right, polarity)


def corpus(seed, count=SENTENCES):
    """Fixed trees and binary labels, generated in code (no download)."""
    rng = np.random.default_rng(seed)
    polarity = rng.choice([-2, -1, 0, 1, 2], size=VOCAB)
    polarity[NOT] = 0
    trees, labels = [], []
    for _ in range(count):
        length = int(rng.integers(MIN_WORDS, MAX_WORDS + 1))
        words = np.where(rng.random(length) < 0.1, NOT, rng.integers(1, VOCAB, size=length))
        tree = parse(words, rng)
        trees.append(tree)
        labels.append(int(sentiment(tree, polarity) > 0))
    return trees, np.array(labels, dtype=np.int32)


def batches(trees, labels, batch):
    """One epoch's batches, in order: (list of trees, int32 label tensor)."""
    return [(trees[i:i + batch], tf.constant(labels[i:i + batch]))
            for i in range(0, len(trees), batch)]


def linearize(trees):
    """The trees as flat post-order arrays (one index space for the whole batch).

    Returns (is_leaf, word, left, right, roots): per node whether it is a leaf,
    its word id (0 for internal nodes), its children's indices (-1 for leaves),
    and each tree's root index.  Children always precede their parent, so one
    pass in index order can compute every node from already computed ones."""
    is_leaf, word, left, right = [], [], [], []

    def visit(node):
        if node.is_leaf:
            children = (-1, -1)
        else:
            children = (visit(node.left), visit(node.right))
        is_leaf.append(node.is_leaf)
        word.append(node.word if node.is_leaf else 0)
        left.append(children[0])
        right.append(children[1])
        return len(is_leaf) - 1

    roots = [visit(tree) for tree in trees]
    return (tf.constant(is_leaf, tf.bool),) + tuple(
        tf.constant(a, tf.int32) for a in (word, left, right, roots))


SYMBOLIC_SIGNATURE = [tf.TensorSpec([None], tf.bool)] + [
    tf.TensorSpec([None], tf.int32) for _ in range(5)]   # word, left, right, roots, labels


class TreeRNN(common.Workload):
    name, category, unit = 'TreeRNN', 'TreeNN', 'sentences'
    steps, warmup = 12, 4   # warm-up covers janus's profiled calls and the symbolic trace

    def __init__(self, mode, seed=0):
        super().__init__(mode, seed)
        # The same variables, created in the same order, in every mode: same initial weights.
        init = keras.initializers.GlorotUniform()
        self.embedding = tf.Variable(init((VOCAB, HIDDEN)), name='embedding')
        self.w = tf.Variable(init((2 * HIDDEN, HIDDEN)), name='compose_w')
        self.b = tf.Variable(tf.zeros([HIDDEN]), name='compose_b')
        self.w_out = tf.Variable(init((HIDDEN, CLASSES)), name='classify_w')
        self.b_out = tf.Variable(tf.zeros([CLASSES]), name='classify_b')
        self.weights = [self.embedding, self.w, self.b, self.w_out, self.b_out]
        self.optimizer = keras.optimizers.Adagrad(0.05)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.data = batches(*corpus(seed), BATCH)
        self.position = 0
        symbolic = tf.function(self.symbolic_step, input_signature=SYMBOLIC_SIGNATURE)
        self.compiled_step = self.compile(self.train_step, symbolic)

    # -- the model, shared by both programs --------------------------------
    def compose(self, left, right):
        """[1, H] children -> [1, H] parent."""
        return tf.tanh(tf.matmul(tf.concat([left, right], axis=1), self.w) + self.b)

    def loss(self, root_vectors, labels):
        """Linear classifier on the batch's [B, H] root vectors, cross-entropy."""
        return self.loss_fn(labels, tf.matmul(root_vectors, self.w_out) + self.b_out)

    def update(self, tape, loss):
        grads = tape.gradient(loss, self.weights)
        self.optimizer.apply_gradients(zip(grads, self.weights))
        return loss

    # -- the imperative program (eager, janus) -----------------------------
    def encode(self, node):
        """The tree's [1, H] vector, by recursion over the Python objects."""
        if node.is_leaf:
            return tf.nn.embedding_lookup(self.embedding, [node.word])
        return self.compose(self.encode(node.left), self.encode(node.right))

    def train_step(self, trees, labels):
        with tf.GradientTape() as tape:
            roots = []
            for tree in trees:
                roots.append(self.encode(tree))
            loss = self.loss(tf.concat(roots, axis=0), labels)
        return self.update(tape, loss)

    # -- the hand-written graph (symbolic) ---------------------------------
    def symbolic_step(self, is_leaf, word, left, right, roots, labels):
        with tf.GradientTape() as tape:
            nodes = self.encode_nodes(is_leaf, word, left, right)
            loss = self.loss(tf.gather(nodes, roots)[:, 0], labels)
        return self.update(tape, loss)

    def encode_nodes(self, is_leaf, word, left, right):
        """Every node's vector, [N, 1, H]: leaves in one gather, then internal nodes in order."""
        leaves = tf.nn.embedding_lookup(self.embedding, word)[:, None]   # internal rows unused
        vectors = tf.TensorArray(tf.float32, size=tf.shape(word)[0], element_shape=[1, HIDDEN])
        vectors = vectors.unstack(leaves)
        internal = tf.cast(tf.where(tf.logical_not(is_leaf))[:, 0], tf.int32)

        # Post-order: an internal node's children are already final when its turn comes,
        # and its own slot (holding an unused embedding row) is overwritten.  Looping over
        # internal nodes only, rather than a tf.cond(is_leaf) per node, halves the trips.
        def body(j, vectors):
            i = internal[j]
            vector = self.compose(vectors.read(left[i]), vectors.read(right[i]))
            return j + 1, vectors.write(i, vector)

        _, vectors = tf.while_loop(lambda j, _: j < tf.size(internal), body,
                                   (tf.constant(0), vectors))
        return vectors.stack()

    def step(self):
        trees, labels = self.data[self.position % len(self.data)]
        self.position += 1
        if self.mode == 'symbolic':   # preprocessing the graph needs, timed with the step
            return self.compiled_step(*linearize(trees), labels), len(trees)
        return self.compiled_step(trees, labels), len(trees)


if __name__ == '__main__':
    common.main(TreeRNN)
