"""The profiler: runs calls imperatively and records what each AST site did.

Needs nothing run before it.  It never touches the user's code: it runs an
*instrumented copy* of the function (same source, globals, closure cells and
defaults) and, through ``__jp.call``, instrumented copies of the user's own
callees.  Per site id (``pyct.sites``; keyed by (code object, site id) so
callees' sites are distinct) and per profiled call it records:

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
import ast
import collections
import sys
import threading
import traceback
import types
import weakref

import gast
import tensorflow as tf

from janus import callables, guards
from janus.graphgen.converters import common
from janus.pyct import anno, mangling, parser, recompile, sites
from janus.runtime import layers, whitelist

_PROFILER = '__jp'


class SiteProfile:
    """What one AST site did across the profiled calls."""

    def __init__(self):
        self.callees = collections.Counter()    # qualified callee name -> times
        self.returns = collections.Counter()    # returned type name -> times
        self.sequences = collections.Counter()  # per-call outcome/trip-count tuple -> calls
        self.tensor = False                     # a test/iterable was a tensor at least once
        self.taken = 0                          # break/continue/return: times taken

    def single_sequence(self):
        """The one sequence every profiled call showed, or None if they differed."""
        if len(self.sequences) == 1:
            return next(iter(self.sequences))
        return None


class Profile:
    """Everything observed for one janus function (and the callees it reached)."""

    def __init__(self):
        self.calls = 0
        self.arguments = []                      # per call: [(path, description)]
        self.returns = collections.Counter()     # return type name -> times
        self.sites = collections.defaultdict(SiteProfile)   # (code, site id) -> SiteProfile
        self.site_info = {}                      # (code, site id) -> pyct.sites.Site
        self.shapes = {}                         # tensor path -> relaxed TensorShape

    def record_arguments(self, arguments):
        observed = []
        for name, value in arguments.items():
            observed.append((name, _describe_value(value)))
            guards.record_shapes(value, name, self.shapes)
        self.arguments.append(observed)
        del self.arguments[:-16]  # keep the recent ones only


def _describe_value(value):
    if isinstance(value, guards.EagerTensor):
        return 'tensor %s%s' % (value.dtype.name, list(value.shape))
    if type(value) in guards.PRIMITIVES:
        return '%s %r' % (type(value).__name__, value)
    if type(value) in (list, tuple, dict):
        return '%s of %d' % (type(value).__name__, len(value))
    return type(value).__name__


def _callee_name(callee):
    name = getattr(callee, '__qualname__', None) or getattr(callee, '__name__', None)
    if name is None:
        name = type(callee).__qualname__ + ' instance'
    module = getattr(callee, '__module__', None) or type(callee).__module__
    return '%s.%s' % (module, name) if module else name


class _CountingIterator:
    """Wraps a loop's iterator; counts items into the current call's sequence."""

    __slots__ = ('_it', '_seq', '_index', '_recorder')

    def __init__(self, iterable, seq, recorder):
        self._it = iter(iterable)   # the user's iter(): its errors are the user's
        self._seq = seq
        self._index = len(seq)
        self._recorder = recorder
        seq.append(0)

    def __iter__(self):
        return self

    def __next__(self):
        item = next(self._it)
        try:
            self._seq[self._index] += 1
        except Exception:  # noqa: BLE001 - never changes what the loop sees
            self._recorder.failed()
        return item


def _identity(fn):
    """What an instrumented copy was made from: a change means a new copy."""
    return (fn.__code__, fn.__defaults__, fn.__kwdefaults__)


class Recorder:
    """The ``__jp`` object instrumented code calls; one per janus function.

    Its hooks run inside the user's code, so a failure of janus's own in one
    of them must not change what that code sees: the hook still does what the
    site does (evaluates the test once, calls the callee), the call's
    observations are dropped, and ``broken`` keeps the first such error
    (the function then stops being instrumented, ``api.py``).  Exceptions of
    the user's own code (a callee raising, a test's ``__bool__``) pass through.
    Hook parameters are positional-only, so a user keyword (``self=``) never
    collides with them.
    """

    def __init__(self, profile):
        self.profile = profile
        self.broken = None                # (text, traceback) of the first internal failure
        self._calls = threading.local()   # per thread: this call's sequences, the last call's
        self._copies = weakref.WeakKeyDictionary()      # callee function -> (_identity, copy)
        self._lock = threading.Lock()     # the profile is shared by every thread's calls

    @property
    def _current(self):
        """(code, site) -> this call's sequence, for the calling thread."""
        if not hasattr(self._calls, 'current'):
            self._calls.current = collections.defaultdict(list)
        return self._calls.current

    @property
    def last_call(self):
        """The calling thread's previous call's sequences."""
        return getattr(self._calls, 'last', {})

    def failed(self):
        """Called in an ``except`` block of a hook: this call's observations are dropped."""
        self._calls.spoiled = True
        if self.broken is None:
            error = sys.exc_info()[1]
            self.broken = ('%s: %s' % (type(error).__name__, error),
                           traceback.format_exc(limit=-6).rstrip())

    # -- call boundaries --------------------------------------------------
    def begin_call(self):
        self._current.clear()
        self._calls.spoiled = False

    def end_call(self):
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

    # -- what instrumented code calls --------------------------------------
    def test(self, code, site, value, /):
        """A branch/loop test: records its truth and returns it (evaluated once)."""
        outcome = bool(value)   # the user's truth test: its errors are the user's
        try:
            self._observe(code, site, outcome, value)
        except Exception:  # noqa: BLE001 - see the class docstring
            self.failed()
        return outcome

    def operand(self, code, site, value, /):
        """An ``and``/``or`` operand: records its truth, returns the value itself."""
        outcome = bool(value)
        try:
            self._observe(code, site, outcome, value)
        except Exception:  # noqa: BLE001
            self.failed()
        return value

    def _observe(self, code, site, outcome, value):
        self._current[(code, site)].append(outcome)
        if isinstance(value, tf.Tensor):
            self.profile.sites[(code, site)].tensor = True

    def loop(self, code, site, iterable, /):
        try:
            if isinstance(iterable, tf.Tensor):
                self.profile.sites[(code, site)].tensor = True
            seq = self._current[(code, site)]
        except Exception:  # noqa: BLE001
            self.failed()
            return iterable   # the for statement calls iter() itself, as eagerly
        return _CountingIterator(iterable, seq, self)

    def mark(self, code, site, /):
        try:
            self.profile.sites[(code, site)].taken += 1
        except Exception:  # noqa: BLE001
            self.failed()

    def call(self, code, site, callee, /, *args, **kwargs):
        target = self._instrumented(callee)
        result = target(*args, **kwargs)
        try:
            observed = self.profile.sites[(code, site)]
            observed.callees[_callee_name(callee)] += 1
            observed.returns[type(result).__name__] += 1
        except Exception:  # noqa: BLE001
            self.failed()
        return result

    def _keras_layer(self, layer, user_call):
        """Runs Keras's __call__ with the instrumented copy of your call()."""
        instrumented = types.MethodType(self._instrumented(user_call), layer)

        def run(*args, **kwargs):
            with layers.calling(layer, instrumented):
                return layer(*args, **kwargs)
        return run

    def _instrumented(self, callee):
        """What to call for ``callee``: its instrumented copy, or ``callee`` itself."""
        try:
            return self._instrumented_or_raise(callee)
        except Exception:  # noqa: BLE001 - the callee then runs uninstrumented
            self.failed()
            return callee

    def _instrumented_or_raise(self, callee):
        """The user's own Python callees run instrumented too, so their sites are profiled."""
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
        if (not isinstance(fn, types.FunctionType) or whitelist.is_library(fn)
                or callables.runs_later(fn)):
            return callee   # library code; a generator runs later, outside this call
        made_for, copy = self._copies.get(fn, (None, None))
        if made_for is None or any(a is not b for a, b in zip(made_for, _identity(fn))):
            # new, or its code or defaults were rebound since
            copy = self._copy_of(fn)
            self._copies[fn] = (_identity(fn), copy)
        if isinstance(callee, types.MethodType):
            return types.MethodType(copy, callee.__self__)
        return copy

    def _copy_of(self, fn):
        try:
            return instrument(fn, self)
        except (parser.NoSource, SyntaxError):
            return fn


