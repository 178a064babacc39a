"""Every janus knob, one commented line each.  Nothing must run before this module.

Each knob ``name`` can be overridden from the environment as ``JANUS_NAME``
(read once, at import).  Tests change knobs only through ``config.patch``.
"""
from __future__ import annotations
import contextlib
import os
import typing


def _env(name: str, default: typing.Any) -> typing.Any:
    raw = os.environ.get('JANUS_' + name.upper())
    if raw is None:
        return default
    if isinstance(default, bool):
        return raw.strip().lower() in ('1', 'true', 'yes', 'on')
    return type(default)(raw)


class _Config:
    """Attribute bag of knobs; unknown names are an error, not a silent no-op."""

    _DEFAULTS = dict(
        profile_calls=3,          # imperative, profiled calls before the first graph is generated
        cache_size_limit=8,       # graphs kept per function; the least recently used is evicted
        cache_size_max=32,        # a function's cache that evicted as many graphs as it holds (call shapes cycling through more than it holds) doubles, up to this many
        recompile_limit=16,       # graphs a function may build in all; beyond it misses run imperatively
        failed_trace_limit=8,     # traces of a function that may fail (each call shape tried once); beyond it call shapes with no graph run imperatively, untried
        strict=False,             # turn every silent imperative fallback and every graph break into a StrictModeError
        enabled=True,             # False: every janus function simply runs imperatively
        relax_shapes=True,        # after a SHAPE guard miss, rebuild with differing dims unknown
        max_recursion_unroll=32,  # recursive calls of a function of yours inlined at most this deep in one trace (Python values deciding the recursion, behind guards); deeper: Reason.RECURSION (0: none)
        recursion_lowers_conds=False,  # True: a recursive graph function's tf.conds run as Switch/Merge in its own executor, not as If ops (measured neutral on TreeRNN and deep chains)
        recursion_specializes=True,  # a recursive graph function over objects with one node parameter is traced once per node class (isinstance and a list's length known; None and numbers run inline at the call); False: one body for nodes of any class
        recursion_inline_levels=0,  # levels of a recursive graph function's node calls traced into the calling level (fewer function calls per tree, but nested conds: measured 1.5x slower on TreeRNN; 0: every node call is a Janus>Invoke)
        recursion_runs_levels=True,  # a recursive function over objects whose calls decide only its results runs for every node of a depth at once (TF's pfor), shallowest first; False: one Janus>Invoke per node
        recursion_max_levels=48,  # deepest structure (with room to spare) a level-by-level graph is unrolled for; deeper: one Janus>Invoke per node
        recursion_keeps_outputs=True,  # a recursive graph function over objects keeps each call's outputs for its gradient (no subtree recomputed); False: the gradient recomputes them
        max_unroll=64,            # longest loop (trip count / while iterations) unrolled; longer: tf.while_loop (0: never unroll, the ablation's no-unrolling setting)
        trace_seconds_limit=60.0,  # a trace running longer than this is abandoned and the function runs imperatively (Reason.TRACE_TOO_LONG); 0: no limit
        specialize_shapes=True,   # graph inputs take the profiled static shapes; False: every dimension unknown (the ablation's no-specialization setting)
        inter_op_threads=0,       # TF inter-op threads, applied when janus is imported (0: TF's default; 1: a graph's ops run one at a time)
        reprofile_calls=1,        # imperative, profiled calls after a cache miss before a new graph is built
        heap_ops=False,           # read/write tensors in Python objects with in-graph Janus>PyGetAttr/PySetAttr ops instead of hoisted inputs/outputs (measured slower here)
        safe_rewrites=True,       # run janus's graphs without grappler's remapping, arithmetic optimization and constant folding (other numbers than eager in TF 2.21, replay/rewrites.py)
        relax_scalars=True,       # a Python int/float that changes between calls becomes a graph input (a dynamic scalar, values/scalars.py) instead of a graph per value
        scalar_values=2,          # distinct values a number location shows before it is relaxed (at least 2)
        speculate_after=3,        # profiled calls (at most the function's profile_calls) that must show a tensor test's outcome before it is assumed; fewer: real control flow (tf.cond) there
        assumed_break_rate=0.5,   # a graph assuming an outcome where real control flow failed to build is dropped once that assumption broke more than 1 + this share of its successful runs (each break costs a graph run and an imperative re-run)
        assumed_rebuilds=3,       # graphs dropped for assumed_break_rate that are rebuilt on the profile's newest majority outcome; beyond it that call shape runs imperatively
        host_checks=True,         # recompute checks and Python calls on relaxed numbers on the host before a graph runs (graphgen/hostcheck.py); False: they stay in the graph
        fast_replay=True,         # feed hoisted reads through janus's own guarded readers, not TF's capture machinery (graphgen/tracer.py)
        restore_on_error=True,    # a graph with an op that may fail after a variable update keeps those variables' values before each run; a failure restores them and re-runs the call imperatively (eager's exception and state; graphgen/rollback.py); False: the graph's error is raised, state changed
        graph_breaks=True,        # a statement janus cannot put in a graph runs in Python and the statements around it in graphs of their own (graphgen/segments.py); False: the whole function runs imperatively
        segment_min_ops=4,        # a graph-break segment whose graph runs fewer tensor ops than this runs as plain Python (a janus call costs about as much as 4 eager ops)
        segment_profile_calls=1,  # profiled calls of a graph-break segment before its graph (the function's own calls profiled its statements already)
        jit_compile='off',        # compile janus's graphs with XLA: 'off', 'on' (those XLA can compile whole), 'auto' (time both on each graph's first runs, keep the faster; replay/xla.py)
        measured_floor=True,      # time janus's calls against plain (eager) ones; a function or segment slower than eager runs plainly, measured again later (floor.py)
        floor_window=8,           # steady janus calls (after warm-up) timed before each decision of the floor
        floor_eager_calls=3,      # plain calls run to time eager when the floor has no eager time to compare with
        floor_margin=0.05,        # janus may be this share slower than eager before the floor runs the function plainly (timing noise)
        floor_recheck=32,         # calls before the floor measures a decision again (doubling while the decision repeats, up to 64x)
        floor_sampling_share=0.02,  # rechecking a decision to keep janus may cost at most this share of the calls' time (its eager samples)
        floor_warmup_graphs=2,    # the first this many graphs of each janus function (or segment) are warm-up for the floor; later ones (retraces) are steady cost
        log_recompiles=True,      # log (logger 'janus') which guard failed on every cache miss
    )

    if typing.TYPE_CHECKING:   # the knobs are set from _DEFAULTS: the checker reads any name
        def __getattr__(self, name: str) -> typing.Any: ...

    def __init__(self) -> None:
        for name, default in self._DEFAULTS.items():
            object.__setattr__(self, name, _env(name, default))

    def __setattr__(self, name: str, value: typing.Any) -> None:
        if name not in self._DEFAULTS:
            raise AttributeError('janus.config has no knob %r; knobs: %s'
                                 % (name, ', '.join(sorted(self._DEFAULTS))))
        object.__setattr__(self, name, value)

    @contextlib.contextmanager
    def patch(self, **knobs: typing.Any) -> typing.Iterator[_Config]:
        """Set knobs for the duration of a ``with`` block, then restore them."""
        saved = {name: getattr(self, name) for name in knobs}
        try:
            for name, value in knobs.items():
                setattr(self, name, value)
            yield self
        finally:
            for name, value in saved.items():
                setattr(self, name, value)

    def __repr__(self) -> str:
        return 'janus.config(%s)' % ', '.join(
            '%s=%r' % (n, getattr(self, n)) for n in self._DEFAULTS)


config = _Config()
