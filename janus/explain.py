"""Introspection: ``explain`` (a readable report), ``stats`` (counters), ``to_code``;
and the one place that turns a reason janus did not use a graph into advice.

Needs nothing run before it (``janus.api`` is imported lazily).  Introspection
takes any janus thing: a ``JanusFunction`` (``@janus.function``,
``janus.function(obj.method)``), a bound janus method (also ``jf.__call__``), a
``janus.Optimizer``/``DistributedOptimizer`` (and its bound methods), or an
object or class whose methods are decorated; through ``__janus_functions__``
or the class's janus methods.

Every event janus records about why a call did not run a graph (ran
imperatively, recompiled, fell back, ...) gets, when it is recorded,
``advise``'s ``(where, advice)``: the user's ``file:line`` (the line that
stopped the conversion, the assumption's line, the call that passed the
argument, or the function's ``def``) and one concrete thing to change, or
that nothing needs changing.  ``note`` logs each reason a function is not in
graphs once per function (logger ``janus``).
"""
import collections
import logging
import os
import re
import sys
import types
from typing import Dict

from janus import callables
from janus.errors import JanusUsageError
from janus.graphgen import generator

log = logging.getLogger('janus')

WIDTH = 120          # explain's lines stay within this many characters
FIX = 'fix: '
NOTHING = 'nothing to change: '


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
    out = ['janus function %s (%s)' % (jf.name, where_defined(jf))]
    out += _wrap('calls %d: graph runs %d, profiled %d, imperative %d (fallbacks %d); '
                 'graphs built %d, cache misses %d, evictions %d'
                 % (s.calls, s.graph_calls, s.profiled_calls, s.imperative_calls, s.fallbacks,
                    s.graphs_built, s.cache_misses, s.evictions), '  ', '    ')
    if jf.failed_conversion is not None:
        where, advice = advise(jf, 'imperative', str(jf.failed_conversion),
                               jf.failed_conversion)
        reason = _short_paths(str(jf.failed_conversion))
        out += _wrap('runs imperatively: %s' % reason, '  ', '    ')
        out += _trailer(where, advice, '    ')
    if verbose:
        _explain_profile(jf, out)
    numbers = jf.scalars.describe()
    if numbers:
        out.append('  Python numbers from outside the call or passed in (relaxation.py):')
        for line in numbers:
            out += _wrap(line, '    ', '      ')
    entries = list(jf.cache.entries())
    gone = s.graphs_built - len(entries)
    if entries or gone:
        out.append('  graphs (%d cached%s%s):' % (
            len(entries), ', %d more built and evicted or dropped' % gone if gone > 0 else '',
            '; older ones by how their guards differ' if len(entries) > 1 and not verbose
            else ''))
    newest = entries[-1] if entries else None
    for i, entry in enumerate(entries):
        full = verbose or entry is newest
        out += _explain_graph(jf, entry, getattr(entry, 'number', None) or i + 1,
                              None if full else newest)
    if jf.events:
        out.append('  events (call: what happened; then where in your code, and what to do):')
        for block in _blocks(list(jf.events)):
            out += block
    return '\n'.join(_clip(line) for line in out)


