"""Output templates: how a run's outputs become the call's Python values again.

Needs nothing run before it.  The tracer describes every returned or written
value as a template when it closes a graph (``graphgen/templating.py``);
``rebuild`` turns one back into Python values after each run: graph outputs,
constants, outside objects re-read from their sources, containers the
call made (one object per run however often it is returned or written),
numbers, formatted text, the side a tensor-dependent ``if`` took, copies of
NumPy arrays the call made at trace time, views of outside NumPy arrays, and
sparse and ragged tensors the call made (from their component tensors).
"""
from __future__ import annotations
import typing
import tensorflow as tf
import numpy as np


class Out:
    def __init__(self, index: int) -> None:
        self.index = index


class Const:
    def __init__(self, value: object) -> None:
        self.value = value


class FromSource:
    def __init__(self, source: typing.Any) -> None:
        self.source = source


class Copied:
    """A NumPy array the call made of constants at trace time: a copy per run (eager
    makes a new one on every call)."""

    def __init__(self, value: np.ndarray) -> None:
        self.value = value


class Indexed:
    """A view of a NumPy array from outside the call made by basic indexing
    (``obs[None]``): the same index of the array as it is after the run (eager makes
    a new view of it on every call too)."""

    def __init__(self, base: object, key: object) -> None:
        self.base, self.key = base, key


class Shared:
    """A container the call made and returns or writes more than once: one object."""

    def __init__(self, template: object) -> None:
        self.template = template


class Scalar:
    """A dynamic scalar: its graph output as the plain Python int/float/bool eager has."""

    def __init__(self, index: int, kind: type) -> None:
        self.index, self.kind = index, kind


class Conditional:
    """A write made in a tensor-dependent branch (or loop): replayed only when its
    condition, a bool the graph returns, is true after the run."""

    def __init__(self, condition: object, value: object) -> None:
        self.condition, self.value = condition, value


NOT_TAKEN = object()


class Choice:
    """A tensor a tensor-dependent ``if`` chose: the side the run took (``pred``, a
    bool the graph returns), an input rebuilt as itself."""

    def __init__(self, pred: object, when_true: object, when_false: object) -> None:
        self.pred, self.when_true, self.when_false = pred, when_true, when_false


class Composite:
    """A SparseTensor or RaggedTensor the call made: rebuilt from its component
    tensors (graph outputs) by its type spec."""

    def __init__(self, spec: tf.TypeSpec, components: typing.Sequence[object]) -> None:
        self.spec, self.components = spec, components


class Text:
    """A string that needs the run's values (``f"loss {loss}"``), formatted after it."""

    def __init__(self, text: typing.Any, values: typing.Sequence[object]) -> None:
        self.text, self.values = text, values


def rebuild(template: typing.Any, outputs: typing.Sequence[tf.Tensor],
            arguments: typing.Mapping[str, typing.Any],
            memo: dict[int, typing.Any] | None = None) -> typing.Any:
    memo = {} if memo is None else memo
    if isinstance(template, Out):
        return outputs[template.index]
    if isinstance(template, Const):
        return template.value
    if isinstance(template, Copied):
        return template.value.copy()
    if isinstance(template, Scalar):   # .item(): a Python int/float/bool, never NumPy's
        return template.kind(outputs[template.index].numpy().item())
    if isinstance(template, FromSource):
        return template.source.value(arguments, {})
    if isinstance(template, Indexed):
        return rebuild(template.base, outputs, arguments, memo)[template.key]
    if isinstance(template, Choice):
        taken = bool(rebuild(template.pred, outputs, arguments, memo))
        return rebuild(template.when_true if taken else template.when_false, outputs,
                        arguments, memo)
    if isinstance(template, Text):
        return template.text.render([rebuild(t, outputs, arguments, memo)
                                     for t in template.values])
    if isinstance(template, Composite):
        components = [rebuild(t, outputs, arguments, memo) for t in template.components]
        return tf.nest.pack_sequence_as(template.spec, components, expand_composites=True)
    if isinstance(template, Shared):
        if id(template) not in memo:
            memo[id(template)] = rebuild(template.template, outputs, arguments, memo)
        return memo[id(template)]
    kind, items = template
    if kind == 'list':
        return [rebuild(t, outputs, arguments, memo) for t in items]
    if kind == 'dict':
        return {k: rebuild(t, outputs, arguments, memo) for k, t in items.items()}
    values = [rebuild(t, outputs, arguments, memo) for t in items]
    return tuple(values) if kind is tuple else kind(*values)
