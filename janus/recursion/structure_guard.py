"""A recursion's structure encoded for each run, and that encoding as its guard.

Needs a ``schema.Schema`` its recursive function's trace settled
(``recursion/recursion.py``).  ``Encoder.encode`` walks, before each run, exactly the
schema's attributes from the call's root objects and packs one int64 table
``[rows, nodes]``: each node's class (-1 past the last node), per column each node's
value and kind (floats as their bits, a node as its index, None as -1), each node's
depth (``DEPTH_ROW``: a node's children are shallower) and the roots' indices last.

``StructureGuard`` (``STRUCTURE_MATCH``) is that walk as a guard, run on every replay:
a node of another class, a value of another kind, a property, a cycle or a structure
deeper than Python's recursion limit allows makes the call miss (the structure the
graph assumes is proved, never assumed).  The run's graph inputs read the guard's
encoding (``Encoder.now``).
"""
import dataclasses
import enum
import sys
import types
import typing

import numpy as np
import tensorflow as tf

from janus.guards import GuardKind, Miss
from janus.recursion.schema import (ABSENT, INT_BOUND, Kind, class_attribute, column_label,
                                    is_node_class, key_name, kind_of, tensor_spec)

DEPTH_ROW = -2   # the table's row of each node's depth (1 for a node with no node below it)
REACHED_ROW = -3   # 1 where the roots reach a node through the call columns (Encoder)


class Deeper(str):
    """A guard miss only because a structure is deeper than the levels a graph
    computes (``recursion_levels``): the next graph is built at once, computing more
    (no imperative call first: eager TF that deep may overflow the C stack)."""

    rebuild_now = True   # read by the cache-miss path (api.JanusFunction._decide)