def _state_note(entry):
    """How the graph treats state: deferred updates, and what a failure after one does."""
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
    assumptions = list(entry.assumptions.values())
    if assumptions:
        out.append('      checked in the graph (a failure re-runs the call imperatively):')
        out += ['        %s' % _describe_assumption(a) for a in assumptions]
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
    return '#%d %s at %s:%s: %s' % (a.id, a.kind, short_path(a.filename), a.lineno,
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
_LIMIT = 'recompile limit reached'


def _in_storm(event):
    """A recompile event: a miss, a graph it built, or a call past the recompile limit."""
    kind = str(event.kind)
    return kind in _STORM or (kind == 'imperative' and event.detail.startswith(_LIMIT))


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
    lines = _wrap('%s: %s: %s' % (_calls(events), _kind_text(e.kind), _short_paths(e.detail)),
                  '    ', '        ')
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
    failed = collections.Counter(_miss_head(e.detail) for e in misses)
    head, count = failed.most_common(1)[0]
    numbers = [m.group(1) for m in (re.search(r'#(\d+)', e.detail) for e in built) if m]
    text = '%s: recompiled: %d cache misses, mostly %s (%d); %s' % (
        _calls(events, repeats=False), len(misses), head, count,
        'built graphs #%s-#%s' % (numbers[0], numbers[-1]) if len(numbers) > 1 else
        'built graph #%s' % numbers[0] if numbers else 'built no graph')
    lines = _wrap(text, '    ', '        ')
    lines += _wrap('last: %s' % _short_paths(misses[-1].detail), '        ', '          ')
    if limited:
        lines += _wrap('then %d calls ran imperatively: %s' % (len(limited),
                                                               _short_paths(limited[-1].detail)),
                       '        ', '          ')
        last = limited[-1]
        advice = getattr(last, 'advice', None)
    else:
        last = misses[-1]
        values = [m.group(1) for m in (re.search(r', got (.*)$', e.detail) for e in misses
                                       if _miss_head(e.detail) == head) if m]
        advice = getattr(last, 'advice', None) and _guard_advice(head.split(' ')[0], values)
    lines += _trailer(getattr(last, 'where', None), advice, '        ')
    return lines


def _miss_head(detail):
    """'VALUE_MATCH failed for mode' of 'VALUE_MATCH failed for mode: expected ...'."""
    return detail.split(': expected', 1)[0]


def _kind_text(kind):
    return {'imperative': 'ran imperatively', 'cache miss': 'recompiled (cache miss)'}.get(
        str(kind), str(kind))


def _trailer(where, advice, indent):
    """``at file:line: advice``, wrapped: the end of every reason."""
    if not advice:
        return []
    return _wrap('at %s: %s' % (where or '?', advice), indent, indent + '  ')


# -- where in the user's code ---------------------------------------------------------------

_JANUS_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARY_PARTS = (os.sep + 'site-packages' + os.sep, os.sep + 'dist-packages' + os.sep)


def short_path(filename):
    """``filename`` relative to the working directory when it lies below it."""
    if not filename:
        return '?'
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if relative.startswith('..') else relative


def _short_paths(text):
    """``text`` with the working directory left out of the paths it names."""
    return text.replace(os.getcwd() + os.sep, '')


def where_defined(jf):
    """``file:line`` of the user's code behind ``jf``: its def, or where an owner
    (a janus.Optimizer) was made; ``?`` when there is none."""
    made = getattr(jf, 'defined_at', None)
    if made is not None:
        return made
    code = callables.source_code(jf.fn, jf.target)
    if code is None:
        return '?'
    return '%s:%s' % (short_path(code.co_filename), code.co_firstlineno)


def caller_line():
    """``file:line`` of the innermost frame of the user's code calling into janus (the
    call being run), skipping janus's and installed libraries' frames; None if none."""
    frame = sys._getframe(1)
    fallback = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_JANUS_DIR) and not filename.startswith('<'):
            here = '%s:%d' % (short_path(filename), frame.f_lineno)
            if not any(part in filename for part in _LIBRARY_PARTS):
                return here
            fallback = fallback or here
        frame = frame.f_back
    return fallback


def _error_line(error):
    lineno = getattr(error, 'lineno', None)
    if lineno is None:
        return None
    return '%s:%s' % (short_path(getattr(error, 'filename', None)), lineno)


# -- advice -------------------------------------------------------------------------------

