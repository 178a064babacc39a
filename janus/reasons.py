"""Why janus did not use a graph, as data: ``Reason``, one member per kind of refusal,
each with its one piece of advice.  Needs nothing run before it, and imports nothing
from janus, so every module can import it.

Every refusal names a ``Reason`` (``errors.ConversionError(reason, context)``); the
context (the message) says what on which value, the reason says what kind of thing
stopped janus.  ``explain`` picks advice by the reason, never by reading the message.
``Reason.advice`` starts with ``fix: `` (something in the user's code to change) or
``nothing to change: `` (janus handles it; the user may still read why).
"""
from __future__ import annotations
import enum

FIX = 'fix: '
NOTHING = 'nothing to change: '


class Reason(enum.Enum):
    """A kind of refusal; ``advice`` is what to do about it (``fix: ...`` or
    ``nothing to change: ...``)."""

    def __new__(cls, change: bool, text: str) -> Reason:
        member = object.__new__(cls)
        member._value_ = len(cls.__members__) + 1
        # True: the user has something to change
        member.change = change   # type: ignore[attr-defined]
        member.advice = (FIX if change else NOTHING) + text   # type: ignore[attr-defined]
        return member

    # -- the arguments of a call (call_signature.UnsupportedArgument) -----------------
    NUMPY_ARGUMENT = (True, 'pass a tf.Tensor (tf.convert_to_tensor(value)) instead of the '
                            'NumPy value')
    SELF_CONTAINING_ARGUMENT = (True, 'pass a container that does not contain itself')
    DICT_KEY_ARGUMENT = (True, 'pass dicts whose keys are str or int constants')
    SYMBOLIC_ARGUMENT = (True, 'call it with eager tensors; inside a tf.function call the '
                               'undecorated function instead')

    # -- the function as a whole -------------------------------------------------------
    GENERATOR = (True, "decorate the function that does a step's tensor work, not the "
                       'generator: janus converts generators of yours consumed inside the '
                       'call; a coroutine, `yield from`, a `with` in a generator, or a '
                       'generator that leaves the call runs as plain Python')
    NO_SOURCE = (True, 'define the function with def in a .py file (janus converts what it '
                       'can read the source of)')
    SOURCE_CHANGED = (True, 'reload the module (or run the definition again) after changing '
                            'its file: janus converts what the file holds, and it no longer '
                            'holds this code')
    RECURSION = (True, 'write the recursion as a loop, or decorate a non-recursive function '
                       'that does the tensor work (janus unrolls only a recursion that Python '
                       'numbers decide, up to janus.config.max_recursion_unroll calls deep)')
    RECOMPILE_LIMIT = (True, 'keep the arguments that changed between calls the same, or '
                             'raise janus.config.recompile_limit')
    FAILED_TRACE_LIMIT = (True, 'fix the refusal the earlier traces reported (explain shows it), '
                                'or raise janus.config.failed_trace_limit')
    OUTSIDE_TAPE = (False, 'the statement using a GradientTape that records outside the '
                           'graph runs in Python (a graph break); the graphs around it are '
                           'recorded on the tape as eager ops are')
    CANNOT_SPLIT = (False, 'the function runs imperatively: janus cannot cut it at that '
                           'statement without changing what it means (the message says why)')
    LAYER_NOT_BUILT = (False, 'only this first call (the one that creates the variables) runs '
                              'imperatively; later calls convert')
    LAYER_FIRST_CALLED_IN_BRANCH = (False, 'the branch\'s outcome is assumed instead: a call '
                                           'that takes it runs imperatively and builds the '
                                           'layer, as eager code does')
    INTERNAL_ERROR = (False, 'a janus bug, not your code; the call ran as plain Python (please '
                             'report it with the traceback janus.explain shows)')
    TRACE_TOO_LONG = (True, 'tracing ran past janus.config.trace_seconds_limit (nested '
                            'tensor-dependent loops and branches over many iterations): the '
                            'function runs imperatively; make the loop a tf.while_loop over '
                            'tensors, or raise the limit')
    TRACE_FAILED = (True, 'this line fails when traced as a graph (the error above); keep it '
                          'to TF ops on tensors, or move it out of the janus function')
    ASSUMED_OUTCOME_BREAKS = (True, 'remove what stopped real control flow there (the '
                                    '"assumed instead" event says what), so janus can build '
                                    'tf.cond/tf.while_loop')
    NUMBER_VALUE_NEEDED = (False, 'janus builds a graph per value of these numbers, fine while '
                                  'they take few values; if they keep changing, the retraces '
                                  'show here with what to pass as a tensor')

    # -- statements the generator does not convert ----------------------------------
    TRY_STATEMENT = (True, 'the try statement runs in Python and the code in it in graphs (a '
                           'graph break): janus traces a try whose handlers catch only what '
                           'your own raise/assert statements raise; for one graph, raise it '
                           'from your code, or move the try/except out of the janus function, '
                           'around the call')
    MATCH_STATEMENT = (True, 'use if/elif instead of match')
    LAZY_WALRUS = (True, 'assign the name in a statement of its own, before the and/or, '
                         'conditional expression or assert message')
    TRACEBACK_READ = (False, 'a traceback shows the frames that ran (a graph\'s, or a graph '
                             'break\'s, are not eager\'s): the call runs imperatively, as '
                             'eagerly')
    INLINE_CLASS = (True, 'define the class at module level')
    INLINE_IMPORT = (True, 'import at module level')
    ZERO_ARGUMENT_SUPER = (True, 'call the parent method directly: Parent.method(self, ...)')
    DELETE = (True, 'set the attribute or item to None instead of deleting it')
    DECLARED_WRITE = (True, 'write it as its own statement: `name = value` or `name op= value`')
    COMPOUND_WRITE = (True, 'write it as its own plain statement (`obj.name = value`, '
                            '`x[k] = value`)')

    # -- state changes and checks --------------------------------------------------------
    CHECK_AFTER_STATE_CHANGE = (True, 'check the condition on the value before the state '
                                      'change (assert on x before v.assign(x)), or make that '
                                      'check after the janus function returns')
    STATE_CHANGE_AND_CHECK = (True, 'move the state change (assign, optimizer step) out of '
                                    'that loop or branch, after it')
    UNDOABLE_FAILURE = (True, 'draw from the iterator (or print with tf.print) before the janus '
                              'function and pass the value in, or keep the Python writes after '
                              'the op that can fail')
    STATE_DEPENDENT_JUMP = (True, 'compute the condition before the state change (read the '
                                  'variable first), or move return/break/continue out of that '
                                  'if/loop (set a flag and test it after)')
    RETURN_IN_DYNAMIC_CONTROL = (True, 'move return/break/continue out of that if/loop (set a '
                                       'result or flag and return after it), so janus can '
                                       'build tf.cond/tf.while_loop')
    WRITE_IN_DYNAMIC_CONTROL = (True, 'move the write out of that branch or loop (compute the '
                                      'value with tf.where/tf.cond, then write once), or keep '
                                      'the value in a tf.Variable and assign it')
    DISTRIBUTED_AGREEMENT = (True, 'make every assumption of a distributed step before its '
                                   'agreement (janus.library.distributed.agree)')

    # -- tensor-dependent control flow ------------------------------------------------
    BRANCH_TYPES = (True, 'assign the same names on both sides of the if, as tensors of one '
                          'dtype and structure (or select with tf.where)')
    BRANCH_CHANGES_PYTHON = (True, 'build a new list/dict on each side of the if (or change it '
                                   'after the if) instead of changing one in place inside it')
    BRANCH_GRADIENT_VARIABLES = (True, 'compute both sides and select with tf.where, or read '
                                       'the same variables on both sides of the if')
    CHOSEN_CONTAINER = (True, 'only append/extend/insert/update the container the if chose; '
                              'read it after the call (or on each side of the if)')
    LOOP_CARRY_TYPES = (True, 'carry only tensors and numbers through the loop, each keeping '
                              'its type and structure; build other values after the loop')
    PRINT_IN_DYNAMIC_LOOP = (True, 'print after the loop, or use tf.print inside it')
    PRINT_ORDER = (True, 'print with tf.print throughout, or with print throughout: janus '
                         'holds a print back until the run ends while tf.print prints during '
                         'it, so this tf.print runs in Python (a graph break) to keep the order')
    OUTSIDE_APPEND_IN_LOOP = (True, 'collect the values in a local list and append '
                                    'tf.stack(that_list) to the outside one after the loop (a '
                                    'list grown in a tensor-dependent loop is one tensor in a '
                                    'graph: its length is known only at run time)')
    GROWN_LIST = (True, 'combine the list with tf.stack/tf.concat/tf.add_n/tf.reduce_* after '
                        'the loop, or use a tf.TensorArray')
    TENSOR_IDENTITY = (True, 'store or compare values, not which tensor object a '
                             'tensor-dependent if or loop left (store tf.identity(x), or '
                             'decide with tf.where)')
    DYNAMIC_ITERATION = (True, 'loop over tf.range(n) (or a tensor of fixed length) with no '
                               'return/break/continue inside; set a flag and test it after')

    # -- values only the graph run has --------------------------------------------------
    NUMPY_IN_GRAPH = (True, 'keep values as tensors inside the function: print them with '
                            'tf.print(x) instead of print(x.numpy()), and call .numpy()/.item()/'
                            'float() on the result after the call returns (janus runs the '
                            'statement in Python, a graph break, and the code around it in '
                            'graphs)')
    NUMPY_ARRAY = (True, 'convert the NumPy array with tf.constant(a) (or tf.convert_to_tensor) '
                         'and compute on the tensor: janus feeds the array to the graph on '
                         'every call, but NumPy on it (arithmetic with other arrays or '
                         'numbers, its methods, truth, iteration, item writes) runs in Python '
                         '(a graph break)')
    TENSOR_KEY = (True, 'compare the tensors with `is` (janus keeps identity), or key the '
                        'cache outside the janus function')
    TENSOR_TYPE = (True, 'test isinstance(x, tf.Tensor) instead of type(x)')
    UNKNOWN_SHAPE = (True, 'use tf.shape(x) (a tensor) instead of x.shape where the size is '
                           'only known at run time, or pass tensors of fixed rank')
    BIG_INT = (True, 'keep Python ints within +-2**53, or use an int64 tensor')
    CHAINED_COMPARISON = (True, 'split the chained comparison into comparisons joined by '
                                '`and` (tf.logical_and for tensors)')
    FORMATTING = (True, 'format graph values only to print, return or store them (an '
                        'f-string); format other values outside the janus function')

    # -- values from outside the call ---------------------------------------------------
    OUTSIDE_VALUE = (True, 'pass that value in as an argument, or create it inside the '
                           'function')
    OUTSIDE_READ_AFTER_CHANGE = (True, 'read the value before the call changes it in place '
                                       '(keep what you need in a local), or change it after '
                                       'the janus function returns')
    SET_ORDER = (True, 'iterate over sorted(the_set) instead of the set itself (janus cannot '
                       'reproduce the order of its items)')
    NUMPY_GLOBAL = (True, 'keep that value in a tf.Variable, or pass it to the function as a '
                          'tensor')
    CUSTOM_ATTRIBUTE = (True, 'read the value into a plain attribute or a local first, or pass '
                              'it in as an argument')
    SPECIAL_METHODS = (True, 'turn the object into plain values (tensors, numbers, lists, '
                             'dicts) before the call and pass those in')
    LIBRARY_GETS_OBJECT = (True, 'pass plain values (tensors, numbers, lists) to library code, '
                                 'not your own object')
    PRINT_OF_OBJECT = (True, 'print tensors, numbers and strings (or use tf.print); print other '
                             'objects outside the janus function')
    PYTHON_RAISES = (False, 'Python raises there; the call runs imperatively and raises as '
                            'eager code does')

    # -- calls -------------------------------------------------------------------------
    UNCONVERTED_CALL = (True, 'call TF ops instead, or make that call before or after the '
                              'janus function and pass its result in')
    BUILTIN_ARGUMENTS = (True, 'drop key=/default= (sort (key, value) tuples instead), or use '
                               'tf.sort/tf.argmax on a tensor')
    CONTEXT_MANAGER = (True, 'enter that context manager outside the janus function, around '
                             'the call')
    TF_FUNCTION_RETRACE = (True, 'call the undecorated Python function, or pass tensors of '
                                 'known shape')
    VARIABLE_CREATION = (True, 'create variables outside the function (or in a Keras layer a '
                               'profiled call builds)')
    RETURN_VALUE = (True, 'return tensors, numbers and containers of them; create other '
                          'objects (tf.Variable, ...) outside the function')
    RANDOM_OPS = (True, 'use a tf.random.Generator or the stateless ops '
                        '(tf.random.stateless_uniform, ...)')
    LIBRARY_SIDE_EFFECT = (True, 'make that library call before or after the janus function '
                                 '(it changes Python state or writes output when traced)')

