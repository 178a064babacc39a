"""Control-flow operators converted code calls while it is traced.

Needs a ``TraceContext`` (``trace_context.current()``) carrying a ``Plan``.  Every
test or loop is decided per evaluation: a Python value runs as plain Python
(its inputs are guarded); a tensor (or a dynamic scalar, ``scalars.py``) whose
outcome the plan assumes runs only the assumed path and adds a
``Janus>Assert`` of the assumption; any other tensor builds real ``tf.cond`` /
``tf.while_loop``.  Inside those, every nested decision is dynamic: a branch
traced once runs many times.  A test that depends on a state change made
earlier in the same call (``v.assign_add(1); if v % 10 == 0``) is never
assumed: its assertion could not run before the change.

Writes to Python state inside a ``tf.cond`` branch (``self.best = loss``,
``self.log.append(acc)``, ``print``, globals, cells, items) are recorded in a
shadow-heap region: each carries the condition of its path (the write-back
applies only the taken path's writes, in program order), and a location
written on either side reads, after the ``if``, as the merge of both sides
(``_Merged``).  A ``tf.while_loop`` carries the locations its body rebinds
as loop variables and writes their final values back.
"""
import builtins
import contextlib

import tensorflow as tf

from janus import guards
from janus.config import config
from janus.decisions import DYNAMIC
from janus.errors import ConversionDeferred, ConversionError
from janus.runtime import effects, fallible, scalars
from janus.runtime.shadow_heap import MISSING, Deferred, WriteKind
from janus.runtime.trace_context import (AssumptionKind, Chosen, Unsupported, UnmergedLocal,
                                         current, refuse_unmerged)


class Undefined:
    """The value of a variable that is not bound (yet) where state is captured."""

    def __init__(self, name=None):
        self.name = name

    def __repr__(self):
        return '<undefined>'


UNDEFINED = Undefined()


class TensorList:
    """A Python list that grows inside a tensor-dependent loop, kept as a TensorArray.

    Inside the loop it supports what growing a list needs (``append``,
    ``extend``, ``+=``, ``+``); after it, ``tf.stack``, ``tf.concat``,
    ``tf.add_n`` and the ``tf.reduce_*`` family, which see the same values
    eager code sees.  Anything else (``len``, indexing, iteration) would need
    a Python list whose length is a run-time value: refused, with the line.
    """

    def __init__(self, array, where):
        self.array, self.where = array, where

    def append(self, value):
        self.array = self.array.write(self.array.size(), value)

    def extend(self, values):
        for value in values:
            self.append(value)

    def __iadd__(self, values):
        self.extend(values)
        return self

    def __add__(self, values):
        grown = TensorList(self.array, self.where)
        grown.extend(values)
        return grown

    def stacked(self):
        return self.array.stack()

    def _refuse(self, *args, **kwargs):
        raise Unsupported('%s: a list that grows in a tensor-dependent loop has a run-time '
                          'length; janus supports tf.stack/tf.concat/tf.add_n/tf.reduce_* of '
                          'it, not len(), indexing or iteration' % self.where)

    __len__ = __getitem__ = __iter__ = __bool__ = _refuse


def read(thunk):
    try:
        return thunk()
    except NameError:
        return UNDEFINED


def truth(value):
    """``bool(value)`` as a scalar bool tensor (eager ``bool`` needs one element too)."""
    return tf.reshape(tf.cast(value, tf.bool), [])


def not_(value):
    """``not value`` in a test: a tensor's negation stays a tensor (a dynamic
    scalar's a dynamic bool)."""
    if scalars.is_dynamic(value):
        return scalars.unary('Not', value)
    if isinstance(value, TestValue):
        return TestValue(tf.logical_not(value.tensor), value.where, value.lineage)
    return tf.logical_not(truth(value)) if _is_tensor(value) else not _python_truth(value)


def _python_truth(value):
    """``bool(value)`` of a Python value: guarded when it came from outside."""
    from janus.runtime import observe
    return observe.truth(value)


INTERNAL_FLAGS = ('__janus_break',)   # janus's own flags: Python bools may become tensors


def _tensor_flags(values, names):
    """janus's own break flags, as tensors where a tensor-dependent region needs them."""
    return tuple(tf.constant(v) if isinstance(v, bool) and n.startswith(INTERNAL_FLAGS) else v
                 for v, n in zip(values, names))


def _is_tensor(value):
    return isinstance(value, tf.Tensor)


def _is_test_tensor(value):
    """A test decided by the graph: a tensor, a dynamic scalar (``scalars.py``), or
    the truth of an and/or whose sides differ in kind (``TestValue``)."""
    return isinstance(value, (tf.Tensor, TestValue)) or scalars.is_dynamic(value)


def _condition(value):
    """``bool(value)`` of a tensor or dynamic scalar as a scalar bool tensor."""
    if scalars.is_dynamic(value):
        return scalars.condition(value)
    if isinstance(value, TestValue):
        return value.tensor
    return truth(value)


def _static_truth(value):
    static = tf.get_static_value(value)
    if static is None or getattr(static, 'size', 1) != 1:
        return None
    return bool(static)


def _decide_test(ns, site, value, what, can_build=True):
    """(outcome, assumed): the branch to take for a tensor test, or (DYNAMIC, False).

    A test that depends on a state change made earlier in the same call is never
    assumed: its Janus>Assert would have to run before the change (the deferred-
    update rule, ``graphgen/tracer.py``), so it becomes real control flow.  Nor
    is a test computed from a relaxed number (``self.step % 10 == 0``): the
    number changes every call, so the assumption would break at the first call
    that takes the other path (``graphgen/plan.py``); ``can_build``: the caller
    can build real control flow at all."""
    ctx = current()
    key = (ns.fn.__code__, site)
    outcome = ctx.decide(key)
    condition = _condition(value)
    static = _static_truth(condition)
    if static is not None:
        return static, False
    if outcome is DYNAMIC:
        return DYNAMIC, False
    if _depends_on_state_change(condition) is not None:
        ctx.plan.assumed.pop(key, None)   # not assumed after all (explain)
        return DYNAMIC, False
    if can_build and ctx.plan.prefers_dynamic(key, varies=bool(_lineage(value))):
        return DYNAMIC, False
    condition = condition if outcome else tf.logical_not(condition)
    ctx.assume(key, AssumptionKind.BRANCH, condition, '%s is %s' % (what, outcome))
    return outcome, True


# Janus's own checks are stateful (so nothing prunes them) but change nothing.
_CHECK_OPS = ('Janus>Assert', 'Janus>CheckedIdentity')


def _first_state_change(graph):
    """The id of the first op of ``graph`` that changes state (by its definition,
    ``effects.py``; tf.cond/while/calls by what they run), or None.  Scanned
    incrementally: ops are only ever added."""
    scanned = current().heap.scanned
    entry = scanned.get(id(graph))
    count, first = (entry[1], entry[2]) if entry is not None and entry[0] is graph else (0, None)
    if first is None:
        ops = graph.get_operations()
        memo = {}
        for op in ops[count:]:
            if effects.changes_state(op, memo):
                first = op._id
                break
        scanned[id(graph)] = (graph, len(ops), first)
    return first


def _depends_on_state_change(tensor):
    """The op through which ``tensor`` depends on a state change made earlier in the
    trace (the change itself, or a stateful op created after it: TF's automatic
    control dependencies order every such op after the change, a variable read),
    or None."""
    graph = _graph_of(tensor)
    if graph is None:
        return None
    first = _first_state_change(graph)
    if first is None:
        return None
    seen, stack = set(), [tensor.op]
    while stack:
        op = stack.pop()
        if op in seen or op._id < first:
            continue   # created before the first change: so was everything it reads
        seen.add(op)
        if op._is_stateful and op.type not in _CHECK_OPS:
            return op
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return None


# -- spec-form statements (they keep return/break/continue) -------------------

def test(ns, site, value):
    if not _is_test_tensor(value):
        return _python_truth(value)
    outcome, _ = _decide_test(ns, site, value, 'condition', can_build=False)
    if outcome is DYNAMIC:
        change = _depends_on_state_change(_condition(value))
        if change is not None:   # never assumed: its check would precede the change
            raise Unsupported('a tensor-dependent condition that depends on a state change '
                              'made earlier in the same call (%s), in a statement with '
                              'return/break/continue inside: janus cannot make it a '
                              'tf.cond/tf.while_loop yet' % change.type)
        with _or_assume(ns, site):   # else assumed, as the profile shows it most often
            raise Unsupported('a tensor-dependent condition whose outcome varied between '
                              'calls, in a statement with return/break/continue inside: janus '
                              'cannot make it a tf.cond/tf.while_loop yet')
    return outcome


