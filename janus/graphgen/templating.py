"""Output templates: how a run's outputs rebuild the call's Python values.

Needs a trace whose converted function has returned, before its graph closes
(``tracer.py``'s body calls ``templates_of``).  Each value the call returns or
writes to the heap gets a template (``replay/templates.py``) that a replay
rebuilds from the graph's outputs: a tensor the call computed becomes a graph
output (added to ``outputs`` here), a number or object from outside comes back
as itself, re-read from its source, and a container the call made is rebuilt
once per run however often it is returned or written.  What a run cannot give
back as eager would (a variable made in the call, an object of a kind janus
does not rebuild, a shape known only at run time) is refused.
"""
import numpy as np
import tensorflow as tf

from janus import errors, guards
from janus.reasons import Reason
from janus.replay import templates
from janus.trace import tracing
from janus.values import protocol


def templates_of(result, writes, ctx):
    """(the graph's outputs, the template of ``result``, (write, template) per
    shadow-heap write in ``writes``): one memo for all, so an object both returned
    and written is one object after the run, as eagerly."""
    outputs, memo = [], {}
    template = _template(result, outputs, ctx, memo)
    return outputs, template, _write_templates(writes, outputs, ctx, memo)


def _template(value, outputs, ctx, memo):
    """How to rebuild ``value`` from the graph's outputs after a run.

    Outside objects (those with a source) come back as themselves, re-read
    from their source; containers the call made are rebuilt once per run,
    however often they are returned or written (``t.a = lst; t.b = lst``), and
    a tensor the call computed is one graph output (``self.last_y = y; return y``
    gives one eager tensor).
    """
    if isinstance(value, tf.Tensor):
        return _tensor_template(value, outputs, ctx, memo)
    if type(value) in guards.PRIMITIVES or isinstance(value, tf.DType):
        return templates.Const(value)
    if isinstance(value, protocol.StandIn):
        return _stand_in_template(value, outputs, ctx, memo)
    source = ctx.provenance.source_of(value)
    if source is not None:
        return templates.FromSource(source)
    if isinstance(value, tf.Variable):
        raise errors.Unsupported(Reason.RETURN_VALUE,
                                 'janus cannot return a tf.Variable made inside the call')
    if isinstance(value, (tf.SparseTensor, tf.RaggedTensor)):   # one object per run
        return _composite_template(value, outputs, ctx, memo)
    if isinstance(value, (np.number, np.bool_)):   # np.sqrt(self.d): immutable, by value
        source = ctx.provenance.numpy_scalar_source(value)   # an argument: the caller's very object
        return templates.FromSource(source) if source is not None else templates.Const(value)
    if _is_own_array(value, ctx):   # np.zeros(3) of constants: a new array every run
        if id(value) not in memo:
            memo[id(value)] = templates.Shared(templates.Copied(value))
        return memo[id(value)]
    if isinstance(value, tf.TensorShape):
        return _shape_template(value)
    if ctx.tracked_copies.get(id(value)) is value:
        return _keras_kept_template(value, outputs, ctx, memo)
    if type(value) in (list, dict) or isinstance(value, tuple):
        return _shared_container_template(value, outputs, ctx, memo)
    raise errors.Unsupported(Reason.RETURN_VALUE,
                             'janus cannot return a %s created inside the call from a graph'
                             % type(value).__name__)


def _tensor_template(value, outputs, ctx, memo):
    """A graph tensor: the very eager tensor it stands for when passed through, else
    one graph output however often it is returned and stored (one eager tensor)."""
    source = ctx.tensors.source(value)
    if source is not None:
        return templates.FromSource(source)   # passed through: eager returns that very tensor
    if id(value) not in memo:   # returned and stored: one eager tensor, as eagerly
        outputs.append(value)
        memo[id(value)] = _chosen_tensor(value, templates.Out(len(outputs) - 1), outputs, ctx,
                                         memo)
    return memo[id(value)]


def _composite_template(value, outputs, ctx, memo):
    """A SparseTensor or RaggedTensor the call made: one object per run, rebuilt from
    its components."""
    if id(value) not in memo:
        components = [_template(c, outputs, ctx, memo)
                      for c in tf.nest.flatten(value, expand_composites=True)]
        memo[id(value)] = templates.Shared(templates.Composite(
            tf.type_spec_from_value(value), components))
    return memo[id(value)]


