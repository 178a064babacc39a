"""What a graph op does outside the graph, read off the op's own definition.

Needs nothing but TensorFlow; the tracer's deferred-update rule asks
``effect(op)`` about every op it must order.  The rule, instead of a
hand-written list of op types that silently misses new ones:

* an op **changes state** if TF registers it as stateful and it takes a
  resource input (variables, random generator state, dataset iterators,
  hash tables, queues, summary writers, ...), or if it is a known output
  side effect without a resource (printing, writing files, ``py_function``);
* except the explicit list of stateful *reads* of a resource below;
* stateful random ops that take no resource draw from TF's per-op seeded
  stream, which a graph does not share with eager execution: refused.

Ops that run other graphs (``If``, ``While``, calls) are judged by what they
contain (``changes_state``; the tracer has its own walk that also finds
assertions).  Shared by the tracer (``graphgen/effects.py`` re-exports it) and
the runtime, which makes a test that depends on a state change made earlier
in the same call real control flow (``control/``).
"""
from __future__ import annotations
import enum
import weakref
import typing

import tensorflow as tf
from tensorflow.python.data.ops import options as options_lib
from tensorflow.python.ops import gen_dataset_ops

from janus.graph import ops
from janus.graph import recursive_functions


class Effect(enum.Enum):
    NONE = 'none'                          # pure, or only reads state
    CHANGE = 'change'                      # changes state outside the graph
    UNREPRODUCIBLE = 'unreproducible'      # a random stream eager does not share


# Stateful ops with a resource input that only read the resource.  Keep this
# list short and explicit: anything missing is treated as a change, which at
# worst defers a read behind the assertions (or refuses an assumption that
# depends on it), never lets a change escape them.
_PURE_READS = frozenset((
    'ReadVariableOp', 'ReadVariableXlaSplitND',       # a variable's value
    'ResourceGather', 'ResourceGatherNd',             # rows of a variable (embedding lookups)
    'VariableShape', 'VarIsInitializedOp',            # a variable's metadata
    'LookupTableFindV2', 'LookupTableSizeV2', 'LookupTableExportV2',   # hash table reads
    'TensorArrayReadV3', 'TensorArrayGatherV3', 'TensorArraySizeV3',   # TF1 TensorArray reads
    'QueueSizeV2', 'QueueIsClosedV2',                 # queue metadata
    'IteratorToStringHandle', 'IteratorGetDevice',    # iterator metadata (not get_next)
    # A recursive graph function's call: recursion/recursion.py refuses a body that
    # changes state, so it only reads the variables it is given (its checks are
    # found through its body, ``called_graphs``, once built).
    'Janus>Invoke',
))

# Stateful ops without a resource whose effect is output: they must also wait
# for every assertion (a run whose assumption broke must not have printed).
PRINT_OPS = frozenset(('PrintV2', 'Print'))   # tf.print: prints while the graph runs

_OUTPUT_EFFECTS = frozenset((
    'PrintV2', 'Print',                               # tf.print
    'WriteFile', 'Save', 'SaveV2', 'SaveSlices', 'MergeV2Checkpoints',
    'DatasetToTFRecord', 'ExperimentalDatasetToTFRecord', 'SaveDataset', 'SaveDatasetV2',
    'PyFunc', 'EagerPyFunc',                          # tf.py_function / numpy_function: any Python
))

# Stateful random ops seeded by the global/op seed (tf.random.uniform, normal,
# truncated_normal, shuffle, categorical, gamma, poisson, ...): the kernel
# keeps its own stream per graph op, so a graph draws other numbers than eager
# execution does, and a fallback's re-run draws again.
UNREPRODUCIBLE_RANDOM = frozenset((
    'RandomUniform', 'RandomUniformInt', 'RandomStandardNormal', 'TruncatedNormal',
    'ParameterizedTruncatedNormal', 'RandomShuffle', 'Multinomial', 'RandomGamma',
    'RandomPoisson', 'RandomPoissonV2', 'RandomCrop', 'NonDeterministicInts',
    'SampleDistortedBoundingBox', 'SampleDistortedBoundingBoxV2',
    'AllCandidateSampler', 'FixedUnigramCandidateSampler', 'LearnedUnigramCandidateSampler',
    'LogUniformCandidateSampler', 'ThreadUnsafeUnigramCandidateSampler',
    'UniformCandidateSampler',
))

# Ops that call a function body the tracer may not find (then: assume a change).
CALL_OPS = frozenset(('StatefulPartitionedCall', 'PartitionedCall'))


