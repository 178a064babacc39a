"""Runs a cached graph and handles what can go wrong inside it.

Needs a ``GraphEntry`` whose guards held for this call.  Outcomes:

* the graph finishes: its outputs become the call's return value (state
  changes already happened, after every assertion passed);
* a ``Janus>Assert`` fails: nothing was changed (deferred updates), so the
  call is re-run imperatively and the broken assumption is reported; a check
  inside a loop that changes state runs after some changes (``LATE_CHECKS``
  in the tracer): its graph always has a ``Rollback``, restored first;
* any other TF error in an op that runs before every state change (the
  tracer makes state changes wait for those) or in a graph without state
  changes: the call is re-run imperatively, so the user sees eager's own
  result or exception.  An error in an op that may run after a variable
  update: the graph's ``Rollback`` (``graphgen/rollback.py``) kept those
  variables' values before the run and assigns them back, then the call is
  re-run the same way.  Only a graph whose changes cannot be undone (an
  iterator read, ``tf.print``) or built with ``config.restore_on_error`` off
  re-raises the graph's error (same exception type, graph's message), because
  state may already have changed and must not change twice;
* janus fails after the run (rebuilding the return value, writing back):
  ``WriteBackFailed`` says whether anything changed yet (a rollback undoes
  the graph's updates when no Python write was applied yet); an earlier
  failure of janus's own (flattening the arguments) raises before the graph ran.
"""
from __future__ import annotations
import re
import typing

import tensorflow as tf

from janus.config import config
from janus.graph import ops


_NODE = re.compile(r'\{\{node ([^}]+)\}\}')


def apply_thread_config() -> None:
    """Sizes TF's inter-op thread pool from ``config.inter_op_threads`` (0: TF's
    default).  TF fixes the pool when its runtime starts, so this runs when janus
    is imported; later changes of the knob have no effect (a warning says so)."""
    if not config.inter_op_threads:
        return
    try:
        tf.config.threading.set_inter_op_parallelism_threads(config.inter_op_threads)
    except RuntimeError:
        import logging
        logging.getLogger('janus').warning(
            'janus: inter_op_threads=%d ignored: TensorFlow had already started; set '
            'JANUS_INTER_OP_THREADS before the program runs TF ops' % config.inter_op_threads)


class AssertionBroke(Exception):
    """A Janus>Assert of the graph failed; carries the assumption."""

    def __init__(self, assumption: typing.Any) -> None:
        super().__init__(repr(assumption))
        self.assumption = assumption


class GraphError(Exception):
    """The graph raised a TF error that eager execution should reproduce.
    ``restored``: how many variables the graph had updated were assigned back."""

    def __init__(self, error: BaseException, restored: int = 0) -> None:
        super().__init__(str(error))
        self.error = error
        self.restored = restored


class WriteBackFailed(Exception):
    """janus failed after the graph ran, rebuilding the return value or writing the
    shadow heap back.  ``state_changed``: whether the graph or a write already
    changed state (then the call must not be re-run: it would change it twice);
    ``written``: whether a Python write was applied (no rollback undoes that)."""

    def __init__(self, error: BaseException, state_changed: bool,
                 written: bool | None = None) -> None:
        super().__init__('%s: %s' % (type(error).__name__, error))
        self.error = error
        self.state_changed = state_changed
        self.written = state_changed if written is None else written


class GraphInvalid(Exception):
    """TF could not instantiate janus's graph (a cycle janus's control dependencies
    made): a janus bug, and nothing ran, so the call runs as plain Python."""

    def __init__(self, error: BaseException) -> None:
        super().__init__('%s: %s' % (type(error).__name__, str(error).strip()[:300]))
        self.error = error


# TF's messages for a function body it cannot instantiate (nothing of it ran).
_NOT_INSTANTIATED = ('nodes in a cycle', 'Graph has cycle')


def run_graph(entry: typing.Any, arguments: typing.Mapping[str, typing.Any]) -> typing.Any:
    """Runs ``entry``; raises AssertionBroke or GraphError for the caller to fall back.
    Whenever the call is to be re-run (every exception but the graph's own error after
    a state change, or a failed write-back that changed state), the Python generators
    the host program drew from are put back first (``trace/host_draws.py``)."""
    rollback = entry.rollback
    saved = rollback.save() if rollback is not None else None   # before anything ran
    host = getattr(entry, 'host', None)
    drawn = host.saved_states() if host is not None else None
    try:
        return entry.run(arguments)
    except tf.errors.OpError as e:
        if isinstance(e, tf.errors.InvalidArgumentError) and any(
                text in str(e) for text in _NOT_INSTANTIATED):
            _put_back(host, drawn)
            raise GraphInvalid(e) from None
        classified = _classify(entry, e, saved)
        if classified is not e:
            _put_back(host, drawn)
        raise classified from None
    except WriteBackFailed as e:
        if e.state_changed and not e.written and saved is not None and _restored(rollback,
                                                                                   saved):
            e.state_changed = False   # only the graph changed state: undone
        if not e.state_changed:
            _put_back(host, drawn)
        raise
    except BaseException:
        _put_back(host, drawn)   # nothing ran (the host program's own failures among them)
        raise


def _put_back(host: typing.Any, drawn: list | None) -> None:
    if drawn is not None:
        host.restore(drawn)


def _classify(entry: typing.Any, error: tf.errors.OpError,
              saved: list | None = None) -> BaseException:
    """What a graph's TF ``error`` means for the call (the exception to raise);
    ``saved``: the values ``entry.rollback`` kept before the run, if any."""
    try:
        assumption_id = ops.parse_assumption_failure(error)
        if assumption_id is not None and assumption_id in entry.assumptions:
            # A check inside a loop that changes state ran after some of the changes
            # (tracer.defer_state_updates): they are undone before the imperative re-run.
            if saved is not None and not _restored(entry.rollback, saved):
                return error
            return AssertionBroke(entry.assumptions[assumption_id])
        safe = not entry.has_mutations or _in_safe_op(_failing_node(error), entry.safe_error_ops)
    except Exception:  # noqa: BLE001 - janus cannot tell: assume state may have changed
        safe = not entry.has_mutations
    if not safe and saved is not None and _restored(entry.rollback, saved):
        return GraphError(error, restored=len(saved))
    # Unsafe: state may have changed, re-running would change it twice.
    return GraphError(error) if safe else error


def _restored(rollback: typing.Any, saved: list) -> bool:
    """Assigns the kept values back (the variables as they were before the run);
    False when that failed (then state may have changed: no re-run)."""
    try:
        rollback.restore(saved)
    except Exception:  # noqa: BLE001 - janus cannot undo the run: the graph's error stands
        return False
    return True


def _in_safe_op(node: str | None, safe_ops: typing.AbstractSet[str]) -> bool:
    """Whether the failing node is one of the graph's ops that run before any state
    change, or a node inside one of those that run other graphs (``map/while/...``
    runs in the body of ``map/while``; a name scope is no such op: the gradient of
    ``dense/MatMul`` is ``gradient_tape/dense/MatMul/MatMul``, whatever ``.../MatMul`` is)."""
    if node is None:
        return False
    if node in safe_ops:
        return True
    calls = getattr(safe_ops, 'calls', ())
    parts = node.split('/')
    return any('/'.join(parts[:n]) in calls for n in range(len(parts) - 1, 0, -1))


def _failing_node(error: BaseException) -> str | None:
    """The name of the graph node a TF error names (``[[{{node NAME}}]]``), or None."""
    match = _NODE.search(getattr(error, 'message', '') or str(error))
    return match.group(1) if match else None