def unrolled_items(ns, site, iterable, allow_dynamic):
    """The slices of a tensor a loop runs over, when their number is known or assumed."""
    ctx = current()
    if iterable.shape.rank == 0:
        raise TypeError('iteration over a 0-d tensor')
    outcome = ctx.decide((ns.fn.__code__, site)) if site is not None else DYNAMIC
    length = iterable.shape[0] if iterable.shape.rank is not None else None
    if length is not None and length <= config.max_unroll:
        return tf.unstack(iterable, num=length) if length else []
    soft = ctx.soft_conditions is not None   # a distributed step: no unchecked slicing
    if length is None and outcome is not DYNAMIC and outcome <= config.max_unroll and not soft \
            and _depends_on_state_change(iterable) is None:
        # Slices only once the count is known good: a data dependency on the check.
        iterable = ctx.assume((ns.fn.__code__, site), AssumptionKind.TRIP_COUNT,
                              tf.equal(tf.shape(iterable)[0], outcome),
                              'the loop runs %d times' % outcome, gate=iterable)
        return tf.unstack(iterable, num=outcome) if outcome else []
    if allow_dynamic:
        return None
    raise Unsupported('a loop over a tensor whose length varied between calls (or exceeds '
                      'janus.config.max_unroll=%d), with return/break/continue inside: janus '
                      'cannot make it a tf.while_loop yet' % config.max_unroll)


# -- functionalized statements ---------------------------------------------------

def if_stmt(ns, site, test_value, true_fn, false_fn, get_state, set_state, names=()):
    if not _is_test_tensor(test_value):
        return (true_fn if _python_truth(test_value) else false_fn)()
    outcome, _ = _decide_test(ns, site, test_value, 'condition')
    if outcome is not DYNAMIC:
        return (true_fn if outcome else false_fn)()
    flagged_get = lambda: _tensor_flags(get_state(), names)  # noqa: E731
    with _or_assume(ns, site):
        return _dynamic_if(ns, site, test_value, true_fn, false_fn, flagged_get, set_state)


def while_stmt(ns, site, test_fn, body_fn, get_state, set_state, names=()):
    while True:
        value = test_fn()
        if not _is_test_tensor(value):
            if not _python_truth(value):
                return
            body_fn()
            continue
        outcome, _ = _decide_test(ns, site, value, 'loop condition')
        if outcome is DYNAMIC:
            flagged_get = lambda: _tensor_flags(get_state(), names)  # noqa: E731
            with _or_assume(ns, site):
                _dynamic_while(ns, site, test_fn, body_fn, flagged_get, set_state,
                               _lineage(value))
            return _at_least_once(ns, site, _condition(value))
        if not outcome:
            return
        body_fn()


def for_stmt(ns, site, iterable, body_fn, get_state, set_state, names=()):
    from janus.runtime import operators
    if not _is_tensor(iterable):
        for item in operators.iter(ns, None, iterable):
            body_fn(item)
        return
    items = unrolled_items(ns, site, iterable, allow_dynamic=True)
    if items is not None:
        for item in items:
            body_fn(item)
        return
    _dynamic_for(ns, site, iterable, body_fn, lambda: _tensor_flags(get_state(), names),
                 set_state)
    _at_least_once(ns, site, tf.shape(iterable)[0] > 0)


def ifexp(ns, site, test_value, body, orelse):
    if not _is_test_tensor(test_value):
        return body() if _python_truth(test_value) else orelse()
    outcome, _ = _decide_test(ns, site, test_value, 'condition')
    if outcome is not DYNAMIC:
        return body() if outcome else orelse()
    with _or_assume(ns, site):
        return _cond_values(ns, site, _condition(test_value), body, orelse,
                            _lineage(test_value))


def boolop(ns, site, is_and, *thunks):
    return _boolop_from(ns, site, is_and, thunks, 0, thunks[0]())


def _boolop_from(ns, site, is_and, thunks, index, value):
    if index == len(thunks) - 1:
        return value
    go_on = lambda: _boolop_from(ns, site, is_and, thunks, index + 1, thunks[index + 1]())  # noqa: E731
    if not _is_test_tensor(value):
        return go_on() if _python_truth(value) == is_and else value
    outcome, _ = _decide_test(ns, site, value, 'operand %d of %s' % (index, 'and' if is_and else 'or'))
    if outcome is not DYNAMIC:
        return go_on() if outcome == is_and else value
    stop = lambda: value  # noqa: E731
    with _or_assume(ns, site):
        return _cond_values(ns, site, _condition(value), go_on if is_and else stop,
                            stop if is_and else go_on, _lineage(value))


# -- dynamic control flow ----------------------------------------------------------

@contextlib.contextmanager
def _or_assume(ns, site):
    """Real control flow at ``site`` that fails to build, where the site's outcome
    could be assumed instead (``Plan.cannot_build``), ends the trace with
    ``CannotBuild``: the janus function traces again assuming it there."""
    try:
        yield
    except ConversionDeferred:
        raise   # this call only (a Keras optimizer not built yet): the next trace builds it
    except ConversionError as e:
        key = (ns.fn.__code__, site)
        if current().dynamic_depth == 0 and current().plan.cannot_build(
                key, str(e), value_needed=isinstance(e, scalars.NeedsValue)):
            raise CannotBuild(key, e) from e
        raise


class CannotBuild(Unsupported):
    """Real control flow at ``key`` failed to build (``error``); it can be assumed."""

    def __init__(self, key, error):
        self.key, self.error = key, error
        super().__init__('%s: real control flow there failed to build (%s)'
                         % (_where_key(key), error))


def _where_key(key):
    return current().site_text(key)


def _where(ns, site):
    return current().site_text((ns.fn.__code__, site))


class _BranchRaised(Exception):
    def __init__(self, branch, error):
        super().__init__(str(error))
        self.branch, self.error = branch, error


def _kept_running(outputs):
    """``outputs`` of a tf.cond branch or tf.while_loop body being built, after
    making the ops there that may fail but that no output needs run anyway (as
    eagerly; TF would prune them from the branch's function)."""
    fallible.keep_unused(tf.compat.v1.get_default_graph(), tf.nest.flatten(outputs))
    return outputs


def _in_dynamic_region(fn, *args):
    ctx = current()
    ctx.dynamic_depth += 1
    try:
        return fn(*args)
    finally:
        ctx.dynamic_depth -= 1


class TestValue:
    """The value of ``a and b`` / ``x if t else y`` whose two sides differ in kind (a
    dynamic bool on one path, a bool tensor on the other): janus knows only its
    truth (a bool tensor), so it may only decide a test (``if``, ``while``,
    ``not``, ``and``/``or``); any other use is refused."""

    def __init__(self, tensor, where, lineage=frozenset()):
        self.tensor, self.where, self.lineage = tensor, where, frozenset(lineage)

    def _refuse(self, *args, **kwargs):
        _refuse_values('%s: this and/or (or conditional expression) gives values of different '
                       'kinds on different paths; janus converts it only as the test of an '
                       'if/while' % self.where, extra=self.lineage)

    __bool__ = __len__ = __iter__ = __getitem__ = __contains__ = __str__ = __format__ = \
        __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = \
        __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __index__ = __int__ = \
        __float__ = __array__ = _refuse
    __hash__ = None


def _truth_output(value):
    """``bool(value)`` as a scalar bool tensor where that needs no guard and cannot
    raise, else None."""
    if isinstance(value, TestValue):
        return value.tensor
    if scalars.is_dynamic(value):
        return scalars.condition(value)
    if _is_tensor(value):
        return truth(value) if value.shape.num_elements() == 1 else None
    if type(value) in (bool, int, float, type(None)):
        return tf.constant(bool(value))
    return None


class _CannotMerge(Exception):
    pass


def _cannot_merge(t, f):
    raise _CannotMerge()


