"""A recursive function over an encoded structure, run level by level: every node
of a depth at once.

Needs a ``recursion.RecursionBuild`` that is built (its body traced once per node
class, what it returns known) and a ``TraceContext``; ``LevelPlan`` decides, per
build, whether it runs this way.  Where a recursive
function's calls decide nothing but its results (no numbers threaded, no
parameter besides the node that is not passed on unchanged), its value for a
node depends only on the node, so janus computes it for every node of the
structure, shallowest first: the encoder gives each node its depth
(``structure_guard.DEPTH_ROW``: a node's children are shallower), and the graph runs
the body for all nodes of one depth together (``vectorize.stacked``: TF's
``pfor``; a per-class branch or an ``if node.is_leaf`` becomes a partition of
the level).  A recursive call reads the callee's row of the results computed so
far; a call from the traced program reads its root's row.

The levels are unrolled, as many as the structure's depth speculated with room
to spare (``bound``): the guard (``STRUCTURE_MATCH``) misses on a deeper
structure, and a trace meeting one builds with more levels
(``Schema.levels``).  Unrolled, the gradient is TF's own with no loop in it:
a variable's rows read by ``tf.nn.embedding_lookup`` get a sparse gradient,
slice by slice, as eagerly.  Beyond ``config.recursion_max_levels`` the build
runs one ``Janus>Invoke`` per node instead.

The whole structure's results are computed once per build, where its first
call is (a build is not reused after state changed, ``RecursionBuild.reusable``).
A node of a class whose body always fails (``RecursionBuild.dead_classes``) is
not computed; a call of one fails a check (the run re-runs in Python).  Nodes no
call reaches are computed too: the body changes nothing, so that only costs
time, and a check failing there re-runs the call in Python (the same results).
"""
import tensorflow as tf
from tensorflow.python import pywrap_tfe
from tensorflow.python.eager import record
from tensorflow.python.eager import tape as tape_module
from tensorflow.python.framework import func_graph as func_graph_module

from janus.config import config
from janus.graph import vectorize
from janus.recursion import params, schema, structure_guard, structures
from janus.trace.tracing import current


_MAX_TRACES = 6


class Refused(Exception):
    """The build cannot run level by level (the message says why; ``lasting``: its
    body cannot, whatever the structure)."""

    def __init__(self, why, lasting=False):
        super().__init__(why)
        self.lasting = lasting


