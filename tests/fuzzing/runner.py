"""Runs one generated program eagerly and under janus, comparing every call.

The program text is written to a file (janus needs source) and exec'd twice
into fresh namespaces: the eager side gets ``jit = lambda fn: fn``, the janus
side ``jit = janus.function``.  Each step of the call sequence runs on both
sides in turn (eager first); after every call the two sides are compared:

* the outcome: returned, or raised (exception type and message);
* the returned value (tensors: dtype, shape, values within rtol 1e-5, atol 1e-5; Python
  values: identical type and value);
* what the call printed (stdout: the same text; float numbers in it, i.e.
  printed tensors, within the tensor tolerance);
* the observable state: every module-level name of the program (objects'
  attributes, list/dict contents, tf.Variable values, tf.random.Generator
  state, NumPy RandomState/Generator state (read without drawing), a Python
  iterator's position and items, functions' defaults and closure cells,
  classes' data attributes)
  and the call's arguments after the call;
* object identity: one memo numbers every mutable object (list, dict, set,
  deque, user object, Variable, ndarray, function) in the order the snapshot walk
  meets it, state first, then arguments, then the return value; a second
  meeting is a reference.  So "returns the argument itself", "returns
  self.items itself" and aliasing among state are compared too.

Text (exception messages, stdout, strings) is compared after blanking what
legitimately differs between the two copies: object addresses and the two
module names the program runs under.

A difference is a ``Divergence``; its ``kind`` is one of KINDS.  When the
sides agree but janus recorded an internal error it recovered from (the call
ran as plain Python; ``explain`` shows an 'internal error' event), that is
kind ``janus-internal``: results are right, janus has a bug.  A janus-side
exception that eager did not raise (the same way) is ``janus-error`` when it
is a JanusError other than StrictModeError, or when the innermost traceback
frame outside TensorFlow/Keras/NumPy/the standard library is a janus frame;
otherwise ``exception``.  An exception both sides raised identically is no
divergence, wherever it was raised.
"""
import builtins
import collections
import contextlib
import enum
import gc
import io
import math
import os
import re
import signal
import sys
import sysconfig
import tempfile
import traceback
import types

import numpy as np
import tensorflow as tf

import janus
from janus.api import JanusFunction
from janus.errors import JanusError, StrictModeError

KINDS = ('janus-error', 'janus-internal', 'exception', 'return', 'identity', 'symbolic-leak', 'stdout', 'state',
         'hang')

JANUS_DIR = os.path.dirname(os.path.abspath(janus.__file__)) + os.sep
_LIB_DIRS = tuple(sorted({os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                          for m in (tf, np, os, enum)} |
                         {p + os.sep for p in (sysconfig.get_paths()['purelib'],
                                               sysconfig.get_paths()['stdlib'],
                                               sysconfig.get_paths()['platlib'])}))
_ADDRESS = re.compile(r'0x[0-9a-fA-F]+')


class FuzzTimeout(BaseException):
    """A program ran past its time limit (SIGALRM)."""


class Divergence:
    """The first difference between the two sides of a program."""

    def __init__(self, kind, step, where, eager, janus_, detail='', tb=None):
        self.kind = kind
        self.step = step          # index into program.steps; -1: the module's exec
        self.where = where        # 'return[1]', 'S.hist[2]', 'stdout', 'outcome', ...
        self.eager = eager
        self.janus = janus_
        self.detail = detail      # exception type names for the exception kinds
        self.traceback = tb

    @property
    def signature(self):
        """What "diverges in the same way" means for the minimizer: the kind, the
        exception types (and the janus function that raised, for janus errors),
        the state root (module-level name) for state and identity divergences."""
        root = ''
        if self.kind in ('state', 'identity') and self.where not in ('outcome', 'stdout'):
            root = re.split(r'[.\[]', self.where, maxsplit=1)[0]
        return (self.kind, self.detail, root)

    def describe(self):
        text = '%s%s at step %d (%s): eager %s | janus %s' % (
            self.kind, ' [%s]' % self.detail if self.detail else '', self.step, self.where,
            _short(self.eager), _short(self.janus))
        return text

    def __repr__(self):
        return '<Divergence %s>' % self.describe()


class Result:
    def __init__(self):
        self.divergence = None
        self.calls = 0               # call steps run (on the janus side)
        self.janus_calls = 0         # calls counted by janus.stats, all janus functions
        self.graph_calls = 0
        self.graphs_built = 0
        self.fallbacks = 0
        self.split_calls = 0         # calls run with graph breaks (janus.stats split_calls)
        self.graph_part_calls = 0    # of those, calls in which a graph segment ran a graph
        self.segment_graph_calls = 0  # graph runs of the segments' own janus functions
        self.eager_raised = 0        # call steps that raised eagerly (program's own errors)
        self.eager_errors = {}       # exception type -> count (to tune the generator)
        self.seconds = 0.0

    def __repr__(self):
        return '<Result calls=%d graph_calls=%d %s>' % (self.calls, self.graph_calls,
                                                        self.divergence)


