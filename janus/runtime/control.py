"""Control-flow operators converted code calls while it is traced.

Needs a ``TraceContext`` (``operators.current()``) carrying a ``Plan``.  Every
test or loop is decided per evaluation: a Python value runs as plain Python
(its inputs are guarded); a tensor whose outcome the plan assumes runs only
the assumed path and adds a ``Janus>Assert`` of the assumption; any other
tensor builds real ``tf.cond`` / ``tf.while_loop``.  Inside those, every
nested decision is dynamic: a branch traced once runs many times.
"""
import tensorflow as tf

from janus.config import config
from janus.graphgen.plan import DYNAMIC
from janus.runtime.operators import Unsupported, current


class Undefined:
    """The value of a variable that is not bound (yet) where state is captured."""

    def __init__(self, name=None):
        self.name = name

    def __repr__(self):
        return '<undefined>'


UNDEFINED = Undefined()


def read(thunk):
    try:
        return thunk()
    except NameError:
        return UNDEFINED


def truth(value):
    """``bool(value)`` as a scalar bool tensor (eager ``bool`` needs one element too)."""
    return tf.reshape(tf.cast(value, tf.bool), [])


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
    ctx.assume(key, 'BRANCH', condition, '%s is %s' % (what, outcome))
    return outcome, True


# -- spec-form statements (they keep return/break/continue) -------------------

def test(ns, site, value):
    if not _is_tensor(value):
        return bool(value)
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
    if length is None and outcome is not DYNAMIC and outcome <= config.max_unroll:
        # Slices only once the count is known good: a data dependency on the check.
        iterable = ctx.assume((ns.fn.__code__, site), 'TRIP_COUNT',
                              tf.equal(tf.shape(iterable)[0], outcome),
                              'the loop runs %d times' % outcome, gate=iterable)
        return tf.unstack(iterable, num=outcome) if outcome else []
    if allow_dynamic:
        return None
    raise Unsupported('a loop over a tensor whose length varied between calls (or exceeds '
                      'janus.config.max_unroll=%d), with return/break/continue inside: janus '
                      'cannot make it a tf.while_loop yet' % config.max_unroll)


# -- functionalized statements ---------------------------------------------------

def if_stmt(ns, site, test_value, true_fn, false_fn, get_state, set_state):
    if not _is_tensor(test_value):
        return (true_fn if test_value else false_fn)()
    outcome, _ = _decide_test(ns, site, test_value, 'condition')
    if outcome is not DYNAMIC:
        return (true_fn if outcome else false_fn)()
    return _dynamic_if(ns, site, test_value, true_fn, false_fn, get_state, set_state)


def while_stmt(ns, site, test_fn, body_fn, get_state, set_state):
    while True:
        value = test_fn()
        if not _is_tensor(value):
            if not value:
                return
            body_fn()
            continue
        outcome, _ = _decide_test(ns, site, value, 'loop condition')
        if outcome is DYNAMIC:
            return _dynamic_while(ns, site, test_fn, body_fn, get_state, set_state)
        if not outcome:
            return
        body_fn()


def for_stmt(ns, site, iterable, body_fn, get_state, set_state):
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
    _dynamic_for(ns, site, iterable, body_fn, get_state, set_state)


def ifexp(ns, site, test_value, body, orelse):
    if not _is_tensor(test_value):
        return body() if test_value else orelse()
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
        return go_on() if bool(value) == is_and else value
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
    def wrap(thunk, branch):
        def run():
            value = _in_dynamic_region(thunk)
            if not _is_tensor(value):
                raise Unsupported('%s: in a tensor-dependent conditional, the %s branch gives a '
                                  '%s, not a tensor' % (_where(ns, site), branch,
                                                        type(value).__name__))
            return value
        return run
    return tf.cond(pred, wrap(true_thunk, 'true'), wrap(false_thunk, 'false'))


def _as_output(value):
    return value if _is_tensor(value) else tf.constant(0)


def _dynamic_if(ns, site, test_value, true_fn, false_fn, get_state, set_state):
    ctx = current()
    init = get_state()
    seen = {}

    def branch(fn, tag):
        def run():
            set_state(init)
            try:
                _in_dynamic_region(fn)
            except Unsupported:
                raise
            except Exception as e:  # the branch raises: handled below as an assumption
                raise _BranchRaised(tag, e)
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
        ctx.assume((ns.fn.__code__, site), 'RAISE', condition,
                   'the branch that raises %s is not taken' % type(raised.error).__name__)
        return (true_fn if other else false_fn)()
    except (ValueError, TypeError):
        if len(seen) == 2:
            _merge(ns, site, seen, None)  # raises a clear Unsupported if that is the cause
        raise
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
    return 'the %s %r' % (type(value).__name__, value)


def _dynamic_while(ns, site, test_fn, body_fn, get_state, set_state):
    init = list(get_state())
    where = _where(ns, site)
    if any(v is UNDEFINED for v in init):
        raise Unsupported('%s: a variable the tensor-dependent loop carries is not defined '
                          'before the loop' % where)
    loop_index = [i for i, v in enumerate(init) if _is_tensor(v)]
    fixed = {i: _snapshot(v) for i, v in enumerate(init) if not _is_tensor(v)}

    def full_state(values):
        state = list(init)
        for i, value in zip(loop_index, values):
            state[i] = value
        return tuple(state)

    def cond(*values):
        set_state(full_state(values))
        return truth(_in_dynamic_region(test_fn))

    def body(*values):
        set_state(full_state(values))
        _in_dynamic_region(body_fn)
        state = get_state()
        for i, snapshot in fixed.items():
            if _snapshot(state[i]) != snapshot:
                raise Unsupported('%s: a Python value (%s) changes inside a tensor-dependent loop; '
                                  'janus keeps Python values Python (lists that grow in such a '
                                  'loop are not converted to TensorArrays yet)'
                                  % (where, _kind(init[i])))
        return tuple(state[i] for i in loop_index)

    start = tuple(init[i] for i in loop_index)
    try:
        final = tf.while_loop(cond, body, start)
    except ValueError as e:
        if 'shape' not in str(e):
            raise
        relaxed = tuple(tf.TensorShape([None] * v.shape.rank) if v.shape.rank is not None
                        else tf.TensorShape(None) for v in start)
        final = tf.while_loop(cond, body, start, shape_invariants=relaxed)
    if not isinstance(final, (list, tuple)):
        final = (final,)
    set_state(full_state(final))


def _snapshot(value):
    if isinstance(value, list):
        return ('list', id(value), len(value), tuple(id(v) for v in value))
    if isinstance(value, dict):
        return ('dict', id(value), tuple(value), tuple(id(v) for v in value.values()))
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
