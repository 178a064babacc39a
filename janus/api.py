"""``@janus.function``: the warm-up / generate / replay state machine.

Needs nothing run before it.  ``JanusFunction.__call__`` is the whole
execution model of the paper's Figure 2 in one place:

    replay:   guards hold for a cached graph → run it (fall back on a broken assertion)
    warm-up:  fewer than ``profile_calls`` profiled calls → run imperatively, profiled
    generate: convert + trace a graph for this call's assumptions, cache it, run it

Anything janus cannot do for a call runs that call imperatively, records why
(``janus.explain``), and raises instead when strict mode is on.
"""
import collections
import functools
import inspect
import logging
import threading
import types

import tensorflow as tf

from janus import guards, profiler
from janus.cache import GraphCache
from janus.config import config
from janus.errors import ConversionError, JanusUsageError, StrictModeError
from janus.executor import AssertionBroke, GraphError, run_graph
from janus.graphgen import generator, tracer
from janus.graphgen import plan as plan_module
from janus.pyct import parser

log = logging.getLogger('janus')

Event = collections.namedtuple('Event', 'call kind detail')


class Stats:
    FIELDS = ('calls', 'profiled_calls', 'graphs_built', 'graph_calls', 'fallbacks',
              'imperative_calls', 'cache_misses', 'evictions')

    def __init__(self):
        for name in self.FIELDS:
            setattr(self, name, 0)

    def as_dict(self):
        return {name: getattr(self, name) for name in self.FIELDS}


