"""Text that depends on graph values, formatted after the run: ``LazyText``.

Needs nothing run before it.  An f-string, ``str()``, ``%`` or ``str.format`` of a
value only the run has (a graph tensor, a dynamic number) becomes a ``LazyText``
(``observe.py`` and ``calls.py`` make them), which the tracer turns into a
template rendered after each run (``graphgen/templating.py``).  Since that
rendering happens after the graph changed state, ``checked_text`` first tries
the format on samples of every value the run may give (extreme numbers of the
type, tensors of the traced dtype and rank) and refuses one that could raise.
"""
import tensorflow as tf

from janus import guards
from janus.errors import Unsupported
from janus.library import whitelist
from janus.reasons import Reason
from janus.trace.tracing import refuse_unmerged
from janus.values import protocol, scalars
from janus.values.protocol import NOT_MODELLED, StandIn


class LazyText(StandIn):
    """A string that depends on graph values (``f"loss {loss}"``): formatted after
    the run from the run's values, exactly as eager formats them.  It may be
    printed, returned or stored; any other use at trace time is refused."""

    def __init__(self, parts):
        self.parts = parts   # str, or (value, conversion, spec); conversion '%' or 'format': printf / str.format of spec

    def render(self, values):
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            conversion, spec = part[1], part[2]
            value = values.pop(0)
            if conversion == '%':   # ``spec % value``: printf-style, with the run's values
                out.append(spec % value)
                continue
            if conversion == 'format':   # ``spec.format(*args, **kwargs)``
                out.append(spec.format(*value[0], **value[1]))
                continue
            if conversion == 's':
                value = str(value)
            elif conversion == 'r':
                value = repr(value)
            elif conversion == 'a':
                value = ascii(value)
            out.append(format(value, spec))
        return ''.join(out)

    def values(self):
        return [part[0] for part in self.parts if not isinstance(part, str)]

    def refuse(self, *args, **kwargs):
        raise Unsupported(Reason.FORMATTING,
                          'janus converts a string that depends on a graph value (an f-string '
                          'or str() of a tensor) only to print, return or store it, not to '
                          'compute with it')

    def trace_truth(self):
        self.refuse()

    def trace_class(self):
        return str   # ``type(text)``, ``isinstance(text, str)``: eager's text is a str

    def trace_unpack(self, count, nested):
        self.refuse()

    def trace_operand(self):
        self.refuse()   # ``n + text``: as every operator refuses it (``observe._plain``)

    def materialize(self):
        """Returned, stored or printed: formatted after each run from the run's values."""
        return protocol.Formatted(self, self.values())

    def trace_unary(self, op):
        if op == 'Not':   # ``not text``: its truth decides (``trace_truth``)
            return NOT_MODELLED
        self.refuse()

    __str__ = __repr__ = __format__ = __len__ = __add__ = __radd__ = __mod__ = refuse
    __eq__ = __ne__ = __bool__ = __iter__ = __getitem__ = __contains__ = __mul__ = refuse
    __hash__ = None


def needs_run_values(value, depth=0):
    """Whether text of ``value`` needs the run's values: it is or holds (in lists,
    tuples, dicts) a graph tensor, a dynamic number or a ``LazyText``.  A
    ``tf.Variable`` refuses (its text would show the variable, not a value)."""
    if protocol.is_graph_number(value):
        return True
    if isinstance(value, (tf.Tensor, LazyText)):
        return not isinstance(value, guards.EagerTensor)
    if isinstance(value, tf.Variable):
        raise Unsupported(Reason.FORMATTING,
                          'janus does not convert formatting a tf.Variable into a string '
                          '(format v.read_value() or a tensor instead)')
    if isinstance(value, (list, tuple, dict)) and depth < 8:
        items = value.values() if isinstance(value, dict) else value
        return any(needs_run_values(item, depth + 1) for item in items)
    return False


# Values a dynamic number may have when the text is formatted, after the run.
_SAMPLES = {float: (1.5, float('inf'), float('-inf'), float('nan'), -0.0, 1e300, 2.0 ** -999),
            int: (0, -7, 2 ** 62 - 1, -(2 ** 62 - 1), 1, 5, 10),
            bool: (True, False, True, False, True, False, True)}


def holds_tensor(value, depth=0):
    """Whether ``value`` is or holds a tensor or a ``LazyText``, whose format may fail
    on what the run gives (numbers from outside are tried out by ``checked_text``)."""
    if isinstance(value, (tf.Tensor, LazyText)):
        return True
    if depth < 8 and (type(value) in (list, dict) or isinstance(value, tuple)):
        items = value.values() if type(value) is dict else value
        return any(holds_tensor(v, depth + 1) for v in items)
    return False


