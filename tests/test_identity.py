"""Object identity: writes bind their target when the statement runs, and `is` means `is`.

Eagerly, ``self.front.data = x`` changes the object ``self.front`` names when
that statement runs, even if an earlier statement of the call rebound
``self.front``; a tensor passed again is the very tensor kept from the last
call; a list passed as an argument and read through an attribute is one list;
two empty lists are two lists.  Each test runs a program eagerly and under
janus on fresh objects, changes the program's state from outside between
calls so an assumption breaks mid-way, and compares returns, stdout, state
and the identities the program relies on after every call.

PYTEST_DONT_REWRITE: programs under test use `assert`.
"""
import tensorflow as tf

import janus
from test_outside_values import (Box, c, converted, heap_path, imperative,  # noqa: F401
                                 plan, run_both)


# ---------------------------------------------------------------------------
# Writes bind their target when the statement runs (write-back order)
# ---------------------------------------------------------------------------

class Frame:
    def __init__(self, name):
        self.name = name
        self.data = tf.zeros([2])
        self.hist = []


class DoubleBuffer:
    def __init__(self):
        self.front = Frame('A')
        self.back = Frame('B')
        self.flips = 0

    def render(self, x):
        done = self.front               # swap through a temporary
        self.front = self.back
        self.back = done
        self.front.data = x             # the old back buffer
        self.back.hist.append(self.flips)   # the old front buffer's list
        self.flips += 1
        return self.front.data + 1.0


def _frames(b):
    return [(f.name, f.data, list(f.hist)) for f in (b.front, b.back)] + [b.flips]


def _new_back(b):
    b.back = Frame('C')                 # the caller replaces a buffer mid-way


def test_double_buffer_swap_then_writes(strict, heap_path):
    jf = run_both(lambda: (DoubleBuffer.render, DoubleBuffer()),
                  plan(lambda b, i: ((b, c([float(i), 1.0])), {}), 9, {5: _new_back}),
                  state=_frames,
                  same=lambda b, r: (b.front is not b.back,))
    converted(jf)


class Pair:
    def __init__(self):
        self.x = Frame('x')
        self.y = Frame('y')

    def step(self, t):
        self.x, self.y = self.y, self.x      # tuple-unpacking swap
        self.x.data = self.x.data + t        # attribute writes through the new names
        self.y.data = t * 2.0
        self.y.name = self.y.name + '!'
        return self.x.data


def test_tuple_unpacking_swap_then_attribute_writes(strict, heap_path):
    def untie(p):
        p.y = Frame('z')

    jf = run_both(lambda: (Pair.step, Pair()),
                  plan(lambda p, i: ((p, c([1.0, float(i)])), {}), 8, {4: untie}),
                  state=lambda p: [(f.name, f.data) for f in (p.x, p.y)])
    converted(jf)


class Tables:
    def __init__(self):
        self.tables = {'cur': {'loss': c(0.0)}, 'old': {'loss': c(-1.0)}}

    def log(self, loss):
        tables = self.tables
        tables['cur'], tables['old'] = tables['old'], tables['cur']   # rotate
        tables['cur']['loss'] = loss            # the dict that was 'old'
        return tables['old']['loss'] + loss


def test_dict_items_swapped_then_item_written(strict, heap_path):
    def fresh(t):
        t.tables['old'] = {'loss': c(5.0)}

    jf = run_both(lambda: (Tables.log, Tables()),
                  plan(lambda t, i: ((t, c(float(i))), {}), 8, {5: fresh}),
                  state=lambda t: [dict(d) for d in t.tables.values()])
    converted(jf)


def test_insert_then_write_through_the_shifted_index(strict, heap_path):
    def make():
        q = Box(slots=[Box(v=c(1.0)), Box(v=c(2.0))], spare=Box(v=c(0.0)))

        def step(x):
            q.slots.insert(0, q.spare)       # indices shift ...
            q.slots[1].v = x                 # ... so this is the object at [0] before
            return x * 2.0
        return step, q

    def trim(q):
        del q.slots[:-2]                     # the caller keeps the last two slots

    jf = run_both(make, plan(lambda q, i: ((c(float(i)),), {}), 8,
                             {i: trim for i in range(1, 8)}),
                  state=lambda q: [s.v for s in q.slots] + [q.spare.v],
                  same=lambda q, r: tuple(s is q.spare for s in q.slots))
    converted(jf)


