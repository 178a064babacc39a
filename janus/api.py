"""``janus.function``: the warm-up / generate / replay state machine.

Needs nothing run before it.  ``JanusFunction.__call__`` is the whole
execution model of the paper's Figure 2 in one place:

    replay:   guards hold for a cached graph → run it (fall back on a broken assertion)
    warm-up:  fewer than ``profile_calls`` profiled calls → run imperatively, profiled
    generate: convert + trace a graph for this call's assumptions, cache it, run it

The steps' work is done by collaborators, each handed the janus function:
``generation`` (the generate step), ``fallback`` (after a graph's run failed) and
``graphgen/cuts`` (graph breaks: cutting the function, the segments' janus functions).

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

from janus import fallback, function_state, generation, profiler
from janus.trace import callables
from janus.events import Event, EventKind  # noqa: F401 - janus.api.EventKind, as before
from janus import floor as floor_module
from janus.floor import CallKind
from janus.advising import annotate, reason_text   # where + advice for every reason
from janus.config import config
from janus.errors import ConversionError, JanusUsageError, StrictModeError
from janus.replay import xla
from janus.replay.executor import (AssertionBroke, GraphError, GraphInvalid, WriteBackFailed,
                                   run_graph)
from janus.graphgen import segments
from janus.pyct import parser
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
    'defined_at', 'stats', 'events', 'lock', '_local', 'state', '_reentry_noted',
    'split_owner',
    'logged_reasons', '__wrapped__') + functools.WRAPPER_ASSIGNMENTS)


class JanusFunction(callables.JanusCallable):
    """A callable run through janus; behaves like the callable itself.

    Its per-definition state (profile, graph cache, failed conversions, relaxed
    sites and numbers...) is ``self.state``; each field also reads and writes as
    an attribute of the same name (``self.cache``, ``self.profile``).  Its
    collaborators (``generation``, ``fallback``, ``graphgen/cuts``) read and change
    that state through it, and record through ``record_event``."""

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
        self.split_owner = None   # a segment's: its cuts.SegmentPlace
        self.lock = threading.RLock()      # guards the cache, profile and budget, not the runs
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
        """One call, in the states of the paper's Figure 2: plain while the measured
        floor says so; else replay a cached graph whose guards hold (falling back to
        Python when one of its assumptions breaks: ``fallback.py``), warm up (profiled),
        or generate a graph for the call and replay it (``generation.py``); a call with
        graph breaks runs the function's skeleton (``graphgen/cuts.py``)."""
        self.stats.calls += 1
        if not config.enabled or not tf.executing_eagerly():
            return self.fn(*args, **kwargs)   # inside someone else's graph: trace through
        if getattr(self._local, 'running', False):
            return self._run_reentered(args, kwargs)
        self._local.running = True
        try:
            call, floor = _Call(args, kwargs, self.target), self.state.floor
            with self.lock:
                plain = floor.plain_now()
            if plain:   # janus was slower than eager here, or eager is being timed (floor.py)
                started = time.perf_counter()
                try:
                    return self.run_plain(call)
                finally:
                    self._timed(floor, CallKind.EAGER, started)
            started, warmup = time.perf_counter(), floor_module.WARMUP_WORK.count
            step, entry, misses = self._prepare(call)   # janus bookkeeping: no user code runs
            if step is Step.PLAIN:
                return self.run_plain(call)              # could not generate, or bad arguments
            kind = CallKind.PROFILED if step is Step.PROFILE and not misses else CallKind.JANUS
            try:
                if step is Step.REPLAY:   # (a graph generated for this call too)
                    return self._run(entry, call)
                if step is Step.SPLIT:
                    return self.run_split(entry, call)
                return self.run_profiled(call, count=not misses)   # warm-up, re-profile
            finally:
                if kind is CallKind.JANUS and floor_module.WARMUP_WORK.count > warmup:
                    kind = CallKind.WARMUP   # it (or a segment, a callee) profiled or first traced
                self._timed(floor, kind, started)
        finally:
            self._local.running = False

    def _timed(self, floor, kind, started):
        """Reports a call's time to the measured floor; records what it decided."""
        seconds = time.perf_counter() - started
        with self.lock:
            decision = floor.note(kind, seconds, self.stats.calls)
        if decision is not None:
            self.record_event(EventKind.FLOOR, decision.describe())

    def _prepare(self, call):
        """``_decide``, with janus's own failure there making the call plain."""
        try:
            return self._decide(call)
        except StrictModeError:
            raise
        except Exception as e:  # noqa: BLE001 - janus's own failure: run the call as Python
            self.internal_error('preparing the call', e)
            return Step.PLAIN, None, ()   # run by the caller, outside this handler

    def _decide(self, call):
        """(Step, entry, misses) for this call; may generate a graph."""
        if self.function is None:   # nothing janus can profile or convert (a generator)
            self.give_up(self.failed_conversion)
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
        with self.lock:   # bookkeeping only: user code and graphs run unlocked
            entry, misses = self.cache.lookup(call.arguments)
            if entry is not None:
                return Step.REPLAY, entry, misses
            split = self.state.split_for(call.arguments)
            if split is not None:   # this call shape failed at a statement: cut there
                return Step.SPLIT, split, ()
            step = self._next_step(misses)
            if misses and generation.relaxed_after_miss(self, misses, call.arguments):
                if step is Step.PROFILE:
                    self.profile.calls -= 1   # unclaimed: the new graph needs no new profile
                self.reprofile_budget = 0
                step = Step.GENERATE
            if step is Step.GENERATE:
                entry = generation.generate(self, call.bound, call.arguments)
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

    def _redefined(self):
        """The function's ``__code__``/``__defaults__`` were rebound: everything learned
        about the old definition goes with its state record."""
        with self.lock:
            self._start_over()
        stray = set(vars(self)) - LIFETIME_ATTRIBUTES - set(getattr(self.fn, '__dict__', ()))
        assert not stray, 'per-function state outside JanusFunction.state: %s' % sorted(stray)
        self.record_event(EventKind.REDEFINED, '%s.__code__/__defaults__ were rebound; profiling '
                          'and converting the new definition' % self.function.__qualname__)

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
        """Replay: ``entry``'s graph runs; a failure falls back (``fallback.py``)."""
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
            return fallback.after_failure(self, entry, failure, call)
        entry.runs += 1
        self.stats.graph_calls += 1
        return result

    def site_name(self, key):
        """A site as the user reads it: the function, the line and the statement kind."""
        return self.state.site_name(key)

    def run_profiled(self, call, count=True, claimed=True):
        """The call run through the profiler's probed twin (warm-up, or a fallback's
        re-run: ``count`` False), or plainly when there is none."""
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
                self.safely('profiling', self._finish_profiling)
        self.safely('profiling', self._record_return, result)
        return result

    def _start_profiling(self, call):
        """The probed twin to run (the recorder started), or None to run plainly."""
        try:
            with self.lock:
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
            self.internal_error('profiling', e)
            return None

    def _finish_profiling(self):
        self.recorder.end_call()
        broken = self.recorder.broken
        if broken is not None and self.profiled_fn is not None:
            self.profiled_fn = None   # instrumenting stops; later calls profile plainly
            self.record_internal('profiling (probed twin; stopped instrumenting)',
                                 broken[0], broken[1])

    def _record_return(self, result):
        self.profile.returns[type(result).__name__] += 1

    def run_plain(self, call):
        self.stats.imperative_calls += 1
        return self.fn(*call.args, **call.kwargs)

    def run_split(self, split, call):
        """The skeleton: the statements janus could not convert in Python, each
        segment around them through its own janus function."""
        self.stats.split_calls += 1
        parts = [part for part in split.slots if isinstance(part, JanusFunction)]
        before = sum(_graph_runs(part) for part in parts)
        routes = self.state.routes
        try:
            if not routes.by_line:
                return split.skeleton(*call.full_args, **call.full_kwargs)
            with routes.entered(self.part_function, self.function):   # graphgen/nested.py
                return split.skeleton(*call.full_args, **call.full_kwargs)
        finally:
            if sum(_graph_runs(part) for part in parts) > before:
                self.stats.graph_part_calls += 1

    def _run_reentered(self, args, kwargs):
        """A call from inside a running call of this function (recursion): plain Python."""
        self.stats.imperative_calls += 1
        if not getattr(self, '_reentry_noted', False):
            self._reentry_noted = True
            self.record_event(EventKind.RECURSIVE_CALL, 'calls of %s from inside its own '
                              'running call run as plain Python (janus does not convert '
                              'recursion)' % self.name, reason=Reason.RECURSION)
        return self.fn(*args, **kwargs)

    def part_function(self, callee):
        """The janus function running a part of this one: a segment of a cut, a routed
        layer's ``call`` or a routed function (nested.Routes); profiled as briefly as a
        segment (the function's own calls ran its code already; a route taken every
        tenth call would otherwise spend its first thirty in profiles)."""
        return JanusFunction(callee, profile_calls=min(self.profile_calls,
                                                       config.segment_profile_calls),
                             strict=self._strict, jit_compile=self._jit)

    def give_up(self, error):
        """The call runs imperatively for ``error`` (recorded; strict mode raises)."""
        if self.strict:
            raise StrictModeError('janus could not convert %s: %s (strict mode is on; unset '
                                  'JANUS_STRICT / janus.config.strict to run it imperatively)'
                                  % (self.name, reason_text(self, error))) from error
        # advising.note logs each reason once per function.
        self.record_event(EventKind.IMPERATIVE, str(error), error=error)
        return None

    def _note_miss(self, misses):
        self.stats.cache_misses += 1
        newest = misses[0]
        self.state.note_miss_value(newest.kind, newest.where, newest.actual)
        text = '%s failed for %s: expected %s, got %s' % (newest.kind.value, newest.where,
                                                          newest.expected, newest.actual)
        if config.log_recompiles:
            log.info('janus: recompiling %s: %s', self.name, text)
        self.record_event(EventKind.CACHE_MISS, text, miss=newest)

    # -- janus's own failures ----------------------------------------------
    def internal_error(self, stage, error, after_user_code=False):
        """Records janus's own ``error``; in strict mode, before user code ran, raises."""
        self.record_janus_error(stage, error)
        if self.strict and not after_user_code:
            raise StrictModeError('janus failed internally while %s for %s: %s: %s (strict mode '
                                  'is on; without it the call runs as plain Python)'
                                  % (stage, self.name, type(error).__name__, error)) from error

    def record_janus_error(self, stage, error):
        """Records janus's own ``error`` while ``stage``, with its last frames."""
        self.record_internal(stage, '%s: %s' % (type(error).__name__, error),
                             short_traceback(error))

    def record_internal(self, stage, text, trace):
        # Logged (once per function and text) by the event: advising.note.
        self.record_event(EventKind.INTERNAL_ERROR, 'janus failed while %s: %s' % (stage, text),
                          trace, reason=Reason.INTERNAL_ERROR)

    def safely(self, stage, fn, *args):
        """Bookkeeping after user code ran: its failure is recorded, never raised."""
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - the user's result or exception stands
            self.internal_error(stage, e, after_user_code=True)
            return None

    def record_event(self, kind, detail, trace=None, error=None, **payload):
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
            self.record_event(EventKind.PROFILING, 'uninstrumented: %s' % e,
                              reason=Reason.ZERO_ARGUMENT_SUPER if super_call else None)
        except Exception as e:  # noqa: BLE001 - profiling is optional
            self.record_janus_error('instrumenting for the profiler', e)
        return None


_UNMADE = object()  # FunctionState.profiled_fn before the first profiled call made it


def _graph_runs(jf):
    """Graph runs of a janus function, its own or its segments'."""
    return jf.stats.graph_calls + jf.stats.graph_part_calls


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
