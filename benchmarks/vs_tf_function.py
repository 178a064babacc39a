"""janus against the hand-written tf.function, step by step, with janus variants side by side.

For each example model (``examples/``), one process builds a janus workload per
variant and the symbolic (``tf.function``) workload, warms each up, then runs
them in turns of one step, rotating the order, for ``--steps`` rounds.  Reports
medians of wall and process CPU time per step, and each janus variant's ratio
to the tf.function (tf.function's time / janus's: above 1 is faster).  Also
times the graphs alone (the ConcreteFunction each mode runs, fed its last
inputs), so the gap splits into graph time and per-call Python.

Variants (janus internals switched at trace time, for before/after comparisons
in one process, where a shared machine's drifts hit every variant alike):

    janus       the defaults
    graphcheck  every Janus>Assert and Python call stays in the graph
                (``graphgen/hostcheck.py`` off)
    before      graphcheck, guards checked one by one and call-time inputs
                evaluated through TF's own re-checks (``janus.config.fast_replay``
                off): janus before these changes (but for reusing a relaxed
                number's tensor while it is unchanged)

    python benchmarks/vs_tf_function.py --models lstm,lenet [--steps 100]
        [--variants janus,graphcheck,before]
"""
import argparse
import contextlib
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'examples'))
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import common  # noqa: E402
import janus  # noqa: E402
from tensorflow.python.eager.polymorphic_function import concrete_function  # noqa: E402

MODELS = {'lenet': ('lenet', 'LeNet'), 'resnet': ('resnet', 'ResNet'),
          'lstm': ('lstm_lm', 'LSTMLanguageModel'), 'treernn': ('tree_rnn', 'TreeRNN'),
          'a3c': ('a3c', 'A3C'), 'gan': ('gan', 'GAN'), 'keras': ('keras_loop', 'KerasLoop')}


@contextlib.contextmanager
def variant(name):
    with janus.config.patch(host_checks=name not in ('graphcheck', 'before'),
                            fast_replay=name != 'before'):
        yield


class Recorder:
    """Remembers the outermost ConcreteFunction flat call of each stage (graph timing)."""

    def __init__(self):
        self.stage, self.calls, self.depth, self.in_graph = None, {}, 0, 0.0
        self.original = concrete_function.ConcreteFunction._call_flat
        recorder = self

        def call_flat(fn, args, captured_inputs):
            if recorder.depth == 0 and recorder.stage is not None:
                recorder.calls.setdefault(recorder.stage, {})[id(fn)] = (fn, list(args),
                                                                        list(captured_inputs))
            recorder.depth += 1
            started = time.perf_counter()
            try:
                return recorder.original(fn, args, captured_inputs)
            finally:
                recorder.depth -= 1
                if recorder.depth == 0:
                    recorder.in_graph += time.perf_counter() - started
        concrete_function.ConcreteFunction._call_flat = call_flat

    def graph_call(self, stage):
        """A no-argument call of the stage's slowest recorded graph, or None."""
        found = list(self.calls.get(stage, {}).values())
        if not found:
            return None
        def timed(c):
            started = time.perf_counter()
            self.original(*c)
            return time.perf_counter() - started
        fn, args, captured = max(found, key=timed)
        return lambda: self.original(fn, args, captured)


def run_model(model, variants, steps, graph_calls):
    module, cls = MODELS[model]
    workload = getattr(__import__(module), cls)
    recorder = Recorder()
    stages = [(v, 'janus') for v in variants] + [('tf.function', 'symbolic')]
    runners = {}
    for name, mode in stages:
        recorder.stage = name
        with variant(name):
            runners[name] = common.Runner(workload, mode)
            runners[name].warm_up(workload.warmup)
    wall = {name: [] for name, _ in stages}
    cpu = {name: [] for name, _ in stages}
    python = {name: [] for name, _ in stages}   # step wall minus its graph calls
    names = [name for name, _ in stages]
    for turn in range(steps):
        for k in range(len(names)):
            name = names[(turn + k) % len(names)]
            recorder.stage = name
            with variant(name):
                recorder.in_graph = 0.0
                c, t = time.process_time(), time.perf_counter()
                runners[name].run(1)
                wall[name].append(time.perf_counter() - t)
                python[name].append(wall[name][-1] - recorder.in_graph)
                cpu[name].append(time.process_time() - c)
    recorder.stage = None
    graph = {name: [] for name in names}
    calls = {name: recorder.graph_call(name) for name in names}
    for turn in range(graph_calls):
        for k in range(len(names)):
            name = names[(turn + k) % len(names)]
            if calls[name] is not None:
                t = time.perf_counter()
                calls[name]()
                graph[name].append(time.perf_counter() - t)
    base = {key: statistics.median(series['tf.function']) for key, series in
            (('wall', wall), ('cpu', cpu))}
    gbase = statistics.median(graph['tf.function']) if graph['tf.function'] else None
    print('%s (%d interleaved steps each; ratio = tf.function time / this time)' % (model, steps))
    for name in names:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        g = statistics.median(graph[name]) if graph[name] else float('nan')
        print('  %-12s step wall %7.2f ms (%.3fx)  cpu %7.2f ms (%.3fx)  outside graphs %5.2f ms'
              '  graph alone %7.2f ms (%.3fx)' % (
                  name, w * 1e3, base['wall'] / w, c * 1e3, base['cpu'] / c,
                  statistics.median(python[name]) * 1e3, g * 1e3,
                  gbase / g if gbase else float('nan')), flush=True)
    for name in variants:
        stats = runners[name].workload.janus_stats()
        print('  %-12s graphs %d, graph calls %d / %d, fallbacks %d' % (
            name, stats.get('graphs_built', 0), stats.get('graph_calls', 0),
            stats.get('calls', 0), stats.get('fallbacks', 0)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--models', default='lenet,lstm,resnet')
    parser.add_argument('--variants', default='janus,before')
    parser.add_argument('--steps', type=int, default=100)
    parser.add_argument('--graph-calls', type=int, default=100)
    args = parser.parse_args()
    for model in args.models.split(','):
        run_model(model, args.variants.split(','), args.steps, args.graph_calls)


if __name__ == '__main__':
    main()
