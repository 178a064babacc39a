"""A3C on CartPole-v1 (DRL, the paper's Table 2, batch 20 frames).

The imperative program: an actor-critic (a subclassed ``keras.Model``: a
shared ``Dense(128, relu)`` trunk, policy logits and a state value) trained
the A3C way, but with a single actor-learner that alternates acting and
learning — synchronous, "A3C with one worker".  Every ``step`` rolls out up
to ``T_MAX`` frames, calling ``act`` once per frame for the action
probabilities of one observation, then calls ``train``: discounted returns
by a Python ``for`` loop over the rollout's rewards tensor, policy-gradient
+ value + entropy loss under a ``GradientTape``, an RMSprop step.  Around it,
what DRL code has: a Python update counter (``self.updates += 1``), the
entropy bonus annealed linearly from it (a Python float,
``self.entropy_weight``), and the loss appended to a history list on
``self`` every ``log_every`` updates (monitoring).

A rollout stops early when an episode ends, so ``train`` sees rollouts of
varying length.  janus relaxes the time dimension to ``None`` and, as the
loop's trip count varies, builds the loop as a ``tf.while_loop`` whose list
of returns is a ``TensorArray`` (had the profiled rollouts all had one
length, it would first have speculated on it, then missed and rebuilt).
The history append (every ``log_every`` updates) is replayed after the
graph's run.  ``symbolic`` is the same model as hand-written
``tf.function``s: ``act`` with a fixed input signature, ``train`` with a
``None`` time dimension and ``tf.scan``, its update counter a
``tf.Variable`` with the annealing computed in the graph.

Actions are drawn from the probabilities with a NumPy generator seeded by
the workload seed, and the environment is seeded too, so every mode takes
the same actions as long as its probabilities agree.  Needs ``gymnasium``.

    python examples/a3c.py --mode eager|janus|symbolic [--steps 80] [--explain]
"""
import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

import common

T_MAX = 20            # frames per update (the paper's batch)
GAMMA = 0.99          # discount
VALUE_WEIGHT = 0.5    # value loss relative to the policy loss
ENTROPY_START, ENTROPY_MIN = 0.01, 0.001  # exploration bonus, annealed linearly
OBSERVATION, ACTIONS = 4, 2


class ActorCritic(keras.Model):
    """Shared trunk, two heads: policy logits and the state value."""

    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(128, activation='relu')
        self.policy = keras.layers.Dense(ACTIONS)
        self.value = keras.layers.Dense(1)

    def call(self, observations):
        hidden = self.hidden(observations)
        return self.policy(hidden), self.value(hidden)[:, 0]


