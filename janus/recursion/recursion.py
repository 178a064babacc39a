"""Recursive calls over Python structures, as one graph function that calls itself.

Needs a ``TraceContext`` and ``calls.py``, which hands in how a converted callee
runs inlined (``run``).  A user function that may call itself (``may_recurse``:
directly, through a closure, or mutually) called with a node object (an instance of a plain
class of the user's, ``schema.is_node_class``) passed into the call is not
inlined: ``call`` builds a ``RecursionBuild`` for its call shape, once per
trace, and adds one ``Janus>Invoke`` of it (``recursive_functions.py``).  The
build traces the function's converted body once, its node parameters as
``structures.NodeRef``s, as a tensor-dependent region (every test on a node is
real control flow, never an assumption); each recursive call in it is another
``Janus>Invoke`` of the function itself (``recursive_calls.py``).  What it returns is
learnt first by a dry run in a scratch graph where every recursive call raises:
the raising branch is assumed not taken, so the base case's value is what the
dry run returns.

Every call's node arguments are roots of one encoded table
(``structure_inputs.py``), fed per run and proved by a ``STRUCTURE_MATCH``
guard (the traced call's own structure is checked at trace time: a new graph
first runs unguarded); the build keeps its graph functions alive as long as the
traced graph.  A node parameter every recursive call passes on unchanged (a
state object, ``rec(node.left, st)``) becomes an outside object of the body.
Numbers the body rewrites on outside objects (``self.nodes += 1``) are threaded
through every call as extra inputs and outputs (``threaded.py``), so the writes
keep program order.  With one node parameter and nothing else deciding a call,
the gradient reads each call's kept outputs back (``recursive_functions._Kept``).

With one node parameter the body is one branch per node class (``class_switch``:
the class known in each, ``NodeRef.static``); None or a number passed where the
node goes (a nested list's leaf) is that case of the function run in place at the
call (``recursive_calls.py``).  Nested lists and tuples are nodes too
(``schema.class_key``); a recursive helper given a node inside a recursion is a
build of its own on the same table (``RecursiveCalls.call_within``).  A build's
parameters are ``params.py``'s, what it returns ``results.py``'s; whether it runs
level by level is ``recursion_levels.LevelPlan``'s.

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

from janus.errors import ConversionError
from janus.config import config
from janus.graph import effects, ops
from janus.recursion import recursion_levels, schema, structures
from janus.recursion.params import Parameters, ParamKind, arguments, param_of
from janus.recursion.recursive_calls import NoOutputYet, RecursiveCalls
from janus.recursion.results import Results
from janus.recursion.schema import Kind
from janus.recursion.structure_inputs import StructureInputs
from janus.recursion.threaded import ThreadedNumbers
from janus.trace import access
from janus.values import scalars
from janus.control.common import in_traced_region, kept_running, taping
from janus.graph.recursive_functions import RecursionBuildError, RecursiveFunction
from janus.trace.tracing import NeedsValue, current

_MAX_ATTEMPTS = 6


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
    return structures.holds_node(values) and not may_recurse(
        fn, args[0] if receiver and args else None, tuple(ctx.recursion.active))


def active(ctx, fn):
    """The build whose body is being traced for ``fn`` (a recursive call), or None."""
    return ctx.recursion.active.get(fn.__code__)


def call(ctx, fn, args, kwargs, receiver, run):
    """``fn(*args, **kwargs)`` as a ``Janus>Invoke`` of its recursive graph function;
    ``run(args)``: the converted ``fn`` run inlined on those (positional) arguments."""
    values, owner = arguments(fn, args, kwargs, receiver)
    params = [param_of(value) for value in values]
    # Given a node of a structure being read (a recursive helper called from inside a
    # recursive function): the function reads that structure's table.
    within = next(iter(structures.nodes_at(values).values()), None)
    key = (fn.__code__, id(owner), tuple(p.key() for p in params))
    if within is not None:   # one build per structure: its captures settle across traces
        build = within.schema.helpers.get(key)
        if build is None:
            build = within.schema.helpers[key] = RecursionBuild(
                ctx, fn, owner, receiver, params, values, run, len(ctx.recursion.builds),
                within)
            ctx.recursion.builds_made.append(build)
        return build.calls.call_within(ctx, args, kwargs, receiver)
    build = ctx.recursion.builds.get(key)
    if build is None or not build.reusable(ctx):
        build = ctx.recursion.builds[key] = RecursionBuild(ctx, fn, owner, receiver, params,
                                                           values, run,
                                                           len(ctx.recursion.builds))
        ctx.recursion.builds_made.append(build)
    inputs = _call_inputs(ctx, build, values)
    if build.function is None:
        build.schema.taping = taping()
        build.ensure_built(ctx)
        return call(ctx, fn, args, kwargs, receiver, run)   # its parameters as built
    return _run_call(ctx, build, inputs)


def _call_inputs(ctx, build, values):
    """The graph inputs of the traced program's call given ``values``: its roots'
    indices, its tensors and numbers."""
    inputs = []
    for param, value in zip(build.parameters, values):
        if param.kind is ParamKind.OBJECT and value is not param.value:
            structures.refuse('%s called with another object where it passes one on '
                              'unchanged' % build.label)
        if param.kind is ParamKind.NODE:
            inputs.append(build.root_index(ctx, value))
        elif param.kind is ParamKind.TENSOR:
            inputs.append(value)
        elif param.kind is ParamKind.SCALAR:
            inputs.append(value.tensor)
    return inputs


def _run_call(ctx, build, inputs):
    """The traced program's call of a built function: level by level or through its
    ``Janus>Invoke``, the numbers it threads written back after the run."""
    build.inputs.refuse_written_nodes(ctx)
    build.by_levels.traced_depth = build.inputs.refuse_unfit_structure()
    inputs += [build.state.input(access.attr(slot.obj, slot.name), slot)
               for slot in build.state]
    outputs = build.by_levels.outputs(ctx, inputs)
    if outputs is None:
        outputs = build.function(*inputs)
    for slot, value in zip(build.state, build.state.values(outputs, len(build.results))):
        access.setattr_(slot.obj, slot.name, value)   # written back after the run
        ctx.recursion.writes.add(id(ctx.heap.writes[-1]))
    build.mark(ctx)
    return build.results.rebuild(outputs)


def self_call(ctx, build, args, kwargs, receiver):
    """A recursive call inside the body: another ``Janus>Invoke`` of the function."""
    return build.calls.self_call(ctx, args, kwargs, receiver)


class RecursionBuild:
    """One recursive function over one call shape: its graph function and how its
    body is traced, with collaborators for its parameters (``parameters``), the
    structure it reads as graph inputs (``inputs``), the numbers it threads
    (``state``), what it returns (``results``), its recursive calls (``calls``) and
    whether it runs level by level (``by_levels``)."""

    def __init__(self, ctx, fn, owner, receiver, params, values, run, number, within=None):
        self.fn, self.owner, self.receiver, self.run = fn, owner, receiver, run
        self.label = fn.__qualname__
        self.parameters = Parameters(params, values, self.label)
        profile = getattr(ctx.plan, 'profile', None)
        self.within = within is not None   # reads the structure of a node it is given
        self.schema = within.schema if self.within else schema.Schema(
            [], getattr(profile, 'structures', None), fn.__code__)
        # kinds of value other than nodes passed at the dispatch position (``body``), kept
        # by the schema (a build within another is made again with each of its traces)
        self.passed_kinds = self.schema.passed_kinds.setdefault(fn.__code__, set())
        self.state = ThreadedNumbers()   # numbers the body rewrites, threaded through
        self.results = Results()
        self.calls = RecursiveCalls(self)
        self.by_levels = recursion_levels.LevelPlan(self)
        self.stack_base = 0         # converted frames when the body began (frames per level)
        self.function = None
        self.dead_classes = set()   # node classes whose body fails for every node
        kept = getattr(ctx.top_graph, '_janus_recursive_builds', None)
        if kept is None:
            kept = []
            ctx.top_graph._janus_recursive_builds = kept   # the graph keeps its functions alive
        kept.append(self)
        if self.within:   # the structure's table, guard and tensor columns are its reader's
            self.inputs, self.table = None, within.table
            return
        self.inputs = StructureInputs(ctx, self.schema, self.label, number,
                                      fn.__code__.co_name, self._encoder_bounds)
        self.table = self.inputs.table

    def _encoder_bounds(self):
        if self.by_levels.runs:
            return self.by_levels.run.levels, self.calls.call_edges
        return None, None

    def describe(self):
        """One line for explain: the function, its graph, what it reads and threads."""
        function = self.function
        params = ', '.join(p.kind.value for p in self.parameters)
        columns = ', '.join('%s: %s' % (schema.column_label(c.name),
                                         '|'.join(sorted(k.name.lower() for k in c.kinds)))
                            for c in sorted(self.schema.columns.values(), key=lambda c: c.row))
        threads = ', '.join('%s.%s' % (type(s.obj).__name__, s.name) for s in self.state)
        graph = function.graphs()[0] if function.graphs() else None
        specialized = self.dispatch_position() is not None
        if self.by_levels.runs:
            how = 'level by level (%d ops a node, %d levels)' % (self.by_levels.run.node_ops,
                                                                 self.by_levels.run.levels)
        else:
            how = 'as %s: %d ops' % (function.name,
                                     len(graph.get_operations()) if graph is not None else 0)
            if self.by_levels.refusal:
                how += ' (not level by level: %s)' % self.by_levels.refusal
        return ('%s(%s) %s, %s; reads %s of %s%s%s; gradient: %s'
                % (self.label, params, how,
                   'within another recursion' if self.within
                   else '%d roots' % len(self.inputs.root_sources), columns or 'no attribute',
                   '/'.join(schema.key_name(t) for t in self.schema.types),
                   ' (a body per class)' if specialized else '',
                   '; threads ' + threads if threads else '',
                   self._gradient_text()))

    def _gradient_text(self):
        if self.by_levels.runs:
            return 'TF\'s, of the unrolled levels'
        if self.function.keeps_outputs:
            return 'kept outputs (no subtree recomputed)'
        return 'recomputes each subtree'

    # -- the traced program's calls ------------------------------------------------
    def root_index(self, ctx, value):
        """The graph's index of the root ``value`` (a node passed into the call)."""
        position = self.inputs.root_position(ctx, value)
        if self.function is not None and self.schema.stale:
            self.widened(ctx)
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

    def widened(self, ctx):
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
            if not self.results.known:
                self.parameters.varied, self.calls.count = set(), 0
                found = self._dry_run(ctx)
                if self._passed_on(ctx) or self.schema.stale or not found:
                    self.results.forget()
                    continue
            function = RecursiveFunction(self.fn.__name__, self.body, self.arg_specs(),
                                         self.leaf_specs(), memo_key=self._memo_key(),
                                         gradient_scope=lambda: _checks_proven(ctx),
                                         gradient_optional=not self.schema.taping)
            if self.by_levels.wanted():   # traced only if running level by level fails
                self.function = function
                return
            if self._built(function):
                self.function = function
                return
        if not self.results.known:
            structures.refuse('%s recurses on every path janus could trace (no base case '
                              'outside a recursive call)' % self.label)
        structures.refuse('%s: the structure it reads did not settle' % self.label)

    def _built(self, function):
        """Traces ``function``; False where it met more than it started from (a
        number to thread): traced again."""
        try:
            function.build()
        except RecursionBuildError as e:
            if self.schema.stale:
                return False
            structures.refuse('%s: %s' % (self.label, e))
        except (ValueError, TypeError, AssertionError, LookupError) as e:
            # TF's gradient of the body failed (cond_v2 cannot resolve a capture
            # in some nestings of a helper's calls): janus's limit, not the user's
            structures.refuse('%s: TensorFlow could not build its gradient function '
                              '(%s: %s)' % (self.label, type(e).__name__, e))
        if self.schema.stale:
            return False
        self._refuse_state_changes(function)
        return True

    def _passed_on(self, ctx):
        """Node parameters every recursive call passes on unchanged become objects of
        the body (``Parameters.passed_on``); True when one did (trace again)."""
        if not self.calls.count:
            return False
        return self.parameters.passed_on(ctx)

    def _memo_key(self):
        """The argument whose value alone decides a call's outputs (the one node
        parameter, with no tensors or threaded numbers besides): the forward keeps
        its outputs under it for the gradient (``config.recursion_keeps_outputs``)."""
        kinds = self.parameters.kinds()
        if not config.recursion_keeps_outputs or self.state \
                or kinds.count(ParamKind.NODE) != 1 or ParamKind.TENSOR in kinds \
                or ParamKind.SCALAR in kinds or not self.schema.taping:
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

    def arg_specs(self):
        """The graph function's inputs: its parameters', then the threaded numbers'."""
        return self.parameters.specs() + self.state.specs()

    def leaf_specs(self):
        """The TensorSpec of each value the function returns, flat: the result's
        leaves, then the threaded numbers."""
        return self.results.specs() + self.state.specs()

    def shared_specs(self):
        """The graph inputs besides the node (``Parameters.shared_specs``)."""
        return self.parameters.shared_specs()

    def dispatch_position(self):
        """The node parameter the body is specialized on (``Parameters.
        dispatch_position``), or None."""
        return self.parameters.dispatch_position(self.schema)

    # -- the body -----------------------------------------------------------------
    def node_body(self, recurse, index, shared):
        """The body's results for the node ``index`` (a scalar int64 tensor) given the
        ``shared`` inputs; a recursive call is ``recurse(child_index, its shared
        inputs)``."""
        position = self.dispatch_position()
        self.calls.call_edges, self.calls.call_edges_known = set(), True
        others = iter(shared)
        flat = [index if i == position else next(others)
                for i, param in enumerate(self.parameters) if param.is_input]

        def call(*given):
            at = self.parameters.input_of(position)
            return recurse(given[at], given[:at] + given[at + 1:])
        return self.body(call, *flat)

    def _dry_run(self, ctx):
        """What the body returns, from a trace where every recursive call raises (its
        branch assumed not taken): the base case's value.  False: every path recursed."""
        assumptions = len(ctx.assumptions)
        try:
            with func_graph_module.FuncGraph('janus_recursion_dry_run').as_default():
                inputs = [tf.compat.v1.placeholder(s.dtype, s.shape) for s in self.arg_specs()]
                self.body(None, *inputs)
            return True
        except NoOutputYet:
            return False
        finally:
            del ctx.assumptions[assumptions:]

    def body(self, recurse, *flat):
        """The converted function on the parameters' graph values (``recurse``: the
        recursive call; None in the dry run).  Returns its results, flat.

        With one node parameter (``dispatch_position``) the body is specialized to
        the node's class: one branch per class the structure holds, chosen by the
        node's class id, each traced with the class known (``NodeRef.static``); a
        None or a number passed there never reaches the function (``self_call``
        runs that case inline)."""
        ctx = current()
        code = self.fn.__code__
        outer = ctx.recursion.active.get(code)
        ctx.recursion.active[code] = _Active(self, recurse)
        self.stack_base = len(ctx.stack)
        try:
            position = self.dispatch_position()
            if position is None:
                return self.run_variant(flat, None, None)
            node = structures.NodeRef(flat[self.parameters.input_of(position)], self.schema,
                                      self.table)
            if recurse is None:
                return self._dry_variants(flat, position, node)
            return self.class_switch(flat, position, node)
        finally:
            if outer is None:
                ctx.recursion.active.pop(code, None)
            else:
                ctx.recursion.active[code] = outer

    def _dry_variants(self, flat, position, node):
        """The dry run: the first variant that returns without recursing (a None or
        number passed inline first: they are base cases), else ``NoOutputYet``."""
        candidates = [kind for kind in (Kind.NONE, Kind.INT, Kind.FLOAT, Kind.BOOL)
                      if kind in self.passed_kinds]
        candidates += list(self.schema.types_used())
        for variant in candidates:
            value = self.variant_value(variant, node)
            try:
                return self.run_variant(flat, position, value)
            except (NoOutputYet, schema.DeadVariant):
                continue
            except ConversionError:
                raise
            except Exception:  # noqa: BLE001 - the user's code raises there: another case
                continue
        raise NoOutputYet()

    def variant_value(self, variant, node, scalar=None):
        """What the function is given in a variant: the node with its class known,
        None, or the number (``scalar``: the int64 cell; a placeholder in the dry run)."""
        if isinstance(variant, Kind):
            if variant is Kind.NONE:
                return None
            cell = scalar if scalar is not None else tf.compat.v1.placeholder(tf.int64, [])
            return _number_of(variant, cell)
        return node.with_class(variant)

    def class_switch(self, flat, position, node):
        """One branch per node class, chosen by the node's class id."""
        variants = self.schema.types_used()

        def branch(key):
            def run():
                try:
                    outputs = self.run_variant(flat, position, node.with_class(key))
                except schema.DeadVariant:   # no node of it gets here: the guard
                    self.dead_classes.add(key)
                    outputs = self.failed_outputs(flat, 'a %s node' % schema.key_name(key))
                except ConversionError:
                    raise
                except Exception:  # noqa: BLE001 - the user's code raises for every such
                    # node: the run re-runs in Python, which raises it as eagerly
                    self.dead_classes.add(key)
                    outputs = self.failed_outputs(flat, 'a %s node' % schema.key_name(key))
                return kept_running(outputs)
            return run
        if len(variants) == 1:
            return branch(variants[0])()
        class_id = tf.cast(node.cells(0), tf.int32)
        if len(variants) == 2:
            return tf.cond(tf.equal(class_id, 0), branch(variants[0]), branch(variants[1]))
        return tf.switch_case(class_id, [branch(key) for key in variants])

    def failed_outputs(self, flat, what):
        """A branch that must not run: a failing check, and outputs of the right kinds."""
        structures.fail_check('the recursion never reaches %s' % what)
        outputs = self.results.zeros()
        return outputs + list(flat[len(flat) - len(self.state):]) if self.state else outputs

    def run_variant(self, flat, position, value):
        """The converted function on the flat inputs, the parameter at ``position``
        given ``value`` instead (None: every node parameter a NodeRef of unknown
        class).  Returns its results and the threaded numbers, flat."""
        ctx = current()
        inputs = iter(flat)
        values = self.parameters.values_of(inputs, position, value, self.schema, self.table)
        saved_nodes = self.parameters.node_values
        self.parameters.node_values = structures.nodes_at(values)
        args = ([self.owner] if self.receiver else []) + values
        heap = ctx.heap
        base = heap.checkpoint()
        region = heap.open_region()   # the body's writes: threaded through every call
        try:
            self.state.overlay(heap, inputs)
            result = in_traced_region(self._run_converted, args)
            flat_out = self.results.flat(result, self.label, self.schema)
            flat_out += self.state.outputs(ctx, base, region, self.schema)
        except NeedsValue as e:
            if e.lineage:
                raise   # a number from outside: specialized, as anywhere
            structures.refuse('a use of a node\'s number that needs its value (%s)' % e)
        finally:
            heap.close_region(region)
            heap.restore(base)
            self.parameters.node_values = saved_nodes
        return flat_out

    def _run_converted(self, args):
        """The converted function on ``args`` (in parameter order; keyword-only ones
        passed by keyword)."""
        names = list(inspect.signature(self.fn).parameters.values())
        positional = [a for a, p in zip(args, names) if p.kind is not p.KEYWORD_ONLY]
        keywords = {p.name: a for a, p in zip(args, names) if p.kind is p.KEYWORD_ONLY}
        return self.run(positional, keywords)


@contextlib.contextmanager
def _checks_proven(ctx):
    """While a recursive function's gradient is traced: no assertions (``TraceContext.
    checks_proven``)."""
    saved, ctx.checks_proven = ctx.checks_proven, True
    try:
        yield
    finally:
        ctx.checks_proven = saved


def _number_of(kind, cell):
    """The number an int64 cell holds."""
    if kind is Kind.FLOAT:
        return scalars.DynamicScalar(tf.bitcast(cell, tf.float64), float)
    if kind is Kind.BOOL:
        return scalars.DynamicScalar(tf.not_equal(cell, 0), bool)
    return scalars.DynamicScalar(cell, int)


class _Active:
    """A body being traced: its build, and how it calls itself (None: the dry run)."""

    def __init__(self, build, recurse):
        self.build, self.recurse = build, recurse