def checked_text(text):
    """``text`` (a LazyText) if formatting it cannot raise for any value its graph
    values may have: it is formatted after the run, when state has changed already.
    Each part holding a dynamic number or a graph tensor is formatted at trace time
    on samples of what the run can give: extreme values of a number's type, and
    tensors of the traced dtype and rank holding extreme values of that dtype
    (``f'{loss:.3f}'`` of a vector, ``'{:d}'`` of a float, ``'%d' % lr`` of an
    infinite ``lr``: refused, so the call runs imperatively and raises at that line)."""
    for part in text.parts:
        if isinstance(part, str) or not (scalars.holds_dynamic(part[0])
                                         or _holds_graph_value(part[0])):
            continue
        value, conversion, spec = part
        if _is_graph_tensor(value) and value.shape.rank is None and conversion is None and spec:
            raise Unsupported(Reason.FORMATTING,
                              'janus does not convert formatting a tensor of unknown rank with '
                              'a format spec (%r): it raises for all but a scalar' % spec)
        for k in range(_SAMPLE_COUNT):
            try:
                LazyText([part]).render([_sampled(value, k)])
            except Unsupported:
                raise
            except Exception as e:  # noqa: BLE001 - the format fails for some values
                raise Unsupported(Reason.FORMATTING,
                                  'janus does not convert this formatting of a graph value: it '
                                  'would raise %s (%s) for some values it may have, after the '
                                  'graph changed state' % (type(e).__name__, e)) from None
    return text


_SAMPLE_COUNT = len(_SAMPLES[int])


def _is_graph_tensor(value):
    return isinstance(value, tf.Tensor) and not isinstance(value, guards.EagerTensor)


def _holds_graph_value(value, depth=0):
    if _is_graph_tensor(value) or isinstance(value, LazyText):
        return True
    if depth < 8 and (type(value) in (list, dict) or isinstance(value, tuple)):
        items = value.values() if type(value) is dict else value
        return any(_holds_graph_value(v, depth + 1) for v in items)
    return False


def _sampled(value, k, depth=0):
    """``value`` with dynamic numbers replaced by sample ``k`` of their type and graph
    tensors by eager tensors of their dtype and rank holding sample ``k`` of their
    dtype (what formatting will see after the run)."""
    kind = protocol.graph_number_type(value)
    if kind is not None:
        return _SAMPLES[kind][k]
    if _is_graph_tensor(value):
        return _tensor_sample(value, k)
    if isinstance(value, LazyText):
        return value.render([_sampled(v, k, depth + 1) for v in value.values()])
    if depth < 8 and type(value) is dict:
        return {key: _sampled(v, k, depth + 1) for key, v in value.items()}
    if depth < 8 and (type(value) in (list, tuple) or whitelist.is_namedtuple_class(type(value))):
        items = [_sampled(v, k, depth + 1) for v in value]
        return type(value)(*items) if whitelist.is_namedtuple_class(type(value)) \
            else type(value)(items)
    return value


def _tensor_sample(tensor, k):
    """An eager tensor like ``tensor`` (its dtype; its rank, every dimension 1, since
    formatting depends on the rank, not the size) holding sample ``k`` of its dtype."""
    dtype = tensor.dtype.base_dtype
    if not dtype.is_numpy_compatible:
        raise Unsupported(Reason.FORMATTING,
                          'janus does not convert formatting a %s tensor' % dtype.name)
    rank = tensor.shape.rank or 0
    with tf.init_scope():
        return tf.fill([1] * rank, tf.constant(_dtype_samples(dtype)[k], dtype))


def _dtype_samples(dtype):
    """``_SAMPLE_COUNT`` values of ``dtype`` that formatting may treat differently."""
    if dtype == tf.bool:
        return _SAMPLES[bool]
    if dtype == tf.string:
        return (b'', b'x', b'\xff', b'0', b'-1', b'nan', b' ')
    if dtype.is_floating:
        return (0.0, 1.5, float('inf'), float('-inf'), float('nan'), -0.0, float(dtype.max))
    if dtype.is_complex:
        return (0j, 1.5 + 1j, complex('inf'), complex('nan'), -1j, 1.0, 0j)
    if dtype.is_integer:
        low, high = int(dtype.min), int(dtype.max)
        return (0, 1, high, low, -1 if low < 0 else 2, 5, 10)
    raise Unsupported(Reason.FORMATTING,
                      'janus does not convert formatting a %s tensor' % dtype.name)


def join_text(*parts):
    """An f-string's pieces: a ``str``, or a ``LazyText`` if any piece needs the run."""
    if not any(isinstance(part, LazyText) for part in parts):
        return ''.join(parts)
    flat = []
    for part in parts:
        flat.extend(part.parts if isinstance(part, LazyText) else [part])
    return LazyText(flat)


def text_of(callee, value, spec=None):
    """``str(t)`` / ``repr(t)`` / ``format(t, spec)`` of a value needing the run."""
    conversion = {str: 's', repr: 'r', format: None}[callee]
    refuse_unmerged(value, spec)
    if isinstance(spec, LazyText):
        spec.refuse()
    return checked_text(LazyText([(value, conversion, spec or '')]))