def bound(deepest):
    """The levels a graph computes for structures ``deepest`` deep: room to spare, so
    that a batch a little deeper does not need another graph."""
    return deepest + max(2, deepest // 2)


class LevelPlan:
    """Whether a build runs level by level, and its ``LevelRun`` once it does."""

    def __init__(self, build):
        self.build = build
        self.run = None        # the LevelRun, once it runs that way
        self.refusal = None    # why it does not run level by level ('' when it does)
        self.traced_depth = 0  # the traced call's structure's depth, so far

    @property
    def runs(self):
        return self.run is not None and bool(self.run.levels) and not self.refusal

    def wanted(self):
        if self.refusal is None:
            self.refusal = self._eligibility()
        return not self.refusal

    def _eligibility(self):
        """'' when each call's results depend on its node alone (one node parameter,
        the others passed on unchanged, no numbers threaded), else why not."""
        build = self.build
        if not config.recursion_runs_levels:
            return 'config.recursion_runs_levels is off'
        if build.schema.levels < 0:
            return build.schema.level_refusal or ('its body met, traced whole, what its '
                                                  'first trace did not')
        if build.within:
            return 'a recursive helper called inside another recursion'
        if build.state:
            return 'it threads numbers through its calls'
        if build.dispatch_position() is None:
            return 'not one node parameter with at most %d classes' % params.MAX_VARIANTS
        if any(not spec.shape.is_fully_defined() for spec in build.leaf_specs()):
            return 'results whose shape varies'
        if set(build.schema.types) <= build.dead_classes:
            return 'no node class it runs for'
        return ''

    def outputs(self, ctx, inputs):
        """The call's results read from every node's, computed level by level, or None
        where the function does not run that way (``refusal`` says why; its
        ``Janus>Invoke`` function is then built)."""
        build = self.build
        if not self.wanted():
            return None
        if self.run is None:
            self.run = LevelRun(build, build.leaf_specs())
        elif self.run.levels and self.traced_depth > self.run.levels:
            build.schema.levels = bound(self.traced_depth)
            build.widened(ctx)   # a deeper root: traced again with more levels
        assumptions = len(ctx.assumptions)
        at = build.parameters.input_of(build.dispatch_position())
        try:
            return self.run.outputs(inputs[at], inputs[:at] + inputs[at + 1:])
        except Widened:
            build.schema.levels = -1   # the full body met what the dry run did not
            build.widened(ctx)
        except Refused as e:
            del ctx.assumptions[assumptions:]
            if e.lasting:   # its body: the next traces do not try again
                build.schema.levels, build.schema.level_refusal = -1, str(e)
            return self._without(ctx, str(e))

    def _without(self, ctx, why):
        self.refusal, self.run, self.build.function = why, None, None
        self.build.ensure_built(ctx)
        return None

    def count(self, ctx):
        """How many levels the graph computes (its body traced: every column it reads
        known): the deepest structure among the call's arguments, with room to
        spare, or more if an earlier trace met deeper ones."""
        node_schema = self.build.schema
        arguments = ctx.call_arguments
        values = list(arguments.values()) if isinstance(arguments, dict) else []
        deepest = max(self._depth_of(node_schema.roots), self._depth_of(
            [item for value in values
             for item in (value if type(value) in schema.SEQUENCES else [value])]))
        self.traced_depth = max(self.traced_depth, deepest)
        levels = max(node_schema.levels, bound(deepest))
        if levels > config.recursion_max_levels:
            raise Refused('structures up to %d nodes deep (config.recursion_max_levels is %d)'
                          % (levels, config.recursion_max_levels))
        node_schema.levels = levels
        return levels

    def _depth_of(self, objects):
        """The depth of the deepest of ``objects`` that are nodes the recursion reads
        (0 where they do not fit its structure: the guard decides those)."""
        node_schema = self.build.schema
        types = set(node_schema.types)
        roots = [obj for obj in objects if schema.is_node_value(obj)
                 and schema.class_key(obj) in types]
        encoded = structure_guard.Encoder(node_schema, ()).encode(roots, check_depth=False)
        return 0 if isinstance(encoded, str) else encoded.deepest()


class LevelRun:
    """One build's results for every node of the structure, computed once."""

    def __init__(self, build, specs):
        self.build, self.specs = build, specs
        self.levels = 0          # levels unrolled (``LevelPlan.count``)
        self.node_ops = 0        # ops of the body traced for one node (explain)
        # (shared inputs' ids, tape epoch) -> every node's results, the inputs, whether
        # a tape could record them
        self._results = {}
        self._live = None        # per class: whether its body runs (known after the trace)
        # One level's vectorized body, traced once for all levels: a graph function
        # (its gradient TF's, built once), called per level.
        self.shared = build.shared_specs()
        self._level = tf.function(self._vectorized_level, autograph=False, input_signature=[
            tf.TensorSpec([None], tf.int64)] + [
            tf.TensorSpec([None] + spec.shape.as_list(), spec.dtype) for spec in specs]
            + self.shared)
        self._passes_other = False   # a recursive call passed other shared inputs

    def outputs(self, root, shared):
        """The build's results for the node ``root`` (its index) given the ``shared``
        inputs (every node's, computed once for each set of them)."""
        ctx = current()
        recording = _recording()
        key = (tuple(id(t) for t in shared), ctx.recursion.tape_epoch)
        found = self._results.get(key)
        if found is None or (recording and not found[2]):
            # computed anew where a tape may record it that did not record the others
            found = self._results[key] = (self._all_results(list(shared)), list(shared),
                                          recording)
        results = found[0]
        if not all(self._live):
            self._check_live(tf.constant(self._live), root, 'a root')
        return [tf.gather(r, root) for r in results]

    def _check_live(self, live, index, what):
        class_id = tf.gather(self.build.table[0], index)
        structures.check(tf.gather(live, tf.maximum(class_id, 0)),
                         '%s of %s is a node its body runs for' % (what, self.build.label))

    def _all_results(self, shared):
        table = self.build.table
        count = tf.shape(table, out_type=tf.int64)[1:]
        results = [tf.zeros(tf.concat([count, tf.constant(spec.shape.as_list(), tf.int64)], 0),
                            spec.dtype) for spec in self.specs]
        try:   # traced now: a body TF cannot vectorize is refused before any call of it
            self._level.get_concrete_function()
            if self._passes_other:
                raise Refused('a recursive call passes its tensors or numbers changed',
                              lasting=True)
        except Widened:
            raise
        except (vectorize.NotVectorized, ValueError, TypeError, NotImplementedError) as e:
            raise Refused('TensorFlow could not vectorize its body (%s)'
                          % vectorize.first_line(e), lasting=True) from None
        if not self.levels:   # one count for every set of results: the guard proves it
            self.levels = self.build.by_levels.count(current())
        classes, depth = table[0], table[structure_guard.DEPTH_ROW]
        computed = tf.logical_and(
            tf.logical_and(classes >= 0, tf.equal(table[structure_guard.REACHED_ROW], 1)),
            tf.gather(tf.constant(self._live), tf.maximum(classes, 0)))
        for level in range(1, self.levels + 1):
            nodes = tf.where(tf.logical_and(computed, tf.equal(depth, level)))[:, 0]
            values = self._level(nodes, *results, *shared)
            results = [tf.tensor_scatter_nd_update(r, nodes[:, None], v)
                       for r, v in zip(results, values)]
        return results

    def _vectorized_level(self, nodes, *inputs):
        """The body's results for every node of ``nodes`` (their children's are in
        the results so far, ``inputs`` first, then the shared inputs)."""
        body = self._node_graph()
        results, shared = inputs[:len(self.specs)], inputs[len(self.specs):]
        return vectorize.stacked(body.graph, [(body.index, nodes)],
                                 list(zip(body.sofar, results))
                                 + list(zip(body.shared, shared))
                                 + [(body.live, tf.constant(self._live))],
                                 body.outputs, tf.size(nodes))

    def _node_graph(self):
        """The body traced once for one node, the results so far an input of it."""
        build = self.build
        graph = func_graph_module.FuncGraph('janus_level_%s' % build.fn.__name__)
        # Traced as the recursive graph function's body is, no tape recording it (its
        # conds need no eager gradients: the gradient is TF's, of the vectorized ops);
        # the variables it reads are watched as a call's reads would be.
        with graph.as_default(), record.stop_recording(), \
                record.VariableWatcher() as reads:
            index = tf.compat.v1.placeholder(tf.int64, [])
            sofar = [tf.compat.v1.placeholder(spec.dtype, [None] + spec.shape.as_list())
                     for spec in self.specs]
            live = tf.compat.v1.placeholder(tf.bool, [None])   # known once all are traced
            shared = [tf.compat.v1.placeholder(spec.dtype, spec.shape) for spec in self.shared]

            def recurse(child, given):
                if len(given) != len(shared) or any(a is not b for a, b in zip(given, shared)):
                    self._passes_other = True   # (refused once the trace is over)
                if len(build.schema.types) > 1:   # (one class: it runs, or nothing does)
                    self._check_live(live, child, 'the node of a recursive call')
                return [tf.gather(r, child) for r in sofar]
            outputs = self._traced_body(recurse, index, shared)
            outputs = vectorize.gated(graph, [tf.convert_to_tensor(t) for t in outputs])
        for variable in reads.watched_variables():
            tape_module.variable_accessed(variable)
        problem = vectorize.unreached(graph, outputs)
        if problem is not None:
            raise Refused('its body holds %s' % problem, lasting=True)
        self._live = [key not in build.dead_classes for key in build.schema.types]
        self.node_ops = len(graph.get_operations())
        return _NodeGraph(graph, index, sofar, shared, live, outputs)


    def _traced_body(self, recurse, index, shared):
        """The body's outputs for the node ``index``, traced until the structure it
        reads settles (a class met through a column it reads first here)."""
        ctx, build = current(), self.build
        state = len(build.state)
        for _ in range(_MAX_TRACES):
            build.schema.stale = False
            ctx.recursion.vectorizing += 1
            try:
                outputs = build.node_body(recurse, index, shared)
            finally:
                ctx.recursion.vectorizing -= 1
            if len(build.state) != state:
                raise Widened()   # a number the calls thread: not by levels
            if not build.calls.call_edges_known:
                raise Refused('a recursive call on a node other than a child of its own '
                              '(only the run would know which nodes calls reach)',
                              lasting=True)
            if not build.schema.stale:
                if build.leaf_specs() != self.specs:
                    raise Refused('its results widened when traced whole')
                return outputs
        raise Refused('the structure it reads did not settle')


def _recording():
    """Whether a GradientTape records what is traced now."""
    return record.could_possibly_record() and not pywrap_tfe.TFE_Py_TapeSetIsStopped()


class Widened(Exception):
    """The body, traced whole, met what the build's first trace did not (a number it
    threads, a wider structure)."""


class _NodeGraph:
    """The body for one node: its node index, the results so far, the inputs every
    node shares and which classes run as inputs."""

    def __init__(self, graph, index, sofar, shared, live, outputs):
        self.graph, self.index, self.sofar, self.shared, self.live, self.outputs = \
            graph, index, sofar, shared, live, outputs
