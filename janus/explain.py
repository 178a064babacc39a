"""Introspection: ``explain`` (a readable report), ``stats`` (counters), ``to_code``.

Needs nothing run before it.  Introspection takes any janus thing: a
``JanusFunction`` (``@janus.function``, ``janus.function(obj.method)``), a bound
janus method (also ``jf.__call__``), a ``janus.Optimizer``/``DistributedOptimizer``
(and its bound methods), or an object or class whose methods are decorated;
through ``__janus_functions__`` or the class's janus methods.  The where and the
advice it shows for each event were picked when the event was recorded
(``advising.advise``); the story comes first (``story.py``).
"""
import collections
import types
from typing import Dict

from janus import advising, story
from janus.trace import callables
from janus.errors import JanusUsageError
from janus.graphgen import generator
from janus.reasons import FIX, Reason

WIDTH = 120          # explain's lines stay within this many characters


# -- which janus functions ------------------------------------------------------------

def _janus_functions(fn):
    """The JanusFunctions ``fn`` stands for (one, an optimizer's two, a class's methods)."""
    found = _functions_of(fn)
    if found is None:
        raise JanusUsageError(
            '%s is not a janus function; janus.explain/stats/to_code take what '
            'janus.function returns (f = janus.function(f), or @janus.function on the def), '
            'a bound method of a decorated method, or a janus.Optimizer/DistributedOptimizer'
            % _name_of(fn))
    return found


def _functions_of(fn):
    if callables.is_janus(fn):
        return [fn.__janus_function__]
    owned = getattr(type(fn), '__janus_functions__', None)
    if owned is not None:           # janus.Optimizer / DistributedOptimizer
        functions = owned(fn)
        used = [jf for jf in functions if jf.stats.calls]
        return used or functions
    if isinstance(fn, types.MethodType):   # jf.__call__, opt.minimize: their owner's
        owner = fn.__self__
        if callables.is_janus(owner) or hasattr(type(owner), '__janus_functions__'):
            return _functions_of(owner)
        return None
    if not isinstance(fn, (types.FunctionType, types.BuiltinFunctionType)):
        methods = _janus_methods(fn if isinstance(fn, type) else type(fn))
        if methods:                 # an object or class whose methods are decorated
            return methods
    return None


def _janus_methods(cls):
    seen, out = set(), []
    for klass in getattr(cls, '__mro__', ()):
        for name, value in vars(klass).items():
            if callables.is_janus_function(value) and name not in seen:
                seen.add(name)
                out.append(value)
    return out


def _name_of(fn):
    try:
        return callables.describe(fn)
    except Exception:  # noqa: BLE001 - only for the message
        return repr(fn)


# -- the public functions -------------------------------------------------------------

def stats(fn) -> Dict[str, int]:
    """Counters: calls, profiled_calls, graphs_built, graph_calls, fallbacks, imperative_calls, …

    (summed over an optimizer's janus functions)."""
    total = {}
    for jf in _janus_functions(fn):
        for key, value in jf.stats.as_dict().items():
            total[key] = total.get(key, 0) + value
    return total


def to_code(fn) -> str:
    """The converted source of the newest graph (and of the callees it inlined); for a
    function run with graph breaks, its skeleton (the Python that runs) and each
    segment's and routed callee's own code too."""
    functions = _janus_functions(fn)
    parts = [text for jf in functions for text in _codes_of(jf, 0)]
    if not parts:
        jf = functions[0]
        plain = [e for e in jf.events if str(e.kind) == 'imperative']
        if jf.failed_conversion is not None or plain:
            why = jf.failed_conversion if jf.failed_conversion is not None else plain[-1].detail
            raise JanusUsageError('%s runs as plain Python, so it has no graph to show: %s'
                                  % (jf.name, advising.short_paths(str(why))))
        raise JanusUsageError('%s has no graph yet (%d profiled calls so far; a graph is '
                              'generated after %d)' % (jf.name, jf.profile.calls,
                                                       jf.profile_calls))
    return '\n'.join(parts)


