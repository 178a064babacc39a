"""Methods of builtin containers and strings in converted code.

Needs a ``TraceContext`` (``trace_context``).  A method of the call's own object
runs as Python runs it; one of an outside container reads its guarded contents
(``TraceContext.contents``/``view``) or changes it through the shadow heap,
replayed on the real object after a successful run; one of two containers a
tensor-dependent ``if`` chose (``tracing.Chosen``) is a conditional write on
each.
"""
import collections
import collections.abc

import tensorflow as tf

from janus.reasons import Reason
from janus import guards, pytypes
from janus.trace import builtin_calls, callees, lazy_text, observe
from janus.values import scalars
from janus.heap.shadow_heap import Write, WriteKind
from janus.trace.trace_context import Unsupported
from janus.trace.tracing import need, refuse_unmerged, writable_context as _writable_context


# Methods that read every item of their arguments (not keep the argument itself).
_CONTENT_READING_METHODS = frozenset((
    'extend', 'extendleft', 'update', 'difference_update', 'join', 'format', 'format_map',
    'union', 'intersection', 'difference', 'symmetric_difference', 'issubset', 'issuperset',
    'isdisjoint', 'startswith', 'endswith'))


_DICT_VIEWS = frozenset(('keys', 'values', 'items'))


# Read-only container methods that give items out without looking inside them.
_HANDING_OUT = frozenset(('get', 'items', 'keys', 'values', 'copy', '__getitem__'))


def call_builtin_method(ctx, callee, args, kwargs):
    """A method of a builtin type (``whitelist.is_builtin_method``): on the call's own
    object, Python's; on an outside container, a read of its guarded contents or a
    change replayed on it after the run (``_outside_method``)."""
    owner = callee.__self__
    source = ctx.provenance.source_of(owner)
    if isinstance(owner, (str, bytes)) and any(lazy_text.needs_run_values(v)
                                               for v in list(args) + list(kwargs.values())):
        if callees.is_str_format(callee) \
                and not lazy_text.holds_tensor(list(args) + list(kwargs.values())):
            # Numbers from outside, tried out on extreme values (lazy_text.checked_text);
            # a tensor's value could make the format raise after the run: refused.
            plain = (ctx.provenance.made([observe.plain_deep(ctx, v) for v in args]),
                     ctx.provenance.made({k: observe.plain_deep(ctx, v)
                                          for k, v in kwargs.items()}))
            return lazy_text.checked_text(lazy_text.LazyText([(plain, 'format', owner)]))
        raise Unsupported(Reason.FORMATTING,
                          'janus does not convert str.%s() of a graph value; use an f-string'
                          % callee.__name__)
    if callee.__name__ in ('extend', 'update') and len(args) == 1 and not kwargs \
            and isinstance(args[0], (list, tuple, dict)):
        # ``parts.extend(self.parts)``: the items themselves, each read guarded.
        args = [ctx.view(args[0]) if ctx.provenance.source_of(args[0]) is not None
                else builtin_calls.items_of(ctx, callee, args[0])]
    elif callee.__name__ in _CONTENT_READING_METHODS:
        # ``'/'.join(self.names)``: the method reads the outside argument's items,
        # so it gets the guarded contents.
        args = [observe.plain_deep(ctx, v) for v in args]
    if source is None:
        ctx.provenance.of(owner, '%s.%s()' % (type(owner).__name__, callee.__name__))
        return builtin_calls.builtin_on_guarded(callee, args, kwargs)   # the call's own container
    return _outside_method(ctx, owner, source, callee.__name__, args, kwargs)


def _outside_method(ctx, owner, source, name, args, kwargs):
    """``owner.name(*args, **kwargs)`` of a container from outside the call (its
    ``pytypes`` model says which methods read it and which change it)."""
    model = pytypes.model_of(owner)
    if name in model.reads:
        # On the contents as this point of the call sees them (an item written earlier
        # in the call included), tensors re-read every run; a set's guarded whole;
        # methods that hand items out (``d.values()``, ``d.get(k)``) give the items
        # themselves.
        if model.kind is pytypes.Kind.SET:
            contents = ctx.set_contents(owner)
        elif name in _HANDING_OUT:
            contents = ctx.view(owner)
        else:
            contents = ctx.contents(owner)
        result = getattr(contents, name)(*args, **kwargs)
        if name in _DICT_VIEWS and model.kind is pytypes.Kind.DICT:
            ctx.provenance.note_view(result, owner)   # a loop over it must see the dict unchanged
        return result
    if name == 'update' and kwargs and model.kind is pytypes.Kind.DICT and len(args) <= 1:
        # d.update(b=t): one mapping, same order
        args, kwargs = [ctx.provenance.made(dict(*args, **kwargs))], {}
    if name not in model.changes or kwargs:
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          'janus does not convert %s.%s() on a %s from outside the call'
                          % (type(owner).__name__, name, type(owner).__name__))
    args = _replayable(model, name, args)
    # Replayed on the real object after a successful run (these methods return None,
    # so nothing in the trace depends on the object's new state).
    ctx = _writable_context('a %s (%s)' % (type(owner).__name__, name))
    _try_replay(model, owner, name, args)
    ctx.heap.change(owner, name, args)
    made = ctx.provenance.made(list(args))
    ctx.heap.writes.append(Write(WriteKind.CALL, source, name, made, None))
    return None


