"""Calls in converted code: what runs, converted, refused or deferred.

Needs a ``TraceContext`` (``trace_context``).  ``call`` dispatches every call
converted code makes by its callee's kind: ``CalleeKind`` lists the kinds in the
order they are asked, each a test and a handler, and the first handler that
answers decides.  Your own Python callees are converted and inlined
(``inlining``), whitelisted builtins (``builtin_calls``) and TF/Keras APIs
(``library_calls``) run on guarded arguments, your Keras layers run their
converted ``call`` behind Keras's ``__call__``, methods of outside containers are
replayed through the shadow heap (``method_calls``), relaxed Python numbers are
modelled (``scalar_calls``), ``print`` is deferred, and everything else is
refused.  The tracer hands ``call`` to each trace (``TraceContext.call_user``):
the handlers' modules sit below this one and dispatch through it the calls they
rewrite.
"""
import dataclasses
import enum
import types

import tensorflow as tf

from janus.reasons import Reason
from janus import control, guards
from janus.trace import callables
from janus.graph import fallible
from janus.library import whitelist
from janus.recursion import structures
from janus.trace import (access, builtin_calls, callees, host_draws, inlining, library_calls,
                         method_calls, printing, scalar_calls)
from janus.values import scalars
from janus.values.protocol import NOT_MODELLED, StandIn
from janus.trace.trace_context import Unsupported
from janus.trace.tracing import ChosenMethod, current, refuse_unmerged


def call(__callee, /, *args, **kwargs):
    """``__callee(*args, **kwargs)`` in converted code: the first kind of callee
    (``CalleeKind``, in its order) that matches the call and answers it decides."""
    ctx = current()
    invocation = Invocation(__callee, args, kwargs)
    for handling in _IN_ORDER:
        if handling.matches(ctx, invocation):
            answer = handling.handle(ctx, invocation)
            if answer is not callees.PASS:
                return answer
    raise AssertionError('CalleeKind.UNCONVERTED answers every call')


@dataclasses.dataclass
class Invocation:
    """One call converted code makes, as the kinds asked so far left it: two of them
    rewrite it for the kinds after them (``JANUS_FUNCTION``, ``GENERATOR_TAKEN_WHOLE``)."""
    callee: object
    args: tuple
    kwargs: dict


@dataclasses.dataclass(frozen=True)
class Handling:
    """How ``call`` tells one kind of callee apart and handles it: ``matches(ctx,
    invocation)``, then ``handle(ctx, invocation)``, which answers the call, raises
    (``Unsupported``), or gives ``callees.PASS`` to let the kinds after it try."""
    matches: types.FunctionType
    handle: types.FunctionType


def _callee_is(test):
    """A kind's test that looks at the callee only."""
    return lambda ctx, invocation: test(invocation.callee)


def _any_callee(ctx, invocation):
    return True


def _is_stand_in(ctx, invocation):
    return isinstance(invocation.callee, StandIn)


# Stand-ins whose calls a module above theirs answers: ``bucket.append(x)``, ``bucket``
# one of two containers a tensor-dependent if chose, writes the shadow heap under each
# side's condition (``method_calls``), which ``tracing`` sits below.
_CALLED_ABOVE = {ChosenMethod: method_calls.call_chosen_method}


def _stand_in_callee(ctx, invocation):
    """A stand-in called: its own answer (an unmerged local refuses), or the handler
    above it, or PASS to the kinds after (a stand-in that models no call)."""
    callee, args, kwargs = invocation.callee, invocation.args, invocation.kwargs
    above = _CALLED_ABOVE.get(type(callee))
    if above is not None:
        return above(ctx, callee, args, kwargs)
    answer = callee.trace_call(args, kwargs)
    return callees.PASS if answer is NOT_MODELLED else answer


def _through_janus(ctx, invocation):
    """Janus calls janus: the function it runs is the callee the kinds after see."""
    janus_function = invocation.callee
    invocation.callee, invocation.args, invocation.kwargs = callables.through_janus(
        janus_function, invocation.args, invocation.kwargs)
    _source_added_arguments(ctx, janus_function)
    return callees.PASS


def _source_added_arguments(ctx, janus_function):
    """The objects a janus function adds before the caller's arguments (the callable
    object whose ``__call__`` it runs, a partial's arguments) are read where it keeps
    them, ``jf.target.args[i]``: a write to one (``self.calls += 1``) is then replayed
    on that object, as eagerly."""
    source = ctx.provenance.source_of(janus_function)
    if source is None:
        return
    added = janus_function.__janus_function__.target.args
    for position, value in enumerate(added):
        if type(value) not in guards.PRIMITIVES and not isinstance(value, tf.Tensor) \
                and ctx.provenance.source_of(value) is None:
            ctx.provenance.remember(guards.ItemSource(guards.AttrSource(
                guards.AttrSource(source, 'target'), 'args'), position), value)


