"""Which names a scope binds and which it takes from outside, as Python's compiler decides.

Runs on a parsed gast tree.  Python makes a name local to a scope when the
scope binds it anywhere (parameter, assignment, loop target, import, def,
``match`` pattern, ``except ... as``); every other name a scope reads comes from
an enclosing scope or the module.  Three rules are easy to get wrong, and
every function here follows them:

* parts of a nested scope run in the *enclosing* one: a function's or lambda's
  defaults, annotations and decorators, a class's bases, a comprehension's
  first iterable (``enclosing_parts``);
* a walrus inside a comprehension binds in the nearest enclosing function,
  not in the comprehension;
* a class body does not enclose the functions in it: a method's free names
  pass through the class.

``symtable_disagreement`` checks these answers against Python's own
``symtable`` on a function, so a case this module misses is found, not
silently wrong (``graphgen/segments.py`` checks every function it cuts).
"""
from __future__ import annotations
import ast
import symtable
import typing

import gast

SCOPE_NODES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ListComp,
               gast.SetComp, gast.DictComp, gast.GeneratorExp, gast.ClassDef)
COMPREHENSIONS = (gast.ListComp, gast.SetComp, gast.DictComp, gast.GeneratorExp)
_FUNCTIONS = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)


def jumps_out(node: gast.AST, loops: int = 0) -> bool:
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


# -- which parts of a nested scope run where ---------------------------------------

def _all_args(args: gast.arguments) -> list[gast.AST]:
    return (list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs)
            + [a for a in (args.vararg, args.kwarg) if a is not None])


def enclosing_parts(node: gast.AST) -> list[gast.AST]:
    """The expressions of a nested scope ``node`` that run in the scope around it."""
    if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef)):
        annotations = [a.annotation for a in _all_args(node.args)] + [node.returns]
        return (list(node.decorator_list) + list(node.args.defaults)
                + [d for d in node.args.kw_defaults if d is not None]
                + [a for a in annotations if a is not None])
    if isinstance(node, gast.Lambda):
        return list(node.args.defaults) + [d for d in node.args.kw_defaults if d is not None]
    if isinstance(node, COMPREHENSIONS):
        return [node.generators[0].iter]
    if isinstance(node, gast.ClassDef):
        return list(node.decorator_list) + list(node.bases) + [k.value for k in node.keywords]
    raise TypeError('not a scope: %r' % (node,))


def inner_parts(node: gast.AST) -> list[gast.AST]:
    """The parts of a nested scope ``node`` that run in its own scope."""
    if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
        return list(node.body)
    if isinstance(node, gast.Lambda):
        return [node.body]
    if isinstance(node, COMPREHENSIONS):
        first, *rest = node.generators
        elts = [node.key, node.value] if isinstance(node, gast.DictComp) else [node.elt]
        return elts + [first.target] + list(first.ifs) + list(rest)
    raise TypeError('not a scope: %r' % (node,))


def walk_scope(nodes: typing.Sequence[gast.AST]) -> typing.Iterator[gast.AST]:
    """Every node under ``nodes`` that runs in their scope.  A nested scope's node is
    yielded, its ``enclosing_parts`` walked, its ``inner_parts`` not."""
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, SCOPE_NODES):
            stack.extend(reversed(enclosing_parts(node)))
        else:
            stack.extend(reversed(list(gast.iter_child_nodes(node))))


# -- what one node binds --------------------------------------------------------------

def pattern_names(node: gast.AST) -> set[str]:
    """Names a ``match`` pattern node binds itself (capture, star, mapping rest)."""
    if isinstance(node, (gast.MatchAs, gast.MatchStar)) and node.name is not None:
        return {node.name}
    if isinstance(node, gast.MatchMapping) and node.rest is not None:
        return {node.rest}
    return set()


def names_bound_by(node: gast.AST) -> set[str]:
    """Names ``node`` itself binds in the scope it runs in (not counting its children)."""
    if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Store, gast.Del)):
        return {node.id}
    if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
        return {node.name}
    if isinstance(node, (gast.Import, gast.ImportFrom)):
        return {(a.asname or a.name).split('.')[0] for a in node.names}
    if isinstance(node, COMPREHENSIONS):
        return comprehension_walrus_targets(node)
    return pattern_names(node)


def comprehension_walrus_targets(comprehension: gast.AST) -> set[str]:
    """``(y := ...)`` in a comprehension (or one nested in it) binds ``y`` in the
    enclosing function."""
    found = set()
    for node in walk_scope(inner_parts(comprehension)):
        if isinstance(node, gast.NamedExpr):
            found.add(node.target.id)
        elif isinstance(node, COMPREHENSIONS):
            found |= comprehension_walrus_targets(node)
    return found


def declared(scope_nodes: typing.Sequence[gast.AST]) -> tuple[set[str], set[str]]:
    """Names declared ``global`` and ``nonlocal`` among ``scope_nodes`` (one scope)."""
    glob, nonloc = set(), set()
    for node in walk_scope(scope_nodes):
        if isinstance(node, gast.Global):
            glob |= set(node.names)
        elif isinstance(node, gast.Nonlocal):
            nonloc |= set(node.names)
    return glob, nonloc


