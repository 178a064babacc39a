"""Python's builtins in converted code: ``len``, ``isinstance``, ``getattr``, ``zip``...

Needs a ``TraceContext`` (``trace_context``) whose ``call_user`` is ``calls.call``
(a builtin over a recursion's list node is dispatched again with its items).  A
whitelisted builtin runs on guarded arguments (``library_calls.guard_library_args``),
or is answered from what the trace knows: a static length, a set's guarded
contents, an outside NumPy array's stand-in; what only the run knows is refused.
"""
import tensorflow as tf

from janus.reasons import Reason
from janus import control, guards, pytypes
from janus.guards import GuardKind
from janus.library import whitelist
from janus.recursion import schema, structures
from janus.trace import access, callees, lazy_text, library_calls, observe
from janus.values import arrays
from janus.values.protocol import NOT_MODELLED, StandIn
from janus.trace.trace_context import Unsupported


# Builtins that iterate over their arguments: given a list node of known length
# (a recursive function's own parameter), they are given its items.
_ITERATING_BUILTINS = (list, tuple, enumerate, reversed, zip, sum, max, min, any, all, sorted,
                       iter, map, filter)


def node_builtin(ctx, callee, args, kwargs):
    """``len(t)``, ``type(t)``, ``sum(t)``... of a node in a recursion; else
    ``callees.PASS``."""
    if callee is len and len(args) == 1 and not kwargs:
        return structures.length(args[0])
    if callee is type and len(args) == 1 and not kwargs and args[0].static is not None:
        return schema.key_type(args[0].static)
    if any(callee is builtin for builtin in _ITERATING_BUILTINS):
        args = [ctx.provenance.made_result(structures.items(a)) if structures.is_node(a) else a
                for a in args]
        return ctx.call_user(callee, *args, **kwargs)
    return callees.PASS


def attribute_builtin(ctx, callee, obj, name, *default):
    """``getattr(obj, 'name'[, default])`` / ``hasattr(obj, 'name')``: a read through the
    attribute operator (guarded); a missing attribute is guarded to stay missing."""
    if callee is hasattr and default:
        raise TypeError('hasattr expected 2 arguments, got 3')
    try:
        value = access.attr(obj, name)
    except AttributeError:
        source = ctx.provenance.source_of(obj)
        if source is not None:
            ctx.guards.add(GuardKind.HASATTR_MATCH, source, (name, False))
        if callee is hasattr:
            return False
        if default:
            return default[0]
        raise
    return True if callee is hasattr else value


def call_builtin(ctx, callee, args, kwargs):
    """A whitelisted builtin (``whitelist.BUILTINS``): answered from what the trace
    knows where Python would look at an outside value, else run on guarded arguments."""
    if callee not in _READS_NO_ITEMS and any(map(observe.is_graph_ragged, args)):
        # ``list(rt)``, ``sum(rt)``: Python would index the rows until an IndexError
        # the graph never raises.
        args = tuple(observe.ragged_rows(a, 'iterating') if observe.is_graph_ragged(a) else a
                     for a in args)
    if callee in callees.PASSING_ON and not kwargs and any(isinstance(a, StandIn) for a in args):
        # ``zip(self.heads, MASKS)``: a 2-d array hands on its rows, views a[i].
        args = tuple(_iterated(a, '%s() of' % callee.__name__) for a in args)
    values = list(args) + list(kwargs.values())
    if any(map(arrays.is_stand_in, values)) or (
            callee not in callees.PASSING_ON + (len, isinstance, issubclass)
            and arrays.holds_stand_in(values)):   # ``sum([a, b])`` would add the arrays
        return _builtin_of_array(callee, args, kwargs)
    if callee is isinstance and len(args) == 2 and not kwargs and isinstance(args[0], StandIn):
        stands_for = args[0].trace_class()   # text formatted after the run: a str
        if stands_for is not NOT_MODELLED:
            return issubclass(stands_for, observe.plain_deep(ctx, args[1]))
    if callee is isinstance and len(args) == 2 and not kwargs and isinstance(args[0], tf.Tensor):
        return issubclass(guards.EagerTensor, args[1])   # a graph tensor stands for an eager one
    if callee in (isinstance, issubclass) and len(args) == 2 and not kwargs:
        # Reads only types: guarded by TYPE_MATCH/ID_MATCH where read; the classes of a
        # tuple from outside (``isinstance(v, self.kinds)``) are read by C: guarded here.
        return callee(args[0], observe.plain_deep(ctx, args[1]))
    if callee in (str, repr, format) and args and not kwargs:
        value = observe.plain_deep(ctx, args[0])
        if lazy_text.needs_run_values(value):
            return lazy_text.text_of(callee, value, *args[1:])   # formatted after the run
    observe.refuse_user_dunders(callee, list(args) + list(kwargs.values()))
    if callee is len and len(args) == 1 and not kwargs and _static_length(args[0]) is not None:
        return _static_length(args[0])
    if callee in (len, bool) and len(args) == 1 and not kwargs \
            and ctx.provenance.source_of(args[0]) is not None and pytypes.observes(args[0], 'len'):
        return observe.size_of(callee, args[0])   # one O(1) guard, not one per item
    if callee in _ORDER_FREE and len(args) == 1 and not kwargs and pytypes.is_set(args[0]) \
            and ctx.provenance.source_of(args[0]) is not None:
        items = ctx.set_contents(args[0])   # guarded whole: the result has no order to get wrong
        if callee is sum and not all(type(item) in (int, bool) for item in items):
            raise Unsupported(Reason.SET_ORDER,
                              'janus does not convert sum() of a set of floats from outside '
                              'the call (the result depends on the set\'s order)')
        return callee(items)
    if callee in whitelist.KEYED_BUILTINS and kwargs:
        raise Unsupported(Reason.BUILTIN_ARGUMENTS,
                          'janus does not convert %s() with key=/default=' % callee.__name__)
    if callee in callees.PASSING_ON and not kwargs:
        # The items are handed on as they are (the loop or the unpacking that takes
        # them guards what it reads): the items themselves, not copies.
        return callee(*[items_of(ctx, callee, v) for v in args])
    args, kwargs = library_calls.guard_library_args(ctx, callee, args, kwargs)
    return builtin_on_guarded(callee, args, kwargs)


