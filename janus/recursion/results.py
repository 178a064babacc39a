"""What a recursive function over a structure returns, as its graph function's outputs.

Needs a ``TraceContext`` while the body is traced (``recursion/recursion.py``): the
first path that returns sets the result's structure and its leaves' kinds; every
other path must return the same kinds (a tensor's shape may widen, and the body is
traced again).
"""
import dataclasses
import enum
import typing

import tensorflow as tf

from janus.recursion import structures
from janus.values import protocol, scalars


class LeafKind(enum.Enum):
    """What one leaf of a recursive function's result is."""
    TENSOR = 'tensor'
    SCALAR = 'scalar'   # a Python number (dynamic or not)


@dataclasses.dataclass
class Leaf:
    """One leaf of the result: a tensor's ``TensorSpec``, or a number's Python type."""
    kind: LeafKind
    spec: typing.Any

    def tensor_spec(self):
        if self.kind is LeafKind.TENSOR:
            return self.spec
        return tf.TensorSpec([], scalars.DTYPES[self.spec])


def _leaf_of(leaf):
    if isinstance(leaf, tf.Tensor):
        return Leaf(LeafKind.TENSOR, tf.TensorSpec(leaf.shape, leaf.dtype))
    kind = structures.number_type(leaf)
    if kind in scalars.DTYPES:
        return Leaf(LeafKind.SCALAR, kind)
    structures.refuse('a recursive function returning a %s (janus returns tensors '
                      'and Python numbers from it)' % protocol.type_name(leaf))


class Results:
    """The result's structure (a nest of 0s) and its leaves, once a path returned."""

    def __init__(self):
        self.structure = None
        self.leaves = None

    @property
    def known(self):
        return self.leaves is not None

    def forget(self):
        """Learnt again (the dry run runs again)."""
        self.leaves = None

    def __len__(self):
        return len(self.leaves)

    def specs(self):
        """The TensorSpec of each leaf."""
        return [leaf.tensor_spec() for leaf in self.leaves]

    def flat(self, result, label, schema):
        """``result``'s leaves as tensors, checked against (or setting) the kinds known."""
        leaves = tf.nest.flatten(result)
        found = [_leaf_of(leaf) for leaf in leaves]
        if self.leaves is None:
            self.structure = tf.nest.map_structure(lambda _: 0, result)
            self.leaves = found
        elif len(found) != len(self.leaves) or any(
                a.kind is not b.kind or (a.kind is LeafKind.SCALAR and a.spec is not b.spec)
                or (a.kind is LeafKind.TENSOR and a.spec.dtype != b.spec.dtype)
                for a, b in zip(found, self.leaves)):
            structures.refuse('%s returns values of other kinds on different paths' % label)
        else:
            self._widen_shapes(found, schema)
        outputs = []
        for leaf, known in zip(leaves, self.leaves):
            if known.kind is LeafKind.TENSOR:
                outputs.append(leaf)
            else:
                outputs.append(structures.number_tensor(leaf, known.spec))
        return outputs

    def _widen_shapes(self, found, schema):
        for i, (leaf, now) in enumerate(zip(self.leaves, found)):
            spec = leaf.spec
            if leaf.kind is not LeafKind.TENSOR:
                continue
            if not spec.shape.is_compatible_with(now.spec.shape):
                self.leaves[i] = Leaf(leaf.kind, tf.TensorSpec(
                    tf.TensorShape(None) if spec.shape.rank != now.spec.shape.rank else
                    [a if a == b else None for a, b in zip(spec.shape.as_list(),
                                                           now.spec.shape.as_list())],
                    spec.dtype))
                schema.stale = True
            elif spec.shape != now.spec.shape and \
                    spec.shape.most_specific_compatible_shape(now.spec.shape) != spec.shape:
                self.leaves[i] = Leaf(leaf.kind, tf.TensorSpec(
                    spec.shape.most_specific_compatible_shape(now.spec.shape), spec.dtype))
                schema.stale = True

    def zeros(self):
        """Outputs of the right kinds for a branch that must not run."""
        return [tf.zeros([d if d is not None else 0 for d in spec.shape.as_list()]
                         if spec.shape.rank is not None else [], spec.dtype)
                for spec in self.specs()]

    def rebuild(self, outputs):
        """The result from a call's outputs (its leaves first)."""
        values = [out if leaf.kind is LeafKind.TENSOR else scalars.DynamicScalar(out, leaf.spec)
                  for out, leaf in zip(outputs[:len(self.leaves)], self.leaves)]
        return tf.nest.pack_sequence_as(self.structure, values)