class Chain:
    def __init__(self):
        self.last = c(0.0)
        self.seen = {'x': c(0.0)}
        self.count: int = 0

    def step(self, x):
        self.last = out = self.seen['x'] = x * 2.0     # several targets, left to right
        self.count: int = self.count + 1               # an annotated attribute write
        return out + self.last


def test_chained_and_annotated_attribute_writes(strict):
    jf = run_both(lambda: (Chain.step, Chain()),
                  plan(lambda ch, i: ((ch, c(float(i))), {}), 8,
                       {5: lambda ch: ch.seen.update(x=c(-1.0))}),
                  state=lambda ch: (ch.last, dict(ch.seen), ch.count),
                  same=lambda ch, r: (ch.last is ch.seen['x'],))
    converted(jf)


def _loop_program(with_else):
    def make():
        box = Box(i=-1, total=c(0.0))

        def f(x, n):
            for box.i in range(n):                   # the loop target is an attribute
                if box.i == 2:
                    break
                box.total = box.total + x
            return box.total

        def g(x, n):
            for box.i in range(n):
                box.total = box.total + x
            else:
                box.total = box.total * 2.0
            return box.total
        return (g if with_else else f), box
    return make


def test_a_loop_target_that_is_an_attribute():
    jf = run_both(_loop_program(False), plan(lambda b, i: ((c(1.0), i % 4), {}), 8),
                  state=lambda b: (b.i, b.total))
    converted(jf)
    # A loop that keeps Python's shape (for/else) would write its target at trace time.
    jf = run_both(_loop_program(True), plan(lambda b, i: ((c(1.0), i % 4), {}), 8),
                  state=lambda b: (b.i, b.total))
    imperative(jf, 'attribute writes only as')


# ---------------------------------------------------------------------------
# `is` between tensors: memoization by identity, tied tensors in state
# ---------------------------------------------------------------------------

class Memo:
    """Caches the last result; the same input tensor passed again is a hit."""

    def __init__(self):
        self.last_x = None
        self.last_y = None
        self.hits = 0
        self.misses = 0
        self.xs = [tf.constant([float(i), 1.0]) for i in range(6)]

    def lookup(self, x):
        if self.last_x is not None and x is self.last_x:
            self.hits += 1
            return self.last_y
        self.misses += 1
        y = tf.sin(x) * 2.0
        self.last_x = x
        self.last_y = y
        return y


def test_memoization_by_identity_hits_and_misses(strict):
    order = [0, 1, 2, 3, 3, 4, 4, 4, 5, 1, 1, 2, 2, 0]

    def forget(m):
        m.last_x = None                      # the caller clears the cache mid-way

    jf = run_both(lambda: (Memo.lookup, Memo()),
                  plan(lambda m, i: ((m, m.xs[order[i]]), {}), len(order), {10: forget}),
                  state=lambda m: (m.hits, m.misses),
                  same=lambda m, r: (r is m.last_y, m.last_x is m.xs[order[0]]))
    converted(jf, graphs=2)
    assert 'ALIAS_MATCH' in janus.explain(jf)


class Tied:
    """A target kept as the online tensor itself until the caller unties them."""

    def __init__(self):
        self.online = tf.constant([1.0, 2.0])
        self.target = self.online

    def step(self, g):
        tied = self.target is self.online    # two hoisted tensors compared
        self.online = self.online - 0.1 * g
        if tied:
            return self.online * 1.0
        if self.target is not None:
            return self.target + self.online
        return -self.online


def test_identity_of_two_tensors_kept_in_state(strict):
    def retie(t):
        t.target = t.online

    def drop(t):
        t.target = None

    jf = run_both(lambda: (Tied.step, Tied()),
                  plan(lambda t, i: ((t, c([1.0, 1.0])), {}), 10, {3: retie, 6: drop, 8: retie}),
                  state=lambda t: (t.online, t.target),
                  same=lambda t, r: (t.target is t.online,))
    converted(jf)


