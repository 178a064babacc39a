"""CLI: ``python -m tests.fuzzing --seed S --programs N [--out DIR]``.

Runs programs ``generate(S, start) .. generate(S, start + N - 1)``, prints a
summary (programs, calls, share of calls that ran a graph, divergences by
kind, janus errors, throughput) and, with ``--out``, writes each divergence as
a minimized standalone repro file (``DIR/<kind>_<seed>_<index>.py``) plus
``DIR/summary.json``.  Exit status: 0 when nothing diverged, 1 otherwise, 3
when a program hung inside TensorFlow (its repro is written first).
"""
import argparse
import collections
import json
import os
import sys
import threading
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python -m tests.fuzzing', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--seed', default='0', help='seed (any string; default 0)')
    ap.add_argument('--programs', type=int, default=100, help='how many programs (default 100)')
    ap.add_argument('--start', type=int, default=0, help='index of the first program')
    ap.add_argument('--out', default=None, help='directory for repro files and summary.json')
    ap.add_argument('--minimize-seconds', type=float, default=60.0,
                    help='time budget per divergence for minimization (default 60)')
    ap.add_argument('--max-minimize', type=int, default=3,
                    help='minimize at most this many divergences per signature (default 3); '
                         'the rest are written as generated')
    ap.add_argument('--no-minimize', action='store_true')
    ap.add_argument('--time-limit', type=int, default=120, help='seconds per program (default 120)')
    ap.add_argument('--only', type=int, default=None,
                    help='run just program number ONLY, verbosely (with --out: minimize it too)')
    ap.add_argument('--skip', default='',
                    help='comma-separated feature names never to generate (masks a known '
                         'divergence; changes the programs of the seed)')
    ap.add_argument('--focus', default='',
                    help='comma-separated feature names drawn programs.FOCUS_WEIGHT (10) times '
                         'as often, mixed with the others (changes the programs of the seed)')
    ap.add_argument('--eager-vs-eager', action='store_true',
                    help='check the fuzzer itself: both sides eager, any divergence is a '
                         'false positive of the comparison')
    ap.add_argument('-v', '--verbose', action='store_true', help='one line per program')
    args = ap.parse_args(argv)

    import logging
    logging.getLogger('janus').setLevel(logging.ERROR)
    import tensorflow as tf
    tf.get_logger().setLevel('ERROR')
    from . import minimize as minimize_mod
    from . import programs, runner

    skip = tuple(n for n in args.skip.split(',') if n)
    focus = tuple(n for n in args.focus.split(',') if n)
    unknown = [n for n in skip + focus
               if n not in programs.FEATURES and n not in programs.WRAPPERS]
    if unknown:
        ap.error('unknown features %s; known: %s' % (unknown, ', '.join(
            list(programs.FEATURES) + list(programs.WRAPPERS))))
    if args.only is not None:
        program = programs.generate(args.seed, args.only, skip, focus)
        print(programs.render(program))
        result = runner.run_program(program, time_limit=args.time_limit, verbose=True)
        d = result.divergence
        print(d.describe() if d else 'no divergence')
        if d and args.out:
            os.makedirs(args.out, exist_ok=True)
            small, small_d = program, d
            if not args.no_minimize:
                small, small_d = minimize_mod.minimize(program, d, seconds=args.minimize_seconds,
                                                       trials=10 ** 6,
                                                       time_limit=min(args.time_limit, 60))
            path = os.path.join(args.out, '%s_%s_%d.py' % (d.kind, _slug(args.seed), args.only))
            with open(path, 'w') as f:
                f.write(repro_text(small, small_d, args.seed, args.only, original=program,
                                   skip=skip, focus=focus))
            print('minimized (%d lines, %d steps): %s' % (small.source.count('\n'),
                                                          len(small.steps), path))
        return 1 if d else 0

    if args.out:
        os.makedirs(args.out, exist_ok=True)
    totals = collections.Counter()
    kinds = collections.Counter()
    signatures = collections.Counter()
    eager_errors = collections.Counter()
    features = collections.Counter()
    by_feature = collections.defaultdict(collections.Counter)   # feature -> kind -> programs
    with_graph = collections.Counter()    # feature -> programs that ran at least one graph
    records = []
    start = time.time()
    for index in range(args.start, args.start + args.programs):
        program = programs.generate(args.seed, index, skip, focus)
        watchdog = _Watchdog(2 * args.time_limit + 30, args.out, args.seed, index, program)
        with watchdog:
            result = runner.run_program(program, time_limit=args.time_limit,
                                        use_janus=not args.eager_vs_eager)
        totals['programs'] += 1
        totals['calls'] += result.janus_calls
        totals['graph_calls'] += result.graph_calls
        totals['graphs_built'] += result.graphs_built
        totals['fallbacks'] += result.fallbacks
        totals['split_calls'] += result.split_calls
        totals['graph_part_calls'] += result.graph_part_calls
        totals['segment_graph_calls'] += result.segment_graph_calls
        totals['programs_split'] += bool(result.split_calls)
        totals['programs_break_features'] += any(f in programs.BREAK_FEATURES
                                                 for f in program.features)
        totals['eager_raised'] += result.eager_raised
        totals['steps'] += result.calls
        eager_errors.update(result.eager_errors)
        features.update(f for f in program.features)
        if result.graph_calls:
            with_graph.update(program.features)
        d = result.divergence
        if args.verbose:
            print('%5d %5.2fs calls=%2d graph=%2d split=%2d %s%s' % (
                index, result.seconds, result.janus_calls, result.graph_calls, result.split_calls,
                ','.join(program.features), ('  ' + d.describe()[:200]) if d else ''))
        if d is None:
            continue
        kinds[d.kind] += 1
        signatures[d.signature] += 1
        for f in program.features:
            by_feature[f][d.kind] += 1
        record = {'seed': args.seed, 'index': index, 'kind': d.kind, 'detail': d.detail,
                  'signature': list(d.signature), 'step': d.step, 'where': d.where,
                  'eager': runner._short(str(d.eager)), 'janus': runner._short(str(d.janus)),
                  'features': list(program.features)}
        small, small_d = program, d
        if not args.no_minimize and signatures[d.signature] <= args.max_minimize:
            small, small_d = minimize_mod.minimize(program, d, seconds=args.minimize_seconds,
                                                   time_limit=min(args.time_limit, 60))
            record['minimized'] = True
        record['lines'] = small.source.count('\n')
        record['steps'] = len(small.steps)
        if args.out:
            name = '%s_%s_%d.py' % (d.kind, _slug(args.seed), index)
            path = os.path.join(args.out, name)
            with open(path, 'w') as f:
                f.write(repro_text(small, small_d, args.seed, index, original=program,
                                   skip=skip, focus=focus))
            record['repro'] = path
        print('DIVERGENCE program %d: %s' % (index, small_d.describe()[:300]), flush=True)
        records.append(record)
    elapsed = time.time() - start
    summary = _summary(totals, kinds, signatures, eager_errors, elapsed, args,
                       _by_feature(features, with_graph, by_feature, focus))
    print(summary)
    if args.out:
        with open(os.path.join(args.out, 'summary.json'), 'w') as f:
            json.dump({'seed': args.seed, 'start': args.start, 'programs': args.programs,
                       'totals': dict(totals), 'kinds': dict(kinds),
                       'signatures': [[list(k), v] for k, v in signatures.most_common()],
                       'eager_errors': dict(eager_errors), 'features': dict(features),
                       'feature_divergences': {f: dict(c) for f, c in by_feature.items()},
                       'feature_graphs': dict(with_graph),
                       'seconds': elapsed, 'divergences': records}, f, indent=1)
    return 1 if records else 0