# (pattern on the reason, advice); the first that matches.  Each says what the user
# can change in their code, or that nothing needs changing, and is true of the code
# that raises the reason (runtime/*.py, graphgen/converters/*.py, guards.py).
_IMPERATIVE_ADVICE = [
    (r'recompile limit', None),   # storm_advice
    (r'had to assume',
     FIX + 'remove what stopped real control flow there (the "assumed instead" event says '
           'what), so janus can build tf.cond/tf.while_loop'),
    (r'unsupported argument (\S+): a NumPy value',
     FIX + 'pass a tf.Tensor (tf.convert_to_tensor(%(arg)s)) instead of the NumPy value'),
    (r'reading the NumPy value',
     FIX + 'keep that value in a tf.Variable, or pass it to the function as a tensor'),
    (r'contains itself', FIX + 'pass a container that does not contain itself'),
    (r'dict keys must be str or int', FIX + 'pass dicts whose keys are str or int constants'),
    (r'symbolic tensor', FIX + 'call it with eager tensors; inside a tf.function call the '
                               'undecorated function instead'),
    (r'generator or coroutine|a generator \(|a coroutine \(|generators or coroutines',
     NOTHING + 'janus runs generators and coroutines as plain Python (their code runs '
               'later, outside the call); for graphs, decorate the function that does a '
               "step's tensor work"),
    (r'is not built yet', NOTHING + 'only this first call (the one that creates the '
                                    'variables) runs imperatively; later calls convert'),
    (r'internal error|numbered the sites|janus failed',
     NOTHING + 'a janus bug, not your code; the call ran as plain Python (please report '
               'it with the traceback janus.explain shows)'),
    (r'may fail after a state change janus cannot undo',
     FIX + 'draw from the iterator (or print with tf.print) before the janus function and '
           'pass the value in, or keep the Python writes after the op that can fail'),
    (r'is not the code Python runs',
     FIX + 'reload the module (or run the definition again) after changing its file: '
           'janus converts what the file holds, and it no longer holds this code'),
    (r'no source|does not parse on its own|cannot tell which lambda|does not start with its def',
     FIX + 'define the function with def in a .py file (janus converts what it can read '
           'the source of)'),
    (r'recursive call', FIX + 'write the recursion as a loop, or decorate a non-recursive '
                              'function that does the tensor work (janus does not convert '
                              'recursion)'),
    (r'an assumption depends on a state change',
     FIX + 'check the condition on the value before the state change (assert on x before '
           'v.assign(x)), or make that check after the janus function returns'),
    (r'both changes state and checks an assumption',
     FIX + 'move the state change (assign, optimizer step) out of that loop or branch, '
           'after it'),
    (r'depends on a state change made earlier in the same call',
     FIX + 'compute the condition before the state change (read the variable first), or '
           'move return/break/continue out of that if/loop (set a flag and test it after)'),
    (r'return/break/continue inside',
     FIX + 'move return/break/continue out of that if/loop (set a result or flag and return '
           'after it), so janus can build tf.cond/tf.while_loop'),
    (r'zero-argument super', FIX + 'call the parent method directly: Parent.method(self, ...)'),
    (r'in-line class definition', FIX + 'define the class at module level'),
    (r'in-line import', FIX + 'import at module level'),
    (r'try statement', FIX + 'move the try/except out of the janus function, around the call'),
    (r'match statement', FIX + 'use if/elif instead of match'),
    (r'deleting attributes|`del`',
     FIX + 'set the attribute or item to None instead of deleting it'),
    (r'global/nonlocal only as', FIX + 'write it as its own statement: `name = value` or '
                                       '`name op= value`'),
    (r'attribute writes only as|item assignment only as|`obj\.a op= v`|`x\[k\] op= v`',
     FIX + 'write it as its own plain statement (`obj.name = value`, `x[k] = value`)'),
    (r'with key=/default=',
     FIX + 'drop key=/default= (sort (key, value) tuples instead), or use tf.sort/tf.argmax '
           'on a tensor'),
    (r'print\(\) inside a tensor-dependent loop',
     FIX + 'print after the loop, or use tf.print inside it'),
    (r'print\(\)', FIX + 'print tensors, numbers and strings (or use tf.print); print other '
                         'objects outside the janus function'),
    (r'appending to an outside list or dict',
     FIX + 'collect the values in a local list and extend the outside one after the loop'),
    (r'list (that )?grows|list grown',
     FIX + 'combine the list with tf.stack/tf.concat/tf.add_n/tf.reduce_* after the loop, '
           'or use a tf.TensorArray'),
    (r'read different variables',
     FIX + 'compute both sides and select with tf.where, or read the same variables on both '
           'sides of the if'),
    (r"'numpy'|\.numpy\(\)|\.item\(\)|SymbolicTensor",
     FIX + 'keep values as tensors inside the function (no .numpy()/.item()); convert the '
           'result after the call returns'),
    (r'custom __getattr__|__getattribute__|custom __setattr__|property or descriptor|'
     r'special methods|whose class defines|__hash__',
     FIX + 'read the value into a plain attribute or a local first, or pass it in as an '
           'argument'),
    (r'formatting|f-string|str\.\w+\(\) of a graph value|string that depends on a graph value',
     FIX + 'format graph values only to print, return or store them (an f-string); format '
           'other values outside the janus function'),
    (r'chosen when the graph runs|through a name a tensor-dependent if chose',
     FIX + 'only append/extend/insert/update the container the if chose; read it after the '
           'call (or on each side of the if)'),
    (r'tensor\.(experimental_)?ref\(\)',
     FIX + 'compare the tensors with `is` (janus keeps identity), or key the cache outside '
           'the janus function'),
    (r'tensor-dependent loop',
     FIX + 'carry only tensors and numbers through the loop, each keeping its type and '
           'structure; build other values after the loop'),
    (r'tensor-dependent (branch|conditional|if)|tensor-dependent condition',
     FIX + 'assign the same names on both sides of the if, as tensors of one dtype and '
           'structure (or select with tf.where)'),
    (r'from outside the call',
     FIX + 'pass that value in as an argument, or create it inside the function'),
    (r'calls to ',
     FIX + 'call TF ops instead, or make that call before or after the janus function and '
           'pass its result in'),
    (r'^\w+(Error|Exception): ',
     FIX + 'this line fails when traced as a graph (the error above); keep it to TF ops on '
           'tensors, or move it out of the janus function'),
]
_DEFAULT_ADVICE = (FIX + 'rewrite that line with TF ops on tensors, or move it out of the '
                   'janus function (before or after the call)')


