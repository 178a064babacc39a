"""Which names a scope binds, so free names (globals, closure cells) can be told apart.

Runs on a parsed gast tree.  Python makes a name local to a scope when the
scope binds it anywhere (parameter, assignment, loop target, import, def);
every other name a scope reads comes from an enclosing scope or the module.
"""
import gast

SCOPE_NODES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ListComp,
               gast.SetComp, gast.DictComp, gast.GeneratorExp, gast.ClassDef)


def jumps_out(node, loops=0):
    """Whether ``node`` may leave the statements around it: a ``return``, or a
    ``break``/``continue`` of a loop outside it (``loops``: the loops entered below
    the statement; nested functions and classes aside)."""
    if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)):
        return False
    if isinstance(node, gast.Return):
        return True
    if isinstance(node, (gast.Break, gast.Continue)):
        return loops == 0
    if isinstance(node, (gast.For, gast.While)):
        return (any(jumps_out(s, loops + 1) for s in node.body)
                or any(jumps_out(s, loops) for s in node.orelse))
    return any(jumps_out(child, loops) for child in gast.iter_child_nodes(node))


def _arg_names(args):
    names = set()
    for arg in list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs):
        names.add(arg.id)
    for arg in (args.vararg, args.kwarg):
        if arg is not None:
            names.add(arg.id)
    return names


def _own_children(node):
    """Child nodes that belong to ``node``'s scope (nested scopes not entered)."""
    if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef)):
        return list(node.body)
    if isinstance(node, gast.Lambda):
        return [node.body]
    if isinstance(node, (gast.ListComp, gast.SetComp, gast.GeneratorExp)):
        return [node.elt] + list(node.generators)
    if isinstance(node, gast.DictComp):
        return [node.key, node.value] + list(node.generators)
    return list(node.body)


def bound_names(scope):
    """The names ``scope`` binds (its locals)."""
    names = set()
    if not isinstance(scope, gast.ClassDef):
        names |= _arg_names(scope.args) if hasattr(scope, 'args') else set()
    stack = _own_children(scope)
    while stack:
        node = stack.pop()
        if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Store, gast.Del)):
            names.add(node.id)
        elif isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
            names.add(node.name)
            stack.extend(node.decorator_list)
            continue
        elif isinstance(node, (gast.Import, gast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split('.')[0])
        elif isinstance(node, gast.alias):
            continue
        if isinstance(node, SCOPE_NODES) and node is not scope:
            if isinstance(node, gast.Lambda):
                stack.extend(node.args.defaults)
            elif hasattr(node, 'generators'):
                stack.append(node.generators[0].iter)  # evaluated in this scope
            continue
        stack.extend(gast.iter_child_nodes(node))
    return names
