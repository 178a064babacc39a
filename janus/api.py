"""``janus.function``: the warm-up / generate / replay state machine.

Needs nothing run before it.  ``JanusFunction.__call__`` is the whole
execution model of the paper's Figure 2 in one place:

    replay:   guards hold for a cached graph → run it (fall back on a broken assertion)
    warm-up:  fewer than ``profile_calls`` profiled calls → run imperatively, profiled
    generate: convert + trace a graph for this call's assumptions, cache it, run it

It accepts anything eager code can call (``callables.py``: functions, bound
methods, ``functools.partial``, callable objects, Keras models).  Anything
janus cannot do for a call runs that call imperatively, records why
(``janus.explain``), and raises instead when strict mode is on.

janus's own failures never reach the user.  An exception janus raises while
binding, checking guards, profiling, converting, tracing or writing back is
caught where no user code has run yet (or where janus knows nothing
changed): the call runs as plain Python and ``explain`` shows the error
with its traceback.  After user code ran, janus's bookkeeping errors are
recorded and the user's result stands.  User code never runs twice in a call.
"""
import collections
import dataclasses
import difflib
import enum
import functools
import inspect
import logging
import threading
import time
import traceback
import types
from typing import Callable, Optional

import tensorflow as tf

from janus import callables, function_state, guards, profiler
from janus.events import Event, EventKind  # noqa: F401 - janus.api.EventKind, as before
from janus import floor as floor_module
from janus.floor import CallKind
from janus.advising import annotate, reason_text   # where + advice for every reason
from janus.config import config
from janus.errors import (ConversionDeferred, ConversionError, JanusError, JanusUsageError,
                          StrictModeError)
from janus.replay import xla
from janus.replay.executor import AssertionBroke, GraphError, GraphInvalid, WriteBackFailed, run_graph
from janus.graphgen import build, generator, segments, tracer
from janus.graphgen.plan import Verdict
from janus.pyct import frontend, parser
from janus.reasons import Reason

log = logging.getLogger('janus')

# ``traceback``: for janus's internal errors, the last frames, so explain shows where.


class Step(enum.Enum):
    """How one call runs."""
    REPLAY = 'replay'        # a cached graph whose guards hold
    PROFILE = 'profile'      # imperatively, through the profiler's probed twin
    GENERATE = 'generate'    # build a graph for this call, then replay it
    PLAIN = 'plain'          # plain Python: the user's callable itself
    SPLIT = 'split'          # graph breaks: the skeleton in Python, its segments in graphs


class Stats:
    FIELDS = ('calls', 'profiled_calls', 'graphs_built', 'graph_calls', 'fallbacks',
              'imperative_calls', 'cache_misses', 'evictions',
              'split_calls',       # calls run with graph breaks (segments.py)
              'graph_part_calls')  # of those, the calls in which a segment ran a graph

    def __init__(self):
        for name in self.FIELDS:
            setattr(self, name, 0)

    def as_dict(self):
        return {name: getattr(self, name) for name in self.FIELDS}


class _Call:
    """One call: the arguments as the user passed them, and as the target function
    gets them (a bound method's ``self``, a partial's arguments in front)."""

    __slots__ = ('args', 'kwargs', 'full_args', 'full_kwargs', 'bound', 'arguments')

    def __init__(self, args, kwargs, target):
        self.args, self.kwargs = args, kwargs
        self.full_args = target.args + args
        self.full_kwargs = {**target.kwargs, **kwargs} if target.kwargs else kwargs
        self.bound = self.arguments = None


def short_traceback(error, frames=6):
    """The last ``frames`` frames of ``error``'s traceback and its message, as text."""
    lines = traceback.format_exception(type(error), error, error.__traceback__, limit=-frames)
    return ''.join(lines).rstrip()


# What a JanusFunction keeps for its whole life (plus what ``callables.copy_identity``
# copies from the callable).  Everything janus learns per function is a field of its
# ``state`` (function_state.FunctionState), replaced wholesale on a redefinition;
# ``_redefined`` asserts that nothing else was set on the JanusFunction.
LIFETIME_ATTRIBUTES = frozenset((
    'fn', 'distributed', '_profile_calls', '_strict', '_jit', 'target', 'function', 'name',
    'defined_at', 'stats', 'events', '_lock', '_local', 'state', '_reentry_noted',
    'split_owner',
    'logged_reasons', '__wrapped__') + functools.WRAPPER_ASSIGNMENTS)


