"""``try`` statements traced into the graph: what converted code calls around them.

Needs a ``TraceContext`` (``tracing.current()``).  The converter
(``graphgen/converters/exceptions.py``) turns a ``try`` statement into::

    try:
        with __jr.try_body(LINE):        # the body's ops are the statement's region
            BODY
    except __jr.TRACE_SIGNALS:           # janus's own signals pass every handler
        raise
    except E as e:
        __jr.caught(LINE)                # the handler runs only for an exact exception
        HANDLER
    else: ...  finally: ...              # unchanged

so the statement runs as Python at trace time (as AutoGraph runs it), and
janus keeps eager's meaning on every run the graph's guards admit:

* **An exception the trace catches must be eager's, at that point, on every
  such run** (``caught``): raised by a ``raise`` of your converted code,
  having reached the handler through converted code and janus's operators
  only.  Not a TF or library frame on the way (a graph-construction error is
  no eager error, and a ``tf.cond`` branch or ``tf.while_loop`` body raises
  only on some runs), and no graph value in it (its text would be the
  trace's).  Any other caught exception refuses the statement: it becomes a
  graph break at the ``try`` (``Reason.TRY_STATEMENT``), as before janus
  traced try statements.
* **An op of the body that may fail at run time** (``graph/fallible.py``),
  in a statement with a ``finally`` or a handler that would catch a
  ``tf.errors.OpError``, must make the graph re-run the call imperatively,
  where eager's handler runs: the tracer refuses a graph whose error could
  surface as the graph's own (a state change no rollback undoes:
  ``may_fail_inside``).

A ``finally`` that returns, breaks or continues ends the exception in flight:
the converter starts it with ``__jr.finally_may_swallow(line)``, which lets
janus's own signal go on and refuses any other exception that is not exact.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import types
import typing
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any, Literal

import tensorflow as tf

from janus import pytypes
from janus.errors import JanusError, TraceBudgetExceeded, Unsupported
from janus.reasons import Reason
from janus.graph import fallible
from janus.heap import heap
from janus.trace import observe, tracing
from janus.control.common import BranchRaised
from janus.control.values import CannotMerge

# Exceptions janus raises through your code while it traces (refusals, retrace
# requests, its budget): no handler of yours may catch them (a bare ``except:``
# included), so the converter puts this clause first.
TRACE_SIGNALS = (JanusError, TraceBudgetExceeded, heap.HeapError, BranchRaised, CannotMerge)

# janus's own modules (converted code keeps your file's name).
_JANUS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@dataclasses.dataclass(eq=False)
class TryRegion:
    """The ops one traced ``try`` body made in its graph (``first`` to ``end``, by
    position in ``graph.get_operations()``), and where the statement is."""
    graph: typing.Any
    first: int
    end: int
    filename: str | None
    line: int
    frames: tuple   # (code, line) of the converted frames around it, innermost first
    catches_graph_errors: bool   # a handler or a finally would see a TF error of the body

    def operations(self) -> list[tf.Operation]:
        return self.graph.get_operations()[self.first:self.end]


class try_body:   # noqa: N801 - an operator converted code calls, named as one
    """Around a ``try`` statement's body: records the ops it makes (a region).
    ``handler_types``: a thunk of the handlers' types (None: not plain reads)."""

    def __init__(self, line: int, handler_types: Callable[[], Any] | None,
                 has_finally: bool) -> None:
        self.line, self.handler_types, self.has_finally = line, handler_types, has_finally

    def __enter__(self) -> None:
        self.ctx = tracing.current()
        self.graph = tf.compat.v1.get_default_graph()
        self.first = len(self.graph._nodes_by_id)   # no op leaves a graph while traced
        self.frames = _converted_frames(sys._getframe(1), self.ctx.code_objects)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: types.TracebackType | None) -> Literal[False]:
        if kind is not None and issubclass(kind, TRACE_SIGNALS):
            return False   # the trace is abandoned: no region to keep
        filename = self.frames[0][0].co_filename if self.frames else None
        catches = self.has_finally or _catch_graph_errors(self.handler_types)
        self.ctx.try_regions.append(TryRegion(self.graph, self.first,
                                              len(self.graph._nodes_by_id), filename,
                                              self.line, self.frames, catches))
        return False


def _catch_graph_errors(handler_types: Callable[[], Any] | None) -> bool:
    """Whether a handler would catch what a failing op raises: the graph's
    ``tf.errors.OpError``, or library code's ValueError/TypeError eagerly (a handler
    whose type janus cannot read counts as one that would)."""
    if handler_types is None:   # not plain reads (the converter): never read early
        return True
    try:
        types = handler_types()
    except Exception:  # noqa: BLE001 - eager reads them only for an exception: assume the worst
        return True
    flat: list[Any] = []
    for kind in types:
        flat.extend(kind if type(kind) is tuple else [kind])
    return any(kind is None or not isinstance(kind, type)
               or any(issubclass(error, kind) or issubclass(kind, error) for error in _GRAPH_ERRORS)
               for kind in flat)