def _cond_values(ns, site, pred, true_thunk, false_thunk, lineage=frozenset()):
    """tf.cond of two expressions; both must give tensors, or numbers (a dynamic
    scalar): a Python value cannot depend on a tensor.  Values of different kinds
    whose truth is known (``self.step > 3 and loss < 1.0``) give a ``TestValue``."""
    ctx = current()
    variables, seen, truths = {}, {}, {}
    where = _where(ns, site)
    assumptions = len(ctx.assumptions)

    def wrap(thunk, branch, truth_only=False):
        def run():
            value = _in_dynamic_region(thunk)
            variables[branch] = _variables_read()
            truths[branch] = _truth_output(value)
            if not (_is_tensor(value) or _number_type(value) is not None
                    or truths[branch] is not None):
                raise Unsupported('%s: in a tensor-dependent conditional, the %s branch gives a '
                                  '%s, not a tensor' % (where, 'true' if branch else 'false',
                                                        type(value).__name__))
            seen[branch] = value
            truth_out = truths[branch] if truths[branch] is not None else tf.constant(False)
            return _kept_running(((tf.constant(0) if truth_only else _as_output(value)),
                                  truth_out))
        return run

    def mergeable():
        try:
            _merge_values(seen[True], seen[False], None, _cannot_merge, lineage)
            return True
        except _CannotMerge:
            return False
    try:
        result, truth_result = tf.cond(pred, wrap(true_thunk, True), wrap(false_thunk, False))
    except (ValueError, TypeError):
        if len(seen) == 2 and not mergeable():
            if truths[True] is not None and truths[False] is not None:
                # The values cannot meet in one output (a dtype clash): only the truths.
                del ctx.assumptions[assumptions:]
                _, truth_result = tf.cond(pred, wrap(true_thunk, True, True),
                                          wrap(false_thunk, False, True))
                _check_one_sided_variables(ns, site, variables)
                return TestValue(truth_result, where, lineage)
            _merge_values(seen[True], seen[False], None, _refusal(where, 'the value', lineage),
                          lineage)
        raise
    _check_one_sided_variables(ns, site, variables)
    if not mergeable() and truths[True] is not None and truths[False] is not None:
        return TestValue(truth_result, where, lineage)
    return _noted(pred, seen[True], seen[False], _merge_values(
        seen[True], seen[False], result, _refusal(where, 'the value', lineage), lineage))


def _check_one_sided_variables(ns, site, variables):
    """Eagerly, a variable used only by the branch not taken gets a None gradient
    (optimizers skip it); through tf.cond it gets zeros (momentum, Adam and weight
    decay still move it).  Under a GradientTape that is not the same program."""
    values = list(variables.values())
    if _taping() and len(values) == 2 and values[0] != values[1]:
        raise Unsupported('%s: under a GradientTape, the two sides of a tensor-dependent '
                          'conditional read different variables; their gradients would be '
                          'zeros, not None' % _where(ns, site))


def _taping():
    """Whether a GradientTape may be recording what is traced now."""
    from tensorflow.python.eager import record
    return record.could_possibly_record()


def _variables_read():
    """Outer resources (variables) the graph being traced reads."""
    graph = tf.compat.v1.get_default_graph()
    inner_to_outer = {id(inner): outer for outer, inner in getattr(graph, 'captures', ())}
    read = set()
    for op in graph.get_operations():
        if op.type == 'ReadVariableOp' and op.inputs:
            outer = inner_to_outer.get(id(op.inputs[0]))
            read.add(id(outer) if outer is not None else id(op.inputs[0]))
    return read


# -- values across the two sides of a tf.cond ----------------------------------------

def _number_type(value):
    """``int``/``float``/``bool`` for a Python number or a dynamic scalar, else None."""
    if scalars.is_dynamic(value):
        return value.type
    kind = type(value)
    return kind if kind in (int, float, bool) else None


def _liftable(value):
    """A Python number that can become a (constant) dynamic scalar."""
    kind = type(value)
    return kind is bool or (kind in (int, float) and scalars.in_range(value))


def _as_output(value):
    """What a branch returns for a local: a tensor, a number as a scalar tensor (so
    two different numbers can merge into a dynamic scalar), else a placeholder
    (a Python value is merged by identity, not through the graph)."""
    if _is_tensor(value):
        return value
    if scalars.is_dynamic(value):
        return value.tensor
    if _liftable(value):
        return scalars.lift(value).tensor
    return tf.constant(0)


def _lineage(value):
    """The relaxed numbers a value (a dynamic scalar, a test's truth) was computed from."""
    if isinstance(value, TestValue):
        return value.lineage
    return scalars.lineage_of(value)


def _refuse_values(message, *values, extra=frozenset()):
    """Refuses what ``values`` would need; when a dynamic scalar is among them (or
    decided the test, ``extra``), the trace is redone with the numbers it came from
    constant (``scalars.NeedsValue``) rather than given up: a test on constants is
    plain Python, with nothing to merge."""
    lineage = scalars.lineage_of(*values) | frozenset(extra)
    if lineage:
        current().needs_value |= lineage
        raise scalars.NeedsValue(lineage, message)
    raise Unsupported(message)


def _refusal(where, name, lineage=frozenset()):
    def refuse(t, f):
        _refuse_values('%s: after a tensor-dependent if, %s would be %s in one branch and %s '
                       'in the other; janus keeps Python values Python'
                       % (where, name, _kind(t), _kind(f)), t, f, extra=lineage)
    return refuse


def _merge_values(t, f, output, refuse, lineage=frozenset()):
    """The value after a tf.cond whose sides gave ``t`` and ``f``; ``output``: the
    cond's output for them (None: only check that they can merge); ``lineage``:
    the relaxed numbers the test was computed from (a merged number depends on
    them too: pinned, the test is plain Python)."""
    if _is_tensor(t) and _is_tensor(f):
        return output if output is not None else t
    kind = _number_type(t)
    if kind is not None and kind is _number_type(f) and (
            scalars.is_dynamic(t) or _liftable(t)) and (scalars.is_dynamic(f) or _liftable(f)):
        if not scalars.is_dynamic(t) and not scalars.is_dynamic(f) and _same_python(t, f):
            return t
        if output is None:
            return t
        return scalars.DynamicScalar(scalars.as_scalar(output), kind,
                                     scalars.lineage_of(t, f) | lineage)
    if not (_is_tensor(t) or _is_tensor(f) or scalars.is_dynamic(t) or scalars.is_dynamic(f)):
        if _same_python(t, f):
            return t
    refuse(t, f)


def _outputs_apart(seen):
    """Positions of locals whose two sides' outputs (``_as_output``) differ in kind or
    dtype: such a local cannot be one value after the if (it becomes an
    UnmergedLocal), so neither side gives it out."""
    def spec(value):
        if _is_tensor(value):
            return ('tensor', value.dtype)
        if scalars.is_dynamic(value) or _liftable(value):
            return ('number', _number_type(value))
        return ('python', None)
    return {i for i, (t, f) in enumerate(zip(seen[True], seen[False])) if spec(t) != spec(f)}


def _merge(ns, site, seen, outputs, pred, lineage=frozenset()):
    where = _where(ns, site)
    merged = []
    for i, (t, f) in enumerate(zip(seen[True], seen[False])):
        try:
            merged.append(_noted(pred, t, f, _merge_values(
                t, f, outputs[i] if outputs is not None else None, _cannot_merge, lineage)))
        except _CannotMerge:   # refused where it is used, if it is (UnmergedLocal)
            chosen = _chosen(pred, t, f, where)
            merged.append(chosen if chosen is not None else UnmergedLocal(
                where, '%s where the test is true and %s where it is false'
                % (_kind(t), _kind(f)), lineage))
    return tuple(merged)


def _noted(pred, t, f, value):
    """``value``, the merge of two tensors ``t`` and ``f`` by ``pred``: recorded, so
    ``is`` and returns know it is one of them (``TraceContext.note_merged``)."""
    if _is_tensor(value) and _is_tensor(t) and _is_tensor(f) and t is not f:
        current().note_merged(value, pred, t, f)
    return value


def _chosen(pred, t, f, where):
    """Two distinct outside lists or dicts on the two sides of a tf.cond: a ``Chosen``
    (changed in place, each candidate gets a conditional write); else None."""
    ctx = current()
    if t is f or not all(type(v) in (list, dict) and ctx.source_of(v) is not None
                         for v in (t, f)):
        return None
    return Chosen(where, [(t, pred), (f, tf.logical_not(pred))],
                  tf.compat.v1.get_default_graph())


_COMPARED_BY_VALUE = (int, float, bool, str, bytes, complex, type(None), tf.DType,
                      tf.TensorShape, range)


def _same_python(a, b, depth=0):
    """Whether two Python values are the same value.  Compares only what has no
    code of its own and no identity a program can tell apart (numbers, strings,
    and tuples of them, item by item); anything else only by identity: a user's
    ``__eq__`` would run unconverted, a dynamic scalar's needs its value, and two
    lists or dicts that compare equal are still two objects (``bucket = m.pos``
    on one side, ``m.neg`` on the other: an append after the ``if`` changes the
    one the run chose, so they never merge into one)."""
    if a is b:
        return True
    if type(a) is not type(b) or depth > 8:
        return False
    if type(a) in (float, complex):
        return repr(a) == repr(b)   # -0.0 is not 0.0; a NaN is a NaN
    if type(a) in _COMPARED_BY_VALUE:
        try:
            return bool(a == b)
        except Exception:  # noqa: BLE001 - incomparable values are not the same
            return False
    if isinstance(a, tuple):   # namedtuples too; their items by these rules
        return len(a) == len(b) and all(_same_python(x, y, depth + 1) for x, y in zip(a, b))
    return False