def imperative_advice(jf, text):
    """What to change for a reason a call ran imperatively (``text``: the reason)."""
    for pattern, advice in _IMPERATIVE_ADVICE:
        found = re.search(pattern, text)
        if found is None:
            continue
        if advice is None:
            return storm_advice(jf)
        return advice % {'arg': found.group(1) if found.groups() else 'x'} \
            if '%(arg)s' in advice else advice
    return _DEFAULT_ADVICE


def storm_advice(jf):
    """After config.recompile_limit graphs: what kept changing and what to change."""
    values_by_guard = jf.miss_values
    if not values_by_guard:
        return FIX + ('raise janus.config.recompile_limit (nothing in particular kept '
                      'changing)')
    (kind, where), values = max(values_by_guard.items(), key=lambda kv: len(kv[1]))
    shown = ', '.join(_clip(v, 24) for v in values[:4]) + (', ...' if len(values) > 4 else '')
    kind = getattr(kind, 'value', kind)
    return '%s (%s on %s kept changing: %s)' % (_guard_advice(kind, values), kind, where, shown)


def _guard_advice(kind, values=()):
    if kind in ('SHAPE_MATCH', 'TENSOR_MATCH'):
        return FIX + 'pad or bucket the inputs to a few shapes'
    if kind == 'DTYPE_MATCH':
        return FIX + 'pass tensors of one dtype (tf.cast before the call)'
    if kind in ('VALUE_MATCH', 'EQUALS_MATCH'):
        if values and all(re.fullmatch(r'-?[\d.e+-]+|inf|nan', v) for v in values):
            return FIX + 'pass the number as a tensor, or keep it in a tf.Variable'
        return FIX + ('use a few distinct values (each gets its own graph), pass it as a '
                      'tensor, or raise janus.config.recompile_limit')
    if kind == 'ID_MATCH':
        return FIX + 'pass the same object on every call (make it once, outside the loop)'
    if kind in ('LEN_MATCH', 'KEYS_MATCH'):
        return FIX + 'keep lists/dicts the same length and keys, or pass one stacked tensor'
    if kind == 'SCALAR_MATCH':
        return FIX + 'keep the number an int or a float (one type) between calls'
    if kind in ('CODE_MATCH', 'FUNCTION_MATCH', 'METHOD_MATCH'):
        return FIX + 'pass (or call) the same function each time'
    return FIX + 'keep that value the same (object, type, value) between calls'


