"""The profiler: runs calls imperatively and records what each AST site did.

Needs nothing run before it.  It never touches the user's function: a
profiled call runs a *twin* of it (``instrument``: a new function object on
the same globals, closure cells, defaults and attributes) whose code object
is the original's with probes put into its bytecode (``pyct.probes``); user
callees reached from it run probed twins too (``Recorder.callee``).  The
probed code keeps the original's instructions, positions, names and
locals: there is no instrumented source copy, tracebacks and debuggers show
your lines, and ``locals()``, ``vars()``, ``dir()`` and ``frame.f_locals``
show your names only (the probes reach the recorder through code
constants: ``functools.partial`` objects of its hook methods).  Every call,
truth test (``bool``) and iteration (``map(counter, iterable)``) of user
code runs from the user's own frame, so ``sys._getframe()``, ``eval`` and
tracebacks see no janus frame between yours.

Sites are the ones ``pyct.sites`` numbers on the parsed source (the numbering
the generator uses); ``pyct.probes`` finds each site's instructions through
``co_positions()``.  A function whose sites cannot all be found
unambiguously, or that has no source, runs unprobed (profiled plainly).

Per site id (keyed by (code object, site id) so callees' sites are distinct)
and per profiled call it records:

* branch tests (``if``, ``while``, conditional expressions, ``and``/``or``
  operands): the sequence of outcomes within the call, and whether the test
  was a tensor;
* ``for`` loops: the sequence of trip counts within the call, and whether the
  iterable was a tensor;
* ``break`` / ``continue`` / ``return``: how often each was taken;
* calls: which callee ran and what type it returned.

Per call it also records argument types, dtypes, shapes and Python values.
``graphgen.plan`` turns these observations into speculation decisions.
"""
from __future__ import annotations
import collections
import functools
import sys
import threading
import traceback
import types
import weakref
import typing

import tensorflow as tf

from janus import guards
from janus.trace import call_signature, callables
from janus.pyct import frontend, parser, probes, sites
from janus.library import layers, whitelist


class SiteProfile:
    """What one AST site did across the profiled calls."""

    def __init__(self) -> None:
        self.callees = collections.Counter()    # qualified callee name -> times
        self.returns = collections.Counter()    # returned type name -> times
        self.sequences = collections.Counter()  # per-call outcome/trip-count tuple -> calls
        self.tensor = False                     # a test/iterable was a tensor at least once
        self.taken = 0                          # break/continue/return: times taken

    def single_sequence(self) -> tuple | None:
        """The one sequence every profiled call showed, or None if they differed."""
        if len(self.sequences) == 1:
            return next(iter(self.sequences))
        return None


class Profile:
    """Everything observed for one janus function (and the callees it reached)."""

    def __init__(self) -> None:
        self.calls = 0
        self.arguments = []                      # per call: [(path, description)]
        self.returns = collections.Counter()     # return type name -> times
        self.sites = collections.defaultdict(SiteProfile)   # (code, site id) -> SiteProfile
        self.site_info = {}                      # (code, site id) -> pyct.sites.Site
        self.shapes = {}                         # tensor path -> relaxed TensorShape
        # (recursive function's code, attribute) -> value kinds its structures held,
        # widened across traces (recursion/structures.py; ('types', code) -> classes)
        self.structures = {}

    def record_arguments(self, arguments: typing.Mapping[str, typing.Any]) -> None:
        observed = []
        for name, value in arguments.items():
            observed.append((name, _describe_value(value)))
            call_signature.record_shapes(value, name, self.shapes)
        self.arguments.append(observed)
        del self.arguments[:-16]  # keep the recent ones only


def _describe_value(value: typing.Any) -> str:
    if isinstance(value, guards.EagerTensor):
        return 'tensor %s%s' % (value.dtype.name, list(value.shape))
    if type(value) in guards.PRIMITIVES:
        return '%s %r' % (type(value).__name__, value)
    if type(value) in (list, tuple, dict):
        return '%s of %d' % (type(value).__name__, len(value))
    return type(value).__name__


def _callee_name(callee: typing.Any) -> str:
    name = getattr(callee, '__qualname__', None) or getattr(callee, '__name__', None)
    if name is None:
        name = type(callee).__qualname__ + ' instance'
    module = getattr(callee, '__module__', None) or type(callee).__module__
    return '%s.%s' % (module, name) if module else name