def _short(v, limit=300):
    s = v if isinstance(v, str) else repr(v)
    return s if len(s) <= limit else s[:limit] + '...'


# -- running one side ------------------------------------------------------------------

class Side:
    serial = 0

    def __init__(self, program, path, use_janus):
        self.use_janus = use_janus
        self.created = []      # janus functions made by this side's ``jit``
        self.seen_events = []
        self.path = path
        Side.serial += 1
        self.modname = 'fuzzprog_%s_%d' % ('janus' if use_janus else 'eager', Side.serial)
        self.module = types.ModuleType(self.modname)
        self.module.__file__ = path
        sys.modules[self.modname] = self.module   # inspect.getmodule, AutoGraph, pickling
        self.ns = self.module.__dict__
        self.ns['__builtins__'] = builtins
        self.ns['jit'] = self._jit if use_janus else _identity

    def _jit(self, fn):
        jf = janus.function(fn)
        self.created.append(jf)
        return jf

    def exec_module(self, code):
        return _outcome(lambda: exec(code, self.ns))

    def run_step(self, step):
        """(outcome, args, stdout) of one step."""
        out = io.StringIO()
        args = None
        with contextlib.redirect_stdout(out):
            if step[0] == 'call':
                _, target, argsrc = step
                packed = _outcome(lambda: eval('__fuzz_pack__(%s)' % argsrc,
                                               dict(self.ns, __fuzz_pack__=_pack)))
                if packed[0] == 'raised':
                    return packed, None, out.getvalue()
                args, kwargs = packed[1]

                def call():
                    fn = eval(target, self.ns)
                    return fn(*args, **kwargs)
                result = _outcome(call)
            else:
                result = _outcome(lambda: exec(step[1], self.ns))
        return result, args, out.getvalue()

    def functions(self):
        """The janus functions this side made, the segments of those that run with
        graph breaks (each a janus function of its own; they may break again), and the
        layers and functions their breaks' statements run through janus (routes)."""
        out, todo = [], list(self.created)
        while todo:
            jf = todo.pop(0)
            out.append(jf)
            for split in _splits(jf):
                todo += [part for part in split.slots if isinstance(part, JanusFunction)]
            routes = getattr(getattr(jf, 'state', None), 'routes', None)
            if routes is not None:
                todo += [nested for _, nested in routes.functions()]
        return out

    def new_internal_errors(self):
        """janus's own errors it recovered from (ran the call as plain Python) since
        the last look: events 'internal error' (and invariant failures), the graph
        segments' own included."""
        found = []
        for jf in self.functions():
            for ev in list(getattr(jf, 'events', ())):
                internal = ev.kind == 'internal error' or (
                    ev.kind == 'imperative' and 'internal' in str(ev.detail).lower())
                if internal and not any(ev is seen for seen in self.seen_events):
                    self.seen_events.append(ev)
                    found.append(ev)
        return found

    def close(self):
        """Forgets the program: whatever still refers to its module (TF's caches of
        Python types, tracebacks) must not keep its objects (dataset iterators with
        threads, variables, janus's graphs) alive until exit."""
        sys.modules.pop(self.modname, None)
        self.ns.clear()
        self.created = []
        self.seen_events = []

    def stats(self):
        """janus.stats summed over the functions ``jit`` made; ``segment_*``: the same
        summed over their graph segments (graph breaks)."""
        total = {}
        for jf in self.created:
            for k, v in janus.stats(jf).items():
                total[k] = total.get(k, 0) + v
        for jf in self.functions():
            if any(jf is c for c in self.created):
                continue
            for k, v in janus.stats(jf).items():
                total['segment_' + k] = total.get('segment_' + k, 0) + v
        return total


def _splits(jf):
    """The splits of a janus function (``state.splits``: one per set of break lines;
    ``state.split`` before that)."""
    state = getattr(jf, 'state', None)
    splits = getattr(state, 'splits', None)
    if splits is not None:
        return list(splits.values())
    split = getattr(state, 'split', None)
    return [split] if split is not None else []


def _identity(fn):
    return fn


def _pack(*args, **kwargs):
    return args, kwargs


def _outcome(thunk):
    try:
        return ('ok', thunk())
    except FuzzTimeout:
        raise
    except Exception as e:  # noqa: BLE001 - the exception is the outcome
        return ('raised', e, e.__traceback__)