def _host_draw(ctx, invocation):
    """``self.rng.uniform(0.9, 1.1)``: a draw janus makes on the host, or PASS."""
    drawn = host_draws.draw(invocation.callee, invocation.args, invocation.kwargs)
    return callees.PASS if drawn is None else drawn


def _passes_nodes(ctx, invocation):
    return structures.holds_node(invocation.args) \
        or structures.holds_node(invocation.kwargs.values())


def _node_call(ctx, invocation):
    """A node of a recursion's structure passed to ``isinstance`` or a builtin that
    reads it; passed to anything but your own code, refused."""
    callee, args, kwargs = invocation.callee, invocation.args, invocation.kwargs
    if callee is isinstance and len(args) == 2 and not kwargs \
            and isinstance(args[0], StandIn) and not structures.holds_node(args[1:]):
        found = args[0].trace_isinstance(args[1])   # a node's class, tested
        if found is not NOT_MODELLED:
            return found
    handled = builtin_calls.node_builtin(ctx, callee, args, kwargs)
    if handled is callees.PASS and not callees.is_user_code(ctx, callee):
        structures.refuse('passing a node of the structure to %s' % callees.name(callee))
    return handled


def _not_user_code(ctx, invocation):
    return not callees.is_user_code(ctx, invocation.callee)


def _refuse_unmerged_arguments(ctx, invocation):
    """Inlined code meets an unmerged local where it uses it; other code now."""
    refuse_unmerged(*invocation.args, *invocation.kwargs.values())
    return callees.PASS


def _folds_one_argument(ctx, invocation):
    return any(invocation.callee is c for c in (sum, max, min)) \
        and len(invocation.args) == 1 and not invocation.kwargs


def _takes_a_generator(ctx, invocation):
    return _folds_one_argument(ctx, invocation) \
        and type(invocation.args[0]) is types.GeneratorType


def _take_generator_whole(ctx, invocation):
    """``sum(f(c) for c in t)``: taken whole by it anyway, in order."""
    invocation.args = (ctx.provenance.made_result(list(invocation.args[0])),)
    return callees.PASS


def _folds_own_items(ctx, invocation):
    return _folds_one_argument(ctx, invocation) \
        and type(invocation.args[0]) in (list, tuple) \
        and ctx.provenance.source_of(invocation.args[0]) is None


def _fold_numbers(ctx, invocation):
    return scalar_calls.fold_numbers(ctx, invocation.callee, invocation.args[0])


def _lineage(invocation):
    return scalars.lineage_deep(list(invocation.args) + list(invocation.kwargs.values()))


def _given_dynamic_scalars(ctx, invocation):
    """A relaxed Python number in the arguments, or one of no outside location (a
    merged constant, a node's number)."""
    return bool(_lineage(invocation)) or scalars.holds_dynamic(list(invocation.args)) \
        or scalars.holds_dynamic(invocation.kwargs)


def _dynamic_scalars(ctx, invocation):
    """Modelled, or its value is needed."""
    return scalar_calls.call_with_dynamic_scalars(
        ctx, invocation.callee, invocation.args, invocation.kwargs, _lineage(invocation))


def _outside_tape_method(ctx, invocation):
    tape = getattr(invocation.callee, '__self__', None)
    return isinstance(tape, tf.GradientTape) and ctx.provenance.source_of(tape) is not None


def _refuse_outside_tape(ctx, invocation):
    """A GradientTape from outside the call records eagerly, outside any graph: a
    trace calling its methods would use it up (``tape.gradient`` once) or record
    symbolic tensors on it."""
    raise Unsupported(Reason.OUTSIDE_TAPE,
                      'janus does not call %s of a GradientTape made outside the graph'
                      % getattr(invocation.callee, '__name__', 'a method'))


def _answered_at_trace_time(ctx, invocation):
    return whitelist.trace_time_only(invocation.callee) is not None


def _as_eagerly(ctx, invocation):
    answer = whitelist.trace_time_only(invocation.callee)
    answer = library_calls.as_eagerly(invocation.callee, answer, invocation.args, invocation.kwargs)
    return ctx.provenance.made_result(answer, deep=True)


def _refuse_blocklisted(ctx, invocation):
    raise Unsupported(Reason.UNCONVERTED_CALL,
                      'janus does not convert calls to %s: it reads or changes TF\'s '
                      'global state, which a graph would do once, when traced'
                      % callees.name(invocation.callee))