def builtin_on_guarded(callee, args, kwargs):
    """A builtin on values guarded or made by the call (``int(s)``, ``d.pop(k)``): on
    Python's own values, what its own code raises eager raises there."""
    if pytypes.builtin_values_only(list(args) + list(kwargs.values())
                                   + [getattr(callee, '__self__', None)]):
        return builtin_exactly(callee, args, kwargs)
    return callee(*args, **kwargs)


@control.exceptions.raises_for_user
def builtin_exactly(callee, args, kwargs):
    return callee(*args, **kwargs)


_READS_NO_ITEMS = (isinstance, issubclass, type, id, len, repr, str, format, hash, callable,
                   getattr, hasattr)


def _iterated(value, what):
    """What a builtin that iterates ``value`` gets: a stand-in's items, as a loop over it
    takes them (``trace_iterate``: an array's rows), else ``value`` itself."""
    if isinstance(value, StandIn):
        found = value.trace_iterate(what)
        if found is not NOT_MODELLED:
            return found
    return value


def _static_length(value):
    """``len()`` of a graph tensor whose first dimension the graph knows (an argument's
    is guarded by its shape; TF's shape inference never gets a known one wrong), or None."""
    if isinstance(value, tf.Tensor) and not hasattr(value, 'numpy') \
            and value.shape.rank and value.shape[0] is not None:
        return int(value.shape[0])
    return None


def _builtin_of_array(callee, args, kwargs):
    """A builtin given an outside NumPy array's stand-in: ``isinstance``/``type``
    answered for ``np.ndarray`` (its type is guarded), ``len`` its first dimension;
    anything else would need NumPy's values (refused)."""
    if callee in (isinstance, issubclass) and len(args) == 2 and not kwargs \
            and isinstance(args[0], StandIn) and not arrays.holds_stand_in(args[1]):
        stands_for = args[0].trace_class()   # an array's ``np.ndarray`` (its type is guarded)
        if stands_for is not NOT_MODELLED:
            return issubclass(stands_for, args[1]) if callee is isinstance else callee(*args)
    if callee is len and len(args) == 1 and not kwargs and arrays.is_stand_in(args[0]):
        return arrays.length(args[0])
    arrays.refuse_use('%s() of' % getattr(callee, '__name__', 'a builtin'))


# Builtins whose result from a set does not depend on its order (its items are
# distinct constants: sorting them has no ties).
_ORDER_FREE = (sorted, min, max, any, all, sum)


def items_of(ctx, callee, value):
    """An argument of a builtin in ``callees.PASSING_ON``: an outside container's view
    (``TraceContext.view``; a set refuses), a container of the call's own as it is."""
    source = ctx.provenance.source_of(value)
    model = pytypes.model_of(value)
    if source is not None and type(value) is list and callee in (zip, enumerate):
        return control.outside_iterators.list_items(ctx, value)   # read live, as eagerly
    if source is not None and model is not None and model.container:
        return ctx.view(value)
    if source is not None and callee is not reversed \
            and control.outside_iterators.is_sequence_iterator(value):
        # ``enumerate(self.it)``: pulled item by item, as eagerly (a break stops it).
        return control.outside_iterators.outside_items(ctx, value, source)
    if source is None and not isinstance(value, lazy_text.LazyText):
        ctx.provenance.of(value, 'an argument of %s' % callees.name(callee))
        viewed = ctx.provenance.viewed_container(value)
        if viewed is not None and callee in (zip, enumerate):   # ``enumerate(d.items())``
            return control.outside_iterators.unchanged_while_iterated(ctx, viewed, list(value))
        return value
    return library_calls.guard_library_args(ctx, callee, [value], {})[0][0]
