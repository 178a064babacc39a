"""Which callees a graph may call directly, and which the generator inlines.

Needs nothing run before it.  The paper's rule (§4.3.1): a callee janus does
not convert itself must be on a whitelist of functions whose behaviour it
knows; TF, Keras and a few side-effect-free builtins are, and NumPy's pure
functions on values the trace knows (Python constants, NumPy scalars): run at
trace time, behind the guards of what they read.  Functions that change
global Python state when *called* (seeding, device config) are not: a graph
would run them once, at trace time, instead of on every call.
"""
from __future__ import annotations

import builtins
import enum
import math
import types
from collections.abc import Iterable

import numpy as np
import tensorflow as tf

from janus import pytypes
from janus.errors import Unsupported
from janus.reasons import Reason

LIBRARY_PREFIXES = ('tensorflow', 'keras', 'tf_keras', 'horovod')
# janus's own trace-time packages (the runtime tier): their helpers are called, never converted.
JANUS_RUNTIME = ('janus.graph', 'janus.trace', 'janus.values', 'janus.heap', 'janus.control',
                 'janus.recursion', 'janus.library')

# Library modules whose functions act on Python state, not on tensors.
LIBRARY_BLOCKLIST = (
    'tensorflow.python.framework.config',
    'tensorflow.python.framework.random_seed',
    'tensorflow.python.eager.context',
    'keras.src.utils.rng_utils',
    'keras.src.backend.common.global_state',
)



class TraceTimeOnly(enum.Enum):
    """What converted code gets from a library function whose answer while tracing
    (inside a graph) differs from the answer eager code gets (``TRACE_TIME_ONLY``)."""
    TRUE = 'True, as eagerly'
    FALSE = 'False, as eagerly'
    NOT_SYMBOLIC = 'False for a tensor: each stands for an eager one'
    STATIC_VALUE = 'the value, where the trace knows it for every call it serves'
    REFUSED = 'refused: the answer is the graph, or it needs a value only the run has'


# Library functions that ask about the execution mode or the graph being built,
# by (module, qualified name): Python code taking a path on their answer takes
# the eager path, as it would eagerly (``library_calls.as_eagerly`` answers them).
TRACE_TIME_ONLY: dict[tuple[str | None, str | None], TraceTimeOnly] = {
    ('tensorflow.python.eager.context', 'executing_eagerly'): TraceTimeOnly.TRUE,
    ('tensorflow.python.eager.context', 'executing_eagerly_v1'): TraceTimeOnly.TRUE,
    ('tensorflow.python.framework.ops', 'executing_eagerly_outside_functions'):
        TraceTimeOnly.TRUE,
    ('tensorflow.python.framework.ops', 'inside_function'): TraceTimeOnly.FALSE,
    ('tensorflow.python.framework.ops', 'is_symbolic_tensor'): TraceTimeOnly.NOT_SYMBOLIC,
    ('tensorflow.python.framework.tensor_util', 'constant_value'): TraceTimeOnly.STATIC_VALUE,
    ('tensorflow.python.framework.ops', 'get_default_graph'): TraceTimeOnly.REFUSED,
    ('tensorflow.python.framework.ops', 'init_scope'): TraceTimeOnly.REFUSED,
    ('tensorflow.python.framework.ops', 'get_current_name_scope'): TraceTimeOnly.REFUSED,
    ('tensorflow.python.eager.polymorphic_function.eager_function_run',
     'run_functions_eagerly'): TraceTimeOnly.REFUSED,
    ('keras.src.ops.core', 'convert_to_numpy'): TraceTimeOnly.REFUSED,
    ('keras.src.backend.tensorflow.core', 'convert_to_numpy'): TraceTimeOnly.REFUSED,
}


def trace_time_only(callee: object) -> TraceTimeOnly | None:
    """The ``TraceTimeOnly`` answer for ``callee``, or None."""
    key = (getattr(callee, '__module__', None), getattr(callee, '__qualname__', None))
    try:
        return TRACE_TIME_ONLY.get(key)
    except TypeError:   # an unhashable name
        return None