# ----------------------------------------------------------------------
# The instrumenting pass.
# ----------------------------------------------------------------------

def _jp(method, *args):
    call = gast.Call(gast.Attribute(common.load(_PROFILER), method, gast.Load()), list(args), [])
    return call


class _Instrument(gast.NodeTransformer):
    """Rewrites sites into ``__jp`` calls that record and then do what the site did."""

    def __init__(self, code_const):
        self.code = code_const     # an expression evaluating to the original code object

    def _site(self, node):
        return common.const(anno.get(node, anno.Key.SITE))

    def visit_Call(self, node):
        node = self.generic_visit(node)
        new = gast.Call(gast.Attribute(common.load(_PROFILER), 'call', gast.Load()),
                        [self.code(), self._site(node), node.func] + node.args, node.keywords)
        return gast.copy_location(new, node)

    def visit_If(self, node):
        site = self._site(node)
        node = self.generic_visit(node)
        node.test = gast.copy_location(_jp('test', self.code(), site, node.test), node.test)
        return node

    visit_While = visit_If
    visit_IfExp = visit_If

    def visit_For(self, node):
        site = self._site(node)
        node = self.generic_visit(node)
        node.iter = gast.copy_location(_jp('loop', self.code(), site, node.iter), node.iter)
        return node

    def visit_BoolOp(self, node):
        site = self._site(node)
        node = self.generic_visit(node)
        node.values = [gast.copy_location(_jp('operand', self.code(), site, v), v)
                       for v in node.values[:-1]] + [node.values[-1]]
        return node

    def _mark(self, node):
        site = anno.get(node, anno.Key.SITE)
        node = self.generic_visit(node)
        mark = gast.Expr(_jp('mark', self.code(), common.const(site)))
        return [gast.copy_location(mark, node), node]

    visit_Break = _mark
    visit_Continue = _mark
    visit_Return = _mark