def effect(op: tf.Operation) -> Effect:
    """The ``Effect`` of one op (not of the graphs it calls)."""
    if op.type in UNREPRODUCIBLE_RANDOM:
        return Effect.UNREPRODUCIBLE
    if op.type == 'LookupTableInsertV2' and ops.SCRATCH_ATTR in op.node_def.attr:
        return Effect.NONE   # janus's own scratch (a recursion's kept outputs)
    if op.type in _OUTPUT_EFFECTS:
        return Effect.CHANGE
    if not op._is_stateful or op.type in _PURE_READS:
        return Effect.NONE
    resources = [t for t in op.inputs if t.dtype == tf.resource]
    if resources and not all(map(is_run_local, resources)):
        return Effect.CHANGE
    return Effect.NONE


# Resources a graph makes for one run (the iterator of a ``for x in ds`` loop): what an
# op does to one is gone when the run ends, so it changes nothing outside the graph.
_RUN_LOCAL_RESOURCES = frozenset(('AnonymousIterator', 'AnonymousIteratorV2',
                                  'AnonymousIteratorV3', 'AnonymousMultiDeviceIterator',
                                  'AnonymousMultiDeviceIteratorV3', 'AnonymousSeedGenerator',
                                  'DummySeedGenerator', 'AnonymousRandomSeedGenerator'))


def is_run_local(resource: tf.Tensor) -> bool:
    """Whether the resource tensor ``resource`` is made by its own graph for one run
    (seen through ``Identity``, and from a loop body or branch to the tensor it
    captured; a function's input is not: it comes from outside)."""
    while True:
        if hasattr(resource, 'numpy'):
            return False   # an eager handle: a variable or an iterator from outside
        if resource.op.type == 'Identity' and resource.op.inputs:
            resource = resource.op.inputs[0]
        elif resource.op.type == 'Placeholder' and _captured(resource) is not None:
            resource = _captured(resource)
        else:
            return resource.op.type in _RUN_LOCAL_RESOURCES


# On a graph being traced: {name of a check: name of the pull it tests}.  A pull from an
# iterator from outside (``next(it)``, a loop's first element) changes it for good,
# but one that found no element changed nothing: the check that it found one may run
# after it (``graphgen/tracer.defer_state_updates`` verifies the rest).
PULL_CHECKS = '_janus_pull_checks'


def record_pull_check(check_op: tf.Operation, pull_op: tf.Operation) -> None:
    """Marks ``check_op`` as the test that the outside pull ``pull_op`` found an element."""
    graph = check_op.graph
    checks = getattr(graph, PULL_CHECKS, None)
    if checks is None:
        checks = {}
        setattr(graph, PULL_CHECKS, checks)
    checks[check_op.name] = pull_op.name


# On a graph being traced: names of pulls from outside iterators made before any Python
# write or print of the call.  If one fails (an error in the dataset's pipeline), the
# graph's error is eager's ``next()`` error, with the iterator where eager leaves it
# and no Python write missing: ``graphgen/rollback.plan`` need not undo anything.
CLEAN_PULLS = '_janus_clean_pulls'


def record_clean_pull(pull_op: tf.Operation) -> None:
    names = getattr(pull_op.graph, CLEAN_PULLS, None)
    if names is None:
        names = set()
        setattr(pull_op.graph, CLEAN_PULLS, names)
    names.add(pull_op.name)


# On a top graph being traced: True once the call pulls from an iterator from outside
# (``control/datasets.py``): the tracer then orders the graph's state changes
# and the ops that may fail after one as the program does (``tracer._in_program_order``).
PULLS_OUTSIDE = '_janus_pulls_outside'


_PULL_OPS = frozenset(('IteratorGetNext', 'IteratorGetNextAsOptional', 'IteratorGetNextSync',
                       'MultiDeviceIteratorGetNextFromShard'))


def pulls_outside(graph: tf.Graph, depth: int = 0) -> bool:
    """Whether ``graph`` (or a graph it runs) pulls from an iterator that is not its
    run's own: one passed in or held by an object, however many handles reach it."""
    for op in graph.get_operations():
        if op.type in _PULL_OPS and op.inputs and not is_run_local(op.inputs[0]):
            return True
        if depth < 8 and any(pulls_outside(inner, depth + 1) for inner in called_graphs(op)):
            return True
    return False


def outside_iterator(iterator: typing.Any) -> bool:
    """Whether pulling from the tf.data ``iterator`` changes state outside its graph."""
    return not is_run_local(iterator._iterator_resource)


def outside_pull(optional_variant: tf.Tensor) -> tf.Operation | None:
    """The ``IteratorGetNextAsOptional`` op that made ``optional_variant``, when it
    pulls from an iterator not made by its own graph for this run; else None."""
    op = optional_variant.op
    if op.type != 'IteratorGetNextAsOptional' or is_run_local(op.inputs[0]):
        return None
    return op