def _kind(value):
    if value is UNDEFINED:
        return 'undefined'
    if _is_tensor(value):
        return 'a %s tensor' % value.dtype.name
    if scalars.is_dynamic(value):
        return 'a %s (a number known when the graph runs)' % value.type.__name__
    if type(value) in (list, tuple, dict):
        return 'a %s of %d items' % (type(value).__name__, len(value))
    if isinstance(value, _Unreadable):
        return 'unknown'
    text = repr(value) if type(value) in _COMPARED_BY_VALUE else '<%s object>' % (
        type(value).__name__)
    return 'the %s %s' % (type(value).__name__, text if len(text) <= 60 else text[:57] + '...')


def _graph_of(tensor):
    try:
        return tensor.graph
    except AttributeError:   # an eager tensor
        return None


def _dummy(spec, where):
    """A stand-in of ``spec``'s dtype on the side of a tf.cond that has no such value."""
    dtype, dims = spec
    if dtype in (tf.resource, tf.variant):
        raise Unsupported('%s: janus cannot carry a %s value out of a tensor-dependent branch'
                          % (where, dtype.name))
    shape = [0 if d is None else d for d in dims] if dims is not None else []
    return tf.zeros(shape, dtype)


class _Exports:
    """The tensors of one branch's graph that its writes (and the locations it
    rebinds) need after the ``if``: returned by the tf.cond, on the other side as
    stand-ins.  ``replace`` gives a written value with them swapped for the cond's
    outputs."""

    def __init__(self, graph, where):
        self.graph, self.where = graph, where
        self.tensors, self._index = [], {}
        self.outputs = None

    def specs(self):
        return [(t.dtype, tuple(t.shape.as_list()) if t.shape.rank is not None else None)
                for t in self.tensors]

    def add(self, value, seen=None, depth=0):
        seen = set() if seen is None else seen
        if isinstance(value, tf.Tensor):
            if _graph_of(value) is self.graph and id(value) not in self._index:
                self._index[id(value)] = len(self.tensors)
                self.tensors.append(value)
            return
        if depth > 16 or id(value) in seen:
            return
        if scalars.is_dynamic(value):
            self.add(value.tensor, seen, depth + 1)
        elif isinstance(value, _Merged):
            seen.add(id(value))
            for part in value.parts():
                self.add(part, seen, depth + 1)
        elif isinstance(value, TensorList):
            raise Unsupported('%s: janus does not convert storing a list grown in a '
                              'tensor-dependent loop from inside a tensor-dependent branch'
                              % self.where)
        elif _is_lazy_text(value):
            seen.add(id(value))
            for part in value.values():
                self.add(part, seen, depth + 1)
        elif isinstance(value, (list, tuple, dict)):
            seen.add(id(value))
            for item in (value.values() if isinstance(value, dict) else value):
                self.add(item, seen, depth + 1)

    def condition(self, side, condition):
        """A write's condition after the cond: ``side`` (this branch's predicate)
        and the condition it had inside the branch."""
        if condition is None:
            return side
        if _graph_of(condition) is self.graph:
            return self.replace(condition)   # a stand-in False on the other path
        return tf.logical_and(side, condition)

    def replace(self, value, memo=None):
        memo = {} if memo is None else memo
        if isinstance(value, tf.Tensor):
            index = self._index.get(id(value)) if _graph_of(value) is self.graph else None
            if index is None:
                return value
            current().note_exported(value, self.outputs[index])
            return self.outputs[index]
        if id(value) in memo:
            return memo[id(value)]
        if scalars.is_dynamic(value):
            tensor = self.replace(value.tensor, memo)
            return value if tensor is value.tensor else scalars.DynamicScalar(
                scalars.as_scalar(tensor), value.type, value.lineage)
        if isinstance(value, _Merged):
            memo[id(value)] = value
            out = memo[id(value)] = value.replaced(lambda v: self.replace(v, memo))
            return out
        if _is_lazy_text(value):
            parts = [part if isinstance(part, str) else (self.replace(part[0], memo),) + tuple(
                part[1:]) for part in value.parts]
            if all(a is b or (not isinstance(a, str) and a[0] is b[0])
                   for a, b in zip(parts, value.parts)):
                return value
            return type(value)(parts)
        if isinstance(value, (list, tuple, dict)):
            memo[id(value)] = value   # a cycle keeps the original
            if isinstance(value, dict):
                items = {k: self.replace(v, memo) for k, v in value.items()}
                same = all(items[k] is v for k, v in value.items())
            else:
                items = [self.replace(v, memo) for v in value]
                same = all(a is b for a, b in zip(items, value))
            if same:
                return value
            if type(value) is dict:
                out = items
            elif type(value) is list:
                out = items
            elif type(value) is tuple:
                out = tuple(items)
            elif isinstance(value, tuple):
                out = type(value)(*items)   # a namedtuple, a printed variable
            else:
                raise Unsupported('%s: janus does not convert writing a %s holding a value '
                                  'computed in a tensor-dependent branch'
                                  % (self.where, type(value).__name__))
            memo[id(value)] = current().made(out)   # rebuilt around the cond's outputs
            return out
        return value


def _is_lazy_text(value):
    from janus.runtime.observe import LazyText
    return isinstance(value, LazyText)


# -- writes to Python state inside a tf.cond branch ------------------------------------

_OLD = object()   # a location a branch did not write: its value from before the `if`


class _Unreadable(Deferred):
    """A location janus cannot read again: reading it refuses, naming the line."""

    def __init__(self, reason):
        self.reason = reason

    def resolve(self):
        raise Unsupported(self.reason)


class _Merged(Deferred):
    """A location written on either side of a tensor-dependent ``if``: on first
    read (per graph) it is the two sides merged by the predicate — tensors of one
    dtype through ``tf.cond`` (shapes merged), numbers into a dynamic scalar, the
    same Python value as itself — or a refusal naming the ``if``.  A side that did
    not write it has the value from before the ``if`` (``previous``, or read
    from outside the call by ``reader`` only now)."""

    def __init__(self, pred, true_value, false_value, previous, reader, where, name,
                 lineage=frozenset()):
        self.pred, self.sides = pred, {True: true_value, False: false_value}
        self.previous, self.reader, self.where, self.name = previous, reader, where, name
        self.lineage = lineage   # the relaxed numbers the test was computed from
        self._resolved = {}   # id(graph) -> (graph, value)

    def parts(self):
        parts = [self.pred] + [v for v in self.sides.values() if v is not _OLD]
        return parts + ([self.previous] if self.previous is not MISSING else [])

    def replaced(self, replace):
        """This merge with its tensors replaced (out of an enclosing branch)."""
        sides = {tag: v if v is _OLD else replace(v) for tag, v in self.sides.items()}
        previous = self.previous if self.previous is MISSING else replace(self.previous)
        return _Merged(replace(self.pred), sides[True], sides[False], previous, self.reader,
                       self.where, self.name, self.lineage)

    def resolve(self):
        graph = tf.compat.v1.get_default_graph()
        found = self._resolved.get(id(graph))
        if found is not None and found[0] is graph:
            return found[1]
        t, f = self._side(True), self._side(False)
        value = _chosen(self.pred, t, f, self.where)
        if value is None:
            value = _noted(self.pred, t, f, _select(self.pred, t, f, self._refuse,
                                                    self.lineage))
        self._resolved[id(graph)] = (graph, value)
        return value

    def _side(self, tag):
        value = self.sides[tag]
        if value is _OLD:
            value = self.previous if self.previous is not MISSING else self.reader()
        return value.resolve() if isinstance(value, Deferred) else value

    def _refuse(self, t, f):
        _refuse_values('%s: after the tensor-dependent if, %s is %s on one path and %s on the '
                       'other; janus does not read it again in the same call (writing it there '
                       'is fine)' % (self.where, self.name, _kind(t), _kind(f)), t, f,
                       extra=self.lineage)


def _select(pred, t, f, refuse, lineage=frozenset()):
    """``t if pred else f`` of two values both sides of a tf.cond can hold."""
    if t is f:
        return t
    if _is_tensor(t) and _is_tensor(f):
        if t.dtype != f.dtype:
            refuse(t, f)
        if t.shape.is_fully_defined() and t.shape == f.shape:
            return tf.where(pred, t, f)
        return tf.cond(pred, lambda: tf.identity(t), lambda: tf.identity(f))
    kind = _number_type(t)
    if kind is not None and kind is _number_type(f) and (
            scalars.is_dynamic(t) or _liftable(t)) and (scalars.is_dynamic(f) or _liftable(f)):
        if not scalars.is_dynamic(t) and not scalars.is_dynamic(f) and _same_python(t, f):
            return t
        tt = t.tensor if scalars.is_dynamic(t) else scalars.lift(t).tensor
        ff = f.tensor if scalars.is_dynamic(f) else scalars.lift(f).tensor
        return scalars.DynamicScalar(tf.where(pred, tt, ff), kind,
                                     scalars.lineage_of(t, f) | lineage)
    if not (_is_tensor(t) or _is_tensor(f) or scalars.is_dynamic(t)
            or scalars.is_dynamic(f)) and _same_python(t, f):
        return t
    refuse(t, f)


