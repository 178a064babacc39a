"""Introspection: ``explain`` (a readable report), ``stats`` (counters), ``to_code``.

Needs a janus function: a ``JanusFunction``, a bound janus method (also
``jf.__call__``), or an object that owns janus functions
(``janus.Optimizer``/``DistributedOptimizer`` and their bound methods,
through ``__janus_functions__``).
"""
import types

from janus import callables
from janus.errors import JanusUsageError


def _janus_functions(fn):
    """The JanusFunctions ``fn`` stands for (one, or an optimizer's two)."""
    if isinstance(fn, types.MethodType):   # jf.__call__, opt.minimize: their owner
        fn = fn.__self__
    owned = getattr(type(fn), '__janus_functions__', None)
    if owned is not None:
        functions = owned(fn)
        used = [jf for jf in functions if jf.stats.calls]
        return used or functions
    if not callables.is_janus(fn):
        raise JanusUsageError('%r is not a janus function; decorate it with @janus.function'
                              % (fn,))
    return [fn.__janus_function__]


def stats(fn):
    """Counters: calls, profiled_calls, graphs_built, graph_calls, fallbacks, imperative_calls, …

    (summed over an optimizer's janus functions)."""
    total = {}
    for jf in _janus_functions(fn):
        for key, value in jf.stats.as_dict().items():
            total[key] = total.get(key, 0) + value
    return total


def to_code(fn):
    """The converted source of the newest graph (and of the callees it inlined)."""
    functions = _janus_functions(fn)
    parts = [_code_of(jf) for jf in functions if jf.cache.newest() is not None]
    if not parts:
        jf = functions[0]
        raise JanusUsageError('%s has no graph yet (%d profiled calls so far; a graph is '
                              'generated after %d)' % (jf.name, jf.profile.calls,
                                                       jf.profile_calls))
    return '\n'.join(parts)


def _code_of(jf):
    from janus.graphgen import generator
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


def explain(fn):
    """A readable report: counters, profile, graphs and their assumptions, fallbacks and why."""
    return '\n'.join(_explain_one(jf) for jf in _janus_functions(fn))


def _explain_one(jf):
    s = jf.stats
    out = ['janus function %s%s' % (jf.name, _where(jf))]
    out.append('  calls %d: profiled %d, graph runs %d, imperative %d (fallbacks %d), '
               'graphs built %d, cache misses %d, evictions %d'
               % (s.calls, s.profiled_calls, s.graph_calls, s.imperative_calls, s.fallbacks,
                  s.graphs_built, s.cache_misses, s.evictions))
    if jf.failed_conversion is not None:
        out.append('  runs imperatively: %s' % jf.failed_conversion)
    _explain_profile(jf, out)
    numbers = jf.scalars.describe()
    if numbers:
        out.append('  Python numbers from outside the call or passed in (relaxation.py):')
        out += ['    %s' % line for line in numbers]
    for i, entry in enumerate(jf.cache.entries()):
        out.append('  graph %d (%d runs, traced in %.0f ms%s):' % (
            i, entry.runs, entry.trace_seconds * 1e3,
            ', defers state updates' if entry.has_mutations else ''))
        out += ['    guard %s' % line for line in entry.describe_guards()]
        out += ['    assert %r' % a for a in entry.assumptions.values()]
        out += ['    assumed %s' % line for line in _assumed(jf, entry)]
        out += ['    writes back %s' % line for line in entry.describe_writes()]
    if jf.events:
        out.append('  events (call number: what happened):')
        for e in list(jf.events):
            out.append('    %d: %s: %s' % (e.call, e.kind, e.detail))
            if e.traceback:
                out += ['        | %s' % line for line in e.traceback.splitlines()]
    return '\n'.join(out)


def _where(jf):
    """`` (file:line)`` of the user's code behind ``jf``, where there is one."""
    code = callables.source_code(jf.fn, jf.target)
    if code is None:
        return ''
    return ' (%s:%s)' % (code.co_filename, code.co_firstlineno)


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
        lines.append('%s: outcomes %s' % (jf._site_name(key), _short(seq)))
    for key in sorted(jf.relaxed_sites, key=lambda k: _site_order(jf.profile, k)):
        lines.append('%s: dynamic (an assumption there broke before)' % jf._site_name(key))
    return lines