def _captured(placeholder: tf.Tensor) -> tf.Tensor | None:
    """The outer tensor a function graph's input captured, or None (an argument)."""
    captures = getattr(placeholder.graph, 'captures', None)
    if not captures:
        return None
    for outer, inner in captures:
        if inner is placeholder:
            return outer
    return None


def unreproducible_reason(op: tf.Operation) -> str:
    return ('the function draws random numbers with %s (tf.random.uniform/normal/shuffle/'
            'categorical..., seeded by the global and op seed): a graph keeps its own stream '
            'for that op and would draw other numbers than eager execution' % op.type)


_FUNCTION_ATTRS = ('then_branch', 'else_branch', 'cond', 'body', 'f', 'branches')


# op type -> those of _FUNCTION_ATTRS its ops have (its OpDef's, which have no defaults):
# asking an op for an attribute it lacks raises, which cost most of a trace's time when
# every op of every nested branch graph was asked for all six.
_FUNCTION_ATTRS_OF = {}


def called_graphs(op: tf.Operation) -> list[tf.Graph]:
    """The function bodies an op runs (tf.cond branches, tf.while_loop cond/body, calls)."""
    attrs = _FUNCTION_ATTRS_OF.get(op.type)
    if attrs is None:
        if len(_FUNCTION_ATTRS_OF) > 4096:   # (a function called by name is an op type)
            _FUNCTION_ATTRS_OF.clear()
        present = op.node_def.attr
        attrs = _FUNCTION_ATTRS_OF[op.type] = tuple(a for a in _FUNCTION_ATTRS if a in present)
    graphs = []
    for attr in attrs:
        try:
            value = op.get_attr(attr)
        except (ValueError, TypeError):
            continue
        for fn in value if isinstance(value, list) else [value]:
            name = getattr(fn, 'name', None)
            found = op.graph._get_function(name) if name else None
            if found is not None and getattr(found, 'graph', None) is not None:
                graphs.append(found.graph)
            elif name and op.type == ops.INVOKE_OP:   # a recursive graph function, by name
                recursive = recursive_functions.graph_of(name)
                if recursive is not None:
                    graphs.append(recursive)
    return graphs


# tf.cond/while/call ops -> whether what they run changes state, kept across calls of
# changes_state: nested branch graphs are asked again at every enclosing if's join, which
# made a trace quadratic in the nesting.
_RUNS_A_CHANGE = weakref.WeakKeyDictionary()


def changes_state(op: tf.Operation, memo: dict | None = None) -> bool:
    """Whether ``op``, or a graph it runs, changes state (``Effect.CHANGE``).

    A random op eager does not share (``UNREPRODUCIBLE``) is not a change here;
    the tracer refuses it on its own."""
    memo = {} if memo is None else memo
    if op in memo:
        return memo[op]
    known = _RUNS_A_CHANGE.get(op)
    if known is not None:
        return known
    memo[op] = False
    called = called_graphs(op)
    if called:
        found = any(changes_state(inner, memo) for graph in called
                    for inner in graph.get_operations())
        _RUNS_A_CHANGE[op] = found   # its graphs were complete before it was made
    elif op.type in CALL_OPS:
        found = True   # a call we cannot look into: assume it changes state
    else:
        found = effect(op) is Effect.CHANGE
    memo[op] = found
    return found


# Dataset ops that keep state from one iterator to the next (a shuffle that reshuffles
# each epoch, a memory cache): a run that fails after making an iterator over such
# an outside dataset has advanced it, and an imperative re-run would advance it again.
_STATE_ATTRS = ('reshuffle_each_iteration', 'rerandomize_each_iteration')
_keeps_state = weakref.WeakKeyDictionary()


def dataset_keeps_state(dataset: tf.data.Dataset) -> bool:
    """Whether iterating the eager ``dataset`` changes state outside it: a function
    in it changes a variable or draws random numbers, a shuffle reshuffles per
    iterator, or a cache fills."""
    try:
        return _keeps_state[dataset]
    except (KeyError, TypeError):
        pass
    found = variant_keeps_state(dataset._variant_tensor)
    try:
        _keeps_state[dataset] = found
    except TypeError:
        pass
    return found


def variant_keeps_state(variant: tf.Tensor) -> bool:
    """``dataset_keeps_state`` of the dataset an eager variant tensor holds."""
    try:
        with tf.init_scope():   # eagerly, also while a graph is being traced
            serialized = gen_dataset_ops.dataset_to_graph_v2(
                variant, external_state_policy=options_lib.ExternalStatePolicy.FAIL.value)
            graph = tf.compat.v1.GraphDef()
            graph.ParseFromString(serialized.numpy())
    except Exception:  # noqa: BLE001 - a stateful function in it, or janus cannot tell
        return True
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    return any(node.op.startswith('CacheDataset') or any(
        attr in node.attr and node.attr[attr].b for attr in _STATE_ATTRS) for node in nodes)
