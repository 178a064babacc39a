"""A detection training step with its log line inside (issue #36's fourth item).

A small YOLO-style detector as such repositories write it: Keras conv layers with
two output scales, one loss closure per scale over NumPy anchors, an ignore mask
made by ``tf.map_fn`` over the batch with a data-dependent ``tf.boolean_mask``,
Adam, and a log line inside the step that reads every scale's loss with
``.numpy()``.  The log line is a statement no graph holds, so janus splits the
step: forward, loss, backward and update in one segment graph, the log line in
Python.

Side by side in one process, every step timed from the first, the modes taking
turns step by step:

* **eager**, as written;
* **janus, as written**: the step split at the log line;
* **janus, the lines lifted**: the same lines as a function of their own, the
  caller printing the losses it returns;
* **tf.function, the lines lifted**: the hand-written version of the same.

The split step's segment must cost what the lifted function costs.  Also printed:
the largest relative difference of the weights against eager after the run.

    .venv/bin/python benchmarks/detection_step.py [--steps 40]
"""
import argparse
import os
import statistics
import time
import warnings

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import janus  # noqa: E402

IMAGE, CLASSES, BATCH = 64, 4, 8
ANCHORS = np.array([(10, 13), (16, 30), (33, 23), (30, 61), (62, 45), (59, 119)],
                   np.float32) / 128
MASKS = np.array([[3, 4, 5], [0, 1, 2]])
GRIDS = (IMAGE // 16, IMAGE // 8)


class Detector(tf.keras.Model):
    def __init__(self):
        super().__init__()
        conv = tf.keras.layers.Conv2D
        self.stem = [conv(16, 3, strides=2, padding='same', activation='relu'),
                     conv(32, 3, strides=2, padding='same', activation='relu'),
                     conv(64, 3, strides=2, padding='same', activation='relu')]
        self.down = conv(64, 3, strides=2, padding='same', activation='relu')
        self.heads = [conv(len(mask) * (5 + CLASSES), 1) for mask in MASKS]

    def call(self, x, training=False):
        for layer in self.stem:
            x = layer(x)
        fine = x
        coarse = self.down(x)
        outputs = []
        for head, features, mask in zip(self.heads, (coarse, fine), MASKS):
            out = head(features)
            grid = tf.shape(out)[1]
            outputs.append(tf.reshape(out, (-1, grid, grid, len(mask), 5 + CLASSES)))
        return outputs


def broadcast_iou(box_1, box_2):
    box_1 = tf.expand_dims(box_1, -2)
    box_2 = tf.expand_dims(box_2, 0)
    w = tf.maximum(tf.minimum(box_1[..., 2], box_2[..., 2])
                   - tf.maximum(box_1[..., 0], box_2[..., 0]), 0)
    h = tf.maximum(tf.minimum(box_1[..., 3], box_2[..., 3])
                   - tf.maximum(box_1[..., 1], box_2[..., 1]), 0)
    inter = w * h
    area_1 = (box_1[..., 2] - box_1[..., 0]) * (box_1[..., 3] - box_1[..., 1])
    area_2 = (box_2[..., 2] - box_2[..., 0]) * (box_2[..., 3] - box_2[..., 1])
    return inter / (area_1 + area_2 - inter)


def yolo_loss(anchors, ignore_thresh=0.5):
    def loss_fn(y_true, y_pred):
        grid_size = tf.shape(y_pred)[1]
        pred_xy = tf.sigmoid(y_pred[..., 0:2])
        pred_wh = y_pred[..., 2:4]
        pred_obj = y_pred[..., 4:5]
        pred_class = y_pred[..., 5:]
        grid = tf.meshgrid(tf.range(grid_size), tf.range(grid_size))
        grid = tf.expand_dims(tf.stack(grid, axis=-1), axis=2)
        box_xy = (pred_xy + tf.cast(grid, tf.float32)) / tf.cast(grid_size, tf.float32)
        box_wh = tf.exp(pred_wh) * anchors
        pred_box = tf.concat([box_xy - box_wh / 2, box_xy + box_wh / 2], axis=-1)

        true_box, true_obj, true_class = tf.split(y_true, (4, 1, 1), axis=-1)
        true_xy = (true_box[..., 0:2] + true_box[..., 2:4]) / 2
        true_wh = true_box[..., 2:4] - true_box[..., 0:2]
        box_loss_scale = 2 - true_wh[..., 0] * true_wh[..., 1]
        true_xy_cell = true_xy * tf.cast(grid_size, tf.float32) - tf.cast(grid, tf.float32)
        true_wh_log = tf.math.log(tf.maximum(true_wh / anchors, 1e-9))
        obj_mask = tf.squeeze(true_obj, -1)

        def best_iou(x):
            boxes = tf.boolean_mask(x[1], tf.cast(x[2], tf.bool))
            return tf.reduce_max(broadcast_iou(x[0], boxes), axis=-1)
        best = tf.map_fn(best_iou, (pred_box, true_box, obj_mask),
                         fn_output_signature=tf.float32)
        ignore_mask = tf.cast(best < ignore_thresh, tf.float32)

        xy_loss = obj_mask * box_loss_scale * tf.reduce_sum(
            tf.square(true_xy_cell - pred_xy), axis=-1)
        wh_loss = obj_mask * box_loss_scale * tf.reduce_sum(
            tf.square(true_wh_log - pred_wh), axis=-1)
        obj_entropy = tf.squeeze(tf.nn.sigmoid_cross_entropy_with_logits(
            labels=true_obj, logits=pred_obj), -1)
        obj_loss = obj_mask * obj_entropy + (1 - obj_mask) * ignore_mask * obj_entropy
        class_loss = obj_mask * tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(true_class[..., 0], tf.int32), logits=pred_class)
        return tf.reduce_sum(xy_loss + wh_loss + obj_loss + class_loss, axis=(1, 2, 3))
    return loss_fn