def _slug(seed):
    return ''.join(c if c.isalnum() else '_' for c in str(seed))


def _by_feature(features, with_graph, by_feature, focus):
    """Lines per feature (those of --focus, and those of diverging programs): programs
    containing it, how many of them ran a graph, how many diverged (by kind)."""
    names = [f for f in features if f in focus or f in by_feature]
    if not names:
        return []
    lines = ['by feature (programs containing it: ran a graph / diverged; a program counts '
             'for each of its features; ~: control-flow wrappers):']
    for f in sorted(names, key=lambda n: (n not in focus, -sum(by_feature[n].values()), n)):
        c = by_feature[f]
        lines.append('  %-18s %4d programs: graph %4d / diverged %3d%s' % (
            f, features[f], with_graph[f], sum(c.values()),
            '  (%s)' % ', '.join('%s %d' % kv for kv in c.most_common()) if c else ''))
    return lines


def _summary(totals, kinds, signatures, eager_errors, elapsed, args, feature_lines=()):
    calls = totals['calls']
    share = 100.0 * totals['graph_calls'] / calls if calls else 0.0
    lines = [
        '== janus fuzz: seed %s, programs %d..%d ==' % (args.seed, args.start,
                                                         args.start + args.programs - 1),
        'programs: %d in %.0f s (%.1f programs/min)' % (
            totals['programs'], elapsed, 60.0 * totals['programs'] / max(elapsed, 1e-9)),
        'calls: %d (graphs built %d, graph calls %d = %.1f%% of calls, fallbacks %d; '
        '%d calls raised eagerly)' % (calls, totals['graphs_built'], totals['graph_calls'], share,
                                      totals['fallbacks'], totals['eager_raised']),
        'graph breaks: %d programs ran split (%d have a break_* feature); %d split calls, '
        '%d of them ran a graph segment; segments ran %d graphs' % (
            totals['programs_split'], totals['programs_break_features'], totals['split_calls'],
            totals['graph_part_calls'], totals['segment_graph_calls']),
        'diverging programs: %d' % sum(kinds.values()),
    ]
    for kind, n in kinds.most_common():
        lines.append('  %-14s %d' % (kind, n))
    lines.append('janus errors: %d' % kinds.get('janus-error', 0))
    if signatures:
        lines.append('by signature (kind, detail, state root):')
        for sig, n in signatures.most_common():
            lines.append('  %3d  %s' % (n, ' '.join(s for s in sig if s)))
    lines += feature_lines
    if eager_errors:
        lines.append('exceptions raised eagerly (the programs\' own): %s' % ', '.join(
            '%s %d' % kv for kv in eager_errors.most_common()))
    return '\n'.join(lines)