def _shape_template(value):
    """A ``TensorShape``: a constant when fully known, else refused (only the run knows it)."""
    if not value.is_fully_defined():
        raise errors.Unsupported(Reason.UNKNOWN_SHAPE,
                                 'janus cannot return or print a shape that is only '
                                 'known at run time (%s)' % value)
    return templates.Const(tf.TensorShape(value.as_list()))


def _shared_container_template(value, outputs, ctx, memo):
    """A list, dict or tuple the call made: one object per run however often it is
    returned or written (a tuple a tensor-dependent ``if`` merged: ``_chosen_tuple``)."""
    if type(value) in (list, dict) and not ctx.provenance.is_snapshot(value):
        ctx.provenance.of(value, 'a returned or stored %s' % type(value).__name__)
    if id(value) in memo:
        return memo[id(value)]
    shared = memo[id(value)] = templates.Shared(None)
    shared.template = _container_template(value, outputs, ctx, memo)
    memo[id(value)] = _chosen_tuple(value, shared, outputs, ctx, memo)
    return memo[id(value)]


def _stand_in_template(value, outputs, ctx, memo):
    """What the stand-in says a run gives back for it (``StandIn.materialize``), or its
    refusal.  The trace has ended: its context is entered again, so that a refusal on
    relaxed numbers notes them on it (``tracing.need``) and the next trace fixes their
    values."""
    tracing.enter_trace(ctx)
    try:
        described = value.materialize()
    finally:
        tracing.exit_trace()
    if type(described) not in _DESCRIBED:
        raise errors.InvariantError('internal: %s gave no description of what a run gives '
                                    'back for it (%r)' % (type(value).__name__, described))
    return _DESCRIBED[type(described)](value, described, outputs, ctx, memo)


def _outside_template(value, described, outputs, ctx, memo):
    """An outside object (an argument's NumPy array) comes back as that very object,
    re-read from its source."""
    source = ctx.provenance.source_of(value)
    if source is None:
        raise errors.InvariantError('internal: a stand-in for an outside object without a '
                                    'source')
    return templates.FromSource(source)


def _view_template(value, described, outputs, ctx, memo):
    """A view made by basic indexing comes back as the same index of what its base
    gives back, one view per run however often it is returned or stored (``v =
    obs[None]; self.v = v; return v``)."""
    if id(value) not in memo:
        memo[id(value)] = templates.Shared(templates.Indexed(
            _template(described.base, outputs, ctx, memo), described.key))
    return memo[id(value)]


def _graph_number_template(value, described, outputs, ctx, memo):
    """A number the run computes: its tensor is a graph output; one number per run
    however often it is returned or stored (``m = n * 1000; return m, m``: ``m is m``)."""
    if id(value) not in memo:
        outputs.append(described.tensor)
        memo[id(value)] = templates.Shared(templates.Scalar(len(outputs) - 1, described.kind))
    return memo[id(value)]


def _formatted_template(value, described, outputs, ctx, memo):
    """Text formatted after the run from the run's values of its parts; one str per run
    however often it is returned or stored."""
    if id(value) not in memo:
        memo[id(value)] = templates.Shared(templates.Text(
            described.text, [_template(v, outputs, ctx, memo) for v in described.values]))
    return memo[id(value)]


# Each description a stand-in gives (``values/protocol.py``) and its template.
_DESCRIBED = {protocol.Outside: _outside_template, protocol.ViewOf: _view_template,
              protocol.GraphNumber: _graph_number_template,
              protocol.Formatted: _formatted_template}
assert set(_DESCRIBED) == set(protocol.DESCRIPTIONS)


def _is_own_array(value, ctx):
    """A NumPy array of numbers the call made at trace time that is no view of another
    (a view would share memory with it, which copies per run cannot keep)."""
    if type(value) is not np.ndarray or value.base is not None or value.dtype.kind not in 'biufc':
        return False
    ctx.provenance.of(value, 'a returned or stored NumPy array')
    return True


def _chosen_tensor(value, out, outputs, ctx, memo):
    """A tensor a tensor-dependent ``if`` chose between an input and another tensor
    (``keep = x`` on one side): the run's side, so an input comes back as that very
    eager tensor; else ``out``, the graph's output for it."""
    sides = ctx.tensors.merged_sides(value)
    if sides is None or sides[0].graph is not ctx.top_graph:
        return out
    pred, true_value, false_value = sides
    choices = [_template(side, outputs, ctx, memo) if side.graph is ctx.top_graph else out
               for side in (true_value, false_value)]
    if all(choice is out for choice in choices):
        return out
    return templates.Choice(_template(pred, outputs, ctx, memo), *choices)