_MODNAME = re.compile(r'fuzzprog_(?:eager|janus)_\d+')


def normalize(text):
    """Text with what legitimately differs between the sides blanked: object
    addresses, the module names the two copies of the program run under, and the
    folder a program's file is in (AutoGraph's errors name the file of an earlier
    program whose function had the same code: its conversion cache compares code
    objects, which ignore the file)."""
    return _WORKDIR.sub('janus_fuzz_?', _MODNAME.sub('fuzzprog', _ADDRESS.sub('0x?', text)))


_WORKDIR = re.compile(r'janus_fuzz_\w+')


def _exc_text(e):
    return normalize(str(e))


def _exc_name(e):
    return '%s.%s' % (type(e).__module__, type(e).__qualname__) \
        if type(e).__module__ not in ('builtins',) and not type(e).__module__.startswith(
            'fuzzprog_') else type(e).__qualname__


def janus_internal(exc, tb):
    """Is ``exc`` janus's own error (not the program's)?"""
    if isinstance(exc, JanusError) and not isinstance(exc, StrictModeError):
        return True
    innermost = None
    for frame, _ in traceback.walk_tb(tb):
        filename = os.path.abspath(frame.f_code.co_filename)
        if filename.startswith(_LIB_DIRS) and not filename.startswith(JANUS_DIR):
            continue
        if filename.startswith('<frozen'):
            continue
        innermost = filename
    return innermost is not None and innermost.startswith(JANUS_DIR)


def _janus_frame(tb):
    """module.function of the innermost janus frame of a traceback."""
    name = '?'
    for frame, _ in traceback.walk_tb(tb):
        filename = os.path.abspath(frame.f_code.co_filename)
        if filename.startswith(JANUS_DIR):
            name = '%s.%s' % (filename[len(JANUS_DIR):-3].replace(os.sep, '.'),
                              frame.f_code.co_name)
    return name


# -- snapshots ------------------------------------------------------------------------