_RELAXED_KINDS = ('BRANCH', 'TRIP_COUNT')


def advise(jf, kind, detail, error=None):
    """``(where, advice)`` for an event of ``kind`` (an ``api.EventKind``):
    ``where`` the user's ``file:line`` it concerns, ``advice`` one thing to change
    (``fix: ...``) or ``nothing to change: ...``; ``(None, None)`` for events that
    are no reason (a graph was built)."""
    kind = str(kind)
    if kind == 'graph built':
        return None, None
    if kind == 'imperative':
        text = str(error) if error is not None else detail
        where = _error_line(error)
        if where is None:
            argument = re.search(r'unsupported argument|recompile limit', text)
            where = (caller_line() if argument else _site_line(jf, text)) or where_defined(jf)
        return where, imperative_advice(jf, getattr(error, 'reason', None) or text)
    if kind == 'cache miss':
        found = re.match(r'(\w+) failed for (.*?): expected', detail)
        guard_kind = found.group(1) if found else ''
        return caller_line() or where_defined(jf), (
            NOTHING + 'a one-off new graph; if it repeats, ' + _guard_advice(guard_kind)[len(FIX):])
    if kind == 'fallback':
        where = _error_line(error) or _line_in(detail) or where_defined(jf)
        assumption = getattr(error, 'kind', None) or _assumption_kind(detail)
        if 'failed to build: kept' in detail:
            advice = (NOTHING + 'the graph keeps this outcome while calls rarely take the other '
                      'path (janus.config.assumed_break_rate); those run imperatively')
        elif str(assumption) in _RELAXED_KINDS:
            advice = (NOTHING + 'janus stops assuming this outcome; the next graph decides it '
                      'in the graph (tf.cond/tf.while_loop)')
        elif str(assumption) == 'SCALAR':
            advice = NOTHING + 'the number is specialized by value again'
        elif str(assumption) == 'AGREEMENT':
            advice = NOTHING + "another rank's assumption broke; every rank re-ran the step"
        else:
            advice = (NOTHING + 'the check failed as eager code fails there; that call ran '
                      'imperatively, with eager\'s result or exception')
        return where, advice
    if kind == 'fallback raised':
        return caller_line() or where_defined(jf), (
            NOTHING + 'the call raised as it does eagerly; the graph is kept')
    if kind == 'graph error':
        return caller_line() or where_defined(jf), (
            NOTHING + "the call re-ran imperatively for eager's result or exception")
    if kind == 'internal error':
        return caller_line() or where_defined(jf), (
            NOTHING + 'a janus bug, not your code; the call ran as plain Python (please report '
                      'it with this traceback)')
    if kind == 'recursive call':
        return where_defined(jf), (
            NOTHING + 'the inner calls run as plain Python; for graphs there, write the '
                      'recursion as a loop')
    if kind == 'relaxed':
        return _site_line(jf, detail) or where_defined(jf), (
            NOTHING + 'the next graph builds tf.cond/tf.while_loop there')
    if kind == 'relaxed shapes failed':
        return _error_line(error) or where_defined(jf), (
            NOTHING + 'the graph was built with exact shapes instead')
    if kind == 'profiling':
        if 'super()' in detail:
            return where_defined(jf), (FIX + 'call the parent method directly: '
                                       'Parent.method(self, ...)')
        return where_defined(jf), (NOTHING + 'calls are profiled without per-site outcomes, '
                                   'so janus assumes less')
    if kind == 'redefined':
        return where_defined(jf), NOTHING + 'janus profiles and converts the new definition'
    if kind == 'number relaxed':
        return where_defined(jf), (NOTHING + 'the number is a graph input: one graph serves '
                                   'its values')
    if kind == 'number kept constant':
        return where_defined(jf), (
            NOTHING + 'a graph per value; if it keeps changing, pass it as a tensor')
    if kind == 'assumed instead':
        reason = re.search(r'\((.*)\)', detail)
        advice = imperative_advice(jf, reason.group(1) if reason else detail)
        if advice.startswith(FIX):
            advice = (NOTHING + 'if calls rarely take the other path; else ' + advice[len(FIX):])
        return _site_line(jf, detail) or where_defined(jf), advice
    return where_defined(jf), NOTHING + 'janus handled it'


