"""Recursive calls over Python structures, as one graph function that calls itself.

Needs a ``TraceContext`` and ``calls.py``, which hands in how a converted callee
runs inlined (``run``).  A user function that may call itself (``may_recurse``:
directly, through a closure, or mutually) called with a node object (an instance of a plain
class of the user's, ``structures.is_node_class``) passed into the call is not
inlined: ``call`` builds a ``RecursionBuild`` for its call shape, once per
trace, and adds one ``Janus>Invoke`` of it (``recursive_functions.py``).  The
build traces the function's converted body once, its node parameters as
``structures.NodeRef``s, as a tensor-dependent region (every test on a node is
real control flow, never an assumption); each recursive call in it is another
``Janus>Invoke`` of the function itself (``self_call``).  What it returns is
learnt first by a dry run in a scratch graph where every recursive call raises:
the raising branch is assumed not taken, so the base case's value is what the
dry run returns.

Every call's node arguments are roots of one encoded table
(``structure_guard.Encoder``), fed per run and proved by a ``STRUCTURE_MATCH``
guard (the traced call's own structure is checked at trace time: a new graph
first runs unguarded); the build keeps its graph functions alive as long as the
traced graph.  A node parameter every recursive call passes on unchanged (a
state object, ``rec(node.left, st)``) becomes an outside object of the body.
Numbers the body rewrites on outside objects (``self.nodes += 1``) are threaded
through every call as extra inputs and outputs (``_StateSlot``), so the writes
keep program order.  With one node parameter and nothing else deciding a call,
the gradient reads each call's kept outputs back (``recursive_functions._Kept``).

With one node parameter the body is one branch per node class (``_class_switch``:
the class known in each, ``NodeRef.static``); None or a number passed where the
node goes (a nested list's leaf) is that case of the function run in place at the
call (``_dispatch``).  Nested lists and tuples are nodes too (``schema.class_key``);
a recursive helper given a node inside a recursion is a build of its own on the
same table (``call_within``).

What the body may not do (refused, ``Reason.RECURSION``; the call then runs
imperatively, as before): change a list or dict, print, change TF state, use a
node other than by reading its attributes, testing ``isinstance``/``is None`` or
passing it on, recurse without descending the structure (only the run would
know how deep), recurse with other arguments than nodes, tensors and numbers of
the same kinds, or on another object; nor may the call have written a node
before the recursion (the table is encoded when the call starts).
"""
import contextlib
import inspect
import types

import tensorflow as tf
from tensorflow.python.framework import func_graph as func_graph_module

from janus import guards, pytypes
from janus.sources import ArgSource, ItemSource
from janus.errors import ConversionError
from janus.config import config
from janus.graph import effects, ops
from janus.heap import shadow_heap
from janus.recursion import recursion_levels, schema, structure_guard, structures
from janus.trace import access
from janus.values import scalars
from janus.heap.shadow_heap import Write, WriteKind
from janus.recursion.schema import Kind
from janus.control.common import in_traced_region, kept_running, taping
from janus.graph.recursive_functions import RecursionBuildError, RecursiveFunction
from janus.trace.tracing import NeedsValue, current

_NODE, _TENSOR, _SCALAR, _CONST = 'node', 'tensor', 'scalar', 'const'
_OBJECT = 'object'   # an object every recursive call passes on unchanged (a state object)
_MAX_ATTEMPTS = 6
_MAX_VARIANTS = 32   # node classes beyond which a body is traced once for all of them


class _NoOutputYet(Exception):
    """A recursive call in the dry run: its branch is assumed not taken there."""


class _InlineFailed(Exception):
    """The function's case for None or a number raised in its probe trace."""


def may_recurse(fn, owner=None, targets=None):
    """Whether ``fn`` may call itself (or, given ``targets``, a function of those
    codes): directly, through a closure, or through the functions (and ``owner``'s
    methods) its code names (mutual recursion)."""
    target = fn.__code__
    targets = targets if targets is not None else (target,)
    if target in targets and fn.__name__ in target.co_freevars:
        return True
    seen, todo = {target}, [fn]
    while todo and len(seen) < _MAX_CALLEES:
        current = todo.pop()
        for _, found in _named_callees(current, owner):
            if not isinstance(found, types.FunctionType):
                continue
            if found.__code__ in targets:
                return True
            if found.__code__ not in seen:
                seen.add(found.__code__)
                todo.append(found)
    return False


def _named_callees(fn, owner):
    """(name, value) of what ``fn``'s code may call by name: its globals, its closure
    cells and its owner's methods (read without running code)."""
    code = fn.__code__
    for name in _names_in(code):
        yield name, fn.__globals__.get(name)
        if owner is not None:
            yield name, inspect.getattr_static(type(owner), name, None)
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            yield name, cell.cell_contents
        except ValueError:   # an empty cell
            continue


_MAX_CALLEES = 64


def _names_in(code):
    """The global and attribute names ``code`` and the code nested in it (a
    comprehension, a generator expression, a lambda) use."""
    names, todo = [], [code]
    while todo:
        current = todo.pop()
        names.extend(current.co_names)
        todo.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return names


def over_objects(fn, args, kwargs, receiver):
    """Whether a call of ``fn`` is one ``call`` builds: ``fn`` may call itself and is
    given a node object (besides a method's own object)."""
    if not may_recurse(fn, args[0] if receiver and args else None):
        return False
    values = list(args[1 if receiver else 0:]) + list(kwargs.values())
    if any(schema.is_structure_root(v) for v in values):
        return True
    # A node of a recursion being traced: a helper of its own, unless it leads back to
    # a function being traced (mutual recursion: inlined, its calls those functions')
    ctx = current()
    return any(structures.is_node(v) for v in values) and not may_recurse(
        fn, args[0] if receiver and args else None, tuple(ctx.recursion.active))


def active(ctx, fn):
    """The build whose body is being traced for ``fn`` (a recursive call), or None."""
    return ctx.recursion.active.get(fn.__code__)


