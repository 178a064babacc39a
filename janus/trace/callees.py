"""What a callee of converted code is: the tests ``calls.CalleeKind`` matches callees by.

Needs a ``TraceContext`` for the tests that ask what the trace converted
(``ctx.code_objects``).  Below every handler module of ``calls``: the name a
refusal gives a callee, whether a callee is your code or a library's, and the
``PASS`` a handler answers to let the kinds after it try.
"""
import sys
import types

from janus.library import whitelist

# A handler's answer when the call is not its to answer: the kinds after it try.
PASS = object()


# Builtins that hand their arguments' items on without looking at them.
PASSING_ON = (zip, enumerate, reversed, list, tuple)


def name(callee):
    """``callee`` as refusals name it."""
    found = getattr(callee, '__qualname__', None) or getattr(callee, '__name__', None)
    return repr(found) if found else 'a %s object' % type(callee).__name__


def is_user_code(ctx, callee):
    """Calls the converter inlines (they see dynamic scalars as they are)."""
    if isinstance(callee, types.MethodType):
        return isinstance(callee.__func__, types.FunctionType) and not whitelist.is_library(callee)
    if isinstance(callee, types.FunctionType):
        return callee.__code__ in ctx.code_objects or not whitelist.is_library(callee)
    return False


def is_str_format(callee):
    return isinstance(getattr(callee, '__self__', None), str) and \
        getattr(callee, '__name__', None) == 'format'


def is_keras_layer(obj):
    return any(whitelist.in_package(k.__module__ or '', whitelist.LIBRARY_PREFIXES)
               for k in type(obj).__mro__[1:])


def reads_traceback(callee):
    """``traceback.format_exc()``, ``sys.exc_info()``, ``sys.exception()``: the frames of a
    trace (or of a graph break's skeleton) are not eager's."""
    return (callee is sys.exc_info or callee is getattr(sys, 'exception', None)
            or whitelist.module_of(callee) == 'traceback')


def converted_generator(ctx, value):
    """Whether ``value`` is a generator the call made from converted code (a generator
    function of yours, a generator expression): ``next`` runs its code in the trace."""
    return (type(value) is types.GeneratorType and value.gi_code in ctx.code_objects
            and ctx.provenance.source_of(value) is None)


def is_whitelisted_builtin(callee):
    try:
        return callee in whitelist.BUILTINS
    except TypeError:  # unhashable callee
        return False
