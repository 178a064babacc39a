"""The trace-time shadow heap: what a graph reads from and writes to Python objects.

Needs a ``TraceContext`` (``operators``); used by the operators that read and
write attributes, items, globals and closure cells.

* Reads of tensors kept in Python objects (``self.state``) are *hoisted*: the
  graph gets a call-time input that re-reads the object's current value on
  every run (guarded by dtype and shape), instead of a constant frozen at
  trace time.
* Writes (``self.state = h``, ``self.d[k] = v``, ``self.outputs.append(h)``,
  ``global step; step += 1``) and ``print(...)`` go to the shadow only: later reads in the same
  trace see the written value, and the graph returns every written value as
  an extra output.  The executor writes them back, in program order, only
  after the run finished — which means every ``Janus>Assert`` passed — so a
  run that fails an assumption changed no Python object (all-or-nothing).
"""
import threading

import tensorflow as tf

from janus import guards

_call_time = threading.local()


def set_call_arguments(arguments):
    """The arguments of the graph run about to start (hoisted reads re-read from them)."""
    _call_time.arguments = arguments


def _call_arguments():
    return getattr(_call_time, 'arguments', None)


class Write:
    """One write to the Python heap, replayed after a successful run."""

    def __init__(self, kind, source, name, value, where):
        self.kind = kind          # 'attr', 'item', 'call', 'global', 'cell', 'print'
        self.source = source      # where the written object lives (a guards.Source)
        self.name = name          # attribute name, item key, method name, or variable name
        self.value = value        # trace-time value (tensors become graph outputs)
        self.where = where        # the namespace dict / cell for 'global' / 'cell'

    def apply(self, value, arguments):
        if self.kind == 'print':
            args, kwargs = value
            print(*args, **kwargs)
        elif self.kind == 'global':
            self.where[self.name] = value
        elif self.kind == 'cell':
            self.where.cell_contents = value
        else:
            target = self.source.value(arguments, {})
            if self.kind == 'attr':
                setattr(target, self.name, value)
            elif self.kind == 'item':
                target[self.name] = value
            else:
                getattr(target, self.name)(*value)

    def describe(self):
        return '%s %s%s' % (self.kind, repr(self.source) + '.' if self.source else '', self.name)


class TraceHeap:
    """Per trace: overlaid values, the write log, and containers changed in place."""

    def __init__(self):
        self.overlay = {}      # (id(obj), key) -> value written earlier in this trace
        self.writes = []
        self.changed = set()   # ids of outside containers changed in place
        self._keep = []

    def read(self, obj, key):
        return self.overlay.get((id(obj), key), _MISSING)

    def write(self, obj, key, write):
        self.overlay[(id(obj), key)] = write.value
        self._keep.append(obj)
        self.writes.append(write)


_MISSING = object()
MISSING = _MISSING


def hoist_tensor(ctx, source, value):
    """A call-time graph input that re-reads ``source``; guarded by dtype and shape."""
    shape = value.shape
    key = 'heap:' + repr(source)
    if ctx.shapes is not None:
        previous = ctx.shapes.get(key)
        shape = guards.relax(previous, shape) if previous is not None else shape
        ctx.shapes[key] = shape
    spec = tf.TensorSpec(shape, value.dtype)
    ctx.add_guard(guards.GuardKind.TENSOR_MATCH, source, (value.dtype, shape))

    def read_now():
        return source.value(_call_arguments(), {})
    return ctx.top_graph.capture_call_time_value(read_now, spec, key=('janus', key))