def call(ctx, fn, args, kwargs, receiver, run):
    """``fn(*args, **kwargs)`` as a ``Janus>Invoke`` of its recursive graph function;
    ``run(args)``: the converted ``fn`` run inlined on those (positional) arguments."""
    values, owner = _arguments(fn, args, kwargs, receiver)
    params = [_param(value) for value in values]
    # Given a node of a structure being read (a recursive helper called from inside a
    # recursive function): the function reads that structure's table.
    within = next((value for value in values if structures.is_node(value)), None)
    key = (fn.__code__, id(owner), tuple(_param_key(p) for p in params))
    if within is not None:   # one build per structure: its captures settle across traces
        build = within.schema.helpers.get(key)
        if build is None:
            build = within.schema.helpers[key] = RecursionBuild(
                ctx, fn, owner, receiver, params, values, run, len(ctx.recursion.builds),
                within)
            ctx.recursion.builds_made.append(build)
        return build.call_within(ctx, args, kwargs, receiver)
    build = ctx.recursion.builds.get(key)
    if build is None or not build.reusable(ctx):
        build = ctx.recursion.builds[key] = RecursionBuild(ctx, fn, owner, receiver, params,
                                                           values, run,
                                                           len(ctx.recursion.builds))
        ctx.recursion.builds_made.append(build)
    inputs = []
    for param, value in zip(build.params, values):
        if param[0] == _OBJECT and value is not param[1]:
            structures.refuse('%s called with another object where it passes one on '
                              'unchanged' % build.label)
        if param[0] == _NODE:
            inputs.append(build.root_index(ctx, value))
        elif param[0] == _TENSOR:
            inputs.append(value)
        elif param[0] == _SCALAR:
            inputs.append(value.tensor)
    if build.function is None:
        build.schema.taping = taping()
        build.ensure_built(ctx)
        return call(ctx, fn, args, kwargs, receiver, run)   # its parameters as built
    build.refuse_written_nodes(ctx)
    build.refuse_unfit_structure()
    inputs += [build.state_input(access.attr(slot.obj, slot.name), slot)
               for slot in build.state]
    outputs = build.level_outputs(ctx, inputs)
    if outputs is None:
        outputs = build.function(*inputs)
    for slot, value in zip(build.state, build.state_values(outputs)):
        access.setattr_(slot.obj, slot.name, value)   # written back after the run
        ctx.recursion.writes.add(id(ctx.heap.writes[-1]))
    build.mark(ctx)
    return build.rebuild(outputs)


def self_call(ctx, build, args, kwargs, receiver):
    """A recursive call inside the body: another ``Janus>Invoke`` of the function."""
    return build.self_call(ctx, args, kwargs, receiver)


def _arguments(fn, args, kwargs, receiver):
    signature = inspect.signature(fn)
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in signature.parameters.values()):
        structures.refuse('a recursive function with *args or **kwargs (%s)' % fn.__qualname__)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    values = list(bound.arguments.values())
    if receiver:
        return values[1:], values[0]
    return values, None


def _param(value):
    if schema.is_node_value(value) or structures.is_node(value):
        return (_NODE,)
    if isinstance(value, tf.Tensor):
        return (_TENSOR, tf.TensorSpec(value.shape, value.dtype))
    if scalars.is_dynamic(value):
        return (_SCALAR, value.type)
    if pytypes.is_constant(value):
        return (_CONST, value)
    if isinstance(value, (tf.Variable, tf.Module)):
        return (_OBJECT, value)   # a variable or a layer every call passes on unchanged
    structures.refuse('a recursive call given a %s (janus passes nodes, tensors and Python '
                      'constants)' % type(value).__name__)


def _param_key(param):
    if param[0] == _OBJECT:
        return (_OBJECT, id(param[1]))
    if param[0] == _CONST:
        return (_CONST, type(param[1]), repr(param[1]))
    if param[0] == _TENSOR:
        return (_TENSOR, param[1].dtype, tuple(param[1].shape.as_list())
                if param[1].shape.rank is not None else None)
    return param


