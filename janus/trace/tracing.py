"""The thread's current trace, and the records traced code hands around.

Needs nothing run before it but ``errors``, ``reasons`` and ``values/protocol``
(the unmerged locals are stand-ins).  ``tracer.py`` enters a ``TraceContext``
(``trace_context.py``) for the thread that traces (``enter_trace``); every
runtime operator finds it with ``current()``.  The
records here need no context to exist: an ``Assumption`` and its kind, a
local a tensor-dependent ``if`` left two values for (``UnmergedLocal``,
``Chosen``), and ``NeedsValue``, the refusal of a use that needs a relaxed
number's value (``need``).
"""
from __future__ import annotations

import enum
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn

from janus.errors import Unsupported
from janus.reasons import Reason
from janus.values.protocol import StandIn

if TYPE_CHECKING:
    from janus.pyct.sites import SiteKey

_local = threading.local()


def current() -> Any:
    ctx = getattr(_local, 'ctx', None)
    if ctx is None:
        raise RuntimeError('janus converted code ran outside of a trace')
    return ctx


def current_or_none() -> Any:
    return getattr(_local, 'ctx', None)


def enter_trace(ctx: Any) -> None:
    _local.ctx = ctx


def exit_trace() -> None:
    _local.ctx = None


def writable_context(what: str, shadowed: bool = True) -> Any:
    """The context, for a write.

    A write through the shadow heap (``shadowed``) inside tensor-dependent
    branches and loops is recorded in their regions (``control/``:
    a branch's writes happen only on the path taken; a loop carries what it
    rebinds) — allowed only when every enclosing tensor-dependent region is
    one of those.  A function handed to TF (``tf.map_fn``), a conditional
    expression, or a plain-Python write (``shadowed=False``: a variable of a
    function the call itself made) is traced once and run any number of
    times: a write there is refused.
    """
    ctx = current()
    if ctx.region_depth and (not shadowed or ctx.region_depth != len(ctx.heap.regions)):
        raise Unsupported(Reason.WRITE_IN_DYNAMIC_CONTROL,
                          'janus does not convert a write to %s inside %s (the write would '
                          'happen once per trace, not per run)'
                          % (what, 'a tensor-dependent branch or loop' if not shadowed else
                             'a function handed to TF, a tensor-dependent conditional '
                             'expression or a loop condition'))
    return ctx


class NeedsValue(Unsupported):
    """A dynamic scalar reached a use that needs its value (a shape, an index,
    library code): the trace is redone with ``lineage`` specialized by value
    (the tracer raises ``errors.ScalarValueNeeded`` with the user's line)."""

    def __init__(self, lineage: Iterable[Any], what: str,
                 reason: Reason = Reason.NUMBER_VALUE_NEEDED) -> None:
        self.lineage = frozenset(lineage)
        super().__init__(reason, describe_need(self.lineage, what))


def need(lineage: Iterable[Any], what: str,
         reason: Reason = Reason.NUMBER_VALUE_NEEDED) -> NoReturn:
    """Raises NeedsValue, first noting ``lineage`` on the trace: seen even if library
    code swallows the exception.  ``reason``: the refusal if the numbers' values
    do not help (the retrace with them constant refuses too)."""
    ctx = current()
    ctx.needs_value = ctx.needs_value | frozenset(lineage)
    raise NeedsValue(lineage, what, reason)


def describe_need(lineage: Iterable[tuple[Any, str]], what: str) -> str:
    names = sorted(name for _, name in lineage)
    return '%s needs the value of %s' % (what, ', '.join(names) or 'a Python number')


class UnmergedLocal(StandIn):
    """After a tensor-dependent ``if`` (a tf.cond), a local whose two sides cannot be
    one graph value: bound on one side only (``if step % 10 == 0: acc = ...``;
    eagerly unbound on the other path), or Python values that differ (a list of
    gradients rebound in the branch).  Unused after the ``if``, it costs nothing;
    any use refuses (``control.values.merge`` makes it; ``operators``, ``calls`` and
    ``observe`` refuse it), as the merge itself used to."""

    REASON = Reason.BRANCH_TYPES
    SHOWN_AS = 'variable a tensor-dependent if left two values'

    def __init__(self, where: str, detail: str, lineage: Iterable[Any] = frozenset()) -> None:
        self.where, self.detail, self.lineage = where, detail, frozenset(lineage)

    def refuse(self, *args: object, **kwargs: object) -> NoReturn:
        message = ('%s: after the tensor-dependent if, a variable is %s; janus keeps Python '
                   'values Python, so it cannot convert a use of it' % (self.where, self.detail))
        if self.lineage:   # a test on relaxed numbers: traced again with them constant
            self._need(message)
        raise Unsupported(self.REASON, message)

    def _need(self, message: str) -> NoReturn:
        need(self.lineage, message, self.REASON)

    def trace_attribute(self, name: str) -> Any:
        self.refuse()

    def trace_call(self, args: tuple, kwargs: dict) -> NoReturn:
        self.refuse()

    def materialize(self) -> NoReturn:
        self.refuse()   # returned or stored: eagerly one value, which only the run knows

    __bool__ = __len__ = __iter__ = __getitem__ = __setitem__ = __contains__ = __str__ = \
        __format__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = \
        __truediv__ = __rtruediv__ = __floordiv__ = __mod__ = __pow__ = __neg__ = \
        __matmul__ = __rmatmul__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = \
        __index__ = __int__ = __float__ = __array__ = __call__ = refuse
    __hash__ = None   # type: ignore[assignment]


