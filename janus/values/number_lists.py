"""Outside lists of numbers fed to TF ops as graph inputs, once relaxed.

Needs ``relaxation.py`` to have relaxed the list (its values changed between
calls: ``guards.numbers_key`` in the plan's dynamic keys) and ``library_calls.py`` to
route the library call here.  ``tf.one_hot(actions, n)`` of a relaxed list gets
a graph input fed per run with ``tf.constant`` of the list as it is then
(``shadow_heap.hoist_numbers``, guarded NUMBERS_MATCH); ``tf.constant(xs,
dtype)`` is fed with that dtype, as TF converts the Python numbers straight to
it.  Only functions of TF's op modules, which take a list of numbers as data,
get the feed; a failing call pins the list to constants (``library_calls.py``).
"""
from __future__ import annotations
import typing
import tensorflow as tf

from janus import guards
from janus.heap import shadow_heap


# TF op modules whose functions take a list of numbers only as data (converted to one
# tensor); outside them (Keras, tf.print, tf.map_fn, tf.cond...) a list may be a
# structure whose items are handled one by one.
_CONVERTING_MODULES = frozenset('tensorflow.python.ops.' + m for m in (
    'array_ops', 'math_ops', 'nn_ops', 'nn_impl', 'gen_array_ops', 'gen_math_ops',
    'gen_nn_ops', 'clip_ops', 'special_math_ops', 'random_ops', 'stateless_random_ops',
    'sort_ops', 'linalg_ops', 'bitwise_ops', 'check_ops'))


def converts_lists(callee: typing.Any) -> bool:
    """Whether ``callee`` is a TF op function that converts a list argument to one
    tensor.  ``tf.concat`` is not: given one value where it wants a list of tensors,
    it takes it as a list of one (a list of numbers makes it raise eagerly)."""
    return (getattr(callee, '__module__', None) in _CONVERTING_MODULES
            and getattr(callee, '__name__', None) not in ('concat', 'concat_v2', 'add_n',
                                                          'meshgrid', 'identity_n'))


def fed(ctx: typing.Any, args: typing.Sequence, kwargs: typing.Mapping[str, typing.Any],
        noted: list) -> tuple[list, dict[str, typing.Any]]:
    """``args``/``kwargs`` with each relaxed outside list of numbers (``relaxation.py``)
    replaced by its graph input, fed per run (``shadow_heap.hoist_numbers``); the
    (key, name) of each go in ``noted``."""
    def feed(value: typing.Any) -> typing.Any:
        source = relaxed_source(ctx, value)
        if source is None:
            return value
        noted.append((guards.numbers_key(source), repr(source)))
        return shadow_heap.hoist_numbers(ctx, source, value, guards.numbers_dtype(value))
    return [feed(a) for a in args], {k: feed(v) for k, v in kwargs.items()}


def relaxed_source(ctx: typing.Any, value: typing.Any) -> typing.Any:
    """The source of ``value`` when it is an outside list of numbers relaxed to a graph
    input, else None.  A list the call changed keeps its contents."""
    if type(value) not in (list, tuple) or ctx.heap.differs(value):
        return None
    source = ctx.provenance.source_of(value)
    if source is None or guards.numbers_key(source) not in ctx.plan.dynamic_scalars:
        return None
    return source if guards.numbers_dtype(value) is not None else None


_CONSTANT_DTYPES = {tf.bool: (tf.bool,), tf.int32: (tf.int32, tf.int64),
                    tf.int64: (tf.int64,), tf.float32: (tf.float32, tf.float64)}


def constant(ctx: typing.Any, args: typing.Sequence,
             kwargs: typing.Mapping[str, typing.Any]) -> tf.Tensor | None:
    """``tf.constant(actions)`` / ``tf.convert_to_tensor(actions, tf.float32)`` of a
    relaxed list of numbers: its graph input, fed with the dtype asked for (TF
    converts the Python numbers straight to it, so the feed does too), or None."""
    bound = _constant_arguments(args, kwargs)
    if bound is None:
        return None
    value, dtype = bound
    source = relaxed_source(ctx, value)
    natural = guards.numbers_dtype(value)
    dtype = natural if dtype is None else tf.as_dtype(dtype)
    if source is None or dtype not in _CONSTANT_DTYPES.get(natural, ()):
        return None
    hoisted = shadow_heap.hoist_numbers(ctx, source, value, natural, dtype)
    return tf.identity(hoisted)   # a tensor of its own, as each eager call makes


def _constant_arguments(
        args: typing.Sequence,
        kwargs: typing.Mapping[str, typing.Any]) -> tuple[typing.Any, typing.Any] | None:
    """(value, dtype or None) of a ``tf.constant``-like call with only those, else None."""
    if len(args) > 2 or set(kwargs) - {'value', 'dtype'} or not (args or 'value' in kwargs):
        return None
    value = args[0] if args else kwargs['value']
    dtype = args[1] if len(args) > 1 else kwargs.get('dtype')
    return value, dtype