def _location(write, key):
    """A written location as people name it (``self.best``, ``best``)."""
    if write.kind is WriteKind.ATTR:
        return '%r.%s' % (write.source, write.name)
    if write.kind is WriteKind.ITEM:
        return '%r[%r]' % (write.source, key[1] if isinstance(key, tuple) else key)
    return write.name


def _outside_reader(obj, key, write, where):
    """How to read a written location's value from before the call (guarded), for
    a side of an ``if`` that did not write it."""
    name = _location(write, key)

    def read():
        ctx = current()
        try:
            if write.kind is WriteKind.ATTR:
                value, source = getattr(obj, key), guards.AttrSource(write.source, key)
            elif write.kind is WriteKind.ITEM:
                value, source = obj[key[1]], guards.ItemSource(write.source, key[1])
            elif write.kind is WriteKind.GLOBAL:
                found = obj.get('__builtins__', builtins)
                value, source = obj[key], guards.GlobalSource(
                    obj, key, found if isinstance(found, dict) else vars(found))
            elif write.source is not None:   # a cell of a function passed in: this call's
                value = obj.cell_contents
                source = guards.AttrSource(write.source, 'cell_contents')
            else:
                value, source = obj.cell_contents, guards.CellSource(obj, key)
        except (AttributeError, KeyError, IndexError, ValueError):
            raise Unsupported('%s: %s is set on one path of the tensor-dependent if only and '
                              'did not exist before it; janus does not read it again in the '
                              'same call' % (where, name)) from None
        return ctx.guard_value(source, value)
    return read


class _BranchEffects:
    """What one traced branch did to Python state: its writes (in program order),
    the locations it rebound, the outside containers it changed in place."""

    def __init__(self, heap, base, region, where):
        self.exports = _Exports(tf.compat.v1.get_default_graph(), where)
        self.writes = heap.writes[len(base.writes):]
        self.keys = {k: record + (heap.overlay.get(k, MISSING),)
                     for k, record in region.keys.items()}
        pending, before = heap.pending, base.pending
        self.changed = {cid for cid in heap.changed if cid not in base.changed
                        or len(dict.get(pending, cid, ())) != len(dict.get(before, cid, ()))}
        self.poisoned = {cid: why for cid, why in pending.poisoned.items()
                         if cid not in before.poisoned}
        self.items_written = heap.items_written - base.items_written
        for write in self.writes:
            self.exports.add(write.value)
            if write.condition is not None:
                self.exports.add(write.condition)
        for _, _, _, condition, value in self.keys.values():
            self.exports.add(value)
            if condition is not None:
                self.exports.add(condition)


def _join(ctx, base, pred, found, where, lineage):
    """The heap after a tf.cond: both branches' writes, each with its path's
    condition (only the taken path's reach Python), and their rebound locations
    as merges, read lazily."""
    heap = ctx.heap
    sides = {True: pred, False: tf.logical_not(pred)}
    for tag in (True, False):
        effects_ = found[tag]
        for write in effects_.writes:
            heap.writes.append(write.changed(
                effects_.exports.replace(write.value),
                effects_.exports.condition(sides[tag], write.condition)))
    keys = list(found[True].keys) + [k for k in found[False].keys if k not in found[True].keys]
    for k in keys:
        records = {tag: found[tag].keys.get(k) for tag in (True, False)}
        obj, key, write = (records[True] or records[False])[:3]
        values = {tag: found[tag].exports.replace(records[tag][4]) if records[tag] else _OLD
                  for tag in (True, False)}
        heap.overlay[k] = _Merged(pred, values[True], values[False],
                                  base.overlay.get(k, MISSING),
                                  _outside_reader(obj, key, write, where), where,
                                  _location(write, key), lineage)
        conditions = [records[tag][3] for tag in (True, False) if records[tag]]
        if len(conditions) == 2 and conditions[0] is None and conditions[1] is None:
            condition = None   # written on both paths
        else:
            parts = [found[tag].exports.condition(sides[tag], records[tag][3])
                     for tag in (True, False) if records[tag]]
            condition = parts[0] if len(parts) == 1 else tf.logical_or(*parts)
        heap.note(obj, key, write, condition)
        if isinstance(key, tuple) and key[0] == 'item':
            heap.items_written.add(k[0])
    for tag in (True, False):
        heap.items_written |= found[tag].items_written
        for cid, why in found[tag].poisoned.items():
            heap.changed.add(cid)
            heap.poison(cid, why)
        for cid in found[tag].changed:
            heap.changed.add(cid)
            source = ctx.source_of(heap.objects.get(cid))
            heap.poison(cid, '%s: %s is changed in place (append/extend/insert/update/a new '
                        'key) inside a tensor-dependent branch, so what it holds after the if '
                        'depends on the run; janus does not read it, or write an index of it, '
                        'again in the same call (appending more is fine)'
                        % (where, repr(source) if source is not None else 'an outside container'))


def _dynamic_if(ns, site, test_value, true_fn, false_fn, get_state, set_state):
    ctx = current()
    heap = ctx.heap
    init = get_state()
    before = [_snapshot(v) for v in init]
    where = _where(ns, site)
    pred = _condition(test_value)
    lineage = _lineage(test_value)
    base = heap.checkpoint()
    hoisted = None
    if _depends_on_state_change(pred) is not None:
        hoisted = _hoist_assertions(ctx, init, set_state, base, [true_fn, false_fn])
    assumptions = len(ctx.assumptions)
    known = {}   # tag -> specs of what that branch exports (from an earlier attempt)
    apart = set()   # positions of locals the two sides give as different kinds of value
    for _ in range(4):
        seen, variables, found, used = {}, {}, {}, {}

        def branch(fn, tag):
            def run():
                set_state(init)
                heap.restore(base)
                region = heap.open_region()
                try:
                    _in_dynamic_region(fn)
                    variables[tag] = _variables_read()
                except ConversionError:   # janus's own (Unsupported, deferred): not the user's
                    raise
                except Exception as e:  # the branch raises: handled below as an assumption
                    raise _BranchRaised(tag, e)
                finally:
                    heap.close_region(region)
                if [_snapshot(v) for v in init] != before:
                    raise Unsupported('%s: a tensor-dependent branch changes a Python list or '
                                      'dict in place; janus keeps Python values Python' % where)
                seen[tag] = get_state()
                found[tag] = _BranchEffects(heap, base, region, where)
                # The other side's exports as stand-ins: known once it was traced (tf.cond
                # traces the true side first), else from an earlier attempt.
                other = found[not tag].exports.specs() if (not tag) in found else known.get(
                    not tag, [])
                used[tag] = other
                mine = tuple(found[tag].exports.tensors)
                stand_ins = tuple(_dummy(spec, where) for spec in other)
                return _kept_running((tuple(tf.constant(0) if i in apart else _as_output(v)
                                            for i, v in enumerate(seen[tag])),
                                      mine if tag else stand_ins, stand_ins if tag else mine))
            return run
        try:
            outputs = tf.cond(pred, branch(true_fn, True), branch(false_fn, False))
        except _BranchRaised as raised:
            # `if t: raise ...`: assume the raising branch is not taken; if it is,
            # the call re-runs imperatively and raises the real exception there.
            set_state(init)
            heap.restore(base)
            del ctx.assumptions[assumptions:]
            other = not raised.branch
            condition = pred if other else tf.logical_not(pred)
            ctx.assume((ns.fn.__code__, site), AssumptionKind.RAISE, condition,
                       'the branch that raises %s is not taken' % type(raised.error).__name__)
            return (true_fn if other else false_fn)()
        except (ValueError, TypeError, AssertionError):
            set_state(init)
            heap.restore(base)
            if len(found) == 2 and any(used[tag] != found[not tag].exports.specs()
                                       for tag in (True, False)):
                known = {tag: found[tag].exports.specs() for tag in (True, False)}
                del ctx.assumptions[assumptions:]
                continue   # trace again, each side knowing what the other exports
            if len(seen) == 2 and _outputs_apart(seen) - apart:
                apart |= _outputs_apart(seen)
                del ctx.assumptions[assumptions:]
                continue   # trace again, those locals not carried out (UnmergedLocal)
            raise
        break
    else:
        raise Unsupported('%s: janus could not match what the two sides of a tensor-dependent '
                          'if write' % where)
    heap.restore(base)
    _check_one_sided_variables(ns, site, variables)
    graphs = [found[True].exports.graph, found[False].exports.graph]
    if hoisted is not None:
        _mark_hoisted(graphs, hoisted)
    else:
        _hoist_beside_changes(ctx, graphs)
    state, true_exports, false_exports = outputs
    found[True].exports.outputs = list(true_exports)
    found[False].exports.outputs = list(false_exports)
    set_state(_merge(ns, site, seen, state, pred, lineage))
    _join(ctx, base, pred, found, where, lineage)