def _codes_of(jf, depth):
    """``to_code``'s parts for ``jf``: its newest graph's code, then its cuts'."""
    parts = [_code_of(jf)] if jf.cache.newest() is not None else []
    if depth > 8:
        return parts
    for split in jf.state.splits.values():
        segments = [part.__janus_function__ for part in split.slots if callables.is_janus(part)]
        parts.append('# janus: %s split: line%s %s in Python, the skeleton below; %s\n%s\n' % (
            jf.name, 's' if len(split.python_lines) > 1 else '',
            ', '.join(str(n) for n in split.python_lines),
            'its segments follow' if segments else 'its segments run as plain Python (too '
            'little tensor work for a graph)', split.source))
        for segment in segments:
            parts += _codes_of(segment, depth + 1) or [
                '# janus: %s has no graph (it runs as plain Python)\n' % segment.name]
    for _, nested in jf.state.routes.functions():
        parts += _codes_of(nested, depth + 1)
    return parts


def _code_of(jf):
    entry = jf.cache.newest()
    parts = ['# janus: specialized %s, guarded by:' % jf.name]
    parts += ['#   %s' % line for line in entry.describe_guards()]
    parts += ['#   in-graph %r' % a for a in entry.assumptions.values()]
    parts += ['#   assumed %s' % line for line in _assumed(jf, entry)]
    parts.append(generator.convert(jf.function).source)
    for converted in entry.inlined:
        if converted.fn is not jf.function:
            parts.append('# inlined callee %s\n%s' % (converted.fn.__qualname__, converted.source))
    return '\n'.join(parts) + '\n'


def explain(fn, verbose: bool = False) -> str:
    """A readable report: counters, graphs with their guards (grouped, one per line)
    and assumptions, and what happened on which call, each reason with the line of
    your code it concerns and what to change.  ``verbose=True`` adds the profile
    (per-site outcomes: calls, branches, loops)."""
    return '\n'.join(_explain_one(jf, verbose) for jf in _janus_functions(fn))


# -- explain ----------------------------------------------------------------------------

def _explain_one(jf, verbose):
    s = jf.stats
    out = ['janus function %s (%s)' % (jf.name, advising.where_defined(jf))]
    # the story first (story.py), then the details
    timed = story.timing(jf)
    for line in [story.ran(jf)] + ([timed] if timed else []) + [story.change(*top_advice(jf))]:
        out += _wrap(line, '  ', '    ')
    out += _wrap('counters: calls %d: graph runs %d, profiled %d, imperative %d (fallbacks %d); '
                 'graphs built %d, cache misses %d, evictions %d'
                 % (s.calls, s.graph_calls, s.profiled_calls, s.imperative_calls, s.fallbacks,
                    s.graphs_built, s.cache_misses, s.evictions), '  ', '    ')
    timing = jf.state.floor.describe()
    if timing:
        decided = jf.state.floor.decisions
        out += _wrap('times by kind of call: %s%s' % (
            timing, '; measured floor: %s' % decided[-1].describe() if decided else ''),
            '  ', '    ')
    if jf.failed_conversion is not None and jf.state.split_always is None:
        where, advice = advising.imperative(jf, jf.failed_conversion.reason,
                                            advising.error_line(jf.failed_conversion))
        reason = advising.short_paths(str(jf.failed_conversion))
        out += _wrap('runs imperatively: %s' % reason, '  ', '    ')
        out += _trailer(where, advice, '    ')
    if verbose:
        _explain_profile(jf, out)
    numbers = jf.scalars.describe()
    if numbers:
        out.append('  Python numbers read from outside the call or passed in:')
        for line in numbers:
            out += _wrap(line, '    ', '      ')
    entries = list(jf.cache.entries())
    gone = s.graphs_built - len(entries)
    if entries:
        out.append('  graphs (%d cached%s%s):' % (
            len(entries), ', %d more built and since evicted or dropped' % gone if gone > 0
            else '', '; older ones by how their guards differ' if len(entries) > 1
            and not verbose else ''))
    elif gone > 0:
        out.append('  graphs: none cached (%d built, since evicted or dropped)' % gone)
    newest = entries[-1] if entries else None
    for i, entry in enumerate(entries):
        full = verbose or entry is newest
        out += _explain_graph(jf, entry, getattr(entry, 'number', None) or i + 1,
                              None if full else newest)
    if jf.events:
        out.append('  events (call: what happened; then where in your code, and what to do):')
        for block in _blocks(list(jf.events)):
            out += block
    out += _explain_split(jf, verbose)
    return '\n'.join(_clip(line) for line in out)


