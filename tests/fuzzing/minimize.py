"""Delta debugging: shrink a diverging program while it diverges the same way.

"The same way" is ``Divergence.signature``: the kind; the exception types
(for a janus error: its type and the janus function that raised it); for a
state or identity divergence, the module-level name under which it shows.
Passes, repeated until nothing shrinks or the budget is spent:

1. the call sequence: everything after the diverging step, then chunks of
   steps (halves, quarters, ..., single steps);
2. return values: drop elements of a returned tuple/list/dict;
3. statements, anywhere in the module (functions, classes, branches, loop
   bodies): delete one (an emptied block gets ``pass``), outermost first;
4. compound statements: replace ``if``/``for``/``while``/``with``/``try`` by
   one of its bodies;
5. parameters: drop one from the called function and its argument from every
   call.

Each candidate is a full differential run (``runner.run_program``), so the
result is a program that still diverges, not just one that still parses.
"""
import ast
import copy
import time

from . import runner


class _Budget:
    def __init__(self, seconds, trials):
        self.deadline = time.time() + seconds
        self.trials = trials
        self.used = 0

    def left(self):
        return self.used < self.trials and time.time() < self.deadline


def signature(divergence):
    return divergence.signature


def minimize(program, divergence, seconds=60.0, trials=300, time_limit=30, log=None):
    """A smaller program with the same divergence signature, and its divergence."""
    want = signature(divergence)
    budget = _Budget(seconds, trials)
    best = [program, divergence]
    # A candidate may not raise eagerly on more calls than the original did (up to
    # its divergence): deleting a definition must not turn the repro into a program
    # that fails with NameError everywhere and happens to diverge the same way.
    baseline = runner.run_program(program, time_limit=time_limit)
    allowed = baseline.eager_raised

    def test(candidate):
        if not budget.left():
            return False
        budget.used += 1
        try:
            result = runner.run_program(candidate, time_limit=time_limit)
        except Exception:  # noqa: BLE001 - a candidate that breaks the runner is no repro
            return False
        d = result.divergence
        if d is not None and signature(d) == want and result.eager_raised <= allowed:
            best[0], best[1] = candidate, d
            if log:
                log('  minimize: %d lines, %d steps' % (candidate.source.count('\n'),
                                                         len(candidate.steps)))
            return True
        return False

    # normalize the source once (ast.unparse); keep the original if that changes anything
    try:
        normalized = program.replace(source=ast.unparse(ast.parse(program.source)) + '\n')
        if normalized.source != program.source:
            test(normalized)
    except SyntaxError:
        pass
    # steps after the divergence are irrelevant
    if 0 <= divergence.step < len(best[0].steps) - 1:
        test(best[0].replace(steps=best[0].steps[:divergence.step + 1]))

    changed = True
    while changed and budget.left():
        changed = False
        changed |= _shrink_steps(best, test, budget)
        changed |= _shrink_returns(best, test, budget)
        changed |= _shrink_statements(best, test, budget)
        changed |= _hoist_blocks(best, test, budget)
        changed |= _shrink_params(best, test, budget)
    return best[0], best[1]


def _shrink_params(best, test, budget):
    """Drops a parameter of the called function and its argument in every call."""
    changed = False
    k = 0
    while budget.left():
        program = best[0]
        targets = {s[1] for s in program.steps if s[0] == 'call'}
        if len(targets) != 1:
            return changed
        name = targets.pop().split('.')[-1]
        tree = ast.parse(program.source)
        defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
        if len(defs) != 1:
            return changed
        fn = defs[0]
        params = fn.args.args
        offset = 1 if params and params[0].arg == 'self' else 0
        if k + offset >= len(params):
            return changed
        pname = params[k + offset].arg
        if fn.args.defaults or fn.args.vararg or fn.args.kwarg:
            return changed
        del params[k + offset]
        source = _unparse(tree)
        steps = []
        for step in program.steps:
            if step[0] != 'call':
                steps.append(step)
                continue
            call = ast.parse('f(%s)' % step[2], mode='eval').body
            if k < len(call.args):
                del call.args[k]
            call.keywords = [kw for kw in call.keywords if kw.arg != pname]
            text = ast.unparse(call)
            steps.append(('call', step[1], text[2:-1]))
        if source is not None and test(program.replace(source=source, steps=steps)):
            changed = True
        else:
            k += 1
    return changed


