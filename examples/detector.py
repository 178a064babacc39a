"""A single-shot detector whose Keras ``call()`` holds lines janus refused (issue #37).

The imperative program, written as detection repositories write it: a subclassed
``keras.Model`` with a small convolutional backbone and a per-cell head, whose own
``call()``

* draws a feature-noise scale from Python's ``random.Random`` while training (a
  stdlib draw: janus makes it on the host before the graph runs),
* sizes the anchor grid from the feature map with ``int(tf.shape(h)[1].numpy())``
  (the graph fixes that shape: janus reads it while tracing), and
* every ``log_every`` calls appends the share of confident cells, read with
  ``.numpy()``, to ``self.confidence_log`` (a value only the run has: that line runs
  in Python, and the model's ``call`` around it runs through a janus function of its
  own, ``graphgen/nested.py``).

The step is a ``GradientTape`` over the model and a box-and-objectness loss against
NumPy anchors, Adam, and a Python step counter.  The data (64x64 images with one
bright square each, its box the target) is generated in code.

``symbolic`` is the same program written for ``tf.function``: the noise scale is
drawn in Python and passed in as a tensor, the grid size is the static shape, and
the model returns the confident share every step for the Python driver to log.

    python examples/detector.py --mode eager|janus|symbolic [--steps 80] [--explain]
"""
import random

import keras
import numpy as np
import tensorflow as tf

import common

BATCH, EXAMPLES, IMAGE = 16, 256, 64


def squares(seed, count=EXAMPLES):
    """Images with one bright square each; the target is its box (x0, y0, x1, y1)."""
    rng = np.random.default_rng(seed)
    images = rng.normal(0.0, 0.1, size=(count, IMAGE, IMAGE, 3)).astype('float32')
    boxes = np.zeros((count, 4), 'float32')
    for i in range(count):
        size = rng.integers(8, 24)
        x0, y0 = rng.integers(0, IMAGE - size, size=2)
        images[i, y0:y0 + size, x0:x0 + size] += 1.0
        boxes[i] = (x0, y0, x0 + size, y0 + size)
    return images, boxes / IMAGE


class Detector(keras.Model):
    def __init__(self, seed, log_every=10):
        super().__init__()
        self.rng = random.Random(seed)
        self.backbone = [keras.layers.Conv2D(16, 3, strides=2, padding='same', activation='relu'),
                         keras.layers.Conv2D(32, 3, strides=2, padding='same', activation='relu'),
                         keras.layers.Conv2D(32, 3, strides=2, padding='same', activation='relu')]
        self.head = keras.layers.Conv2D(5, 1)   # per cell: objectness, box offsets
        self.log_every = log_every
        self.calls = 0
        self.confidence_log = []

    def call(self, images, training=False):
        h = images
        for layer in self.backbone:
            h = layer(h)
        if training:
            h = h * self.rng.uniform(0.9, 1.1)
        grid = int(tf.shape(h)[1].numpy())
        out = tf.reshape(self.head(h), (-1, grid * grid, 5))
        self.calls += 1
        if self.calls % self.log_every == 0:
            confident = tf.reduce_mean(tf.cast(tf.sigmoid(out[..., 0]) > 0.5, tf.float32))
            self.confidence_log.append(float(confident.numpy()))
        return out


def anchors(grid):
    """Cell centres of a ``grid`` x ``grid`` map, as fractions of the image (NumPy)."""
    centres = (np.arange(grid, dtype='float32') + 0.5) / grid
    xs, ys = np.meshgrid(centres, centres)
    return np.stack([xs.ravel(), ys.ravel()], axis=-1)


def detection_loss(out, boxes, cell_anchors):
    """Objectness on the cell holding the box centre, and its box offsets."""
    centre = (boxes[:, :2] + boxes[:, 2:]) / 2.0
    distance = tf.reduce_sum(tf.square(cell_anchors[None] - centre[:, None]), axis=-1)
    target = tf.one_hot(tf.argmin(distance, axis=1), tf.shape(out)[1])
    objectness = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(target, out[..., 0]))
    predicted = tf.reduce_sum(out[..., 1:] * target[..., None], axis=1)
    return objectness + tf.reduce_mean(tf.abs(predicted - boxes))


class DetectorWorkload(common.Workload):
    name, category, unit = 'Detector', 'CNN (detection)', 'images'
    steps, warmup = 80, 20     # 100 training steps in all
    examples = EXAMPLES
    log_every = 10             # the model logs its confident share every N calls

    def __init__(self, mode, seed=0):
        super().__init__(mode, seed)
        self.model = Detector(seed, self.log_every)
        self.model(tf.zeros([1, IMAGE, IMAGE, 3]))
        self.model.calls = 0
        self.optimizer = keras.optimizers.Adam(1e-3)
        self.cell_anchors = anchors(IMAGE // 8)
        images, boxes = squares(seed, self.examples)
        self.data = [(tf.constant(images[i:i + BATCH]), tf.constant(boxes[i:i + BATCH]))
                     for i in range(0, len(images), BATCH)]
        self.position = 0
        self.global_step = 0
        self.compiled_step = self.compile(self.train_step, self.symbolic())

    def train_step(self, images, boxes):
        with tf.GradientTape() as tape:
            out = self.model(images, training=True)
            loss = detection_loss(out, boxes, self.cell_anchors)
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        self.global_step += 1
        return loss

    def symbolic(self):
        """For ``tf.function``: the draw in Python, passed in as a tensor; the grid from
        the static shape; the confident share returned every step and logged by the
        driver (the model's own Python counter kept outside the graph)."""
        model, grid = self.model, IMAGE // 8

        def forward(images, scale):
            h = images
            for layer in model.backbone:
                h = layer(h)
            out = tf.reshape(model.head(h * scale), (-1, grid * grid, 5))
            confident = tf.reduce_mean(tf.cast(tf.sigmoid(out[..., 0]) > 0.5, tf.float32))
            return out, confident

        @tf.function(input_signature=[tf.TensorSpec([None, IMAGE, IMAGE, 3], tf.float32),
                                      tf.TensorSpec([None, 4], tf.float32),
                                      tf.TensorSpec([], tf.float32)])
        def graph(images, boxes, scale):
            with tf.GradientTape() as tape:
                out, confident = forward(images, scale)
                loss = detection_loss(out, boxes, self.cell_anchors)
            grads = tape.gradient(loss, model.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss, confident

        def train_step(images, boxes):
            loss, confident = graph(images, boxes, tf.constant(model.rng.uniform(0.9, 1.1)))
            model.calls += 1
            if model.calls % model.log_every == 0:
                model.confidence_log.append(float(confident.numpy()))
            self.global_step += 1
            return loss
        return train_step

    def step(self):
        images, boxes = self.data[self.position % len(self.data)]
        self.position += 1
        return self.compiled_step(images, boxes), int(images.shape[0])

    def observable_state(self):
        out = super().observable_state()
        out['model.calls'] = self.model.calls
        out['model.confidence_log'] = list(self.model.confidence_log)
        out['model.rng'] = self.model.rng.getstate()
        return out


if __name__ == '__main__':
    common.main(DetectorWorkload)