class Snapshot:
    """A comparable tree of a value; mutable objects are numbered by first meeting."""

    def __init__(self, program_file, modname):
        self.memo = {}
        self.alive = []
        self.program_file = program_file
        self.modname = modname

    def _ref(self, v):
        key = id(v)
        if key in self.memo:
            return ('ref', self.memo[key]), None
        self.memo[key] = len(self.memo)
        self.alive.append(v)
        return None, self.memo[key]

    def take(self, v, depth=0):
        if depth > 40:
            return ('deep',)
        if isinstance(v, str):
            return ('py', type(v).__name__, normalize(v))
        if v is None or isinstance(v, (bool, int, float, bytes, complex)):
            return ('py', type(v).__name__, v)
        if isinstance(v, enum.Enum):
            return ('enum', type(v).__qualname__, v.name)
        if isinstance(v, tf.Variable) or type(v).__name__ == 'Variable':
            ref, n = self._ref(v)
            if ref:
                return ref
            return ('var', n, self._tensor(tf.convert_to_tensor(v)))
        if isinstance(v, tf.Tensor):
            return self._tensor(v)
        if isinstance(v, tf.random.Generator):
            ref, n = self._ref(v)
            if ref:
                return ref
            return ('generator', n, self._tensor(tf.convert_to_tensor(v.state)))
        if isinstance(v, np.ndarray):
            ref, n = self._ref(v)
            if ref:
                return ref
            return ('ndarray', n, str(v.dtype), v.shape, v.tolist())
        if isinstance(v, np.generic):
            return ('npscalar', type(v).__name__, v.item())
        if isinstance(v, (np.random.RandomState, np.random.Generator)):
            ref, n = self._ref(v)
            if ref:
                return ref
            return ('nprng', n, type(v).__name__, _rng_state(v))
        if type(v) in _ITERATORS:
            ref, n = self._ref(v)
            if ref:
                return ref
            # (iter, (the list,), position), or (iter, ((),)) once exhausted: no side effect
            reduced = v.__reduce__()
            position = reduced[2] if len(reduced) > 2 else 'exhausted'
            return ('iterator', n, type(v).__name__, position,
                    self.take(reduced[1][0], depth + 1))
        if isinstance(v, tuple):
            return ('tuple', type(v).__name__, [self.take(x, depth + 1) for x in v])
        if isinstance(v, (list, dict, set, frozenset)):
            ref, n = self._ref(v)
            if ref:
                return ref
            if isinstance(v, list):
                return ('list', n, type(v).__name__, [self.take(x, depth + 1) for x in v])
            if isinstance(v, dict):
                return ('dict', n, type(v).__name__,
                        [(self.take(k, depth + 1), self.take(x, depth + 1)) for k, x in v.items()])
            return ('set', n, type(v).__name__, sorted(repr(self.take(x, depth + 1)) for x in v))
        if isinstance(v, collections.deque):
            ref, n = self._ref(v)
            if ref:
                return ref
            return ('list', n, 'deque(maxlen=%r)' % v.maxlen, [self.take(x, depth + 1) for x in v])
        if isinstance(v, JanusFunction):
            v = v.fn
        if isinstance(v, types.FunctionType):
            return self._function(v, depth)
        if isinstance(v, types.MethodType):
            return ('method', v.__func__.__qualname__, self.take(v.__self__, depth + 1))
        if isinstance(v, types.BuiltinMethodType) and not isinstance(
                getattr(v, '__self__', None), (types.ModuleType, type(None))):
            # a container's bound method kept as a callback (``self.record = self.hist.append``)
            return ('method', v.__qualname__, self.take(v.__self__, depth + 1))
        if isinstance(v, type):
            return ('class', v.__qualname__)
        if isinstance(v, types.ModuleType):
            return ('pymodule', v.__name__)
        module = getattr(type(v), '__module__', '') or ''
        if hasattr(v, '__dict__') and (module == self.modname or (
                not self.modname and module.startswith('fuzzprog_'))):
            ref, n = self._ref(v)
            if ref:
                return ref
            attrs = sorted(vars(v).items())
            return ('obj', n, type(v).__qualname__,
                    [(k, self.take(x, depth + 1)) for k, x in attrs])
        layer = self._layer(v, depth)
        if layer is not None:
            return layer
        if type(v).__name__ == 'BoundJanusMethod':
            return ('method', v.__janus_function__.fn.__qualname__,
                    self.take(v.__self__, depth + 1))
        return ('opaque', type(v).__qualname__)

    def _layer(self, v, depth):
        """Keras layers/models/optimizers, tf.Modules: their variables (and trainable)."""
        if not hasattr(type(v), 'variables'):
            return None
        try:
            variables = list(v.variables)
        except Exception:  # noqa: BLE001 - not a container of variables after all
            return None
        if not all(isinstance(x, tf.Variable) or type(x).__name__ == 'Variable'
                   for x in variables):
            return None
        ref, n = self._ref(v)
        if ref:
            return ref
        trainable = getattr(v, 'trainable', None)
        return ('module', n, type(v).__qualname__,
                [self.take(x, depth + 1) for x in variables],
                trainable if isinstance(trainable, bool) else None)

    def _tensor(self, t):
        try:
            value = t.numpy()
        except Exception:  # noqa: BLE001 - a symbolic tensor has no value
            return ('SYMBOLIC', repr(t))
        return ('T', t.dtype.name, tuple(t.shape), value)

    def _function(self, fn, depth):
        ref, n = self._ref(fn)
        if ref:
            return ref
        defaults = [self.take(d, depth + 1) for d in (fn.__defaults__ or ())]
        kwdefaults = [(k, self.take(d, depth + 1)) for k, d in sorted((fn.__kwdefaults__ or {}).items())]
        cells = []
        if fn.__code__.co_filename == self.program_file:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
                try:
                    contents = cell.cell_contents
                except ValueError:
                    cells.append((name, ('emptycell',)))
                    continue
                cells.append((name, self.take(contents, depth + 1)))
        return ('fn', n, fn.__qualname__, defaults, kwdefaults, cells)

    def state(self, ns):
        """The program's observable state: its module-level names, in order."""
        roots = []
        for name, v in list(ns.items()):
            if name.startswith('__') or name == 'jit' or isinstance(v, types.ModuleType):
                continue
            if isinstance(v, type):
                if getattr(v, '__module__', None) != self.modname or issubclass(v, enum.Enum):
                    continue
                roots.append((name, self._class(v)))
                continue
            if isinstance(v, (types.FunctionType, JanusFunction)):
                fn = v.fn if isinstance(v, JanusFunction) else v
                code = getattr(fn, '__code__', None)   # a janus function of a layer has none
                if code is not None and code.co_filename != self.program_file:
                    continue
            roots.append((name, self.take(v)))
        return roots

    def _class(self, cls):
        attrs = []
        for k, v in vars(cls).items():
            if k.startswith('__'):
                continue
            if isinstance(v, (staticmethod, classmethod)):
                v = v.__func__
            if isinstance(v, property):
                continue
            attrs.append((k, self.take(v)))
        return ('class', cls.__qualname__, attrs)


_ITERATORS = tuple(type(iter(c)) for c in ([], (), range(1), 'a'))