def _shrink_steps(best, test, budget):
    changed = False
    n = len(best[0].steps)
    size = max(n // 2, 1)
    while size >= 1 and budget.left():
        i = 0
        while i < len(best[0].steps) and budget.left():
            steps = best[0].steps
            if not any(s[0] == 'call' for k, s in enumerate(steps) if not i <= k < i + size):
                i += size
                continue
            candidate = best[0].replace(steps=steps[:i] + steps[i + size:])
            if test(candidate):
                changed = True
            else:
                i += size
        size //= 2
    return changed


def _statement_paths(tree):
    """Paths (tuples of (field, index)) to every statement, outermost first."""
    paths = []

    def visit(node, prefix):
        for field in ('body', 'orelse', 'finalbody', 'handlers'):
            value = getattr(node, field, None)
            if not isinstance(value, list):
                continue
            for i, child in enumerate(value):
                if isinstance(child, (ast.stmt, ast.excepthandler)):
                    path = prefix + ((field, i),)
                    if isinstance(child, ast.stmt):
                        paths.append(path)
                    visit(child, path)
    visit(tree, ())
    paths.sort(key=len)
    return paths


def _resolve(tree, path):
    node = tree
    for field, i in path[:-1]:
        node = getattr(node, field)[i]
    field, i = path[-1]
    return node, field, i


def _unparse(tree):
    ast.fix_missing_locations(tree)
    try:
        source = ast.unparse(tree) + '\n'
        compile(source, '<minimize>', 'exec')
    except (SyntaxError, ValueError, TypeError):
        return None
    return source


def _edit(best, path, how):
    tree = ast.parse(best[0].source)
    try:
        parent, field, i = _resolve(tree, path)
        body = getattr(parent, field)
        node = body[i]
    except (IndexError, AttributeError):
        return None
    replacement = how(node)
    if replacement is None:
        return None
    body[i:i + 1] = replacement
    if not body and field in ('body', 'handlers'):
        body.append(ast.Pass())
    source = _unparse(tree)
    if source is None or source == best[0].source:
        return None
    return best[0].replace(source=source)


def _statement_lists(tree):
    """(path of the owning statement, field) of every statement list, outermost first."""
    lists = [((), 'body')]
    for path in _statement_paths(tree):
        node = _node_at(tree, path)
        for field in ('body', 'orelse', 'finalbody'):
            if isinstance(getattr(node, field, None), list) and getattr(node, field):
                lists.append((path, field))
    return lists


def _node_at(tree, path):
    node = tree
    for field, i in path:
        node = getattr(node, field)[i]
    return node


def _shrink_statements(best, test, budget):
    """Deletes chunks of statements from each statement list: halves, quarters, ...,
    single statements (delta debugging), outermost lists first."""
    changed = False
    k = 0
    while budget.left():
        lists = _statement_lists(ast.parse(best[0].source))
        if k >= len(lists):
            break
        owner, field = lists[k]
        length = len(getattr(_node_at(ast.parse(best[0].source), owner), field))
        size = max(length // 2, 1)
        shrunk = False
        while size >= 1 and budget.left():
            i = 0
            while budget.left():
                tree = ast.parse(best[0].source)
                try:
                    body = getattr(_node_at(tree, owner), field)
                except (IndexError, AttributeError):
                    break
                if i >= len(body):
                    break
                chunk = body[i:i + size]
                if all(isinstance(n, ast.Pass) for n in chunk):
                    i += size
                    continue
                del body[i:i + size]
                if not body:
                    body.append(ast.Pass())
                source = _unparse(tree)
                if source is not None and source != best[0].source and \
                        test(best[0].replace(source=source)):
                    changed = shrunk = True
                else:
                    i += size
            size //= 2
        if not shrunk:
            k += 1
        # after a success the lists may have moved: start over from the outermost
        elif k:
            k = 0
    return changed


def _bodies(node):
    if isinstance(node, (ast.If, ast.For, ast.While)):
        return [node.body, node.orelse]
    if isinstance(node, (ast.With, ast.Try)):
        return [node.body] + ([node.orelse, node.finalbody] if isinstance(node, ast.Try) else [])
    return []


def _hoist_blocks(best, test, budget):
    changed = False
    k = 0
    while budget.left():
        paths = _statement_paths(ast.parse(best[0].source))
        if k >= len(paths):
            break
        path = paths[k]
        done = False
        for which in range(3):
            def how(node, which=which):
                bodies = _bodies(node)
                if which >= len(bodies) or not bodies[which]:
                    return None
                return copy.deepcopy(bodies[which])
            candidate = _edit(best, path, how)
            if candidate is not None and test(candidate):
                changed = done = True
                break
        if not done:
            k += 1
    return changed


def _shrink_returns(best, test, budget):
    changed = False
    progress = True
    while progress and budget.left():
        progress = False
        tree = ast.parse(best[0].source)
        returns = [n for n in ast.walk(tree) if isinstance(n, ast.Return)
                   and isinstance(n.value, (ast.Tuple, ast.List, ast.Dict))]
        for r_index in range(len(returns)):
            n_elts = len(returns[r_index].value.keys if isinstance(returns[r_index].value, ast.Dict)
                         else returns[r_index].value.elts)
            for e_index in range(n_elts - 1, -1, -1):
                if n_elts <= 1 or not budget.left():
                    break
                tree = ast.parse(best[0].source)
                ret = [n for n in ast.walk(tree) if isinstance(n, ast.Return)
                       and isinstance(n.value, (ast.Tuple, ast.List, ast.Dict))][r_index]
                value = ret.value
                if isinstance(value, ast.Dict):
                    del value.keys[e_index]
                    del value.values[e_index]
                else:
                    del value.elts[e_index]
                source = _unparse(tree)
                if source is not None and test(best[0].replace(source=source)):
                    changed = progress = True
                    break
            if progress:
                break
    return changed
