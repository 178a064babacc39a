"""The profiler: runs the first calls imperatively and records what it saw.

Needs nothing run before it.  It never touches the user's function: it runs
an *instrumented copy* (same source, same globals, same closure cells, same
defaults) whose calls report, per site id (``pyct.sites``), which callee ran
and what type it returned.  Per call it also records the arguments' types,
dtypes, shapes and Python values, and the return type.  Branch outcomes and
loop trip counts slot in as further per-site observations (issue #3).
"""
import ast
import collections
import types

import gast

from janus import guards
from janus.graphgen.converters import common
from janus.pyct import parser, sites

_PROFILER = '__jp'


class SiteProfile:
    """What one AST site did across the profiled calls."""

    def __init__(self):
        self.callees = collections.Counter()   # qualified callee name -> times
        self.returns = collections.Counter()   # returned type name -> times


class Profile:
    """Everything observed for one janus function."""

    def __init__(self):
        self.calls = 0
        self.arguments = []                      # per call: [(path, description)]
        self.returns = collections.Counter()     # return type name -> times
        self.sites = collections.defaultdict(SiteProfile)
        self.site_info = {}                      # site id -> pyct.sites.Site
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


class _Recorder:
    """The ``__jp`` object instrumented code calls; one per janus function."""

    def __init__(self, profile):
        self.profile = profile

    def call(self, __site, __callee, *args, **kwargs):
        result = __callee(*args, **kwargs)
        site = self.profile.sites[__site]
        site.callees[_callee_name(__callee)] += 1
        site.returns[type(result).__name__] += 1
        return result


class _InstrumentCalls(gast.NodeTransformer):
    def visit_Call(self, node):
        node = self.generic_visit(node)
        site = sites.anno.get(node, sites.anno.Key.SITE)
        recorder = gast.Attribute(common.load(_PROFILER), 'call', gast.Load())
        new = gast.Call(recorder, [common.const(site), node.func] + node.args, node.keywords)
        return gast.copy_location(new, node)


def instrument(fn, profile):
    """Returns the instrumented copy of ``fn`` (raises parser.NoSource if impossible)."""
    if '__class__' in fn.__code__.co_freevars:
        raise parser.NoSource('uses zero-argument super(); profiled uninstrumented')
    tree, filename, source_lines = parser.parse_function(fn)
    if not isinstance(tree, gast.FunctionDef):
        raise parser.NoSource('lambdas are profiled uninstrumented')
    profile.site_info = sites.number_sites(tree, source_lines, tree.lineno)
    tree = _InstrumentCalls().visit(tree)
    tree.decorator_list, tree.returns = [], None
    tree.args.defaults = []
    tree.args.kw_defaults = [None] * len(tree.args.kwonlyargs)
    freevars = (_PROFILER,) + fn.__code__.co_freevars
    factory_args = gast.arguments([gast.Name(n, gast.Param(), None, None) for n in freevars],
                                  [], None, [], [], None, [])
    factory = gast.FunctionDef('__janus_profile_factory', factory_args,
                               [tree, gast.Return(common.load(tree.name))], [], None, None, [])
    module = gast.gast_to_ast(gast.Module([gast.copy_location(factory, tree)], []))
    ast.fix_missing_locations(module)
    code = compile(module, filename, 'exec')
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType))
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    cells[_PROFILER] = types.CellType(_Recorder(profile))
    closure = tuple(cells[name] for name in inner.co_freevars)
    copy = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy
