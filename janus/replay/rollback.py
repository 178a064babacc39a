"""Replay of a rollback: the variables a graph may update, kept before a run and
assigned back when it fails after a change.

Needs a ``Rollback`` that ``graphgen/rollback.py`` planned when the graph was
traced (which variables, and why; its docstring has the design).  Invariant
(asserted): a rollback restores variables only, by their resource handles.
"""
from __future__ import annotations
import typing
import tensorflow as tf
from tensorflow.python.ops import gen_resource_variable_ops


class Rollback:
    """The variables a graph may update, as (resource handle, dtype) pairs."""

    def __init__(self, handles: typing.Iterable[tuple[tf.Tensor, tf.DType]]) -> None:
        self.handles = tuple(handles)
        assert all(handle.dtype == tf.resource and isinstance(dtype, tf.DType)
                   for handle, dtype in self.handles), self.handles

    def save(self) -> list[tf.Tensor]:
        """The variables' values now (eager tensors holding their buffers)."""
        read = gen_resource_variable_ops.read_variable_op
        return [read(handle, dtype) for handle, dtype in self.handles]

    def restore(self, saved: typing.Iterable[tf.Tensor]) -> None:
        """Assigns the values ``save`` kept back to the variables."""
        assign = gen_resource_variable_ops.assign_variable_op
        for (handle, _), value in zip(self.handles, saved):
            assign(handle, value)

    def __len__(self) -> int:
        return len(self.handles)