def _rng_state(rng):
    """A NumPy RandomState's or Generator's state, read without drawing: the position
    in the stream and a digest of the key (624 words for MT19937)."""
    if isinstance(rng, np.random.RandomState):
        name, key, pos, has_gauss, gauss = rng.get_state()
        return (name, pos, has_gauss, gauss, hash(key.tobytes()))
    return repr(sorted(rng.bit_generator.state.items()))


# -- comparing --------------------------------------------------------------------------

class _Diff(Exception):
    def __init__(self, where, eager, janus_, identity=False):
        super().__init__(where)
        self.where, self.eager, self.janus, self.identity = where, eager, janus_, identity


def _render(node):
    if not isinstance(node, tuple) or not node:
        return repr(node)
    tag = node[0]
    if tag == 'T':
        return 'tensor(%s, %s, %s)' % (node[1], list(node[2]), np.array2string(
            np.asarray(node[3]), precision=6, threshold=12))
    if tag == 'py':
        return repr(node[2])
    if tag == 'ref':
        return '<the same object as #%d>' % node[1]
    if tag == 'SYMBOLIC':
        return 'SYMBOLIC %s' % node[1]
    if tag in ('list', 'dict', 'obj', 'var', 'generator', 'fn', 'ndarray', 'set', 'module',
               'nprng', 'iterator'):
        return '#%d %s' % (node[1], _short(_plain(node), 240))
    return _short(_plain(node), 240)


def _plain(node):
    """A short human rendering of a snapshot node."""
    if not isinstance(node, tuple) or not node:
        return node
    tag = node[0]
    if tag == 'py':
        return node[2]
    if tag == 'T':
        return 'tensor(%s %s)' % (node[1], np.asarray(node[3]).tolist())
    if tag == 'tuple':
        return tuple(_plain(x) for x in node[2])
    if tag == 'list':
        return [_plain(x) for x in node[3]]
    if tag == 'dict':
        return {repr(_plain(k)): _plain(x) for k, x in node[3]}
    if tag == 'obj':
        return '%s(%s)' % (node[2], ', '.join('%s=%r' % (k, _plain(x)) for k, x in node[3]))
    if tag == 'var':
        return 'Variable(%s)' % (_plain(node[2]),)
    if tag == 'generator':
        return 'Generator(state=%s)' % (_plain(node[2]),)
    if tag == 'ref':
        return '<same as #%d>' % node[1]
    if tag == 'enum':
        return '%s.%s' % (node[1], node[2])
    if tag == 'fn':
        return 'function %s' % node[2]
    if tag == 'nprng':
        return '%s(state=%s)' % (node[2], _short(str(node[3]), 120))
    if tag == 'iterator':
        return '%s(at %s of %s)' % (node[2], node[3], _plain(node[4]))
    return node


def _same_py(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, str):
        return text_close(a, b)      # f-strings/str() of tensors: their numbers
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, float):     # Python floats (dynamic scalars): exactly, -0.0 is not 0.0
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, complex):
        return a == b or (a != a and b != b)
    return a == b


