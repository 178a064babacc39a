"""``print`` in converted code: deferred until the run succeeded, in program order.

Needs a ``TraceContext`` (``trace_context``).  Arguments are captured as the
program sees them at that point (a variable's value is read in the graph
there), written to the shadow heap's write log, and printed after the run.
A ``print`` inside a tensor-dependent branch prints only when the run took
that path (a conditional write, ``control/``); inside a
tensor-dependent loop it is refused (each iteration would need its own).
"""
from __future__ import annotations

import enum
import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from janus.reasons import Reason
from janus import pytypes
from janus.library import whitelist
from janus.trace import observe
from janus.heap.shadow_heap import Write, WriteKind
from janus.trace.trace_context import Unsupported
from janus.trace.tracing import current, writable_context as _writable_context

if TYPE_CHECKING:
    from janus.trace.trace_context import TraceContext


def deferred_print(ctx: TraceContext, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """``print``: output is a side effect, so it happens after a successful run,
    with the run's values (printing an eager tensor shows what eager shows).
    A variable is printed as it was at that point of the program: its value is
    read in the graph there, and formatted after the run as eager formats it."""
    if set(kwargs) - {'sep', 'end', 'flush'}:
        raise Unsupported(Reason.PRINT_OF_OBJECT,
                          'janus converts print() with sep=/end=/flush= only')
    if any(kwargs.get(k) is not None and type(kwargs[k]) is not str for k in ('sep', 'end')):
        # Python raises TypeError; printed after the run, it would raise after state changed.
        raise Unsupported(Reason.PRINT_OF_OBJECT,
                          'janus converts print() whose sep=/end= are strings or None only')
    ctx = _writable_context('standard output (print)')
    # An outside set (a Counter...) is printed as it is when the write-back reaches
    # this print: its order is Python's own, and the writes before it are applied.
    args = [_printable(ctx.contents(v) if pytypes.has_items(v) else v) for v in args]
    # janus's own record of the call
    record = (ctx.provenance.made(list(args)), ctx.provenance.made(dict(kwargs)))
    ctx.heap.writes.append(Write(WriteKind.PRINT, None, 'print', record, None))
    return None


class _VariableStyle(enum.Enum):
    TF = 'tf'         # tf.Variable: ResourceVariable.__repr__
    KERAS = 'keras'   # keras.Variable: keras.src.backend.common.variables.Variable.__repr__


class PrintedVariable(tuple):
    """A variable's value at one point of the program, printed as eager prints the
    variable.  A tuple, so the tracer rebuilds it from the run's outputs:
    (style value, text before the value, value tensor)."""

    def __new__(cls, style: str, head: str, value: tf.Tensor) -> PrintedVariable:
        return tuple.__new__(cls, (style, head, value))

    def __repr__(self) -> str:
        style, head, value = self
        if _VariableStyle(style) is _VariableStyle.TF:
            from tensorflow.python.framework import ops as tf_ops
            return '%s%s>' % (head, tf_ops.value_text(value, is_repr=True))
        import keras
        return '%s, value=%s>' % (head, keras.ops.convert_to_numpy(value))

    __str__ = __repr__


def _variable_style(variable: object) -> _VariableStyle | None:
    """How eager prints ``variable`` (None: a kind janus does not know how to print)."""
    kind = type(variable)
    if kind.__str__ is not object.__str__:
        return None
    from tensorflow.python.ops import resource_variable_ops
    if kind.__repr__ is resource_variable_ops.BaseResourceVariable.__repr__:
        return _VariableStyle.TF
    keras = _keras_variables()
    if keras is not None and kind.__repr__ is keras.Variable.__repr__:
        return _VariableStyle.KERAS
    return None


def _keras_variables() -> types.ModuleType | None:
    """Keras's variables module, if the program imported Keras (else None)."""
    import sys
    return sys.modules.get('keras.src.backend.common.variables')


def _snapshot(variable: Any) -> PrintedVariable:
    style = _variable_style(variable)
    if style is None:
        raise Unsupported(Reason.PRINT_OF_OBJECT,
                          'janus does not convert print() of a %s' % type(variable).__name__)
    if style is _VariableStyle.TF:
        head = "<tf.Variable '%s' shape=%s dtype=%s, " % (
            variable.name, variable.get_shape(), variable.dtype.name)
    else:
        head = '<Variable path=%s, shape=%s, dtype=%s' % (
            variable.path, variable.shape, variable.dtype)
    # Read here, in program order: the graph orders it before later updates.
    return PrintedVariable(style.value, head, tf.identity(tf.convert_to_tensor(variable)))


def _exception_text(error: BaseException) -> BaseException | str:
    """``print(e)`` of an exception: its text, the same on every call when the call
    made it of Python constants and its class does not define how it prints (an
    exception the trace caught, ``control/exceptions.py``); an outside one is
    printed as it is after the run."""
    if current().provenance.source_of(error) is not None:
        return error
    if (observe.user_dunder(error, '__str__') or not pytypes.holds_only_constants(error)):
        raise Unsupported(Reason.PRINT_OF_OBJECT,
                          'janus does not convert print() of a %s made in the call that holds '
                          'more than Python constants or defines how it prints'
                          % type(error).__name__)
    return str(error)


def _printable(value: Any, depth: int = 0) -> Any:
    """``value`` with every variable in it replaced by a snapshot of its value."""
    if pytypes.is_variable(value):
        return _snapshot(value)
    if depth == 0 and isinstance(value, BaseException):
        return _exception_text(value)
    if not isinstance(value, (list, tuple, dict)):
        if observe.user_dunder(value, '__str__') or observe.user_dunder(value, '__repr__'):
            # It would run after the graph, unconverted, seeing the state at the end.
            raise Unsupported(Reason.PRINT_OF_OBJECT,
                              'janus does not convert print() of a %s, whose class defines '
                              'how it prints' % type(value).__name__)
        return value
    if depth > 8:
        raise Unsupported(Reason.PRINT_OF_OBJECT,
                          'janus does not convert print() of containers nested this deep')
    if isinstance(value, dict):
        items: Any = {k: _printable(v, depth + 1) for k, v in value.items()}
        if all(items[k] is v for k, v in value.items()):
            return value
        if type(value) is dict:
            return current().provenance.made(items)
    else:
        items = [_printable(v, depth + 1) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
    if type(value) is list:
        # a copy with the variables' values, the call's own
        return current().provenance.made(items)
    if type(value) is tuple:
        return tuple(items)
    if whitelist.is_namedtuple_class(type(value)):
        return type(value)(*items)
    raise Unsupported(Reason.PRINT_OF_OBJECT,
                      'janus does not convert print() of a %s holding a variable'
                      % type(value).__name__)