def top_advice(jf):
    """``(where, advice)``: the one change that would help most (``story.change``): why
    the function runs as plain Python, else the advice to change something that
    concerns the most calls (a graph break: every split call), else None."""
    if jf.failed_conversion is not None and jf.state.split_always is None:
        return advising.imperative(jf, jf.failed_conversion.reason,
                                   advising.error_line(jf.failed_conversion))
    score = collections.Counter()
    for event in jf.events:
        if event.advice and event.advice.startswith(FIX):
            weight = jf.stats.split_calls if str(event.kind) == 'graph break' else 1
            score[(event.where, event.advice)] += max(weight, 1)
    if score:
        return max(score.items(), key=lambda kv: kv[1])[0]
    return None, None


def _explain_split(jf, verbose):
    """A function run with graph breaks: what runs in Python, then each segment's
    own report, indented."""
    splits = list(jf.state.splits.values())
    if not splits:
        return []
    s = jf.stats
    out = _wrap('graph breaks: %d calls ran with them, %d of them ran graphs%s:'
                % (s.split_calls, s.graph_part_calls,
                   '' if jf.state.split_always is not None else
                   ' (the call shapes whose trace failed at a statement)'), '  ', '    ')
    for split in splits:
        many = len(split.python_lines) > 1
        out += _wrap('%s %s %s in Python, %d segment%s in graphs of their own:'
                     % ('lines' if many else 'line',
                        ', '.join(str(n) for n in split.python_lines), 'run' if many else 'runs',
                        len(split.segments), 's' if len(split.segments) > 1 else ''),
                     '    ', '      ')
        for part in split.slots:
            if callables.is_janus(part):
                out += ['      ' + line for line in _explain_one(part.__janus_function__,
                                                                 verbose).split('\n')]
    return out + _explain_routes(jf, verbose)


def _explain_routes(jf, verbose):
    """The Keras layers whose own call runs through janus while the cut function runs
    (graphgen/nested.py): each one's own report, indented."""
    routes = jf.state.routes
    if not routes.by_line:
        return []
    out = []
    for line, route in sorted(routes.by_line.items()):
        out += _wrap('inside line %d: %s runs through janus of its own (janus refused its line '
                     '%s)%s:' % (line, route.name, route.line, _route_for(route)),
                     '    ', '      ')
    for owner, nested in routes.functions():
        if hasattr(owner, 'built'):
            out.append('      layer %s:' % getattr(owner, 'name', type(owner).__name__))
        else:
            out.append('      function %s:' % getattr(owner, '__qualname__', owner))
        out += ['        ' + text for text in _explain_one(nested, verbose).split('\n')]
    return out


def _route_for(route):
    if not route.layers:
        return ''
    return ', for %d layer%s' % (len(route.layers), 's' if len(route.layers) > 1 else '')


def _state_note(entry):
    """How the graph treats state: deferred updates, and what a failure after one does;
    and how it runs (XLA: ``replay/xla.py``)."""
    caller = getattr(entry, 'xla', None)
    jit = caller.describe() if caller is not None else None
    return _mutation_note(entry) + ('' if jit is None else ', ' + jit)


def _mutation_note(entry):
    if not entry.has_mutations:
        return ''
    rollback = getattr(entry, 'rollback', None)
    if rollback is not None:
        return ', defers state updates, %d variables kept for a rollback' % len(rollback)
    if getattr(entry, 'not_undoable', None):
        return (', defers state updates; an op failing after one raises the graph\'s error (%s)'
                % entry.not_undoable)
    return ', defers state updates'


def _explain_graph(jf, entry, number, newest=None):
    """A graph's guards, one per line, grouped by kind; then its assumptions and
    writes.  With ``newest``: only the guards ``newest`` does not have."""
    out = ['    graph #%d (runs %d, traced in %.0f ms%s):' % (
        number, entry.runs, entry.trace_seconds * 1e3,
        _state_note(entry))]
    groups = _guard_groups(entry)
    if newest is not None:
        others = {(name, text) for name, texts in _guard_groups(newest).items() for text in texts}
        differ = ['%s %s' % (name, text) for name, texts in groups.items() for text in texts
                  if (name, text) not in others]
        return out + _wrap('as graph #%s but for: %s' % (
            getattr(newest, 'number', '?'), '; '.join(differ) or 'nothing'), '      ', '        ')
    for name, texts in groups.items():
        out.append('      %s:' % name)
        out += ['        %s' % text for text in texts]
    recursive = getattr(entry, 'recursive', ())
    if recursive:
        out.append('      recursive functions (one graph each: every node of a depth at once, '
                   'or calling itself through Janus>Invoke):')
        for text in recursive:
            out += _wrap(text, '        ', '          ')
    on_host = entry.host.checked if entry.host is not None else frozenset()
    assumptions = list(entry.assumptions.values())
    for where, chosen in (('on the host before the run', [a for a in assumptions
                                                           if a.id in on_host]),
                          ('in the graph', [a for a in assumptions if a.id not in on_host])):
        if chosen:
            out.append('      checked %s (a failure re-runs the call imperatively):' % where)
            out += ['        %s' % _describe_assumption(a) for a in chosen]
    draws = getattr(entry.host, 'draws', None) if entry.host is not None else None
    if draws:
        out.append('      draws on the host before the run (fed to the graph; the generators '
                   'put back if the call re-runs): %d from %s' % (len(draws), ', '.join(
                       sorted({type(g).__name__ for g in draws}))))
    assumed = _assumed(jf, entry)
    if assumed:
        out.append('      assumed from the profile:')
        out += ['        %s' % line for line in assumed]
    out += ['      writes back %s' % line for line in entry.describe_writes()]
    return out


