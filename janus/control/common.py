"""What every part of janus's control flow shares: unbound names, lists that grow
in a tensor-dependent loop, truth of tests, where a site is, and the values
that only a test may use.

Needs a ``TraceContext`` (``tracing.current()``) while converted code is
traced.  Imports no other module of ``control/``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NoReturn

import tensorflow as tf

from janus.pyct.sites import SiteKey
from janus.reasons import Reason
from janus.graph import fallible
from janus.graph import vectorize
from janus.trace import callees, observe
from janus.values import protocol, scalars
from janus.values.protocol import NOT_MODELLED, StandIn, graph_number_type
from janus.heap.shadow_heap import Deferred
from janus.trace.trace_context import Unsupported
from janus.trace.tracing import NeedsValue, current

if TYPE_CHECKING:
    from janus.trace.namespace import FunctionNamespace


class Undefined:
    """The value of a variable that is not bound (yet) where state is captured."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name

    def __repr__(self) -> str:
        return '<undefined>'


UNDEFINED = Undefined()


class TensorList(StandIn):
    """A Python list that grows inside a tensor-dependent loop, kept as a TensorArray.

    Inside the loop it supports what growing a list needs (``append``,
    ``extend``, ``+=``, ``+``); after it, ``tf.stack``, ``tf.concat``,
    ``tf.add_n`` and the ``tf.reduce_*`` family, which see the same values
    eager code sees.  Anything else (``len``, indexing, iteration) would need
    a Python list whose length is a run-time value: refused, with the line.
    """

    SHOWN_AS = 'list grown in a tensor-dependent loop'

    def __init__(self, array: tf.TensorArray, where: str) -> None:
        self.array, self.where = array, where

    def append(self, value: Any) -> None:
        self.array = self.array.write(self.array.size(), value)

    def extend(self, values: Iterable[Any]) -> None:
        for value in values:
            self.append(value)

    def __iadd__(self, values: Iterable[Any]) -> TensorList:
        self.extend(values)
        return self

    def __add__(self, values: Iterable[Any]) -> TensorList:
        grown = TensorList(self.array, self.where)
        grown.extend(values)
        return grown

    def stacked(self) -> tf.Tensor:
        return self.array.stack()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise Unsupported(Reason.GROWN_LIST,
                          '%s: a list that grows in a tensor-dependent loop has a run-time '
                          'length; janus supports tf.stack/tf.concat/tf.add_n/tf.reduce_* of '
                          'it, not len(), indexing or iteration' % self.where)

    __len__ = __getitem__ = __iter__ = __bool__ = _refuse

    def materialize(self) -> NoReturn:
        raise Unsupported(Reason.GROWN_LIST,
                          '%s: a list that grows in a tensor-dependent loop has a run-time '
                          'length; janus supports tf.stack/tf.concat/tf.add_n/tf.reduce_* of '
                          'it, not returning or storing it as a list' % self.where)

    # -- control flow (helper P2) --
    def trace_carry(self, value: Any, where: str) -> tf.TensorArray:
        """A loop carries a grown list as its TensorArray; the body may grow it, not
        replace it (asking its own kind of the new value)."""
        if not isinstance(value, TensorList):
            raise Unsupported(Reason.GROWN_LIST,
                              '%s: a list grown in the loop is replaced by a %s'
                              % (where, protocol.type_name(value)))
        return value.array

    def trace_uncarry(self, carried: tf.TensorArray, where: str, lineage: frozenset) -> TensorList:
        return TensorList(carried, where)

    # -- the last checks (helper P4) --
    def trace_library_call(self, callee: Callable[..., Any], args: tuple,
                           kwargs: dict) -> Any:
        """``tf.stack(grown)``, ``tf.concat``, ``tf.add_n``, ``tf.reduce_*``: the function
        of its TensorArray; any other library call given it (or given two) refused."""
        lists = [v for v in list(args) + list(kwargs.values()) if isinstance(v, TensorList)]
        convert = _tensor_list_functions().get(callee) \
            if args and isinstance(args[0], TensorList) else None
        axis = kwargs.get('axis', args[1] if len(args) > 1 else 0)
        if convert is None or len(lists) != 1 or (callee is tf.concat and axis != 0):
            raise Unsupported(Reason.GROWN_LIST,
                              '%s: janus supports tf.stack, tf.concat (axis 0), tf.add_n and '
                              'tf.reduce_* of a list grown in a tensor-dependent loop, not %s'
                              % (lists[0].where, callees.name(callee)))
        value = convert(args[0])
        if callee is tf.stack and axis != 0:
            value = _move_leading_axis(value, axis, lists[0].where)
        if callee in (tf.stack, tf.concat, tf.add_n, tf.convert_to_tensor):
            return value
        return callee(value, *args[1:], **kwargs)