class Chosen(UnmergedLocal):
    """After a tensor-dependent ``if``, one of two distinct outside containers, chosen
    by the run (``bucket = m.pos`` on one side, ``bucket = m.neg`` on the other):
    never unified, however equal they are.  Changing it in place (``append``,
    ``extend``, ``insert``, ``update``: ``method_calls.py``) is a conditional write on
    each candidate, under its side's condition; every other use refuses, as an
    ``UnmergedLocal``'s does.  ``graph``: where the conditions live."""

    METHODS = frozenset(('append', 'extend', 'insert', 'update'))
    REASON = Reason.CHOSEN_CONTAINER
    SHOWN_AS = 'container a tensor-dependent if chose'

    def __init__(self, where: str, candidates: list[tuple[Any, Any]], graph: Any) -> None:
        super().__init__(where, 'one of two different %s objects, chosen when the graph runs'
                         % '/'.join(sorted({type(obj).__name__ for obj, _ in candidates})))
        self.candidates, self.graph = candidates, graph   # [(object, condition tensor)]

    def trace_attribute(self, name: str) -> ChosenMethod:
        """``chosen.append`` and friends: a ``ChosenMethod``, whose calls are conditional
        writes (``method_calls.py``); any other attribute refuses."""
        if name not in self.METHODS or not all(
                hasattr(type(obj), name) for obj, _ in self.candidates):
            self.refuse()
        return ChosenMethod(self, name)


class ChosenMethod(StandIn):
    """``chosen.append`` (``Chosen.trace_attribute``), called through ``calls.call``."""

    SHOWN_AS = 'method of a container a tensor-dependent if chose'

    def __init__(self, chosen: Chosen, name: str) -> None:
        self.chosen, self.name = chosen, name

    def materialize(self) -> NoReturn:
        self.chosen.refuse()   # ``return chosen.append``: a method of the chosen object


def refuse_unmerged(*values: object) -> None:
    """Refuses a use of a local the two sides of a tf.cond left unmergeable."""
    for value in values:
        if isinstance(value, UnmergedLocal):
            value.refuse()


# Guards that rest on a type's own protocol: only for types whose model observes it.


class AssumptionKind(enum.StrEnum):
    """What an in-graph ``Janus>Assert`` checks."""
    BRANCH = 'BRANCH'                # a test's outcome (relaxed when it breaks)
    TRIP_COUNT = 'TRIP_COUNT'        # a loop's length (relaxed when it breaks)
    RAISE = 'RAISE'                  # a raising branch is not taken
    ASSERT = 'ASSERT'                # a user ``assert``
    NONEMPTY_LOOP = 'NONEMPTY_LOOP'  # a dynamic loop under a tape runs at least once
    AGREEMENT = 'AGREEMENT'          # every rank's assumptions held (distributed steps)
    SCALAR = 'SCALAR'                # a dynamic scalar stays where Python's meaning is kept


class Assumption:
    """One speculation checked inside the graph by a ``Janus>Assert``.

    ``kind``: BRANCH (a test's outcome), TRIP_COUNT (a loop's length), RAISE
    (a raising branch is not taken), ASSERT (a user ``assert``), NONEMPTY_LOOP
    (a dynamic loop under a tape runs at least once), AGREEMENT (all ranks'
    assumptions held).  Only BRANCH and TRIP_COUNT are relaxed when they break.  ``site`` is
    the (code object, site id) the profile and plan know it by.
    """

    def __init__(self, assumption_id: int, kind: AssumptionKind, filename: str | None,
                 lineno: int | None, description: str, site: SiteKey | None = None) -> None:
        assert isinstance(kind, AssumptionKind), kind
        self.id, self.kind, self.site = assumption_id, kind, site
        self.filename, self.lineno, self.description = filename, lineno, description
        # SCALAR: the relaxed numbers it checks (relaxation.py)
        self.lineage: frozenset = frozenset()

    @property
    def speculative(self) -> bool:
        return self.kind in (AssumptionKind.BRANCH, AssumptionKind.TRIP_COUNT)

    def __repr__(self) -> str:
        return '#%d %s at %s:%s: %s' % (self.id, self.kind, self.filename, self.lineno,
                                         self.description)