def repro_text(program, divergence, seed, index, original=None, skip=(), focus=()):
    """A standalone script reproducing ``divergence`` (needs this checkout)."""
    from . import runner
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    steps = ',\n'.join('    %r' % (s,) for s in program.steps)
    lines = runner.describe_steps(program, divergence).split('\n')
    header = [
        '# janus fuzz repro: %s divergence (python -m tests.fuzzing --seed %s --only %d%s)'
        % (divergence.kind, seed, index, (' --skip ' + ','.join(skip) if skip else '') +
           (' --focus ' + ','.join(focus) if focus else '')),
        '# %s' % divergence.describe().replace('\n', ' ')[:600],
        '# Minimized from %d to %d source lines, %d to %d steps.' % (
            original.source.count('\n') if original else 0, program.source.count('\n'),
            len(original.steps) if original else 0, len(program.steps)),
        '# The program is exec\'d twice: `jit` is the identity (eager) or janus.function.',
        '# Call sequence:',
    ] + ['#   ' + ln for ln in lines]
    if divergence.traceback:
        tb_lines = [ln for ln in divergence.traceback.rstrip().split('\n') if ln.strip()]
        header += ['# janus traceback (last lines):'] + ['#   ' + ln for ln in tb_lines[-12:]]
    return '\n'.join(header) + '''
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
sys.path.insert(0, os.environ.get('JANUS_REPO', %r))

PROGRAM = %s

STEPS = [
%s,
]

if __name__ == '__main__':
    from tests.fuzzing.programs import Program
    from tests.fuzzing.runner import run_program
    result = run_program(Program(%r, PROGRAM, STEPS), verbose=True)
    d = result.divergence
    print('VERDICT:', 'CONFIRMED (%%s)' %% d.describe() if d else 'not reproduced')
''' % (repo, _triple_quote(program.source), steps, program.name)


def _triple_quote(source):
    if "'''" in source or '\\' in source:
        return repr(source)
    return "'''\\\n%s'''" % source


class _Watchdog:
    """Writes the current program and exits if it runs far past its limit (a hang
    inside TensorFlow, where SIGALRM cannot interrupt)."""

    def __init__(self, seconds, out, seed, index, program):
        self.seconds, self.out, self.seed, self.index, self.program = \
            seconds, out, seed, index, program
        self.timer = None

    def __enter__(self):
        self.timer = threading.Timer(self.seconds, self._fire)
        self.timer.daemon = True
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()
        return False

    def _fire(self):
        from . import runner
        d = runner.Divergence('hang', -1, 'time', 'finished', 'hung past %ds' % self.seconds)
        print('HANG program %d (seed %s): exiting' % (self.index, self.seed), flush=True)
        if self.out:
            path = os.path.join(self.out, 'hang_%s_%d.py' % (_slug(self.seed), self.index))
            with open(path, 'w') as f:
                f.write(repro_text(self.program, d, self.seed, self.index))
        os._exit(3)


if __name__ == '__main__':
    sys.exit(main())
