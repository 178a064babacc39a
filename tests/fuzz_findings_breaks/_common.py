"""Shared by the repros here: runs a function eagerly and under janus, call by call."""
import contextlib
import io
import logging
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
sys.path.insert(0, os.environ.get('JANUS_REPO', os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import janus  # noqa: E402,F401 - the repros import it from here

logging.getLogger('janus').setLevel(logging.ERROR)
tf.get_logger().setLevel('ERROR')


def run(fn, args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            r = fn(*args)
            r = ('ok', [np.asarray(v).tolist() for v in (r if isinstance(r, tuple) else (r,))])
        except Exception as e:  # noqa: BLE001 - the outcome
            r = ('raised', '%s: %s' % (type(e).__name__, e))
    return r, out.getvalue()


def functions(jf):
    """jf and its segments' janus functions, recursively."""
    found, todo = [], [jf]
    while todo:
        part = todo.pop(0)
        if getattr(part, 'state', None) is None:
            continue   # a segment running as plain Python (too little tensor work)
        found.append(part)
        splits = getattr(part.state, 'splits', None)   # one per set of break lines
        if splits is None:                               # (state.split before d4ba4bc)
            splits = {} if part.state.split is None else {None: part.state.split}
        for split in splits.values():
            todo += list(split.slots)
    return found


def internal_errors(jf):
    return [ev for part in functions(jf) for ev in part.events if ev.kind.value == 'internal error']
