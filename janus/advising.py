"""Where and what to change: the one place that turns an event (why janus did not use
a graph) into advice, and logs each reason a function is not in graphs once.

Needs nothing run before it.  Every event janus records about why a call did not
run a graph (ran imperatively, recompiled, fell back, ...) gets, when it is
recorded, ``advise``'s ``(where, advice)``: the user's ``file:line`` (the line that
stopped the conversion, the assumption's line, the call that passed the argument,
or the function's ``def``) and one concrete thing to change, or that nothing needs
changing.  Both are read off the event's fields (an ``events.Event``: its
``reasons.Reason``, line, sites, assumption, cache miss), never off its message; a
refusal's advice is its ``Reason.advice``.  ``note`` logs each reason a function is
not in graphs once per function (logger ``janus``); ``explain`` shows the advice.
"""
import logging
import os
import re
import sys

from janus.trace import callables
from janus.reasons import FIX, NOTHING, Reason

log = logging.getLogger('janus')


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


def short_paths(text):
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


def error_line(error):
    lineno = getattr(error, 'lineno', None)
    if lineno is None:
        return None
    return '%s:%s' % (short_path(getattr(error, 'filename', None)), lineno)


def _sites_line(jf, sites):
    """``file:line`` of the first of ``sites`` (profile site keys) the profile knows."""
    for key in sites:
        info = jf.profile.site_info.get(key)
        if info is not None:
            return '%s:%s' % (short_path(key[0].co_filename), info.lineno)
    return None


# -- advice: read from the event's Reason (reasons.py), never from its message -----------

# Reasons about the call's arguments or all calls: ``where`` is the call's line.
_AT_THE_CALL = frozenset((Reason.NUMPY_ARGUMENT, Reason.SELF_CONTAINING_ARGUMENT,
                          Reason.DICT_KEY_ARGUMENT, Reason.SYMBOLIC_ARGUMENT,
                          Reason.RECOMPILE_LIMIT))


def reason_advice(jf, reason):
    """What to do about ``reason`` (a ``Reason``); past the recompile limit, what kept
    changing (``storm_advice``)."""
    if reason is Reason.RECOMPILE_LIMIT:
        return storm_advice(jf)
    if reason is None:   # every refusal names a Reason: a janus bug
        return Reason.INTERNAL_ERROR.advice
    return reason.advice


def imperative(jf, reason, where, sites=()):
    """``(where, advice)`` for a call that ran imperatively for ``reason``."""
    if where is None:
        where = caller_line() if reason in _AT_THE_CALL else _sites_line(jf, sites)
    return where or where_defined(jf), reason_advice(jf, reason)


def _other_path(reason):
    """Advice for a site whose outcome janus assumed because ``reason`` stopped real
    control flow there: the calls that take the other path run imperatively."""
    if reason is None or not reason.change:
        return (NOTHING + 'the graph keeps this outcome while calls rarely take the other '
                'path (janus.config.assumed_break_rate); those run imperatively')
    return (FIX + 'calls that take the other path run imperatively (fine if they are rare); '
            'to keep them in graphs, ' + reason.advice[len(FIX):])


def _assumed_reason(jf, sites):
    """The Reason janus assumed an outcome at one of ``sites`` (its "assumed instead"
    event), or None."""
    for event in reversed(jf.events):
        if str(event.kind) == 'assumed instead' and set(event.sites) & set(sites):
            return event.reason
    return None


def storm_advice(jf):
    """After config.recompile_limit graphs: what kept changing and what to change."""
    values_by_guard = jf.miss_values
    if not values_by_guard:
        return FIX + ('raise janus.config.recompile_limit (nothing in particular kept '
                      'changing)')
    (kind, where), values = max(values_by_guard.items(), key=lambda kv: len(kv[1]))
    shown = ', '.join(_clipped(str(v)) for v in values[:4]) + (', ...' if len(values) > 4
                                                                else '')
    kind = getattr(kind, 'value', kind)
    return '%s (%s on %s kept changing: %s)' % (guard_advice(kind, values), kind, where, shown)


def _clipped(text, limit=24):
    """A value as advice quotes it: at most ``limit`` characters, cut ones marked '...'."""
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _is_number(value):
    """Whether a value that missed a guard (as the guard shows it) is a number."""
    return re.fullmatch(r'-?[\d.e+-]+|inf|nan', str(value)) is not None


