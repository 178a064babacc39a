"""An LSTM language model that carries its recurrent state across batches in
``self.state`` (RNN, the paper's Table 2: LSTM on PTB, batch 20).

The corpus is generated in code: a random sparse Markov chain over a
vocabulary of ``VOCAB`` words, read as ``BATCH`` parallel streams in
windows of ``STEPS`` words (truncated backpropagation through time).  The
imperative program loops in Python over the time steps of the embedded
window (a tensor), feeds a Keras ``LSTMCell``, and stores the final
``[h, c]`` in ``self.state`` for the next batch.  janus unrolls the loop
(its trip count is speculated and checked) and reads/writes ``self.state``
through the shadow heap.  ``symbolic`` is the hand-written graph: the state
is an explicit input and output, the window unrolled in the graph.

    python examples/lstm_lm.py --mode eager|janus|symbolic [--steps 60]
"""
import keras
import numpy as np
import tensorflow as tf

import common

VOCAB, EMBED, HIDDEN = 200, 64, 128
BATCH, STEPS = 20, 20


def corpus(seed, windows):
    """BATCH streams of Markov-chain text, cut into (BATCH, STEPS + 1) windows."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(0, VOCAB, size=(VOCAB, 4))   # each word has 4 likely successors
    length = windows * STEPS + 1
    streams = np.empty((BATCH, length), dtype='int32')
    streams[:, 0] = rng.integers(0, VOCAB, size=BATCH)
    for t in range(1, length):
        streams[:, t] = successors[streams[:, t - 1], rng.integers(0, 4, size=BATCH)]
    return [tf.constant(streams[:, i * STEPS:(i + 1) * STEPS + 1]) for i in range(windows)]


class LSTMLanguageModel(common.Workload):
    name, category, unit = 'LSTM', 'RNN', 'words'
    steps, warmup = 60, 10

    def __init__(self, mode, seed=0):
        super().__init__(mode, seed)
        self.embedding = keras.layers.Embedding(VOCAB, EMBED)
        self.cell = keras.layers.LSTMCell(HIDDEN)
        self.decoder = keras.layers.Dense(VOCAB)
        self.embedding.build((None,))
        self.cell.build((None, EMBED))
        self.decoder.build((None, HIDDEN))
        self.variables = (self.embedding.trainable_variables + self.cell.trainable_variables
                          + self.decoder.trainable_variables)
        self.optimizer = keras.optimizers.Adam(2e-3)
        self.state = [tf.zeros([BATCH, HIDDEN]), tf.zeros([BATCH, HIDDEN])]
        self.data = corpus(seed, 50)
        self.position = 0
        symbolic = tf.function(self.symbolic_step, autograph=False, input_signature=[
            tf.TensorSpec([BATCH, STEPS + 1], tf.int32), tf.TensorSpec([BATCH, HIDDEN]),
            tf.TensorSpec([BATCH, HIDDEN])])
        self.compiled_step = self.compile(self.train_step, self.carry_state(symbolic))

    def train_step(self, window):
        """The imperative program: Python loop over time, state kept in ``self``."""
        with tf.GradientTape() as tape:
            inputs = tf.transpose(self.embedding(window[:, :-1]), [1, 0, 2])  # time-major
            state = self.state
            outputs = []
            for x in inputs:
                h, state = self.cell(x, state)
                outputs.append(h)
            logits = self.decoder(tf.stack(outputs, axis=1))
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
                window[:, 1:], logits, from_logits=True))
        grads = tape.gradient(loss, self.variables)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        self.state = [tf.stop_gradient(s) for s in state]
        return loss

    def symbolic_step(self, window, h, c):
        """Hand-written graph: the state is an input and an output, the window unrolled."""
        with tf.GradientTape() as tape:
            inputs = tf.unstack(self.embedding(window[:, :-1]), axis=1)
            state, outputs = [h, c], []
            for x in inputs:
                out, state = self.cell(x, state)
                outputs.append(out)
            logits = self.decoder(tf.stack(outputs, axis=1))
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
                window[:, 1:], logits, from_logits=True))
        grads = tape.gradient(loss, self.variables)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        return loss, state[0], state[1]

    def carry_state(self, graph):
        def step(window):
            loss, h, c = graph(window, *self.state)
            self.state = [h, c]
            return loss
        return step

    def step(self):
        window = self.data[self.position % len(self.data)]
        self.position += 1
        return self.compiled_step(window), BATCH * STEPS


if __name__ == '__main__':
    common.main(LSTMLanguageModel)