def compare(e, j, where):
    """Raises _Diff at the first difference between snapshot nodes."""
    te, tj = e[0], j[0]
    if te != tj:
        raise _Diff(where, _render(e), _render(j), identity='ref' in (te, tj))
    if te == 'ref':
        if e[1] != j[1]:
            raise _Diff(where, _render(e), _render(j), identity=True)
        return
    if te == 'T':
        if e[1] != j[1] or e[2] != j[2] or not _close(e[3], j[3]):
            raise _Diff(where, _render(e), _render(j))
        return
    if te == 'py':
        if not _same_py(e[2], j[2]) or e[1] != j[1]:
            raise _Diff(where, _render(e), _render(j))
        return
    if te in ('list', 'dict', 'obj', 'var', 'generator', 'fn', 'ndarray', 'set', 'module',
              'nprng', 'iterator'):
        if e[1] != j[1]:
            raise _Diff(where, _render(e), _render(j), identity=True)
    if te == 'nprng':
        if e[2:] != j[2:]:
            raise _Diff(where + '.<rng state>', _render(e), _render(j))
        return
    if te == 'iterator':
        if e[2:4] != j[2:4]:
            raise _Diff(where + '.<position>', _render(e), _render(j))
        compare(e[4], j[4], where + '.<items>')
        return
    if te == 'tuple' or te == 'list':
        items_e, items_j = e[-1], j[-1]
        if e[-2] != j[-2] or len(items_e) != len(items_j):
            raise _Diff(where, _render(e), _render(j))
        for i, (a, b) in enumerate(zip(items_e, items_j)):
            compare(a, b, '%s[%d]' % (where, i))
        return
    if te == 'dict':
        ke, kj = [k for k, _ in e[3]], [k for k, _ in j[3]]
        if ke != kj:
            raise _Diff(where, _render(e), _render(j))
        for (k, a), (_, b) in zip(e[3], j[3]):
            compare(a, b, '%s[%s]' % (where, _short(repr(_plain(k)), 40)))
        return
    if te == 'obj':
        if e[2] != j[2] or [k for k, _ in e[3]] != [k for k, _ in j[3]]:
            raise _Diff(where, _render(e), _render(j))
        for (k, a), (_, b) in zip(e[3], j[3]):
            compare(a, b, '%s.%s' % (where, k))
        return
    if te in ('var', 'generator'):
        compare(e[2], j[2], where + ('.value' if te == 'var' else '.state'))
        return
    if te == 'fn':
        if e[2] != j[2] or len(e[3]) != len(j[3]) or len(e[5]) != len(j[5]):
            raise _Diff(where, _render(e), _render(j))
        for i, (a, b) in enumerate(zip(e[3], j[3])):
            compare(a, b, '%s.__defaults__[%d]' % (where, i))
        for (k, a), (_, b) in zip(e[4], j[4]):
            compare(a, b, '%s.__kwdefaults__[%r]' % (where, k))
        for (k, a), (_, b) in zip(e[5], j[5]):
            compare(a, b, '%s.<cell %s>' % (where, k))
        return
    if te == 'class':
        if len(e) == 2 or len(j) == 2:   # a class held in the state: by its name
            if e != j:
                raise _Diff(where, _render(e), _render(j))
            return
        for (k, a), (_, b) in zip(e[2], j[2]):
            compare(a, b, '%s.%s' % (where, k))
        if len(e[2]) != len(j[2]):
            raise _Diff(where, _render(e), _render(j))
        return
    if te == 'ndarray':
        if e[2:4] != j[2:4] or not _close(np.asarray(e[4]), np.asarray(j[4])):
            raise _Diff(where, _render(e), _render(j))
        return
    if te == 'module':
        if e[2] != j[2] or len(e[3]) != len(j[3]) or e[4] != j[4]:
            raise _Diff(where, _render(e), _render(j))
        for i, (a, b) in enumerate(zip(e[3], j[3])):
            compare(a, b, '%s.variables[%d]' % (where, i))
        return
    if te == 'method':
        if e[1] != j[1]:
            raise _Diff(where, _render(e), _render(j))
        compare(e[2], j[2], where + '.__self__')
        return
    if e != j:
        raise _Diff(where, _render(e), _render(j))


# Float tolerance for tensors (and for numbers printed or formatted from them).
# A graph may legitimately differ from eager by reassociation (grappler), a few
# ulps; generated programs clip values to [-20, 20], where an ulp of float32 is
# at most 2e-6, so the absolute tolerance covers a few ulps after cancellation.
RTOL, ATOL = 1e-5, 1e-5
_NUMBER = re.compile(r'[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf')


def _close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in 'fc':
        return bool(np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True))
    return bool(np.array_equal(a, b))


# Printed numbers with more significant digits than this are Python floats (repr:
# up to 17 digits) or float64 scalars, never float32 tensors (<= 9) or arrays (numpy
# prints 8): they must match exactly.  A float32 leaking into a printed Python float
# ('0.0010000000474974513' for 0.001) is within RTOL, so the tolerance would hide it.
EXACT_DIGITS = 11


def _digits(token):
    mantissa = re.split('[eE]', token)[0].lstrip('+-').replace('.', '').lstrip('0')
    return len(mantissa)


def text_close(a, b):
    """Same text, except that float numbers in it (printed tensors) may differ
    within the tensor tolerance; integers must match exactly."""
    if a == b:
        return True
    na, nb = _NUMBER.findall(a), _NUMBER.findall(b)
    # numpy pads the numbers of a printed array to one width: spaces next to a
    # number follow its digits ('11.04617 ,' vs '11.046171,')
    skeleton_a = re.sub(r' *# *', '#', _NUMBER.sub('#', a))
    skeleton_b = re.sub(r' *# *', '#', _NUMBER.sub('#', b))
    if len(na) != len(nb) or skeleton_a != skeleton_b:
        return False
    for x, y in zip(na, nb):
        if x == y:
            continue
        if not any(c in x + y for c in '.eEn'):
            return False          # integers: exact
        if max(_digits(x), _digits(y)) > EXACT_DIGITS:
            return False          # a Python float's repr (float32 tensors print <= 9 digits)
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return False
        if not (math.isclose(fx, fy, rel_tol=RTOL, abs_tol=ATOL)
                or (math.isnan(fx) and math.isnan(fy))):
            return False
    return True


def _symbolic(text):
    return 'SYMBOLIC' in text or 'Tensor("' in text


# -- the differential run ----------------------------------------------------------------