def _tensor_list_functions() -> dict[Any, Callable[[TensorList], tf.Tensor]]:
    """Library functions whose list argument a TensorList stands in for, and how."""
    stacked = TensorList.stacked
    table: dict[Any, Callable[[TensorList], tf.Tensor]] = {
        tf.stack: stacked, tf.convert_to_tensor: stacked,
        tf.concat: lambda t: t.array.concat(),
        tf.add_n: lambda t: tf.reduce_sum(t.stacked(), axis=0)}
    for name in ('reduce_sum', 'reduce_mean', 'reduce_max', 'reduce_min', 'reduce_prod',
                 'reduce_all', 'reduce_any', 'reduce_logsumexp'):
        table[getattr(tf, name, None) or getattr(tf.math, name)] = stacked
    return table


def _move_leading_axis(stacked: tf.Tensor, axis: Any, where: str) -> tf.Tensor:
    """``tf.stack(items, axis)`` from the items stacked along axis 0."""
    rank = stacked.shape.rank
    if rank is None or not isinstance(axis, int) or not -rank <= axis < rank:
        raise Unsupported(Reason.GROWN_LIST,
                          '%s: tf.stack(axis=%r) of a list grown in a tensor-dependent loop '
                          'needs a static axis within the items\' rank' % (where, axis))
    axis %= rank
    return tf.transpose(stacked, list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank)))


def read_local(thunk: Callable[[], Any]) -> Any:
    try:
        return thunk()
    except NameError:
        return UNDEFINED


def bool_tensor(value: Any) -> tf.Tensor:
    """``bool(value)`` as a scalar bool tensor (eager ``bool`` needs one element too)."""
    return tf.reshape(tf.cast(value, tf.bool), [])


def python_truth(value: object) -> bool:
    """``bool(value)`` of a Python value: guarded when it came from outside."""
    return observe.truth(value)


INTERNAL_FLAGS = ('__janus_break',)   # janus's own flags: Python bools may become tensors


def tensor_flags(values: Iterable[Any], names: Iterable[str]) -> tuple[Any, ...]:
    """janus's own break flags, as tensors where a tensor-dependent region needs them."""
    return tuple(tf.constant(v) if isinstance(v, bool) and n.startswith(INTERNAL_FLAGS) else v
                 for v, n in zip(values, names))


def is_tensor(value: object) -> bool:
    return isinstance(value, tf.Tensor)


def is_test_tensor(value: object) -> bool:
    """A test decided by the graph: a tensor, or a stand-in the graph tests
    (``trace_tested_in_graph``: a dynamic scalar, the truth of an and/or whose sides
    differ in kind, ``TestValue``)."""
    return is_tensor(value) or (isinstance(value, StandIn) and value.trace_tested_in_graph())


def condition_tensor(value: Any) -> tf.Tensor:
    """``bool(value)`` of a tensor, or of a stand-in the graph tests, as a scalar bool
    tensor."""
    if isinstance(value, StandIn):
        test = value.trace_test()
        if test is not NOT_MODELLED:
            return test
    return bool_tensor(value)


def static_truth(value: Any) -> bool | None:
    static = tf.get_static_value(value)
    if static is None or getattr(static, 'size', 1) != 1:
        return None
    return bool(static)


class CannotBuild(Unsupported):
    """Real control flow at ``key`` failed to build (``error``); it can be assumed."""

    def __init__(self, key: SiteKey, error: BaseException) -> None:
        self.key, self.error = key, error
        super().__init__('%s: real control flow there failed to build (%s)'
                         % (_where_key(key), error))


def _where_key(key: SiteKey) -> str:
    return current().site_text(key)


def describe_site(ns: FunctionNamespace, site: int) -> str:
    return current().site_text(SiteKey(ns.fn.__code__, site))


class BranchRaised(Exception):
    def __init__(self, branch: bool, error: BaseException) -> None:
        super().__init__(str(error))
        self.branch, self.error = branch, error


def kept_running(outputs: Any) -> Any:
    """``outputs`` of a tf.cond branch or tf.while_loop body being built, after
    making the ops there that may fail but that no output needs run anyway (as
    eagerly; TF would prune them from the branch's function)."""
    graph = tf.compat.v1.get_default_graph()
    fallible.keep_unused(graph, tf.nest.flatten(outputs))
    if current().recursion.vectorizing:   # TF's vectorizer keeps only what the outputs need
        return tf.nest.pack_sequence_as(outputs, vectorize.gated(graph, tf.nest.flatten(outputs)))
    return outputs


def in_traced_region(fn: Callable[..., Any], *args: Any) -> Any:
    ctx = current()
    ctx.region_depth += 1
    try:
        return fn(*args)
    finally:
        ctx.region_depth -= 1