def instrument(fn, recorder):
    """Returns the instrumented copy of ``fn`` (raises parser.NoSource if impossible).

    The copy is compiled inside a factory function whose parameters are the
    recorder, the code object and ``fn``'s free variables, so it sees the same
    closure cells; its own ``def`` gets a name nothing can refer to, so a
    recursive call by name still reads the global, as the original does.
    """
    if '__class__' in fn.__code__.co_freevars:
        raise parser.NoSource('uses zero-argument super(); profiled uninstrumented')
    tree, filename, source_lines = parser.parse_function(fn)
    tree = mangling.mangle(tree, mangling.owner_class(fn))   # self.__x as in the class body
    code = fn.__code__
    for site in sites.number_sites(tree, source_lines, tree.lineno).values():
        recorder.profile.site_info[(code, site.id)] = site
    tree = _as_copy(tree)
    code_name = '__jp_code'
    tree = _Instrument(lambda: common.load(code_name)).visit(tree)
    freevars = (_PROFILER, code_name) + code.co_freevars
    inner = _compile_copy(tree, freevars, filename, recompile.future_flags(code))
    inner = _named_like(inner, code)
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    cells[_PROFILER] = types.CellType(recorder)
    cells[code_name] = types.CellType(code)
    missing = [name for name in inner.co_freevars if name not in cells]
    if missing:
        raise parser.NoSource('the instrumented copy of %s needs free names %s the original '
                              'does not have' % (fn.__qualname__, missing))
    closure = tuple(cells[name] for name in inner.co_freevars)
    copy = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    return copy


_COPY_NAME = '__janus_instrumented'


def _named_like(inner, code):
    """``inner`` with the original's name, so tracebacks through the copy read as eager's."""
    names = {'co_name': code.co_name}
    if hasattr(code, 'co_qualname'):   # Python 3.11+
        names['co_qualname'] = code.co_qualname
    return inner.replace(**names)


def _as_copy(tree):
    """A def named ``_COPY_NAME`` without decorators, defaults or annotations (the copy
    gets the original's defaults; annotations would be evaluated in the wrong scope)."""
    if isinstance(tree, gast.Lambda):
        body = [gast.copy_location(gast.Return(tree.body), tree.body)]
        tree = gast.copy_location(
            gast.FunctionDef(_COPY_NAME, tree.args, body, [], None, None, []), tree)
    tree.name = _COPY_NAME
    tree.decorator_list, tree.returns = [], None
    tree.args.defaults = []
    tree.args.kw_defaults = [None] * len(tree.args.kwonlyargs)
    for arg in [*tree.args.posonlyargs, *tree.args.args, *tree.args.kwonlyargs,
                tree.args.vararg, tree.args.kwarg]:
        if arg is not None:
            arg.annotation = None
    return tree


def _compile_copy(tree, freevars, filename, flags):
    """The code object of ``tree`` compiled inside a factory taking ``freevars``, with
    the original's ``__future__`` features (``flags``)."""
    factory_args = gast.arguments([gast.Name(n, gast.Param(), None, None) for n in freevars],
                                  [], None, [], [], None, [])
    factory = gast.FunctionDef('__janus_profile_factory', factory_args,
                               [tree, gast.Return(common.load(tree.name))], [], None, None, [])
    module = gast.gast_to_ast(gast.Module([gast.copy_location(factory, tree)], []))
    ast.fix_missing_locations(module)
    compiled = compile(module, filename, 'exec', flags=flags, dont_inherit=True)
    factory_code = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    return next(c for c in factory_code.co_consts if isinstance(c, types.CodeType))
