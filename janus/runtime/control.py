"""Control-flow operators converted code calls while it is traced.

Needs a ``TraceContext`` (``trace_context.current()``) carrying a ``Plan``.  Every
test or loop is decided per evaluation: a Python value runs as plain Python
(its inputs are guarded); a tensor whose outcome the plan assumes runs only
the assumed path and adds a ``Janus>Assert`` of the assumption; any other
tensor builds real ``tf.cond`` / ``tf.while_loop``.  Inside those, every
nested decision is dynamic: a branch traced once runs many times.
"""
import tensorflow as tf

from janus.config import config
from janus.decisions import DYNAMIC
from janus.runtime.trace_context import AssumptionKind, Unsupported, current


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
    """``not value`` in a test: a tensor's negation stays a tensor."""
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


def _static_truth(value):
    static = tf.get_static_value(value)
    if static is None or getattr(static, 'size', 1) != 1:
        return None
    return bool(static)


def _decide_test(ns, site, value, what):
    """(outcome, assumed): the branch to take for a tensor test, or (DYNAMIC, False)."""
    ctx = current()
    key = (ns.fn.__code__, site)
    outcome = ctx.decide(key)
    static = _static_truth(value)
    if static is not None:
        return static, False
    if outcome is DYNAMIC:
        return DYNAMIC, False
    condition = truth(value) if outcome else tf.logical_not(truth(value))
    ctx.assume(key, AssumptionKind.BRANCH, condition, '%s is %s' % (what, outcome))
    return outcome, True


# -- spec-form statements (they keep return/break/continue) -------------------

def test(ns, site, value):
    if not _is_tensor(value):
        return _python_truth(value)
    outcome, _ = _decide_test(ns, site, value, 'condition')
    if outcome is DYNAMIC:
        raise Unsupported('a tensor-dependent condition whose outcome varied between calls, in '
                          'a statement with return/break/continue inside: janus cannot make it '
                          'a tf.cond/tf.while_loop yet')
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
    if length is None and outcome is not DYNAMIC and outcome <= config.max_unroll and not soft:
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
    if not _is_tensor(test_value):
        return (true_fn if _python_truth(test_value) else false_fn)()
    outcome, _ = _decide_test(ns, site, test_value, 'condition')
    if outcome is not DYNAMIC:
        return (true_fn if outcome else false_fn)()
    flagged_get = lambda: _tensor_flags(get_state(), names)  # noqa: E731
    return _dynamic_if(ns, site, test_value, true_fn, false_fn, flagged_get, set_state)


def while_stmt(ns, site, test_fn, body_fn, get_state, set_state, names=()):
    while True:
        value = test_fn()
        if not _is_tensor(value):
            if not _python_truth(value):
                return
            body_fn()
            continue
        outcome, _ = _decide_test(ns, site, value, 'loop condition')
        if outcome is DYNAMIC:
            flagged_get = lambda: _tensor_flags(get_state(), names)  # noqa: E731
            _dynamic_while(ns, site, test_fn, body_fn, flagged_get, set_state)
            return _at_least_once(ns, site, truth(value))
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
    if not _is_tensor(test_value):
        return body() if _python_truth(test_value) else orelse()
    outcome, _ = _decide_test(ns, site, test_value, 'condition')
    if outcome is not DYNAMIC:
        return body() if outcome else orelse()
    return _cond_values(ns, site, truth(test_value), body, orelse)


def boolop(ns, site, is_and, *thunks):
    return _boolop_from(ns, site, is_and, thunks, 0, thunks[0]())


def _boolop_from(ns, site, is_and, thunks, index, value):
    if index == len(thunks) - 1:
        return value
    go_on = lambda: _boolop_from(ns, site, is_and, thunks, index + 1, thunks[index + 1]())  # noqa: E731
    if not _is_tensor(value):
        return go_on() if _python_truth(value) == is_and else value
    outcome, _ = _decide_test(ns, site, value, 'operand %d of %s' % (index, 'and' if is_and else 'or'))
    if outcome is not DYNAMIC:
        return go_on() if outcome == is_and else value
    stop = lambda: value  # noqa: E731
    return _cond_values(ns, site, truth(value), go_on if is_and else stop,
                        stop if is_and else go_on)


# -- dynamic control flow ----------------------------------------------------------

def _where(ns, site):
    return current().site_text((ns.fn.__code__, site))


class _BranchRaised(Exception):
    def __init__(self, branch, error):
        super().__init__(str(error))
        self.branch, self.error = branch, error


def _in_dynamic_region(fn, *args):
    ctx = current()
    ctx.dynamic_depth += 1
    try:
        return fn(*args)
    finally:
        ctx.dynamic_depth -= 1


def _cond_values(ns, site, pred, true_thunk, false_thunk):
    """tf.cond of two expressions; both must give tensors (a Python value cannot
    depend on a tensor)."""
    variables = {}

    def wrap(thunk, branch):
        def run():
            value = _in_dynamic_region(thunk)
            variables[branch] = _variables_read()
            if not _is_tensor(value):
                raise Unsupported('%s: in a tensor-dependent conditional, the %s branch gives a '
                                  '%s, not a tensor' % (_where(ns, site), branch,
                                                        type(value).__name__))
            return value
        return run
    result = tf.cond(pred, wrap(true_thunk, 'true'), wrap(false_thunk, 'false'))
    _check_one_sided_variables(ns, site, variables)
    return result


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


def _as_output(value):
    return value if _is_tensor(value) else tf.constant(0)


