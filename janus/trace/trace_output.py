"""Default-deny for output at trace time: a trace that writes to stdout refuses.

Needs ``operators`` (which thread traces).  janus's own ``print`` is deferred
(a write replayed after each successful run), so nothing janus converts
writes to ``sys.stdout`` while tracing.  Anything that does is code janus
runs as is at trace time, typically library code that prints
(``tf.autograph.trace``): it would print once, with symbolic tensors, where
eager prints on every call.  So around a trace ``sys.stdout`` is a proxy
that, in a thread that is tracing, drops the text, records the refusal on
the trace (library code may swallow the exception) and raises
``Unsupported``; other threads write through.  The proxy is installed only
while some thread traces and wraps whatever ``sys.stdout`` was then
(pytest's capsys/capfd streams included).
"""
from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from janus.errors import Unsupported
from janus.reasons import Reason
from janus.trace import tracing

_lock = threading.Lock()
_tracing = 0      # traces in progress, all threads
_proxy = None


class _TracingStdout:
    """Writes through, except from a thread that is tracing."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        ctx = tracing.current_or_none()
        if ctx is None:
            if self._stream is None:   # no stdout at all (pythonw): print() writes nothing
                return len(text)
            return self._stream.write(text)
        reason = ('code janus runs as is while tracing wrote %r to standard output: it would '
                  'print once per graph, not once per call' % _short(text))
        refusals = ctx.refusals
        if refusals is not None:
            refusals.append((Reason.LIBRARY_SIDE_EFFECT, reason))
        raise Unsupported(Reason.LIBRARY_SIDE_EFFECT, reason)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + '...'


def _install() -> None:
    global _tracing, _proxy
    with _lock:
        if _tracing == 0:
            _proxy = _TracingStdout(sys.stdout)
            sys.stdout = _proxy
        _tracing += 1


def _uninstall() -> None:
    global _tracing, _proxy
    with _lock:
        _tracing -= 1
        if _tracing == 0:
            if sys.stdout is _proxy:   # else someone replaced it meanwhile: leave theirs
                sys.stdout = _proxy._stream
            _proxy = None


@contextlib.contextmanager
def refused() -> Iterator[None]:
    """Within the block, stdout written by a tracing thread refuses its trace."""
    _install()
    try:
        yield
    finally:
        _uninstall()
