"""A recursion's structure as inputs of the traced graph: its roots, its encoded table
and its tensor columns' stacks, read per run.

Needs a ``TraceContext`` (``recursion/recursion.py`` makes one per build that reads
a structure of its own; a build within another reads that one's).  Every call's node
arguments are roots of one encoded table (``structure_guard.Encoder``), a call-time
value of the top graph fed per run and proved by a ``STRUCTURE_MATCH`` guard; the
traced call's own structure is checked at trace time (a new graph first runs
unguarded).
"""
import tensorflow as tf

from janus.heap import shadow_heap
from janus.recursion import schema, structure_guard, structures
from janus.sources import ArgSource, ItemSource


class StructureInputs:
    """One structure's roots, table and tensor stacks as graph inputs.
    ``encoder_bounds()``: (the levels a graph computes, the columns calls descend
    through), or (None, None) where it does not run level by level."""

    def __init__(self, ctx, node_schema, label, number, name, encoder_bounds):
        self.schema, self.label, self.number = node_schema, label, number
        self.encoder_bounds = encoder_bounds
        self.root_sources, self._root_positions = [], {}
        self._encoder = None
        self._stacks = {}          # tensor column -> its stack's graph input
        self._top_graph, self._readers = ctx.top_graph, ctx.host.call_time_readers
        node_schema.tensor_input = self._tensor_input
        key = ('janus', 'structure', number, name)
        with ctx.top_graph.as_default():   # the top graph's own input, wherever read
            self.table = ctx.top_graph.capture_call_time_value(
                self._table_now, tf.TensorSpec([None, None], tf.int64), key=key)
        if ctx.host.call_time_readers is not None:
            ctx.host.call_time_readers.setdefault(key, self._table_now)
        ctx.guards.take(structure_guard.StructureGuard(self.encoder, label))

    def encoder(self):
        if self._encoder is None:   # first asked at the first run: the trace is over
            levels, call_columns = self.encoder_bounds()
            if levels is not None:
                self._encoder = structure_guard.Encoder(self.schema, self.root_sources,
                                                        levels, call_columns)
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

    def root_position(self, ctx, value):
        """The table's position of the root ``value`` (a node passed into the call)."""
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
        return position

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
        builds runs first on the very call it was traced for, unguarded.  Returns its
        depth."""
        encoded = structure_guard.Encoder(self.schema, ()).encode(self.schema.roots)
        if isinstance(encoded, str):
            structures.refuse('a recursion over this structure: %s' % encoded)
        return encoded.deepest()


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