class JanusFunction(callables.JanusCallable):
    """A callable run through janus; behaves like the callable itself.

    Its per-definition state (profile, graph cache, failed conversions, relaxed
    sites and numbers...) is ``self.state``; each field also reads and writes as
    an attribute of the same name (``self.cache``, ``self.profile``)."""

    def __init__(self, fn, profile_calls=None, strict=None, distributed=False, jit_compile=None):
        self.fn = fn                     # what a plain call runs: the user's callable
        self.distributed = distributed   # ranks agree on assumptions (library/distributed.py)
        self._profile_calls = profile_calls
        self._strict = strict
        self._jit = None if jit_compile is None else xla.setting(jit_compile)
        self.target = callables.resolve(fn)
        self.function = self.target.function   # the Python function profiled and converted
        self.name = callables.describe(fn)
        self.stats = Stats()               # lifetime counters (janus.stats)
        self.events = collections.deque(maxlen=200)
        self.logged_reasons = set()   # (kind, detail) advising.note logged already
        # a segment's: (owner JanusFunction, its cut's lines, slot; ('rest of a call',
        # depth): a part of a segment cut for the rest of one call, _cut_for_this_call)
        self.split_owner = None
        self._lock = threading.RLock()     # guards the cache, profile and budget, not the runs
        self._local = threading.local()    # per thread: is a call of this function running
        self._start_over()
        callables.copy_identity(self, fn)

    def _start_over(self):
        """A fresh state record for the function as it is now (again after its
        ``__code__``/``__defaults__`` were rebound: eager runs the new ones)."""
        failed = ConversionError(*self.target.reason) if self.target.reason is not None else None
        self.state = function_state.FunctionState(function_state.definition(self.function),
                                                  self._signature(), failed)
        self.profiled_fn = _UNMADE   # made at the first profiled call (a segment may have none)

    # -- knobs -----------------------------------------------------------
    @property
    def profile_calls(self):
        return config.profile_calls if self._profile_calls is None else self._profile_calls

    @property
    def strict(self):
        return config.strict if self._strict is None else self._strict

    @property
    def xla_setting(self):
        return xla.setting(config.jit_compile) if self._jit is None else self._jit

    @property
    def __janus_function__(self):
        return self

    # -- the state machine -----------------------------------------------
    def __call__(self, /, *args, **kwargs):
        self.stats.calls += 1
        if not config.enabled or not tf.executing_eagerly():
            return self.fn(*args, **kwargs)   # inside someone else's graph: trace through
        if getattr(self._local, 'running', False):
            return self._run_reentered(args, kwargs)
        self._local.running = True
        try:
            return self._call(_Call(args, kwargs, self.target))
        finally:
            self._local.running = False

    def _call(self, call):
        floor = self.state.floor
        with self._lock:
            plain = floor.plain_now()
        if plain:   # janus was slower than eager here, or eager is being timed (floor.py)
            started = time.perf_counter()
            try:
                return self._run_plain(call)
            finally:
                self._timed(floor, CallKind.EAGER, started)
        started, warmup = time.perf_counter(), floor_module.WARMUP_WORK.count
        try:
            step, entry, misses = self._decide(call)   # janus bookkeeping: no user code runs
        except StrictModeError:
            raise
        except Exception as e:  # noqa: BLE001 - janus's own failure: run the call as Python
            self._internal_error('preparing the call', e)
            step = Step.PLAIN   # run below, outside this handler (no janus __context__)
        if step is Step.PLAIN:
            return self._run_plain(call)              # could not generate, or bad arguments
        kind = CallKind.PROFILED if step is Step.PROFILE and not misses else CallKind.JANUS
        try:
            if step is Step.REPLAY:
                return self._run(entry, call)
            if step is Step.SPLIT:
                return self._run_split(entry, call)
            return self._run_profiled(call, count=not misses)   # warm-up, re-profile
        finally:
            if kind is CallKind.JANUS and floor_module.WARMUP_WORK.count > warmup:
                kind = CallKind.WARMUP   # it (or a segment, a callee) profiled or first traced
            self._timed(floor, kind, started)

    def _timed(self, floor, kind, started):
        """Reports a call's time to the measured floor; records what it decided."""
        seconds = time.perf_counter() - started
        with self._lock:
            decision = floor.note(kind, seconds, self.stats.calls)
        if decision is not None:
            self._event(EventKind.FLOOR, decision.describe())

    def _decide(self, call):
        """(Step, entry, misses) for this call; may generate a graph."""
        if self.function is None:   # nothing janus can profile or convert (a generator)
            self._give_up(self.failed_conversion)
            return Step.PLAIN, None, ()
        if not function_state.same_definition(self.function, self.state.defined_as):
            self._redefined()
        if self.state.split_always is not None:   # the converter refused a statement
            return Step.SPLIT, self.state.split_always, ()
        if self.state.superseded:   # a segment of a cut made again: no trace per call
            return Step.PLAIN, None, ()
        try:
            call.bound = self._bind(call.full_args, call.full_kwargs)
        except TypeError:
            return Step.PLAIN, None, ()   # the call raises exactly what Python raises
        call.arguments = call.bound.arguments
        with self._lock:   # bookkeeping only: user code and graphs run unlocked
            entry, misses = self.cache.lookup(call.arguments)
            if entry is not None:
                return Step.REPLAY, entry, misses
            split = self.state.split_for(call.arguments)
            if split is not None:   # this call shape failed at a statement: cut there
                return Step.SPLIT, split, ()
            step = self._next_step(misses)
            if misses and (self._relax_scalars(call.arguments)
                           | self._pass_lists_whole(misses, call.arguments)
                           | self._deeper_structures(misses)):
                if step is Step.PROFILE:
                    self.profile.calls -= 1   # unclaimed: the new graph needs no new profile
                self.reprofile_budget = 0
                step = Step.GENERATE
            if step is Step.GENERATE:
                entry = self._generate(call.bound, call.arguments)
                if isinstance(entry, segments.Split):
                    return Step.SPLIT, entry, misses
                if entry is None:
                    return Step.PLAIN, None, misses
                self.reprofile_budget = config.reprofile_calls
                return Step.REPLAY, entry, misses
        return step, None, misses

    def _bind(self, args, kwargs):
        """inspect's bind + apply_defaults; the common all-positional call without
        defaults to fill skips inspect (it was a tenth of the replay overhead)."""
        state = self.state
        names = state.positional_names
        if names is not None and not kwargs and len(args) == len(names):
            return inspect.BoundArguments(state.signature, dict(zip(names, args)))
        bound = state.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound

    def _relax_scalars(self, arguments):
        """After a miss: numbers whose value changed become graph inputs (relaxation.py)."""
        relaxed = self.scalars.relax_after_miss(self.cache.newest(), arguments)
        for text in relaxed:
            self._event(EventKind.SCALAR_RELAXED, text)
        return bool(relaxed)

    def _deeper_structures(self, misses):
        """After a graph missed only because a structure is deeper than its levels
        (``recursion_levels``): the next graph, built at once, computes more."""
        return any(m.kind is guards.GuardKind.STRUCTURE_MATCH
                   and getattr(m.actual, 'rebuild_now', False) for m in misses)

    def _pass_lists_whole(self, misses, arguments):
        """After a miss on a list argument's length (a history that grows every call):
        the list is passed as itself from now on, its items read through it at run
        time (call_signature.Signature ``opaque``), one graph for every length."""
        relaxed = [m.where for m in misses if m.kind is guards.GuardKind.LEN_MATCH
                   and type(arguments.get(m.where)) is list and m.where not in self.opaque_lists]
        for name in relaxed:
            self.opaque_lists.add(name)
            self._event(EventKind.LIST_PASSED_WHOLE, 'list argument %s changed length (%s): passed '
                        'as itself from now on, one graph for every length' % (
                            name, ', '.join('%s -> %s' % (m.expected, m.actual) for m in misses
                                            if m.where == name)))
        return bool(relaxed)

    def _redefined(self):
        """The function's ``__code__``/``__defaults__`` were rebound: everything learned
        about the old definition goes with its state record."""
        with self._lock:
            self._start_over()
        stray = set(vars(self)) - LIFETIME_ATTRIBUTES - set(getattr(self.fn, '__dict__', ()))
        assert not stray, 'per-function state outside JanusFunction.state: %s' % sorted(stray)
        self._event(EventKind.REDEFINED, '%s.__code__/__defaults__ were rebound; profiling and '
                    'converting the new definition' % self.function.__qualname__)

    def _next_step(self, misses):
        """PROFILE (warm-up, or re-profiling a new regime) or GENERATE."""
        if self.profile.calls < self.profile_calls:
            self.profile.calls += 1   # claimed now, so concurrent calls profile only as asked
            return Step.PROFILE
        if misses:
            self._note_miss(misses)
            if self.reprofile_budget > 0:
                self.reprofile_budget -= 1
                self.profile.calls += 1
                return Step.PROFILE
        return Step.GENERATE

    def __get__(self, obj, objtype=None):
        # Only a function becomes a method in a class body; a janus function of a
        # bound method, partial or object stays what it is, as in eager Python.
        if obj is None or not isinstance(self.fn, types.FunctionType):
            return self
        return BoundJanusMethod(self, obj)

    # -- the ways a call runs --------------------------------------------
    def _run(self, entry, call):
        failure = None
        try:
            result = run_graph(entry, call.arguments)
        except (AssertionBroke, GraphError, GraphInvalid, WriteBackFailed) as e:
            failure = e
        except tf.errors.OpError:
            raise   # after a state change: the graph's own error (executor.py)
        except Exception as e:  # noqa: BLE001 - janus failed before the graph ran
            failure = e
        if failure is not None:
            # Handled outside the except block: the re-run's own exceptions must not
            # carry janus's as their __context__ (eager raises them without one).
            return self._after_failure(entry, failure, call)
        entry.runs += 1
        self.stats.graph_calls += 1
        return result

    def _after_failure(self, entry, failure, call):
        if isinstance(failure, AssertionBroke):
            return self._after_broken_assumption(entry, failure, call)
        if isinstance(failure, GraphError):
            return self._after_graph_error(entry, failure, call)
        if isinstance(failure, WriteBackFailed):
            return self._after_failed_write_back(entry, failure, call)
        if isinstance(failure, GraphInvalid):
            return self._after_invalid_graph(entry, failure, call)
        self._internal_error('running the graph', failure)
        return self._run_plain(call)

    def _after_broken_assumption(self, entry, broke, call):
        split = self._safely('cutting for the other path', self._split_for_other_path, entry,
                             broke)
        if split is not None:
            return self._run_split(split, call)
        self.stats.fallbacks += 1
        kept = broke.assumption.site in entry.assumed_instead
        self._event(EventKind.FALLBACK, 'assumption %r broke; re-ran imperatively%s' % (
            broke.assumption, ' (assumed where real control flow failed to build: kept while '
            'rare)' if kept else ''), filename=broke.assumption.filename,
            lineno=broke.assumption.lineno, assumption=broke.assumption.kind,
            sites=(broke.assumption.site,), kept=kept)
        try:
            result = self._run_profiled(call, count=False, claimed=False)
        except Exception as e:
            # The call raised, eagerly too: an exceptional path, not a reason
            # to give up the assumption for the calls that do not raise.
            self._event(EventKind.FALLBACK_RAISED, '%s; assumptions kept' % type(e).__name__)
            raise
        self._safely('relaxing assumptions', self._relax, entry, broke.assumption)
        return result

    def _split_for_other_path(self, entry, broke):
        """The cut this call runs instead of an imperative re-run, or None.

        The broken assumption was made only because a statement under it cannot be
        in a graph (``print(loss.numpy())`` under ``if self.step % 10 == 0``), and it
        broke before anything changed (``AssertionBroke``: checked on the host, or the
        graph's write-back never ran).  The call runs the function cut at that
        statement, and the graph stays for the calls that take the assumed path: the
        nine in ten steps that log nothing keep the whole-function graph."""
        site = broke.assumption.site
        error = self.speculation.breakable.get(site)
        if (error is None or site not in entry.assumed_instead or self.strict
                or not config.graph_breaks or self.split_owner is not None):
            return None
        line = error.statement_line
        if line is None or not tracer.breaks_at_statement_line(error, line):
            return None
        self._route(error, line)
        lines = frozenset((line,))
        with self._lock:
            made = self.state.splits.get(lines)
            if made is None:
                made = self._cut(error, lines, line)
                if made is not None:
                    self._event(EventKind.GRAPH_BREAK, 'calls that take the other path at %s run '
                                'the function cut at line %d; the graph stays for the others'
                                % (self.site_name(site), line), lineno=line,
                                filename=self.function.__code__.co_filename)
            if made is not None:
                entry.assumed_breaks += 1
                if entry.assumed_breaks > max(2, entry.runs):
                    # the other path is the usual one now: its calls go straight to the cut
                    self.cache.remove(entry)
                    self.state.note_split(entry.signature, made)
        return made

    def _after_graph_error(self, entry, error, call):
        restored = (' after restoring the %d variables it had updated' % error.restored
                    if error.restored else '')
        self._event(EventKind.GRAPH_ERROR, '%s (%s); re-ran imperatively%s for eager\'s result '
                    'or exception' % (type(error.error).__name__, str(error.error).strip()[:160],
                                      restored))
        try:
            return self._run_profiled(call, count=False, claimed=False)
        finally:
            self._safely('relaxing assumptions', self._relax, entry, None)

    def _after_failed_write_back(self, entry, failure, call):
        """janus failed after the graph ran: re-run only if nothing changed yet.  The
        graph is dropped and its call shape runs imperatively from now on."""
        self._safely('evicting the graph', self._drop_failed_entry, entry, failure)
        if failure.state_changed:
            self._internal_error('writing back the graph\'s results', failure.error,
                                 after_user_code=True)
            raise JanusError('janus failed after the graph of %s changed state, so the call '
                             'cannot be re-run (see janus.explain): %s'
                             % (self.name, failure)) from failure.error
        self._internal_error('writing back the graph\'s results', failure.error)
        return self._run_plain(call)

    def _after_invalid_graph(self, entry, failure, call):
        """TF could not instantiate the graph (a janus bug): nothing ran.  The graph is
        dropped, its call shape runs imperatively, and this call runs as plain Python."""
        self._safely('evicting the graph', self._drop_failed_entry, entry, failure)
        self._internal_error('running the graph', failure.error)
        return self._run_plain(call)

    def _drop_failed_entry(self, entry, failure):
        what = ('TF could not run the graph janus built' if isinstance(failure, GraphInvalid)
                else 'janus internal error while writing back a graph\'s results')
        with self._lock:
            self.cache.remove(entry)
            self.state.note_failed(entry.signature, ConversionError(Reason.INTERNAL_ERROR,
                                                                    '%s: %s' % (what, failure)))

    def _relax(self, entry, assumption):
        """After a fallback: sites whose assumed outcomes broke are never assumed again;
        relaxed numbers whose SCALAR check broke are specialized by value again."""
        if assumption is not None and assumption.lineage:
            text = self.scalars.pin(assumption.lineage, 'its check %r broke' % assumption)
            if text is not None:
                self.cache.remove(entry)
                self._event(EventKind.SCALAR_PINNED, text)
        with self._lock:
            outcome = self.speculation.after_break(entry, assumption, self.recorder.last_call)
        if outcome.unbuildable:
            self._after_unbuildable_break(entry, outcome)
        if outcome.relaxed:
            self.cache.remove(entry)
            self.reprofile_budget = 0
            where = ', '.join(self.site_name(key) for key in outcome.relaxed)
            self._event(EventKind.RELAXED, '%s: assumed outcomes dropped, next graph builds dynamic '
                        'control flow there' % where, sites=tuple(outcome.relaxed))

    def _after_unbuildable_break(self, entry, outcome):
        """A graph whose sites are assumed only because real control flow failed to
        build there broke there: kept, rebuilt or given up (``plan.SpeculationState``)."""
        if outcome.verdict is Verdict.KEEP:
            return
        if outcome.verdict is Verdict.BREAK:
            with self._lock:
                self.cache.remove(entry)
            if self._break_at(outcome.break_error, entry.signature) is not None:
                return
            outcome = dataclasses.replace(outcome, verdict=Verdict.REBUILD)
        where = ', '.join(self.site_name(key) for key in outcome.unbuildable)
        text = ('%s: the outcome janus had to assume (real control flow failed to build there) '
                'broke in %d of %d runs' % (where, outcome.breaks, outcome.runs))
        with self._lock:
            self.cache.remove(entry)
            if outcome.verdict is Verdict.GIVE_UP:
                self.state.note_failed(entry.signature,
                                       ConversionError(Reason.ASSUMED_OUTCOME_BREAKS, text))
        if outcome.verdict is Verdict.GIVE_UP:
            self._event(EventKind.IMPERATIVE, text, reason=Reason.ASSUMED_OUTCOME_BREAKS,
                        sites=tuple(outcome.unbuildable))
        else:   # the outcomes may have changed for good (a warm-up ended): assume them anew
            self._event(EventKind.GRAPH_DROPPED, '%s; graph dropped, the next one assumes the outcomes '
                        'the profile shows most often now' % text,
                        sites=tuple(outcome.unbuildable))

    def site_name(self, key):
        """A site as the user reads it: the function, the line and the statement kind."""
        return self.state.site_name(key)

    def _run_profiled(self, call, count=True, claimed=True):
        if count:
            self.stats.profiled_calls += 1
            floor_module.WARMUP_WORK.note()
        else:
            self.stats.imperative_calls += 1
        if not claimed:
            self.profile.calls += 1
        instrumented = self._start_profiling(call)
        if instrumented is None:
            result = self.fn(*call.args, **call.kwargs)
        else:
            try:
                result = instrumented(*call.full_args, **call.full_kwargs)
            finally:
                self._safely('profiling', self._finish_profiling)
        self._safely('profiling', self._record_return, result)
        return result

    def _start_profiling(self, call):
        """The probed twin to run (the recorder started), or None to run plainly."""
        try:
            with self._lock:
                self.profile.record_arguments(call.arguments)
            if self.profiled_fn is _UNMADE:
                self.profiled_fn = self._make_profiled(self.recorder)
            if self.profiled_fn is None:
                return None
            self.recorder.begin_call()
            return self.profiled_fn
        except StrictModeError:
            raise
        except Exception as e:  # noqa: BLE001 - profiling is optional; the call is not
            self._internal_error('profiling', e)
            return None

    def _finish_profiling(self):
        self.recorder.end_call()
        broken = self.recorder.broken
        if broken is not None and self.profiled_fn is not None:
            self.profiled_fn = None   # instrumenting stops; later calls profile plainly
            self._record_internal('profiling (probed twin; stopped instrumenting)',
                                  broken[0], broken[1])

    def _record_return(self, result):
        self.profile.returns[type(result).__name__] += 1

    def _run_plain(self, call):
        self.stats.imperative_calls += 1
        return self.fn(*call.args, **call.kwargs)

    def _run_split(self, split, call):
        """The skeleton: the statements janus could not convert in Python, each
        segment around them through its own janus function."""
        self.stats.split_calls += 1
        parts = [part for part in split.slots if isinstance(part, JanusFunction)]
        before = sum(_graph_runs(part) for part in parts)
        routes = self.state.routes
        try:
            if not routes.by_line:
                return split.skeleton(*call.full_args, **call.full_kwargs)
            with routes.entered(self._nested_function, self.function):   # graphgen/nested.py
                return split.skeleton(*call.full_args, **call.full_kwargs)
        finally:
            if sum(_graph_runs(part) for part in parts) > before:
                self.stats.graph_part_calls += 1

    def _run_reentered(self, args, kwargs):
        """A call from inside a running call of this function (recursion): plain Python."""
        self.stats.imperative_calls += 1
        if not getattr(self, '_reentry_noted', False):
            self._reentry_noted = True
            self._event(EventKind.RECURSIVE_CALL, 'calls of %s from inside its own running call run as '
                        'plain Python (janus does not convert recursion)' % self.name,
                        reason=Reason.RECURSION)
        return self.fn(*args, **kwargs)

    # -- generation --------------------------------------------------------
    def _generate(self, bound, arguments):
        """A new cached graph for this call, or None (the reason is recorded)."""
        if self.failed_conversion is not None:
            return self._give_up(self.failed_conversion)
        if self.graphs_built >= config.recompile_limit:
            return self._give_up_on_recompiles()
        if self.failed_traces >= config.failed_trace_limit:
            return self._give_up(ConversionError(
                Reason.FAILED_TRACE_LIMIT, '%d traces failed (janus.config.failed_trace_limit): '
                'call shapes with no graph run imperatively' % self.failed_traces))
        entry = build.build(self.function, self.state, arguments, bound, self._convert,
                            self._event, profile_calls=self.profile_calls,
                            distributed=self.distributed, number=self.stats.graphs_built + 1)
        if isinstance(entry, build.Refused):
            return self._refused(entry)
        entry.set_jit(self.xla_setting)
        self.graphs_built += 1
        self.stats.graphs_built += 1
        if self.stats.graphs_built <= config.floor_warmup_graphs:
            floor_module.WARMUP_WORK.note()   # a first graph: warm-up; later ones, retraces
        self.stats.evictions += len(self.cache.insert(entry))
        if self.split_owner is not None and \
                entry.work_ops(config.segment_min_ops) < config.segment_min_ops:
            owner, lines, index = self.split_owner
            owner._run_plainly(lines, index, self.function, entry.work_ops(config.segment_min_ops))
        self._event(EventKind.GRAPH_BUILT, 'graph #%d built in %.0f ms, %d guards' % (
            entry.number, entry.trace_seconds * 1e3, len(entry.describe_guards())),
            graph=entry.number)
        return entry

    def _refused(self, refused):
        floor_module.WARMUP_WORK.note()   # a trace that failed: finding breaks is warm-up
        error = refused.error
        if refused.signature is not None and not _deferred(error):
            self.failed_traces += 1   # a trace ran and failed (not a known failed shape)
        if refused.internal is not None:
            self._record_internal('tracing', '%s: %s' % (type(refused.internal).__name__,
                                                         refused.internal),
                                  short_traceback(refused.internal))
        if not _deferred(error):   # deferred: this call only (an optimizer builds in it)
            _without_frames(error)   # kept: its frames would keep the trace's objects alive
            split = self._break_at(error, refused.signature)
            if split is _RECUT:   # the owner's next calls run the new cut
                self.state.superseded = True
                rest = self._safely('cutting a segment for the rest of the call',
                                    self._cut_for_this_call, error)
                if rest is not None:
                    self.state.split_always = rest
                return rest   # None: this call (and the old cut's others) run it plainly
            if split is not None:
                return split
            if refused.signature is not None:
                self.state.note_failed(refused.signature, error)
            if error.reason is Reason.TRACE_TOO_LONG:
                self.failed_conversion = error   # every call shape: no more long traces
        return self._give_up(error)

    def _break_at(self, error, signature):
        """The ``segments.Split`` that runs the statement ``error`` stopped in in
        Python and the rest of the function in segments, from now on for the calls
        ``signature`` matches (None: every call; the converter refused the statement);
        None when there is no such cut."""
        if self.strict:
            return None   # strict mode claims the whole function converts: a break raises
        line = error.statement_line
        static = error is self.failed_conversion
        if line is None and static and error.lineno is not None \
                and error.filename == self.function.__code__.co_filename:
            line = error.lineno   # the converter refused a statement of this function
        if line is None or not tracer.breaks_at_statement_line(error, line):
            return None
        self._route(error, line)
        if self.split_owner is not None:   # a segment: its owner cuts itself there too
            owner, lines, _ = self.split_owner
            return _RECUT if owner._recut(lines, line, error) else None
        lines = frozenset((line,))
        made = self.state.splits.get(lines) or self._cut(error, lines, line)
        if made is not None and (static or signature is not None):
            self.state.note_split(None if static else signature, made)
        return made

    def _route(self, error, line):
        """A refusal inside a Keras layer's own call or a user function, breaking at
        ``line``: while the cut function runs, that callee runs through janus functions
        of its own, so only the refused line itself runs in Python
        (``graphgen/nested.py``)."""
        route = getattr(error, 'route', None)
        owner = self.split_owner[0] if self.split_owner is not None else self
        if route is None or not owner.state.routes.add(line, route):
            return
        layers = '' if not route.layers else ' for %d layer%s' % (
            len(route.layers), 's' if len(route.layers) > 1 else '')
        owner._event(EventKind.GRAPH_BREAK, 'line %d runs in Python, and %s (line %s, where '
                     'janus refused) runs through janus of its own%s'
                     % (line, route.name, route.line, layers),
                     lineno=line, filename=owner.function.__code__.co_filename)

    def _nested_function(self, callee):
        """The janus function running a routed layer's ``call`` or a routed function
        (nested.Routes): profiled as briefly as a segment (the function's own calls ran
        its code already; a route taken every tenth call would otherwise spend its
        first thirty in profiles)."""
        return JanusFunction(callee, profile_calls=min(self.profile_calls,
                                                       config.segment_profile_calls),
                             strict=self._strict, jit_compile=self._jit)

    def _recut(self, lines, line, error):
        """A segment of the cut at ``lines`` failed at ``line``: the calls that ran that
        cut run one at ``lines`` and ``line`` from now on (cuts stay one level deep:
        a segment call costs a janus call).  False when there is no such cut."""
        with self._lock:
            while lines in self.state.recut:   # another segment of it re-cut it already
                lines = self.state.recut[lines]
            wider = lines | {line}
            if wider == lines:
                return self._unhoist(lines, line, error)
            made = self.state.splits.get(wider) or self._cut(
                error, wider, line, reuse=self.state.splits.get(lines))
            if made is None:
                return False
            old = self.state.splits.pop(lines, None)   # every call shape moves on: freed
            if old is not None:
                self.state.replace_split(old, made)
            self.state.recut[lines] = wider
            return True

    def _unhoist(self, lines, line, error):
        """A segment of the cut at ``lines`` failed at ``line``, a break already: when
        janus hoisted tensor work out of it (``hoist.py``), that work failed to convert
        too, and the cut is made again with the statement whole in Python (once).
        True, as ``_recut``: the failing call runs plainly, later calls the cut."""
        old = self.state.splits.get(lines)
        if old is None or line not in old.hoisted or line in self.state.unhoisted:
            return True
        self.state.unhoisted.add(line)
        del self.state.splits[lines]
        made = self._cut(error, lines, line, reuse=old)
        if made is None:
            self.state.splits[lines] = old
            return True
        self.state.replace_split(old, made)
        return True

    def _cut(self, error, lines, line, reuse=None):
        """The function cut at ``lines`` (remembered), or None (the reason recorded);
        ``line``: the one ``error`` refused, new in ``lines``; ``reuse``: the cut this
        one replaces, whose segments the new cut leaves as they were keep their janus
        functions (profile, graphs, measured floor), not traced again."""
        if lines in self.state.unsplittable:
            return None
        try:
            made = segments.split(self.function, sorted(lines), whole=self.state.unhoisted,
                                  routing=any(n in self.state.routes.by_line for n in lines))
        except segments.NothingToCut:
            self.state.unsplittable.add(lines)   # the refusal stands, as it is
            return None
        except (segments.CannotSplit, parser.NoSource) as e:   # no source: cut nothing
            self.state.unsplittable.add(lines)
            self._event(EventKind.GRAPH_BREAK, 'janus cannot cut the function at line %d: %s'
                        % (line, e),
                        reason=Reason.CANNOT_SPLIT, filename=error.filename, lineno=line)
            return None
        except Exception as e:  # noqa: BLE001 - a splitter bug: the function runs as before
            self._internal_error('cutting the function at a graph break', e)
            self.state.unsplittable.add(lines)
            return None
        kept = _reusable_segments(reuse)
        parts = []
        for index, part in enumerate(made.segments):
            old_part, old_slot = kept.get(part.key, (None, None))
            if old_slot is not None:   # the same code: the segment as it was
                made.segments[index] = old_part
                if isinstance(old_slot, JanusFunction):
                    old_slot.split_owner = (self, lines, index)
                parts.append(old_slot)
                continue
            # The function's own calls profiled these statements already (under other
            # site numbers): a segment profiles fewer calls before its graph.
            jf = JanusFunction(part.function, profile_calls=min(
                self.profile_calls, config.segment_profile_calls), strict=self._strict,
                jit_compile=self._jit)
            jf.split_owner = (self, lines, index)
            if not part.in_loop:
                self._safely('carrying the profile over to a segment', jf._carry_profile, self)
            parts.append(jf)
        made.slots[:] = parts
        self.state.splits[lines] = made
        cause = error.error if isinstance(getattr(error, 'error', None), ConversionError) \
            else error   # real control flow failed to build around the statement
        graphs = ', '.join('lines %d-%d' % (p.first_line, p.last_line) for p in made.segments)
        self._event(EventKind.GRAPH_BREAK, 'line %d runs in Python (%s); %s' % (
                        line, cause.context, '%s run as graphs of their own' % graphs if graphs
                        else 'the code it calls runs through janus of its own'),
                    error=cause, lineno=line, filename=self.function.__code__.co_filename)
        return made

    def _cut_for_this_call(self, error):
        """This segment's trace failed at a statement and its owner cut itself again
        there for its next calls: the calls of the old cut still running run this
        segment cut at that statement too, so the statements after it are traced now,
        and a break among them reaches the owner in this call, not one call later
        (every break a call reaches is found in that call).  Its parts report to the
        owner; they go with the old cut.  None when it cannot be cut."""
        line = error.statement_line if error.statement_line is not None else error.lineno
        owner, lines, index = self.split_owner
        depth = index[1] + 1 if isinstance(index, tuple) else 1
        if depth > _REST_OF_CALL_DEPTH:
            return None
        try:   # the statement whole: its hoisted receiver failed too, or will
            made = segments.split(self.function, [line], whole=(line,))
        except segments.CannotSplit:   # NothingToCut among them: plainly, then
            return None
        if any(part.first_line <= line <= part.last_line for part in made.segments):
            return None   # the statement is not one of this segment's own (its prologue's line)
        parts = []
        for part in made.segments:
            jf = JanusFunction(part.function, profile_calls=min(
                self.profile_calls, config.segment_profile_calls), strict=self._strict,
                jit_compile=self._jit)
            jf.split_owner = (owner, lines, ('rest of a call', depth))
            if not part.in_loop:
                jf._carry_profile(self)
            parts.append(jf)
        made.slots[:] = parts
        return made

    def _carry_profile(self, owner):
        """This segment (run at most once per call of ``owner``) starts with what
        ``owner``'s profiled calls observed of its statements: its first call traces."""
        with owner._lock:
            if not owner.profile.calls:
                return
            profiler.carry_over(owner.profile, self.profile, owner.function.__code__,
                                self.function.__code__,
                                frontend.front_end(self.function).sites)

    def _run_plainly(self, lines, index, function, ops):
        """Segment ``index`` of the cut at ``lines`` built a graph of ``ops`` tensor ops,
        fewer than ``config.segment_min_ops`` (list appends, Python arithmetic, one
        reduction): the skeleton calls it as plain Python from now on, which costs
        less than a janus call."""
        split = self.state.splits.get(lines)
        if split is None or not isinstance(index, int) or split.slots[index] is function \
                or split.segments[index].function is not function:
            return   # (the cut at ``lines`` was made again since: not this segment's)
        split.slots[index] = function
        part = split.segments[index]
        self._event(EventKind.GRAPH_BREAK, 'lines %d-%d %s: they run as plain Python from now '
                    'on' % (part.first_line, part.last_line, 'do no tensor work' if not ops else
                            'run %d tensor op%s, less than a graph call costs'
                            % (ops, 's' if ops > 1 else '')),
                    lineno=part.first_line, filename=self.function.__code__.co_filename)

    def _convert(self):
        """The converted function; raises the ConversionError that stopped it (kept:
        later calls give up at once)."""
        try:
            return generator.convert(self.function)
        except ConversionError as e:
            self.failed_conversion = _without_frames(e)
        except Exception as e:  # noqa: BLE001 - a converter bug: this function runs imperatively
            self.failed_conversion = self._internal_conversion_error('converting', e)
        raise self.failed_conversion

    def _give_up(self, error):
        if self.strict:
            raise StrictModeError('janus could not convert %s: %s (strict mode is on; unset '
                                  'JANUS_STRICT / janus.config.strict to run it imperatively)'
                                  % (self.name, reason_text(self, error))) from error
        # advising.note logs each reason once per function.
        self._event(EventKind.IMPERATIVE, str(error), error=error)
        return None

    def _give_up_on_recompiles(self):
        # What kept changing, and what to change: advising.storm_advice (logged once).
        return self._give_up(ConversionError(
            Reason.RECOMPILE_LIMIT, 'recompile limit reached: built %d graphs '
            '(janus.config.recompile_limit); further cache misses run imperatively'
            % config.recompile_limit))

    def _note_miss(self, misses):
        self.stats.cache_misses += 1
        newest = misses[0]
        self.state.note_miss_value(newest.kind, newest.where, newest.actual)
        text = '%s failed for %s: expected %s, got %s' % (newest.kind.value, newest.where,
                                                          newest.expected, newest.actual)
        if config.log_recompiles:
            log.info('janus: recompiling %s: %s', self.name, text)
        self._event(EventKind.CACHE_MISS, text, miss=newest)

    # -- janus's own failures ----------------------------------------------
    def _internal_error(self, stage, error, after_user_code=False):
        """Records janus's own ``error``; in strict mode, before user code ran, raises."""
        self._record_internal(stage, '%s: %s' % (type(error).__name__, error),
                              short_traceback(error))
        if self.strict and not after_user_code:
            raise StrictModeError('janus failed internally while %s for %s: %s: %s (strict mode '
                                  'is on; without it the call runs as plain Python)'
                                  % (stage, self.name, type(error).__name__, error)) from error

    def _record_internal(self, stage, text, trace):
        # Logged (once per function and text) by the event: advising.note.
        self._event(EventKind.INTERNAL_ERROR, 'janus failed while %s: %s' % (stage, text), trace,
                    reason=Reason.INTERNAL_ERROR)

    def _internal_conversion_error(self, stage, error):
        """A ConversionError standing for janus's own ``error`` (explain shows the traceback)."""
        self._record_internal(stage, '%s: %s' % (type(error).__name__, error),
                              short_traceback(error))
        return ConversionError(Reason.INTERNAL_ERROR, 'janus internal error while %s: %s: %s'
                               % (stage, type(error).__name__, error))

    def _safely(self, stage, fn, *args):
        """Bookkeeping after user code ran: its failure is recorded, never raised."""
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - the user's result or exception stands
            self._internal_error(stage, e, after_user_code=True)
            return None

    def _event(self, kind, detail, trace=None, error=None, **payload):
        """Records an ``Event``; ``error``: the ConversionError it is about (its reason
        and line become the event's), ``payload``: more of the event's fields."""
        assert isinstance(kind, EventKind), kind
        if error is not None:
            payload.setdefault('reason', error.reason)
            payload.setdefault('filename', error.filename)
            payload.setdefault('lineno', error.lineno)
        event = Event(self.stats.calls, kind, detail, trace, **payload)
        where, advice = annotate(self, event)   # and logs a new reason once
        self.events.append(dataclasses.replace(event, where=where, advice=advice))

    # -- construction ------------------------------------------------------
    def _signature(self):
        if self.function is None:
            return None
        return inspect.signature(self.function)

    def _make_profiled(self, recorder):
        if self.function is None:
            return None
        try:
            return profiler.instrument(self.function, recorder)
        except (parser.NoSource, SyntaxError) as e:
            super_call = '__class__' in self.function.__code__.co_freevars   # profiler.instrument
            self._event(EventKind.PROFILING, 'uninstrumented: %s' % e,
                        reason=Reason.ZERO_ARGUMENT_SUPER if super_call else None)
        except Exception as e:  # noqa: BLE001 - profiling is optional
            self._record_internal('instrumenting for the profiler',
                                  '%s: %s' % (type(e).__name__, e), short_traceback(e))
        return None