class Encoder:
    """Packs the structures under one recursive function's roots for one run."""

    def __init__(self, schema, root_sources, max_depth=None, call_columns=None):
        self.types = tuple(schema.types)
        self.max_depth = max_depth   # deeper misses: the graph computes that many levels
        # the columns a recursive call descends through (None: every node counts as reached)
        self.call_columns = call_columns
        self.type_ids = {kind: i for i, kind in enumerate(self.types)}
        self.columns = [(c.name, c.row, c.kinds) for c in
                        sorted(schema.columns.values(), key=lambda c: c.row)]
        # per column, per node class: the kinds it may hold there, and its method
        self.by_class = [schema.columns[name].by_class for name, _, _ in self.columns]
        self.class_methods = [schema.columns[name].methods for name, _, _ in self.columns]
        # name -> (dtype, shape) of the tensor columns the graph reads (fed stacked)
        self.tensor_specs = {c.name: next(iter(c.specs)) for c in schema.columns.values()
                             if Kind.TENSOR in c.kinds and len(c.specs) == 1}
        self.rows = schema.rows + 3   # whether a call reaches it, its depth, the roots: last
        self.frames_per_level = schema.frames_per_level
        self.root_sources = list(root_sources)
        self._pending = None   # (roots, Encoded) the guard encoded for the run about to start

    def roots(self, arguments, memo):
        return [source.value(arguments, memo) for source in self.root_sources]

    def encode(self, roots, check_depth=True):
        """The ``Encoded`` structure, or a string saying why it does not fit.

        One pass over the nodes in discovery order (the roots first), each attribute
        read as ``cell`` reads it, through the readers of the node's class
        (``_Readers``: worked out once per class per call, so a class changed between
        calls is read as it is now)."""
        walk = _Walk(roots, len(self.columns), _Classifier(self.type_ids))
        while walk.position < len(walk.nodes):
            problem = self._read_node(walk)
            if problem is not None:
                return problem
            walk.position += 1
        depth = self._depths(walk.children, walk.forward)
        if isinstance(depth, str):
            return depth
        problem = self._depth_problem(depth, check_depth)
        if problem:
            return problem
        return Encoded(self._table(walk, depth, roots), self._stacks(walk.tensors,
                                                                     len(walk.nodes)))

    def _read_node(self, walk):
        """Reads the node at ``walk.position`` into the walk (its class, its cells, the
        nodes it leads to), or a string saying why it does not fit."""
        position, index, nodes, values = walk.position, walk.index, walk.nodes, walk.values
        obj = nodes[position]
        kind_of_obj = type(obj)
        key = (kind_of_obj, len(obj)) if kind_of_obj is list or kind_of_obj is tuple \
            else kind_of_obj
        read = walk.readers.get(key)
        if read is None:
            if key not in self.type_ids:
                return 'a node of class %s' % key_name(key)
            read = walk.readers[key] = _Readers(key, self.columns, walk.classify, self.by_class,
                                                self.class_methods)
        own = getattr(obj, '__dict__', None)
        plain = read.plain if own is not None else ()
        allowed, classify = read.allowed, walk.classify
        walk.classes.append(self.type_ids[key])
        mine = []
        for j, (name, _, _) in enumerate(self.columns):
            if j in plain and name in own:   # the common case, inline
                value = own[name]
                if value is None:
                    kind = Kind.NONE
                elif type(value) is bool:
                    kind = Kind.BOOL
                else:
                    kind, value = classify(value)
            else:
                kind, value = read.cell(j, obj, own)
            if kind not in allowed[j]:
                return '%s%s holds a %s' % (key_name(key), column_label(name), kind.name.lower())
            walk.tags[j].append(kind)
            if kind is Kind.NODE:
                target = index.get(id(value))
                if target is None:
                    target = index[id(value)] = len(nodes)
                    nodes.append(value)
                elif target <= position:
                    walk.forward = False
                mine.append((j, target))
                values[j].append(target)
            elif kind is Kind.NONE:
                values[j].append(-1)
            elif kind is Kind.INT or kind is Kind.BOOL:
                values[j].append(int(value))
            elif kind is Kind.FLOAT:
                values[j].append(float_bits(value))
            else:
                problem = self._other_cell(walk, j, key, name, kind, value, read)
                if problem:
                    return problem
        walk.children.append(mine)
        return None

    def _other_cell(self, walk, j, key, name, kind, value, read):
        """A tensor's, a method's or another kind's cell of column ``j`` (its value 0;
        a tensor kept for its column's stack), or a string saying why it does not fit."""
        if kind is Kind.TENSOR:
            if tensor_spec(value) != self.tensor_specs.get(name):
                return '%s%s holds a tensor %s%s' % ((key_name(key), column_label(name))
                                                    + tensor_spec(value))
            walk.tensors[j].append((walk.position, value))
        elif kind is Kind.METHOD and value is not read.methods[j]:
            return '%s.%s is another method' % (key_name(key), name)
        walk.values[j].append(0)
        return None

    def _table(self, walk, depth, roots):
        """The int64 table of a walk's nodes: class ids, cells, reach, depths, roots."""
        count = len(walk.nodes)
        table = np.zeros((self.rows, max(count, len(roots), 1)), np.int64)
        table[0, :] = -1   # columns past the nodes (as many as the roots) are no node
        table[0, :count] = walk.classes
        table[DEPTH_ROW, :count] = depth
        table[REACHED_ROW, :count] = self._reached(walk.children, len(set(map(id, roots))))
        for j, (_, row, _) in enumerate(self.columns):
            table[row, :count] = walk.values[j]
            table[row + 1, :count] = walk.tags[j]
        table[-1, :len(roots)] = [walk.index[id(root)] for root in roots]
        return table

    def _stacks(self, tensors, count):
        """Per tensor column, its nodes' tensors stacked (zeros where a node has none)."""
        stacks = {}
        for j, (name, _, _) in enumerate(self.columns):
            spec = self.tensor_specs.get(name)
            if spec is None:
                continue
            dtype, shape = spec
            if count == 0:
                stacks[name] = tf.zeros((0,) + shape, dtype)
                continue
            found = dict(tensors[j])
            zeros = None
            if len(found) < count:
                zeros = tf.zeros(shape, dtype)
            stacks[name] = tf.stack([found.get(i, zeros) for i in range(count)])
        return stacks

    def _reached(self, children, roots):
        """Per node, 1 where a recursive call may reach it: the roots (the first
        ``roots`` nodes), and what they reach through the call columns."""
        if self.call_columns is None:
            return 1
        calls = {j for j, (name, _, _) in enumerate(self.columns) if name in self.call_columns}
        reached = [0] * len(children)
        todo = list(range(roots))
        while todo:
            node = todo.pop()
            if reached[node]:
                continue
            reached[node] = 1
            todo.extend(target for j, target in children[node] if j in calls)
        return reached

    def _depths(self, children, forward):
        """Each node's depth (1 + its deepest child's, over every node column), or a
        string naming a cycle.  ``forward``: every edge leads to a later node (a tree,
        found breadth first): depths in one backward pass."""
        if not forward:
            return self._depths_searched(children)
        depth = [0] * len(children)
        for node in range(len(children) - 1, -1, -1):
            row = children[node]
            if row:
                depth[node] = 1 + max([depth[target] for _, target in row])
            else:
                depth[node] = 1
        return depth

    def _depth_problem(self, depth, check_depth=True):
        """A structure too deep for eager Python's recursion (eager raises
        RecursionError there; the graph would not)."""
        if not check_depth:
            return None
        deepest = max(depth, default=0)
        if self.max_depth is not None and deepest > self.max_depth:
            return Deeper('a structure %d nodes deep (the graph computes %d levels)' % (
                deepest, self.max_depth))
        room = sys.getrecursionlimit() - _stack_depth() - 50
        # Eagerly each level takes the frames of the functions it runs through (a->b->a:
        # two), and a comprehension may add one.
        if (self.frames_per_level + 1) * (deepest + 2) > room:
            return 'a structure %d nodes deep (eager Python may exceed its recursion limit)' \
                % deepest
        return None

    def _depths_searched(self, children):
        """Each node's depth by a depth-first search, or a string naming a cycle."""
        count = len(children)
        depth = [0] * count
        state = [0] * count   # 0 new, 1 on the path, 2 done
        for start in range(count):
            if state[start]:
                continue
            stack = [(start, 0)]
            state[start] = 1
            while stack:
                node, child = stack[-1]
                row = children[node]
                if child < len(row):
                    stack[-1] = (node, child + 1)
                    column, target = row[child]
                    if state[target] == 1:
                        return 'a cycle through .%s' % self.columns[column][0]
                    if state[target] == 0:
                        state[target] = 1
                        stack.append((target, 0))
                    continue
                stack.pop()
                state[node] = 2
                depth[node] = 1 + max((depth[target] for _, target in row), default=0)
        return depth

    def guard_check(self, arguments, memo):
        roots = self.roots(arguments, memo)
        encoded = self.encode(roots)
        if isinstance(encoded, str):
            return encoded
        self._pending = (roots, encoded)
        return None

    def now(self, arguments):
        """The ``Encoded`` structure of the run now starting: the guard's, which it just
        encoded (every graph input of the run reads it: no user code runs between)."""
        roots = self.roots(arguments, {})
        pending = self._pending
        if pending is not None and len(pending[0]) == len(roots) and all(
                a is b for a, b in zip(pending[0], roots)):
            return pending[1]
        encoded = self.encode(roots, check_depth=False)   # the guard checked the depth
        if isinstance(encoded, str):
            raise RuntimeError('janus: the structure changed after its guard: ' + encoded)
        self._pending = (roots, encoded)
        return encoded