def _reads_attribute_by_name(ctx, invocation):
    args = invocation.args
    return invocation.callee in (getattr, hasattr) and not invocation.kwargs \
        and 2 <= len(args) <= 3 and type(args[1]) is str


def _attribute_builtin(ctx, invocation):
    return builtin_calls.attribute_builtin(ctx, invocation.callee, *invocation.args)


def _asks_type(ctx, invocation):
    return invocation.callee is type and len(invocation.args) == 1 and not invocation.kwargs


def _class_of(ctx, invocation):
    return access.class_of(ctx, invocation.args[0])


def _number_of_graph_tensor(ctx, invocation):
    args = invocation.args
    return any(invocation.callee is c for c in (float, int, bool)) and len(args) == 1 \
        and not invocation.kwargs and isinstance(args[0], tf.Tensor) \
        and not isinstance(args[0], guards.EagerTensor)


def _number_from_tensor(ctx, invocation):
    """``best = float(loss)``."""
    return scalars.from_tensor(invocation.callee, invocation.args[0])


def _refuse_traceback_read(ctx, invocation):
    raise Unsupported(Reason.TRACEBACK_READ, 'janus does not convert %s (it reads the '
                      'frames that ran)' % callees.name(invocation.callee))


def _next_of_converted_generator(ctx, invocation):
    args = invocation.args
    return invocation.callee is next and 1 <= len(args) <= 2 and not invocation.kwargs \
        and callees.converted_generator(ctx, args[0])


def _next(ctx, invocation):
    """The generator's code runs here, converted; what it yields keeps its origin (and
    its end, StopIteration, is eager's)."""
    return builtin_calls.builtin_exactly(next, invocation.args, {})


def _dataset_builtin_call(ctx, invocation):
    return control.datasets.handles_call(invocation.callee, invocation.args, invocation.kwargs)


def _dataset_builtin(ctx, invocation):
    """``iter``/``enumerate``/``zip`` of a dataset."""
    answer = control.datasets.call_builtin(invocation.callee, invocation.args, invocation.kwargs)
    return ctx.provenance.made_result(answer)


def _builtin(ctx, invocation):
    with fallible.made_by_the_user():   # ``sum([a, b])`` of tensors: the user's adds
        answer = builtin_calls.call_builtin(ctx, invocation.callee, invocation.args,
                                            invocation.kwargs)
        return ctx.provenance.made_result(answer)


def _numpy(ctx, invocation):
    answer = library_calls.call_numpy(ctx, invocation.callee, invocation.args, invocation.kwargs)
    return ctx.provenance.made_result(answer, deep=True)


def _is_print(ctx, invocation):
    return invocation.callee is print


def _print(ctx, invocation):
    return printing.deferred_print(ctx, invocation.args, invocation.kwargs)


def _builtin_method(ctx, invocation):
    answer = method_calls.call_builtin_method(ctx, invocation.callee, invocation.args,
                                              invocation.kwargs)
    return ctx.provenance.made_result(answer)


def _user_method_call(ctx, invocation):
    callee = invocation.callee
    return isinstance(callee, types.MethodType) \
        and isinstance(callee.__func__, types.FunctionType) and not whitelist.is_library(callee)


def _user_method(ctx, invocation):
    """``self.helper(x)``, ``m.act(x)`` with ``m.act = scaler.apply``: the method's
    object has its source (``m.act.__self__``), read and written through it."""
    method = invocation.callee
    ctx.provenance.of(method.__self__, 'calling %s' % callees.name(method))
    return inlining.inline(ctx, method.__func__, (method.__self__,) + invocation.args,
                           invocation.kwargs, receiver=True)


def _defined_in_converted_code(ctx, invocation):
    callee = invocation.callee
    return isinstance(callee, types.FunctionType) and callee.__code__ in ctx.code_objects


def _converted_function(ctx, invocation):
    """Defined in converted code: converted already."""
    return invocation.callee(*invocation.args, **invocation.kwargs)


def _user_function_call(ctx, invocation):
    callee = invocation.callee
    return isinstance(callee, types.FunctionType) and not whitelist.is_library(callee)


def _user_function(ctx, invocation):
    return inlining.inline(ctx, invocation.callee, invocation.args, invocation.kwargs)


def _library_call(ctx, invocation):
    callee = invocation.callee
    return whitelist.is_library(callee) or whitelist.is_namedtuple_class(callee) \
        or whitelist.is_builtin_exception(callee)


def _library(ctx, invocation):
    answer = library_calls.call_library(ctx, invocation.callee, invocation.args, invocation.kwargs)
    return ctx.provenance.made_result(answer, deep=True)