_RECUT = object()   # _break_at: a segment's owner took the break (it cut itself anew)
_UNMADE = object()  # FunctionState.profiled_fn before the first profiled call made it
# Segments cut for the rest of a call inside one another (each one break further along
# one run of statements): a bound, so a janus bug cannot nest them without end.
_REST_OF_CALL_DEPTH = 16


def _reusable_segments(split):
    """{segment key: (Segment, slot)} of ``split``'s segments a new cut may take over
    (not one whose failed trace made the cut again)."""
    if split is None:
        return {}
    return {part.key: (part, slot) for part, slot in zip(split.segments, split.slots)
            if not (isinstance(slot, JanusFunction) and slot.state.superseded)}


def _graph_runs(jf):
    """Graph runs of a janus function, its own or its segments'."""
    return jf.stats.graph_calls + jf.stats.graph_part_calls


def _deferred(error):
    """Whether ``error`` (or what it was raised from) refused only for now."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, ConversionDeferred):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


def _without_frames(error):
    """``error`` kept for later calls, without its tracebacks (nor those of what it was
    raised from): their frames would keep the failed trace's graph and objects alive."""
    seen, chained = 0, error
    while chained is not None and seen < 8:
        chained.__traceback__ = None
        chained, seen = chained.__cause__ or chained.__context__, seen + 1
    return error


