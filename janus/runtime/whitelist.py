"""Which callees a graph may call directly, and which the generator inlines.

Needs nothing run before it.  The paper's rule (§4.3.1): a callee janus does
not convert itself must be on a whitelist of functions whose behaviour it
knows; TF, Keras and a few side-effect-free builtins are.  Functions that
change global Python state when *called* (seeding, device config) are not:
a graph would run them once, at trace time, instead of on every call.
"""
import builtins
import math
import types

LIBRARY_PREFIXES = ('tensorflow', 'keras', 'tf_keras', 'horovod')
JANUS_RUNTIME = ('janus.runtime',)  # janus's own trace-time helpers: called, never converted

# Library modules whose functions act on Python state, not on tensors.
LIBRARY_BLOCKLIST = (
    'tensorflow.python.framework.config',
    'tensorflow.python.framework.random_seed',
    'tensorflow.python.eager.context',
    'keras.src.utils.rng_utils',
    'keras.src.backend.common.global_state',
)

# Builtins that neither call user code nor touch Python state.
BUILTINS = frozenset(getattr(builtins, name) for name in (
    'len', 'range', 'isinstance', 'issubclass', 'min', 'max', 'abs', 'int', 'float',
    'bool', 'str', 'zip', 'enumerate', 'list', 'tuple', 'dict', 'sum', 'reversed',
    'any', 'all', 'round', 'divmod', 'pow', 'slice', 'set', 'frozenset', 'repr', 'format', 'sorted')
) | frozenset(f for f in vars(math).values() if isinstance(f, types.BuiltinFunctionType))

# Builtins that call a user function given as key=/default: refused when given one.
KEYED_BUILTINS = frozenset((builtins.min, builtins.max, builtins.sorted))

# Methods of builtin containers that only read them.
READ_ONLY_METHODS = frozenset((
    'get', 'items', 'keys', 'values', 'index', 'count', 'copy', 'format', 'join',
    'startswith', 'endswith', 'upper', 'lower', 'split', 'strip', '__getitem__'))

CONTAINER_TYPES = (list, dict, set, tuple, str)


def module_of(callee):
    """The module a callee's code lives in ('' when unknown)."""
    if isinstance(callee, types.MethodType):
        return getattr(callee.__func__, '__module__', '') or ''
    if isinstance(callee, (types.FunctionType, types.BuiltinFunctionType, type)):
        return getattr(callee, '__module__', '') or ''
    return getattr(type(callee), '__module__', '') or ''


def in_package(module, packages):
    return any(module == p or module.startswith(p + '.') for p in packages)


def is_library(callee):
    module = module_of(callee)
    if in_package(module, JANUS_RUNTIME):
        return True
    return in_package(module, LIBRARY_PREFIXES) and not in_package(module, LIBRARY_BLOCKLIST)


def is_library_object(value):
    return in_package(getattr(type(value), '__module__', '') or '', LIBRARY_PREFIXES)


def is_builtin_method(callee):
    return (isinstance(callee, types.BuiltinMethodType)
            and isinstance(getattr(callee, '__self__', None), CONTAINER_TYPES))


def is_namedtuple_class(callee):
    """collections.namedtuple classes: pure data, their constructor runs no user code."""
    return (isinstance(callee, type) and issubclass(callee, tuple)
            and hasattr(callee, '_fields') and '__init__' not in callee.__dict__
            and getattr(callee.__new__, '__module__', '').startswith('namedtuple_'))


def is_builtin_exception(callee):
    """Builtin exception classes: constructing one (to raise it) runs no user code."""
    return (isinstance(callee, type) and issubclass(callee, BaseException)
            and callee.__module__ == 'builtins')