def run_program(program, workdir=None, time_limit=120, verbose=False, use_janus=True):
    """Runs ``program`` on both sides; a ``Result`` (``.divergence`` None if they agree)."""
    import time
    start = time.time()
    own_dir = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix='janus_fuzz_')
    path = os.path.join(workdir, '%s.py' % re.sub(r'\W', '_', program.name))
    with open(path, 'w') as f:
        f.write(program.source)
    result = Result()
    alarm = _Alarm(time_limit)
    try:
        with alarm:
            _run(program, path, result, verbose, use_janus)
    except FuzzTimeout:
        result.divergence = Divergence('hang', result.calls, 'time',
                                       'finished', 'ran past %ds' % time_limit)
    finally:
        result.seconds = time.time() - start
        _collect()
        if own_dir:
            try:
                os.remove(path)
                os.rmdir(workdir)
            except OSError:
                pass
    return result


_runs = [0]


def _collect():
    """A full garbage collection every 10 programs: the two copies of a program
    (module, functions, janus's graphs) are cyclic garbage once it ran.  Left to
    pile up, hundreds of programs' TF functions made the process take minutes to
    exit (and run slower)."""
    _forget_program_types()
    _runs[0] += 1
    if _runs[0] % 10 == 0:
        gc.collect()


def _forget_program_types():
    """TF caches its tensor-conversion lookup per Python type, so a program's
    class used as an operand (``acc * Scale(2.0)``) would keep the class, its
    module and everything the program made alive for good."""
    try:
        from tensorflow.python.framework import tensor_conversion_registry as registry
        with registry._tensor_conversion_func_lock:
            for key in [k for k in registry._tensor_conversion_func_cache
                        if str(getattr(k, '__module__', '')).startswith('fuzzprog_')]:
                del registry._tensor_conversion_func_cache[key]
    except (ImportError, AttributeError):
        pass


def _run(program, path, result, verbose=False, use_janus=True):
    code = compile(program.source, path, 'exec')
    # use_janus=False: both sides eager, a check of the fuzzer itself (no divergence
    # may show up then: anything would be a false positive of the comparison)
    eager, jside = Side(program, path, False), Side(program, path, use_janus)
    sides = (eager, jside)
    try:
        e_out = eager.exec_module(code)
        j_out = jside.exec_module(code)
        div = _compare_outcomes(-1, e_out, j_out, None, None, '', '', eager, jside)
        if div or e_out[0] == 'raised':
            result.divergence = div
            return
        for number, step in enumerate(program.steps):
            e_res, e_args, e_stdout = eager.run_step(step)
            j_res, j_args, j_stdout = jside.run_step(step)
            if step[0] == 'call':
                result.calls += 1
                if e_res[0] == 'raised':
                    result.eager_raised += 1
                    name = type(e_res[1]).__name__
                    result.eager_errors[name] = result.eager_errors.get(name, 0) + 1
            div = _compare_outcomes(number, e_res, j_res, e_args, j_args, e_stdout, j_stdout,
                                    eager, jside)
            if div is None:
                div = _internal(number, jside)
            if verbose:
                _print_step(number, step, e_res, j_res, e_stdout, j_stdout, div)
            if div:
                result.divergence = div
                return
    finally:
        if verbose:
            for jf in jside.created:
                print(janus.explain(jf))
        stats = jside.stats()
        result.janus_calls = stats.get('calls', 0)
        result.graph_calls = stats.get('graph_calls', 0)
        result.graphs_built = stats.get('graphs_built', 0)
        result.fallbacks = stats.get('fallbacks', 0)
        result.split_calls = stats.get('split_calls', 0)
        result.graph_part_calls = stats.get('graph_part_calls', 0)
        result.segment_graph_calls = stats.get('segment_graph_calls', 0)
        for side in sides:
            side.close()


def _internal(number, jside):
    events = jside.new_internal_errors()
    if not events:
        return None
    ev = events[0]
    text = str(ev.detail)
    m = re.match(r'janus failed while (.*?): (\w+):', text)
    detail = '%s@%s' % (m.group(2), m.group(1)) if m else re.sub(r'\d+', 'N', text)[:60]
    trace = getattr(ev, 'traceback', None)
    if trace is not None and not isinstance(trace, str):
        trace = ''.join(trace) if isinstance(trace, (list, tuple)) else str(trace)
    return Divergence('janus-internal', number, 'explain', 'no janus error',
                      'recovered: %s' % text, detail, trace)


