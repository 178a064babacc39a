"""An LSTM language model that carries its recurrent state across batches in
``self.state`` (RNN, the paper's Table 2: LSTM on PTB, batch 20).

The corpus is generated in code: a random sparse Markov chain over a
vocabulary of ``VOCAB`` words, read as ``BATCH`` parallel streams in
windows of ``STEPS`` words (truncated backpropagation through time).  The
imperative program loops in Python over the time steps of the embedded
window (a tensor), feeds a Keras ``LSTMCell``, and stores the final
``[h, c]`` in ``self.state`` for the next batch.  janus unrolls the loop
(its trip count is speculated and checked) and reads/writes ``self.state``
through the shadow heap.  As training code does, it counts its steps in Python
(``self.global_step += 1``), decays the learning rate exponentially with a
rate computed in Python from that count, prints the perplexity every
``log_every`` steps and remembers the best loss and its step.

``symbolic`` is the hand-written graph: the state is an explicit input and
output, the window unrolled in the graph, the counter a ``tf.Variable`` with
the schedule computed from it in the graph; printing and the best loss are
handled outside the graph.

    python examples/lstm_lm.py --mode eager|janus|symbolic [--steps 80] [--explain]
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
    steps, warmup = 80, 20     # 100 training steps in all
    base_lr = 2e-3
    decay_rate, decay_steps = 0.5, 100   # exponential decay: halved every 100 steps
    log_every = 20             # perplexity printed every N steps

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
        self.optimizer = keras.optimizers.Adam(self.base_lr)
        self.state = [tf.zeros([BATCH, HIDDEN]), tf.zeros([BATCH, HIDDEN])]
        self.data = corpus(seed, 50)
        self.position = 0
        self.global_step = 0
        self.best_loss, self.best_step = float('inf'), 0
        self.compiled_step = self.compile(self.train_step, self.symbolic())

    def train_step(self, window):
        """The imperative program: Python loop over time, state kept in ``self``,
        a step counter, an exponentially decayed learning rate computed in Python
        from it, a progress print every ``log_every`` steps, the best loss tracked."""
        self.global_step += 1
        self.optimizer.learning_rate.assign(
            self.base_lr * self.decay_rate ** (self.global_step / self.decay_steps))
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
        if self.global_step % self.log_every == 0:
            print(f'step {self.global_step}: loss {loss:.4f}, perplexity {tf.exp(loss):.1f}')
        if loss < self.best_loss:
            self.best_loss = loss
            self.best_step = self.global_step
        return loss

    def symbolic(self):
        """The same program for ``tf.function``: the state is an input and an output,
        the window unrolled; the counter is a ``tf.Variable``, the schedule computed
        from it in the graph; printing and best-loss tracking outside the graph."""
        counter = tf.Variable(0, dtype=tf.int64, trainable=False)

        @tf.function(autograph=False, input_signature=[
            tf.TensorSpec([BATCH, STEPS + 1], tf.int32), tf.TensorSpec([BATCH, HIDDEN]),
            tf.TensorSpec([BATCH, HIDDEN])])
        def graph(window, h, c):
            step = tf.cast(counter.assign_add(1), tf.float64)
            self.optimizer.learning_rate.assign(tf.cast(
                self.base_lr * tf.pow(tf.constant(self.decay_rate, tf.float64),
                                      step / self.decay_steps), tf.float32))
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

        def train_step(window):
            loss, h, c = graph(window, *self.state)
            self.state = [h, c]
            self.global_step += 1   # the driver's own count, for printing
            if self.global_step % self.log_every == 0:
                print(f'step {self.global_step}: loss {loss:.4f}, perplexity {tf.exp(loss):.1f}')
            if loss < self.best_loss:
                self.best_loss = loss
                self.best_step = self.global_step
            return loss
        return train_step

    def step(self):
        window = self.data[self.position % len(self.data)]
        self.position += 1
        return self.compiled_step(window), BATCH * STEPS


if __name__ == '__main__':
    common.main(LSTMLanguageModel)
