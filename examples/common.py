"""The harness every example model shares: modes, seeds, timing, the CLI.

An example defines a ``Workload`` subclass: an imperative TF2 training
program (Python control flow, object state, Keras layers) plus, for the
``symbolic`` mode, the same model written by hand as a ``tf.function`` graph.
``Workload.compile`` turns a step function into what the mode runs:

    eager     the Python function itself
    janus     ``janus.function(fn)`` (``fn`` is usually a bound method, ``self.train_step``)
    symbolic  the hand-written ``tf.function`` the example passes in

Every mode builds its own fresh model from the same seed and sees the same
data, so losses are comparable step by step (``convergence``).  ``measure``
runs one mode and reports throughput (median of timed windows, warm-up
dropped), time to first graph, janus counters and peak memory.  Needs only
TensorFlow and janus; the benchmark (``benchmarks/paper_table.py``) imports it.
"""
import abc
import argparse
import os
import re
import statistics
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import janus  # noqa: E402

MODES = ('eager', 'janus', 'symbolic')


class TimedFunction:
    """Wraps what a mode runs; remembers how long building its first graph took.

    ``first_graph_seconds`` is the wall time of the call that produced the
    first graph: a ``tf.function``'s first call (trace + run), or the janus
    call that generated its first graph (convert + trace + run; the profiled
    calls before it ran eagerly and count as eager work)."""

    def __init__(self, fn, mode):
        self.fn, self.mode = fn, mode
        self.first_graph_seconds = None
        self.until_first_graph_seconds = 0.0   # every call up to it, profiled ones included
        self.janus = getattr(fn, '__janus_function__', fn) if mode == 'janus' else None

    def __call__(self, *args, **kwargs):
        if self.first_graph_seconds is not None or self.mode == 'eager':
            return self.fn(*args, **kwargs)
        started = time.perf_counter()
        result = self.fn(*args, **kwargs)
        took = time.perf_counter() - started
        self.until_first_graph_seconds += took
        if self.mode == 'symbolic' or self.janus.stats.graphs_built:
            self.first_graph_seconds = took
        return result


class Workload(abc.ABC):
    """One model's training program; subclasses set the class attributes below."""
    name = 'model'        # row in the table
    category = 'CNN'      # the paper's category
    unit = 'images'       # what one step processes (throughput unit)
    steps = 60            # default timed steps
    warmup = 10           # default steps dropped before timing (profiling, tracing)

    def __init__(self, mode, seed=0):
        if mode not in MODES:
            raise ValueError('mode must be one of %s, got %r' % (MODES, mode))
        self.mode = mode
        self.seed = seed
        self.compiled = []
        keras.utils.set_random_seed(seed)

    def compile(self, fn, symbolic=None):
        """What ``mode`` runs for the imperative step ``fn`` (``symbolic``: hand-written)."""
        if self.mode == 'eager':
            timed = TimedFunction(fn, 'eager')
        elif self.mode == 'janus':   # fn is usually a bound method: janus.function(self.train_step)
            timed = TimedFunction(janus.function(fn), 'janus')
        else:
            if symbolic is None:
                raise ValueError('%s has no symbolic version of %s' % (self.name, fn.__name__))
            timed = TimedFunction(symbolic, 'symbolic')
        self.compiled.append(timed)
        return timed

    @abc.abstractmethod
    def step(self):
        """One training iteration; returns (loss as a float, units processed)."""

    # -- what the harness reads ------------------------------------------
    def janus_functions(self):
        return [t.janus for t in self.compiled if t.janus is not None]

    def janus_stats_by_function(self):
        """{'Class.method': janus.stats} for each janus function of this workload."""
        return {getattr(jf, 'name', repr(jf)): dict(janus.stats(jf))
                for jf in self.janus_functions()}

    def janus_stats(self):
        total = {}
        for jf in self.janus_functions():
            for key, value in janus.stats(jf).items():
                total[key] = total.get(key, 0) + value
        return total

    def first_graph_seconds(self, until=False):
        """Summed over this workload's functions; None until every one built a graph.
        ``until``: the time of every call up to the first graph, not just its own."""
        timed = [t for t in self.compiled if t.mode != 'eager']
        if not timed or any(t.first_graph_seconds is None for t in timed):
            return None
        return sum(t.until_first_graph_seconds if until else t.first_graph_seconds
                   for t in timed)

    def observable_state(self):
        """What the program's objects hold (weights, optimizer slots and their
        learning rates, metrics, Python lists, tensors and numbers: step counters,
        schedules, best losses), by attribute name: compared across modes by the tests.
        Python numbers keep their type (an ``int`` counter must stay an ``int``)."""
        out = {}
        for name, value in sorted(vars(self).items()):
            if name == 'mode':
                continue
            out_value = state_of(value)
            if out_value is not None:
                out[name] = out_value
        return out

    def explain(self):
        return '\n'.join(janus.explain(jf) for jf in self.janus_functions())


def state_of(value):
    """``observable_state`` of one value; None for what it leaves out (data sets,
    environments, compiled functions)."""
    if isinstance(value, keras.layers.Layer):
        return [v.numpy() for v in value.weights]
    if isinstance(value, keras.optimizers.Optimizer):
        return [v.numpy() for v in value.variables] + [np.asarray(value.learning_rate)]
    if isinstance(value, keras.metrics.Metric):
        return [v.numpy() for v in value.variables]
    if isinstance(value, tf.Variable):
        return value.numpy()
    if isinstance(value, tf.Tensor):
        return ('tensor', value.dtype.name, value.numpy())
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, (tf.Tensor, float, int)) for v in tf.nest.flatten(value)):
        return [state_of(v) for v in tf.nest.flatten(value)]
    if isinstance(value, (bool, int, float, str)):
        return value
    return None