class A3C(common.Workload):
    name, category, unit = 'A3C', 'DRL', 'frames'
    steps, warmup = 80, 20     # 100 updates in all
    anneal_updates = 200       # updates over which the entropy bonus anneals to ENTROPY_MIN
    log_every = 10             # loss appended to self.losses every N updates

    def __init__(self, mode, seed=0):
        super().__init__(mode, seed)
        self.model = ActorCritic()
        self.model(tf.zeros([1, OBSERVATION]))   # weights now, from the seed, in every mode
        self.optimizer = keras.optimizers.RMSprop(7e-4)
        self.rng = np.random.default_rng(seed)
        self.env = gym.make('CartPole-v1')
        self.observation, _ = self.env.reset(seed=seed)
        self.episode_reward, self.episode_rewards = 0.0, []   # monitoring, as DRL code does
        self.losses = []
        self.updates = 0                        # a Python counter of learner updates
        self.entropy_weight = ENTROPY_START     # a Python float, annealed from it
        self.compiled_act = self.compile(self.act, tf.function(self.act, input_signature=[
            tf.TensorSpec([1, OBSERVATION], tf.float32)]))
        self.compiled_train = self.compile(self.train, self.symbolic_train())

    # -- the imperative program ----------------------------------------------
    def act(self, observation):
        """Action probabilities for one observation (a batch of one)."""
        logits, _ = self.model(observation)
        return tf.nn.softmax(logits)[0]

    def train(self, states, actions, rewards, last_observation, terminal):
        """One update from a rollout; the returns are computed backwards in Python."""
        self.updates += 1
        self.entropy_weight = max(ENTROPY_MIN,
                                  ENTROPY_START * (1 - self.updates / self.anneal_updates))
        R = self.bootstrap(last_observation, terminal)
        returns = []
        for reward in tf.reverse(rewards, [0]):
            R = reward + GAMMA * R
            returns.append(R)
        loss = self.update(states, actions, tf.reverse(tf.stack(returns), [0]),
                           self.entropy_weight)
        if self.updates % self.log_every == 0:
            self.losses.append(loss)
        return loss

    def bootstrap(self, last_observation, terminal):
        """V(s_T), the value of the rollout's last state; zero if it ended the episode."""
        _, value = self.model(last_observation)
        return (1.0 - terminal) * value[0]

    def update(self, states, actions, returns, entropy_weight):
        """A3C's loss over the rollout and one optimizer step; returns the loss."""
        with tf.GradientTape() as tape:
            logits, values = self.model(states)
            advantages = returns - values
            log_probs = tf.nn.log_softmax(logits)
            taken = tf.reduce_sum(log_probs * tf.one_hot(actions, ACTIONS), axis=1)
            entropy = -tf.reduce_sum(tf.nn.softmax(logits) * log_probs)
            # The advantage only weighs the policy gradient; the value head
            # learns from the value loss alone.
            policy_loss = -tf.reduce_sum(taken * tf.stop_gradient(advantages))
            value_loss = tf.reduce_sum(tf.square(advantages))
            loss = policy_loss + VALUE_WEIGHT * value_loss - entropy_weight * entropy
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss

    # -- the same update, hand-written as a graph ------------------------------
    def symbolic_train(self):
        """``train`` as a tf.function: ``tf.scan`` for the returns, the update counter
        a ``tf.Variable`` with the entropy bonus annealed from it in the graph, the
        loss history kept outside the graph (a tf.function cannot append to a list)."""
        counter = tf.Variable(0, dtype=tf.int64, trainable=False)

        @tf.function(input_signature=[
            tf.TensorSpec([None, OBSERVATION], tf.float32), tf.TensorSpec([None], tf.int32),
            tf.TensorSpec([None], tf.float32), tf.TensorSpec([1, OBSERVATION], tf.float32),
            tf.TensorSpec([], tf.float32)])
        def graph(states, actions, rewards, last_observation, terminal):
            returns = tf.scan(lambda R, reward: reward + GAMMA * R, rewards,
                              initializer=self.bootstrap(last_observation, terminal),
                              reverse=True)
            updates = tf.cast(counter.assign_add(1), tf.float64)
            entropy_weight = tf.maximum(
                ENTROPY_START * (1 - updates / self.anneal_updates), ENTROPY_MIN)
            return self.update(states, actions, returns, tf.cast(entropy_weight, tf.float32))

        def train(*rollout):
            loss = graph(*rollout)
            self.updates += 1   # the driver's own count, for the logging decision
            if self.updates % self.log_every == 0:
                self.losses.append(loss)
            return loss
        return train

    # -- the actor: environment frames, outside any graph ---------------------
    def step(self):
        states, actions, rewards = [], [], []
        terminal = truncated = False
        while len(rewards) < T_MAX and not (terminal or truncated):
            probs = self.compiled_act(tf.constant(self.observation[None])).numpy()
            action = int(self.rng.random() >= probs[0])   # inverse CDF: same draw, same action
            states.append(self.observation)
            actions.append(action)
            self.observation, reward, terminal, truncated, _ = self.env.step(action)
            rewards.append(reward)
        last_observation = self.observation
        self.episode_reward += sum(rewards)
        if terminal or truncated:   # a truncated episode still bootstraps from V(s_T)
            self.episode_rewards.append(self.episode_reward)
            self.episode_reward = 0.0
            self.observation, _ = self.env.reset()
        loss = self.compiled_train(
            tf.constant(np.array(states)), tf.constant(actions, tf.int32),
            tf.constant(rewards, tf.float32), tf.constant(last_observation[None]),
            tf.constant(float(terminal)))
        return loss, len(rewards)


if __name__ == '__main__':
    common.main(A3C)