def guard_advice(kind, values=()):
    if kind in ('SHAPE_MATCH', 'TENSOR_MATCH'):
        return FIX + 'pad or bucket the inputs to a few shapes'
    if kind == 'ARRAY_MATCH':
        return FIX + ('pass NumPy arrays of one rank and dtype (astype before the call); a '
                      'dimension that varies is relaxed unless the code reads its size '
                      '(len(a), a.shape: use tf.shape(tf.constant(a)), or pad or bucket the '
                      'arrays to a few shapes)')
    if kind == 'DTYPE_MATCH':
        return FIX + 'pass tensors of one dtype (tf.cast before the call)'
    if kind in ('VALUE_MATCH', 'EQUALS_MATCH'):
        if values and all(_is_number(v) for v in values):
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

# Events whose advice depends on the kind alone: (where: 'caller' or 'def', advice).
_FIXED_ADVICE = {
    'fallback raised': ('caller', NOTHING + 'the call raised as it does eagerly; the graph is '
                                            'kept'),
    'graph error': ('caller', NOTHING + "the call re-ran imperatively for eager's result or "
                                        'exception'),
    'internal error': ('caller', NOTHING + 'a janus bug, not your code; the call ran as plain '
                                           'Python (please report it with this traceback)'),
    'recursive call': ('def', NOTHING + 'the inner calls run as plain Python; for graphs '
                                        'there, write the recursion as a loop'),
    'redefined': ('def', NOTHING + 'janus profiles and converts the new definition'),
    'number relaxed': ('def', NOTHING + 'the number is a graph input: one graph serves its '
                                        'values'),
    'number kept constant': ('def', NOTHING + 'a graph per value; if it keeps changing, pass '
                                              'it as a tensor'),
    'list passed whole': ('def', NOTHING + 'the list is read through itself when the graph '
                                           'runs: one graph serves every length'),
}


def advise(jf, event):
    """``(where, advice)`` for ``event`` (an ``api.Event``), from its fields: ``where``
    the user's ``file:line`` it concerns, ``advice`` one thing to change (``fix: ...``)
    or ``nothing to change: ...``; ``(None, None)`` for events that are no reason (a
    graph was built)."""
    kind = str(event.kind)
    line = error_line(event)
    if kind == 'graph built':
        return None, None
    if kind == 'imperative':
        return imperative(jf, event.reason, line, event.sites)
    if kind == 'cache miss':
        guard = getattr(getattr(event.miss, 'kind', None), 'value', '')
        return caller_line() or where_defined(jf), (
            NOTHING + 'a one-off new graph; if it repeats, ' + guard_advice(guard)[len(FIX):])
    if kind == 'fallback':
        return line or where_defined(jf), _fallback_advice(jf, event)
    if kind in _FIXED_ADVICE:
        at, advice = _FIXED_ADVICE[kind]
        return (caller_line() if at == 'caller' else None) or where_defined(jf), advice
    if kind == 'relaxed':
        return _sites_line(jf, event.sites) or where_defined(jf), (
            NOTHING + 'the next graph builds tf.cond/tf.while_loop there')
    if kind == 'graph dropped':
        return _sites_line(jf, event.sites) or where_defined(jf), _other_path(
            _assumed_reason(jf, event.sites))
    if kind == 'relaxed shapes failed':
        return line or where_defined(jf), NOTHING + 'the graph was built with exact shapes instead'
    if kind == 'profiling':
        if event.reason is not None:
            return where_defined(jf), event.reason.advice
        return where_defined(jf), (NOTHING + 'calls are profiled without per-site outcomes, '
                                   'so janus assumes less')
    if kind == 'assumed instead':
        return _sites_line(jf, event.sites) or where_defined(jf), _other_path(event.reason)
    if kind == 'graph break':
        return line or where_defined(jf), (event.reason.advice if event.reason is not None
                                           else NOTHING + 'janus handled it')
    return where_defined(jf), NOTHING + 'janus handled it'


def _fallback_advice(jf, event):
    if event.kept:
        return _other_path(_assumed_reason(jf, event.sites))
    assumption = str(event.assumption)
    if assumption in _RELAXED_KINDS:
        return (NOTHING + 'janus stops assuming this outcome; the next graph decides it '
                'in the graph (tf.cond/tf.while_loop)')
    if assumption == 'SCALAR':
        return NOTHING + 'the number is specialized by value again'
    if assumption == 'AGREEMENT':
        return NOTHING + "another rank's assumption broke; every rank re-ran the step"
    return (NOTHING + 'the check failed as eager code fails there; that call ran '
            'imperatively, with eager\'s result or exception')


# -- logging: each reason once per function ---------------------------------------------------

def annotate(jf, event):
    """``advise``'s ``(where, advice)`` for a new event, logging a new reason (``note``);
    ``(None, None)`` if that fails (bookkeeping never fails a call)."""
    try:
        where, advice = advise(jf, event)
        note(jf, event.kind, event.detail, where, advice)
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
    where, advice = imperative(jf, error.reason, error_line(error))
    return '%s (at %s); %s' % (error, where, advice)