class _Counter:
    """Counts a loop's items into the current call's sequence.  The loop iterates
    ``map(counter, iterable)``, made in the user's frame: the user's ``__iter__``
    and ``__next__`` (a generator's body) run with the user's frame as caller, and
    their tracebacks hold no janus frame; only this counting runs in janus's."""

    __slots__ = ('_seq', '_index', '_recorder')

    def __init__(self, seq: list, recorder: Recorder) -> None:
        self._seq = seq
        self._index = len(seq)
        self._recorder = recorder
        seq.append(0)

    def __call__(self, item: typing.Any) -> typing.Any:
        try:
            self._seq[self._index] += 1
        except Exception:  # noqa: BLE001 - never changes what the loop sees
            self._recorder.failed()
        return item


def _uncounted(item: typing.Any) -> typing.Any:
    return item


def _identity(fn: types.FunctionType) -> tuple:
    """What a probed twin (or the decision to run ``fn`` as it is) was made from: a
    change means a new one."""
    return (fn.__code__, fn.__defaults__, fn.__kwdefaults__, fn.__module__)


class Recorder:
    """What probed code calls (its hooks are constants of it); one per janus function.

    Its hooks run inside the user's code, so a failure of janus's own in one
    of them must not change what that code sees: the hook still does what the
    site does (evaluates the test once, calls the callee), the call's
    observations are dropped, and ``broken`` keeps the first such error
    (the function then stops being instrumented, ``api.py``).  Exceptions of
    the user's own code (a callee raising, a test's ``__bool__``) pass through.
    Hooks never receive the user's arguments (``callee`` returns what the site
    then calls), and their parameters are positional-only.
    """

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        # (text, traceback) of the first internal failure
        self.broken: tuple[str, str] | None = None
        self._calls = threading.local()   # per thread: this call's sequences, the last call's
        self._copies = weakref.WeakKeyDictionary()      # callee function -> (_identity, copy)
        self._codes = frontend.ByCode()   # code -> its probed code, or why none
        self._made = weakref.WeakSet()              # the probed code objects (and nested ones)
        self._lock = threading.Lock()     # the profile is shared by every thread's calls

    @property
    def _current(self) -> dict:
        """(code, site) -> this call's sequence, for the calling thread."""
        try:
            return self._calls.current
        except AttributeError:
            current = self._calls.current = collections.defaultdict(list)
            return current

    @property
    def last_call(self) -> dict:
        """The calling thread's previous call's sequences."""
        return getattr(self._calls, 'last', {})

    def failed(self) -> None:
        """Called in an ``except`` block of a hook: this call's observations are dropped."""
        self._calls.spoiled = True
        if self.broken is None:
            error = sys.exc_info()[1]
            self.broken = ('%s: %s' % (type(error).__name__, error),
                           traceback.format_exc(limit=-6).rstrip())

    # -- call boundaries --------------------------------------------------
    def begin_call(self) -> None:
        self._current.clear()
        self._calls.spoiled = False

    def end_call(self) -> None:
        """Adds this call's sequences to the profile (unless a hook failed in it)."""
        if getattr(self._calls, 'spoiled', False):
            self._calls.last = {}
            self._current.clear()
            return
        self._calls.last = {key: tuple(seq) for key, seq in self._current.items()}
        with self._lock:
            for key, seq in self._calls.last.items():
                self.profile.sites[key].sequences[seq] += 1
        self._current.clear()

    # -- what the probes call (``pyct.probes``; each bound to its site by a partial) --
    def hooks(self, code: types.CodeType) -> probes.Hooks:
        """The ``probes.Hooks`` of ``code``'s sites (keyed ``(code, site id)``)."""
        def keyed(records: typing.Iterable[probes.Record]) -> tuple:
            return tuple((sites.SiteKey(code, r.site), r.outcome, r.own_value) for r in records)
        return probes.Hooks(
            branch=lambda records: functools.partial(self.branch, tuple(map(keyed, records))),
            is_none=lambda records, is_none: functools.partial(
                self.is_none, tuple(map(keyed, records)), is_none),
            loop=lambda site: functools.partial(self.loop, sites.SiteKey(code, site)),
            mark=lambda site: functools.partial(self.mark, sites.SiteKey(code, site)),
            callee=lambda site: functools.partial(self.callee, sites.SiteKey(code, site)),
            returned=lambda site: functools.partial(self.returned, sites.SiteKey(code, site)))

    def branch(self, records: tuple, value: typing.Any, truth: bool, /) -> bool:
        """A test leaf's value and truth (``bool`` taken in the user's frame): records
        what that truth decides (``records[truth]``), returns the truth."""
        try:
            if records[truth]:
                self._observe(records[truth], value)
        except Exception:  # noqa: BLE001 - see the class docstring
            self.failed()
        return truth

    def is_none(self, records: tuple, is_none_test: bool, value: typing.Any, /) -> typing.Any:
        """An ``x is None`` / ``x is not None`` leaf (the jump tests ``x``): returns ``x``."""
        try:
            observed = records[(value is None) == is_none_test]
            if observed:
                self._observe(observed, None)   # the test's value is a bool, never a tensor
        except Exception:  # noqa: BLE001
            self.failed()
        return value

    def _observe(self, observed: typing.Iterable[tuple], value: typing.Any) -> None:
        """Appends each (key, outcome, own_value) outcome to this call's sequences; a
        site whose test value is ``value`` itself notes whether it is a tensor."""
        current = self._current
        for key, outcome, own_value in observed:
            if own_value and isinstance(value, tf.Tensor):
                self.profile.sites[key].tensor = True
            current[key].append(outcome)

    def loop(self, key: sites.SiteKey, iterable: typing.Any,
             /) -> typing.Callable[[typing.Any], typing.Any]:
        """The counter the user's frame maps over the iterable (``_Counter``)."""
        try:
            if isinstance(iterable, tf.Tensor):
                self.profile.sites[key].tensor = True
            return _Counter(self._current[key], self)
        except Exception:  # noqa: BLE001
            self.failed()
            return _uncounted

    def mark(self, key: sites.SiteKey, /) -> None:
        try:
            self.profile.sites[key].taken += 1
        except Exception:  # noqa: BLE001
            self.failed()

    def callee(self, key: sites.SiteKey, callee: typing.Any, /) -> typing.Any:
        """What a call site calls instead of ``callee``: its instrumented twin.  The
        call itself runs from the user's frame, so ``locals()``, ``sys._getframe()``,
        ``eval`` and tracebacks see the user's frames only."""
        target = self._instrumented(callee)
        try:
            self.profile.sites[key].callees[_callee_name(callee)] += 1
        except Exception:  # noqa: BLE001
            self.failed()
        return target

    def returned(self, key: sites.SiteKey, result: typing.Any, /) -> typing.Any:
        """A call site's result: records its type, returns it."""
        try:
            self.profile.sites[key].returns[type(result).__name__] += 1
        except Exception:  # noqa: BLE001
            self.failed()
        return result

    def _keras_layer(self, layer: typing.Any, user_call: types.FunctionType) -> typing.Callable:
        """Runs Keras's __call__ with the probed twin of your call()."""
        instrumented = types.MethodType(self._instrumented(user_call), layer)

        def run(*args: typing.Any, **kwargs: typing.Any) -> typing.Any:
            with layers.calling(layer, instrumented):
                return layer(*args, **kwargs)
        return run

    def _instrumented(self, callee: typing.Any) -> typing.Any:
        """What to call for ``callee``: its probed twin, or ``callee`` itself."""
        try:
            return self._instrumented_or_raise(callee)
        except Exception:  # noqa: BLE001 - the callee then runs uninstrumented
            self.failed()
            return callee

    def _instrumented_or_raise(self, callee: typing.Any) -> typing.Any:
        """The user's own Python callees run instrumented too, so their sites are profiled."""
        if isinstance(callee, types.BuiltinFunctionType):
            return callee   # C code (``len``, ``list.append``): nothing to probe
        if not isinstance(callee, (types.FunctionType, types.MethodType, type)):
            if callables.is_janus(callee):
                return callee   # another janus function: its own state machine runs it
            own_call = layers.user_call(callee)   # your own Keras layer's call()
            if own_call is not None:
                return self._keras_layer(callee, own_call)
            call = getattr(type(callee), '__call__', None)   # a callable object of the user's
            if isinstance(call, types.FunctionType) and not whitelist.is_library(call):
                return types.MethodType(self._instrumented(call), callee)
            return callee
        fn = callee.__func__ if isinstance(callee, types.MethodType) else callee
        if not isinstance(fn, types.FunctionType):
            return callee
        made_for, copy = self._copies.get(fn, (None, None))
        if made_for is None or any(a is not b for a, b in zip(made_for, _identity(fn))):
            # new, or its code, defaults or module were rebound since
            copy = fn if self._runs_as_is(fn) else self._copy_of(fn)
            self._copies[fn] = (_identity(fn), copy)
        if copy is fn:
            return callee
        if isinstance(callee, types.MethodType):
            return types.MethodType(copy, callee.__self__)
        return copy

    def _runs_as_is(self, fn: types.FunctionType) -> bool:
        """Library code, code probed already (a function the probed code made), or a
        generator function (its body runs later, outside this call)."""
        return fn.__code__ in self._made or whitelist.is_library(fn) or callables.runs_later(fn)

    def _copy_of(self, fn: types.FunctionType) -> types.FunctionType:
        try:
            return instrument(fn, self)
        except (parser.NoSource, SyntaxError):
            return fn

    def instrumented_code(self, fn: types.FunctionType) -> types.CodeType:
        """``fn.__code__`` with probes (made once per code object; raises
        parser.NoSource, of which ``probes.Unmapped`` is one, if it cannot be)."""
        code = fn.__code__
        made = self._codes.get(code)
        if made is None:
            try:
                made = self._probed(fn)
            except (parser.NoSource, SyntaxError) as e:
                made = e
            self._codes.put(code, made)
        if isinstance(made, Exception):
            raise made
        return made

    def _probed(self, fn: types.FunctionType) -> types.CodeType:
        code = fn.__code__
        parsed = frontend.front_end(fn)
        made = probes.instrument_code(code, parsed.tree, self.hooks(code))
        self._made.update(_code_objects(made))
        for site in parsed.sites.values():
            self.profile.site_info[sites.SiteKey(code, site.id)] = site
        return made


