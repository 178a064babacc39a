"""Errors janus raises.  Nothing must run before this module.

Every error a user can see is a ``JanusError``; each says what to do next.  A
refusal (``ConversionError`` and its kinds) names a ``reasons.Reason``: the data
``explain`` reads its advice from.
"""
from __future__ import annotations
import sys
import typing

from janus.reasons import Reason


class JanusError(Exception):
    """Base class of every error janus raises on its own behalf."""


class JanusOpsError(JanusError, ImportError):
    """The C++ op library is missing or was built against another TensorFlow."""


class JanusUsageError(JanusError, TypeError):
    """The janus API was used wrongly (e.g. decorating something without source)."""


class ConversionError(JanusError):
    """The generator cannot convert a function; it will run imperatively.

    ``reason``: the kind of refusal (a ``Reason``, whose advice ``explain`` shows);
    ``context``: what stopped it, on which value (the message); ``lineno`` and
    ``filename`` name the user's source line that stopped it.

    Library code that re-raises an exception with more text (Keras's
    ``e.__class__(message)``) makes one from a message alone, while it handles
    janus's refusal: the refusal's reason is taken from that one.

    ``statement_line``: set by the tracer when a trace stopped inside a statement
    of the converted function itself (the line of that statement, which may be a
    call that led to ``lineno`` in a callee): where a graph break would go.
    """

    statement_line = None
    route = None   # graphgen/nested.py: the Keras layer call a refusal was in

    def __init__(self, reason: Reason | str, context: str | None = None,
                 filename: str | None = None, lineno: int | None = None,
                 source_line: str | None = None) -> None:
        if context is None and isinstance(reason, str):
            context, reason = reason, getattr(  # type: ignore[assignment]
                sys.exc_info()[1], 'reason', None)
        assert isinstance(reason, Reason), 'a refusal names a Reason, not %r' % (reason,)
        self.reason = reason
        self.context = context
        self.filename = filename
        self.lineno = lineno
        self.source_line = source_line
        super().__init__(self._render())

    def _render(self) -> str | None:
        if self.lineno is None:
            return self.context
        where = '%s:%s' % (self.filename, self.lineno)
        text = '%s (at %s' % (self.context, where)
        if self.source_line:
            text += ': %s' % self.source_line.strip()
        return text + ')'


class Unsupported(ConversionError):
    """Raised at trace time by what janus does not convert; the tracer adds the
    user's source line."""


class ConversionDeferred(ConversionError):
    """A conversion refused for now only: a later call may convert (a Keras optimizer
    whose first ``apply_gradients`` builds its slots: that call runs imperatively)."""


class ScalarValueNeeded(ConversionError):
    """A trace used a relaxed Python number where its value matters (a shape, an
    index, library code): the janus function traces again with those numbers
    specialized by value.  ``lineage``: their ``(relaxation key, name)`` pairs."""

    def __init__(self, lineage: typing.Iterable[tuple], reason: Reason, context: str,
                 filename: str | None = None, lineno: int | None = None,
                 source_line: str | None = None) -> None:
        self.lineage = frozenset(lineage)
        super().__init__(reason, context, filename, lineno, source_line)


class StrictModeError(JanusError):
    """Raised instead of a silent imperative fallback when ``config.strict`` is on."""


class AssumptionFailed(JanusError):
    """An in-graph assumption (a ``Janus>Assert``) failed; used internally."""

    def __init__(self, assumption_id: int) -> None:
        self.assumption_id = assumption_id
        super().__init__('assumption %d failed' % assumption_id)


class InvariantError(ConversionError):
    """A janus invariant did not hold while tracing (a janus bug, never the user's):
    the call runs imperatively and ``explain`` shows the reason."""

    def __init__(self, context: str, filename: str | None = None, lineno: int | None = None,
                 source_line: str | None = None) -> None:
        super().__init__(Reason.INTERNAL_ERROR, context, filename, lineno, source_line)


class TraceBudgetExceeded(BaseException):
    """A trace ran past ``config.trace_seconds_limit`` (``TraceContext.check_deadline``).
    A ``BaseException``, so no ``except Exception`` on the way (janus's control-flow
    machinery, library code) takes it for a failed branch: the tracer turns it into a
    ``ConversionError`` (Reason.TRACE_TOO_LONG) and the function runs imperatively."""
