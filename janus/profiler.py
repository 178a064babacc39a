"""The profiler: runs calls imperatively and records what each AST site did.

Needs nothing run before it.  It never touches the user's code: it runs an
*instrumented copy* of the function (same source, globals, closure cells and
defaults) and, through ``callee``, instrumented copies of the user's own
callees.  The copy's frame looks like the original's to the code in it
(``_constant_hooks``): the recorder and the code object are constants of
the copy's code, not names, so ``locals()``, ``vars()``, ``dir()`` and
``frame.f_locals`` show the user's names only, and every call, truth test
and iteration of user code runs from the user's own frame (``locals()``,
``sys._getframe()``, ``eval`` and tracebacks see no janus frame).

Per site id (``pyct.sites``; keyed by (code object, site id) so callees'
sites are distinct) and per profiled call it records:

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
import uuid
import weakref

import gast
import tensorflow as tf

from janus import call_signature, callables, guards
from janus.graphgen.converters import common
from janus.pyct import anno, mangling, parser, recompile, sites
from janus.runtime import layers, whitelist

# Placeholders compiled into the copy as string constants, then replaced in its
# code objects' constants by the recorder and the original code object
# (``_constant_hooks``).  Unique per process: no constant of yours matches one.
_RECORDER = '\0janus-profiler-recorder-%s' % uuid.uuid4().hex
_CODE = '\0janus-profiler-code-%s' % uuid.uuid4().hex


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
            call_signature.record_shapes(value, name, self.shapes)
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


class _Counter:
    """Counts a loop's items into the current call's sequence.  The loop iterates
    ``map(counter, iterable)``, made in the user's frame: the user's ``__iter__``
    and ``__next__`` (a generator's body) run with the user's frame as caller, and
    their tracebacks hold no janus frame; only this counting runs in janus's."""

    __slots__ = ('_seq', '_index', '_recorder')

    def __init__(self, seq, recorder):
        self._seq = seq
        self._index = len(seq)
        self._recorder = recorder
        seq.append(0)

    def __call__(self, item):
        try:
            self._seq[self._index] += 1
        except Exception:  # noqa: BLE001 - never changes what the loop sees
            self._recorder.failed()
        return item


def _uncounted(item):
    return item


def _identity(fn):
    """What an instrumented copy was made from: a change means a new copy."""
    return (fn.__code__, fn.__defaults__, fn.__kwdefaults__)


class Recorder:
    """The object instrumented code calls (a constant of it); one per janus function.

    Its hooks run inside the user's code, so a failure of janus's own in one
    of them must not change what that code sees: the hook still does what the
    site does (evaluates the test once, calls the callee), the call's
    observations are dropped, and ``broken`` keeps the first such error
    (the function then stops being instrumented, ``api.py``).  Exceptions of
    the user's own code (a callee raising, a test's ``__bool__``) pass through.
    Hooks never receive the user's arguments (``callee`` returns what the site
    then calls), and their parameters are positional-only.
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
    # Builtins it calls in the user's frame (C code: no frame of janus's in between),
    # as attributes of the recorder, a constant: the user may shadow their names.
    bool = bool
    map = map

    def subject(self, code, site, value, /):
        """A branch/loop test's value, before the user's frame takes its truth:
        records whether it is a tensor, returns it."""
        try:
            if isinstance(value, tf.Tensor):
                self.profile.sites[(code, site)].tensor = True
        except Exception:  # noqa: BLE001 - see the class docstring
            self.failed()
        return value

    def test(self, code, site, outcome, /):
        """A branch/loop test's truth (``bool()`` taken in the user's frame): records
        it and returns it."""
        try:
            self._observe(code, site, outcome)
        except Exception:  # noqa: BLE001 - see the class docstring
            self.failed()
        return outcome

    def operand(self, code, site, value, /):
        """An ``and``/``or`` operand: records its truth, returns the value itself."""
        outcome = bool(value)
        try:
            self.subject(code, site, value)
            self._observe(code, site, outcome)
        except Exception:  # noqa: BLE001
            self.failed()
        return value

    def _observe(self, code, site, outcome):
        self._current[(code, site)].append(outcome)

    def loop(self, code, site, iterable, /):
        """(counter, iterable) for ``map`` in the user's frame (``_Counter``)."""
        try:
            if isinstance(iterable, tf.Tensor):
                self.profile.sites[(code, site)].tensor = True
            return _Counter(self._current[(code, site)], self), iterable
        except Exception:  # noqa: BLE001
            self.failed()
            return _uncounted, iterable

    def mark(self, code, site, /):
        try:
            self.profile.sites[(code, site)].taken += 1
        except Exception:  # noqa: BLE001
            self.failed()

    def callee(self, code, site, callee, /):
        """What a call site calls instead of ``callee``: its instrumented copy.  The
        call itself runs in the user's frame, so ``locals()``, ``sys._getframe()``,
        ``eval`` and tracebacks see the user's frames only."""
        target = self._instrumented(callee)
        try:
            self.profile.sites[(code, site)].callees[_callee_name(callee)] += 1
        except Exception:  # noqa: BLE001
            self.failed()
        return target

    def returned(self, code, site, result, /):
        """A call site's result: records its type, returns it."""
        try:
            self.profile.sites[(code, site)].returns[type(result).__name__] += 1
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
    """A call of the recorder's hook ``method`` (the recorder is a constant)."""
    return gast.Call(gast.Attribute(common.const(_RECORDER), method, gast.Load()), list(args), [])


