"""What janus runs for a callable: the Python function behind it, and the arguments it adds.

Needs nothing run before it.  ``janus.function`` accepts anything eager code
can call.  ``resolve`` reduces it to a ``Target``: a plain Python function
janus profiles and converts, plus the arguments every call prepends:

* a function: itself;
* a bound method ``obj.m``: ``type(obj).m`` with ``obj`` first, so ``self``
  is an argument of the call (its state is read and written back through
  the call's arguments, like any decorated method's);
* ``functools.partial(f, *a, **k)``: ``f`` with ``a`` first and ``k`` as
  defaults the call may override, as ``partial`` does;
* an object whose class defines ``__call__`` in Python: that ``__call__``
  with the object as ``self``;
* anything else (a Keras model or layer, a library or builtin callable, a
  class, another janus function): ``call_through`` with the callable first.
  Its one call goes through the runtime like any call in converted code, so a
  Keras model runs Keras's ``__call__`` with your converted ``call`` inside,
  and what janus does not model runs imperatively, with the reason.

Generator and coroutine functions get no target (``reason``: a ``(Reason, why)`` pair): a
call only creates the generator, whose code runs later, outside the call;
janus runs such calls as plain Python.
"""
from __future__ import annotations
import collections
import functools
import inspect
import types
import typing

from janus.call_through import call_through
from janus.reasons import Reason
from janus.library import layers, whitelist

Target = collections.namedtuple('Target', 'function args kwargs reason')

_DEFERRED_CODE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def runs_later(fn: typing.Any) -> bool:
    """A generator or coroutine function: calling it only creates the generator/coroutine."""
    code = getattr(fn, '__code__', None)
    return code is not None and bool(code.co_flags & _DEFERRED_CODE)


class JanusCallable:
    """Base of janus's own callables, a janus function and a bound janus method:
    ``__janus_function__`` is the janus function (the callable itself, or the one
    a bound method calls with its ``__self__`` first)."""

    __janus_function__: typing.Any   # each subclass sets it


def is_janus(value: typing.Any) -> bool:
    """A janus function or a bound janus method (they run janus's own state machine)."""
    return isinstance(value, JanusCallable)


def is_janus_function(value: typing.Any) -> bool:
    """A janus function itself (not a bound janus method)."""
    return isinstance(value, JanusCallable) and value.__janus_function__ is value


def resolve(fn: typing.Any) -> Target:
    """The ``Target`` janus profiles and converts for calls of ``fn``."""
    if isinstance(fn, types.FunctionType):
        if runs_later(fn):
            return Target(None, (), {}, (
                Reason.GENERATOR, '%s is a generator or coroutine function: a call only '
                'creates the generator, whose code runs later, outside the call; janus runs '
                'such calls as plain Python' % fn.__qualname__))
        return Target(fn, (), {}, None)
    if isinstance(fn, types.MethodType):
        return _prepend(resolve(fn.__func__), (fn.__self__,), {})
    if type(fn) is functools.partial:
        return _prepend(resolve(fn.func), fn.args, fn.keywords)
    call = getattr(type(fn), '__call__', None)
    if (isinstance(call, types.FunctionType) and not whitelist.is_library(call)
            and not is_janus(fn)):
        return _prepend(resolve(call), (fn,), {})
    return Target(call_through, (fn,), {}, None)


def through_janus(
        callee: typing.Any, args: typing.Sequence,
        kwargs: typing.Mapping[str, typing.Any]) -> tuple[typing.Any, typing.Sequence, typing.Mapping]:
    """(callee, args, kwargs) with a janus function replaced by what it runs.

    Converted code calling another janus function inlines that function's
    target into its own graph (a janus function's ``__call__`` is janus's
    state machine, not code to convert); anything else comes back unchanged.
    """
    if not is_janus(callee):
        return callee, args, kwargs
    jf = callee.__janus_function__
    if jf is not callee:   # a bound janus method
        args = (callee.__self__,) + tuple(args)
    target = jf.target
    if target.function is None:
        return jf.fn, args, kwargs   # a generator function: the converter says why not
    return target.function, target.args + tuple(args), {**target.kwargs, **kwargs}


def _prepend(target: Target, args: typing.Sequence,
             kwargs: typing.Mapping[str, typing.Any]) -> Target:
    """``target`` called with ``args`` before the caller's and ``kwargs`` as overridable
    keywords: ``partial(f, *args, **kwargs)`` / a method's ``self``."""
    return target._replace(args=target.args + tuple(args),
                           kwargs={**target.kwargs, **kwargs})


def describe(fn: typing.Any) -> str:
    """A readable name for ``fn`` (explain, logs, errors)."""
    if isinstance(fn, (types.FunctionType, types.MethodType, type)):
        return fn.__qualname__
    if type(fn) is functools.partial:
        return 'functools.partial(%s)' % describe(fn.func)
    name = getattr(fn, '__qualname__', None) if isinstance(fn, types.BuiltinFunctionType) else None
    return name or '%s object' % type(fn).__qualname__


def source_code(fn: typing.Any, target: Target) -> types.CodeType | None:
    """The code object ``explain`` points at: the user's own function where there is one."""
    if target.function is not None and target.function is not call_through:
        return target.function.__code__
    if target.function is call_through:
        own = layers.user_call(fn) if not isinstance(fn, type) else None
        if own is not None:
            return own.__code__
    return getattr(getattr(fn, '__func__', fn), '__code__', None)


def copy_identity(wrapper: typing.Any, fn: typing.Any) -> None:
    """``functools.update_wrapper`` where it is safe: for objects (a Keras model) it
    would copy their ``__dict__`` into the wrapper, so those only get ``__wrapped__``.
    A function's own attributes never replace the wrapper's (``step.state = ...``
    would have replaced a janus function's state record)."""
    if isinstance(fn, types.FunctionType):
        functools.update_wrapper(wrapper, fn, updated=())
        for name, value in vars(fn).items():
            vars(wrapper).setdefault(name, value)
    elif isinstance(fn, (types.MethodType, functools.partial, types.BuiltinFunctionType)):
        functools.update_wrapper(wrapper, fn, updated=())
    else:
        wrapper.__wrapped__ = fn
