"""The numbers a recursive function rewrites on outside objects, threaded through its
calls: the state a recursive call reads and writes back.

Needs a ``TraceContext`` and its shadow heap while a recursive function's body is
traced (``recursion/recursion.py``).  A number the body rewrites (``self.nodes += 1``)
is an extra input and an extra output of every call, so the writes keep program order;
the traced program's call writes the last value back.
"""
import dataclasses
import typing

import tensorflow as tf

from janus.heap.shadow_heap import Write, WriteKind
from janus.recursion import structures
from janus.values import protocol, scalars


@dataclasses.dataclass(eq=False)
class StateSlot:
    """A number attribute of an outside object the recursion rewrites, threaded
    through every call as an input and an output."""
    obj: typing.Any
    name: str
    key: typing.Any    # the shadow heap's key of the attribute
    kind: type         # int, float or bool


def number_kind(value):
    """The Python type of a number written to a threaded attribute."""
    kind = structures.number_type(value)
    if kind in scalars.DTYPES:
        return kind
    structures.refuse('a recursive function writing a %s to an attribute (janus threads '
                      'numbers through a recursion)' % protocol.type_name(value))


class ThreadedNumbers:
    """A build's threaded numbers, in the order its calls pass them."""

    def __init__(self):
        self.slots = []

    def __iter__(self):
        return iter(self.slots)

    def __len__(self):
        return len(self.slots)

    def specs(self):
        """The graph inputs' (and outputs') specs, one per number."""
        return [tf.TensorSpec([], scalars.DTYPES[slot.kind]) for slot in self.slots]

    def input(self, value, slot):
        """A threaded number's value passed into a call (it must keep its kind)."""
        if number_kind(value) is not slot.kind:
            structures.refuse('%s.%s is not a %s when the recursion starts'
                              % (type(slot.obj).__name__, slot.name, slot.kind.__name__))
        return structures.number_tensor(value, slot.kind)

    def inputs_now(self, ctx):
        """Their values in the trace now, as a call's inputs."""
        return [self.input(ctx.heap.read(slot.obj, slot.key), slot) for slot in self.slots]

    def values(self, outputs, leaves):
        """Their values a call returns (after its ``leaves`` results)."""
        return [scalars.DynamicScalar(out, slot.kind)
                for out, slot in zip(outputs[leaves:], self.slots)]

    def write_back(self, ctx, outputs, leaves):
        """A call inside a traced body writes their values it returns to the heap."""
        for slot, value in zip(self.slots, self.values(outputs, leaves)):
            source = ctx.provenance.source_of(slot.obj)
            ctx.heap.write(slot.obj, slot.key, Write(WriteKind.ATTR, source, slot.name, value, None))

    def overlay(self, heap, inputs):
        """The body sees their values from its inputs (``inputs``: an iterator)."""
        for slot in self.slots:
            heap.overlay[(id(slot.obj), slot.key)] = scalars.DynamicScalar(
                next(inputs), slot.kind)

    def outputs(self, ctx, base, region, schema):
        """The final values of the numbers the body writes (``self.nodes += 1``),
        learnt as the body is traced (a new one: traced again with it threaded)."""
        heap = ctx.heap
        if heap.changed != base.changed or heap.items_written != base.items_written:
            structures.refuse('a recursive function that changes a list or dict in place')
        self._learn(heap, region, schema)
        outputs = []
        for slot in self.slots:
            value = heap.read(slot.obj, slot.key)
            if number_kind(value) is not slot.kind:
                structures.refuse('%s.%s changes its kind of number in the recursion'
                                  % (type(slot.obj).__name__, slot.name))
            outputs.append(structures.number_tensor(value, slot.kind))
        prints = [w for w in heap.writes[len(base.writes):] if w.kind is not WriteKind.ATTR]
        if prints:
            structures.refuse('a recursive function that %s (janus threads number attributes '
                              'through a recursion)' % ('prints' if prints[0].kind is
                                                        WriteKind.PRINT else 'writes %s'
                                                        % prints[0].kind.value.lower()))
        return outputs

    def _learn(self, heap, region, schema):
        """A slot for each number attribute the body wrote that is not threaded yet."""
        known = {(id(slot.obj), slot.key) for slot in self.slots}
        for key, rebinding in region.keys.items():
            write = rebinding.write
            if key in known:
                continue
            if write.kind is not WriteKind.ATTR or key[1].is_item:
                structures.refuse('a recursive function writing %s (janus threads number '
                                  'attributes through a recursion)' % write.kind.value.lower())
            kind = number_kind(heap.read(rebinding.obj, key[1]))
            self.slots.append(StateSlot(rebinding.obj, write.name, key[1], kind))
            schema.stale = True   # trace again, the number threaded