class BoundJanusMethod(callables.JanusCallable):
    """``obj.method`` for a janus-decorated method: shares the function's cache."""

    def __init__(self, janus_fn, obj):
        self.__janus_function__ = janus_fn
        self.__self__ = obj

    def __call__(self, /, *args, **kwargs):
        return self.__janus_function__(self.__self__, *args, **kwargs)

    def __repr__(self):
        return '<janus bound method %s of %r>' % (self.__janus_function__.name, self.__self__)


def function(fn: Optional[Callable] = None, *, profile_calls: Optional[int] = None,
             strict: Optional[bool] = None, jit_compile=None, **unknown):
    """Decorator: run ``fn`` as speculatively generated TF graphs.

    ``@janus.function`` or ``@janus.function(profile_calls=3, strict=True)``;
    also ``janus.function(obj.train_step)``, ``janus.function(model)``,
    ``janus.function(functools.partial(step, model))``.  ``jit_compile``: True,
    False, or 'auto' (time both, keep the faster: ``replay/xla.py``); None:
    ``config.jit_compile``.
    """
    if unknown:
        raise JanusUsageError(_unknown_keywords(unknown, ('profile_calls', 'strict',
                                                          'jit_compile')))
    if profile_calls is not None and (not isinstance(profile_calls, int) or profile_calls < 0):
        raise JanusUsageError('profile_calls must be an int >= 0, got %r' % (profile_calls,))
    if jit_compile not in (None, True, False) + xla.SETTINGS:
        raise JanusUsageError("jit_compile must be True, False, 'on', 'off' or 'auto', got %r"
                              % (jit_compile,))
    if fn is None:
        return lambda f: function(f, profile_calls=profile_calls, strict=strict,
                                  jit_compile=jit_compile)
    _check_decoratable(fn)
    return JanusFunction(fn, profile_calls=profile_calls, strict=strict, jit_compile=jit_compile)