@dataclasses.dataclass
class _Walk:
    """One encoding's pass over the nodes: what it found so far, per node and per column."""
    roots: list
    width: int
    classify: '_Classifier'
    index: dict = dataclasses.field(default_factory=dict)   # id(node) -> its index
    nodes: list = dataclasses.field(default_factory=list)   # in discovery order, roots first
    position: int = 0                                        # the node being read
    values: list = None     # per column: each node's cell value
    tags: list = None       # per column: each node's cell kind
    tensors: list = None    # per column: (node, tensor) pairs
    children: list = dataclasses.field(default_factory=list)   # per node: (column, child)
    classes: list = dataclasses.field(default_factory=list)    # per node: its class id
    readers: dict = dataclasses.field(default_factory=dict)    # class key -> _Readers
    forward: bool = True    # every node edge leads to a node found later (no cycle possible)

    def __post_init__(self):
        self.values = [[] for _ in range(self.width)]
        self.tags = [[] for _ in range(self.width)]
        self.tensors = [[] for _ in range(self.width)]
        for root in self.roots:
            if id(root) not in self.index:
                self.index[id(root)] = len(self.nodes)
                self.nodes.append(root)


class Encoded:
    """One run's encoded structure: the int64 table and the tensor columns' stacks."""

    def __init__(self, table, stacks):
        self.table, self.stacks = table, stacks
        self._tensor = None

    def deepest(self):
        """The depth of the deepest node (0: no node)."""
        return int(self.table[DEPTH_ROW].max(initial=0))

    def table_tensor(self):
        if self._tensor is None:
            self._tensor = tf.constant(self.table)
        return self._tensor


_NONE_CELL = (Kind.NONE, None)


def float_bits(value):
    """A float's IEEE bits as an int64 (how the table holds a float)."""
    return int(np.float64(value).view(np.int64))


class _Classifier:
    """``kind_of`` for one encoding: whether a class is a node class is worked out
    once per class (the node classes are the schema's; no user code runs between)."""

    def __init__(self, type_ids):
        self.type_ids = type_ids
        self.node_classes = {}

    def __call__(self, value):
        kind = type(value)
        if kind is int and -INT_BOUND < value < INT_BOUND:
            return Kind.INT, value
        if value is None:
            return _NONE_CELL
        if kind is list or kind is tuple:
            return Kind.NODE, value
        if kind in self.type_ids:
            known = self.node_classes.get(kind)
            if known is None:
                known = self.node_classes[kind] = is_node_class(kind)
            if known:
                return Kind.NODE, value
        return kind_of(value)