# Tensor attributes, as converted code reads them from a graph tensor standing for
# an eager one (``operators.attr``).  The same in a graph: read.  Undefined eagerly:
# eager's AttributeError.  Anything else on the tensor types (``numpy``, ``device``,
# ``eval``, ``consumers``...) differs in a graph or needs the run's value: refused.
TENSOR_ATTRIBUTES_SAME = frozenset(('dtype', 'shape', 'get_shape', 'ndim', 'set_shape'))
TENSOR_ATTRIBUTES_EAGER_RAISES = frozenset(('graph', 'name', 'op', 'value_index'))


def is_blocklisted(callee: object) -> bool:
    """A library function that changes (or reads) TF's global Python state."""
    return in_package(module_of(callee), LIBRARY_BLOCKLIST)


# Builtins that neither call user code nor touch Python state.
BUILTINS = frozenset(getattr(builtins, name) for name in (
    'len', 'range', 'isinstance', 'issubclass', 'min', 'max', 'abs', 'int', 'float',
    'bool', 'str', 'zip', 'enumerate', 'list', 'tuple', 'dict', 'sum', 'reversed',
    'any', 'all', 'round', 'divmod', 'pow', 'slice', 'set', 'frozenset', 'repr', 'format', 'sorted',
    'ord', 'chr', 'bin', 'oct', 'hex')
) | frozenset(f for f in vars(math).values() if isinstance(f, types.BuiltinFunctionType))

# NumPy functions that compute only on their arguments (besides every ufunc and
# NumPy's scalar types): on values the trace knows they run at trace time, their
# result a constant of the graph (``library_calls.py``).  Not ``empty`` (its contents are
# whatever memory held), nor anything random, reading files or printing.
NUMPY_FUNCTIONS = frozenset(getattr(np, name) for name in (
    'round', 'around', 'clip', 'mean', 'sum', 'prod', 'max', 'min', 'amax', 'amin', 'argmax',
    'argmin', 'std', 'var', 'median', 'average', 'percentile', 'quantile', 'cumsum', 'cumprod',
    'dot', 'isclose', 'allclose', 'array', 'asarray', 'zeros', 'ones', 'full', 'arange',
    'linspace', 'zeros_like', 'ones_like', 'full_like', 'where', 'concatenate', 'stack',
    'reshape', 'transpose', 'sort', 'argsort', 'diff', 'nan_to_num', 'interp',
    'count_nonzero', 'any', 'all') if hasattr(np, name))



_NUMPY_DISPATCHER = type(np.mean)   # NumPy's Python functions (``np.mean``, ``np.clip``)


def is_numpy_callable(value: object) -> bool:
    """A function of NumPy's own (a ufunc, ``np.mean``): read from ``np`` by identity;
    whether a call of it converts is decided where it is called.  Not other NumPy
    objects (``np.vectorize(f)``, a ``RandomState``): they hold state or run Python."""
    return isinstance(value, np.ufunc) or type(value) is _NUMPY_DISPATCHER


def is_numpy_function(callee: object) -> bool:
    """A NumPy function janus runs at trace time on values it knows: a ufunc (not its
    methods), a NumPy scalar type (``np.float32(x)``) or one of ``NUMPY_FUNCTIONS``."""
    if isinstance(callee, np.ufunc):
        return True
    if isinstance(callee, type):
        return issubclass(callee, (np.number, np.bool_)) and callee.__module__ == 'numpy'
    try:
        return callee in NUMPY_FUNCTIONS
    except TypeError:   # an unhashable callee
        return False


# Builtins that call a user function given as key=/default: refused when given one.
KEYED_BUILTINS = frozenset((builtins.min, builtins.max, builtins.sorted))

def module_of(callee: object) -> str:
    """The module a callee's code lives in ('' when unknown)."""
    if isinstance(callee, types.MethodType):
        return getattr(callee.__func__, '__module__', '') or ''
    if isinstance(callee, (types.FunctionType, types.BuiltinFunctionType, type)):
        return getattr(callee, '__module__', '') or ''
    return getattr(type(callee), '__module__', '') or ''


def in_package(module: str, packages: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + '.') for p in packages)


def is_library(callee: object) -> bool:
    module = module_of(callee)
    if in_package(module, JANUS_RUNTIME):
        return True
    return in_package(module, LIBRARY_PREFIXES) and not in_package(module, LIBRARY_BLOCKLIST)


