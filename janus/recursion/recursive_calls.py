"""The calls a traced recursive body makes of a recursive function: each another
``Janus>Invoke`` of it, or its case for None or a number run in place.

Needs a ``TraceContext`` while a ``recursion.RecursionBuild``'s body is traced
(``RecursionBuild.body``).  With one node parameter the call dispatches on the value
passed there: a node is the function's call (``_node_call``: within
``config.recursion_inline_levels`` of the body, its body traced in place), None or a
number runs the function's case for it inline (a base case costs no call), chosen by
the value's code when only the run knows it.  A recursive helper given a node inside
a recursion is a build of its own on the same table (``call_within``).
"""
import tensorflow as tf
from tensorflow.python.framework import func_graph as func_graph_module

from janus.config import config
from janus.errors import ConversionError
from janus.recursion import params, schema, structure_guard, structures
from janus.recursion.schema import Kind
from janus.control.common import kept_running
from janus.trace.tracing import current
from janus.values import protocol


class NoOutputYet(Exception):
    """A recursive call in the dry run: its branch is assumed not taken there."""


class _InlineFailed(Exception):
    """The function's case for None or a number raised in its probe trace."""


class RecursiveCalls:
    """How one build's body calls itself, and what its calls were seen to do."""

    def __init__(self, build):
        self.build = build
        self.count = 0             # recursive calls traced (none: no parameter passed on)
        self._inlining = 0         # cases of the function being run inline (``_dispatch``)
        self._failing = {}         # kind -> whether its inline case raises (``_inline_fails``)
        self._inlined = 0          # node calls traced in place around this point (``_node_call``)
        self.call_edges = set()    # columns recursive calls descend through (node_body)
        self.call_edges_known = True

    def self_call(self, ctx, args, kwargs, receiver):
        """A recursive call inside the body: another ``Janus>Invoke`` of the function."""
        build = self.build
        self.count += 1
        values, owner = params.arguments(build.fn, args, kwargs, receiver)
        if receiver and owner is not build.owner:
            structures.refuse('a recursive call of %s on another object' % build.label)
        flat, position = self._inputs(values, edges=True)
        if not any(self._descends(index, value) for index, (param, value)
                   in enumerate(zip(build.parameters, values))
                   if param.kind is params.ParamKind.NODE):
            structures.refuse('a recursive call of %s that passes no node read from the '
                              'structure (only the run would know how deep it goes)'
                              % build.label)
        build.schema.frames_per_level = max(build.schema.frames_per_level,
                                            len(ctx.stack) - build.stack_base + 1)
        recurse = ctx.recursion.active[build.fn.__code__].recurse
        if recurse is None:
            raise NoOutputYet()
        return build.results.rebuild(self._run(ctx, recurse, flat, position, values))

    def call_within(self, ctx, args, kwargs, receiver):
        """A call given a node of a structure being read (a recursive helper called
        from inside another recursive function, or this one's own outer call): the
        function's ``Janus>Invoke`` on that node's index, None or a number run in
        place as a recursive call's would be."""
        build = self.build
        if build.function is None:   # (whether a tape records it: the structure's reader's)
            build.ensure_built(ctx)
        values, _ = params.arguments(build.fn, args, kwargs, receiver)
        flat, position = self._inputs(values, edges=False)
        outputs = self._run(ctx, build.function, flat, position, values)
        build.mark(ctx)
        return build.results.rebuild(outputs)

    def _inputs(self, values, edges):
        """The flat graph inputs of a call given ``values``, and the dispatch position."""
        build = self.build
        parameters = build.parameters
        position = build.dispatch_position()
        flat = []
        for index, (param, value) in enumerate(zip(parameters, values)):
            if index != position:
                flat.extend(parameters.passed(index, param, value, build.schema))
                continue
            if edges:
                if value is not parameters.node_values.get(index):
                    parameters.varied.add(index)   # a node of the structure, not passed on
                self._note_call_edge(value, parameters.node_values.get(index))
            flat.append(self._dispatched(value))
        return flat, position

    def _run(self, ctx, function, flat, position, values):
        """``function`` on the flat inputs and the threaded numbers now, dispatched on
        the value at ``position``; the numbers it returns written back.  Returns its
        outputs."""
        build = self.build
        flat += build.state.inputs_now(ctx)
        if position is None:
            outputs = function(*flat)
        else:
            outputs = self._dispatch(function, flat, position, values[position])
        build.state.write_back(ctx, outputs, len(build.results))
        return outputs

    def _note_call_edge(self, value, node):
        """Which column of its node a recursive call descends through (level by level,
        only the nodes calls reach through those are computed)."""
        if not structures.is_node(value):
            return   # None or a number: no node reached
        origin = value.origin
        if origin is not None and node is not None and origin.node is node:
            self.call_edges.add(origin.column)
        else:
            self.call_edges_known = False   # a grandchild, a node from elsewhere

    def _descends(self, index, value):
        """Whether a recursive call's node argument at ``index`` ends or descends the
        recursion: a node read from the structure, or (not inside a case run inline)
        None or a number, run inline."""
        if structures.is_node(value):
            return value.derived
        if index == self.build.dispatch_position():
            return not self._inlining
        return value is None

    def _dispatched(self, value):
        """The input a call passes at the dispatch position (``RecursionBuild.body``): a
        node's index; for None or a number (run inline, ``_dispatch``), its cell.
        Records what kinds of value are passed there (the dry run tries those cases)."""
        if structures.is_node(value):
            kinds = set(value.numbers) | ({Kind.NONE} if value.maybe_none else set())
            self._passes(kinds)
            return value.index
        kind = _value_kind(value)
        if kind is None:
            structures.refuse('a recursive call of %s given a %s where a node was passed'
                              % (self.build.label, protocol.type_name(value)))
        self._passes({kind})
        return _cell_of(kind, value)

    def _passes(self, kinds):
        build = self.build
        if not kinds <= build.passed_kinds:
            build.passed_kinds |= kinds
            build.schema.stale = True   # the dry run tries these cases: trace again

    def _dispatch(self, recurse, flat, position, value):
        """The recursive call at the dispatch position: a node is the function's
        call; None or a number runs the function's case for it inline (a base case
        costs no call), chosen by the value's code when only the run knows it."""
        at = self.build.parameters.input_of(position)
        if not structures.is_node(value):
            return self._inline(_value_kind(value), flat, position, flat[at])
        kinds = [kind for kind in (Kind.NONE, Kind.INT, Kind.FLOAT, Kind.BOOL)
                 if kind in value.numbers or (kind is Kind.NONE and value.maybe_none)]
        failing = [kind for kind in kinds if self._inline_fails(kind, position)]
        self._check_not_failing(value, failing)
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

    def _check_not_failing(self, value, failing):
        """Checks the value is of no kind whose inline case raises (the run re-runs
        in Python)."""
        label = self.build.label
        if failing == [Kind.NONE] and not value.numbers:
            structures.check(tf.greater_equal(value.index, 0), '%s is not given None' % label)
        elif failing:
            code = value.code_tensor()
            for kind in failing:
                structures.check(tf.not_equal(code, schema.code_of_kind(kind)),
                                 '%s is not given a %s' % (label, kind.name.lower()))

    def _node_call(self, recurse, flat, position):
        """The call of a node: the function's graph run through ``Janus>Invoke``, or
        within ``config.recursion_inline_levels`` of the body, its body traced in place
        (a node's children computed in its own call: fewer calls per tree)."""
        if self._inlined >= config.recursion_inline_levels:
            return recurse(*flat)
        self._inlined += 1
        try:
            build = self.build
            node = structures.NodeRef(flat[build.parameters.input_of(position)], build.schema,
                                      build.table, derived=True)
            return build.class_switch(flat, position, node)
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
                              for s in self.build.arg_specs()]
                    self._inline(kind, inputs, position,
                                 inputs[self.build.parameters.input_of(position)], probe=True)
                found = False
            except _InlineFailed:
                found = True
            except (ConversionError, NoOutputYet):
                found = False   # the real trace meets it again, as it would
            finally:
                del ctx.assumptions[assumptions:]
            self._failing[kind] = found
        return found

    def _inline(self, kind, flat, position, cell, probe=False):
        """The function's case for None or a number, traced in place."""
        build = self.build
        self._inlining += 1
        try:
            return build.run_variant(flat, position, build.variant_value(kind, None, cell))
        except schema.DeadVariant:
            if probe:
                raise _InlineFailed() from None
            return build.failed_outputs(flat, 'this call with a %s' % kind.name.lower())
        except ConversionError:
            raise
        except Exception:  # noqa: BLE001 - the user's code raises for it: the run
            # re-runs in Python, which raises it as eagerly
            if probe:
                raise _InlineFailed() from None
            return build.failed_outputs(flat, 'this call with a %s' % kind.name.lower())
        finally:
            self._inlining -= 1


def _value_kind(value):
    """The cell kind of None or a number passed where a node goes, or None."""
    if value is None:
        return Kind.NONE
    kind = structures.number_type(value)
    return {int: Kind.INT, float: Kind.FLOAT, bool: Kind.BOOL}.get(kind)


def _cell_of(kind, value):
    """``value`` (None or a number) as an int64 table cell."""
    if kind is Kind.NONE:
        return tf.constant(-1, tf.int64)
    if structures.dynamic_type(value) is None:
        return tf.constant(structure_guard.float_bits(value) if kind is Kind.FLOAT
                           else int(value), tf.int64)
    if kind is Kind.FLOAT:
        return tf.bitcast(tf.cast(value.tensor, tf.float64), tf.int64)
    return tf.cast(value.tensor, tf.int64)