def _compare_outcomes(number, e_res, j_res, e_args, j_args, e_stdout, j_stdout, eager, jside):
    # 1. returned vs raised, and which exception
    if e_res[0] == 'raised' or j_res[0] == 'raised':
        e_desc = 'returned' if e_res[0] == 'ok' else '%s: %s' % (_exc_name(e_res[1]),
                                                                 _exc_text(e_res[1]))
        j_desc = 'returned' if j_res[0] == 'ok' else '%s: %s' % (_exc_name(j_res[1]),
                                                                 _exc_text(j_res[1]))
        if e_desc != j_desc:
            tb = None
            kind = 'exception'
            detail = '%s->%s' % ('ok' if e_res[0] == 'ok' else type(e_res[1]).__name__,
                                 'ok' if j_res[0] == 'ok' else type(j_res[1]).__name__)
            if j_res[0] == 'raised':
                tb = ''.join(traceback.format_exception(type(j_res[1]), j_res[1], j_res[2]))
                if janus_internal(j_res[1], j_res[2]):
                    kind = 'janus-error'
                    detail = '%s@%s' % (type(j_res[1]).__name__, _janus_frame(j_res[2]))
                elif _symbolic(j_desc) and not _symbolic(e_desc):
                    kind = 'symbolic-leak'
            return Divergence(kind, number, 'outcome', e_desc, j_desc, detail, tb)
    # 2. return value, arguments and state, with one identity memo per side
    snaps = []
    for side, res, args in ((eager, e_res, e_args), (jside, j_res, j_args)):
        snap = Snapshot(side.path, side.modname)
        state = snap.state(side.ns)
        args_snap = snap.take(tuple(args)) if args is not None else None
        ret = snap.take(res[1]) if res[0] == 'ok' else None
        snaps.append((state, args_snap, ret))
    (e_state, e_args_s, e_ret), (j_state, j_args_s, j_ret) = snaps
    checks = [('return', e_ret, j_ret), ('stdout', None, None),
              ('state', e_state, j_state), ('args', e_args_s, j_args_s)]
    for what, a, b in checks:
        if what == 'stdout':
            if not text_close(normalize(e_stdout), normalize(j_stdout)):
                kind = 'symbolic-leak' if _symbolic(j_stdout) and not _symbolic(e_stdout) \
                    else 'stdout'
                return Divergence(kind, number, 'stdout', e_stdout, j_stdout)
            continue
        try:
            if what == 'state':
                names_e, names_j = [n for n, _ in a], [n for n, _ in b]
                if names_e != names_j:
                    raise _Diff('module names', names_e, names_j)
                for (name, x), (_, y) in zip(a, b):
                    compare(x, y, name)
            elif a is not None or b is not None:
                compare(a, b, 'return' if what == 'return' else 'arg')
        except _Diff as d:
            kind = 'identity' if d.identity else ('return' if what == 'return' else 'state')
            if _symbolic(str(d.janus)) and not _symbolic(str(d.eager)):
                kind = 'symbolic-leak'
            return Divergence(kind, number, d.where, d.eager, d.janus)
    return None


def _print_step(number, step, e_res, j_res, e_stdout, j_stdout, div):
    text = '%s(%s)' % (step[1], step[2]) if step[0] == 'call' else step[1]

    def show(res, stdout):
        if res[0] == 'raised':
            out = 'raised %s: %s' % (_exc_name(res[1]), _exc_text(res[1]))
        else:
            out = _short(_readable(res[1]), 400) if step[0] == 'call' else 'ok'
        return out + (' | printed %r' % _short(stdout, 200) if stdout else '')
    print('step %d: %s' % (number, _short(text, 200)))
    print('    eager: %s' % show(e_res, e_stdout))
    print('    janus: %s' % show(j_res, j_stdout))
    if div:
        print('    DIFFERENT: %s' % div.describe())


def _readable(v):
    snap = Snapshot('', '')
    return repr(_plain(snap.take(v)))


class _Alarm:
    """SIGALRM after ``seconds`` raises FuzzTimeout (main thread only)."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.armed = False

    def __enter__(self):
        import threading
        if self.seconds and threading.current_thread() is threading.main_thread():
            self.old = signal.signal(signal.SIGALRM, self._fire)
            signal.alarm(int(self.seconds))
            self.armed = True
        return self

    def _fire(self, signum, frame):
        raise FuzzTimeout()

    def __exit__(self, *exc):
        if self.armed:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, self.old)
        return False


def describe_steps(program, divergence=None):
    """The call sequence as Python lines (for repro files and messages)."""
    lines = []
    for i, step in enumerate(program.steps):
        text = '%s(%s)' % (step[1], step[2]) if step[0] == 'call' else step[1]
        mark = '   # <-- diverges here' if divergence is not None and divergence.step == i else ''
        lines.append('%2d  %s%s' % (i, text, mark))
    return '\n'.join(lines)