def call_chosen_method(ctx, method, args, kwargs):
    """``bucket.append(x)`` on one of two outside containers a tensor-dependent ``if``
    chose (``tracing.Chosen``): on each candidate, the write under its side's
    condition.  What each then holds depends on the run: reading it again in the
    call is refused (appending more is fine)."""
    chosen = method.chosen
    refuse_unmerged(*args, *kwargs.values())
    if method.name == 'update' and len(args) <= 1:
        # d.update(b=t): one mapping, same order
        args, kwargs = [ctx.provenance.made(dict(*args, **kwargs))], {}
    if kwargs or tf.compat.v1.get_default_graph() is not chosen.graph:
        chosen.refuse()
    if method.name in _CONTENT_READING_METHODS:
        args = [observe.plain_deep(ctx, v) for v in args]
    if scalars.lineage_deep(list(args)):
        need(scalars.lineage_deep(list(args)), 'storing a number into one of two '
                     'containers chosen by a tensor-dependent if', Reason.CHOSEN_CONTAINER)
    ctx = _writable_context('a %s (%s)' % (type(chosen.candidates[0][0]).__name__, method.name))
    for owner, condition in chosen.candidates:
        ctx.heap.change(owner, method.name, args)
        ctx.heap.poison(id(owner), Reason.CHOSEN_CONTAINER,
                        '%s: %r is changed in place (%s) through a name a '
                        'tensor-dependent if chose, so what it holds depends on the run; janus '
                        'does not read it again in the same call (appending more is fine)'
                        % (chosen.where, ctx.provenance.source_of(owner), method.name))
        ctx.heap.writes.append(Write(WriteKind.CALL, ctx.provenance.source_of(owner), method.name,
                                     ctx.provenance.made(list(args)), None, condition))
    return None


def _replayable(model, name, args):
    """The arguments of a change to an outside set or deque, as the write-back will
    pass them: it must do there what it did in the trace.  A set gets constants (a
    tensor is unhashable eagerly; a NaN made per call is a new item every call);
    iterables are data (lists, tuples, dicts, strings, a set of at most one item:
    the order a set's items are added in shapes its order), not iterators the
    trace used up."""
    if model.kind not in (pytypes.Kind.SET, pytypes.Kind.DEQUE):
        return args
    if name in ('add', 'discard', 'append', 'appendleft'):
        items = list(args)
    else:
        if not all(type(arg) in (list, tuple, dict, str, collections.deque)
                   or type(arg) in (set, frozenset) and len(arg) <= 1 for arg in args):
            raise Unsupported(Reason.OUTSIDE_VALUE,
                              'janus converts %s.%s() of lists, tuples, dicts, strings and '
                              'one-item sets only' % (model.base.__name__, name))
        args = [tuple(arg) if type(arg) in (set, frozenset) else arg for arg in args]
        items = [item for arg in args for item in arg]
    if model.kind is pytypes.Kind.SET and not all(pytypes.is_constant(item) and item == item
                                                  for item in items):
        raise Unsupported(Reason.OUTSIDE_VALUE,
                          'janus converts adding Python constants (not NaN) to a set from '
                          'outside the call only')
    return args


def _try_replay(model, owner, method, args):
    """Runs ``method`` with ``args`` on an empty list or dict: what Python raises for
    these arguments (``extend(3)``, ``insert('a', x)``, ``update([1])``) is raised
    at trace time, so the call runs imperatively and raises at that line, never at
    write-back after the graph changed state.  The item ``append``/``insert`` store
    is not looked at; a graph tensor is not iterated in the trace (that would add
    ops): ``extend`` needs it to have a first dimension."""
    if method == 'append':
        return
    if method == 'insert':
        args = list(args[:1]) + [None] * (len(args) - 1)
    elif len(args) == 1 and isinstance(args[0], tf.Tensor) \
            and not isinstance(args[0], guards.EagerTensor):
        if method != 'extend' or not args[0].shape.rank:
            raise Unsupported(Reason.UNKNOWN_SHAPE,
                              'janus does not convert %s.%s() of a graph tensor of %s'
                              % (type(owner).__name__, method, 'unknown rank or a scalar'
                                 if method == 'extend' else 'any shape'))
        return
    if any(isinstance(a, collections.abc.Iterator) for a in args):
        return   # running it would consume what the write-back replays
    scratch = {pytypes.Kind.DICT: dict, pytypes.Kind.SET: set,
               pytypes.Kind.DEQUE: collections.deque}.get(model.kind, list)()
    try:
        getattr(scratch, method)(*args)
    except Unsupported:
        raise
    except Exception as e:  # noqa: BLE001 - Python rejects these arguments
        raise Unsupported(Reason.PYTHON_RAISES,
                          'janus does not convert %s.%s() with these arguments: Python raises '
                          '%s (%s)' % (type(owner).__name__, method, type(e).__name__, e)) from None
