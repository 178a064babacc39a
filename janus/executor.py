"""Runs a cached graph and handles what can go wrong inside it.

Needs a ``GraphEntry`` whose guards held for this call.  Outcomes:

* the graph finishes: its outputs become the call's return value (state
  changes already happened, after every assertion passed);
* a ``Janus>Assert`` fails: nothing was changed (deferred updates), so the
  call is re-run imperatively and the broken assumption is reported;
* any other TF error: a graph without state changes is re-run imperatively,
  so the user sees eager's exception with eager's message; a graph with
  state changes re-raises the graph's error (the same exception type).
"""
import tensorflow as tf

from janus.runtime import ops


class AssertionBroke(Exception):
    """A Janus>Assert of the graph failed; carries the assumption."""

    def __init__(self, assumption):
        super().__init__(repr(assumption))
        self.assumption = assumption


class GraphError(Exception):
    """The graph raised a TF error that eager execution should reproduce."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


def run_graph(entry, arguments):
    """Runs ``entry``; raises AssertionBroke or GraphError for the caller to fall back."""
    try:
        return entry.run(arguments)
    except tf.errors.OpError as e:
        assumption_id = ops.parse_assumption_failure(e)
        if assumption_id is not None and assumption_id in entry.assumptions:
            raise AssertionBroke(entry.assumptions[assumption_id]) from None
        if entry.has_mutations:
            raise
        raise GraphError(e) from None
