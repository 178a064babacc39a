"""REINFORCE on CartPole-v1 with a NumPy environment (DRL, a graph-break workload).

The imperative program is one method, ``run_episode``, written the way
policy-gradient code is written: the environment loop in Python, a
``.numpy()`` of the action probabilities every frame, the action drawn with
the agent's own NumPy random generator, the discounted returns computed in
NumPy, then one REINFORCE update under a ``GradientTape``, an episode
counter (``self.episodes += 1``) and the episode's length printed every
``log_every`` episodes.  Episodes are cut at ``max_frames`` frames.

janus cannot put ``.numpy()``, the NumPy draw or the environment's ``step``
in a graph: those statements run in Python (graph breaks), and the policy's
forward pass per frame and the whole update (forward, backward, optimizer
step) run as graphs of their own (``janus.explain`` lists the breaks).

``symbolic`` is the same agent with the tensor work hand-written as
``tf.function``s: ``act`` (one observation's probabilities, fixed input
signature) and ``update`` (``None`` time dimension); the environment loop
and the NumPy parts stay in Python around them, as a tf.function cannot hold
them.  Needs ``gymnasium``.

    python examples/reinforce.py --mode eager|janus|symbolic [--steps 40] [--explain]
"""
import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

import common

GAMMA = 0.99        # discount
ACTIONS = 2


def discounted(rewards, gamma=GAMMA):
    """Discounted returns of one episode, normalized (NumPy, as RL code does it)."""
    returns = np.zeros(len(rewards), np.float32)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        returns[t] = running
    return (returns - returns.mean()) / (returns.std() + 1e-8)


def policy_network():
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(128, activation='relu'),
                             keras.layers.Dense(ACTIONS)])


class Reinforce(common.Workload):
    name, category, unit = 'REINFORCE', 'DRL', 'frames'
    steps, warmup = 30, 10      # episodes
    log_every = 10              # episodes between printed lengths
    max_frames = 50             # frames per episode at most

    def __init__(self, mode, seed=0):
        super().__init__(mode, seed)
        self.policy = policy_network()
        self.optimizer = keras.optimizers.Adam(1e-2)
        self.env = gym.make('CartPole-v1')
        self.env.reset(seed=seed)
        self.rng = np.random.default_rng(seed)
        self.episodes = 0
        self.lengths = []
        if mode == 'symbolic':
            self.compiled_episode = self.compile(self.run_episode, self.symbolic())
        else:
            self.compiled_episode = self.compile(self.run_episode)

    # -- the imperative program ----------------------------------------------
    def run_episode(self):
        """One episode of acting, then one REINFORCE update; returns (loss, frames)."""
        observation, _ = self.env.reset()
        states, actions, rewards = [], [], []
        done = False
        while not done:
            logits = self.policy(tf.constant(observation[None]))
            probs = tf.nn.softmax(logits).numpy()[0]
            action = int(self.rng.random() >= probs[0])   # inverse CDF: same draw, same action
            states.append(observation)
            actions.append(action)
            observation, reward, terminated, truncated, _ = self.env.step(action)
            rewards.append(reward)
            done = terminated or truncated or len(rewards) >= self.max_frames
        returns = discounted(rewards)
        with tf.GradientTape() as tape:
            logits = self.policy(tf.constant(np.array(states)))
            log_probs = tf.nn.log_softmax(logits)
            taken = tf.reduce_sum(log_probs * tf.one_hot(actions, ACTIONS), axis=1)
            loss = -tf.reduce_sum(taken * returns)
        grads = tape.gradient(loss, self.policy.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.policy.trainable_variables))
        self.episodes += 1
        self.lengths.append(len(rewards))
        if self.episodes % self.log_every == 0:
            print('episode %d: %d frames' % (self.episodes, len(rewards)))
        return loss, len(rewards)

    # -- the same agent, its tensor work hand-written as graphs ----------------
    def symbolic(self):
        """``act`` and ``update`` as tf.functions; the episode loop, the NumPy draw and
        returns and the logging stay in Python around them (restructured: the
        tensor work moved into two functions, the rest unchanged)."""
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
        def act(observation):
            return tf.nn.softmax(self.policy(observation))[0]

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32),
                                      tf.TensorSpec([None], tf.int32),
                                      tf.TensorSpec([None], tf.float32)])
        def update(states, actions, returns):
            with tf.GradientTape() as tape:
                log_probs = tf.nn.log_softmax(self.policy(states))
                taken = tf.reduce_sum(log_probs * tf.one_hot(actions, ACTIONS), axis=1)
                loss = -tf.reduce_sum(taken * returns)
            grads = tape.gradient(loss, self.policy.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.policy.trainable_variables))
            return loss

        def episode():
            observation, _ = self.env.reset()
            states, actions, rewards = [], [], []
            done = False
            while not done:
                probs = act(tf.constant(observation[None])).numpy()
                action = int(self.rng.random() >= probs[0])
                states.append(observation)
                actions.append(action)
                observation, reward, terminated, truncated, _ = self.env.step(action)
                rewards.append(reward)
                done = terminated or truncated or len(rewards) >= self.max_frames
            loss = update(tf.constant(np.array(states)), tf.constant(actions, tf.int32),
                          tf.constant(discounted(rewards)))
            self.episodes += 1
            self.lengths.append(len(rewards))
            if self.episodes % self.log_every == 0:
                print('episode %d: %d frames' % (self.episodes, len(rewards)))
            return loss, len(rewards)
        return episode

    def step(self):
        loss, frames = self.compiled_episode()
        return loss, frames


if __name__ == '__main__':
    common.main(Reinforce)