class _Instrument(gast.NodeTransformer):
    """Rewrites sites into recorder calls that record and then do what the site did."""

    def code(self):
        return common.const(_CODE)   # the original code object, once compiled

    def _site(self, node):
        return common.const(anno.get(node, anno.Key.SITE))

    def visit_Call(self, node):
        """``f(a, k=b)`` -> ``returned(code, site, callee(code, site, f)(a, k=b))``:
        the call itself stays in the user's frame."""
        node = self.generic_visit(node)
        site = self._site(node)
        node.func = gast.copy_location(_jp('callee', self.code(), site, node.func), node.func)
        return gast.copy_location(_jp('returned', self.code(), site, node), node)

    def visit_If(self, node):
        """``if t:`` -> ``if test(code, site, bool(subject(code, site, t))):``."""
        site = self._site(node)
        node = self.generic_visit(node)
        truth = _jp('bool', _jp('subject', self.code(), site, node.test))
        node.test = gast.copy_location(_jp('test', self.code(), site, truth), node.test)
        return node

    visit_While = visit_If
    visit_IfExp = visit_If

    def visit_For(self, node):
        """``for x in it:`` -> ``for x in map(*loop(code, site, it)):``."""
        site = self._site(node)
        node = self.generic_visit(node)
        counted = _jp('map', gast.Starred(_jp('loop', self.code(), site, node.iter), gast.Load()))
        node.iter = gast.copy_location(counted, node.iter)
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

    The copy is compiled inside a factory function whose parameters are
    ``fn``'s free variables, so it sees the same closure cells and no other
    names; the recorder and the code object are constants of its code.  Its
    own ``def`` gets a name nothing can refer to, so a recursive call by name
    still reads the global, as the original does.
    """
    if '__class__' in fn.__code__.co_freevars:
        raise parser.NoSource('uses zero-argument super(); profiled uninstrumented')
    tree, filename, source_lines = parser.parse_function(fn)
    tree = mangling.mangle(tree, mangling.owner_class(fn))   # self.__x as in the class body
    code = fn.__code__
    for site in sites.number_sites(tree, source_lines, tree.lineno).values():
        recorder.profile.site_info[(code, site.id)] = site
    tree = _as_copy(tree)
    tree = _Instrument().visit(tree)
    inner = _compile_copy(tree, code.co_freevars, filename, recompile.future_flags(code))
    inner = _constant_hooks(inner, {_RECORDER: recorder, _CODE: code})
    inner = _named_like(inner, code)
    _check_same_names(inner, code)
    closure = fn.__closure__
    copy = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    return copy


_COPY_NAME = '__janus_instrumented'


def _constant_hooks(code, objects):
    """``code`` (and the code nested in it) with each placeholder constant replaced
    by its object.  Constants are not names: the copy's frame has exactly the
    original's locals and free variables, whatever looks at them."""
    def replaced(const):
        if isinstance(const, types.CodeType):
            return _constant_hooks(const, objects)
        if type(const) is str and const in objects:
            return objects[const]
        return const
    return code.replace(co_consts=tuple(replaced(c) for c in code.co_consts))


def _frame_names(code):
    return code.co_varnames, code.co_cellvars, code.co_freevars


def _check_same_names(copy, code):
    """The copy's frame must hold exactly the original's names, in its order (what
    ``locals()`` lists); a copy that would not is not used (profiled plainly)."""
    if _frame_names(copy) != _frame_names(code):
        raise parser.NoSource('the instrumented copy of %s would have other local names '
                              '(%s, not %s); profiled uninstrumented'
                              % (code.co_name, _frame_names(copy), _frame_names(code)))


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