# -- assertions made inside a tf.cond branch --------------------------------------------

_ASSERT_OPS = ('Janus>Assert', 'Janus>CheckedIdentity')
HOISTED = '_janus_hoisted_asserts'   # on a branch graph: names of its asserts checked outside


def _hoist_assertions(ctx, init, set_state, base, branches):
    """Assertions a tf.cond's branches would make, checked before the cond instead.

    The cond's test depends on a state change made earlier in the call, so an
    assertion inside a branch (a dynamic scalar's range check: ``self.logged +=
    1``) would run after that change, and a failure could not leave state
    untouched.  Each branch is traced once in a scratch graph; every assertion it
    makes whose condition can be recomputed here from the branch's inputs is
    added here, unconditionally, before the cond (a check that fails when its
    branch would not have run only sends that call to the imperative re-run).
    Returns how many assertions each branch makes (the real trace's copies are
    then redundant, ``_mark_hoisted``), or None when some cannot be hoisted (the
    tracer then refuses, as before)."""
    from tensorflow.python.framework import func_graph
    heap = ctx.heap
    graphs = []
    for fn in branches:
        with func_graph.FuncGraph('janus_dry_run').as_default() as graph:
            set_state(init)
            heap.restore(base)
            region = heap.open_region()
            try:
                _in_dynamic_region(fn)
            except Exception:  # noqa: BLE001 - the real trace meets it again
                return None
            finally:
                heap.close_region(region)
                heap.restore(base)
                set_state(init)
        graphs.append(graph)
    found = [_branch_asserts(graph) for graph in graphs]
    if any(ops is None for ops in found):
        return None
    conditions = []
    for ops in found:
        for op in ops:
            condition = _rematerialize(op.inputs[0], {})
            if condition is None:
                return None
            conditions.append((op, condition))
    for op, condition in conditions:
        _check_outside(ctx, op, condition)
    return [len(ops) for ops in found]


def _check_outside(ctx, op, condition):
    """The assertion ``op`` of a branch, checked in the graph built now."""
    from janus.runtime import ops as janus_ops
    outer = tf.compat.v1.get_default_graph()
    if ctx.soft_conditions is not None and outer is ctx.top_graph:
        # A distributed step: checked by every rank together (runtime/distributed.py).
        ctx.soft_conditions.append(tf.reshape(tf.cast(condition, tf.bool), []))
        return
    message = op.get_attr('message')
    message = message.decode() if isinstance(message, bytes) else message
    check = janus_ops.janus_assert(condition, op.get_attr('assumption_id'), message)
    if outer is ctx.top_graph:
        ctx.assert_ops.append(check)


def _hoist_beside_changes(ctx, graphs):
    """A tf.cond whose branches both change state (a variable update) and assert (a
    dynamic scalar's range check): every state change waits for every assertion,
    so the cond would wait for itself.  Likewise a cond that only reads a variable
    the call changed before it (``v.assign_add(..)``, then ``print(v)`` on one
    side): TF orders it after that change, which waits for its assertions.  Its
    assertions are checked again before it, unconditionally (their conditions
    recomputed here from the branches' inputs), and the copies inside do not
    count.  Only for a cond that reads a resource (TF then orders it by that
    resource, not after the checks made later in program order)."""
    found = [_branch_asserts(graph) for graph in graphs]
    if any(ops is None for ops in found) or not any(found):
        return
    if not any(effects.changes_state(op) for graph in graphs for op in graph.get_operations()
               if op.type not in _ASSERT_OPS) \
            and _first_state_change(tf.compat.v1.get_default_graph()) is None:
        return
    if not any(t.dtype == tf.resource for graph in graphs for t, _ in graph.captures):
        return
    checks = []
    for ops in found:
        for op in ops:
            condition = _rematerialize(op.inputs[0], {})
            if condition is None:
                return
            checks.append((op, condition))
    for op, condition in checks:
        _check_outside(ctx, op, condition)
    _mark_hoisted(graphs, [len(ops) for ops in found])


def _branch_asserts(graph, depth=0):
    """The Janus>Assert ops a branch graph runs, its nested tf.conds' included, in a
    fixed order; None when one sits where janus cannot recompute its condition (a
    loop body, a function call) or is a CheckedIdentity."""
    found = []
    for op in graph.get_operations():
        if op.type == 'Janus>CheckedIdentity':
            return None
        if op.type == 'Janus>Assert':
            found.append(op)
            continue
        called = effects.called_graphs(op)
        if not called:
            continue
        inner = [_branch_asserts(g, depth + 1) for g in called] if op.type in (
            'If', 'StatelessIf') and depth < 8 else None
        if inner is None or any(ops is None for ops in inner):
            if any(o.type in _ASSERT_OPS for g in called for o in g.get_operations()):
                return None
            continue
        for ops in inner:
            found.extend(ops)
    return found


def _mark_hoisted(graphs, counts):
    """The real branches' assertions are the hoisted checks' copies: the tracer does
    not count them (``HOISTED``).  Only when the real trace made as many as the
    scratch one (the same code traced twice makes the same checks)."""
    found = [_branch_asserts(graph) for graph in graphs]
    if any(ops is None for ops in found) or [len(ops) for ops in found] != counts:
        return
    for ops in found:
        for op in ops:
            names = getattr(op.graph, HOISTED, None)
            if names is None:
                names = set()
                setattr(op.graph, HOISTED, names)
            names.add(op.name)


def _rematerialize(tensor, memo, depth=0):
    """``tensor``, of a branch graph being traced (or nested in one), recomputed in
    the graph being built now from the outer tensors the branch captured; None
    when it needs anything else (a stateful op, a function, a control input)."""
    outer = tf.compat.v1.get_default_graph()
    graph = _graph_of(tensor)
    enclosing = outer
    while enclosing is not None:   # the graph built now and the ones around it
        if graph is enclosing:
            return tensor
        enclosing = getattr(enclosing, 'outer_graph', None)
    if graph is None or not hasattr(graph, 'captures'):
        return None
    if id(tensor) in memo:
        return memo[id(tensor)]
    memo[id(tensor)] = None
    op = tensor.op
    result = None
    if depth > 256:
        pass
    elif op.type == 'Placeholder':
        captured = {id(inner): outer_tensor for outer_tensor, inner in graph.captures}
        if id(tensor) in captured:
            result = _rematerialize(captured[id(tensor)], memo, depth + 1)
    elif not op._is_stateful and not op.control_inputs and not effects.called_graphs(op) \
            and op.type not in effects.CALL_OPS:
        inputs = [_rematerialize(t, memo, depth + 1) for t in op.inputs]
        if all(t is not None for t in inputs):
            attrs = {key: value for key, value in op.node_def.attr.items()}
            copy = outer._create_op_internal(
                op.type, inputs, dtypes=[t.dtype for t in op.outputs], attrs=attrs,
                name='janus_hoisted_' + op.name.split('/')[-1])
            result = copy.outputs[tensor.value_index]
    memo[id(tensor)] = result
    return result


def _at_least_once(ns, site, first_test):
    """Under a GradientTape, a tf.while_loop that reads variables gives them zero
    gradients when it runs no iteration, where eager code gives None: assume it
    runs at least once (the paper's trip-count assumption, its weakest form)."""
    ctx = current()
    if not (_taping() and ctx.last_loop_reads_variables):
        return
    # Not a speculation to relax (the loop is already dynamic): a call with no
    # iteration just runs imperatively, and the graph stays.
    ctx.assume((ns.fn.__code__, site), AssumptionKind.NONEMPTY_LOOP, first_test,
               'the loop runs at least once (eager gradients would be None otherwise)')


# -- tf.while_loop -----------------------------------------------------------------------

class _Widen(Exception):
    """A loop body rebinds more than the loop carries: trace the loop again, carrying
    ``numbers`` (indices of Python-number locals) and ``keys`` (heap locations)."""

    def __init__(self, numbers, keys):
        super().__init__('widen the loop')
        self.numbers, self.keys = set(numbers), dict(keys)


_LOOP_WRITES = (WriteKind.ATTR, WriteKind.ITEM, WriteKind.GLOBAL, WriteKind.CELL)