def carry_over(source: Profile, into: Profile, from_code: types.CodeType, to_code: types.CodeType,
               to_sites: typing.Mapping[int, sites.Site]) -> None:
    """Fills ``into``, the empty profile of a graph-break segment, with what ``source``
    (its owner's profile) observed of the statements the segment holds: the sites of
    ``from_code`` (the owner's) by position to those of ``to_code`` (``to_sites``: the
    segment's ``pyct.sites`` numbering), every callee's as they are; the owner's
    profiled calls count as its own.  Only for a segment the skeleton runs at most once
    per call, so the owner's per-call sequences are the segment's."""
    by_position = {site.position: site for site in to_sites.values()
                   if site.position is not None}
    for key, observed in list(source.sites.items()):
        info = source.site_info.get(key)
        if key.code is from_code:
            target = by_position.get(info.position) if info is not None else None
            if target is None:
                continue
            key, info = sites.SiteKey(to_code, target.id), target
        copied = into.sites[key]
        copied.callees.update(observed.callees)
        copied.returns.update(observed.returns)
        copied.sequences.update(observed.sequences)
        copied.tensor, copied.taken = observed.tensor, observed.taken
        if info is not None:
            into.site_info[key] = info
    into.calls = source.calls


def _code_objects(code: types.CodeType) -> typing.Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def instrument(fn: types.FunctionType, recorder: Recorder) -> types.FunctionType:
    """``fn``'s twin running its probed code (raises parser.NoSource if impossible):
    the same globals, closure cells, defaults, name and attributes."""
    twin = types.FunctionType(recorder.instrumented_code(fn), fn.__globals__, fn.__name__,
                              fn.__defaults__, fn.__closure__)
    twin.__kwdefaults__ = fn.__kwdefaults__
    twin.__qualname__ = fn.__qualname__
    twin.__dict__ = fn.__dict__          # the same attributes, not a copy of them
    twin.__annotations__ = fn.__annotations__
    twin.__module__ = fn.__module__
    return twin