def _line_in(text):
    found = re.search(r'at (\S+?):(\d+)', text or '')
    return '%s:%s' % (short_path(found.group(1)), found.group(2)) if found else None


def _assumption_kind(detail):
    found = re.search(r'#\d+ (\w+) at ', detail or '')
    return found.group(1) if found else None


def _site_line(jf, detail):
    """``file:line`` of a site named ``fn line N (Kind)`` in ``detail``."""
    found = re.search(r'(\S+) line (\d+) \(', detail or '')
    if found is None:
        return None
    for key in list(jf.speculation.relaxed_sites) + list(jf.profile.site_info):
        code = key[0]
        if code.co_name == found.group(1):
            return '%s:%s' % (short_path(code.co_filename), found.group(2))
    return None


# -- logging: each reason once per function ---------------------------------------------------

def annotate(jf, kind, detail, error=None):
    """``advise``'s ``(where, advice)`` for a new event, logging a new reason (``note``);
    ``(None, None)`` if that fails (bookkeeping never fails a call)."""
    try:
        where, advice = advise(jf, kind, detail, error)
        note(jf, kind, detail, where, advice)
        return where, advice
    except Exception:  # noqa: BLE001 - explain's own failure: the event stays, bare
        return None, None


_LOGGED = ('imperative', 'recursive call', 'internal error')
_LOGGED_LIMIT = 64


def note(jf, kind, detail, where, advice):
    """Logs a reason ``jf`` is not in graphs, the first time ``jf`` meets it
    (warning when there is something to change, info otherwise)."""
    if str(kind) not in _LOGGED or advice is None:
        return
    seen = jf.logged_reasons
    key = (str(kind), detail)
    if key in seen or len(seen) >= _LOGGED_LIMIT:
        return
    seen.add(key)
    quiet = advice.startswith(NOTHING) and str(kind) != 'internal error'
    level = logging.INFO if quiet else logging.WARNING
    verb = {'imperative': 'running %s imperatively',
            'internal error': 'internal error in %s (the call ran as plain Python)'}.get(
                str(kind), 'in %s')
    at = '' if where and where.split(':')[0] in detail else ' (at %s)' % where
    log.log(level, 'janus: ' + verb + ': %s%s; %s', jf.name, detail, at, advice)


def reason_text(jf, error):
    """``error`` with where it concerns and what to do (strict mode's message)."""
    where, advice = advise(jf, 'imperative', str(error), error)
    return '%s (at %s); %s' % (error, where, advice)


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