def _dynamic_if(ns, site, test_value, true_fn, false_fn, get_state, set_state):
    ctx = current()
    init = get_state()
    before = [_snapshot(v) for v in init]
    seen, variables = {}, {}

    def branch(fn, tag):
        def run():
            set_state(init)
            try:
                _in_dynamic_region(fn)
                variables[tag] = _variables_read()
            except Unsupported:
                raise
            except Exception as e:  # the branch raises: handled below as an assumption
                raise _BranchRaised(tag, e)
            if [_snapshot(v) for v in init] != before:
                raise Unsupported('%s: a tensor-dependent branch changes a Python list or dict '
                                  'in place; janus keeps Python values Python'
                                  % _where(ns, site))
            seen[tag] = get_state()
            return tuple(_as_output(v) for v in seen[tag])
        return run
    try:
        outputs = tf.cond(truth(test_value), branch(true_fn, True), branch(false_fn, False))
    except _BranchRaised as raised:
        # `if t: raise ...`: assume the raising branch is not taken; if it is,
        # the call re-runs imperatively and raises the real exception there.
        set_state(init)
        other = not raised.branch
        condition = truth(test_value) if other else tf.logical_not(truth(test_value))
        ctx.assume((ns.fn.__code__, site), AssumptionKind.RAISE, condition,
                   'the branch that raises %s is not taken' % type(raised.error).__name__)
        return (true_fn if other else false_fn)()
    except (ValueError, TypeError):
        if len(seen) == 2:
            _merge(ns, site, seen, None)  # raises a clear Unsupported if that is the cause
        raise
    _check_one_sided_variables(ns, site, variables)
    set_state(_merge(ns, site, seen, outputs))


def _merge(ns, site, seen, outputs):
    merged = []
    for i, (t, f) in enumerate(zip(seen[True], seen[False])):
        if _is_tensor(t) and _is_tensor(f):
            merged.append(outputs[i] if outputs is not None else t)
        elif t is f or (type(t) is type(f) and not _is_tensor(t) and _same_python(t, f)):
            merged.append(t)
        else:
            raise Unsupported('%s: after a tensor-dependent if, a variable would be %s in one '
                              'branch and %s in the other; janus keeps Python values Python'
                              % (_where(ns, site), _kind(t), _kind(f)))
    return tuple(merged)


def _same_python(a, b):
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable objects are not the same
        return False


def _kind(value):
    if value is UNDEFINED:
        return 'undefined'
    if _is_tensor(value):
        return 'a tensor'
    if type(value) in (list, tuple, dict):
        return 'a %s of %d items' % (type(value).__name__, len(value))
    text = repr(value)
    return 'the %s %s' % (type(value).__name__, text if len(text) <= 60 else text[:57] + '...')


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


def _dynamic_while(ns, site, test_fn, body_fn, get_state, set_state):
    init = list(get_state())
    where = _where(ns, site)
    if any(v is UNDEFINED for v in init):
        raise Unsupported('%s: a variable the tensor-dependent loop carries is not defined '
                          'before the loop' % where)
    _lists_to_tensor_arrays(init, body_fn, get_state, set_state, where)
    # Lists/tuples of tensors the body rebinds (an LSTM cell's [h, c]) are
    # carried leaf by leaf and rebuilt with the same structure each iteration.
    structures = {i for i, v in enumerate(init) if _is_tensor_structure(v)}
    for i in structures:   # an outside list (self.state): its tensors re-read every run
        init[i] = current().contents(init[i])
    loop_index = [i for i, v in enumerate(init)
                  if _is_tensor(v) or isinstance(v, TensorList) or i in structures]
    fixed = {i: _snapshot(v) for i, v in enumerate(init) if i not in loop_index}
    passed = {}

    def full_state(values):
        state = list(init)
        for i, value in zip(loop_index, values):
            if isinstance(init[i], TensorList):
                value = TensorList(value, where)
            elif i in structures:
                value = tf.nest.pack_sequence_as(init[i], list(value))
                passed[i] = (value, list(tf.nest.flatten(value)))
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
            values.append(value)
        return tuple(values)

    def cond(*values):
        set_state(full_state(values))
        return truth(_in_dynamic_region(test_fn))

    def body(*values):
        set_state(full_state(values))
        _in_dynamic_region(body_fn)
        current().last_loop_reads_variables = bool(_variables_read())
        state = get_state()
        for i, snapshot in fixed.items():
            if _snapshot(state[i]) != snapshot:
                raise Unsupported('%s: a Python value (%s) changes inside a tensor-dependent loop; '
                                  'janus keeps Python values Python' % (where, _kind(init[i])))
        return loop_values(state)

    start = loop_values(init)
    try:
        final = tf.while_loop(cond, body, start)
    except ValueError as e:
        if 'shape' not in str(e):
            raise
        final = tf.while_loop(cond, body, start, shape_invariants=tf.nest.map_structure(
            _relaxed_invariant, start))
    if not isinstance(final, (list, tuple)):
        final = (final,)
    set_state(full_state(final))


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


def _lists_to_tensor_arrays(init, body_fn, get_state, set_state, where):
    """Local lists the loop grows become TensorLists (TensorArrays) in ``init``."""
    lists = [i for i, v in enumerate(init) if type(v) is list]
    if not lists:
        return
    appended = _dry_run_appends(init, lists, body_fn, get_state, set_state)
    for i in lists:
        items, grown = init[i], appended.get(i, [])
        if not grown:
            continue  # unchanged by the loop: stays a Python list (checked after the body)
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
    """Traces the body once in a scratch graph to see what it appends to each list."""
    from tensorflow.python.framework import func_graph
    probes = list(init)
    for i in lists:
        probes[i] = list(init[i])
    grown = {}
    with func_graph.FuncGraph('janus_dry_run').as_default():
        set_state(tuple(probes))
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