def _guard_groups(entry):
    """{group: [guard text]}: the arguments' guards first, then by guard kind."""
    groups = collections.OrderedDict()
    groups['arguments'] = list(entry.signature.describe())
    for guard in entry.source_guards:
        kind = getattr(guard, 'kind', None)
        name = getattr(kind, 'value', None) or type(guard).__name__
        text = repr(guard)
        if text.startswith(name + '(') and text.endswith(')'):
            text = text[len(name) + 1:-1]
        groups.setdefault(name, []).append(text)
    return groups


def _describe_assumption(a):
    return '#%d %s at %s:%s: %s' % (a.id, a.kind, advising.short_path(a.filename), a.lineno,
                                    a.description)


def _explain_profile(jf, out):
    profile = jf.profile
    out.append('  profile (%d calls):' % profile.calls)
    if profile.arguments:
        out.append('    last arguments: %s' % ', '.join('%s=%s' % a for a in profile.arguments[-1]))
    if profile.returns:
        out.append('    returns: %s' % dict(profile.returns))
    for key, site in sorted(profile.sites.items(), key=lambda kv: _site_order(profile, kv[0])):
        info = profile.site_info.get(key)
        where = '%s line %s' % (key[0].co_name, info.lineno if info else '?')
        kind = info.kind if info else 'site'
        if site.callees:
            out.append('    %s call: %s -> %s' % (where, dict(site.callees), dict(site.returns)))
        if site.sequences:
            seqs = ', '.join('%s x%d' % (_short(seq), n) for seq, n in site.sequences.most_common(3))
            out.append('    %s %s%s: %s' % (where, kind, ' (tensor)' if site.tensor else '', seqs))
        if site.taken:
            out.append('    %s %s taken %d times' % (where, kind.lower(), site.taken))


def _site_order(profile, key):
    info = profile.site_info.get(key)
    return (key[0].co_firstlineno, info.lineno if info else 0, key[1])


def _short(seq):
    text = '[%s]' % ', '.join(str(v) for v in seq[:8])
    return text[:-1] + ', ... (%d)]' % len(seq) if len(seq) > 8 else text


def _assumed(jf, entry):
    """One line per site whose outcomes the graph assumed, and per relaxed site."""
    lines = []
    for key, seq in entry.assumed_sites.items():
        lines.append('%s: outcomes %s' % (jf.site_name(key), _short(seq)))
    for key in sorted(jf.speculation.relaxed_sites, key=lambda k: _site_order(jf.profile, k)):
        lines.append('%s: dynamic (an assumption there broke before)' % jf.site_name(key))
    return lines


# -- events: grouped, each reason with where and what to do ------------------------------

_STORM = ('cache miss', 'graph built', 'number relaxed', 'number kept constant')


def _in_storm(event):
    """A recompile event: a miss, a graph it built, or a call past the recompile limit."""
    kind = str(event.kind)
    return kind in _STORM or (kind == 'imperative' and event.reason is Reason.RECOMPILE_LIMIT)


def _blocks(events):
    """Lines per group of events: repeats of one event, and runs of recompiles
    (cache misses, the graphs they built, the calls past the limit), are one entry each."""
    out, i = [], 0
    while i < len(events):
        k = i
        while k < len(events) and _in_storm(events[k]):
            k += 1
        misses = [x for x in events[i:k] if str(x.kind) == 'cache miss']
        if len(misses) >= 3:
            out.append(_storm_block(events[i:k], misses))
            i = k
            continue
        j = i + 1
        while j < len(events) and _same(events[j], events[i]):
            j += 1
        out.append(_event_block(events[i:j]))
        i = j
    return out