class RecursionBuild:
    """One recursive function over one call shape: its graph function, its roots,
    the schema of what it reads, and how its results come back."""

    def __init__(self, ctx, fn, owner, receiver, params, values, run, number, within=None):
        self.fn, self.owner, self.receiver, self.params, self.run = \
            fn, owner, receiver, list(params), run
        # the first call's arguments: an object every recursive call passes on is kept
        self._first_values = [v if p[0] == _NODE else None for p, v in zip(params, values)]
        self._self_calls = 0
        self.label = fn.__qualname__
        profile = getattr(ctx.plan, 'profile', None)
        self.within = within is not None   # reads the structure of a node it is given
        self.schema = within.schema if self.within else schema.Schema(
            [], getattr(profile, 'structures', None), fn.__code__)
        self.root_sources, self._root_positions = [], {}
        self.maybe_none = set()    # node parameters a recursive call passes None or maybe-None
        # kinds of value other than nodes passed at the dispatch position (``_body``), kept
        # by the schema (a build within another is made again with each of its traces)
        self.passed_kinds = self.schema.passed_kinds.setdefault(fn.__code__, set())
        self._inlining = 0         # cases of the function being run inline (``_dispatch``)
        self._failing = {}         # kind -> whether its inline case raises (``_inline_fails``)
        self._inlined = 0          # node calls traced in place around this point (``_node_call``)
        self.state = []            # _StateSlot: numbers the body rewrites, threaded through
        self._node_values = {}     # position -> the NodeRef the body was given there
        self._stack_base = 0       # converted frames when the body began (frames per level)
        self._varied = set()       # node positions a recursive call passed another node
        self.structure = None      # what the body returns (a nest of 0s) ...
        self.leaves = None         # ... and its leaves: ('tensor', TensorSpec) / ('scalar', type)
        self.function = None
        self.dead_classes = set()   # node classes whose body fails for every node
        self._levels = None         # recursion_levels.LevelRun, once it runs that way
        self.level_refusal = None   # why it does not run level by level ('' when it does)
        self._traced_depth = 0      # the traced call's structure's depth, so far
        self.call_edges = set()     # columns recursive calls descend through (node_body)
        self.call_edges_known = True
        self._encoder = None
        self.number = number
        self._stacks = {}          # tensor column -> its stack's graph input
        self._top_graph, self._readers = ctx.top_graph, ctx.host.call_time_readers
        kept = getattr(ctx.top_graph, '_janus_recursive_builds', None)
        if kept is None:
            kept = []
            ctx.top_graph._janus_recursive_builds = kept   # the graph keeps its functions alive
        kept.append(self)
        if self.within:   # the structure's table, guard and tensor columns are its reader's
            self.table = within.table
            return
        self.schema.tensor_input = self._tensor_input
        key = ('janus', 'structure', number, fn.__code__.co_name)
        with ctx.top_graph.as_default():   # the top graph's own input, wherever read
            self.table = ctx.top_graph.capture_call_time_value(
                self._table_now, tf.TensorSpec([None, None], tf.int64), key=key)
        if ctx.host.call_time_readers is not None:
            ctx.host.call_time_readers.setdefault(key, self._table_now)
        ctx.guards.take(structure_guard.StructureGuard(self.encoder, self.label))

    def describe(self):
        """One line for explain: the function, its graph, what it reads and threads."""
        function = self.function
        params = ', '.join('node' if p[0] == _NODE else p[0] for p in self.params)
        columns = ', '.join('%s: %s' % (schema.column_label(c.name),
                                         '|'.join(sorted(k.name.lower() for k in c.kinds)))
                            for c in sorted(self.schema.columns.values(), key=lambda c: c.row))
        threads = ', '.join('%s.%s' % (type(s.obj).__name__, s.name) for s in self.state)
        graph = function.graphs()[0] if function.graphs() else None
        specialized = self._dispatch_position() is not None
        if self.runs_levels:
            how = 'level by level (%d ops a node, %d levels)' % (self._levels.node_ops,
                                                                 self._levels.levels)
        else:
            how = 'as %s: %d ops' % (function.name,
                                     len(graph.get_operations()) if graph is not None else 0)
            if self.level_refusal:
                how += ' (not level by level: %s)' % self.level_refusal
        return ('%s(%s) %s, %s; reads %s of %s%s%s; gradient: %s'
                % (self.label, params, how,
                   'within another recursion' if self.within
                   else '%d roots' % len(self.root_sources), columns or 'no attribute',
                   '/'.join(schema.key_name(t) for t in self.schema.types),
                   ' (a body per class)' if specialized else '',
                   '; threads ' + threads if threads else '',
                   self._gradient_text()))

    def _gradient_text(self):
        if self.runs_levels:
            return 'TF\'s, of the unrolled levels'
        if self.function.keeps_outputs:
            return 'kept outputs (no subtree recomputed)'
        return 'recomputes each subtree'

    # -- the host side ---------------------------------------------------------
    def encoder(self):
        if self._encoder is None:   # first asked at the first run: the trace is over
            if self.runs_levels:
                self._encoder = structure_guard.Encoder(self.schema, self.root_sources,
                                                   self._levels.levels, self.call_edges)
            else:
                self._encoder = structure_guard.Encoder(self.schema, self.root_sources)
            self.schema.roots = []   # the traced call's objects are not kept
        return self._encoder

    def _table_now(self):
        return self.encoder().now(shadow_heap.call_arguments_now()).table_tensor()

    def _tensor_input(self, column):
        """The graph input of a tensor column's stack (``structures._tensor_attribute``)."""
        found = self._stacks.get(column.name)
        if found is None:
            dtype, shape = next(iter(column.specs))
            name = column.name

            def read_now():
                return self.encoder().now(shadow_heap.call_arguments_now()).stacks[name]
            key = ('janus', 'structure-column', self.number, name)
            with self._top_graph.as_default():   # the top graph's own input, wherever read
                found = self._stacks[name] = self._top_graph.capture_call_time_value(
                    read_now, tf.TensorSpec((None,) + shape, dtype), key=key)
            if self._readers is not None:
                self._readers.setdefault(key, read_now)
        return found

    def root_index(self, ctx, value):
        """The graph's index of the root ``value`` (a node passed into the call)."""
        source = ctx.provenance.source_of(value)
        if source is None:
            structures.refuse('a recursion over objects the call made (janus encodes the '
                              'objects passed into the call)')
        rebuilt = _rebuilt_argument(ctx, source, value)
        if rebuilt is not None:
            ctx.whole_arguments.add(rebuilt)
            structures.refuse('a recursion over items of the list argument %s, which the call '
                              'signature rebuilds (traced again with it passed whole)' % rebuilt)
        uid = source.uid()
        position = self._root_positions.get(uid)
        if position is None:
            position = self._root_positions[uid] = len(self.root_sources)
            self.root_sources.append(source)
        self.schema.add_root(value)
        if self.function is not None and self.schema.stale:
            self._widened(ctx)
        return self.table[-1][position]

    def mark(self, ctx):
        """Where the trace stands after a call of this build: ``reusable`` looks at what
        the trace did since."""
        graph = tf.compat.v1.get_default_graph()
        self._mark = (len(ctx.heap.writes), graph, len(graph.get_operations()))

    def reusable(self, ctx):
        """Whether a later call may run this build's function: not when the call wrote
        Python state since (its body read that state as it was then: ``self.scale``)
        or changed TF state (a variable its kept outputs were computed from), nor
        from another graph being traced."""
        mark = getattr(self, '_mark', None)
        if mark is None:
            return True
        writes, graph, ops_before = mark
        if any(id(w) not in ctx.recursion.writes for w in ctx.heap.writes[writes:]):
            return False
        if tf.compat.v1.get_default_graph() is not graph:
            return False
        return not any(effects.changes_state(op) for op in graph.get_operations()[ops_before:])

    def refuse_written_nodes(self, ctx):
        """The graph reads the structure as it is when the call starts: a node the call
        wrote before this recursion (``leaf.vec = ...``) would be read stale."""
        written = ctx.written_objects
        if any(id(obj) in written or (type(obj) in schema.SEQUENCES
                                      and ctx.heap.differs(obj))
               for obj in self.schema.reachable()):
            structures.refuse('a recursion over objects the call changed before it (janus '
                              'reads the structure as it is when the call starts)')

    def refuse_unfit_structure(self):
        """The traced call's own structure must pass the guard too: the graph a trace
        builds runs first on the very call it was traced for, unguarded."""
        encoded = structure_guard.Encoder(self.schema, ()).encode(self.schema.roots)
        if isinstance(encoded, str):
            structures.refuse('a recursion over this structure: %s' % encoded)
        self._traced_depth = encoded.deepest()

    def _widened(self, ctx):
        ctx.recursion.structure_widened = True   # tracer.py asks for another trace
        structures.refuse('a structure whose classes or attribute kinds widened after the '
                          'recursive graph function %s was built' % self.label)

    # -- building ----------------------------------------------------------------
    def ensure_built(self, ctx):
        """Traces the graph function once for this trace.  A trace that met a wider
        structure than the one it started from (a new node column reaches more
        nodes) is done again, knowing it."""
        if self.function is not None:
            return
        for _ in range(_MAX_ATTEMPTS):
            self.schema.stale = False
            if self.leaves is None:
                self._varied, self._self_calls = set(), 0
                found = self._dry_run(ctx)
                if self._passed_on(ctx) or self.schema.stale or not found:
                    self.leaves = None
                    continue
            function = RecursiveFunction(self.fn.__name__, self._body, self._arg_specs(),
                                         [spec for _, spec in self._leaf_specs()],
                                         memo_key=self._memo_key(),
                                         gradient_scope=lambda: _checks_proven(ctx),
                                         gradient_optional=not self.schema.taping)
            if self._wants_levels():   # traced only if running level by level fails
                self.function = function
                return
            try:
                function.build()
            except RecursionBuildError as e:
                if self.schema.stale:
                    continue   # it met more than it started from (a number to thread)
                structures.refuse('%s: %s' % (self.label, e))
            except (ValueError, TypeError, AssertionError, LookupError) as e:
                # TF's gradient of the body failed (cond_v2 cannot resolve a capture
                # in some nestings of a helper's calls): janus's limit, not the user's
                structures.refuse('%s: TensorFlow could not build its gradient function '
                                  '(%s: %s)' % (self.label, type(e).__name__, e))
            if not self.schema.stale:
                self._refuse_state_changes(function)
                self.function = function
                return
        if self.leaves is None:
            structures.refuse('%s recurses on every path janus could trace (no base case '
                              'outside a recursive call)' % self.label)
        structures.refuse('%s: the structure it reads did not settle' % self.label)

    # -- running level by level (recursion_levels.py) ----------------------------------
    def _wants_levels(self):
        if self.level_refusal is None:
            self.level_refusal = self._level_eligibility()
        return not self.level_refusal

    def level_outputs(self, ctx, inputs):
        """The call's results read from every node's, computed level by level, or None
        where the function does not run that way (``level_refusal`` says why; its
        ``Janus>Invoke`` function is then built)."""
        if not self._wants_levels():
            return None
        if self._levels is None:
            self._levels = recursion_levels.LevelRun(self, self.leaf_specs())
        elif self._levels.levels and self._traced_depth > self._levels.levels:
            self.schema.levels = recursion_levels.bound(self._traced_depth)
            self._widened(ctx)   # a deeper root: traced again with more levels
        assumptions = len(ctx.assumptions)
        at = self._input_of(self._dispatch_position())
        try:
            return self._levels.outputs(inputs[at], inputs[:at] + inputs[at + 1:])
        except recursion_levels.Widened:
            self.schema.levels = -1   # the full body met what the dry run did not
            self._widened(ctx)
        except recursion_levels.Refused as e:
            del ctx.assumptions[assumptions:]
            if e.lasting:   # its body: the next traces do not try again
                self.schema.levels, self.schema.level_refusal = -1, str(e)
            return self._without_levels(ctx, str(e))

    def level_count(self, ctx):
        """How many levels the graph computes (its body traced: every column it reads
        known): the deepest structure among the call's arguments, with room to
        spare, or more if an earlier trace met deeper ones."""
        arguments = ctx.call_arguments
        values = list(arguments.values()) if isinstance(arguments, dict) else []
        deepest = max(self._depth_of(self.schema.roots), self._depth_of(
            [item for value in values
             for item in (value if type(value) in schema.SEQUENCES else [value])]))
        self._traced_depth = max(self._traced_depth, deepest)
        levels = max(self.schema.levels, recursion_levels.bound(deepest))
        if levels > config.recursion_max_levels:
            raise recursion_levels.Refused('structures up to %d nodes deep (config.recursion_'
                                           'max_levels is %d)'
                                           % (levels, config.recursion_max_levels))
        self.schema.levels = levels
        return levels

    def _depth_of(self, objects):
        """The depth of the deepest of ``objects`` that are nodes the recursion reads
        (0 where they do not fit its structure: the guard decides those)."""
        types = set(self.schema.types)
        roots = [obj for obj in objects if schema.is_node_value(obj)
                 and schema.class_key(obj) in types]
        encoded = structure_guard.Encoder(self.schema, ()).encode(roots, check_depth=False)
        return 0 if isinstance(encoded, str) else encoded.deepest()

    def _without_levels(self, ctx, why):
        self.level_refusal, self._levels, self.function = why, None, None
        self.ensure_built(ctx)
        return None

    @property
    def runs_levels(self):
        return self._levels is not None and bool(self._levels.levels) and not self.level_refusal

    def _level_eligibility(self):
        """'' when each call's results depend on its node alone (one node parameter,
        the others passed on unchanged, no numbers threaded), else why not."""
        if not config.recursion_runs_levels:
            return 'config.recursion_runs_levels is off'
        if self.schema.levels < 0:
            return self.schema.level_refusal or ('its body met, traced whole, what its '
                                                 'first trace did not')
        if self.within:
            return 'a recursive helper called inside another recursion'
        if self.state:
            return 'it threads numbers through its calls'
        if self._dispatch_position() is None:
            return 'not one node parameter with at most %d classes' % _MAX_VARIANTS
        if any(not spec.shape.is_fully_defined() for _, spec in self._leaf_specs()):
            return 'results whose shape varies'
        if set(self.schema.types) <= self.dead_classes:
            return 'no node class it runs for'
        return ''

    def shared_specs(self):
        """The graph inputs besides the node (tensors, numbers) a call passes: a
        recursive call must pass them on unchanged to run level by level."""
        return [param[1] if param[0] == _TENSOR else tf.TensorSpec([], scalars.DTYPES[param[1]])
                for param in self.params if param[0] in (_TENSOR, _SCALAR)]

    def node_body(self, recurse, index, shared):
        """The body's results for the node ``index`` (a scalar int64 tensor) given the
        ``shared`` inputs; a recursive call is ``recurse(child_index, its shared
        inputs)``."""
        position = self._dispatch_position()
        self.call_edges, self.call_edges_known = set(), True
        others = iter(shared)
        flat = [index if i == position else next(others)
                for i, param in enumerate(self.params) if param[0] in (_NODE, _TENSOR, _SCALAR)]

        def call(*given):
            at = self._input_of(position)
            return recurse(given[at], given[:at] + given[at + 1:])
        return self._body(call, *flat)

    def _passed_on(self, ctx):
        """Node parameters every recursive call passes on unchanged (a state object
        given along: ``rec(node.left, st)``) become objects of the body, read and
        written as outside objects; True when one did (trace again)."""
        changed = False
        if not self._self_calls:
            return False
        for position, param in enumerate(self.params):
            if param[0] == _NODE and position not in self._varied \
                    and self._first_values[position] is not None:
                obj = self._first_values[position]
                if ctx.provenance.source_of(obj) is None:
                    continue
                self.params[position] = (_OBJECT, obj)
                changed = True
        return changed

    def _memo_key(self):
        """The argument whose value alone decides a call's outputs (the one node
        parameter, with no tensors or threaded numbers besides): the forward keeps
        its outputs under it for the gradient (``config.recursion_keeps_outputs``)."""
        kinds = [param[0] for param in self.params]
        if not config.recursion_keeps_outputs or self.state or kinds.count(_NODE) != 1 \
                or _TENSOR in kinds or _SCALAR in kinds or not self.schema.taping:
            return None   # (no tape records the call: nothing would read them back)
        return 0   # the only graph argument

    def _refuse_state_changes(self, function):
        """A body that changes state (``v.assign_add`` in the recursion) is refused:
        its calls are treated as reads (``effects._PURE_READS``)."""
        for graph in function.graphs():
            for op in graph.get_operations():
                if op.type != ops.INVOKE_OP and not function.is_scratch(op) \
                        and effects.changes_state(op):
                    structures.refuse('a recursive function that changes state (%s in %s)'
                                      % (op.type, self.label))

    def _arg_specs(self):
        specs = []
        for param in self.params:
            if param[0] == _NODE:
                specs.append(tf.TensorSpec([], tf.int64))
            elif param[0] == _TENSOR:
                specs.append(param[1])
            elif param[0] == _SCALAR:
                specs.append(tf.TensorSpec([], scalars.DTYPES[param[1]]))
        return specs + [tf.TensorSpec([], scalars.DTYPES[slot.kind]) for slot in self.state]

    def leaf_specs(self):
        """The TensorSpec of each value the function returns, flat."""
        return [spec for _, spec in self._leaf_specs()]

    def _leaf_specs(self):
        """What the function returns: the result's leaves, then the threaded numbers."""
        return [(kind, spec if kind == 'tensor' else tf.TensorSpec([], scalars.DTYPES[spec]))
                for kind, spec in self.leaves] + [
            ('scalar', tf.TensorSpec([], scalars.DTYPES[slot.kind])) for slot in self.state]

    def _dry_run(self, ctx):
        """What the body returns, from a trace where every recursive call raises (its
        branch assumed not taken): the base case's value.  False: every path recursed."""
        assumptions = len(ctx.assumptions)
        try:
            with func_graph_module.FuncGraph('janus_recursion_dry_run').as_default():
                inputs = [tf.compat.v1.placeholder(s.dtype, s.shape) for s in self._arg_specs()]
                self._body(None, *inputs)
            return True
        except _NoOutputYet:
            return False
        finally:
            del ctx.assumptions[assumptions:]

    def _body(self, recurse, *flat):
        """The converted function on the parameters' graph values (``recurse``: the
        recursive call; None in the dry run).  Returns its results, flat.

        With one node parameter (``_dispatch_position``) the body is specialized to
        the node's class: one branch per class the structure holds, chosen by the
        node's class id, each traced with the class known (``NodeRef.static``); a
        None or a number passed there never reaches the function (``self_call``
        runs that case inline)."""
        ctx = current()
        code = self.fn.__code__
        outer = ctx.recursion.active.get(code)
        ctx.recursion.active[code] = _Active(self, recurse)
        self._stack_base = len(ctx.stack)
        try:
            position = self._dispatch_position()
            if position is None:
                return self._run_variant(flat, None, None)
            node = structures.NodeRef(flat[self._input_of(position)], self.schema, self.table)
            if recurse is None:
                return self._dry_variants(flat, position, node)
            return self._class_switch(flat, position, node)
        finally:
            if outer is None:
                ctx.recursion.active.pop(code, None)
            else:
                ctx.recursion.active[code] = outer

    def _dispatch_position(self):
        """The node parameter the body is specialized on: the only one (with
        ``config.recursion_specializes``), else None (nodes of unknown class)."""
        positions = [i for i, param in enumerate(self.params) if param[0] == _NODE]
        if len(positions) != 1 or not config.recursion_specializes \
                or len(self.schema.types) > _MAX_VARIANTS:
            return None
        return positions[0]

    def _input_of(self, position):
        """The flat input index of parameter ``position``."""
        return sum(1 for param in self.params[:position] if param[0] in (_NODE, _TENSOR, _SCALAR))

    def _dry_variants(self, flat, position, node):
        """The dry run: the first variant that returns without recursing (a None or
        number passed inline first: they are base cases), else ``_NoOutputYet``."""
        candidates = [kind for kind in (Kind.NONE, Kind.INT, Kind.FLOAT, Kind.BOOL)
                      if kind in self.passed_kinds]
        candidates += list(self.schema.types_used())
        for variant in candidates:
            value = self._variant_value(variant, node)
            try:
                return self._run_variant(flat, position, value)
            except (_NoOutputYet, schema.DeadVariant):
                continue
            except ConversionError:
                raise
            except Exception:  # noqa: BLE001 - the user's code raises there: another case
                continue
        raise _NoOutputYet()

    def _variant_value(self, variant, node, scalar=None):
        """What the function is given in a variant: the node with its class known,
        None, or the number (``scalar``: the int64 cell; a placeholder in the dry run)."""
        if isinstance(variant, Kind):
            if variant is Kind.NONE:
                return None
            cell = scalar if scalar is not None else tf.compat.v1.placeholder(tf.int64, [])
            return _number_of(variant, cell)
        return node.with_class(variant)

    def _class_switch(self, flat, position, node):
        """One branch per node class, chosen by the node's class id."""
        variants = self.schema.types_used()

        def branch(key):
            def run():
                try:
                    outputs = self._run_variant(flat, position, node.with_class(key))
                except schema.DeadVariant:   # no node of it gets here: the guard
                    self.dead_classes.add(key)
                    outputs = self._failed_outputs(flat, 'a %s node' % schema.key_name(key))
                except ConversionError:
                    raise
                except Exception:  # noqa: BLE001 - the user's code raises for every such
                    # node: the run re-runs in Python, which raises it as eagerly
                    self.dead_classes.add(key)
                    outputs = self._failed_outputs(flat, 'a %s node' % schema.key_name(key))
                return kept_running(outputs)
            return run
        if len(variants) == 1:
            return branch(variants[0])()
        class_id = tf.cast(node.cells(0), tf.int32)
        if len(variants) == 2:
            return tf.cond(tf.equal(class_id, 0), branch(variants[0]), branch(variants[1]))
        return tf.switch_case(class_id, [branch(key) for key in variants])

    def _failed_outputs(self, flat, what):
        """A branch that must not run: a failing check, and outputs of the right kinds."""
        structures.fail_check('the recursion never reaches %s' % what)
        outputs = [tf.zeros([d if d is not None else 0 for d in spec.shape.as_list()]
                            if spec.shape.rank is not None else [], spec.dtype)
                   for _, spec in self._leaf_specs()[:len(self.leaves)]]
        return outputs + list(flat[len(flat) - len(self.state):]) if self.state else outputs

    def _run_variant(self, flat, position, value):
        """The converted function on the flat inputs, the parameter at ``position``
        given ``value`` instead (None: every node parameter a NodeRef of unknown
        class).  Returns its results and the threaded numbers, flat."""
        ctx = current()
        values, inputs = [], iter(flat)
        for index, param in enumerate(self.params):
            if param[0] == _NODE:
                given = next(inputs)
                values.append(value if index == position else structures.NodeRef(
                    given, self.schema, self.table, maybe_none=index in self.maybe_none))
            elif param[0] == _TENSOR:
                values.append(next(inputs))
            elif param[0] == _SCALAR:
                values.append(scalars.DynamicScalar(next(inputs), param[1]))
            else:
                values.append(param[1])
        saved_nodes = self._node_values
        self._node_values = {index: v for index, v in enumerate(values)
                             if structures.is_node(v)}
        args = ([self.owner] if self.receiver else []) + values
        heap = ctx.heap
        base = heap.checkpoint()
        region = heap.open_region()   # the body's writes: threaded through every call
        try:
            for slot in self.state:
                heap.overlay[(id(slot.obj), slot.key)] = scalars.DynamicScalar(
                    next(inputs), slot.kind)
            result = in_traced_region(self._run_converted, args)
            flat_out = self._flat_result(result)
            flat_out += self._state_outputs(ctx, base, region)
        except NeedsValue as e:
            if e.lineage:
                raise   # a number from outside: specialized, as anywhere
            structures.refuse('a use of a node\'s number that needs its value (%s)' % e)
        finally:
            heap.close_region(region)
            heap.restore(base)
            self._node_values = saved_nodes
        return flat_out

    def _run_converted(self, args):
        """The converted function on ``args`` (in parameter order; keyword-only ones
        passed by keyword)."""
        names = list(inspect.signature(self.fn).parameters.values())
        positional = [a for a, p in zip(args, names) if p.kind is not p.KEYWORD_ONLY]
        keywords = {p.name: a for a, p in zip(args, names) if p.kind is p.KEYWORD_ONLY}
        return self.run(positional, keywords)

    # -- Python state the recursion writes ------------------------------------------
    def _state_outputs(self, ctx, base, region):
        """The final values of the numbers the body writes (``self.nodes += 1``),
        learnt as the body is traced (a new one: traced again with it threaded)."""
        heap = ctx.heap
        if heap.changed != base.changed or heap.items_written != base.items_written:
            structures.refuse('a recursive function that changes a list or dict in place')
        known = {(id(slot.obj), slot.key) for slot in self.state}
        for key, rebinding in region.keys.items():
            write = rebinding.write
            if key in known:
                continue
            if write.kind is not WriteKind.ATTR or key[1].is_item:
                structures.refuse('a recursive function writing %s (janus threads number '
                                  'attributes through a recursion)' % write.kind.value.lower())
            kind = _number_kind(heap.read(rebinding.obj, key[1]))
            self.state.append(_StateSlot(rebinding.obj, write.name, key[1], kind))
            self.schema.stale = True   # trace again, the number threaded
        outputs = []
        for slot in self.state:
            value = heap.read(slot.obj, slot.key)
            if _number_kind(value) is not slot.kind:
                structures.refuse('%s.%s changes its kind of number in the recursion'
                                  % (type(slot.obj).__name__, slot.name))
            outputs.append(value.tensor if scalars.is_dynamic(value)
                           else tf.constant(value, scalars.DTYPES[slot.kind]))
        prints = [w for w in heap.writes[len(base.writes):] if w.kind is not WriteKind.ATTR]
        if prints:
            structures.refuse('a recursive function that %s (janus threads number attributes '
                              'through a recursion)' % ('prints' if prints[0].kind is
                                                        WriteKind.PRINT else 'writes %s'
                                                        % prints[0].kind.value.lower()))
        return outputs

    def state_input(self, value, slot):
        """A threaded number's value passed into a call (it must keep its kind)."""
        if _number_kind(value) is not slot.kind:
            structures.refuse('%s.%s is not a %s when the recursion starts'
                              % (type(slot.obj).__name__, slot.name, slot.kind.__name__))
        return value.tensor if scalars.is_dynamic(value) else tf.constant(
            value, scalars.DTYPES[slot.kind])

    def state_values(self, outputs):
        return [scalars.DynamicScalar(out, slot.kind)
                for out, slot in zip(outputs[len(self.leaves):], self.state)]

    def _flat_result(self, result):
        leaves = tf.nest.flatten(result)
        found = []
        for leaf in leaves:
            if isinstance(leaf, tf.Tensor):
                found.append(('tensor', tf.TensorSpec(leaf.shape, leaf.dtype)))
            elif scalars.is_dynamic(leaf):
                found.append(('scalar', leaf.type))
            elif type(leaf) in scalars.DTYPES:
                found.append(('scalar', type(leaf)))
            else:
                structures.refuse('a recursive function returning a %s (janus returns tensors '
                                  'and Python numbers from it)' % type(leaf).__name__)
        if self.leaves is None:
            self.structure = tf.nest.map_structure(lambda _: 0, result)
            self.leaves = found
        elif len(found) != len(self.leaves) or any(
                a[0] != b[0] or (a[0] == 'scalar' and a[1] is not b[1])
                or (a[0] == 'tensor' and a[1].dtype != b[1].dtype)
                for a, b in zip(found, self.leaves)):
            structures.refuse('%s returns values of other kinds on different paths' % self.label)
        else:
            self._widen_shapes(found)
        outputs = []
        for leaf, (kind, spec) in zip(leaves, self.leaves):
            if kind == 'tensor':
                outputs.append(leaf)
            elif scalars.is_dynamic(leaf):
                outputs.append(leaf.tensor)
            else:
                outputs.append(tf.constant(leaf, scalars.DTYPES[spec]))
        return outputs

    def _widen_shapes(self, found):
        for i, ((kind, spec), (_, now)) in enumerate(zip(self.leaves, found)):
            if kind == 'tensor' and not spec.shape.is_compatible_with(now.shape):
                self.leaves[i] = (kind, tf.TensorSpec(
                    tf.TensorShape(None) if spec.shape.rank != now.shape.rank else
                    [a if a == b else None for a, b in zip(spec.shape.as_list(),
                                                           now.shape.as_list())], spec.dtype))
                self.schema.stale = True
            elif kind == 'tensor' and spec.shape != now.shape and \
                    spec.shape.most_specific_compatible_shape(now.shape) != spec.shape:
                self.leaves[i] = (kind, tf.TensorSpec(
                    spec.shape.most_specific_compatible_shape(now.shape), spec.dtype))
                self.schema.stale = True

    def rebuild(self, outputs):
        values = [out if kind == 'tensor' else scalars.DynamicScalar(out, spec)
                  for out, (kind, spec) in zip(outputs[:len(self.leaves)], self.leaves)]
        return tf.nest.pack_sequence_as(self.structure, values)

    # -- the recursive call --------------------------------------------------------
    def self_call(self, ctx, args, kwargs, receiver):
        self._self_calls += 1
        values, owner = _arguments(self.fn, args, kwargs, receiver)
        if receiver and owner is not self.owner:
            structures.refuse('a recursive call of %s on another object' % self.label)
        position = self._dispatch_position()
        flat = []
        for index, (param, value) in enumerate(zip(self.params, values)):
            if index == position:
                if value is not self._node_values.get(index):
                    self._varied.add(index)   # a node of the structure, not passed on
                self._note_call_edge(value, self._node_values.get(index))
                flat.append(self._dispatched(value))
            else:
                flat.extend(self._passed(index, param, value))
        if not any(self._descends(index, value) for index, (param, value)
                   in enumerate(zip(self.params, values)) if param[0] == _NODE):
            structures.refuse('a recursive call of %s that passes no node read from the '
                              'structure (only the run would know how deep it goes)'
                              % self.label)
        self.schema.frames_per_level = max(self.schema.frames_per_level,
                                           len(ctx.stack) - self._stack_base + 1)
        recurse = ctx.recursion.active[self.fn.__code__].recurse
        if recurse is None:
            raise _NoOutputYet()
        flat += [self.state_input(ctx.heap.read(slot.obj, slot.key), slot)
                 for slot in self.state]
        if position is None:
            outputs = recurse(*flat)
        else:
            outputs = self._dispatch(recurse, flat, position, values[position])
        for slot, value in zip(self.state, self.state_values(outputs)):
            ctx.heap.write(slot.obj, slot.key, Write(WriteKind.ATTR,
                                                     ctx.provenance.source_of(slot.obj),
                                                     slot.name, value, None))
        return self.rebuild(outputs)

    def _note_call_edge(self, value, node):
        """Which column of its node a recursive call descends through (level by level,
        only the nodes calls reach through those are computed)."""
        if not structures.is_node(value):
            return   # None or a number: no node reached
        origin = value.origin
        if origin is not None and node is not None and origin[0] is node:
            self.call_edges.add(origin[1])
        else:
            self.call_edges_known = False   # a grandchild, a node from elsewhere

    def call_within(self, ctx, args, kwargs, receiver):
        """A call given a node of a structure being read (a recursive helper called
        from inside another recursive function, or this one's own outer call): the
        function's ``Janus>Invoke`` on that node's index, None or a number run in
        place as a recursive call's would be."""
        if self.function is None:   # (whether a tape records it: the structure's reader's)
            self.ensure_built(ctx)
        values, _ = _arguments(self.fn, args, kwargs, receiver)
        position = self._dispatch_position()
        flat = []
        for index, (param, value) in enumerate(zip(self.params, values)):
            flat.extend([self._dispatched(value)] if index == position
                        else self._passed(index, param, value))
        flat += [self.state_input(ctx.heap.read(slot.obj, slot.key), slot)
                 for slot in self.state]
        if position is None:
            outputs = self.function(*flat)
        else:
            outputs = self._dispatch(self.function, flat, position, values[position])
        for slot, value in zip(self.state, self.state_values(outputs)):
            ctx.heap.write(slot.obj, slot.key, Write(WriteKind.ATTR,
                                                     ctx.provenance.source_of(slot.obj),
                                                     slot.name, value, None))
        self.mark(ctx)
        return self.rebuild(outputs)

    def _descends(self, index, value):
        """Whether a recursive call's node argument at ``index`` ends or descends the
        recursion: a node read from the structure, or (not inside a case run inline)
        None or a number, run inline."""
        if structures.is_node(value):
            return value.derived
        if index == self._dispatch_position():
            return not self._inlining
        return value is None

    def _dispatched(self, value):
        """The input a call passes at the dispatch position (``_body``): a node's
        index; for None or a number (run inline, ``_dispatch``), its cell.  Records
        what kinds of value are passed there (the dry run tries those cases)."""
        if structures.is_node(value):
            kinds = set(value.numbers) | ({Kind.NONE} if value.maybe_none else set())
            self._passes(kinds)
            return value.index
        kind = _value_kind(value)
        if kind is None:
            structures.refuse('a recursive call of %s given a %s where a node was passed'
                              % (self.label, type(value).__name__))
        self._passes({kind})
        return _cell_of(kind, value)

    def _passes(self, kinds):
        if not kinds <= self.passed_kinds:
            self.passed_kinds |= kinds
            self.schema.stale = True   # the dry run tries these cases: trace again

    def _dispatch(self, recurse, flat, position, value):
        """The recursive call at the dispatch position: a node is the function's
        call; None or a number runs the function's case for it inline (a base case
        costs no call), chosen by the value's code when only the run knows it."""
        at = self._input_of(position)
        if not structures.is_node(value):
            return self._inline(_value_kind(value), flat, position, flat[at])
        kinds = [kind for kind in (Kind.NONE, Kind.INT, Kind.FLOAT, Kind.BOOL)
                 if kind in value.numbers or (kind is Kind.NONE and value.maybe_none)]
        failing = [kind for kind in kinds if self._inline_fails(kind, position)]
        if failing == [Kind.NONE] and not value.numbers:
            structures.check(tf.greater_equal(value.index, 0),
                             '%s is not given None' % self.label)
        elif failing:
            code = value.code_tensor()
            for kind in failing:   # the function raises for it: the run re-runs in Python
                structures.check(tf.not_equal(code, schema.code_of_kind(kind)),
                                 '%s is not given a %s' % (self.label, kind.name.lower()))
        kinds = [kind for kind in kinds if kind not in failing]
        if not kinds:
            return self._node_call(recurse, flat, position)

        def case(kind):
            def run():
                if kind is None:
                    return kept_running(list(self._node_call(recurse, flat, position)))
                return kept_running(self._inline(kind, flat, position, flat[at]))
            return run
        if len(kinds) == 1 and len(kinds) + len(failing) == 1:   # a node, or that kind
            return tf.cond(value.holds_node(), case(None), case(kinds[0]))
        code = value.code_tensor()
        if len(kinds) == 1:
            return tf.cond(code >= 0, case(None), case(kinds[0]))
        branch = tf.zeros([], tf.int32)
        for number, kind in enumerate(kinds, 1):
            branch += tf.where(tf.equal(code, schema.code_of_kind(kind)), number, 0)
        return tf.switch_case(branch, [case(None)] + [case(kind) for kind in kinds])

    def _node_call(self, recurse, flat, position):
        """The call of a node: the function's graph run through ``Janus>Invoke``, or
        within ``config.recursion_inline_levels`` of the body, its body traced in place
        (a node's children computed in its own call: fewer calls per tree)."""
        if self._inlined >= config.recursion_inline_levels:
            return recurse(*flat)
        self._inlined += 1
        try:
            node = structures.NodeRef(flat[self._input_of(position)], self.schema, self.table,
                                      derived=True)
            return self._class_switch(flat, position, node)
        finally:
            self._inlined -= 1

    def _inline_fails(self, kind, position):
        """Whether the function's case for ``kind`` (None, a number) raises whatever
        the value (``node.is_leaf`` of a None): traced once in a scratch graph."""
        found = self._failing.get(kind)
        if found is None:
            ctx = current()
            assumptions = len(ctx.assumptions)
            try:
                with func_graph_module.FuncGraph('janus_recursion_probe').as_default():
                    inputs = [tf.compat.v1.placeholder(s.dtype, s.shape)
                              for s in self._arg_specs()]
                    self._inline(kind, inputs, position, inputs[self._input_of(position)],
                                 probe=True)
                found = False
            except _InlineFailed:
                found = True
            except (ConversionError, _NoOutputYet):
                found = False   # the real trace meets it again, as it would
            finally:
                del ctx.assumptions[assumptions:]
            self._failing[kind] = found
        return found

    def _inline(self, kind, flat, position, cell, probe=False):
        """The function's case for None or a number, traced in place."""
        self._inlining += 1
        try:
            return self._run_variant(flat, position, self._variant_value(kind, None, cell))
        except schema.DeadVariant:
            if probe:
                raise _InlineFailed() from None
            return self._failed_outputs(flat, 'this call with a %s' % kind.name.lower())
        except ConversionError:
            raise
        except Exception:  # noqa: BLE001 - the user's code raises for it: the run
            # re-runs in Python, which raises it as eagerly
            if probe:
                raise _InlineFailed() from None
            return self._failed_outputs(flat, 'this call with a %s' % kind.name.lower())
        finally:
            self._inlining -= 1

    def _passed(self, position, param, value):
        kind = param[0]
        if kind == _NODE:
            if structures.is_node(value) and value.numbers:
                structures.refuse('a recursive call of %s given a value that may be a number, '
                                  'with several node parameters' % self.label)
            if value is not self._node_values.get(position):
                self._varied.add(position)   # a node of the structure, not passed on
            if value is None or (structures.is_node(value) and value.maybe_none):
                if position not in self.maybe_none:
                    self.maybe_none.add(position)
                    self.schema.stale = True   # the parameter may be None: trace again
                if value is None:
                    return [tf.constant(-1, tf.int64)]
            if not structures.is_node(value):
                structures.refuse('a recursive call of %s given a %s where a node was passed'
                                  % (self.label, type(value).__name__))
            return [value.index]
        if kind == _TENSOR:
            tensor = tf.convert_to_tensor(value) if not scalars.is_dynamic(value) else None
            if tensor is None or tensor.dtype != param[1].dtype \
                    or not param[1].shape.is_compatible_with(tensor.shape):
                structures.refuse('a recursive call of %s given another kind of value (%s) '
                                  'where a %s was passed' % (self.label, value, param[1]))
            return [tensor]
        if kind == _SCALAR:
            if scalars.is_dynamic(value) and value.type is param[1]:
                return [value.tensor]
            if type(value) is param[1]:
                return [tf.constant(value, scalars.DTYPES[param[1]])]
            structures.refuse('a recursive call of %s given a %s where a %s was passed'
                              % (self.label, type(value).__name__, param[1].__name__))
        if kind == _OBJECT:
            if value is not param[1]:
                structures.refuse('a recursive call of %s given another object where the '
                                  'first call passed one on' % self.label)
            return []
        if not (pytypes.is_constant(value) and guards.same_constant(value, param[1])):
            structures.refuse('a recursive call of %s given %r where the first call passed %r '
                              '(janus passes constants through a recursion unchanged)'
                              % (self.label, value, param[1]))
        return []


