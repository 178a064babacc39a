"""If ops of a FunctionDef lowered to Switch/Merge, their branches inlined.

Used by ``graph/recursive_functions.py`` on the recursive functions it
registers (needs the branch functions in the eager context's library, where
tracing put them).  Why: a function run through ``Janus>Invoke`` is
instantiated by the function library runtime, which never lowers functional
control flow (only sessions and multi-device functions run TF's
``LowerFunctionalOpsPass``, and the multi-device call path costs more than it
saves here).  Left as an ``If``, every recursive call runs two functions (the
body, then the branch it takes), each with its own executor, arguments and
results; lowered, the taken side runs in the body's executor and the other is
dead.  This is what TF's lowering pass does to a ``tf.cond`` in a session: the
same ops, the same deadness semantics (an op of the side not taken never runs,
side effects included).

The transformation, per ``If``/``StatelessIf`` with a bool condition:
- ``Switch`` the condition and every input on the condition; a pivot per side
  (an ``Identity`` of the condition's switched copy) gates the side's ops that
  take no input, so they are dead when the side is not taken;
- each branch's nodes are copied in under a fresh prefix, its arguments read
  from the side's switch outputs;
- each output is a ``Merge`` of the two sides' results; a control edge on the
  ``If`` waits for a ``Merge`` of the sides' completions (each side's stateful
  nodes), as the ``If`` itself would.
Branches that contain ``If`` ops are lowered the same way once inlined.
"""
from __future__ import annotations
import typing
from tensorflow.core.framework import attr_value_pb2, function_pb2, types_pb2
from tensorflow.python.framework import op_def_registry

_IF_OPS = ('If', 'StatelessIf')
_MAX_LOWERED = 10000   # a runaway lowering (a branch that contains itself) stops here


class LoweringError(Exception):
    """The function could not be lowered (it is used as traced)."""


def lower_ifs(
        fdef: function_pb2.FunctionDef,
        find_function: typing.Callable[[str], typing.Any]) -> function_pb2.FunctionDef:
    """A copy of ``fdef`` with every ``If`` lowered, or ``fdef`` itself when it has
    none.  ``find_function(name)``: the FunctionDef of a branch."""
    if not any(_lowerable(node) for node in fdef.node_def):
        return fdef
    lowered = function_pb2.FunctionDef()
    lowered.CopyFrom(fdef)
    names = {node.name for node in lowered.node_def}
    for _ in range(_MAX_LOWERED):
        node = next((n for n in lowered.node_def if _lowerable(n)), None)
        if node is None:
            return lowered
        _lower_one(lowered, node, find_function, names)
    raise LoweringError('%s: too many If ops to lower' % fdef.signature.name)


def _lowerable(node: typing.Any) -> bool:
    return node.op in _IF_OPS and node.attr['Tcond'].type == types_pb2.DT_BOOL


def _lower_one(fdef: function_pb2.FunctionDef, node: typing.Any,
               find_function: typing.Callable[[str], typing.Any],
               names: set[str]) -> None:
    name = node.name
    data = [i for i in node.input if not i.startswith('^')]
    controls = [i for i in node.input if i.startswith('^')]
    pred, args = data[0], data[1:]
    types_in = list(node.attr['Tin'].list.type)
    types_out = list(node.attr['Tout'].list.type)
    if len(types_in) != len(args):
        raise LoweringError('%s: %d inputs for %d types' % (name, len(args), len(types_in)))
    prefix = _fresh(name + '/lowered', names)
    new = []
    switch_pred = _node(new, names, prefix + '/pred', 'Switch', [pred, pred] + controls,
                        T=types_pb2.DT_BOOL)
    pivots = {True: _node(new, names, prefix + '/pivot_t', 'Identity',
                          [switch_pred + ':output_true:0'], T=types_pb2.DT_BOOL),
              False: _node(new, names, prefix + '/pivot_f', 'Identity',
                           [switch_pred + ':output_false:0'], T=types_pb2.DT_BOOL)}
    switches = [_node(new, names, '%s/input_%d' % (prefix, i), 'Switch',
                      [arg, pred] + controls, T=dtype)
                for i, (arg, dtype) in enumerate(zip(args, types_in))]
    results, done = {}, {}
    for side, branch_attr, port in ((True, 'then_branch', 'output_true'),
                                    (False, 'else_branch', 'output_false')):
        branch = find_function(node.attr[branch_attr].func.name)
        if branch is None:
            raise LoweringError('%s: branch %s not found'
                                % (name, node.attr[branch_attr].func.name))
        inputs = ['%s:%s:0' % (s, port) for s in switches]
        results[side], done[side] = _inline(branch, prefix + ('/then' if side else '/else'),
                                            inputs, pivots[side], new, names)
        if len(results[side]) != len(types_out):
            raise LoweringError('%s: the branch gives %d outputs for %d types'
                                % (name, len(results[side]), len(types_out)))
    merges = [_node(new, names, '%s/output_%d' % (prefix, k), 'Merge',
                    [results[True][k], results[False][k]], T=dtype, N=2)
              for k, dtype in enumerate(types_out)]
    finished = {side: _node(new, names, prefix + ('/then_done' if side else '/else_done'),
                            'Identity', [pivots[side] + ':output:0']
                            + ['^' + d for d in done[side]], T=types_pb2.DT_BOOL)
                for side in (True, False)}
    executed = _node(new, names, prefix + '/executed', 'Merge',
                     [finished[True] + ':output:0', finished[False] + ':output:0'],
                     T=types_pb2.DT_BOOL, N=2)
    outputs = {'%s:output:%d' % (name, k): merge + ':output:0' for k, merge in enumerate(merges)}
    _replace_node(fdef, node, new, outputs, executed)