def _chosen_tuple(value, own, outputs, ctx, memo):
    """A tuple a tensor-dependent ``if`` merged (``t = u`` on one side, ``u`` made
    before it): the run's side where that side is an object from before the ``if``, so
    ``t is u`` holds after the run as eagerly (a graph-break segment returning both);
    else ``own``, the merged tuple rebuilt."""
    sides = ctx.tensors.merged_tuple_sides(value)
    if sides is None or sides[0].graph is not ctx.top_graph:
        return own
    pred, true_value, false_value = sides
    choices = [_template(side, outputs, ctx, memo) if _made_outside_branches(side, ctx)
               else own for side in (true_value, false_value)]
    if all(choice is own for choice in choices):
        return own
    return templates.Choice(_template(pred, outputs, ctx, memo), *choices)


def _made_outside_branches(value, ctx, depth=0):
    """Whether every tensor in ``value`` (tuples, lists, dicts walked) is of the top
    graph, not of a tf.cond branch: an object the graph can give back."""
    if isinstance(value, tf.Tensor):
        return value.graph is ctx.top_graph
    tensor = protocol.graph_tensor(value)   # a number the run computes: where its tensor is
    if tensor is not None:
        return tensor.graph is ctx.top_graph
    if type(value) in (list, tuple, dict) or isinstance(value, tuple):
        if depth > 8:
            return False
        items = value.values() if type(value) is dict else value
        return all(_made_outside_branches(item, ctx, depth + 1) for item in items)
    return True


def _keras_kept_template(value, outputs, ctx, memo):
    """A ``TrackedList``/``TrackedDict`` Keras keeps for an attribute the call wrote
    (``access._as_keras_keeps``), in that write: rebuilt as a plain list or dict, which
    Keras's ``__setattr__`` wraps again when the write replays (eager's kind of
    object).  Returned or stored anywhere else it would not be the layer's own one:
    refused."""
    if id(value) not in ctx.tracked_templating:
        raise errors.Unsupported(Reason.CUSTOM_ATTRIBUTE,
                                 'janus does not convert returning (or storing elsewhere) a '
                                 '%s a Keras layer keeps for an attribute set in the call '
                                 '(eagerly it is the layer\'s own)' % type(value).__name__)
    if id(value) not in memo:
        shared = memo[id(value)] = templates.Shared(None)
        shared.template = (('dict', {k: _template(v, outputs, ctx, memo)
                                     for k, v in value.items()})
                           if isinstance(value, dict) else
                           ('list', [_template(v, outputs, ctx, memo) for v in value]))
    return memo[id(value)]


def _kept_within(ctx, value, depth=0):
    """The ids of the Keras-kept containers ``value`` is or holds."""
    if depth > 4 or ctx.tracked_copies.get(id(value)) is not value:
        return set()
    items = value.values() if isinstance(value, dict) else value
    return {id(value)}.union(*[_kept_within(ctx, v, depth + 1) for v in items])


def _write_templates(writes, outputs, ctx, memo):
    """(write, template) per shadow-heap write, in program order; a conditional
    write's template is a ``templates.Conditional`` (each condition tensor output once)."""
    conditions, found = {}, []
    for write in writes:
        ctx.tensors.check_written(write.value, ctx.top_graph)
        ctx.tracked_templating = _kept_within(ctx, write.value)
        try:
            template = _template(write.value, outputs, ctx, memo)
        finally:
            ctx.tracked_templating = frozenset()
        if write.condition is not None:
            key = id(write.condition)
            if key not in conditions:
                conditions[key] = (write.condition, _template(write.condition, outputs, ctx,
                                                              memo))
            template = templates.Conditional(conditions[key][1], template)
        found.append((write, template))
    return found


def _container_template(value, outputs, ctx, memo):
    if type(value) is list:
        return ('list', [_template(v, outputs, ctx, memo) for v in value])
    if type(value) is dict:
        return ('dict', {k: _template(v, outputs, ctx, memo) for k, v in value.items()})
    return (type(value), [_template(v, outputs, ctx, memo) for v in value])