def _dynamic_while(ns, site, test_fn, body_fn, get_state, set_state, lineage=frozenset()):
    """A tf.while_loop.  Locals the body rebinds are loop variables (tensors, lists of
    them, numbers as dynamic scalars), and so are the outside locations it rebinds
    (``self.total = self.total + x``, a global, a cell, an item): their final values
    are written back after the run, when the loop rebound them at all.  Other
    writes (print, appending to an outside list) stay refused: each iteration's
    would need a record of its own."""
    ctx = current()
    original = tuple(get_state())
    where = _where(ns, site)
    if any(v is UNDEFINED for v in original):
        raise Unsupported('%s: a variable the tensor-dependent loop carries is not defined '
                          'before the loop' % where)
    base = ctx.heap.checkpoint()
    assumptions = len(ctx.assumptions)
    numbers, keys = set(), {}
    for _ in range(8):
        try:
            return _while_loop(ctx, where, test_fn, body_fn, get_state, set_state, original,
                               numbers, keys, lineage)
        except _Widen as widen:
            ctx.heap.restore(base)
            set_state(original)
            del ctx.assumptions[assumptions:]
            if widen.numbers <= numbers and set(widen.keys) <= set(keys):
                raise Unsupported('%s: janus could not settle what the tensor-dependent loop '
                                  'carries' % where) from None
            numbers |= widen.numbers
            keys.update(widen.keys)
    raise Unsupported('%s: janus could not settle what the tensor-dependent loop carries'
                      % where)


def _loop_start(heap, k, obj, key, write, where):
    """A rebound location's value as the loop starts: a tensor or a dynamic scalar."""
    value = heap.read(obj, key)
    if value is MISSING:
        value = _outside_reader(obj, key, write, where)()
    if _is_tensor(value) or scalars.is_dynamic(value):
        return value
    if _liftable(value):
        return scalars.lift(value)
    raise Unsupported('%s: %s is %s before the tensor-dependent loop that rebinds it; janus '
                      'carries only tensors and numbers through such a loop'
                      % (where, _location(write, key), _kind(value)))


def _check_loop_checks(outer, where, reads_variables):
    """A loop body that checks (a Janus>Assert: a dynamic scalar's range, a branch it
    assumes) and reads a variable, after a state change earlier in the call: TF
    orders the loop after the change (it reads the resource), and the deferred-
    update rule orders every change after every check, so the graph would hold a
    cycle.  Refused (the loop's outcome may be assumed instead, ``_or_assume``)."""
    if not reads_variables or _first_state_change(outer) is None:
        return
    if _has_checks(tf.compat.v1.get_default_graph()):
        raise Unsupported('%s: a tensor-dependent loop that reads a variable and makes '
                          'checks, after a state change made earlier in the same call: its '
                          'checks could not precede the change' % where)


def _has_checks(graph, depth=0):
    for op in graph.get_operations():
        if op.type in _CHECK_OPS:
            return True
        if depth < 8 and any(_has_checks(g, depth + 1) for g in effects.called_graphs(op)):
            return True
    return False


def _loop_value(start, value, where, name):
    """What the loop carries for a rebound value that started as ``start``."""
    refuse_unmerged(start, value)
    if _is_tensor(start):
        if not _is_tensor(value) or value.dtype != start.dtype:
            raise Unsupported('%s: %s changes from %s to %s inside the tensor-dependent loop'
                              % (where, name, _kind(start), _kind(value)))
        return value
    kind = start.type
    if scalars.is_dynamic(value) and value.type is kind:
        return value.tensor
    if type(value) is kind and _liftable(value):
        return scalars.lift(value).tensor
    _refuse_values('%s: %s changes from %s to %s inside the tensor-dependent loop'
                   % (where, name, _kind(start), _kind(value)), start, value)


def _check_loop_writes(heap, checkpoint, where):
    """Inside a tf.while_loop body only rebinding a location is converted (carried)."""
    writes = heap.writes[len(checkpoint.writes):]
    if any(write.kind is WriteKind.PRINT for write in writes):
        raise Unsupported('%s: janus does not convert print() inside a tensor-dependent loop '
                          '(each iteration would need a record of its own)' % where)
    changed = [cid for cid in heap.changed if cid not in checkpoint.changed
               or len(dict.get(heap.pending, cid, ())) != len(dict.get(checkpoint.pending,
                                                                        cid, ()))]
    if changed or any(write.kind not in _LOOP_WRITES for write in writes):
        # Relaxed numbers among what is stored: the trace is redone with them constant
        # (the loop may then unroll), as for any use that needs their value.
        _refuse_values('%s: janus does not convert appending to an outside list or dict '
                       '(append/extend/insert/update/a new key) inside a tensor-dependent '
                       'loop (each iteration would need a record of its own); collect the '
                       'values in a local list and extend it after the loop' % where,
                       extra=scalars.lineage_deep([write.value for write in writes]))


def _with_lineage(value, lineage):
    """A dynamic scalar that also depends on ``lineage`` (how often a loop ran)."""
    if not lineage or not scalars.is_dynamic(value) or lineage <= value.lineage:
        return value
    return scalars.DynamicScalar(value.tensor, value.type, value.lineage | lineage)


def _while_loop(ctx, where, test_fn, body_fn, get_state, set_state, original, numbers, keys,
                lineage):
    heap = ctx.heap
    outer = tf.compat.v1.get_default_graph()
    init = list(original)
    _lists_to_tensor_arrays(init, body_fn, get_state, set_state, where, lineage)
    # Lists/tuples of tensors the body rebinds (an LSTM cell's [h, c]) are
    # carried leaf by leaf and rebuilt with the same structure each iteration.
    structures = {i for i, v in enumerate(init) if _is_tensor_structure(v)}
    for i in structures:   # an outside list (self.state): its tensors re-read every run
        init[i] = ctx.contents(init[i])
    # Numbers the body changes: dynamic scalars (a Python number lifted to one).
    dynamic = {i: v if scalars.is_dynamic(v) else scalars.lift(v) for i, v in enumerate(init)
               if scalars.is_dynamic(v) or i in numbers}
    loop_index = [i for i, v in enumerate(init)
                  if _is_tensor(v) or isinstance(v, TensorList) or i in structures
                  or i in dynamic]
    fixed = {i: _snapshot(v) for i, v in enumerate(init) if i not in loop_index}
    carried = [(k,) + keys[k] for k in keys]   # (k, obj, key, write)
    starts = [_loop_start(heap, *record, where) for record in carried]
    start = heap.checkpoint()
    passed = {}
    n_local, n_held = len(loop_index), len(carried)

    def full_state(values):
        state = list(init)
        for i, value in zip(loop_index, values):
            if isinstance(init[i], TensorList):
                value = TensorList(value, where)
            elif i in structures:
                value = ctx.made_result(tf.nest.pack_sequence_as(init[i], list(value)),
                                        deep=True)   # rebuilt around the loop's values
                passed[i] = (value, list(tf.nest.flatten(value)))
            elif i in dynamic:
                value = _with_lineage(scalars.rewrap(dynamic[i], value), lineage)
            state[i] = value
        return tuple(state)

    def loop_values(state):
        values = []
        for i in loop_index:
            value = state[i]
            if isinstance(init[i], TensorList):
                if not isinstance(value, TensorList):
                    raise Unsupported('%s: a list grown in the loop is replaced by a %s'
                                      % (where, type(value).__name__))
                value = value.array
            elif i in structures:
                value = _structure_leaves(init[i], value, passed.get(i), where)
            elif i in dynamic:
                value = _loop_value(dynamic[i], value, where, 'a variable')
            values.append(value)
        return tuple(values)

    def enter(values):
        values = list(values)
        for value in values:
            ctx.note_looped(value)
        local, held = values[:n_local], values[n_local:n_local + n_held]
        set_state(full_state(local))
        heap.restore(start)
        for (k, _, key, _), first, value in zip(carried, starts, held):
            heap.overlay[k] = scalars.rewrap(first, value) if scalars.is_dynamic(first) \
                else value
            if isinstance(key, tuple) and key[0] == 'item':
                heap.items_written.add(k[0])
        return values[n_local + n_held:]

    def cond(*values):
        enter(values)
        return _kept_running(_condition(_in_dynamic_region(test_fn)))

    kept_outside = set()   # locals the body may leave holding an outside tensor

    def body(*values):
        given = values
        flags = enter(values)
        checkpoint = heap.checkpoint()
        region = heap.open_region()
        try:
            _in_dynamic_region(body_fn)
        finally:
            heap.close_region(region)
        ctx.last_loop_reads_variables = bool(_variables_read())
        _check_loop_writes(heap, checkpoint, where)
        _check_loop_checks(outer, where, ctx.last_loop_reads_variables)
        state = get_state()
        widen = set()
        for i, snapshot in fixed.items():
            if _snapshot(state[i]) != snapshot:
                if _liftable(init[i]) and _number_type(state[i]) is type(init[i]):
                    widen.add(i)   # a Python number the loop counts with: carry it
                    continue
                raise Unsupported('%s: a Python value (%s) changes inside a tensor-dependent '
                                  'loop; janus keeps Python values Python'
                                  % (where, _kind(init[i])))
        more = {k: record[:3] for k, record in region.keys.items() if k not in keys}
        if widen or more:
            raise _Widen(widen, more)
        out = list(loop_values(state))
        for (k, obj, key, write), first in zip(carried, starts):
            value = heap.read(obj, key)
            out.append(_loop_value(first, value, where, _location(write, key)))
        kept_outside.update(_check_loop_identity(ctx, out, given, first_values, n_local,
                                                 where))
        for (k, _, _, _), flag in zip(carried, flags):
            record = region.keys.get(k)
            if record is None:
                out.append(flag)
            elif record[3] is None:
                out.append(tf.constant(True))
            else:
                out.append(tf.logical_or(flag, record[3]))
        heap.restore(checkpoint)
        return _kept_running(tuple(out))

    first_values = loop_values(init) + tuple(
        _loop_value(s, s, where, _location(r[3], r[2])) for s, r in zip(starts, carried)) + \
        tuple(tf.constant(False) for _ in carried)
    try:
        final = tf.while_loop(cond, body, first_values)
    except ValueError as e:
        if 'shape' not in str(e):
            raise
        final = tf.while_loop(cond, body, first_values, shape_invariants=tf.nest.map_structure(
            _relaxed_invariant, first_values))
    if not isinstance(final, (list, tuple)):
        final = (final,)
    final = list(final)
    for j, value in enumerate(final):
        ctx.note_looped(value, maybe_outside=j in kept_outside)
    heap.restore(start)
    set_state(full_state(final[:n_local]))
    held, flags = final[n_local:n_local + n_held], final[n_local + n_held:]
    for (k, obj, key, write), first, value, flag in zip(carried, starts, held, flags):
        if scalars.is_dynamic(first):
            value = _with_lineage(scalars.rewrap(first, value), lineage)
        heap.overlay[k] = value
        if isinstance(key, tuple) and key[0] == 'item':
            heap.items_written.add(k[0])
        # Written back only when some iteration rebound it (else it keeps its object).
        heap.writes.append(write.changed(value, flag))
        heap.note(obj, key, write, flag)