def _same(a, b):
    return (a.kind, a.detail, getattr(a, 'where', None)) == \
        (b.kind, b.detail, getattr(b, 'where', None)) and not a.traceback


def _calls(events, repeats=True):
    """'7', '7-9' or, for one event repeated, '7-9 (3x)'."""
    first, last = events[0].call, events[-1].call
    text = '%d' % first if first == last else '%d-%d' % (first, last)
    return text + (' (%dx)' % len(events) if repeats and len(events) > 1 else '')


def _event_block(events):
    e = events[-1]
    lines = _wrap('%s: %s: %s' % (_calls(events), _kind_text(e.kind),
                                  advising.short_paths(e.detail)), '    ', '        ')
    if e.traceback:
        for line in e.traceback.splitlines():
            lines += _wrap(line, '        | ', '        |   ')
    lines += _trailer(getattr(e, 'where', None), getattr(e, 'advice', None), '        ')
    return lines


def _storm_block(events, misses):
    """A run of recompiles: how many, which guard kept failing on what, the graphs built,
    the calls past the recompile limit; what to change."""
    built = [e for e in events if str(e.kind) == 'graph built']
    limited = [e for e in events if str(e.kind) == 'imperative']
    failed = collections.Counter(_miss_head(e) for e in misses)
    head, count = failed.most_common(1)[0]
    numbers = [e.graph for e in built if e.graph is not None]
    text = '%s: recompiled: %d cache misses, mostly %s failed for %s (%d); %s' % (
        _calls(events, repeats=False), len(misses), head[0], head[1], count,
        'built graphs #%s-#%s' % (numbers[0], numbers[-1]) if len(numbers) > 1 else
        'built graph #%s' % numbers[0] if numbers else 'built no graph')
    lines = _wrap(text, '    ', '        ')
    lines += _wrap('last: %s' % advising.short_paths(misses[-1].detail), '        ', '          ')
    if limited:
        lines += _wrap('then %d calls ran imperatively: %s' % (
            len(limited), advising.short_paths(limited[-1].detail)), '        ', '          ')
        last = limited[-1]
        advice = getattr(last, 'advice', None)
    else:
        last = misses[-1]
        values = [e.miss.actual for e in misses if _miss_head(e) == head]
        advice = getattr(last, 'advice', None) and advising.guard_advice(head[0], values)
    lines += _trailer(getattr(last, 'where', None), advice, '        ')
    return lines


def _miss_head(event):
    """``(guard kind, what it guards)`` of a cache miss event: ('VALUE_MATCH', 'mode')."""
    miss = event.miss
    return (getattr(miss.kind, 'value', str(miss.kind)), miss.where) if miss else ('?', '?')


def _kind_text(kind):
    return {'imperative': 'ran imperatively', 'cache miss': 'recompiled (cache miss)'}.get(
        str(kind), str(kind))


def _trailer(where, advice, indent):
    """``at file:line: advice``, wrapped: the end of every reason."""
    if not advice:
        return []
    return _wrap('at %s: %s' % (where or '?', advice), indent, indent + '  ')


# -- text -----------------------------------------------------------------------------------

def _clip(text, limit=None):
    """``text`` cut to ``limit`` (default: WIDTH) characters, marked with '...'."""
    limit = limit or WIDTH
    return text if len(text) <= limit else text[:limit - 3] + '...'


# Where a long line breaks, best first: (mark, characters of the mark kept on the line).
_BREAKS = (('; ', 1), (': ', 1), (', ', 1), (' (', 0), (' ', 0))


def _wrap(text, first, rest, width=WIDTH):
    """``text`` on lines of at most ``width`` characters, ``first``/``rest`` in front;
    broken at a clause (``; ``, ``: ``, ``, ``) where one is near enough, else at a space."""
    lines, prefix = [], first
    while len(prefix) + len(text) > width:
        room = width - len(prefix)
        cut = -1
        for mark, kept in _BREAKS:
            at = text.rfind(mark, 0, room - kept + len(mark))
            if at > room // 2:
                cut = at + kept
                break
        if cut <= 0:
            cut = room
        lines.append(prefix + text[:cut].rstrip())
        text, prefix = text[cut:].lstrip(), rest
    lines.append(prefix + text)
    return lines