def _keras_layer(ctx, invocation):
    answer = inlining.call_keras_layer(ctx, invocation.callee, invocation.args, invocation.kwargs)
    return ctx.provenance.made_result(answer, deep=True)


def _callable_object_call(ctx, invocation):
    return isinstance(getattr(type(invocation.callee), '__call__', None), types.FunctionType)


def _callable_object(ctx, invocation):
    """An object of yours with a ``__call__``: that method, inlined."""
    callee = invocation.callee
    return inlining.inline(ctx, type(callee).__call__, (callee,) + invocation.args,
                           invocation.kwargs)


def _refuse_unconverted(ctx, invocation):
    raise Unsupported(Reason.UNCONVERTED_CALL,
                      'janus does not convert calls to %s; only TF/Keras APIs, whitelisted '
                      'builtins and your own Python functions are converted'
                      % callees.name(invocation.callee))


class CalleeKind(enum.Enum):
    """The kinds of callee ``call`` tells apart, in the order it asks them: a kind is
    asked only when none before it answered (a check or a rewrite never answers; a
    kind marked PASS may decline).

    The order is part of the meaning.  Checks that concern every call come first
    (an unmerged local is refused before anything reads it); rewrites come before
    the kinds that read what they rewrite; dynamic scalars are modelled before any
    kind hands them to Python or library code; trace-time answers and refusals
    come before the builtins and library calls they would otherwise run as; your
    methods and functions are told apart before library code, and a Keras layer
    of yours before any other callable object."""
    # a stand-in called (``bucket.append(x)`` of a chosen container, an unmerged local);
    # or PASS: it models no call
    STAND_IN = Handling(_is_stand_in, _stand_in_callee)
    JANUS_FUNCTION = Handling(_callee_is(callables.is_janus), _through_janus)   # rewrite
    HOST_DRAW = Handling(_any_callee, _host_draw)   # or PASS: not a draw made on the host
    # a node of a recursion's structure in the arguments; or PASS: your code takes it
    STRUCTURE_NODE = Handling(_passes_nodes, _node_call)
    NOT_USER_CODE = Handling(_not_user_code, _refuse_unmerged_arguments)   # check
    GENERATOR_TAKEN_WHOLE = Handling(_takes_a_generator, _take_generator_whole)   # rewrite
    NUMBERS_FOLDED = Handling(_folds_own_items, _fold_numbers)   # or PASS: Python folds them
    # or PASS: the kinds after take the numbers as they are
    DYNAMIC_SCALARS = Handling(_given_dynamic_scalars, _dynamic_scalars)
    OUTSIDE_TAPE = Handling(_outside_tape_method, _refuse_outside_tape)
    TRACE_TIME_ONLY = Handling(_answered_at_trace_time, _as_eagerly)
    BLOCKLISTED = Handling(_callee_is(whitelist.is_blocklisted), _refuse_blocklisted)
    ATTRIBUTE_BUILTIN = Handling(_reads_attribute_by_name, _attribute_builtin)
    TYPE = Handling(_asks_type, _class_of)
    NUMBER_OF_TENSOR = Handling(_number_of_graph_tensor, _number_from_tensor)
    TRACEBACK_READ = Handling(_callee_is(callees.reads_traceback), _refuse_traceback_read)
    GENERATOR_NEXT = Handling(_next_of_converted_generator, _next)
    DATASET_BUILTIN = Handling(_dataset_builtin_call, _dataset_builtin)
    BUILTIN = Handling(_callee_is(callees.is_whitelisted_builtin), _builtin)
    NUMPY = Handling(_callee_is(whitelist.is_numpy_function), _numpy)
    PRINT = Handling(_is_print, _print)
    BUILTIN_METHOD = Handling(_callee_is(whitelist.is_builtin_method), _builtin_method)
    USER_METHOD = Handling(_user_method_call, _user_method)
    CONVERTED_FUNCTION = Handling(_defined_in_converted_code, _converted_function)
    USER_FUNCTION = Handling(_user_function_call, _user_function)
    LIBRARY = Handling(_library_call, _library)   # a namedtuple class, a builtin exception too
    KERAS_LAYER = Handling(_callee_is(callees.is_keras_layer), _keras_layer)
    CALLABLE_OBJECT = Handling(_callable_object_call, _callable_object)
    UNCONVERTED = Handling(_any_callee, _refuse_unconverted)


# The enum's order, read once: ``call`` runs for every call a trace makes.  Two kinds with
# equal handlings would be one member (an enum alias), and one kind would never be asked.
_IN_ORDER = tuple(kind.value for kind in CalleeKind)
assert len(_IN_ORDER) == len(CalleeKind.__members__), 'two callee kinds share a handling'