def _check_loop_identity(ctx, values, given, first, n_local, where):
    """Which carried variables the body may leave holding an outside tensor (an
    argument, ``self.last``), directly or moved from another variable that started
    as one (``a, b = b, a``): eagerly the variable then *is* that tensor, and ``is``
    after the call finds it, but the loop gives a new tensor.  An outside location
    (``self.a``, written back) is refused here; a local's indices are returned, and
    its result may not be written to outside state (``TraceContext.note_looped``).
    ``given``: the body's loop variables; ``first``: their values as the loop starts."""
    outside = {id(value): k for k, value in enumerate(given)
               if _is_tensor(value) and k < len(first) and _is_tensor(first[k])
               and ctx.holds_input_tensor(first[k])}
    kept = set()
    for j, value in enumerate(values):
        for side in _possible_tensors(ctx, value):
            k = outside.get(id(side))
            if ctx.is_input_tensor(side) or (k is not None and k != j and given[k] is side):
                if j >= n_local:
                    raise Unsupported('%s: janus does not convert keeping a tensor from '
                                      'outside the call (an argument, an attribute) in an '
                                      'outside location a tensor-dependent loop rebinds: the '
                                      'loop would give a copy, not that tensor' % where)
                kept.add(j)
    return kept


def _possible_tensors(ctx, value, depth=0):
    """``value`` and, through tf.cond merges, every tensor it may be when the graph runs."""
    if not _is_tensor(value):
        return
    yield value
    sides = ctx.merged_sides(value)
    if sides is not None and depth < 32:
        for side in sides[1:]:
            yield from _possible_tensors(ctx, side, depth + 1)


def _is_tensor_structure(value):
    if not (type(value) is list or isinstance(value, tuple)) or not value:
        return False
    return all(_is_tensor(leaf) for leaf in tf.nest.flatten(value))


def _structure_leaves(template, value, passed, where):
    """The tensors of a carried list/tuple after one iteration, as a list.

    The body may rebind it to a new one of the same structure; changing the
    one it was given in place is refused, because other names may share that
    Python list in eager code."""
    if type(value) is not type(template) or not _is_tensor_structure(value):
        raise Unsupported('%s: a %s of tensors carried by a tensor-dependent loop becomes %s'
                          % (where, type(template).__name__, _kind(value)))
    try:
        tf.nest.assert_same_structure(template, value)
    except (ValueError, TypeError):
        raise Unsupported('%s: a %s of tensors carried by a tensor-dependent loop changes its '
                          'structure' % (where, type(template).__name__)) from None
    leaves = list(tf.nest.flatten(value))
    if passed is not None and value is passed[0] and any(
            a is not b for a, b in zip(leaves, passed[1])):
        raise Unsupported('%s: a %s of tensors is changed in place inside a tensor-dependent '
                          'loop; janus only carries ones the loop rebinds'
                          % (where, type(template).__name__))
    return leaves


def _relaxed_invariant(value):
    if isinstance(value, tf.TensorArray):
        return tf.TensorShape(None)
    rank = value.shape.rank
    return tf.TensorShape([None] * rank) if rank is not None else tf.TensorShape(None)


def _lists_to_tensor_arrays(init, body_fn, get_state, set_state, where, lineage=frozenset()):
    """Local lists the loop grows become TensorLists (TensorArrays) in ``init``.

    Only the call's own: an outside list (an argument, passed as itself or
    rebuilt, an attribute's list) grown in the loop would grow a copy, its
    appends lost; that is refused, or with the loop's count from relaxed
    numbers, traced again with them constant (the loop unrolls)."""
    lists = [i for i, v in enumerate(init) if type(v) is list]
    if not lists:
        return
    appended = _dry_run_appends(init, lists, body_fn, get_state, set_state)
    for i in lists:
        items, grown = init[i], appended.get(i, [])
        if not grown:
            continue  # unchanged by the loop: stays a Python list (checked after the body)
        if current().source_of(items) is not None:
            _refuse_values('%s: janus does not convert appending to a list from outside the '
                           'call inside a tensor-dependent loop (each iteration would need a '
                           'record of its own); collect the values in a local list and '
                           'extend it after the loop' % where, extra=lineage)
        if not all(_is_tensor(v) for v in items + grown):
            raise Unsupported('%s: a list grown in a tensor-dependent loop must hold tensors'
                              % where)
        dtype = grown[0].dtype
        shape = grown[0].shape
        for value in items + grown:
            shape = shape.most_specific_compatible_shape(value.shape)
        array = tf.TensorArray(dtype, size=0, dynamic_size=True, element_shape=shape)
        for k, value in enumerate(items):
            array = array.write(k, value)
        init[i] = TensorList(array, where)


def _dry_run_appends(init, lists, body_fn, get_state, set_state):
    """Traces the body once in a scratch graph to see what it appends to each list
    (what it writes to Python state there is forgotten)."""
    from tensorflow.python.framework import func_graph
    heap = current().heap
    checkpoint = heap.checkpoint()
    probes = list(init)
    for i in lists:
        probes[i] = current().made(list(init[i]))   # a scratch copy of the call's own list
    grown = {}
    with func_graph.FuncGraph('janus_dry_run').as_default():
        set_state(tuple(probes))
        region = heap.open_region()
        try:
            _in_dynamic_region(body_fn)
            after = get_state()
            for i in lists:
                # Grown: appended in place, or rebound to the old items plus more
                # (``out = out + [h]``); a list of new items is rebound, not grown.
                if after[i] is probes[i] or (type(after[i]) is list and all(
                        a is b for a, b in zip(after[i], init[i]))):
                    grown[i] = list(after[i])[len(init[i]):]
        finally:
            heap.close_region(region)
            heap.restore(checkpoint)
            set_state(tuple(init))
    return grown


def _snapshot(value, depth=0):
    """Identity and contents of a Python value, to tell whether a region changed it."""
    if depth > 4:
        return ('deep', id(value))
    if isinstance(value, list):
        return ('list', id(value), tuple(_snapshot(v, depth + 1) for v in value))
    if isinstance(value, dict):
        return ('dict', id(value), tuple(value),
                tuple(_snapshot(v, depth + 1) for v in value.values()))
    return ('value', id(value))


def _dynamic_for(ns, site, iterable, body_fn, get_state, set_state):
    box = {'i': tf.constant(0)}
    count = tf.shape(iterable)[0]

    def get():
        return tuple(get_state()) + (box['i'],)

    def put(values):
        set_state(tuple(values[:-1]))
        box['i'] = values[-1]

    def step():
        body_fn(tf.gather(iterable, box['i']))
        box['i'] = box['i'] + 1

    _dynamic_while(ns, site, lambda: box['i'] < count, step, get, put)