# What a failing op raises in the graph (OpError), and what library code raises for the
# same bad input eagerly, before any op runs (Keras's ValueError on an input width).
_GRAPH_ERRORS = (tf.errors.OpError, ValueError, TypeError)


def caught(line: int) -> None:
    """First statement of a handler: the exception being handled must be one eager
    raises there on every run the guards admit, else the statement is refused."""
    ctx = tracing.current()
    error = sys.exc_info()[1]   # in a handler: never None
    _reraise_signal_behind(error)  # type: ignore[arg-type]
    why = _not_exact(error, ctx.code_objects)  # type: ignore[arg-type]
    if why is not None:
        raise Unsupported(Reason.TRY_STATEMENT,
                          'line %d catches %s %s; janus cannot tell that eager raises it '
                          'there on every call' % (line, type(error).__name__, why))
    # raised in this call (an outside one keeps its source): `e.args`, `str(e)`
    ctx.provenance.made(error)


def exception_types(types: Any) -> Any:
    """An ``except`` clause's types, each class of a tuple guarded (Python matches them in
    C: a tuple from outside would otherwise be guarded by its type alone)."""
    if type(types) is tuple:
        return observe.plain_deep(tracing.current(), types)
    return types


def finally_may_swallow(line: int) -> None:
    """First statement of a ``finally`` that returns, breaks or continues (ending the
    exception in flight): janus's signal goes on; any other must be exact."""
    error = sys.exc_info()[1]
    if error is None:
        return
    if isinstance(error, TRACE_SIGNALS):
        raise error
    _reraise_signal_behind(error)
    why = _not_exact(error, tracing.current().code_objects)
    if why is not None:
        raise Unsupported(Reason.TRY_STATEMENT,
                          'the finally of line %d ends %s %s; janus cannot tell that eager '
                          'raises it there on every call' % (line, type(error).__name__, why))


def _reraise_signal_behind(error: BaseException) -> None:
    """janus's signal that ``error`` replaced (a ``finally`` or a handler of yours that
    raised while it was on its way: ``__context__``) goes on instead: the trace
    stopped there, whatever your code raised after."""
    seen = set()
    behind = error.__context__
    while behind is not None and id(behind) not in seen:
        if isinstance(behind, TRACE_SIGNALS):
            raise behind
        seen.add(id(behind))
        behind = behind.__context__


def may_fail_inside(regions: Iterable[TryRegion]) -> TryRegion | None:
    """The first region catching graph errors one of whose ops may fail at run time."""
    for region in regions:
        if region.catches_graph_errors and any(not fallible.infallible(op) for op in region.operations()):
            return region
    return None


# -- which exceptions are exact -------------------------------------------------

_RAISES_FOR_YOU = set()   # code of janus operators whose raise is your statement's


def raises_for_user(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Marks an operator whose own ``raise`` is exactly what your statement raises
    eagerly there (``assert_``'s AssertionError of a false Python condition)."""
    _RAISES_FOR_YOU.add(fn.__code__)
    return fn


def _not_exact(error: BaseException, code_objects: Container[types.CodeType]) -> str | None:
    """Why ``error`` is not certainly eager's exception here, or None when it is."""
    frames = _traceback_codes(error.__traceback__)
    if not frames or (frames[-1] not in code_objects and frames[-1] not in _RAISES_FOR_YOU):
        return 'raised by %s, not by a raise statement of your code' % _where(frames[-1:])
    for code in frames:
        if code not in code_objects and not _is_janus(code):
            return 'raised through %s on its way' % _where([code])
    if not pytypes.holds_only_constants(error):
        return 'holding a value computed in the graph (its text would be the trace\'s)'
    return None


def _traceback_codes(tb: types.TracebackType | None) -> list[types.CodeType]:
    codes = []
    while tb is not None:
        codes.append(tb.tb_frame.f_code)
        tb = tb.tb_next
    return codes


def _is_janus(code: types.CodeType) -> bool:
    return code.co_filename.startswith(_JANUS_DIR)


def _where(codes: Sequence[types.CodeType]) -> str:
    if not codes:
        return 'Python itself'
    code = codes[0]
    return '%s (%s:%d)' % (code.co_name, code.co_filename, code.co_firstlineno)


def _converted_frames(frame: types.FrameType | None, code_objects: Container[types.CodeType]
                      ) -> tuple[tuple[types.CodeType, int], ...]:
    """(code, line) of the converted frames from ``frame`` outwards."""
    found = []
    while frame is not None:
        if frame.f_code in code_objects:
            found.append((frame.f_code, frame.f_lineno))
        frame = frame.f_back
    return tuple(found)