def peak_rss_reset():
    """Resets this process's peak resident set size (Linux); False where unsupported."""
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        return True
    except OSError:
        return False


def peak_rss_mib():
    with open('/proc/self/status') as f:
        match = re.search(r'VmHWM:\s+(\d+) kB', f.read())
    return int(match.group(1)) / 1024 if match else float('nan')


class Runner:
    """One mode of one model, stepped window by window, so that a benchmark can
    interleave modes (a shared machine's slow drifts then hit every mode alike).

    ``knobs`` are ``janus.config`` settings in force for this runner's steps."""

    def __init__(self, workload_cls, mode, seed=0, knobs=None):
        self.knobs = dict(knobs or {})
        peak_rss_reset()
        with janus.config.patch(**self.knobs):
            self.workload = workload_cls(mode, seed=seed)
        self.mode, self.losses, self.rates, self.step_rates = mode, [], [], []
        self.peak_rss_mib = None

    def run(self, steps):
        """Runs ``steps`` steps; returns (units processed, seconds)."""
        units, started = 0, time.perf_counter()
        with janus.config.patch(**self.knobs):
            for _ in range(steps):
                loss, count = self.workload.step()
                self.losses.append(float(loss))
                units += count
        return units, time.perf_counter() - started

    def warm_up(self, steps):
        """Untimed steps (profiling, tracing); peak memory is read after them."""
        self.run(steps)
        self.peak_rss_mib = peak_rss_mib()

    def timed_window(self, steps):
        units, seconds = self.run(steps)
        self.rates.append(units / seconds)
        self.step_rates.append(steps / seconds)

    def result(self):
        w = self.workload
        return dict(model=w.name, category=w.category, unit=w.unit, mode=self.mode,
                    throughput=statistics.median(self.rates) if self.rates else float('nan'),
                    rates=self.rates, losses=self.losses,
                    steps_per_s=(statistics.median(self.step_rates) if self.step_rates
                                 else float('nan')),
                    steps_run=len(self.losses),
                    first_graph_seconds=w.first_graph_seconds(),
                    until_first_graph_seconds=w.first_graph_seconds(until=True),
                    janus=w.janus_stats() if self.mode == 'janus' else {},
                    janus_by_function=(w.janus_stats_by_function() if self.mode == 'janus'
                                       else {}),
                    peak_rss_mib=self.peak_rss_mib, workload=w)


def measure_interleaved(workload_cls, stages, steps=None, warmup=None, window=5, seed=0):
    """Each (mode, knobs) stage gets a fresh workload, warmed up one after the
    other (peak memory: that stage's construction, profiling and tracing);
    then the stages take turns, ``window`` timed steps each, in rotating order.
    Every stage runs ``warmup + steps`` steps.  Returns one result per stage."""
    steps = workload_cls.steps if steps is None else steps
    warmup = workload_cls.warmup if warmup is None else warmup
    runners = []
    for mode, knobs in stages:
        runners.append(Runner(workload_cls, mode, seed, knobs))
        runners[-1].warm_up(warmup)
    for turn in range(steps // window):
        for k in range(len(runners)):
            runners[(turn + k) % len(runners)].timed_window(window)
    for runner in runners:
        runner.run(steps % window)   # the remainder: untimed, so losses line up
    return [runner.result() for runner in runners]


def measure(workload_cls, mode, steps=None, warmup=None, window=5, seed=0):
    """One mode alone: ``warmup`` untimed steps, then ``steps`` timed ones.

    Returns a dict: throughput (units/s, median over windows of ``window``
    timed steps), losses (every step), first-graph seconds, janus counters,
    peak RSS (MiB) up to the end of warm-up, and the workload itself."""
    return measure_interleaved(workload_cls, [(mode, {})], steps, warmup, window, seed)[0]


def main(workload_cls, argv=None):
    """``python examples/<model>.py --mode eager|janus|symbolic [--steps N]``."""
    parser = argparse.ArgumentParser(description='%s (%s): train and report throughput'
                                     % (workload_cls.name, workload_cls.category))
    parser.add_argument('--mode', choices=MODES, default='janus')
    parser.add_argument('--steps', type=int, default=workload_cls.steps)
    parser.add_argument('--warmup', type=int, default=workload_cls.warmup)
    parser.add_argument('--explain', action='store_true', help='print janus.explain at the end')
    args = parser.parse_args(argv)
    result = measure(workload_cls, args.mode, args.steps, args.warmup)
    losses = result['losses']
    print('%s, %s mode: %d steps (%d warm-up), loss %.4f -> %.4f, %.1f %s/s, %.1f steps/s '
          '(median)' % (result['model'], args.mode, args.steps, args.warmup, losses[0],
                        losses[-1], result['throughput'], result['unit'], result['steps_per_s']))
    if result['first_graph_seconds'] is not None:
        print('  first graph: %.2f s' % result['first_graph_seconds'])
    if args.mode == 'janus':
        print('  janus: %s' % result['janus'])
        if args.explain:
            print(result['workload'].explain())
    return result
