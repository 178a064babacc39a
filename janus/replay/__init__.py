"""Replay: what runs on every call of a cached graph, and nothing else.

``entry`` (the cached graph: its guards checked, its host program, the run, the
write-back), ``executor`` (a run's outcomes: rollback, TF errors), ``host``
(checks and Python calls on relaxed numbers, before the run), ``templates``
(outputs back to Python values), ``rollback`` (variables kept and restored),
``rewrites`` (the grappler options a run uses).  Replay imports no trace-time
module (``graphgen/``, nor the runtime packages beyond the heap ops and the write records):
``tests/test_layout.py`` checks it.
"""