def is_janus_runtime(callee: object) -> bool:
    """A function or method of janus's own runtime (a TensorList's ``append``)."""
    return in_package(module_of(callee), JANUS_RUNTIME)


def is_library_object(value: object) -> bool:
    return in_package(getattr(type(value), '__module__', '') or '', LIBRARY_PREFIXES)


# Flags objects whose attribute reads return the flags' values and run nothing else
# (absl's ``FLAGS.batch_size``: its ``__getattr__`` looks the flag up): (module, class).
FLAGS_CLASSES = (('absl.flags._flagvalues', 'FlagValues'),)


def is_flags_object(value: object) -> bool:
    """An absl ``FlagValues`` (or a subclass): an attribute read is the flag's value,
    read as any library object's attribute is, and guarded by it."""
    return any((getattr(klass, '__module__', None), klass.__name__) in FLAGS_CLASSES
               for klass in type(value).__mro__)


def is_builtin_method(callee: object) -> bool:
    """A method of a value of a type janus models (``janus/pytypes.py``): a builtin
    one (``lst.append``, ``'/'.join``, ``s.add``), or the container type's own
    method on a modelled subclass (a Keras ``TrackedList``'s ``append``)."""
    owner = getattr(callee, '__self__', None)
    if isinstance(callee, types.BuiltinMethodType):
        return pytypes.model_of(owner) is not None
    return (isinstance(callee, types.MethodType)
            and pytypes.is_own_method(owner, getattr(callee, '__name__', '')))


is_namedtuple_class = pytypes.is_namedtuple_class


def is_builtin_exception(callee: object) -> bool:
    """Exception classes whose construction (to raise one) runs no user code: builtin
    ones, and yours that define neither ``__init__`` nor ``__new__`` (``class
    TrainingDiverged(Exception): pass``)."""
    return (isinstance(callee, type) and issubclass(callee, BaseException)
            and all(kind.__module__ == 'builtins'
                    or ('__init__' not in vars(kind) and '__new__' not in vars(kind))
                    for kind in callee.__mro__))


def captured_by_identity(value: object) -> bool:
    if isinstance(value, (tf.Tensor, tf.Variable, types.FunctionType, types.ModuleType, type,
                          types.BuiltinFunctionType)):
        return True
    return is_library_object(value) or callable(value) and not hasattr(value, '__dict__')


def refuse_opaque(value: object, protocols: Iterable[str], what: str) -> None:
    """Refuses observing an outside value janus does not model (``janus/pytypes.py``)
    when one of its type's special methods ``protocols`` is not ``object``'s: it would
    run behind the guards (a Counter's ``__eq__``, a UserList's ``__len__``, a
    range's ``__iter__``).  Constants and Enum members are guarded whole; tensors,
    variables and library objects are guarded by identity and assumed unchanged
    (the paper's whitelist)."""
    model = pytypes.model_of(value)
    if model is not None and not model.container:
        return
    if model is None and (isinstance(value, (tf.Tensor, tf.Variable))
                          or is_library_object(value)):
        return
    if model is None and all(pytypes.protocol_is_object(type(value), name)
                             for name in protocols):
        return
    raise Unsupported(Reason.SPECIAL_METHODS,
                      'janus does not convert %s a %s from outside the call (janus models '
                      'constants, list, tuple, dict, deque and set: janus/pytypes.py)'
                      % (what, type(value).__name__))


# Standard-library modules whose code keeps Python state (a ``random.Random``'s
# stream): library code, never converted as yours; a call into one is a graph break.
_STATEFUL_STDLIB = ('random', 'secrets', 'uuid')


def refuse_stateful_stdlib(fn: object) -> None:
    """Refuses converting ``fn`` when it is standard-library code that keeps Python
    state (``rng.randint`` of a ``random.Random``): it runs in Python, in program
    order, with the statement calling it (a graph break)."""
    module = getattr(fn, '__module__', None) or ''
    if module.split('.')[0] in _STATEFUL_STDLIB:
        raise Unsupported(Reason.UNCONVERTED_CALL,
                          'janus does not convert %s.%s: standard-library code that keeps '
                          'Python state (a tf.random.Generator draws in the graph)'
                          % (module, getattr(fn, '__qualname__', fn)))