class _How(enum.Enum):
    """How a node class's column is read (``_Readers``)."""
    ITEM = 'item'     # an item of a list or tuple: ``obj[name]``
    FIXED = 'fixed'   # the same cell for every node of the class
    SLOT = 'slot'     # a ``__slots__`` entry, through its descriptor
    DICT = 'dict'     # the instance's ``__dict__``, else the class's value or a fixed cell


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """How one column of one node class is read."""
    how: _How
    name: typing.Any
    # FIXED: the cell; DICT: the cell where the instance lacks it (None: the class's value)
    cell: tuple = None
    found: typing.Any = None   # SLOT: the descriptor; DICT: the class's value
    owner: type = None         # SLOT: the class


class _Readers:
    """How ``cell`` reads each column of one node class, worked out from the class
    once: ``self.cell(j, obj, own)`` is ``cell(obj, name_j)`` (``own``: obj's
    __dict__); ``allowed[j]``: the kinds the class's nodes may hold there,
    ``methods[j]``: its method there."""

    __slots__ = ('plans', 'classify', 'plain', 'allowed', 'methods')

    def __init__(self, key, columns, classify, by_class, methods):
        self.classify = classify
        self.plans = [self._plan(key, name) for name, _, _ in columns]
        # columns read from the instance's __dict__ when there (no class data descriptor)
        self.plain = frozenset(j for j, plan in enumerate(self.plans) if plan.how is _How.DICT)
        self.allowed = [found.get(key, frozenset()) for found in by_class]
        self.methods = [found.get(key) for found in methods]

    def _plan(self, key, name):
        if type(key) is tuple:   # a list or tuple of a known length
            if type(name) is int:
                return _Plan(_How.ITEM, name) if name < key[1] else \
                    _Plan(_How.FIXED, name, (Kind.MISSING, None))
            return _Plan(_How.FIXED, name, (Kind.OTHER, None) if hasattr(key[0], name) else
                         (Kind.MISSING, None))
        if type(name) is int:
            return _Plan(_How.FIXED, name, (Kind.MISSING, None))
        found = class_attribute(key, name)
        if found is not ABSENT and hasattr(type(found), '__set__'):   # a data descriptor
            if type(found).__name__ != 'member_descriptor':
                return _Plan(_How.FIXED, name, (Kind.OTHER, None))
            return _Plan(_How.SLOT, name, found=found, owner=key)
        if found is ABSENT:
            return _Plan(_How.DICT, name, (Kind.MISSING, None))
        if type(found) is types.FunctionType:
            return _Plan(_How.DICT, name, (Kind.METHOD, found))
        if hasattr(type(found), '__get__'):
            return _Plan(_How.DICT, name, (Kind.OTHER, None))   # another descriptor
        return _Plan(_How.DICT, name, found=found)

    def cell(self, j, obj, own):
        plan = self.plans[j]
        how = plan.how
        if how is _How.ITEM:
            return self.classify(obj[plan.name])
        if how is _How.DICT:
            if own is not None and plan.name in own:
                return self.classify(own[plan.name])
            return plan.cell if plan.cell is not None else self.classify(plan.found)
        if how is _How.SLOT:
            try:
                return self.classify(plan.found.__get__(obj, plan.owner))
            except AttributeError:
                return Kind.MISSING, None
        return plan.cell


def _stack_depth():
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


class StructureGuard:
    """STRUCTURE_MATCH: the objects under a recursive function's roots are of the
    classes and value kinds its graph reads (``Encoder.encode``)."""

    kind = GuardKind.STRUCTURE_MATCH

    def __init__(self, encoder_of, label):
        self.encoder_of, self.label = encoder_of, label   # encoder_of(): the Encoder, once traced

    @property
    def encoder(self):
        return self.encoder_of()

    def check(self, arguments, memo):
        try:
            problem = self.encoder.guard_check(arguments, memo)
        except Exception as e:  # noqa: BLE001 - a root is gone: the guard fails
            problem = 'unreadable (%s)' % type(e).__name__
        if problem is None:
            return None
        return Miss(self.kind, 'the structure under %s' % self.label, self._expected(), problem)

    def _expected(self):
        return 'classes %s, attributes %s' % (
            '/'.join(key_name(t) for t in self.encoder.types),
            ', '.join('%s: %s' % (column_label(name),
                                  '|'.join(sorted(k.name.lower() for k in kinds)))
                      for name, _, kinds in self.encoder.columns))

    def __repr__(self):
        return 'STRUCTURE_MATCH(%s: %s)' % (self.label, self._expected())