class TestValue(StandIn):
    """The value of ``a and b`` / ``x if t else y`` whose two sides differ in kind (a
    dynamic bool on one path, a bool tensor on the other): janus knows only its
    truth (a bool tensor), so it may only decide a test (``if``, ``while``,
    ``not``, ``and``/``or``); any other use is refused."""

    SHOWN_AS = 'and/or whose sides differ in kind'

    def __init__(self, tensor: tf.Tensor, where: str, lineage: Iterable[Any] = frozenset()) -> None:
        self.tensor, self.where, self.lineage = tensor, where, frozenset(lineage)

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        refuse_values(Reason.BRANCH_TYPES, self._message(), extra=self.lineage)

    def _message(self) -> str:
        return ('%s: this and/or (or conditional expression) gives values of different '
                'kinds on different paths; janus converts it only as the test of an '
                'if/while' % self.where)

    __bool__ = __len__ = __iter__ = __getitem__ = __contains__ = __str__ = __format__ =\
        __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ =\
        __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __index__ = __int__ =\
        __float__ = __array__ = _refuse
    __hash__ = None   # type: ignore[assignment]

    def materialize(self) -> NoReturn:
        """Returned or stored: refused, only its truth is known.  Not traced again with
        its numbers constant (as a use in the call is, ``_refuse``): the graph would be
        specialized to each of their values, where eager computes it at once."""
        raise Unsupported(Reason.BRANCH_TYPES, self._message())

    # -- control flow (helper P2) --
    def trace_tested_in_graph(self) -> bool:
        return True

    def trace_test(self) -> tf.Tensor:
        return self.tensor

    def trace_not(self) -> TestValue:
        return TestValue(tf.logical_not(self.tensor), self.where, self.lineage)

    def trace_lineage(self) -> frozenset:
        return self.lineage


def truth_output(value: Any) -> tf.Tensor | None:
    """``bool(value)`` as a scalar bool tensor where that needs no guard and cannot
    raise, else None."""
    if isinstance(value, StandIn):
        test = value.trace_test()
        if test is not NOT_MODELLED:
            return test
    if is_tensor(value):
        return bool_tensor(value) if value.shape.num_elements() == 1 else None
    if type(value) in (bool, int, float, type(None)):
        return tf.constant(bool(value))
    return None


def taping() -> bool:
    """Whether a GradientTape may be recording what is traced now."""
    from tensorflow.python.eager import record
    return record.could_possibly_record()


def variables_read() -> set[int]:
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

def liftable(value: object) -> bool:
    """A Python number that can become a (constant) dynamic scalar."""
    kind = type(value)
    return kind is bool or (kind in (int, float) and scalars.in_range(value))


def lineage_of(value: object) -> frozenset:
    """The relaxed numbers a value (a dynamic scalar, a test's truth) was computed from."""
    return value.trace_lineage() if isinstance(value, StandIn) else frozenset()


def refuse_values(reason: Reason, message: str, *values: object,
                  extra: Iterable[Any] = frozenset()) -> NoReturn:
    """Refuses what ``values`` would need; when a dynamic scalar is among them (or
    decided the test, ``extra``), the trace is redone with the numbers it came from
    constant (``NeedsValue``) rather than given up: a test on constants is
    plain Python, with nothing to merge."""
    lineage = scalars.lineage_of(*values) | frozenset(extra)
    if lineage:
        current().needs_value |= lineage
        raise NeedsValue(lineage, message, reason)
    raise Unsupported(reason, message)


COMPARED_BY_VALUE = (int, float, bool, str, bytes, complex, type(None), tf.DType,
                      tf.TensorShape, range)


def kind_of(value: Any) -> str:
    if value is UNDEFINED:
        return 'undefined'
    if is_tensor(value):
        return 'a %s tensor' % value.dtype.name
    number = graph_number_type(value)
    if number is not None:
        return 'a %s (a number known when the graph runs)' % number.__name__
    if type(value) in (list, tuple, dict):
        return 'a %s of %d items' % (type(value).__name__, len(value))
    if isinstance(value, _Unreadable):
        return 'unknown'
    text = repr(value) if type(value) in COMPARED_BY_VALUE else '<%s object>' % (
        type(value).__name__)
    return 'the %s %s' % (type(value).__name__, text if len(text) <= 60 else text[:57] + '...')


# -- writes to Python state inside a tf.cond branch ------------------------------------

OLD = object()   # a location a branch did not write: its value from before the `if`


class _Unreadable(Deferred):
    """A location janus cannot read again: reading it refuses, naming the line."""

    def __init__(self, reason: Reason, context: str) -> None:
        self.reason, self.context = reason, context

    def resolve(self) -> NoReturn:
        raise Unsupported(self.reason, self.context)


def snapshot_of(value: object, depth: int = 0) -> tuple[Any, ...]:
    """Identity and contents of a Python value, to tell whether a region changed it."""
    if depth > 4:
        return ('deep', id(value))
    if isinstance(value, list):
        return ('list', id(value), tuple(snapshot_of(v, depth + 1) for v in value))
    if isinstance(value, dict):
        return ('dict', id(value), tuple(value),
                tuple(snapshot_of(v, depth + 1) for v in value.values()))
    return ('value', id(value))