def _unknown_keywords(unknown, known):
    """``janus.function() got an unexpected keyword 'profile_call'; did you mean ...``."""
    name = sorted(unknown)[0]
    close = [k for k in known if k.startswith(name)] or difflib.get_close_matches(name, known, n=1)
    return ('janus.function() got an unexpected keyword argument %r; %s' % (
        name, 'did you mean %r?' % close[0] if close else
        'it takes %s' % ', '.join(known)))


def _check_decoratable(fn):
    if isinstance(fn, (JanusFunction, BoundJanusMethod)):
        raise JanusUsageError('%s is already a janus function'
                              % fn.__janus_function__.name)
    if isinstance(fn, (staticmethod, classmethod)):
        raise JanusUsageError('put @janus.function below @%s, directly on the def'
                              % type(fn).__name__)
    if not callable(fn):
        raise JanusUsageError('janus.function needs something to call (a function, a bound '
                              'method, a callable object or a Keras model); got %r, a %s'
                              % (fn, type(fn).__name__))


def _forwarded(name):
    return property(lambda self: getattr(self.state, name),
                    lambda self, value: setattr(self.state, name, value),
                    doc='``self.state.%s`` (function_state.FunctionState)' % name)


for _name in function_state.fields():
    setattr(JanusFunction, _name, _forwarded(_name))
del _name