class Trainer:
    def __init__(self, seed=0):
        tf.keras.utils.set_random_seed(seed)
        self.model = Detector()
        self.model.build((None, IMAGE, IMAGE, 3))
        self.losses = [yolo_loss(ANCHORS[mask]) for mask in MASKS]
        self.optimizer = tf.keras.optimizers.Adam(1e-3)
        self.step = 0

    def train_step(self, images, labels):
        with tf.GradientTape() as tape:
            outputs = self.model(images, training=True)
            pred_loss = []
            for output, label, loss_fn in zip(outputs, labels, self.losses):
                pred_loss.append(loss_fn(label, output))
            total_loss = tf.reduce_sum(pred_loss)
        grads = tape.gradient(total_loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        self.step += 1
        print('step %d, loss %.4f, %s' % (self.step, total_loss.numpy(),
                                          [np.sum(loss.numpy()) for loss in pred_loss]))
        return total_loss

    def lifted_step(self, images, labels):
        """The same lines as a function of their own: the caller prints."""
        with tf.GradientTape() as tape:
            outputs = self.model(images, training=True)
            pred_loss = []
            for output, label, loss_fn in zip(outputs, labels, self.losses):
                pred_loss.append(loss_fn(label, output))
            total_loss = tf.reduce_sum(pred_loss)
        grads = tape.gradient(total_loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return total_loss, pred_loss

    def log(self, total_loss, pred_loss):
        self.step += 1
        print('step %d, loss %.4f, %s' % (self.step, total_loss.numpy(),
                                          [np.sum(loss.numpy()) for loss in pred_loss]))


def make_batch(rng):
    """Images and one label grid per scale: a few boxes per image, objectness and class."""
    images = rng.random((BATCH, IMAGE, IMAGE, 3), dtype=np.float32)
    labels = []
    for grid, mask in zip(GRIDS, MASKS):
        label = np.zeros((BATCH, grid, grid, len(mask), 6), np.float32)
        for b in range(BATCH):
            for _ in range(rng.integers(1, 4)):
                cx, cy = rng.random(2) * 0.8 + 0.1
                w, h = rng.random(2) * 0.3 + 0.05
                i, j, a = int(cy * grid), int(cx * grid), rng.integers(len(mask))
                label[b, i, j, a] = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, 1,
                                     rng.integers(CLASSES))
        labels.append(tf.constant(label))
    return tf.constant(images), tuple(labels)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--steps', type=int, default=40)
    args = parser.parse_args()
    warnings.filterwarnings('ignore')
    rng = np.random.default_rng(0)
    batches = [make_batch(rng) for _ in range(4)]
    trainers = {name: Trainer() for name in ('eager', 'split', 'lifted', 'hand')}
    split_fn = janus.function(trainers['split'].train_step)
    lifted_fn = janus.function(trainers['lifted'].lifted_step)
    hand_fn = tf.function(trainers['hand'].lifted_step)
    modes = {
        'eager': lambda b: trainers['eager'].train_step(*b),
        'janus, as written': lambda b: split_fn(*b),
        'janus, the lines lifted': lambda b: trainers['lifted'].log(*lifted_fn(*b)),
        'tf.function, the lines lifted': lambda b: trainers['hand'].log(*hand_fn(*b)),
    }
    times = {name: [] for name in modes}
    names = list(modes)
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()):
        for i in range(args.steps):
            for name in names[i % len(names):] + names[:i % len(names)]:
                started = time.perf_counter()
                modes[name](batches[i % len(batches)])
                times[name].append(time.perf_counter() - started)
    base, half = times['eager'], args.steps // 2
    print('a detection step logging its losses inside, %d steps:' % args.steps)
    for name, t in times.items():
        print('  %-32s total %8.1f ms (%5.2fx eager), steady %7.2f ms a step (%5.2fx)' % (
            name, sum(t) * 1e3, sum(base) / sum(t), statistics.median(t[half:]) * 1e3,
            statistics.median(base[half:]) / statistics.median(t[half:])))
    split_t, lifted_t = times['janus, as written'], times['janus, the lines lifted']
    print('  as written / lifted, janus: %.2fx steady' % (
        statistics.median(lifted_t[half:]) / statistics.median(split_t[half:])))
    eager_w = trainers['eager'].model.get_weights()
    for name in ('split', 'lifted', 'hand'):
        diff = max(float(np.max(np.abs(a - b)) / (np.max(np.abs(a)) + 1e-12))
                   for a, b in zip(eager_w, trainers[name].model.get_weights()))
        print('  weights against eager, %s: %.2g relative' % (name, diff))
    s = janus.stats(split_fn)
    print('  janus as written: %s' % {k: s[k] for k in ('graphs_built', 'fallbacks')
                                        if k in s})


if __name__ == '__main__':
    main()