def test_a_tensor_argument_compared_with_itself_through_state(strict):
    """``x is self.seen`` before and after the call wrote ``self.seen = x``."""
    def make():
        box = Box(seen=c(0.0), xs=[c(3.0), c(4.0)])

        def f(x):
            before = x is box.seen
            box.seen = x
            return (x * 10.0 if before else x + 1.0), x is box.seen
        return f, box

    jf = run_both(make, plan(lambda b, i: ((b.xs[i % 3 // 2],), {}), 9),
                  state=lambda b: b.seen,
                  same=lambda b, r: (b.seen is b.xs[0], b.seen is b.xs[1]))
    converted(jf)


class Best:
    """Keeps the best input seen; an input that does not win leaves it as it was."""

    def __init__(self):
        self.best = tf.constant([0.0, 0.0])
        self.kept = 0
        self.xs = [tf.constant([float(i % 4) - 1.0, 1.0]) for i in range(6)]

    def offer(self, x):
        if tf.reduce_sum(x) > tf.reduce_sum(self.best):
            keep = x
        else:
            keep = self.best
        if keep is self.best:                # known only when the graph runs
            self.kept += 1
        self.best = keep
        return keep


def test_a_tensor_chosen_by_a_tensor_test_keeps_its_identity(strict):
    def call(b, i):
        return (b, b.best if i == 7 else b.xs[i % 6]), {}

    jf = run_both(lambda: (Best.offer, Best()), plan(call, 10, {5: lambda b: setattr(
        b, 'best', tf.constant([-9.0, 0.0]))}),
                  state=lambda b: (b.best, b.kept),
                  same=lambda b, r: (r is b.best,) + tuple(r is x for x in b.xs))
    converted(jf)


class RefCache:
    """Caches results keyed by the input tensor's identity (``x.ref()``)."""

    def __init__(self):
        self.cache = {}
        self.xs = [tf.constant([float(i), 2.0]) for i in range(3)]

    def lookup(self, x):
        key = x.ref()
        if key in self.cache:
            return self.cache[key]
        y = x * 3.0
        self.cache[key] = y
        return y


def test_results_cached_by_tensor_reference():
    order = [0, 1, 1, 2, 0, 2, 2, 1]
    jf = run_both(lambda: (RefCache.lookup, RefCache()),
                  plan(lambda r, i: ((r, r.xs[order[i]]), {}), len(order),
                       {5: lambda r: r.cache.clear()}),
                  state=lambda r: sorted(float(y[0]) for y in r.cache.values()),
                  same=lambda r, y: (y is r.cache.get(r.xs[0].ref()),))
    imperative(jf, 'tensor.ref()')


# ---------------------------------------------------------------------------
# Containers reached two ways are one object
# ---------------------------------------------------------------------------

class Holder:
    def __init__(self):
        self.items = [c(1.0), c(2.0)]
        self.spare = [c(7.0), c(8.0)]

    def step(self, x, buf):
        buf[0] = x                           # written through the argument ...
        return self.items[0] * 2.0 + buf[1]  # ... read through the attribute


def test_list_argument_also_read_through_an_attribute(strict, heap_path):
    names = ['items'] * 6 + ['spare'] * 3 + ['items'] * 2

    jf = run_both(lambda: (Holder.step, Holder()),
                  plan(lambda h, i: ((h, c(float(i + 10)), getattr(h, names[i])), {}),
                       len(names)),
                  state=lambda h: (h.items, h.spare))
    converted(jf, graphs=2)
    assert 'ALIAS_MATCH' in janus.explain(jf)


class Stats:
    def __init__(self):
        self.stats = {'loss': c(0.0), 'n': c(0)}
        self.history = []

    def record(self, loss, table, log):
        self.stats['loss'] = loss            # written through the attribute ...
        self.history.append(table['loss'])   # ... read through the argument
        log.append(loss)                     # appended through the argument ...
        return len(self.history), len(log)   # ... counted through the attribute


def test_dict_and_list_arguments_aliasing_attributes(strict):
    def split(s):
        s.other = {'loss': c(-1.0), 'n': c(0)}

    def call(s, i):
        table = s.other if hasattr(s, 'other') else s.stats
        return (s, c(float(i)), table, s.history), {}

    jf = run_both(lambda: (Stats.record, Stats()),
                  plan(call, 9, {6: split}),
                  state=lambda s: (s.stats, s.history))
    converted(jf)


# ---------------------------------------------------------------------------
# A merge across a tensor-dependent if never unifies distinct objects
# ---------------------------------------------------------------------------

class Buckets:
    def __init__(self):
        self.pos = []
        self.neg = []


def _clear(b):
    b.pos.clear()
    b.neg.clear()


SIGNS = [1, -1, 1, -1, -1, 1, -1, 1, 1, -1, -1, 1]


def test_bucket_chosen_by_tensor_sign(strict):
    def make():
        b = Buckets()

        def f(x):
            s = tf.reduce_sum(x)
            if s > 0:
                bucket = b.pos
            else:
                bucket = b.neg
            bucket.append(1)
            bucket.extend([s, 2])
            return s
        return f, b

    jf = run_both(make, plan(lambda b, i: ((c([float(SIGNS[i]), 0.5 * SIGNS[i]]),), {}),
                             len(SIGNS), {i: _clear for i in range(3, len(SIGNS), 4)}),
                  state=lambda b: (list(b.pos), list(b.neg)))
    converted(jf, graphs=1)


def test_a_chosen_bucket_read_again_runs_imperatively():
    def make():
        b = Buckets()

        def f(x):
            if tf.reduce_sum(x) > 0:
                bucket = b.pos
            else:
                bucket = b.neg
            bucket.append(x)
            return len(bucket)              # what it holds depends on the run
        return f, b

    jf = run_both(make, plan(lambda b, i: ((c([float(SIGNS[i])]),), {}), len(SIGNS),
                             {i: _clear for i in range(3, len(SIGNS), 4)}),
                  state=lambda b: (list(b.pos), list(b.neg)))
    imperative(jf, 'chosen when the graph runs')


def test_dict_chosen_by_a_tensor_test_then_updated(strict):
    class Meter:
        def __init__(self):
            self.train = {}
            self.val = {}

        def log(self, loss, training):
            if training > 0.5:
                table = self.train
            else:
                table = self.val
            table.update({'loss': loss})
            table.update(last=loss * 2.0)
            return loss + 1.0

    def flags(i):
        return float(i % 3 != 1)

    jf = run_both(lambda: (Meter.log, Meter()),
                  plan(lambda m, i: ((m, c(float(i)), c(flags(i))), {}), 9,
                       {6: lambda m: m.val.clear()}),
                  state=lambda m: (dict(m.train), dict(m.val)))
    converted(jf)


def test_attribute_rebound_to_one_of_two_lists_in_a_branch(strict):
    def make():
        b = Buckets()
        b.current = b.pos

        def f(x):
            if tf.reduce_sum(x) > 0:
                b.current = b.pos
            else:
                b.current = b.neg
            b.current.append(2)
            return x + 1.0
        return f, b

    jf = run_both(make, plan(lambda b, i: ((c([float(SIGNS[i])]),), {}), len(SIGNS),
                             {i: _clear for i in range(3, len(SIGNS), 4)}),
                  state=lambda b: (list(b.pos), list(b.neg)),
                  same=lambda b, r: (b.current is b.pos, b.current is b.neg))
    converted(jf)


def test_local_lists_chosen_in_a_branch_stay_two():
    def make():
        def f(x):
            kept, dropped = [], []
            if tf.reduce_sum(x) > 0:
                into = kept
            else:
                into = dropped
            into.append(x)
            return len(kept), len(dropped)
        return f, None

    run_both(make, plan(lambda _, i: ((c([float(SIGNS[i])]),), {}), len(SIGNS)))