def parameters(scope: gast.AST) -> set[str]:
    if isinstance(scope, _FUNCTIONS):
        return {a.id for a in _all_args(scope.args)}
    return set()


# -- a scope's locals and free names ------------------------------------------------

def bound_names(scope: gast.AST) -> set[str]:
    """The names ``scope`` binds: its locals, and the names it declares ``global`` or
    ``nonlocal`` and assigns (callers that need locals only subtract ``declared``)."""
    names = parameters(scope)
    own = inner_parts(scope) if not isinstance(scope, gast.Module) else list(scope.body)
    walrus = isinstance(scope, COMPREHENSIONS)
    for node in walk_scope(own):
        names |= names_bound_by(node)
    if walrus:   # its walrus targets are the enclosing function's
        names -= comprehension_walrus_targets(scope)
    return names


def local_names(scope: gast.AST) -> set[str]:
    """The scope's locals as Python's compiler decides them."""
    glob, nonloc = declared(inner_parts(scope))
    return bound_names(scope) - glob - nonloc


def free_names(scope: gast.AST) -> set[str]:
    """The names a nested ``scope`` refers to that are neither its locals nor declared
    ``global`` in it: they come from the enclosing scopes (or, where no enclosing
    function binds them, the module)."""
    glob, nonloc = declared(inner_parts(scope))
    own = bound_names(scope) - glob - nonloc
    refs, passed = set(), set()
    for node in walk_scope(inner_parts(scope)):
        if isinstance(node, gast.Name):
            refs.add(node.id)
        elif isinstance(node, SCOPE_NODES):
            passed |= free_names(node)
        refs |= pattern_names(node)
    refs |= nonloc
    if isinstance(scope, gast.ClassDef):
        # methods see past the class body: their free names are not the class's names
        return (refs - own - glob) | passed
    return (refs | passed) - own - glob


def loaded_names(nodes: typing.Sequence[gast.AST]) -> set[str]:
    """Names loaded in the scope of ``nodes`` itself (not in nested scopes)."""
    return {n.id for n in walk_scope(nodes)
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load)}


def nested_scopes(nodes: typing.Sequence[gast.AST]) -> list[gast.AST]:
    """The nested scopes directly under ``nodes`` (not those inside them)."""
    return [n for n in walk_scope(nodes) if isinstance(n, SCOPE_NODES)]


# -- checked against Python's own symtable ------------------------------------------

_SYMTABLE_NAME = {gast.Lambda: 'lambda', gast.ListComp: 'listcomp', gast.SetComp: 'setcomp',
                  gast.DictComp: 'dictcomp', gast.GeneratorExp: 'genexpr'}


def _scope_key(node: gast.AST) -> tuple[str, int]:
    name = _SYMTABLE_NAME.get(type(node)) or node.name
    return name, node.lineno


def symtable_disagreement(fn_node: gast.AST) -> str | None:
    """None when janus's answers for the gast function ``fn_node`` equal Python's
    ``symtable`` (its locals, the names it loads itself, and each nested scope's names
    taken from it); else a sentence naming the first difference.

    The function is unparsed and parsed again, so both analyses see one text with one
    numbering of lines (the tree may be janus's own, with no source).  Its ``nonlocal``
    names are parameters of a function around it."""
    # Inside a function binding every name declared ``nonlocal`` in it (a closure's
    # ``nonlocal count`` needs one), as where it was defined.
    outer = sorted({name for node in gast.walk(fn_node) if isinstance(node, gast.Nonlocal)
                    for name in node.names})
    wrapper = gast.FunctionDef('__janus_scope', gast.arguments(
        [gast.Name(n, gast.Param(), None, None) for n in outer], [], None, [], [], None, []),
        [fn_node], [], None, None, [])
    source = ast.unparse(ast.fix_missing_locations(gast.gast_to_ast(gast.Module([wrapper], []))))
    fn_node = gast.parse(source).body[0].body[0]
    table = symtable.symtable(source, '<janus>', 'exec').get_children()[0].get_children()[0]
    ours = local_names(fn_node)
    theirs = set(table.get_locals())   # type: ignore[attr-defined]
    if ours != theirs:
        return 'locals: janus %s, Python %s' % (sorted(ours), sorted(theirs))
    ours = loaded_names(inner_parts(fn_node))
    theirs = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    if ours != theirs:
        return 'names read: janus %s, Python %s' % (sorted(ours), sorted(theirs))
    fn_locals = set(table.get_locals())   # type: ignore[attr-defined]
    janus_free, python_free = {}, {}
    for node in nested_scopes(inner_parts(fn_node)):
        janus_free.setdefault(_scope_key(node), set()).update(free_names(node) & fn_locals)
    for child in table.get_children():
        python_free.setdefault((child.get_name(), child.get_lineno()), set()).update(
            s.get_name() for s in child.get_symbols() if s.is_free()
            and s.get_name() in fn_locals)
    if janus_free != python_free:
        return 'names nested scopes take: janus %s, Python %s' % (
            sorted((k, sorted(v)) for k, v in janus_free.items()),
            sorted((k, sorted(v)) for k, v in python_free.items()))
    return None