def _inline(branch: function_pb2.FunctionDef, prefix: str, inputs: typing.Sequence[str], pivot: str,
            new: list, names: set[str]) -> tuple[list[str], list[str]]:
    """Copies ``branch``'s nodes in: (its results as references, its stateful nodes)."""
    params = {arg.name: ref for arg, ref in zip(branch.signature.input_arg, inputs)}
    renamed = {}
    for node in branch.node_def:
        renamed[node.name] = _fresh('%s/%s' % (prefix, node.name), names)

    def remap(ref: str) -> str:
        if ref.startswith('^'):
            target = ref[1:]
            if target in params:   # (the switch itself is live on both sides: the pivot)
                return '^' + pivot
            return '^' + renamed[target]
        parts = ref.split(':')
        if len(parts) == 1:
            return params[ref]
        return ':'.join([renamed[parts[0]]] + parts[1:])

    stateful = []
    for node in branch.node_def:
        copy = new_node = _copy(node)
        copy.name = renamed[node.name]
        del copy.input[:]
        copy.input.extend(remap(i) for i in node.input)
        if not node.input:
            copy.input.append('^' + pivot)   # dead when this side is not taken
        new.append(new_node)
        if _is_stateful(node.op):
            stateful.append(copy.name)
    for target in branch.control_ret.values():
        if renamed[target] not in stateful:
            stateful.append(renamed[target])
    results = [remap(branch.ret[arg.name]) for arg in branch.signature.output_arg]
    return results, stateful


def _replace_node(fdef: function_pb2.FunctionDef, node: typing.Any, new: list,
                  outputs: typing.Mapping[str, str], executed: str) -> None:
    """``node`` out, ``new`` in; references to its outputs and to it as a control
    input now read the merges and the completion merge."""
    name = node.name
    kept = [_copy(n) for n in fdef.node_def if n.name != name]

    def remap(ref: str) -> str:
        if ref == '^' + name:
            return '^' + executed
        return outputs.get(ref, ref)

    for n in kept + new:
        if any(i == '^' + name or i in outputs for i in n.input):
            inputs = [remap(i) for i in n.input]
            del n.input[:]
            n.input.extend(inputs)
    for key in list(fdef.ret):
        fdef.ret[key] = remap(fdef.ret[key])
    for key in list(fdef.control_ret):
        if fdef.control_ret[key] == name:
            fdef.control_ret[key] = executed
    del fdef.node_def[:]
    fdef.node_def.extend(kept + new)
    for ref in outputs:
        if any(ref == i for n in fdef.node_def for i in n.input):
            raise LoweringError('%s: an output reference was left' % name)


def _node(new: list, names: set[str], name: str, op: str, inputs: typing.Sequence[str],
          **attrs: typing.Any) -> str:
    node = function_pb2.FunctionDef().node_def.add()
    node.name = _fresh(name, names)
    node.op = op
    node.input.extend(inputs)
    for key, value in attrs.items():
        if key == 'N':
            node.attr[key].CopyFrom(attr_value_pb2.AttrValue(i=value))
        else:
            node.attr[key].CopyFrom(attr_value_pb2.AttrValue(type=value))
    new.append(node)
    return node.name


def _copy(node: typing.Any) -> typing.Any:
    copy = function_pb2.FunctionDef().node_def.add()
    copy.CopyFrom(node)
    return copy


def _fresh(name: str, names: set[str]) -> str:
    candidate, k = name, 0
    while candidate in names:
        k += 1
        candidate = '%s_%d' % (name, k)
    names.add(candidate)
    return candidate


def _is_stateful(op: str) -> bool:
    """Stateful ops (and ops that are not registered: function calls) must finish
    before whatever waits on the If."""
    op_def = op_def_registry.get(op)
    return op_def is None or op_def.is_stateful