@contextlib.contextmanager
def _checks_proven(ctx):
    """While a recursive function's gradient is traced: no assertions (``TraceContext.
    checks_proven``)."""
    saved, ctx.checks_proven = ctx.checks_proven, True
    try:
        yield
    finally:
        ctx.checks_proven = saved


def _rebuilt_argument(ctx, source, value):
    """The name of the argument a list or tuple root ``value`` is (an item of), where
    the call signature rebuilt it around its items (their values guarded one by one,
    relaxed numbers replaced), else None."""
    if type(value) not in schema.SEQUENCES:
        return None   # a node object: the very object, whatever holds it
    while isinstance(source, ItemSource):
        source = source.base
    if isinstance(source, ArgSource) and source.name not in ctx.provenance.opaque_arguments:
        return source.name
    return None


def _value_kind(value):
    """The cell kind of None or a number passed where a node goes, or None."""
    if value is None:
        return Kind.NONE
    kind = value.type if scalars.is_dynamic(value) else type(value)
    return {int: Kind.INT, float: Kind.FLOAT, bool: Kind.BOOL}.get(kind)


def _cell_of(kind, value):
    """``value`` (None or a number) as an int64 table cell."""
    if kind is Kind.NONE:
        return tf.constant(-1, tf.int64)
    if not scalars.is_dynamic(value):
        return tf.constant(structure_guard.float_bits(value) if kind is Kind.FLOAT else int(value),
                           tf.int64)
    if kind is Kind.FLOAT:
        return tf.bitcast(tf.cast(value.tensor, tf.float64), tf.int64)
    return tf.cast(value.tensor, tf.int64)


def _number_of(kind, cell):
    """The number an int64 cell holds."""
    if kind is Kind.FLOAT:
        return scalars.DynamicScalar(tf.bitcast(cell, tf.float64), float)
    if kind is Kind.BOOL:
        return scalars.DynamicScalar(tf.not_equal(cell, 0), bool)
    return scalars.DynamicScalar(cell, int)


def _number_kind(value):
    if scalars.is_dynamic(value):
        return value.type
    if type(value) in scalars.DTYPES:
        return type(value)
    structures.refuse('a recursive function writing a %s to an attribute (janus threads '
                      'numbers through a recursion)' % type(value).__name__)


class _StateSlot:
    """A number attribute of an outside object the recursion rewrites, threaded
    through every call as an input and an output."""

    def __init__(self, obj, name, key, kind):
        self.obj, self.name, self.key, self.kind = obj, name, key, kind


class _Active:
    """A body being traced: its build, and how it calls itself (None: the dry run)."""

    def __init__(self, build, recurse):
        self.build, self.recurse = build, recurse