class JanusFunction:
    """A Python function run through janus; behaves like the function itself."""

    def __init__(self, fn, profile_calls=None, strict=None, distributed=False):
        self.fn = fn
        self.distributed = distributed   # ranks agree on assumptions (runtime/distributed.py)
        self._profile_calls = profile_calls
        self._strict = strict
        self.signature = inspect.signature(fn)
        self.stats = Stats()
        self.profile = profiler.Profile()
        self.cache = GraphCache()
        self.events = collections.deque(maxlen=200)
        self.failed_conversion = None     # ConversionError of the function itself
        self.failed_signatures = []       # (Signature, ConversionError) per call shape
        self.relaxed_sites = set()        # (code, site) never speculated again (they broke)
        self._recompile_limit_logged = False
        self._reprofile_budget = 0         # profiled calls still due after a cache miss
        self._lock = threading.RLock()     # guards the cache, profile and budget, not the runs
        self._profiled_fn = self._make_profiled()
        functools.update_wrapper(self, fn)

    # -- knobs -----------------------------------------------------------
    @property
    def profile_calls(self):
        return config.profile_calls if self._profile_calls is None else self._profile_calls

    @property
    def strict(self):
        return config.strict if self._strict is None else self._strict

    # -- the state machine -----------------------------------------------
    def __call__(self, *args, **kwargs):
        self.stats.calls += 1
        if not config.enabled or not tf.executing_eagerly():
            return self.fn(*args, **kwargs)   # inside someone else's graph: trace through
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError:
            return self.fn(*args, **kwargs)   # raises exactly what Python raises
        bound.apply_defaults()
        arguments = bound.arguments

        with self._lock:   # bookkeeping only: user code and graphs run unlocked
            entry, misses = self.cache.lookup(arguments)
            if entry is None:
                action = self._next_step(misses)
                if action == 'generate':
                    entry = self._generate(bound, arguments)
                    if entry is not None:
                        self._reprofile_budget = config.reprofile_calls
        if entry is not None:                                   # replay
            return self._run(entry, arguments, args, kwargs)
        if action == 'profile':                                 # warm-up, re-profile
            return self._run_profiled(arguments, args, kwargs, count=not misses)
        return self._run_imperatively(args, kwargs)             # could not generate

    def _next_step(self, misses):
        """'profile' (warm-up, or re-profiling a new regime) or 'generate'."""
        if self.profile.calls < self.profile_calls:
            self.profile.calls += 1   # claimed now, so concurrent calls profile only as asked
            return 'profile'
        if misses:
            self._note_miss(misses)
            if self._reprofile_budget > 0:
                self._reprofile_budget -= 1
                self.profile.calls += 1
                return 'profile'
        return 'generate'

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return BoundJanusMethod(self, obj)

    # -- the three ways a call runs --------------------------------------
    def _run(self, entry, arguments, args, kwargs):
        try:
            result = run_graph(entry, arguments)
        except AssertionBroke as broke:
            self.stats.fallbacks += 1
            self._event('fallback', 'assumption %r broke; re-ran imperatively' % broke.assumption)
            try:
                result = self._run_profiled(arguments, args, kwargs, count=False, claimed=False)
            except Exception as e:
                # The call raised, eagerly too: an exceptional path, not a reason
                # to give up the assumption for the calls that do not raise.
                self._event('fallback raised', '%s; assumptions kept' % type(e).__name__)
                raise
            self._relax(entry, broke.assumption)
            return result
        except GraphError as e:
            self._event('graph error', '%s (%s); re-ran imperatively for eager\'s result or '
                        'exception' % (type(e.error).__name__, str(e.error).strip()[:160]))
            try:
                return self._run_profiled(arguments, args, kwargs, count=False, claimed=False)
            finally:
                self._relax(entry, None)
        entry.runs += 1
        self.stats.graph_calls += 1
        return result

    def _relax(self, entry, assumption):
        """After a fallback: sites whose assumed outcomes broke are never assumed again."""
        broken = set()
        if assumption is not None and assumption.speculative:
            broken.add(assumption.site)
        observed = self.recorder.last_call
        for key, assumed in entry.assumed_sites.items():
            if key in observed and observed[key] != assumed:
                broken.add(key)
        if broken:
            self.relaxed_sites |= broken
            self.cache.remove(entry)
            self._reprofile_budget = 0
            where = ', '.join(self._site_name(key) for key in broken)
            self._event('relaxed', '%s: assumed outcomes dropped, next graph builds dynamic '
                        'control flow there' % where)

    def _site_name(self, key):
        info = self.profile.site_info.get(key)
        return '%s line %s (%s)' % (key[0].co_name, info.lineno if info else '?',
                                   info.kind if info else 'site')

    def _run_profiled(self, arguments, args, kwargs, count=True, claimed=True):
        if count:
            self.stats.profiled_calls += 1
        else:
            self.stats.imperative_calls += 1
        if not claimed:
            self.profile.calls += 1
        with self._lock:
            self.profile.record_arguments(arguments)
        self.recorder.begin_call()
        try:
            result = self._profiled_fn(*args, **kwargs)
        finally:
            self.recorder.end_call()
        self.profile.returns[type(result).__name__] += 1
        return result

    def _run_imperatively(self, args, kwargs):
        self.stats.imperative_calls += 1
        return self.fn(*args, **kwargs)

    # -- generation --------------------------------------------------------
    def _generate(self, bound, arguments):
        """A new cached graph for this call, or None (the reason is recorded)."""
        if self.failed_conversion is not None:
            return self._give_up(self.failed_conversion, record=False)
        if self.stats.graphs_built >= config.recompile_limit:
            return self._give_up_on_recompiles()
        guards.record_shapes_of(arguments, self.profile.shapes)
        shapes = self.profile.shapes if config.relax_shapes else None
        try:
            signature = guards.Signature(arguments, shapes)
        except guards.UnsupportedArgument as e:
            return self._give_up(ConversionError('unsupported argument %s' % e), record=False)
        for failed_signature, error in self.failed_signatures:
            if failed_signature.check(arguments) is None:
                return self._give_up(error, record=False)
        try:
            converted = generator.convert(self.fn)
        except ConversionError as e:
            self.failed_conversion = e
            return self._give_up(e)
        entry = self._trace(converted, bound, signature, shapes, arguments)
        if isinstance(entry, ConversionError):
            self.failed_signatures.append((signature, entry))
            return self._give_up(entry)
        self.stats.graphs_built += 1
        self.cache.insert(entry)
        self.stats.evictions = self.cache.evictions
        self._event('graph built', 'graph #%d in %.0f ms, assuming: %s' % (
            self.stats.graphs_built, entry.trace_seconds * 1e3, '; '.join(entry.describe_guards())))
        return entry

    def _trace(self, converted, bound, signature, shapes, arguments):
        try:
            return tracer.trace(self.fn, converted, bound, signature, self._plan(),
                                self.profile.shapes if config.relax_shapes else None,
                                self.distributed)
        except ConversionError as e:
            if shapes is None or not _has_relaxed_dims(signature):
                return e
            # A relaxed (None) dimension may be what broke the trace: retry exactly
            # (with exact shapes even when specialization is switched off).
            try:
                with config.patch(specialize_shapes=True):
                    exact = guards.Signature(arguments)
                    entry = tracer.trace(self.fn, converted, bound, exact, self._plan(),
                                         distributed=self.distributed)
            except ConversionError as e2:
                return e2
            self._event('relaxed shapes failed', '%s; built with exact shapes instead' % e)
            return entry

    def _plan(self):
        return plan_module.Plan(self.profile, self.relaxed_sites)

    def _give_up(self, error, record=True):
        if self.strict:
            raise StrictModeError('janus could not convert %s: %s (strict mode is on; unset '
                                  'JANUS_STRICT / janus.config.strict to run it imperatively)'
                                  % (self.fn.__qualname__, error)) from error
        if record:
            log.warning('janus: running %s imperatively: %s', self.fn.__qualname__, error)
        self._event('imperative', str(error))
        return None

    def _give_up_on_recompiles(self):
        if not self._recompile_limit_logged:
            self._recompile_limit_logged = True
            log.warning('janus: %s built %d graphs (config.recompile_limit); further cache '
                        'misses run imperatively', self.fn.__qualname__, config.recompile_limit)
        return self._give_up(ConversionError('recompile limit (%d graphs) reached'
                                             % config.recompile_limit), record=False)

    def _note_miss(self, misses):
        self.stats.cache_misses += 1
        newest = misses[0]
        text = '%s failed for %s: expected %s, got %s' % (newest.kind.value, newest.where,
                                                          newest.expected, newest.actual)
        if config.log_recompiles:
            log.info('janus: recompiling %s: %s', self.fn.__qualname__, text)
        self._event('cache miss', text)

    def _event(self, kind, detail):
        self.events.append(Event(self.stats.calls, kind, detail))

    def _make_profiled(self):
        self.recorder = profiler.Recorder(self.profile)
        try:
            return profiler.instrument(self.fn, self.recorder)
        except (parser.NoSource, SyntaxError) as e:
            self._event('profiling', 'uninstrumented: %s' % e)
            return self.fn


def _has_relaxed_dims(signature):
    specs = signature.input_specs()
    return any(spec.shape.rank is None or None in spec.shape.as_list() for spec in specs)


class BoundJanusMethod:
    """``obj.method`` for a janus-decorated method: shares the function's cache."""

    def __init__(self, janus_fn, obj):
        self.__janus_function__ = janus_fn
        self.__self__ = obj

    def __call__(self, *args, **kwargs):
        return self.__janus_function__(self.__self__, *args, **kwargs)

    def __repr__(self):
        return '<janus bound method %s of %r>' % (self.__janus_function__.fn.__qualname__,
                                                  self.__self__)


def function(fn=None, *, profile_calls=None, strict=None):
    """Decorator: run ``fn`` as speculatively generated TF graphs.

    ``@janus.function`` or ``@janus.function(profile_calls=3, strict=True)``.
    """
    if profile_calls is not None and (not isinstance(profile_calls, int) or profile_calls < 0):
        raise JanusUsageError('profile_calls must be an int >= 0, got %r' % (profile_calls,))
    if fn is None:
        return lambda f: function(f, profile_calls=profile_calls, strict=strict)
    _check_decoratable(fn)
    return JanusFunction(fn, profile_calls=profile_calls, strict=strict)


def _check_decoratable(fn):
    if isinstance(fn, JanusFunction):
        raise JanusUsageError('%s is already a janus function' % fn.fn.__qualname__)
    if isinstance(fn, (staticmethod, classmethod)):
        raise JanusUsageError('put @janus.function below @%s, directly on the def'
                              % type(fn).__name__)
    if isinstance(fn, type):
        raise JanusUsageError('janus.function decorates functions, not classes (%s): decorate '
                              'its methods, e.g. __call__, instead' % fn.__name__)
    if isinstance(fn, types.MethodType):
        raise JanusUsageError('janus.function got a bound method; decorate the function in '
                              'the class body, or wrap it: janus.function(lambda *a: obj.m(*a))')
    if not isinstance(fn, types.FunctionType):
        raise JanusUsageError('janus.function decorates Python functions defined with def or '
                              'lambda; %r is a %s. Wrap it in a Python function to convert the '
                              'code around it' % (fn, type(fn).__name__))
    if inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn):
        raise JanusUsageError('janus.function cannot decorate a generator or coroutine '
                              'function (%s)' % fn.__qualname__)
