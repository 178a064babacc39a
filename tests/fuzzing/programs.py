"""Seeded generator of small random imperative TF2 programs (Python source text).

``generate(seed)`` returns a ``Program``: module source whose target function
(or method) is decorated ``@jit``, and a call sequence of 6-12 calls with
state changes from outside between some of them.  The runner binds ``jit`` to
the identity on the eager side and to ``janus.function`` on the janus side.

A program is composed of *features* (FEATURES below), each covering something
janus claims to convert, or ordinary code it must refuse (run imperatively):
every feature adds module-level code, parameters with per-call argument
generators, statements at the top of the function (``inits``), statements
that may be nested in control flow (``work`` items), return values and
outside mutations.  Control-flow features (Python and tensor ``if``/``while``/
``for``, ``break``/``continue``, early and nested ``return``s) wrap work items
of other features, so e.g. an append to ``self.hist`` can land inside a loop
over a tensor.

Calls follow a *regime* pattern: regime 0 for the first calls, regime 1 from
the flip on (the flip is usually at or after call 3, when janus has profiled
3 calls and builds its first graph), sometimes back to 0.  Regime 1 changes
what the graph assumed: the sign of the input (flips tensor branches), its
magnitude (loop trip counts), shape or dtype, Python arguments, list lengths,
dict keys, Enum members, aliasing of arguments.

Determinism: everything comes from ``random.Random(seed)``; the only TF
randomness is ``tf.random.Generator.from_seed`` created in the program's text,
hence fresh on each side.  Input values are multiples of 0.25 and thresholds
sit between them, so a tensor branch never depends on float rounding.
"""
import random
import re
import textwrap


class Program:
    def __init__(self, name, source, steps, features=()):
        self.name = name
        self.source = source
        self.steps = list(steps)       # ('call', target, argsrc) | ('do', statement)
        self.features = tuple(features)

    def replace(self, source=None, steps=None):
        return Program(self.name, self.source if source is None else source,
                       self.steps if steps is None else steps, self.features)

    def calls(self):
        return sum(1 for s in self.steps if s[0] == 'call')

    def __repr__(self):
        return '<Program %s: %d lines, %d steps, %s>' % (
            self.name, self.source.count('\n'), len(self.steps), ','.join(self.features))


def _indent(lines, n=4):
    return [(' ' * n + line) if line else line for line in lines]


def _lines(text):
    return textwrap.dedent(text).strip('\n').split('\n')


class Builder:
    """Collects the parts of one program while features are applied."""

    def __init__(self, rng, name):
        self.rng = rng
        self.name = name
        self.variant = rng.choice(['function', 'function', 'method', 'closure'])
        self.module = []          # chunks (strings) before the State class and the target
        self.state_init = []      # lines of State.__init__
        self.state_methods = []   # chunks inside class State
        self.uses_state = self.variant == 'method'
        self.state_param = False  # function variants: the object comes as argument ``st``
        self.params = []          # (name, argfn(i) -> source)
        self.default_params = []  # (name, default source): parameters with defaults
        self.default_args = []    # (name, argfn(i) -> source or None: left to the default)
        self.varargs = False      # the target takes *extra
        self.state_base = False   # class State(Base)
        self.decls = []           # 'global X' / 'nonlocal y'
        self.inits = []           # lines at the top of the target
        self.items = []           # work items: dicts(lines=[...], loopable=bool)
        self.outs = []            # return expressions
        self.mutations = []       # statements run between calls, from outside
        self.flip_mutations = []  # statements run right before the flip call
        self.closure_lines = []   # lines of make() before the target (closure variant)
        self.closure_after = []   # chunks in make() after the target (setters)
        self.closure_returns = []
        self.features = []
        self.counter = 0
        self.ncalls = rng.randint(6, 12)
        self.flip = rng.choice([1, 2, 3, 3, 4, 4, 4, 5, 5, 6, 7, 8, 9, 10])
        self.flip = min(self.flip, self.ncalls - 1)
        self.pattern = rng.choice(['step', 'step', 'back', 'alternate', 'once', 'none'])
        self.has_p = False
        self.x = XSpec(rng)
        self.prefer_break = False  # the next wrapper takes a graph-break item (issue 19)

    # -- names and regimes ---------------------------------------------------------
    def fresh(self, base):
        self.counter += 1
        return '%s%d' % (base, self.counter)

    def regime(self, i):
        if self.pattern == 'none' or i < self.flip:
            return 0
        if self.pattern == 'step':
            return 1
        if self.pattern == 'once':
            return 1 if i == self.flip else 0
        if self.pattern == 'back':
            return 1 if i < self.flip + 2 else 0
        return (i - self.flip + 1) % 2   # alternate

    @property
    def obj(self):
        """The state object, as the target's code names it."""
        if self.variant == 'method':
            return 'self'
        return 'st' if self.state_param else 'S'

    def need_state(self):
        if not self.uses_state:
            self.uses_state = True
            if self.variant != 'method' and self.rng.random() < 0.35:
                self.state_param = True
                other = self.rng.random() < 0.4
                self.params.append(('st', lambda i, b=self: 'S2' if other and b.regime(i) else 'S'))

    def need_p(self):
        """A Python int parameter ``p`` (values change with the regime)."""
        if self.has_p:
            return 'p'
        self.has_p = True
        base = self.rng.randint(0, 3)
        other = base + self.rng.choice([-1, 1, 2])
        varying = self.rng.random() < 0.15
        self.p_values = (base, other)
        self.params.append(('p', lambda i: str(i % 4 if varying else
                                               (other if self.regime(i) else base))))
        return 'p'

    def item(self, text, loopable=True, **kw):
        lines = _lines(text) if isinstance(text, str) else list(text)
        d = dict(lines=lines, loopable=loopable)
        d.update(kw)
        self.items.append(d)
        return d

    def glob(self, name, init):
        self.module.append('%s = %s' % (name, init))

    def cond_tensor(self):
        """A tensor condition that the input regime decides."""
        x = self.x
        return self.rng.choice([
            '-0.125 < tf.reduce_sum(x) < 100.0',
            'tf.reduce_sum(x) > 0.0' if x.sign_flips else 'tf.reduce_sum(x) > 0.125',
            'tf.reduce_max(x) > %s' % x.max_threshold(),
            'x[0] > 0.0' if x.sign_flips else 'x[0] > 0.625',
            'tf.reduce_mean(x) < 0.0',
            'tf.reduce_sum(x) > 0.0 and tf.reduce_min(x) > -0.125',
            'not tf.reduce_all(x > 0.0)',
        ])

    def cond_python(self):
        p = self.need_p()
        k = self.p_values[0]
        return self.rng.choice(['%s > %d' % (p, k), '%s == %d' % (p, k), '%s %% 2 == 0' % p,
                                '%s < %d or %s == %d' % (p, k, p, k + 2), 'not %s' % p])


class XSpec:
    """The tensor argument ``x``: float values, multiples of 0.25."""

    def __init__(self, rng):
        self.rng = rng
        self.length = rng.choice([2, 3, 3, 4])
        self.sign_flips = rng.random() < 0.6
        self.shape_changes = rng.random() < 0.25
        self.dtype_changes = rng.random() < 0.12
        self.magnitude_changes = rng.random() < 0.4
        self.other_length = self.length + rng.choice([-1, 1, 2])
        self.spikes = set()

    def max_threshold(self):
        return '1.125' if self.magnitude_changes else '0.875'

    def source(self, i, regime):
        n = self.other_length if (self.shape_changes and regime) else self.length
        hi = 8 if (self.magnitude_changes and regime) else 4
        vals = [self.rng.randint(1, hi) * 0.25 for _ in range(n)]
        if self.sign_flips and regime:
            vals = [-v for v in vals]
            vals[0] = -abs(vals[0])
        if i in self.spikes:
            vals[-1] = 3.0
        dtype = 'tf.float64' if (self.dtype_changes and regime) else 'tf.float32'
        return 'tf.constant(%r, dtype=%s)' % (vals, dtype)


# -- expressions ---------------------------------------------------------------------

def tensor_expr(rng, depth=2, leaves=('acc', 'acc', 'x')):
    """(text, kind): kind 'v' (a tensor shaped like x), 's' (a scalar tensor of x's
    dtype) or 'c' (a Python float).  TF functions only ever get a tensor operand, so
    an x of another dtype (float64) never meets a float32 constant tensor."""
    if depth == 0 or rng.random() < 0.25:
        r = rng.random()
        if r < 0.6:
            return rng.choice(list(leaves)), 'v'
        if r < 0.8:
            return rng.choice(['tf.reduce_sum(acc)', 'tf.reduce_mean(x)', 'tf.reduce_max(acc)']), 's'
        return rng.choice(['0.5', '1.5', '2.0', '0.25']), 'c'
    kind = rng.random()
    if kind < 0.35:
        inner, k = tensor_expr(rng, depth - 1, leaves)
        # no periodic functions: sin(30) turns a 1-ulp reassociation difference of its
        # argument into a visible one (the graph may reassociate; eager does not)
        fn = rng.choice(['tf.tanh', 'tf.abs', 'tf.sigmoid', 'tf.nn.relu', '-', 'tf.nn.softsign'])
        if fn == '-' or k == 'c':
            return '-(%s)' % inner, k
        return '%s(%s)' % (fn, inner), k
    a, ka = tensor_expr(rng, depth - 1, leaves)
    c, kc = tensor_expr(rng, depth - 1, leaves)
    k = 'v' if 'v' in (ka, kc) else ('s' if 's' in (ka, kc) else 'c')
    if kind < 0.85 or k == 'c':
        op = rng.choice(['+', '-', '*', '+'])
        return '(%s %s %s)' % (a, op, c), k
    if ka == 'c':
        a, c = c, a
    fn = rng.choice(['tf.maximum', 'tf.minimum'])
    return '%s(%s, %s)' % (fn, a, c), k


def arith(b, depth=2):
    expr, kind = tensor_expr(b.rng, depth)
    if kind != 'v':
        expr = '(acc + %s)' % expr
    return 'acc = tf.clip_by_value(%s, -20.0, 20.0)' % expr


# -- features ---------------------------------------------------------------------------

def f_arith(b):
    for _ in range(b.rng.randint(1, 3)):
        b.item(arith(b), pure=True)


def f_tensor_locals(b):
    aux = b.fresh('aux')
    b.inits.append('%s = tf.zeros_like(acc)' % aux)
    pool = ['%s = %s + acc * 0.5' % (aux, aux), 'acc = acc - %s * 0.25' % aux,
            '%s = tf.clip_by_value(%s * acc, -5.0, 5.0)' % (aux, aux),
            '%s, acc = acc * 0.5, %s + 1.0' % (aux, aux)]
    for line in b.rng.sample(pool, b.rng.randint(2, 3)):
        b.item(line, pure=True)
    b.outs.append(aux)


def f_pylocals(b):
    n, s, r, z, fl = (b.fresh(v) for v in 'nsrzf')
    b.inits += ['%s = %d' % (n, b.rng.randint(0, 4)), "%s = '%s'" % (s, b.rng.choice('abc')),
                '%s = 0.5' % r, '%s = None' % z, '%s = False' % fl]
    pool = [
        '%s = %s * 2 + %d' % (n, n, b.rng.randint(0, 3)),
        '%s = %s + %s / 4' % (r, r, n),
        '%s = %s + str(%s)' % (s, s, n),
        "%s = '%%s-%%d' %% (%s, %s)" % (s, s, n),
        'if %s is None:\n    %s = %s' % (z, z, n),
        '%s = %s > %d and not (%s < 0)' % (fl, n, b.rng.randint(1, 5), r),
        'acc = acc * %s' % r,
        'acc = acc + %s' % n,
        '%s, %s = %s + 1, %s * 2' % (n, r, n, r),
        '%s = %s if %s else -%s' % (r, r, fl, r),
        '%s += 1' % n,
        '%s = %s // 3 if %s > 2 else %s %% 3' % (n, n, n, n),
        '%s = %s or None' % (z, n),                    # and/or give operands, not bools
        '%s = (%s and %s) or 7' % (n, fl, n),
        "%s = %s or 'empty'" % (s, z),
        'if 0 < %s < 5:\n    acc = acc * 1.5' % n,
    ]
    for line in b.rng.sample(pool, b.rng.randint(2, 4)):
        b.item(line)
    b.outs += b.rng.sample([n, s, r, z, fl], b.rng.randint(1, 3))


def f_list_arg(b):
    L = b.fresh('L')
    tensors = b.rng.random() < 0.3
    glob = b.rng.random() < 0.4
    grows = b.rng.random() < 0.5       # regime 1: one more item, else other values
    vals = [[b.rng.randint(0, 5) for _ in range(2)]]
    vals.append(vals[0] + [b.rng.randint(0, 5)] if grows else [b.rng.randint(0, 5), vals[0][1]])
    if tensors:
        def lit(i):
            return '[%s]' % ', '.join('tf.constant(%r)' % (0.5 * v + 0.25 * (i % 2)) for v in vals[b.regime(i)])
    else:
        def lit(i):
            return repr(vals[b.regime(i)])
    if glob:
        g = b.fresh('LST')
        b.glob(g, lit(0))
        b.params.append((L, lambda i: g))
        b.mutations += ['%s.append(%s)' % (g, 'tf.constant(1.0)' if tensors else '7'),
                        '%s = %s' % (g, lit(5)), '%s[0] = %s' % (g, 'tf.constant(-1.0)' if tensors else '9')]
    else:
        b.params.append((L, lit))
    if tensors:
        pool = ['acc = acc + tf.cast(%s[0], acc.dtype)' % L,
                '%s.append(tf.reduce_sum(acc))' % L,
                '%s[0] = %s[0] * 2.0' % (L, L),
                'acc = acc + tf.cast(tf.add_n(%s), acc.dtype)' % L,
                'a_, b_ = %s[0], %s[1]\nacc = acc + tf.cast(a_ - b_, acc.dtype)' % (L, L),
                'acc = acc + tf.cast(tf.add_n([*%s]), acc.dtype)' % L,
                'if len(%s) > 2:\n    acc = acc * 0.5' % L]
    else:
        tot = b.fresh('tot')
        b.inits.append('%s = 0' % tot)
        pool = ['%s.append(%d)' % (L, b.rng.randint(0, 9)),
                '%s[0] = %s[0] + 1' % (L, L),
                '%s = sum(%s)' % (tot, L),
                'if %s:\n    acc = acc + len(%s)' % (L, L),
                'first_, *rest_ = %s\n%s = %s + first_ + len(rest_)' % (L, tot, tot),
                '%s = %s + len([*%s, 9])' % (tot, tot, L),
                '%s = %s + sum(%s[1:])' % (tot, tot, L),
                'if 2 in %s:\n    acc = acc - 1.0' % L,
                'for v_ in %s:\n    acc = acc + v_' % L,
                'a_, b_ = %s[0], %s[1]\n%s = %s + a_ * b_' % (L, L, tot, tot),
                'acc = acc + %s' % tot]
        b.outs.append(tot)
    for line in b.rng.sample(pool, b.rng.randint(2, 4)):
        b.item(line)
    b.outs.append(b.rng.choice([L, 'len(%s)' % L, L]))


def f_dict_arg(b):
    D = b.fresh('D')
    glob = b.rng.random() < 0.4

    def lit(i):
        d = {'a': b.rng.randint(0, 3), 'b': 2.5}
        if b.regime(i):
            d['c'] = 1
        return repr(d)
    if glob:
        g = b.fresh('DCT')
        b.glob(g, lit(0))
        b.params.append((D, lambda i: g))
        b.mutations += ["%s['c'] = 4" % g, "%s.pop('a', None)" % g, '%s = %s' % (g, lit(9))]
    else:
        b.params.append((D, lit))
    k = b.fresh('k')
    b.inits.append('%s = 0' % k)
    pool = ["%s = %s + %s.get('a', 0)" % (k, k, D),
            "if 'c' in %s:\n    acc = acc * 2.0" % D,
            "%s['c'] = %s" % (D, k),
            "for key_ in %s:\n    %s = %s + len(key_)" % (D, k, k),
            '%s = %s + len(%s)' % (k, k, D),
            "%s.setdefault('z', 0)" % D,
            "%s.update(u=1)" % D,
            "%s.pop('b', None)" % D,
            "acc = acc + %s.get('b', 0.0)" % D,
            "for key_, val_ in %s.items():\n    acc = acc + val_" % D,
            'if %s:\n    %s = %s + 1' % (D, k, k)]
    for line in b.rng.sample(pool, b.rng.randint(2, 4)):
        b.item(line)
    b.outs += b.rng.sample([D, k, 'sorted(%s)' % D], 1)


def f_tuple_arg(b):
    T = b.fresh('T')
    tensors = b.rng.random() < 0.5
    if tensors:
        b.params.append((T, lambda i: '(tf.constant(%r), tf.constant(%r))' % (
            0.5 * (1 + i % 3), -1.0 if b.regime(i) else 1.0)))
    else:
        b.params.append((T, lambda i: repr((1.5, 2 + b.regime(i)))))
    a, c = b.fresh('ta'), b.fresh('tc')
    b.inits.append('%s, %s = %s' % (a, c, T))
    pool = ['acc = acc + tf.cast(%s, acc.dtype)' % a if tensors else 'acc = acc + %s' % a,
            'acc = acc * tf.cast(%s[1], acc.dtype)' % T if tensors else 'acc = acc * %s[1]' % T,
            '%s = %s + (%s,)' % (T, T, a),
            'acc = acc + len(%s)' % T,
            '%s, %s = %s, %s' % (a, c, c, a)]
    for line in b.rng.sample(pool, 2):
        b.item(line)
    b.outs.append(b.rng.choice([T, c, '%s[::-1]' % T]))


def f_obj_state(b):
    b.need_state()
    O = b.obj
    attrs = b.rng.sample(['w', 'step', 'hist', 'state', 'training', 'scale', 'items', 'd', 'alias'],
                         b.rng.randint(2, 4))
    for a in attrs:
        if a == 'w':
            b.state_init.append('self.w = tf.constant(0.5)')
            b.item(b.rng.choice(['acc = acc * tf.cast(%s.w, acc.dtype)' % O,
                                 'acc = acc + tf.cast(%s.w, acc.dtype)' % O]))
            if b.rng.random() < 0.6:
                b.item('%s.w = %s.w * 0.5 + tf.cast(tf.reduce_mean(acc), tf.float32) * 0.25' % (O, O))
            b.mutations += ['S.w = tf.constant(%r)' % b.rng.choice([2.0, -1.0, 0.25]),
                            'S.w = 2.0']    # a Python float where a tensor was
            b.outs.append('%s.w' % O)
        elif a == 'step':
            b.state_init.append('self.step = 0')
            b.item('%s.step += 1' % O)
            if b.rng.random() < 0.4:
                b.item('if %s.step %% 2 == 0:\n    acc = acc - 0.5' % O)
            b.mutations += ['S.step = 100', 'S.step += 1']
            b.outs.append('%s.step' % O)
        elif a == 'hist':
            b.state_init.append('self.hist = []')
            b.item(b.rng.choice(['%s.hist.append(tf.reduce_sum(acc))' % O,
                                 '%s.hist.append(len(%s.hist))' % (O, O),
                                 '%s.hist.append(acc)' % O]))
            if b.rng.random() < 0.5:
                b.item('acc = acc + len(%s.hist)' % O)
            b.mutations += ['S.hist.append(0.5)', 'S.hist = []', 'S.hist.clear()']
            b.outs.append(b.rng.choice(['%s.hist' % O, 'len(%s.hist)' % O]))
        elif a == 'state':
            b.state_init.append('self.state = (tf.zeros([]), tf.ones([]))')
            h, c = b.fresh('h'), b.fresh('c')
            b.item('%s, %s = %s.state\n%s = %s + tf.cast(tf.reduce_mean(acc), tf.float32) * 0.5\n'
                   '%s = tf.tanh(%s) + %s * 0.5\n%s.state = (%s, %s)\nacc = acc + tf.cast(%s, acc.dtype)'
                   % (h, c, O, c, c, h, c, h, O, h, c, h))
            b.mutations += ['S.state = (tf.constant(1.0), tf.constant(-1.0))',
                            'S.state = [tf.constant(0.5), tf.constant(2.0)]']
            b.outs.append('%s.state' % O)
        elif a == 'training':
            b.state_init.append('self.training = True')
            b.item('if %s.training:\n    acc = acc * 0.5\nelse:\n    acc = acc + 1.0' % O)
            b.flip_mutations.append('S.training = False')
            b.mutations.append('S.training = not S.training')
        elif a == 'scale':
            b.state_init.append('self.scale = 1.5')
            b.item('acc = acc * %s.scale' % O)
            b.mutations.append('S.scale = %r' % b.rng.choice([2.5, -0.5, 2]))
        elif a == 'items':
            b.state_init.append('self.items = [1, 2]')
            b.item(b.rng.choice(['if %s.items:\n    acc = acc + len(%s.items)' % (O, O),
                                 'acc = acc * len(%s.items)' % O,
                                 '%s.items[0] = %s.items[0] + 1\nacc = acc + sum(%s.items)' % (O, O, O),
                                 'acc = acc + %s.items[-1]' % O]))
            b.mutations += ['S.items.append(3)', 'S.items = [5]', 'S.items[0] = 7']
            b.flip_mutations.append(b.rng.choice(['S.items.append(4)', 'S.items[0] = 0']))
        elif a == 'd':
            b.state_init.append("self.d = {'k': 1}")
            b.item(b.rng.choice(["%s.d['k'] = %s.d.get('k', 0) + 1" % (O, O),
                                 "if 'k' in %s.d:\n    acc = acc + %s.d['k']" % (O, O),
                                 "acc = acc + len(%s.d)" % O]))
            b.mutations += ["S.d.pop('k', None)", "S.d['k'] = 5", "S.d['j'] = 0"]
            if b.rng.random() < 0.5:
                b.outs.append('%s.d' % O)
        elif a == 'alias':
            b.state_init.append('self.buf = []')
            b.state_init.append('self.a = self.b = None')
            b.item('%s.a = %s.buf\n%s.b = %s.buf\n%s.a.append(1)' % (O, O, O, O, O))
            if b.rng.random() < 0.5:
                b.outs.append('%s.b' % O)
    if b.rng.random() < 0.15:
        b.outs.append(O)


def f_globals(b):
    G, C, LG = b.fresh('G'), b.fresh('COUNT'), b.fresh('LOG')
    b.glob(G, '1.5')
    b.glob(C, '0')
    b.glob(LG, '[]')
    b.decls.append('global %s' % C)
    b.item('acc = acc * %s' % G)
    b.item('%s += 1' % C)
    b.item(b.rng.choice(['%s.append(%s)' % (LG, C), 'if %s > 3:\n    acc = acc - 1.0' % C,
                         '%s.append(tf.reduce_sum(acc))' % LG]))
    b.mutations += ['%s = 2.5' % G, '%s = -1.0' % G, '%s = 10' % C, '%s = []' % LG, '%s = 2' % G]
    b.flip_mutations.append('%s = %r' % (G, b.rng.choice([2.5, -0.5])))
    b.outs.append(b.rng.choice([C, LG, G]))


def f_closure(b):
    b.variant = 'closure'
    base, count, seen = b.fresh('base'), b.fresh('count'), b.fresh('seen')
    b.closure_lines += ['%s = 1.5' % base, '%s = 0' % count, '%s = []' % seen]
    b.decls.append('nonlocal %s' % count)
    b.item('%s += 1' % count)
    b.item('acc = acc + %s' % base)
    b.item('%s.append(%s)' % (seen, count))
    setter = b.fresh('set_base')
    b.closure_after.append('def %s(v):\n    nonlocal %s\n    %s = v' % (setter, base, base))
    b.closure_returns.append(setter)
    b.mutations.append('%s(%r)' % (setter, b.rng.choice([3.0, -0.5])))
    b.flip_mutations.append('%s(2.0)' % setter)
    b.outs.append(b.rng.choice([count, seen, 'len(%s)' % seen]))


def f_inner_fn(b):
    g, h, kk, tally, bump = (b.fresh(v) for v in ('g', 'h', 'kk', 'tally', 'bump'))
    b.inits += ['def %s(y):\n    return y * 2.0 - 1.0' % g,
                '%s = lambda y: y - 0.5' % h,
                '%s = %d' % (kk, b.rng.randint(1, 3)),
                '%s = 0' % tally,
                'def %s():\n    nonlocal %s\n    %s += 1\n    return %s' % (bump, tally, tally, tally)]
    b.inits = [ln for chunk in b.inits for ln in chunk.split('\n')]
    pool = ['acc = tf.clip_by_value(%s(acc), -20.0, 20.0)' % g, 'acc = %s(acc)' % h,
            'acc = (lambda y: y + %s)(acc)' % kk, '%s()' % bump,
            'acc = acc + %s()' % bump, 'acc = tf.clip_by_value(%s(%s(acc)), -20.0, 20.0)' % (h, g)]
    for line in b.rng.sample(pool, b.rng.randint(2, 3)):
        b.item(line)
    b.outs.append(tally)


def f_callee_default(b):
    helper, acc_fn, scale = b.fresh('helper'), b.fresh('accum'), b.fresh('scale_by')
    b.module.append('def %s(y, seen=[]):\n    seen.append(len(seen))\n    return y + float(len(seen))'
                    % helper)
    b.module.append('def %s(v, store={}):\n    store[v] = store.get(v, 0) + 1\n    return store[v]'
                    % acc_fn)
    b.module.append('def %s(y, k=2.0, *, shift=0.0):\n    return y * k + shift' % scale)
    pool = ['acc = %s(acc)' % helper, 'acc = acc + %s(%d)' % (acc_fn, b.rng.randint(0, 2)),
            'acc = %s(acc, %r)' % (scale, b.rng.choice([0.5, -1.0])),
            'acc = %s(acc, shift=1.0)' % scale, 'acc = tf.clip_by_value(%s(acc, k=1.5), -20.0, 20.0)' % scale]
    for line in b.rng.sample(pool, b.rng.randint(2, 3)):
        b.item(line)
    b.mutations.append('%s.__defaults__[0].clear()' % helper)


DUNDER_CLASS = '''
class Scale:
    def __init__(self, s):
        self.s = s
        self.uses = 0
    def __rmul__(self, other):
        self.uses += 1
        return other * self.s
    def __mul__(self, other):
        return other * self.s
    def __add__(self, other):
        return Scale(self.s + other)
    def __radd__(self, other):
        return other + self.s
    def __bool__(self):
        return self.s > 0
    def __len__(self):
        return 3 if self.s > 1 else 1
    def __eq__(self, other):
        return isinstance(other, Scale) and other.s == self.s
    __hash__ = None
    def __repr__(self):
        return 'Scale(%r)' % self.s
'''


def f_dunder(b):
    if DUNDER_CLASS not in b.module:
        b.module.append(DUNDER_CLASS)
    sc = b.fresh('SC')
    b.glob(sc, 'Scale(1.5)')
    arg = b.rng.random() < 0.3
    ref = sc
    if arg:
        ref = b.fresh('sc')
        b.params.append((ref, lambda i: sc))
    pool = ['acc = acc * %s' % ref, 'acc = %s * acc' % ref, 'acc = acc + %s' % ref,
            'if %s:\n    acc = acc - 1.0' % ref, 'acc = acc + len(%s)' % ref,
            'if %s == Scale(1.5):\n    acc = acc * 2.0' % ref,
            'acc = acc * (2 * %s)' % ref, 'acc = acc * (%s + 1.0).s' % ref,
            "print('scale', %s)" % ref, "%s_txt = f'{%s!r}'" % (ref, ref)]
    for line in b.rng.sample(pool, b.rng.randint(2, 3)):
        b.item(line)
    b.mutations += ['%s.s = -0.5' % sc, '%s = Scale(3.0)' % sc]
    b.flip_mutations.append('%s.s = %r' % (sc, b.rng.choice([-0.5, 0.5, 2.5])))
    b.outs.append(b.rng.choice(['%s.uses' % sc, '%s.s' % sc, 'len(%s)' % ref]))


ENUM_CLASS = '''
class Mode(enum.Enum):
    TRAIN = 1
    EVAL = 2
'''


def f_enum(b):
    if ENUM_CLASS not in b.module:
        b.module.append(ENUM_CLASS)
    m = b.fresh('mode')
    b.params.append((m, lambda i: 'Mode.EVAL' if b.regime(i) else 'Mode.TRAIN'))
    pool = ['if %s is Mode.TRAIN:\n    acc = acc * 0.5\nelse:\n    acc = acc + 2.0' % m,
            'if %s == Mode.EVAL:\n    acc = -acc' % m,
            'acc = acc * %s.value' % m]
    for line in b.rng.sample(pool, 2):
        b.item(line)
    b.outs.append(b.rng.choice(['%s.name.lower()' % m, m, 'str(%s)' % m]))


def f_strings(b):
    msg, cnt = b.fresh('msg'), b.fresh('cnt')
    b.inits += ["%s = ''" % msg, '%s = %d' % (cnt, b.rng.randint(0, 3))]
    pool = ["%s = f'{%s}:{%s!r}'" % (msg, cnt, msg),
            "%s = 'v={}'.format(%s + 1)" % (msg, cnt),
            "%s = f'{%s:.2f}'" % (msg, 0.5),
            "%s = 'acc=%%s' %% (acc,)" % msg,
            "%s = f'acc={acc}'" % msg,
            '%s = str(x)' % msg,
            "%s = '{}'.format(tf.reduce_sum(x))" % msg,
            "%s = %s + str(x.shape) + x.dtype.name" % (msg, msg),
            "%s = %s + repr(%s)" % (msg, msg, cnt),
            '%s += 1' % cnt]
    for line in b.rng.sample(pool, b.rng.randint(2, 3)):
        b.item(line)
    b.outs.append(msg)
    if len(b.outs) % 2:   # (no draw: a seed's programs stay those of before but for this)
        b.outs.append('(isinstance(%s, str), type(%s).__name__)' % (msg, msg))


def f_print(b):
    pool = ["print('acc', acc)", "print('x:', x)", "print(f'x={x}')",
            "print('shape', x.shape, x.dtype.name)", "print('sum', tf.reduce_sum(x))",
            "print('n', 3, 'y', None, 1.5)", "print('items', [1, 'a'], {'k': 2}, sep=';', end='|\\n')",
            "msg_ = ''\nfor e_ in x:\n    msg_ += f'{e_},'\nprint(msg_)",
            "print(repr(acc), str(x.shape))"]
    for line in b.rng.sample(pool, b.rng.randint(1, 3)):
        b.item(line)


def f_variable(b):
    V = b.fresh('V')
    vector = b.rng.random() < 0.3
    b.glob(V, 'tf.Variable([1.0, 2.0])' if vector else 'tf.Variable(1.0)')
    pool = ['acc = acc + tf.cast(tf.reduce_sum(%s), acc.dtype)' % V,
            '%s.assign_add(%s)' % (V, '[0.5, 0.25]' if vector else '0.5'),
            '%s.assign(%s * 0.5 + 1.0)' % (V, V),
            "print('v', %s)" % V,
            "print(%s.numpy())" % V,
            "%s.assign_add(%stf.cast(tf.reduce_mean(acc), tf.float32) * 0.25)" % (
                V, 'tf.zeros([2]) + ' if vector else ''),
            "print('before', %s)\n%s.assign_add(%s)" % (V, V, '[1.0, 1.0]' if vector else '1.0')]
    for line in b.rng.sample(pool, b.rng.randint(2, 4)):
        b.item(line)
    b.mutations += ['%s.assign(%s)' % (V, '[5.0, 5.0]' if vector else '5.0'),
                    '%s = tf.Variable(%s)' % (V, '[3.0, 3.0]' if vector else '3.0')]
    b.outs.append(b.rng.choice([V, '%s.read_value()' % V, 'tf.identity(%s)' % V]))


def f_generator(b):
    gen = b.fresh('GEN')
    b.glob(gen, 'tf.random.Generator.from_seed(%d)' % b.rng.randint(0, 99))
    pool = ['acc = acc + tf.cast(%s.normal([]), acc.dtype)' % gen,
            'acc = acc + %s.uniform(tf.shape(acc), dtype=acc.dtype)' % gen,
            'noise_ = %s.normal([2])\nacc = acc + tf.cast(tf.reduce_sum(noise_), acc.dtype)' % gen]
    for line in b.rng.sample(pool, b.rng.randint(1, 2)):
        b.item(line)
    b.mutations += ['%s.normal([])' % gen, '%s = tf.random.Generator.from_seed(5)' % gen]


def f_dataset(b):
    it = b.fresh('IT')
    b.glob(it, 'iter(tf.data.Dataset.range(100000).map(lambda i: tf.cast(i, tf.float32) * 0.5))')
    b.item(b.rng.choice(['acc = acc + tf.cast(%s.get_next(), acc.dtype)' % it,
                         'e_ = next(%s)\nacc = acc + tf.cast(e_, acc.dtype)' % it]))
    b.mutations.append('%s.get_next()' % it)


def f_mapfn_cond(b):
    G = b.fresh('GM')
    b.glob(G, '1.5')
    pool = ['acc = tf.map_fn(lambda e: e * %s + 0.5, acc)' % G,
            'acc = tf.cond(tf.reduce_sum(x) > 0.0, lambda: acc * %s, lambda: acc - %s)' % (G, G),
            'acc = tf.clip_by_value(tf.scan(lambda a, e: a + e * %s, acc), -20.0, 20.0)' % G,
            'acc = tf.map_fn(lambda e: tf.cond(e > 0.0, lambda: e * %s, lambda: e), acc)' % G]
    for line in b.rng.sample(pool, b.rng.randint(1, 2)):
        b.item(line)
    b.mutations.append('%s = 3.0' % G)
    b.flip_mutations.append('%s = -2.0' % G)


def f_raise(b):
    if 'class FuzzError(Exception):\n    pass' not in b.module:
        b.module.append('class FuzzError(Exception):\n    pass')
    choice = b.rng.random()
    if choice < 0.4:
        p = b.need_p()
        k = max(b.p_values)
        b.item("if %s > %d:\n    raise FuzzError('p=%%d is too big' %% %s)" % (p, k - 1, p))
    elif choice < 0.8:
        b.x.spikes.add(b.rng.randint(b.flip, b.ncalls - 1))
        b.item(b.rng.choice(["if tf.reduce_max(x) > 2.875:\n    raise ValueError('x too large')",
                             "assert tf.reduce_max(x) < 2.875, 'x too large'"]))
    else:
        b.need_state()
        b.state_init.append('self.limit = 100')
        b.item("if acc.shape[0] > %s.limit:\n    raise FuzzError('too long')" % b.obj)
        b.flip_mutations.append('S.limit = 0')


def f_alias(b):
    a, c = b.fresh('a'), b.fresh('b')
    A, B = b.fresh('A'), b.fresh('B')
    b.glob(A, '[1]')
    b.glob(B, '[2, 3]')
    b.params.append((a, lambda i: A))
    b.params.append((c, lambda i: B if b.regime(i) else A))
    pool = ['%s.append(1)\nacc = acc + len(%s)' % (a, c),
            '%s[0] = %s[0] + 1\nacc = acc + %s[0]' % (a, a, c),
            'if %s is %s:\n    acc = acc * 2.0' % (a, c)]
    for line in b.rng.sample(pool, 2):
        b.item(line)
    b.outs.append(b.rng.choice([c, 'len(%s)' % c, '%s[0]' % c]))


def f_tape(b):
    if b.rng.random() < 0.5:
        b.item('with tf.GradientTape() as tape_:\n    tape_.watch(x)\n    y_ = tf.reduce_sum(x * x * 0.5)\n'
               'acc = acc + tape_.gradient(y_, x)')
    else:
        W = b.fresh('W')
        b.glob(W, 'tf.Variable(0.5)')
        b.item('with tf.GradientTape() as tape_:\n    loss_ = tf.reduce_sum(%s * tf.cast(acc, tf.float32))\n'
               'gw_ = tape_.gradient(loss_, %s)\n%s.assign_sub(0.01 * gw_)' % (W, W, W))
        b.outs.append(W)


def f_refuse(b):
    """Ordinary Python janus may refuse: it must then run it imperatively, correctly."""
    choice = b.rng.randint(0, 11)
    if choice == 0:
        b.item("try:\n    acc = acc + {'a': 1.0}['b']\nexcept KeyError:\n    acc = acc - 0.5")
    elif choice == 1:
        b.module.append('def gen_fn(k):\n    for i in range(k):\n        yield i * 0.5')
        b.item('acc = acc + sum(gen_fn(3))')
    elif choice == 2:
        b.module.append('def fact(k):\n    return 1 if k <= 1 else k * fact(k - 1)')
        b.item('acc = acc * (fact(3) * 0.1)')
    elif choice == 3:
        b.inits.append('total_ = 0.0')
        b.item('total_ = float(tf.reduce_sum(acc))\nif total_ > 1.0:\n    acc = acc * 0.5')
        b.outs.append('total_')
    elif choice == 4:
        b.item('for j_ in range(x.shape[0]):\n    acc = acc + 0.25')
    elif choice == 5:
        b.item('sq_ = [v_ * 2 for v_ in range(3)]\nacc = acc + sum(sq_)')
    elif choice == 6:
        b.item("with tf.name_scope('blk'):\n    acc = acc * 2.0")
    elif choice == 7:
        b.item('n_ = acc.shape[0]\nacc = acc + n_')
        b.outs.append('acc.shape.as_list()')
    elif choice == 8:
        b.params.append(('arr', lambda i: 'np.array([1.0, %r])' % (2.0 + b.regime(i))))
        b.item('acc = acc + float(arr.sum())')
    elif choice == 9:
        b.item('acc = acc + acc.numpy().sum()')
    elif choice == 10:
        b.item('if isinstance(acc, tf.Tensor) and type(acc).__name__ != "x":\n    acc = acc + 1.0')
    else:
        b.module.append('@jit\ndef inner_j(y):\n    return y * 2.0 + 1.0')
        b.item('acc = tf.clip_by_value(inner_j(acc), -20.0, 20.0)')


def f_private(b):
    if b.variant != 'method':
        return f_obj_state(b)
    b.state_init.append('self.__hidden = 1')
    b.item('self.__hidden += 1\nacc = acc + self.__hidden')


def f_cyclic(b):
    b.need_state()
    b.state_init.append('self.me = self')
    b.item('acc = acc + tf.cast(%s.me is %s, acc.dtype)' % (b.obj, b.obj))


def f_early_return(b):
    cond = b.cond_tensor() if b.rng.random() < 0.6 else b.cond_python()
    if b.rng.random() < 0.5:
        b.item('if %s:\n    return acc * -1.0' % cond, early=True)
    else:
        c2 = b.cond_tensor() if b.rng.random() < 0.5 else b.cond_python()
        b.item('if %s:\n    if %s:\n        return acc + 1.0\n    return acc - 1.0' % (cond, c2),
               early=True)


def f_target_defaults(b):
    kind = b.rng.random()
    if kind < 0.4:
        name = b.fresh('buf')
        b.default_params.append((name, '[]'))
        b.default_args.append((name, lambda i: None))
        b.item('%s.append(%d)\nacc = acc + len(%s)' % (name, b.rng.randint(0, 3), name))
        b.outs.append('len(%s)' % name)
    elif kind < 0.7:
        name = b.fresh('scale')
        b.default_params.append((name, '1.0'))
        b.default_args.append((name, lambda i: '2.0' if b.regime(i) else None))
        b.item('acc = acc * %s' % name)
    else:
        name = b.fresh('mask')
        b.default_params.append((name, 'None'))
        b.default_args.append((name, lambda i: 'tf.constant(0.5)' if b.regime(i) else None))
        b.item('if %s is not None:\n    acc = acc * tf.cast(%s, acc.dtype)' % (name, name))


def f_scalar_args(b):
    kind = b.rng.random()
    if kind < 0.35:
        t = b.fresh('training')
        b.params.append((t, lambda i: 'False' if b.regime(i) else 'True'))
        b.item('if %s:\n    acc = acc * 0.5\nelse:\n    acc = acc - 0.25' % t)
        b.outs.append(t)
    elif kind < 0.7:
        lr = b.fresh('lr')
        varying = b.rng.random() < 0.3
        b.params.append((lr, lambda i: repr(0.25 * (i % 3 + 1) if varying else (0.5 if b.regime(i) else 0.25))))
        b.item('acc = acc * (1.0 - %s)' % lr)
        b.outs.append('%s * 2' % lr)
    else:
        nt = b.fresh('nt')
        b.params.append((nt, lambda i: 'tf.constant(%d)' % (3 + b.regime(i))))
        pool = ['acc = acc + tf.cast(%s // 2, acc.dtype)' % nt,
                'for k_ in tf.range(%s):\n    acc = acc * 0.75' % nt,
                'if %s %% 2 == 0:\n    acc = acc + 1.0' % nt,
                'acc = acc + tf.cast(%s, acc.dtype) * 0.25' % nt]
        for line in b.rng.sample(pool, 2):
            b.item(line)


def f_state_methods(b):
    b.need_state()
    O = b.obj
    b.state_init.append('self.calls = 0')
    b.state_init.append('self.k = 2.0')
    b.state_methods.append('def helper(self, y):\n    self.calls += 1\n    return y * self.k')
    b.state_methods.append('def chain(self, y):\n    return self.helper(y) + self.helper(y)')
    pool = ['acc = %s.helper(acc)' % O, 'acc = tf.clip_by_value(%s.chain(acc), -20.0, 20.0)' % O]
    if b.rng.random() < 0.5:
        b.state_base = True
        pool.append('acc = %s.base_fn(acc)' % O)
    if b.rng.random() < 0.3:
        b.state_methods.append('@property\ndef double(self):\n    return self.k * 2')
        pool.append('acc = acc * %s.double' % O)
    if b.rng.random() < 0.2:
        b.state_methods.append('@classmethod\ndef unit(cls):\n    return 1.0\n'
                               '@staticmethod\ndef half(y):\n    return y * 0.5')
        pool.append('acc = %s.half(acc) + %s.unit()' % (O, O))
    for line in b.rng.sample(pool, min(len(pool), b.rng.randint(1, 2))):
        b.item(line)
    b.mutations += ['S.k = -1.0', 'S.helper = lambda y: y']
    b.flip_mutations.append('S.k = 3.0')
    b.outs.append('%s.calls' % O)


def f_getattr_obj(b):
    b.module.append('class Dyn:\n    def __init__(self):\n        self.base = 1.0\n'
                    '    def __getattr__(self, name):\n        return self.base * len(name)')
    d = b.fresh('DYN')
    b.glob(d, 'Dyn()')
    b.item('acc = acc * %s.ab' % d)
    b.mutations.append('%s.base = 0.5' % d)


def f_tensor_list(b):
    outs_, kind = b.fresh('outs'), b.rng.random()
    if kind < 0.4:
        b.item('%s = []\nfor e_ in x:\n    %s.append(e_ * 2.0)\nacc = acc + tf.stack(%s)' % (outs_, outs_, outs_))
    elif kind < 0.6:
        b.item('%s = []\nfor e_ in x:\n    %s.append(e_ * 2.0)\nacc = acc + len(%s)' % (outs_, outs_, outs_))
    elif kind < 0.8:
        b.item('acc = acc + tf.stack([e_ * 0.5 for e_ in x])')
    else:
        b.item('%s = [acc]\ni_ = tf.constant(0)\nwhile i_ < tf.shape(x)[0]:\n    i_ += 1\n'
               '    %s = %s + [%s[-1] * 0.5]\nacc = %s[-1]' % (outs_, outs_, outs_, outs_, outs_))


def f_state_tensors(b):
    b.need_state()
    O = b.obj
    kind = b.rng.random()
    if kind < 0.35:
        b.state_init.append('self.cache = {}')
        b.item("%s.cache['last'] = tf.reduce_sum(acc)" % O)
        b.item("if 'last' in %s.cache:\n    acc = acc + tf.cast(%s.cache['last'], acc.dtype) * 0.1" % (O, O))
        b.mutations.append('S.cache.clear()')
    elif kind < 0.7:
        b.state_init.append('self.total = tf.constant(0.0)')
        b.item('%s.total += tf.cast(tf.reduce_sum(x), tf.float32)' % O)
        b.outs.append('%s.total' % O)
        b.mutations.append('S.total = tf.constant(5.0)')
    else:
        b.state_init.append('self.v = tf.Variable(0.0)')
        b.item(b.rng.choice(['%s.v.assign_add(tf.cast(tf.reduce_mean(x), tf.float32))' % O,
                             'if tf.reduce_sum(x) > 0.0:\n    %s.v.assign_add(1.0)' % O]))
        b.item('acc = acc + tf.cast(%s.v, acc.dtype)' % O)
        b.mutations.append('S.v = tf.Variable(3.0)')


def f_global_tensor(b):
    g = b.fresh('GT')
    b.glob(g, 'tf.constant(0.0)')
    b.decls.append('global %s' % g)
    b.item('%s = %s + tf.cast(tf.reduce_mean(acc), tf.float32) * 0.5' % (g, g))
    b.item('acc = acc + tf.cast(%s, acc.dtype)' % g)
    b.mutations.append('%s = tf.constant(-2.0)' % g)
    b.outs.append(g)


def f_keras(b):
    d = b.fresh('DENSE')
    b.glob(d, "tf.keras.layers.Dense(1, kernel_initializer='ones', bias_initializer='zeros', "
              "name='%s')" % d.lower())     # named: Keras's name counter is shared by the sides
    b.item('y_ = %s(tf.reshape(tf.cast(acc, tf.float32), [1, -1]))\n'
           'acc = acc + tf.cast(tf.reduce_sum(y_), acc.dtype) * 0.1' % d)
    if b.rng.random() < 0.6:
        opt = b.fresh('OPT')
        b.glob(opt, 'tf.keras.optimizers.SGD(0.05, momentum=0.5)')
        b.item('with tf.GradientTape() as tp_:\n'
               '    l_ = tf.reduce_sum(%s(tf.reshape(tf.cast(x, tf.float32), [1, -1])))\n'
               'gs_ = tp_.gradient(l_, %s.trainable_variables)\n'
               '%s.apply_gradients(zip(gs_, %s.trainable_variables))' % (d, d, opt, d))
        b.flip_mutations.append('%s.learning_rate = 0.5' % opt)
    else:
        b.flip_mutations.append('%s.trainable = False' % d)


def f_python_ops(b):
    p = b.need_p()
    q = b.fresh('q')
    b.inits.append('%s = 0' % q)
    pool = ['%s = divmod(%s + 7, 3)[0] + abs(%s - 3)' % (q, p, p),
            '%s = max(%s, 1) + min(%s, 2)' % (q, p, p),
            '%s = round(1.5 * %s) + %s ** 2' % (q, p, p),
            "%s = len('abc'.upper().split('B')) + int('ab'.startswith('a'))" % q,
            "%s = len(','.join(str(v_) for v_ in range(%s)))" % (q, p),
            '%s = sorted([3, %s, 1])[0]' % (q, p),
            '%s = int(isinstance(%s, int)) + int(callable(len))' % (q, p),
            'acc = acc + %s' % q]
    for line in b.rng.sample(pool, b.rng.randint(2, 3)):
        b.item(line)
    b.outs.append(q)


def f_tensor_ops(b):
    pool = ['acc = acc + x[::-1]', 'acc = acc + tf.concat([x[1:], x[:1]], 0)',
            'acc = tf.where(x > 0.0, acc, -acc)',
            'acc = acc * tf.cast(tf.range(tf.size(x)), acc.dtype) * 0.5',
            'acc = acc + tf.gather(x, [0])', 'acc = acc + tf.reduce_sum(tf.expand_dims(x, 0), 0)',
            'acc = acc + tf.cast(tf.rank(x), acc.dtype) + x.ndim',
            'acc = acc + tf.boolean_mask(x, x > 0.0)[:1] if tf.reduce_any(x > 0.0) else acc',
            'acc = acc + tf.cast(tf.argmax(x), acc.dtype)']
    for line in b.rng.sample(pool, b.rng.randint(1, 3)):
        b.item(line, pure=True)


def f_varargs(b):
    b.varargs = True
    b.item(b.rng.choice(['acc = acc + len(extra)', 'for v_ in extra:\n    acc = acc + v_',
                         'if extra:\n    acc = acc * extra[0]']))
    b.outs.append('extra')


def f_callee_raises(b):
    if 'class FuzzError(Exception):\n    pass' not in b.module:
        b.module.append('class FuzzError(Exception):\n    pass')
    p = b.need_p()
    chk = b.fresh('check')
    b.module.append("def %s(v):\n    if v > %d:\n        raise FuzzError('check failed: %%d' %% v)\n    return v"
                    % (chk, max(b.p_values) - 1))
    b.item('acc = acc + %s(%s)' % (chk, p))


def f_class_attr(b):
    b.need_state()
    b.state_methods.append('created = 0')
    b.item('State.created += 1\nacc = acc + State.created')
    b.mutations.append('State.created = 50')


def f_objects_list(b):
    b.module.append('class Cell:\n    def __init__(self, k):\n        self.k = k\n        self.n = 0')
    g = b.fresh('CELLS')
    b.glob(g, '[Cell(0.5), Cell(1.5)]')
    b.item('for c_ in %s:\n    c_.n += 1\n    acc = acc + c_.k' % g)
    b.mutations += ['%s.append(Cell(2.0))' % g, '%s[0].k = -1.0' % g]
    b.outs.append('[c_.n for c_ in %s]' % g)


def f_del(b):
    D = b.fresh('D')
    b.params.append((D, lambda i: "{'a': 1, 'b': 2}" if not b.regime(i) else "{'a': 1, 'b': 2, 'c': 3}"))
    b.item("del %s['a']\nacc = acc + len(%s)" % (D, D), loopable=False)
    b.outs.append(D)


def f_alias_global(b):
    """The object comes as argument and is read as a global too (S, then S2)."""
    if b.variant == 'method':
        return f_obj_state(b)
    b.uses_state = True
    if not b.state_param:
        b.state_param = True
        b.params.append(('st', lambda i: 'S2' if b.regime(i) else 'S'))
    b.state_init.append('self.n = 0')
    b.item('st.n += 1\nS.n += 10\nacc = acc + st.n')
    b.outs.append('st.n')


def f_lazy_var(b):
    b.need_state()
    O = b.obj
    b.state_init.append('self.lv = None')
    b.item('if %s.lv is None:\n    %s.lv = tf.Variable(tf.zeros([]))\n%s.lv.assign_add(1.0)\n'
           'acc = acc + tf.cast(%s.lv, acc.dtype)' % (O, O, O, O))
    b.mutations.append('S.lv = None')


def f_attr_builtins(b):
    b.need_state()
    O = b.obj
    b.state_init.append('self.z = 1')
    pool = ["%s.tmp = 2\nacc = acc + %s.tmp\ndel %s.tmp" % (O, O, O),
            "if hasattr(%s, 'tmp'):\n    acc = acc + 100.0" % O,
            "setattr(%s, 'z', getattr(%s, 'z', 0) + 1)" % (O, O),
            "acc = acc + getattr(%s, 'missing', 0.5)" % O,
            "acc = acc + vars(%s).get('z', 0)" % O]
    for line in b.rng.sample(pool, b.rng.randint(2, 3)):
        b.item(line, loopable=False)
    b.mutations.append('S.tmp = 5')


def f_new_global(b):
    g = b.fresh('NEWG')
    b.decls.append('global %s' % g)
    b.item('%s = tf.reduce_sum(acc)' % g)


def f_tensor_list_items(b):
    L = b.fresh('TL')
    b.params.append((L, lambda i: '[tf.constant(%r), tf.constant(2.0)]' % (0.5 + b.regime(i))))
    b.item(b.rng.choice(['%s[0] += tf.cast(tf.reduce_sum(acc), tf.float32)' % L,
                         '%s[-1] = %s[0] * 2.0' % (L, L),
                         '%s.extend([tf.constant(1.0)])' % L,
                         '%s.insert(0, tf.reduce_mean(x))' % L]))
    b.item('acc = acc + tf.cast(%s[0], acc.dtype)' % L)
    b.outs.append(L)


def f_observe(b):
    """Python observations (in, ==, <, truthiness, len, unpacking, spreading, in-place
    operators) of containers, mixed with writes to them in the same call."""
    L, D, ob = b.fresh('OL'), b.fresh('OD'), b.fresh('ob')
    glob = b.rng.random() < 0.5
    lv = ([1, 2], [2, 3, 1])
    dv = ({'a': 1}, {'a': 1, 'b': 0})
    if glob:
        gl, gd = b.fresh('GL'), b.fresh('GD')
        b.glob(gl, repr(lv[0]))
        b.glob(gd, repr(dv[0]))
        b.params.append((L, lambda i: gl))
        b.params.append((D, lambda i: gd))
        b.mutations += ['%s[0] = 2' % gl, '%s.append(2)' % gl, "%s['b'] = 2" % gd,
                        '%s = %r' % (gl, lv[1])]
        b.flip_mutations.append("%s['a'] = 3" % gd)
    else:
        b.params.append((L, lambda i: repr(lv[b.regime(i)])))
        b.params.append((D, lambda i: repr(dv[b.regime(i)])))
    b.inits.append('%s = 0' % ob)
    pool = [
        '%s[0] = %s[0] + 1\nif 2 in %s:\n    %s += 1' % (L, L, L, ob),
        'if %s == [2, 2]:\n    %s += 5\n%s[-1] += 1' % (L, ob, L),
        '%s += [1]\n%s += len(%s)' % (L, ob, L),
        '%s |= {\'c\': %s}\nif \'c\' in %s:\n    %s += %s[\'c\']' % (D, ob, D, ob, D),
        'if %s < [2]:\n    %s += 2' % (L, ob),
        'first_, *mid_, last_ = %s + [0]\n%s += first_ + len(mid_) - last_' % (L, ob),
        '(pa_, pb_), pc_ = (%s[0], %s[-1]), len(%s)\n%s += pa_ * pb_ + pc_' % (L, L, L, ob),
        "%s = {**%s, 'z': 1}\n%s += len(%s)" % (D, D, ob, D),
        '%s += sum([*%s, *%s.values()])' % (ob, L, D),
        "if %s:\n    %s += 1\nif not %s.get('b'):\n    %s['b'] = %s" % (D, ob, D, D, ob),
        'if %s in range(3):\n    %s += 10' % (ob, ob),
        "%s += ('a' in 'abc') + (%s[0] in (1, 2)) + (%s == %s)" % (ob, L, L, L),
        '%s.append(%s)\nif len(%s) > 3:\n    %s -= 1' % (L, ob, L, ob),
        "%s['a'] = %s.get('a', 0) * 2\n%s += %s['a']" % (D, D, ob, D),
        'acc = acc + %s' % ob,
        "%s += max(%s) - min(%s) + int(bool(%s))" % (ob, L, L, L),
    ]
    for line in b.rng.sample(pool, b.rng.randint(2, 4)):
        if b.rng.random() < 0.35:   # in a Python loop: writes between observations
            j = b.fresh('oj')
            line = 'for %s in range(%d):\n%s' % (j, b.rng.randint(2, 3), '\n'.join(
                '    ' + ln for ln in line.split('\n')))
        b.item(line)
    b.outs += b.rng.sample([ob, L, D], b.rng.randint(1, 2))


# -- Python numbers as training loops keep them (issue 11) ---------------------------------
#
# Step counters, learning-rate schedules, temperatures, best-loss tracking and "every N
# steps" branches, with the numbers kept in attributes, globals, closure cells or passed
# as arguments.  They change on every call, so janus relaxes them to dynamic scalars
# (graph inputs with Python's semantics); the generated code mixes ints, floats and bools
# (/, //, %, **, comparisons, min/max/abs/round, math functions, f-string format specs),
# and the values sometimes leave the safe domain: past 2**62 or int64, a float where an
# int was, a bool, a zero divisor, a math domain error.

class Number:
    """A Python number the target reads (and maybe writes): ``ref`` is how the target's
    code names it; ``set(value_source)`` the statement that changes it from outside
    (None for an argument: its value comes with each call)."""

    def __init__(self, ref, home, setter):
        self.ref, self.home, self.setter = ref, home, setter

    def set(self, value):
        return None if self.setter is None else self.setter(value)


BIG_VALUES = ['2 ** 62 - 1', '2 ** 62 + 3', '2 ** 63 + 1', '-(2 ** 63) - 5', '10 ** 20',
              '2 ** 60 + 2 ** 36 + 1']
ODD_VALUES = ['2.5', '-0.5', 'True', 'False', '0', '-7', "float('nan')", '1e300', '-0.0']


def _scalar_calls(b):
    """Numbers that change every call need calls to show janus relaxing them (a value
    constant per graph, then a graph input): a few more than the default."""
    b.ncalls = max(b.ncalls, b.rng.randint(7, 10))
    b.flip = min(max(b.flip, 4), b.ncalls - 2)


def _home(b, kinds=('attr', 'attr', 'global', 'cell', 'arg')):
    kind = b.rng.choice(kinds)
    if kind == 'cell' and b.variant != 'closure':
        kind = 'global'
    return kind


def _number(b, base, init, home, values=None):
    """A number kept at ``home`` ('attr', 'global', 'cell', 'arg'), initially ``init``
    (source); ``values(i)``: the source of an argument's value at call i."""
    if home == 'attr':
        b.need_state()
        name = b.fresh(base)
        b.state_init.append('self.%s = %s' % (name, init))
        return Number('%s.%s' % (b.obj, name), home, lambda v, n=name: 'S.%s = %s' % (n, v))
    if home == 'global':
        name = b.fresh(base.upper())
        b.glob(name, init)
        b.decls.append('global %s' % name)
        return Number(name, home, lambda v, n=name: '%s = %s' % (n, v))
    if home == 'cell':
        name = b.fresh(base)
        b.closure_lines.append('%s = %s' % (name, init))
        b.decls.append('nonlocal %s' % name)
        setter = b.fresh('set_' + base)
        b.closure_after.append('def %s(v):\n    nonlocal %s\n    %s = v' % (setter, name, name))
        b.closure_returns.append(setter)
        return Number(name, home, lambda v, s=setter: '%s(%s)' % (s, v))
    name = b.fresh(base)
    b.params.append((name, values or (lambda i: init)))
    b.outs.append(name)      # writes to an argument are local: return what became of it
    return Number(name, home, None)


def _list_home(b, base):
    """A list kept at an attribute, a global or a cell (appended to, never rebound)."""
    home = _home(b, ('attr', 'global', 'cell'))
    if home == 'attr':
        b.need_state()
        name = b.fresh(base)
        b.state_init.append('self.%s = []' % name)
        return '%s.%s' % (b.obj, name)
    name = b.fresh(base.upper() if home == 'global' else base)
    if home == 'global':
        b.glob(name, '[]')
    else:
        b.closure_lines.append('%s = []' % name)
    return name


def _break_values(b, number, kinds=BIG_VALUES + ODD_VALUES):
    """Outside changes that break what the graph assumed about ``number``."""
    if number.setter is None:
        return
    picks = b.rng.sample(kinds, 2)
    b.mutations.append(number.set(picks[0]))
    b.flip_mutations.append(number.set(picks[1]))


def _int_values(b, start, step, kinds=BIG_VALUES + ODD_VALUES):
    """Argument values: start + i * step, and in regime 1 (sometimes) an odd one."""
    odd = b.rng.choice(kinds) if b.rng.random() < 0.5 else None

    def values(i):
        if odd is not None and b.regime(i):
            if odd in BIG_VALUES:
                return '%s + %d' % (odd, i)      # still a new value every call
            return odd if i % 2 else str(start + i * step)
        return str(start + i * step)
    return values


def f_counter(b):
    """A step counter: += 1 (or a bool, a float), tested with %, compared, mixed in."""
    _scalar_calls(b)
    home = _home(b)
    init = b.rng.choice(['0', '0', '0', '1', '5', '-3', '0.0'])
    c = _number(b, 'step', init, home, _int_values(b, int(float(init)), 1))
    r = c.ref
    inc = b.rng.choice(['1', '1', '1', '2', '0.5', 'True'])
    b.item('%s += %s' % (r, inc))
    if b.rng.random() < 0.15:           # grows past 2**62 (and int64) within a few calls
        b.item('%s = %s * %s + 1' % (r, r, b.rng.choice(['1000', '100000', r])))
    q = b.fresh('q')
    b.inits.append('%s = 0' % q)
    k = b.rng.choice([2, 3, 5, 10])
    pool = ['acc = acc + %s %% 5' % r,
            'acc = acc * (%s %% 3 + 1)' % r,
            'acc = tf.clip_by_value(acc + %s / 8, -20.0, 20.0)' % r,
            'if %s %% %d == 0:\n    acc = acc * 0.5' % (r, k),
            'if %s > %d:\n    acc = acc - 1.0\nelse:\n    %s = %s + 1' % (r, b.rng.randint(2, 6), q, q),
            '%s = %s // 3 - %s %% 4' % (q, r, r),
            '%s = -%s // 4 + (%s > 3) + (%s == %s)' % (q, r, r, r, q),
            '%s = divmod(%s, %d)' % (q, r, k),
            '%s = %s ** 2 - 2 ** (%s %% 7)' % (q, r, r),
            '%s = %s / %d + abs(%s - 4) * 0.5' % (q, r, k, r),
            '%s = max(%s, %s) + min(%s, 2.5)' % (q, r, q, r),
            '%s = round(%s / 3) + round(%s * 0.37, 2)' % (q, r, r),
            '%s = %s // (%s %% 4)' % (q, q, r),            # a zero divisor every 4th step
            'acc = tf.clip_by_value(acc * %s, -20.0, 20.0)' % r]
    for line in b.rng.sample(pool, b.rng.randint(2, 4)):
        b.item(line)
    _break_values(b, c)
    b.outs += b.rng.sample([r, q], b.rng.randint(1, 2)) if home != 'arg' else [q]


SCHEDULES = [
    # (formula assigned to the rate; S: the step, L: the rate itself)
    'L * 0.1 if S == 3 or S == 6 else L',
    '0.1 * 0.96 ** (S // 2)',
    '0.1 * 0.9 ** (S / 3)',
    '0.001 + 0.5 * (0.1 - 0.001) * (1 + math.cos(math.pi * min(S, 8) / 8))',
    '0.05 * min(1.0, (S + 1) / 4)',
    'max(0.01, L * 0.9)',
    'L * 0.5 if S % 3 == 0 else L',
    '0.1 / math.sqrt(S + 1)',
    '0.1 / (1 + 0.5 * S)',
    'L * math.exp(-0.1 * S)',
    '0.2 * (1 - S / 10) ** 2',
    'round(0.1 * 0.5 ** (S // 3), 4)',
]


def f_schedule(b):
    """A learning rate (or a temperature) in a Python float, recomputed from the step."""
    _scalar_calls(b)
    step = _number(b, 'it', '0', _home(b), _int_values(b, 0, 1))
    lr = _number(b, 'lr', '0.1', _home(b, ('attr', 'global', 'cell')))
    S, L = step.ref, lr.ref
    b.item('%s += 1' % S, loopable=False)
    if b.rng.random() < 0.25:
        b.item('for m_ in (2, 4, 6):\n    if %s == m_:\n        %s = %s * 0.5' % (S, L, L))
    else:
        formula = b.rng.choice(SCHEDULES).replace('S', S).replace('L', L)
        b.item('%s = %s' % (L, formula), loopable=False)
    use = b.rng.random()
    if use < 0.5:
        b.item('acc = acc * %s' % L)
    elif use < 0.75:
        b.item('acc = tf.clip_by_value(acc / %s, -20.0, 20.0)' % L)
    else:                               # an annealed temperature
        t = _number(b, 'temp', '1.0', _home(b, ('attr', 'global', 'cell')))
        b.item('%s = max(0.25, %s * 0.9)\nacc = tf.nn.softmax(acc / %s)' % (t.ref, t.ref, t.ref))
        b.outs.append(t.ref)
        _break_values(b, t, ['0.0', '-1.0', '2', 'True'])
    if b.rng.random() < 0.4:
        b.item("print(f'step {%s} lr {%s:.3e}')" % (S, L))
    _break_values(b, step)
    _break_values(b, lr, ['0.0', '0', '-1.0', "float('inf')", '1', 'True'])
    b.outs.append(L)
    if step.home != 'arg':
        b.outs.append(S)


def f_best(b):
    """Best-loss tracking with patience: a tensor loss, or a Python float of it."""
    _scalar_calls(b)
    best = _number(b, 'best', b.rng.choice(["float('inf')", '1e9']), _home(b),
                   lambda i: repr(4.0 - 0.25 * i) if i % 4 else "float('inf')")
    wait = _number(b, 'wait', '0', _home(b), lambda i: str(i % 3))
    stop = _number(b, 'stop', 'False', _home(b), lambda i: 'False')
    B, W, T = best.ref, wait.ref, stop.ref
    loss = b.fresh('loss')
    if b.rng.random() < 0.5:
        head = '%s = tf.reduce_mean(acc * acc)' % loss
    else:
        head = '%s = float(tf.reduce_mean(acc * acc))' % loss
    patience = b.rng.randint(1, 3)
    if b.rng.random() < 0.3 and 'float' in head:
        body = '%s = min(%s, %s)\n%s = %s + (%s > %s)' % (B, B, loss, W, W, loss, B)
    else:
        body = 'if %s < %s:\n    %s = %s\n    %s = 0\nelse:\n    %s += 1' % (loss, B, B, loss, W, W)
    if b.rng.random() < 0.5:
        body += '\nif %s >= %d:\n    %s = True' % (W, patience, T)
    else:
        body += '\n%s = %s >= %d' % (T, W, patience)
    b.item(head + '\n' + body)
    if best.setter is not None:
        b.mutations.append(best.set(b.rng.choice(["float('nan')", '0.0', '-1'])))
    _break_values(b, wait, ['2 ** 63', '2.5', 'True', '-1'])
    b.outs += [x.ref for x in (wait, stop) if x.home != 'arg']


def f_every_n(b):
    """'Every N steps': an append, a print, a counter or a rate change under step % N == 0."""
    _scalar_calls(b)
    step = _number(b, 'n', '0', _home(b), _int_values(b, 0, 1, BIG_VALUES + ['0', '2.5']))
    S = step.ref
    n = b.rng.choice([2, 3, 4])
    body = []
    for kind in b.rng.sample(['append', 'print', 'count', 'scale', 'rate'], b.rng.randint(1, 3)):
        if kind == 'append':
            hist = _list_home(b, 'hist')
            body.append(b.rng.choice(['%s.append(tf.reduce_sum(acc))' % hist,
                                      '%s.append(%s)' % (hist, S),
                                      '%s.append((%s, %s / %d))' % (hist, S, S, n)]))
        elif kind == 'print':
            body.append(b.rng.choice([
                "print(f'step {%s:4d} loss {tf.reduce_sum(acc):.4f}')" % S,
                "print('step', %s, 'of', %s // %d)" % (S, S, n),
                "print(f'{%s / 7:.3f}|{%s:>6}|{%s %% 5!r}')" % (S, S, S)]))
        elif kind == 'count':
            logged = _number(b, 'logged', '0', _home(b, ('attr', 'global', 'cell')))
            body.append('%s += 1' % logged.ref)
            b.outs.append(logged.ref)
        elif kind == 'scale':
            body.append('acc = acc * 0.5')
        else:
            lr = _number(b, 'rate', '0.1', _home(b, ('attr', 'global', 'cell')))
            body.append('%s = %s * 0.5' % (lr.ref, lr.ref))
            b.outs.append(lr.ref)
    b.item('%s += 1' % S, loopable=False)
    b.item(['if %s %% %d == 0:' % (S, n)] + _indent(body))
    _break_values(b, step)
    if step.home != 'arg':
        b.outs.append(S)


IO_HELPER = '''
IO_LOG = []


def note_io(tag, value):
    """Stands for I/O janus does not convert (a checkpoint, a log file): id() is refused."""
    IO_LOG.append('%s:%r:%s' % (tag, value, id(IO_LOG) > 0))
'''


def f_every_n_io(b):
    """'Every N steps' work janus cannot convert (a checkpoint, a log write), with a
    period and a start the first graph may land on; sometimes an early return there."""
    _scalar_calls(b)
    b.ncalls = max(b.ncalls, b.rng.randint(10, 14))
    if IO_HELPER not in b.module:
        b.module.append(IO_HELPER)
    start = b.rng.choice(['0', '0', '1', '2', '5', '16'])
    step = _number(b, 'k', start, _home(b, ('attr', 'attr', 'global', 'cell')))
    S = step.ref
    n = b.rng.choice([2, 3, 4, 5, 7, 20])
    body = ["note_io('step', %s)" % S]
    if b.rng.random() < 0.5:
        body.insert(0, b.rng.choice(['acc = acc * 0.5', "print('saving at', %s)" % S]))
    test = b.rng.choice(['%s %% %d == 0' % (S, n), '%s %% %d == 0 and %s > 3' % (S, n, S),
                         '%s > %d' % (S, int(start) + n)])
    b.item('%s += 1' % S, loopable=False)
    if b.rng.random() < 0.3:
        b.item(['if %s:' % test] + _indent(body + ['return acc * 2.0']), loopable=False,
               early=True)
    else:
        b.item(['if %s:' % test] + _indent(body), loopable=False)
    _break_values(b, step, ['0', '2.5', str(int(start) + 100)])
    b.outs += ['len(IO_LOG)', 'IO_LOG[-1:]', S]


def f_var_counter(b):
    """A tf.Variable step counter, incremented, then tested: a decision on state the
    call changed itself."""
    V = b.fresh('STEPV')
    b.glob(V, b.rng.choice(['tf.Variable(0)', 'tf.Variable(0, dtype=tf.int64)']))
    n = b.rng.choice([2, 3])
    b.item('%s.assign_add(1)' % V, loopable=False)
    body = b.rng.choice(['acc = acc * 0.5', 'acc = acc + tf.cast(%s, acc.dtype)' % V])
    if b.rng.random() < 0.5:
        hist = _list_home(b, 'vhist')
        body += '\n%s.append(tf.reduce_sum(acc))' % hist
    if b.rng.random() < 0.4:
        logged = _number(b, 'vlogged', '0', _home(b, ('attr', 'global', 'cell')))
        body += '\n%s += 1' % logged.ref
        b.outs.append(logged.ref)
    b.item(['if %s %% %d == 0:' % (V, n)] + _indent(body.split('\n')))
    b.mutations.append('%s.assign(100)' % V)
    b.outs.append(b.rng.choice([V, '%s.read_value()' % V]))


MIX_EXPRS = [
    'A // 3', 'A % 4', '-A // 3', 'A / 4', 'C // 0.25', 'C % 0.75', 'A ** 2', '2 ** (A % 5)',
    'divmod(A, 3)', 'abs(C - A)', 'min(A, C)', 'max(A, C, 1)', 'round(C, 2)', 'round(C)',
    'int(C) + A', 'float(A)', 'A + G', 'G + G', '-G', 'not G', 'A < C', 'A == C', 'A and C',
    'C or A', 'math.floor(C)', 'math.exp(-abs(C))', 'math.sqrt(abs(C))', 'math.log(abs(C) + 1)',
    'A * C', 'C / (A % 3)', '(A % 5 - 2) ** -1', 'A // (A % 4)', 'C ** 0.5', 'C ** (A % 7)',
    'A * 3 if G else C', 'A > 2 and C < 1.0', 'max(A, 10.0)', 'abs(A) + abs(-C)',
    'math.fabs(A) + math.trunc(C)', 'A * 1000 * A', 'A << 2', 'A & 6', 'int(G) + float(G)',
    'round(A / 7, 3)', 'C * 0.0', 'A % -3', 'C % -2.0', '-C // 1', 'math.hypot(A, C)',
]


def f_number_mix(b):
    """Ints, floats and bools that change every call, mixed every way Python mixes them."""
    _scalar_calls(b)
    ints = BIG_VALUES + ['-7', '0', '2.5', 'True']
    floats = ["float('nan')", '1e300', '-0.0', '0.0', "float('inf')", '3', '-2.5']
    a = _number(b, 'na', '3', _home(b), _int_values(b, -3, 2, ints))
    c = _number(b, 'nc', '0.5', _home(b), lambda i: b.rng.choice(floats) if b.regime(i) and
                b.rng.random() < 0.4 else repr(0.375 * i - 1.25))
    g = _number(b, 'ng', 'True', _home(b), lambda i: repr(i % 3 == 1))
    if a.home != 'arg':
        b.item('%s = %s + %s' % (a.ref, a.ref, b.rng.choice(['1', '2', '-3', a.ref])), loopable=False)
    if c.home != 'arg':
        b.item('%s = %s * 1.5 - 0.25' % (c.ref, c.ref), loopable=False)
    if g.home != 'arg':
        b.item('%s = not %s' % (g.ref, g.ref), loopable=False)
    for x in (a, c, g):
        _break_values(b, x, ints if x is a else floats if x is c else ['1', '0', '2.5'])
    res = b.fresh('res')
    b.inits.append('%s = []' % res)
    for expr in b.rng.sample(MIX_EXPRS, b.rng.randint(3, 6)):
        e = expr.replace('A', a.ref).replace('C', c.ref).replace('G', g.ref)
        b.item('%s.append(%s)' % (res, e))
    tensor = b.rng.choice(['acc = acc * C', 'acc = acc + A % 7', 'acc = acc * G',
                           'acc = tf.clip_by_value(acc + A, -20.0, 20.0)', 'acc = acc / (A % 3 + 1)'])
    b.item(tensor.replace('A', a.ref).replace('C', c.ref).replace('G', g.ref))
    b.outs.append(res)


def f_number_print(b):
    """Numbers printed and formatted: print(), f-string format specs, str(), repr()."""
    _scalar_calls(b)
    i = _number(b, 'pi', '1', _home(b), _int_values(b, 1, 3, ['2 ** 64', '-5', '2.5', 'True']))
    f = _number(b, 'pf', '0.1', _home(b), lambda k: repr(0.1 * 0.9 ** k) if not b.regime(k)
                else b.rng.choice(['1e-300', "float('nan')", '-0.0', '123456789.125', '7']))
    I, F = i.ref, f.ref
    if i.home != 'arg':
        b.item('%s += 1' % I, loopable=False)
    if f.home != 'arg':
        b.item('%s = %s * 0.9' % (F, F), loopable=False)
    pool = ["print(%s, %s)" % (I, F),
            "print(f'{%s:.3e} {%s!r} {%s:g} {%s:>6}')" % (F, F, F, I),
            "print('step %%d lr %%.4f' %% (%s, %s))" % (I, F),
            "print('{:>8} {:.2%%}'.format(%s, %s))" % (I, F),
            "msg_ = str(%s) + ',' + repr(%s)\nprint(msg_)" % (F, I),
            "print(f'{%s / 3:.5f} {%s // 2} {%s * 2} {%s:08.3f}')" % (I, I, F, F),
            "print(%s / %s, %s %% 7, -%s)" % (I, 3, I, F),
            "print(f'{%s=} {%s=:.2f}')" % (I, F),
            "print(round(%s, 3), abs(%s), %s > %s)" % (F, I, F, I)]
    for line in b.rng.sample(pool, b.rng.randint(1, 3)):
        b.item(line)
    _break_values(b, i, ['2 ** 64', '-5', '2.5', 'True', '2 ** 62'])
    _break_values(b, f, ['1e-300', "float('nan')", '-0.0', '7'])


# -- provenance of objects (issue 17) --------------------------------------------------------
#
# What the bug reports of issue 17 exercise: objects reached by more than one path, or
# by paths that change in the call (swaps, callbacks' __self__, classes through
# type(self), inner containers, an argument that is also an attribute), containers
# other than list/dict (set, deque), tensors compared by identity, state changed
# before the call raises, and code asking TF whether it runs eagerly.

def _sub(template, **names):
    """``template`` with each ``@NAME`` replaced (code templates hold braces and %)."""
    for key in sorted(names, key=len, reverse=True):
        template = template.replace('@' + key, names[key])
    return template


def _holder(b, base, init, homes=('attr', 'attr', 'global')):
    """A container kept at an attribute or a global: (the target's name for it, the
    caller's name for it)."""
    home = b.rng.choice(homes)
    if home == 'attr':
        b.need_state()
        name = b.fresh(base)
        b.state_init.append('self.%s = %s' % (name, init))
        return '%s.%s' % (b.obj, name), 'S.%s' % name
    name = b.fresh(base.upper())
    b.glob(name, init)
    b.decls.append('global %s' % name)
    return name, name


def _module_chunk(b, chunk):
    if chunk not in b.module:
        b.module.append(chunk)


def _guarded(b, lines, tensor_share=0.25):
    """``lines`` every call, or under a Python condition (the regime decides), or
    under a tensor condition."""
    r = b.rng.random()
    if r < 0.4:
        return lines
    cond = b.cond_tensor() if r > 1.0 - tensor_share else b.cond_python()
    return ['if %s:' % cond] + _indent(lines)


SWAP_CLASS = '''
class Buf:
    def __init__(self, name):
        self.name = name
        self.n = 0
        self.data = None
        self.hist = []
'''

SWAP_WRITES = {
    'objs': ['@A.n += 1', '@B.hist.append(@A.n)', '@A.data = tf.reduce_sum(acc)',
             'acc = acc + (@A.n - @B.n)', "if @A.name == 'A':\n    acc = acc * 0.5",
             'acc = acc + len(@B.hist)',
             'cur_s, oth_s = @A, @B\ncur_s.hist.append(len(oth_s.hist))\noth_s.n = oth_s.n + 2',
             'if @B.data is not None:\n    acc = acc + tf.cast(@B.data, acc.dtype)',
             "@A.hist.append(@A.name)"],
    'lists': ['@A.append(len(@B))', '@A[0] = @A[0] + 1', 'acc = acc + (@A[0] - @B[-1])',
              'if len(@A) > len(@B):\n    acc = acc - 1.0', '@B[-1] = @B[-1] * 2 % 7',
              'cur_s, oth_s = @A, @B\ncur_s.append(oth_s[0])', 'acc = acc + len(@A)'],
}


def f_swap(b):
    """Swaps and rebinding before writes (report 32): two attributes or two globals
    exchange their objects (a tuple swap or through a temporary; every call, under a
    condition, or in a loop: the parity counts), then the call writes, appends and
    increments through the swapped names; the caller swaps, replaces and aliases
    them too."""
    kind = b.rng.choice(['objs', 'objs', 'lists', 'lists'])
    if kind == 'objs':
        _module_chunk(b, SWAP_CLASS)
        inits = ("Buf('A')", "Buf('B')")
    else:
        inits = ('[0]', '[10, 11]')
    a, outa = _holder(b, 'front' if kind == 'objs' else 'pa', inits[0])
    homes = ('attr',) if outa.startswith('S.') else ('global',)
    c, outc = _holder(b, 'back' if kind == 'objs' else 'pb', inits[1], homes)
    # a tuple swap of attributes or globals is refused today: mostly through a temporary
    swap = b.rng.choice(['@A, @B = @B, @A', 'tmp_s = @A\n@A = @B\n@B = tmp_s',
                         'tmp_s = @A\n@A = @B\n@B = tmp_s'])
    b.item(_guarded(b, _lines(_sub(swap, A=a, B=c))))
    for line in b.rng.sample(SWAP_WRITES[kind], b.rng.randint(2, 4)):
        b.item(_sub(line, A=a, B=c))
    fresh_obj = "Buf('C')" if kind == 'objs' else '[5, 6]'
    b.mutations += [_sub('@A, @B = @B, @A', A=outa, B=outc), '%s = %s' % (outa, fresh_obj),
                    ('%s.hist.clear()' if kind == 'objs' else '%s[:] = [3]') % outc]
    b.flip_mutations += ['%s = %s' % (outc, outa), _sub('@A, @B = @B, @A', A=outa, B=outc)]
    if kind == 'objs':
        b.outs.append(b.rng.choice(['@A.name', '(@A.n, @B.n)', '@B.hist', '@A']).replace(
            '@A', a).replace('@B', c))
    else:
        b.outs.append(b.rng.choice([a, c, 'len(%s)' % c]))


CALLBACK_CLASS = '''
class Scaler:
    def __init__(self, s):
        self.s = s
        self.calls = 0
    def apply(self, y):
        self.calls += 1
        return y * self.s
    def shift(self, y):
        return y + self.s
'''


def f_callbacks(b):
    """Bound methods (report 33) and builtin methods (report 40) kept in attributes
    and globals as callbacks; the call and the caller change the callee object,
    install another callback, or rebind the list a builtin method appends to."""
    b.need_state()
    O = b.obj
    kinds = b.rng.sample(['bound', 'bound', 'builtin', 'global'], b.rng.randint(1, 2))
    if 'bound' in kinds or 'global' in kinds:
        _module_chunk(b, CALLBACK_CLASS)
    if 'bound' in kinds:
        sc, act = b.fresh('sc'), b.fresh('act')
        b.state_init += ['self.%s = Scaler(1.5)' % sc, 'self.%s = self.%s.apply' % (act, sc)]
        pool = ['acc = tf.clip_by_value(@O.@ACT(acc), -20.0, 20.0)', 'acc = acc + @O.@ACT(1.0)',
                '@O.@SC.s = -@O.@SC.s', 'if @O.@SC.calls > 2:\n    acc = acc - 0.5',
                'fn_c = @O.@ACT\nacc = tf.clip_by_value(fn_c(acc) + fn_c(0.5), -20.0, 20.0)',
                '@O.@ACT = @O.@SC.shift if @O.@SC.calls % 2 else @O.@SC.apply']
        for line in b.rng.sample(pool, b.rng.randint(2, 3)):
            b.item(_sub(line, O=O, ACT=act, SC=sc))
        b.mutations += ['S.%s.s = %r' % (sc, b.rng.choice([-0.5, 2.5, 3])),
                        'S.%s = Scaler(%r).apply' % (act, b.rng.choice([0.5, -2.0])),
                        'S.%s = S.%s.shift' % (act, sc), 'S.%s.__self__.s = 0.25' % act]
        b.flip_mutations += ['S.%s = S2.%s.apply' % (act, sc), 'S.%s.s = -1.5' % sc,
                             'S.%s = Scaler(2.0).shift' % act]
        b.outs.append('%s.%s.calls' % (O, sc))
    if 'builtin' in kinds:
        h, rec = b.fresh('hist'), b.fresh('record')
        container = b.rng.choice(['list', 'list', 'set'])
        if container == 'list':
            b.state_init += ['self.%s = []' % h, 'self.%s = self.%s.append' % (rec, h)]
            pool = ['@O.@REC(tf.reduce_sum(acc))', '@O.@REC(len(@O.@H))',
                    'acc = acc + len(@O.@H)', 'if @O.@H:\n    acc = acc * 0.5']
            again = 'S.%s = S.%s.append'
            other = 'S.%s = S2.%s.append'
        else:
            b.state_init += ['self.%s = set()' % h, 'self.%s = self.%s.add' % (rec, h)]
            pool = ['@O.@REC(len(@O.@H) % 3)', 'acc = acc + len(@O.@H)',
                    'if 2 in @O.@H:\n    acc = acc * 0.5']
            again = 'S.%s = S.%s.add'
            other = 'S.%s = S2.%s.add'
        lines = b.rng.sample(pool, b.rng.randint(2, 3))
        if not any('@REC(' in ln for ln in lines):
            lines[0] = pool[0]
        for line in lines:
            b.item(_sub(line, O=O, REC=rec, H=h))
        b.mutations += ['S.%s.clear()' % h, 'S.%s = %s' % (h, '[]' if container == 'list' else 'set()'),
                        again % (rec, h)]
        b.flip_mutations += [other % (rec, h), 'S.%s = %s' % (h, '[7]' if container == 'list' else '{2}')]
        b.outs.append(b.rng.choice(['%s.%s' % (O, h), 'len(%s.%s)' % (O, h)]))
    if 'global' in kinds:
        g, cb = b.fresh('SCG'), b.fresh('CB')
        b.glob(g, 'Scaler(0.5)')
        b.glob(cb, '%s.apply' % g)
        b.item('acc = tf.clip_by_value(%s(acc), -20.0, 20.0)' % cb)
        if b.rng.random() < 0.5:
            b.item('%s.s = %s.s + 0.25' % (g, g))
        b.mutations += ['%s.s = -1.0' % g, '%s = Scaler(2.0).apply' % cb, '%s = %s.shift' % (cb, g)]
        b.flip_mutations.append('%s = Scaler(-0.5).apply' % cb)
        b.outs.append('%s.calls' % g)


def f_type_attr(b):
    """Class attributes through ``type(self)`` / ``self.__class__`` (report 36): read
    (while the caller changes them), and sometimes incremented through the class
    (shared by S and S2; refused today) or by ``self.count += 1`` on a class
    attribute (which makes an instance attribute); the caller also shadows one on
    the instance."""
    b.need_state()
    O = b.obj
    cnt, unit = b.fresh('count'), b.fresh('unit')
    b.state_methods += ['%s = 0' % cnt, '%s = 2.0' % unit]
    cls = b.rng.choice(['type(%s)' % O, 'type(%s)' % O, 'type(%s)' % O, '%s.__class__' % O])
    reads = ['acc = acc * @CLS.@UNIT', 'acc = acc + @CLS.@CNT', 'acc = acc + @O.@CNT',
             'acc = acc * @O.@UNIT', 'if @CLS.@CNT % 2 == 0:\n    acc = acc - 0.5',
             'cls_t = @CLS\nacc = acc * cls_t.@UNIT + cls_t.@CNT']
    writes = ['cls_t = @CLS\ncls_t.@CNT = cls_t.@CNT + 1', '@CLS.@CNT += 1',
              '@CLS.@UNIT = @CLS.@UNIT * 0.5 if @CLS.@CNT > 3 else @CLS.@UNIT',
              '@O.@CNT += 1']      # reads the class's, writes the instance's
    lines = b.rng.sample(reads, b.rng.randint(2, 3))
    if b.rng.random() < 0.4:
        lines.append(b.rng.choice(writes))
    for line in lines:
        b.item(_sub(line, CLS=cls, CNT=cnt, UNIT=unit, O=O))
    b.mutations += ['State.%s = 100' % cnt, 'State.%s += 1' % cnt, 'State.%s = -1.0' % unit,
                    'S.%s = 3.0' % unit]
    b.flip_mutations += ['State.%s = %r' % (unit, b.rng.choice([-1.0, 0.5, 3])),
                         'S.%s = 7' % cnt, 'State.%s = 5' % cnt]
    b.outs.append(_sub(b.rng.choice(['@CLS.@CNT', '(@CLS.@CNT, @CLS.@UNIT)', '@O.@CNT']),
                       CLS=cls, CNT=cnt, UNIT=unit, O=O))


NESTED = {
    # (initial value, work items, outside mutations, flip mutations; @N: the container)
    'lists': ('[[], []]',
              ['for h_n in @N:\n    h_n.append(len(h_n))',
               'for h_n, g_n in zip(@N, [x, acc]):\n    h_n.append(tf.reduce_sum(g_n))',
               'acc = acc + (len(@N[0]) + len(@N[-1]))', 'if @N[0]:\n    acc = acc + 1.0',
               '@N[-1].append(len(@N))',
               'for i_n, h_n in enumerate(@N):\n    if i_n == 0:\n        h_n.append(-1)',
               'acc = acc + sum([len(h_n) for h_n in @N])',
               'first_n = @N[0]\nfirst_n.append(0)\nacc = acc + len(@N[0])'],
              ['@N[0].clear()', '@N.append([])', '@N[1] = [5]'],
              ['@N[1] = @N[0]', '@N.append(@N[0])', '@N[0] = []']),
    'dicts': ("{'w': {'n': 0}, 'b': {'n': 0}}",
              ["for d_n in @N.values():\n    d_n['n'] = d_n['n'] + 1",
               "for k_n, d_n in @N.items():\n    d_n['last'] = k_n",
               "acc = acc + @N['w']['n']", "@N['b']['n'] += 2",
               "if @N['w'].get('flag'):\n    acc = acc * 0.5",
               'for k_n in @N:\n    acc = acc + len(@N[k_n])',
               "inner_n = @N['w']\ninner_n['n'] = inner_n.get('n', 0) * 2 % 11"],
              ["@N['w']['n'] = 10", "@N['c'] = {'n': 0}", "@N['w']['flag'] = True"],
              ["@N['b'] = @N['w']", "@N['w'] = {'n': 5, 'flag': 1}"]),
    'grid': ('[[1, 2], [3, 4]]',
             ['@N[0][1] += 1', 'acc = acc + @N[1][0]',
              'row_n = @N[-1]\nrow_n[0] = row_n[0] + len(row_n)',
              'for r_n in @N:\n    r_n[0] = r_n[0] * 2 % 7',
              'for a_n, b_n in zip(@N[0], @N[1]):\n    acc = acc + (a_n - b_n)',
              'if @N[0] == @N[1]:\n    acc = acc * 0.5'],
             ['@N[0] = [0, 0]', '@N[0][0] = 9', '@N.append([5, 6])'],
             ['@N[1] = @N[0]', '@N[0][:] = [3, 4]']),
}


def f_nested(b):
    """Nested containers (report 47): a list of lists, a dict of dicts, a grid, kept at
    an attribute or a global (sometimes passed as an argument too), iterated with
    for / zip / enumerate / .values() / .items() and mutated; the caller replaces
    inner containers and makes two of them one."""
    kind = b.rng.choice(list(NESTED))
    init, pool, muts, flips = NESTED[kind]
    ref, out = _holder(b, 'nest', init)
    arg = None
    if b.rng.random() < 0.3:       # also an argument: the same object by two paths
        arg = b.fresh('nn')
        b.params.append((arg, lambda i: out if not b.regime(i) or i % 2 else init))
        b.outs.append(arg)
    for line in b.rng.sample(pool, b.rng.randint(2, 4)):
        b.item(_sub(line, N=arg if arg and b.rng.random() < 0.5 else ref))
    b.mutations += [_sub(m, N=out) for m in muts]
    b.flip_mutations += [_sub(m, N=out) for m in flips]
    b.outs.append(ref)


def f_set_deque(b):
    """Sets and deques (report 42): truthiness and membership tests (what janus converts)
    while the caller fills and clears them; sometimes len, add / append / popleft /
    discard or a loop in the call too (refused today: the call must then run as
    plain Python)."""
    _module_chunk(b, 'import collections')
    se, out_se = _holder(b, 'seen', b.rng.choice(['set()', 'set()', '{1}']))
    dq, out_dq = _holder(b, 'dq', b.rng.choice(['collections.deque(maxlen=3)',
                                                'collections.deque(maxlen=3)',
                                                'collections.deque([0])']))
    tests = ['if @S:\n    acc = acc + 1.0', 'if 2 in @S:\n    acc = acc * 0.5',
             'if not @S:\n    acc = acc - 0.25', 'acc = acc * 2.0 if @D else acc',
             'if @D:\n    acc = acc * 2.0\nelse:\n    acc = acc + 0.5',
             'if @S and @D:\n    acc = acc - 1.0', 'if 1 in @S or not @D:\n    acc = acc + 0.75']
    changes = ['acc = acc + len(@S)', '@S.add(len(@S) % 3)', '@S.discard(0)',
               'if not @S:\n    @S.add(7)', '@D.append(tf.reduce_sum(acc))', '@D.append(len(@D))',
               'acc = acc + len(@D)', 'if len(@D) >= 2:\n    @D.popleft()',
               'for v_d in @D:\n    acc = acc + tf.cast(v_d, acc.dtype)', 'if 1 in @D:\n    @S.add(2)']
    lines = b.rng.sample(tests, b.rng.randint(2, 3))
    if b.rng.random() < 0.35:
        lines.append(b.rng.choice(changes))
    for line in lines:
        b.item(_sub(line, S=se, D=dq))
    b.mutations += ['%s.clear()' % out_se, '%s.add(2)' % out_se, '%s.add(1)' % out_se,
                    '%s.clear()' % out_dq, '%s.append(5)' % out_dq,
                    '%s = collections.deque([1, 2], maxlen=2)' % out_dq]
    b.flip_mutations += [b.rng.choice(['%s.clear()' % out_se, '%s.add(2)' % out_se]),
                         b.rng.choice(['%s.clear()' % out_dq, '%s.append(1)' % out_dq])]
    b.outs.append(b.rng.choice(['sorted(%s)' % se, se, 'len(%s)' % dq, dq, 'list(%s)' % dq]))


def f_memo(b):
    """Tensors kept in objects and compared by identity (report 39): a memo keyed on
    ``t is self.last_t`` with the same tensor passed again on some calls; a tensor
    attribute compared with ``is`` to another; a list passed as an argument that is
    also an attribute (report 37)."""
    b.need_state()
    O = b.obj
    for kind in b.rng.sample(['memo', 'same', 'arglist'], b.rng.randint(1, 2)):
        if kind == 'memo':
            ts, t = b.fresh('TS'), b.fresh('t')
            b.glob(ts, '[tf.constant(0.5), tf.constant(1.5), tf.constant(-1.0)]')
            last, val, hits = b.fresh('last_t'), b.fresh('last_y'), b.fresh('hits')
            b.state_init += ['self.%s = None' % last, 'self.%s = tf.constant(0.0)' % val,
                             'self.%s = 0' % hits]
            streak = b.rng.choice([2, 3])
            b.params.append((t, lambda i: '%s[%d]' % (
                ts, 2 if b.regime(i) else (i // streak) % 2)))
            b.item(_sub('if @T is @O.@L:\n    @O.@H += 1\nelse:\n    @O.@L = @T\n'
                        '    @O.@V = tf.reduce_sum(@T) * 2.0\n'
                        'acc = acc + tf.cast(@O.@V, acc.dtype)',
                        T=t, O=O, L=last, V=val, H=hits))
            b.mutations += ['S.%s = None' % last, '%s[0] = tf.constant(0.5)' % ts,
                            'S.%s = %s[1]' % (last, ts)]
            b.flip_mutations.append('S.%s = %s[2]' % (last, ts))
            b.outs.append('%s.%s' % (O, hits))
        elif kind == 'same':
            base, cur, lx = b.fresh('base'), b.fresh('cur'), b.fresh('last_x')
            b.state_init += ['self.%s = tf.constant(1.0)' % base, 'self.%s = self.%s' % (cur, base),
                             'self.%s = None' % lx]
            pool = ['if @O.@C is @O.@B:\n    acc = acc + 1.0\nelse:\n    acc = acc - 1.0',
                    '@O.@C = @O.@C * 1.0', '@O.@C = @O.@B',
                    'if x is @O.@X:\n    acc = acc * 0.5\n@O.@X = x',
                    'if @O.@C is not @O.@B:\n    @O.@C = @O.@B\n    acc = acc + 2.0']
            for line in b.rng.sample(pool, b.rng.randint(2, 3)):
                b.item(_sub(line, O=O, C=cur, B=base, X=lx))
            b.mutations += ['S.%s = S.%s' % (cur, base), 'S.%s = tf.constant(1.0)' % cur,
                            'S.%s = S.%s' % (base, cur)]
            b.flip_mutations.append('S.%s = S.%s * 1.0' % (cur, base))
        else:
            items, buf = b.fresh('items'), b.fresh('buf')
            pair = '[tf.constant(1.0), tf.constant(2.0)]'
            b.state_init.append('self.%s = %s' % (items, pair))
            other = b.rng.choice([pair, 'S2.%s' % items])
            b.params.append((buf, lambda i: other if b.regime(i) else 'S.%s' % items))
            pool = ['@B[0] = @B[0] + 1.0\nacc = acc + tf.cast(@O.@I[0], acc.dtype)',
                    '@B.append(tf.constant(float(len(@O.@I))))',
                    '@O.@I[-1] = tf.cast(tf.reduce_sum(x), tf.float32)\n'
                    'acc = acc + tf.cast(@B[-1], acc.dtype)',
                    'if @B is @O.@I:\n    acc = acc * 2.0',
                    '@O.@I = @O.@I + [tf.constant(0.5)]',
                    '@B[0] = tf.cast(tf.reduce_sum(acc), tf.float32)\n'
                    'acc = acc + tf.cast(@O.@I[0], acc.dtype)']
            for line in b.rng.sample(pool, b.rng.randint(2, 3)):
                b.item(_sub(line, O=O, I=items, B=buf))
            b.mutations += ['S.%s = [tf.constant(3.0)]' % items,
                            'S.%s.append(tf.constant(4.0))' % items,
                            'S.%s[0] = tf.constant(-1.0)' % items]
            b.outs.append(b.rng.choice([buf, '%s.%s' % (O, items)]))


def f_raise_mid(b):
    """User code raising mid-call after state changes (reports 31, 34, 41): a dict
    write, a counter, a variable update, an append or a print, then a raise on some
    calls (an explicit raise the regime or a counter decides, a shape mismatch after
    a shape change, a gather past the end, an assertion on the input)."""
    _module_chunk(b, 'class FuzzError(Exception):\n    pass')
    b.need_state()
    O = b.obj
    log, tries = b.fresh('log'), b.fresh('tries')
    b.state_init += ['self.%s = {}' % log, 'self.%s = 0' % tries]
    effects = ["@O.@L['calls'] = @O.@L.get('calls', 0) + 1", '@O.@T += 1',
               "print('try', @O.@T, tf.reduce_sum(acc))", "@O.@L[@O.@T] = tf.reduce_sum(acc)"]
    if b.rng.random() < 0.5:
        v = b.fresh('VR')
        b.glob(v, 'tf.Variable(0.0)')
        effects.append('%s.assign_add(1.0)' % v)
        b.mutations.append('%s.assign(-3.0)' % v)
        b.outs.append(v)
    before = [_sub(e, O=O, L=log, T=tries) for e in b.rng.sample(effects, b.rng.randint(1, 3))]
    trigger = b.rng.choice(['p', 'count', 'shape', 'gather', 'assert'])
    if trigger == 'p':
        p = b.need_p()
        raise_lines = ["if %s > %d:\n    raise FuzzError('p=%%d after %%d tries' %% (%s, %s.%s))"
                       % (p, max(b.p_values) - 1, p, O, tries)]
    elif trigger == 'count':
        raise_lines = ["if %s.%s %% %d == %d:\n    raise FuzzError('try %%d' %% %s.%s)"
                       % (O, tries, b.rng.choice([3, 4]), b.rng.choice([0, 2]), O, tries)]
        if not any(tries in ln for ln in before):
            before.append('%s.%s += 1' % (O, tries))
    elif trigger == 'shape':
        b.x.shape_changes = True
        w = b.fresh('WM')
        b.glob(w, 'tf.ones([%d, 1])' % b.x.length)
        raise_lines = ['acc = acc + tf.cast(tf.reduce_sum(tf.matmul('
                       'tf.reshape(tf.cast(acc, tf.float32), [1, -1]), %s)), acc.dtype)' % w]
    elif trigger == 'gather':
        cur = b.fresh('cursor')
        b.state_init.append('self.%s = tf.Variable(0)' % cur)
        before.append('%s.%s.assign_add(1)' % (O, cur))
        raise_lines = ['acc = acc + tf.gather(x, %s.%s %% 4)' % (O, cur)]
        b.mutations.append('S.%s.assign(0)' % cur)
    else:
        b.x.spikes.add(b.rng.randint(b.flip, b.ncalls - 1))
        raise_lines = ["tf.debugging.assert_less(tf.reduce_max(tf.cast(x, tf.float32)), 2.875, "
                       "message='x too large')"]
    after = [_sub(e, O=O, L=log, T=tries) for e in b.rng.sample(effects, b.rng.randint(0, 1))]
    b.item(before + [ln for chunk in raise_lines for ln in chunk.split('\n')] + after,
           loopable=b.rng.random() < 0.3)
    b.mutations += ['S.%s.clear()' % log, 'S.%s = 0' % tries]
    b.outs.append(b.rng.choice(['%s.%s' % (O, log), '%s.%s' % (O, tries), 'len(%s.%s)' % (O, log)]))


def f_static_eager(b):
    """``tf.executing_eagerly()`` and ``tf.get_static_value()`` steering Python control
    flow and Python state (report 48): eagerly, execution is always eager and every
    value is known."""
    cnt, out = _holder(b, 'eager_n', '0', ('attr', 'global'))
    pool = ['if tf.executing_eagerly():\n    acc = acc + 1.0\nelse:\n    acc = acc - 1.0',
            'known_s = tf.get_static_value(tf.reduce_sum(x))\nif known_s is not None:\n'
            '    @C += 1\n    acc = acc * 2.0',
            'known_s = tf.get_static_value(x)\nif known_s is not None and known_s[0] > 0:\n'
            '    acc = acc + 0.5',
            'n_s = tf.get_static_value(tf.shape(x)[0])\nif n_s is not None:\n    acc = acc + int(n_s)',
            "print('eager:', tf.executing_eagerly())",
            'if tf.executing_eagerly():\n    @C += 1',
            'v_s = tf.get_static_value(tf.reduce_max(acc))\n'
            'if v_s is not None and v_s > 1.0:\n    @C = @C + 2\n    acc = acc * 0.5',
            'if tf.get_static_value(tf.constant(2)) == 2:\n    acc = acc * 1.5']
    for line in b.rng.sample(pool, b.rng.randint(1, 3)):
        b.item(_sub(line, C=cnt))
    b.mutations.append('%s = 10' % out)
    b.outs.append(cnt)


# -- graph breaks (issue 19) ----------------------------------------------------------------
#
# Statements janus cannot put in a graph, in the idioms users write them, mixed with the
# tensor statements above: janus runs each in Python and the statements around it in
# graph segments of their own (graphgen/segments.py).  Values cross a break only as real
# values, so the break's statement must see exactly what eager shows at that point, and
# what it changes (a NumPy RNG, a Python iterator, a list of floats, a counter) must be
# what the next segment reads.

def _break_calls(b):
    """Enough calls for a break's segments to run graphs (a break is found when the first
    graph is built, at call 4; each segment then profiles 3 calls of its own), and, half
    the time, the regime flip after that: assumptions of the segments' graphs break."""
    b.ncalls = max(b.ncalls, b.rng.randint(9, 13))
    if b.rng.random() < 0.5:
        b.flip = b.rng.randint(7, b.ncalls - 1)


BREAK_PRINTS = [
    "print('loss', @T.numpy())",
    "print('total %.4f' % float(tf.reduce_sum(@T)))",
    "print('sum', @T.numpy().sum())",
    "print(f'mean {float(tf.reduce_mean(@T)):.3f}')",
    "print('max', tf.reduce_max(@T).numpy().item())",
    "print('first', float(@T[0]), @T.numpy().shape)",
]


def f_break_print(b):
    """``print`` of a materialized value: every N calls (a counter attribute, global or
    cell) or every call."""
    line = _sub(b.rng.choice(BREAK_PRINTS), T=b.rng.choice(['acc', 'acc', 'x']))
    if b.rng.random() < 0.55:
        step = _number(b, 'logstep', '0', _home(b, ('attr', 'attr', 'global', 'cell')))
        S, n = step.ref, b.rng.choice([2, 3, 3, 4])
        b.item('%s += 1' % S, loopable=False)
        body = [line]
        if b.rng.random() < 0.4:
            body.append(arith(b, 1))      # tensor work in the branch after the break
        b.item(['if %s %% %d == 0:' % (S, n)] + _indent(body))
        if step.setter is not None:
            b.mutations.append(step.set(b.rng.choice(['100', '0', '7'])))
        b.outs.append(S)
    else:
        b.item(line)


BREAK_SIZERS = [
    'int(tf.reduce_max(tf.abs(acc)).numpy()) % 3 + 1',
    'int(tf.size(x).numpy())',
    'int(np.ceil(float(tf.reduce_sum(tf.abs(x))))) % 4',
    'len(acc.numpy())',
    'int(tf.reduce_sum(tf.cast(x > 0.0, tf.int32)).numpy())',
]
BREAK_SIZE_USES = [
    'pad_ = tf.pad(acc, [[0, @N]])\nacc = acc + tf.reduce_sum(pad_) * 0.25',
    'z_ = tf.zeros([@N], dtype=acc.dtype)\nacc = acc + tf.cast(tf.size(z_), acc.dtype)',
    'z_ = tf.ones([@N, 2])\nacc = acc + tf.cast(tf.reduce_sum(z_), acc.dtype) * 0.5',
    'acc = tf.concat([acc, tf.zeros([@N], acc.dtype)], 0)[:tf.shape(x)[0]]',
    'acc = acc + tf.cast(tf.reduce_sum(tf.range(@N)), acc.dtype)',
]


def f_break_size(b):
    """``int(t.numpy())`` sizing a later ``tf.zeros``/``tf.pad``/``tf.range``."""
    n = b.fresh('nsz')
    b.inits.append('%s = 0' % n)
    b.item('%s = %s\n%s' % (n, b.rng.choice(BREAK_SIZERS),
                            _sub(b.rng.choice(BREAK_SIZE_USES), N=n)))
    b.outs.append(n)


def f_break_numpy(b):
    """NumPy on materialized values, kept in Python lists and attributes."""
    hist = _list_home(b, 'metrics')
    pool = ['m_ = np.mean(acc.numpy())\n@H.append(float(m_))',
            'k_ = int(np.argmax(x.numpy()))\nacc = acc + k_\n@H.append(k_)',
            'acc = tf.clip_by_value(acc * float(np.std(acc.numpy()) + 1.0), -20.0, 20.0)',
            '@H.append(np.round(acc.numpy(), 3).tolist())',
            'arr_ = np.maximum(acc.numpy(), 0.0)\nacc = acc + tf.constant(arr_)',
            'if np.any(x.numpy() < 0):\n    acc = acc * 0.5',
            'q_ = float(np.percentile(acc.numpy(), 50))\nacc = acc - q_\n@H.append(q_)',
            'acc = acc + float(np.dot(x.numpy(), x.numpy()))']
    if b.uses_state or b.rng.random() < 0.3:
        b.need_state()
        last = b.fresh('last_np')
        b.state_init.append('self.%s = None' % last)
        pool.append('%s.%s = acc.numpy()' % (b.obj, last))
        pool.append('%s.%s = np.abs(x.numpy()) * 2\nacc = acc + tf.constant(%s.%s)[0]'
                    % (b.obj, last, b.obj, last))
        b.outs.append('%s.%s' % (b.obj, last))
    for line in b.rng.sample(pool, b.rng.randint(1, 3)):
        b.item(_sub(line, H=hist))
    b.outs.append(b.rng.choice([hist, 'len(%s)' % hist]))


RNG_DRAWS = {
    'RandomState': ['acc = acc + @R.randn()', 'acc = acc * @R.randint(1, 4)',
                    'noise_ = @R.uniform(-0.5, 0.5, size=2)\nacc = acc + float(noise_.sum())',
                    'if @R.rand() < 0.5:\n    acc = acc * 0.5',
                    'acc = acc + tf.cast(tf.constant(@R.randn(*acc.shape)), acc.dtype)',
                    'idx_ = @R.randint(0, tf.size(x).numpy())\nacc = acc + tf.gather(x, idx_)',
                    'acc = acc + float(@R.choice([0.5, 1.0, 2.0]))'],
    'Generator': ['acc = acc + @R.normal()', 'acc = acc * int(@R.integers(1, 4))',
                  'if @R.random() < 0.5:\n    acc = acc - 0.25',
                  'acc = acc + tf.cast(tf.constant(@R.standard_normal(tuple(acc.shape))), acc.dtype)'],
}


def f_break_rng(b):
    """A NumPy ``RandomState`` (or ``Generator``) held in an object or a global, drawn
    from and used in tensor math; the caller draws from it and reseeds it too."""
    kind = b.rng.choice(['RandomState', 'RandomState', 'RandomState', 'Generator'])
    seed = b.rng.randint(0, 99)
    init = ('np.random.RandomState(%d)' if kind == 'RandomState' else 'np.random.default_rng(%d)') % seed
    ref, out = _holder(b, 'rng', init)
    for line in b.rng.sample(RNG_DRAWS[kind], b.rng.randint(1, 3)):
        b.item(_sub(line, R=ref))
    if kind == 'RandomState':
        b.mutations += ['%s.randn()' % out, '%s = np.random.RandomState(5)' % out, '%s.seed(3)' % out]
        b.flip_mutations.append('%s.randint(10)' % out)
    else:
        b.mutations += ['%s.normal()' % out, '%s = np.random.default_rng(5)' % out]
    b.outs.append(b.rng.choice(['acc', 'tf.reduce_sum(acc)']))


def f_break_iter(b):
    """``next(it)`` on a Python iterator over a list, held in an object or a global
    (sometimes a short one, with a default or running out: StopIteration)."""
    short = b.rng.random() < 0.25
    n = b.rng.randint(4, 9) if short else 60
    ref, out = _holder(b, 'feed', 'iter([%s])' % ', '.join(
        repr(0.25 * (k % 7)) for k in range(n)))
    pool = ['v_ = next(@I)\nacc = acc + v_', 'acc = acc * next(@I, 1.0)',
            'b_ = next(@I, 0.0)\nif b_ > 0.75:\n    acc = acc * 0.5\nelse:\n    acc = acc + b_']
    for line in b.rng.sample(pool, b.rng.randint(1, 2)):
        b.item(_sub(line, I=ref))
    b.mutations += ['next(%s)' % out, '%s = iter([1.0, 2.0] * 20)' % out]
    b.flip_mutations.append('%s = iter([0.5])' % out)
    b.outs.append(b.rng.choice(['acc', 'tf.reduce_sum(acc)']))


def f_break_try(b):
    """``try``/``except KeyError``/``ZeroDivisionError`` (``else``, ``finally``) with tensor
    work in the body and in the handler."""
    table, out = _holder(b, 'table', b.rng.choice(['{}', "{'k0': 1.5}"]))
    p = b.need_p()
    base = b.p_values[0]
    pool = ["try:\n    acc = acc * 2.0\n    acc = acc + @T['k%d' % @P]\nexcept KeyError:\n"
            "    acc = acc - 0.5\n    @T['k%d' % @P] = float(len(@T))",
            'try:\n    r_ = 1.0 / (@P - @B)\nexcept ZeroDivisionError:\n    r_ = 0.0\n'
            '    acc = tf.nn.relu(acc)\nacc = acc + r_',
            "try:\n    acc = acc + len(@T) / (len(@T) % 2)\nexcept ZeroDivisionError as e_:\n"
            "    print('zero', e_)\n    acc = acc * 0.5\nfinally:\n    @T['n'] = @T.get('n', 0) + 1",
            "try:\n    v_ = @T['k%d' % (@P + 1)]\nexcept (KeyError, IndexError):\n"
            "    v_ = tf.reduce_sum(acc)\nelse:\n    v_ = v_ * 2\nacc = acc + v_",
            "try:\n    acc = tf.clip_by_value(acc / (@P - @B), -20.0, 20.0)\n"
            "except ZeroDivisionError:\n    acc = acc + 1.0"]
    for line in b.rng.sample(pool, b.rng.randint(1, 2)):
        b.item(_sub(line, T=table, P=p, B=str(base)))
    b.mutations += ["%s['k%d'] = 3.0" % (out, base), '%s.clear()' % out]
    b.outs.append(b.rng.choice([table, 'sorted(%s)' % table]))


def f_break_stats(b):
    """``statistics.mean`` / ``bisect.bisect`` on a list of Python floats from tensors."""
    _module_chunk(b, 'import statistics')
    _module_chunk(b, 'import bisect')
    hist = _list_home(b, 'losses')
    bounds = b.fresh('BOUNDS')
    b.glob(bounds, '[0.5, 2.0, 8.0]')
    head = '@H.append(float(tf.reduce_mean(acc * acc)))'
    pool = ['acc = acc + bisect.bisect(@BD, statistics.mean(@H))',
            'acc = acc * (1 + bisect.bisect_left(@BD, statistics.median(@H)))',
            'if len(@H) > 1 and statistics.pstdev(@H) > 1.0:\n    acc = acc * 0.5',
            'mean_ = statistics.fmean(@H[-3:])\nacc = acc - mean_ * 0.1',
            'bisect.insort(@BD, round(@H[-1], 2))\nacc = acc + len(@BD)']
    lines = [head] + b.rng.sample(pool, b.rng.randint(1, 2))
    b.item(_sub('\n'.join(lines), H=hist, BD=bounds))
    b.mutations += ['%s = [0.5, 1.0]' % bounds]
    b.outs.append(b.rng.choice([hist, 'len(%s)' % hist]))


def f_break_unbound(b):
    """A local bound only in a loop that may run zero times (or a branch that may not
    run), read after a break: UnboundLocalError exactly as eager raises it."""
    n, last = b.fresh('nit'), b.fresh('last')
    k = b.rng.randint(1, 3)
    b.params.append((n, lambda i: '0' if b.regime(i) and i % 2 == 0 else str(k)))
    pool = ["for j_ in range(@N):\n    @L = acc * 2.0\nprint('last', @L.numpy())\nacc = acc + @L",
            'for j_ in range(@N):\n    @L = acc * 2.0\n    if j_ >= 1:\n        break\n'
            'acc = acc + float(tf.reduce_sum(@L))',
            'if @N > 1:\n    @L = tf.reduce_sum(acc)\nv_ = @L.numpy()\nacc = acc + v_',
            "while @N > 0:\n    @L = tf.reduce_mean(acc)\n    @N -= 1\nprint('m', float(@L))\n"
            'acc = acc - @L']
    b.item(_sub(b.rng.choice(pool), N=n, L=last))


def f_break_raise(b):
    """A user exception raised after a break (the value decided in Python), with state
    changed and output printed before it."""
    _module_chunk(b, 'class FuzzError(Exception):\n    pass')
    b.x.spikes.add(b.rng.randint(b.flip, b.ncalls - 1))
    seen = _list_home(b, 'seen')
    head = b.rng.choice(['v_ = float(tf.reduce_max(x).numpy())',
                         'v_ = x.numpy().max().item()',
                         'v_ = float(tf.reduce_max(x))'])
    lines = [head, '@S.append(v_)']
    if b.rng.random() < 0.5:
        lines.append("print('value', v_)")
    lines.append(b.rng.choice(["if v_ > 2.875:\n    raise FuzzError('too large: %.2f' % v_)",
                               "assert v_ < 2.875, 'too large'",
                               "if v_ > 2.875:\n    raise ValueError(v_)"]))
    lines.append('acc = acc + v_ * 0.1')
    b.item(_sub('\n'.join(lines), S=seen), loopable=b.rng.random() < 0.5)
    b.outs.append(b.rng.choice([seen, 'len(%s)' % seen]))


def f_break_counters(b):
    """A ``global``/``nonlocal``/attribute counter written before and after a break."""
    if b.variant == 'function' and b.rng.random() < 0.5:
        b.variant = 'closure'
    c = _number(b, 'bcount', '0', _home(b, ('global', 'cell', 'cell', 'attr')))
    C = c.ref
    b.item(_sub(b.rng.choice([
        "@C += 1\ny_ = acc + @C\nprint('y', y_.numpy())\n@C += 1\nacc = y_ * 0.5",
        "@C = @C + 2\nif float(tf.reduce_sum(acc)) > @C:\n    @C -= 1\nacc = acc + @C",
        "@C += int(tf.reduce_sum(tf.cast(x > 0.0, tf.int32)).numpy())\nacc = acc * 0.5 + @C"]), C=C))
    if c.setter is not None:
        b.mutations.append(c.set(b.rng.choice(['10', '-1', '2.5'])))
    b.outs.append(C)


def f_break_tape(b):
    """A break inside a ``GradientTape`` body (a train step printing its loss), the
    gradient taken after it; sometimes an optimizer-style update with it."""
    W = b.fresh('WT')
    b.glob(W, 'tf.Variable(%r)' % b.rng.choice([0.5, 1.5, -1.0]))
    brk = b.rng.choice(["print('loss', loss_t.numpy())",
                        "print('loss %.3f' % float(loss_t))",
                        "if float(loss_t) > 50.0:\n    print('large loss')"])
    watch = b.rng.random() < 0.5
    body = ['tape_t.watch(x)'] if watch else []
    body += ['y_t = tf.cast(acc, tf.float32) * %s' % W,
             'loss_t = tf.reduce_sum(y_t * y_t) * 0.5'] + brk.split('\n')
    if b.rng.random() < 0.4:
        body.append('loss_t = loss_t + 0.0 * tf.reduce_sum(y_t)')
    if watch:
        after = ['gw_t, gx_t = tape_t.gradient(loss_t, [%s, x])' % W,
                 'acc = acc + tf.cast(gx_t, acc.dtype) * 0.1']
    else:
        after = ['gw_t = tape_t.gradient(loss_t, %s)' % W]
    if b.rng.random() < 0.6:
        after.append('%s.assign_sub(0.01 * tf.clip_by_value(gw_t, -10.0, 10.0))' % W)
    b.item(['with tf.GradientTape() as tape_t:'] + _indent(body) + after)
    b.outs += [W, 'gw_t']


# -- graph breaks, second set: user context managers, generator functions, log lines ---------
#
# Appended after BREAK_FEATURES' first eleven (BREAK_FEATURES2): skipping these three gives
# the programs of before them.

CTX_CLASSES = '''
class Timer:
    """Records its enters and exits (stands in for wall-clock timing)."""
    def __init__(self, log, name='blk'):
        self.log = log
        self.name = name
        self.depth = 0
        self.entered = 0

    def __enter__(self):
        self.depth += 1
        self.entered += 1
        self.log.append('enter %s' % self.name)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.depth -= 1
        self.log.append('exit %s %s' % (self.name, exc_type.__name__ if exc_type else 'ok'))
        return False


class Skip:
    """Swallows KeyError (a user-written contextlib.suppress)."""
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        return len(self.log)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.log.append('skipped %s' % exc_type.__name__)
        return exc_type is KeyError


@contextlib.contextmanager
def timed(log, name):
    log.append('start ' + name)
    try:
        yield len(log)
    finally:
        log.append('stop ' + name)
'''


def _ctx_body(b, first):
    """Tensor work around (sometimes) a break, inside a ``with`` body."""
    body = [first] if first else []
    if b.rng.random() < 0.6:
        body.append(_sub(b.rng.choice(BREAK_PRINTS), T='acc'))
    body.append(b.rng.choice([arith(b, 1), 'acc = acc + 1.0', 'acc = tf.nn.relu(acc) - 0.5']))
    b.rng.shuffle(body)
    return body


def f_break_ctx(b):
    """A user-defined context manager around tensor code (a ``Timer`` class recording
    enters and exits, a ``@contextlib.contextmanager`` generator, one swallowing
    KeyError), fresh each call or kept in an attribute or global; the body holds
    tensor statements and sometimes a print of a materialized value."""
    _module_chunk(b, 'import contextlib')
    _module_chunk(b, CTX_CLASSES)
    log = _list_home(b, 'tlog')
    kind = b.rng.choice(['fresh', 'fresh', 'as', 'held', 'gen', 'skip'])
    if kind == 'fresh':
        lines = ["with Timer(%s, 'fwd'):" % log] + _indent(_ctx_body(b, 'acc = acc * 1.5'))
    elif kind == 'as':
        lines = ['with Timer(%s) as tm_:' % log] + _indent(_ctx_body(
            b, 'acc = acc + tm_.depth * 0.5'))
        if b.rng.random() < 0.5:
            lines.append('acc = acc - tm_.entered')
    elif kind == 'held':
        ref, out = _holder(b, 'timer', "Timer([], 'step')")
        lines = ['with %s:' % ref] + _indent(_ctx_body(b, 'acc = acc - 0.25'))
        lines.append('%s.append(%s.entered)' % (log, ref))
        b.mutations.append('%s.log.clear()' % out)
        b.outs.append('%s.log[-3:]' % ref)
    elif kind == 'gen':
        lines = ["with timed(%s, 'step') as k_:" % log] + _indent(_ctx_body(
            b, 'acc = acc + k_ * 0.125'))
    else:
        lines = ['with Skip(%s):' % log] + _indent([
            'acc = acc * 2.0', 'if %s:' % b.cond_tensor(), "    raise KeyError('pos')",
            'acc = acc + 1.0'])
    b.item(lines)
    if '.' in log or not log[0].islower():       # (a closure cell's list: not from outside)
        b.mutations.append('%s.clear()' % ('S.' + log.split('.', 1)[1] if '.' in log else log))
    b.outs.append(b.rng.choice([log, 'len(%s)' % log]))


GEN_FUNCTIONS = '''
def scaled(t, k):
    for i in range(k):
        yield t * (0.5 * (i + 1))


def pairs(t):
    for i, v in enumerate(t.numpy().tolist()):
        yield i, v


def running(t, log):
    total = 0.0
    for v in t.numpy():
        total += float(v)
        log.append(round(total, 4))
        yield total
'''


def f_break_gen(b):
    """A generator function consumed by a ``for`` loop in the target (yielding tensors,
    Python floats of a materialized tensor, or a running total logged as it goes),
    sometimes left early with ``break`` or started with ``next``."""
    _module_chunk(b, GEN_FUNCTIONS)
    k = b.need_p() if b.rng.random() < 0.4 else str(b.rng.randint(1, 3))
    pool = ['for v_ in scaled(acc, @K):\n    acc = acc + tf.reduce_sum(v_) * 0.1',
            'for i_, v_ in pairs(x):\n    acc = acc + v_ * i_',
            'for i_, v_ in pairs(acc):\n    if v_ > 1.0:\n        break\n    acc = acc * 0.5 + v_',
            'g_ = scaled(x, 3)\nacc = acc + next(g_)\nfor v_ in g_:\n    acc = acc - v_ * 0.25',
            'for v_, j_ in zip(scaled(acc, 3), range(@K)):\n    acc = tf.clip_by_value(acc + v_, -20.0, 20.0)']
    log = None
    if b.rng.random() < 0.5:
        log = _list_home(b, 'totals')
        pool.append('for s_ in running(x, @L):\n    if s_ > 1.0:\n        break\n'
                    '    acc = acc * 0.5 + s_')
        pool.append("for s_ in running(acc, @L):\n    print('running', s_)")
        b.outs.append(b.rng.choice([log, 'len(%s)' % log]))
    for line in b.rng.sample(pool, b.rng.randint(1, 2)):
        b.item(_sub(line, K=k, L=log or ''))
    b.outs.append(b.rng.choice(['acc', 'tf.reduce_sum(acc)']))


LOG_SETUP = '''
class ListHandler(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


LOGGER = logging.Logger('fuzzprog')
LOG_LINES = ListHandler()
LOGGER.addHandler(LOG_LINES)
'''

LOG_STATEMENTS = [
    "print(f'step {@S}: loss={loss_.numpy():.3f}')",
    "print(f'loss {loss_:.4f} acc {acc.numpy()}')",
    "print('{:>6} {:.3f}'.format('loss', loss_.numpy()))",
    "print('%s: %.4f' % ('loss', loss_.numpy()), end=' | ')\nprint(f'{float(tf.reduce_max(x)):+.2f}')",
    "sys.stdout.write('loss=%.3f\\n' % float(loss_))",
    "LOGGER.info('step %d loss %.3f', @S, loss_.numpy())",
    "LOGGER.warning(f'loss {float(loss_):.2f}')",
]


def f_break_log(b):
    """Training-loop logging: a loss computed as a tensor, printed with f-strings and
    format specs of ``.numpy()``/``float()`` values (or of the tensor itself), written
    to ``sys.stdout`` or to a ``logging.Logger`` with a list handler; every call or
    every N calls."""
    _module_chunk(b, 'import sys')
    _module_chunk(b, 'import logging')
    _module_chunk(b, LOG_SETUP)
    step = _number(b, 'logstep', '0', _home(b, ('attr', 'global', 'cell')))
    S = step.ref
    loss = b.rng.choice(['loss_ = tf.reduce_mean(acc * acc)',
                         'loss_ = tf.reduce_sum(tf.abs(acc - x)) * 0.5'])
    stmts = b.rng.sample(LOG_STATEMENTS, b.rng.randint(1, 2))
    body = _lines(_sub('\n'.join(stmts), S=S))
    b.item('%s += 1' % S, loopable=False)
    if b.rng.random() < 0.5:
        n = b.rng.choice([2, 3])
        b.item([loss, 'if %s %% %d == 0:' % (S, n)] + _indent(body) + [arith(b, 1)])
    else:
        b.item([loss] + body + ['acc = acc - loss_ * 0.1'])
    if step.setter is not None:
        b.mutations.append(step.set(b.rng.choice(['100', '0'])))
    b.outs += [S, 'LOG_LINES.lines[-2:]', 'len(LOG_LINES.lines)']


# issue 20 (appended last: skipping DATASET_FEATURES gives the programs of before)

def f_ds_loop(b):
    """A ``for`` loop over a tf.data dataset held in a global (one tf.while_loop):
    accumulating into a tensor or a Python float, ``enumerate`` of it, an ``assert``
    inside; mutations swap in a dataset of another length (an empty one too)."""
    ds = b.fresh('DS')
    b.glob(ds, 'tf.data.Dataset.from_tensor_slices(tf.reshape(tf.range(6.0), [3, 2]))')
    tot = b.fresh('tot_')
    choice = b.rng.random()
    if choice < 0.35:
        b.item('for e_ in %s:\n    acc = acc + tf.reduce_sum(e_) * 0.25' % ds)
    elif choice < 0.6:
        b.item('%s = 0.0\nfor e_ in %s:\n    %s += tf.reduce_mean(e_)\nacc = acc + %s * 0.1'
               % (tot, ds, tot, tot))
    elif choice < 0.8:
        b.item('for i_, e_ in enumerate(%s):\n    acc = acc + tf.reduce_sum(e_) * i_' % ds)
    else:
        b.item("for e_ in %s:\n    assert tf.reduce_min(e_) > -1.0, 'negative'\n"
               "    acc = acc - tf.reduce_max(e_) * 0.5" % ds)
    b.mutations.append('%s = tf.data.Dataset.from_tensor_slices(tf.ones([%d, 2]))'
                       % (ds, b.rng.randint(1, 5)))
    b.flip_mutations.append(b.rng.choice([
        '%s = tf.data.Dataset.from_tensor_slices(tf.zeros([0, 2]))' % ds,
        '%s = tf.data.Dataset.from_tensor_slices(-2.0 * tf.ones([2, 2]))' % ds]))


def f_ds_iter_arg(b):
    """The caller's tf.data iterator passed in (``train_step(iterator)``): one
    ``next()`` per call, or a loop over it ending at a tensor ``break``; the caller
    also pulls between calls, and the flip passes a short iterator (StopIteration,
    an empty loop)."""
    it = b.fresh('ITA')
    b.glob(it, 'iter(tf.data.Dataset.range(1000))')
    param = b.fresh('itp')
    b.params.append((param, lambda i, it=it: it))
    if b.rng.random() < 0.5:
        b.item('e_ = next(%s)\nacc = acc + tf.cast(e_, acc.dtype) * 0.01' % param, loopable=False)
    else:
        b.item('for e_ in %s:\n    acc = acc + tf.cast(e_, acc.dtype) * 0.01\n'
               '    if e_ %% 3 == 0:\n        break' % param, loopable=False)
    b.mutations.append('next(%s)' % it)
    b.flip_mutations.append('%s = iter(tf.data.Dataset.range(%d))' % (it, b.rng.choice([0, 2, 50])))


def f_bool_flag(b):
    """A Python bool argument that flips often (an LSTM's ``reset``): relaxed to a
    graph input after its second value, its ``if`` real control flow."""
    flag = b.fresh('reset')
    period = b.rng.choice([2, 3])
    b.params.append((flag, lambda i: 'True' if i % period == 0 else 'False'))
    pool = ['if %s:\n    acc = acc * 0.0 + 1.0' % flag,
            'acc = acc * (0.5 if %s else 1.0)' % flag,
            'if not %s:\n    acc = acc + 0.25\nelse:\n    acc = acc - 0.125' % flag,
            'acc = acc + tf.cast(%s, acc.dtype)' % flag]
    for line in b.rng.sample(pool, b.rng.randint(1, 2)):
        b.item(line)
    b.outs.append(flag)


_KERAS_LIST_MAKER = """def make_keras_list_(name):
    m = tf.keras.layers.Layer(name=name)
    m.blocks = [tf.keras.layers.Dense(1, kernel_initializer='ones', name=name + '_d0'),
                tf.keras.layers.Dense(1, kernel_initializer='zeros', bias_initializer='ones',
                                      name=name + '_d1')]
    m.table = {'a': 0.5, 'b': 2.0}
    return m"""


def f_keras_list(b):
    """Keras's tracking containers: a list of layers and a dict set on a layer
    (``ListWrapper``/``_DictWrapper``) read like a list and a dict; the caller
    changes the dict and appends a layer."""
    if _KERAS_LIST_MAKER not in b.module:
        b.module.append(_KERAS_LIST_MAKER)
    kl = b.fresh('KL')
    b.glob(kl, "make_keras_list_('%s')" % kl.lower())
    y = "tf.reshape(tf.cast(acc, tf.float32), [1, -1])"
    pool = ['y_ = %s\nfor blk_ in %s.blocks:\n    y_ = blk_(y_)\n'
            'acc = acc + tf.cast(tf.reduce_sum(y_), acc.dtype) * 0.1' % (y, kl),
            "acc = acc * %s.table['a'] + len(%s.blocks) * 0.125" % (kl, kl),
            'acc = acc + tf.cast(tf.reduce_sum(%s.blocks[-1](%s)), acc.dtype) * 0.1' % (kl, y)]
    for line in b.rng.sample(pool, b.rng.randint(1, 2)):
        b.item(line)
    b.mutations.append("%s.table['a'] = 0.25" % kl)
    b.flip_mutations.append("%s.blocks.append(tf.keras.layers.Dense(1, kernel_initializer='ones', "
                            "name='%s_d2'))"
                            % (kl, kl.lower()))


def f_list_iter_arg(b):
    """The caller's list (or tuple, or range) iterator passed in: a loop runs to its
    end or to a Python ``break``, a second loop picks up where the first left it;
    the caller pulls between calls, and the flip passes an exhausted or a longer
    iterator."""
    it = b.fresh('LIT')
    items = b.rng.choice(['[0.5, 1.5, 2.5, 3.5]', '(1, 2, 3)', 'range(4)',
                          '[tf.constant(1.0), tf.constant(2.0), tf.constant(-1.0)]'])
    b.glob(it, 'iter(%s)' % items)
    param = b.fresh('lip')
    b.params.append((param, lambda i, it=it: it))
    if b.rng.random() < 0.5:
        b.item('for e_ in %s:\n    acc = acc + tf.cast(e_, acc.dtype) * 0.01' % param,
               loopable=False)
    else:
        b.item('for k_, e_ in zip(range(2), %s):\n    acc = acc + tf.cast(e_, acc.dtype) * 0.1\n'
               'for e_ in %s:\n    acc = acc - tf.cast(e_, acc.dtype) * 0.01\n'
               '    if e_ > 2:\n        break' % (param, param), loopable=False)
    b.mutations.append('next(%s, None)' % it)
    b.flip_mutations.append(b.rng.choice(['%s = iter([])' % it,
                                          '%s = iter([9.0] * 6)' % it,
                                          'list(%s)' % it]))


def f_mutate_loop(b):
    """A loop over an outside list, deque or dict whose body changes it: a list's
    appends and item writes are seen by the later steps; a dict or deque that grows
    raises RuntimeError at the next pull, as eagerly."""
    name = b.fresh('ML')
    kind = b.rng.choice(['list', 'list', 'deque', 'dict'])
    if kind == 'dict':
        b.glob(name, "{'a': 1.0, 'b': 2.5}")
        b.item("for k_, v_ in %s.items():\n    if v_ < 2.0 and len(%s) < 3:\n"
               "        %s[k_ + 'x'] = v_ + 3.0\n    acc = acc + v_ * 0.1" % (name, name, name),
               loopable=False)
        b.mutations.append("%s.pop('ax', None)" % name)
    else:
        maker = '[1.0, 2.5]' if kind == 'list' else 'collections.deque([1.0, 2.5], maxlen=5)'
        if kind == 'deque':
            _module_chunk(b, 'import collections')
        b.glob(name, maker)
        step = b.rng.choice(['%s.append(v_ + 3.0)' % name, '%s[-1] = v_ + 0.5' % name])
        b.item('for v_ in %s:\n    if v_ < 2.0:\n        %s\n    acc = acc + v_ * 0.1'
               % (name, step), loopable=False)
        b.mutations.append('%s[:] = [1.0, 2.5]' % name if kind == 'list'
                           else '%s.clear(); %s.extend([1.0, 2.5])' % (name, name))
    b.flip_mutations.append('%s = %s' % (name, "{'a': 3.0}" if kind == 'dict' else '[4.0]'))


# try statements traced as Python (appended last: skipping TRY_FEATURES gives the programs
# of before)

TRY_CLASSES = '''
class TryError(Exception):
    pass


class TryLimit(TryError):
    pass


def check_try(v, limit):
    if v > limit:
        raise TryLimit('value %r over %r' % (v, limit))
    return v
'''

# exception raised -> the classes above it a handler may name instead
_TRY_BASES = {
    'ValueError': ['Exception'], 'KeyError': ['LookupError', 'Exception'],
    'IndexError': ['LookupError', 'Exception'], 'RuntimeError': ['Exception'],
    'ZeroDivisionError': ['ArithmeticError', 'Exception'],
    'FloatingPointError': ['ArithmeticError', 'Exception'],
    'TryError': ['Exception'], 'TryLimit': ['TryError', 'Exception'],
    'AssertionError': ['Exception'], 'StopIteration': ['Exception'],
    'tf.errors.InvalidArgumentError': ['tf.errors.OpError', 'Exception'],
}
_TRY_OTHERS = ['ValueError', 'KeyError', 'TypeError', 'RuntimeError', 'ZeroDivisionError',
               'IndexError', 'TryError', 'AttributeError']


class _TryCtx:
    """State attributes a feature's try statements share (created on first use)."""

    def __init__(self, b):
        self.b = b
        b.need_state()
        self.O = b.obj
        self.names = {}

    def attr(self, base, init, mutations=(), flips=()):
        if base not in self.names:
            name = self.b.fresh(base)
            self.b.state_init.append('self.%s = %s' % (name, init))
            self.names[base] = name
            self.b.mutations.extend(m % ('S.' + name) for m in mutations)
            self.b.flip_mutations.extend(m % ('S.' + name) for m in flips)
        return '%s.%s' % (self.O, self.names[base])


def _try_catch(rng, exc, form):
    """The type a handler names for ``exc``: 'match', 'base' (a base class, Exception,
    or bare), 'tuple' (with another type) or 'mismatch' (the exception goes past)."""
    if form == 'match':
        return exc
    if form == 'base':
        return rng.choice(_TRY_BASES.get(exc, ['Exception']) + [''])
    others = [t for t in _TRY_OTHERS if t != exc and t not in _TRY_BASES.get(exc, ())]
    if form == 'tuple':
        pair = [rng.choice(others), exc]
        rng.shuffle(pair)
        return '(%s)' % ', '.join(pair)
    return rng.choice(others)


def _try_raiser(c, j=None):
    """The body of a try that raises on some calls: dict(pre, body, exc, brk); ``j``:
    the variable of a loop around the try (a condition may read it)."""
    b, rng = c.b, c.b.rng
    kind = rng.choice(['py', 'py', 'py', 'tensor', 'tensor', 'fallible', 'fallible',
                       'unvouched', 'unvouched'])
    pre, brk = [], False
    if kind == 'py':
        exc = rng.choice(['ValueError', 'TryLimit', 'KeyError', 'RuntimeError',
                          'ZeroDivisionError', 'TryError', 'AssertionError', 'TryLimit'])
        src = rng.choice(['p', 'p', 'count', 'limit', 'shape', 'callee'] + (['loop'] * 3 if j else []))
        if src == 'callee':
            p = b.need_p()
            body = ['acc = acc + check_try(%s, %d)' % (p, b.p_values[0])]
            exc = 'TryLimit'
            return dict(pre=pre, body=body, exc=exc, brk=brk)
        if src == 'p':
            p = b.need_p()
            base, other = b.p_values
            cond = rng.choice(['%s != %d' % (p, base), '%s == %d' % (p, other),
                               ('%s > %d' % (p, base)) if other > base else ('%s < %d' % (p, base))])
            msg = "'p=%%d' %% %s" % p
        elif src == 'count':
            tries = c.attr('tries', '0', ['%s = 0'], ['%s = 2'])
            line = '%s += 1' % tries
            if line not in pre:
                pre.append(line)
            cond = '%s %% %d == %d' % (tries, rng.choice([2, 3]), rng.choice([0, 1]))
            msg = "'try %%d' %% %s" % tries
        elif src == 'limit':
            limit = c.attr('limit', '100', ['%s = 100'], ['%s = 0', '%s = 1'])
            cond = 'acc.shape[0] > %s' % limit
            msg = "'%d over the limit' % acc.shape[0]"
        elif src == 'shape':
            b.x.shape_changes = True
            cond = 'x.shape[0] != %d' % b.x.length
            msg = "'batch of %d' % x.shape[0]"
        else:
            p = b.need_p()
            cut = c.attr('cut', '2', ['%s = 0', '%s = 5'], ['%s = 1'])
            cond = rng.choice(['%s == %s' % (j, p), '%s %% 2 == 1' % j, '%s >= %s' % (j, cut)])
            msg = "'at %%d' %% %s" % j
        if exc == 'AssertionError':
            body = ['assert not (%s), %s' % (cond, msg)]
        else:
            body = ['if %s:' % cond, '    raise %s(%s)' % (exc, msg)]
    elif kind == 'tensor':
        r = rng.random()
        if r < 0.4:
            b.x.spikes.add(rng.randint(max(b.flip, 1), b.ncalls - 1))
            cond = 'tf.reduce_max(x) > 2.875'
        elif r < 0.6:
            cond = 'tf.reduce_sum(acc) > 6.0'
        else:
            cond = b.cond_tensor()
        exc = rng.choice(['FloatingPointError', 'ValueError', 'TryLimit', 'AssertionError'])
        if exc == 'AssertionError' and r < 0.6:
            # (``assert not (tensor test)`` is a graph break even outside a try)
            body = ["assert %s, 'input out of range'" % cond.replace(' > ', ' <= ')]
        elif exc == 'AssertionError':
            body = ["assert not (%s), 'input out of range'" % cond]
        else:
            msg = rng.choice(["'loss diverged'", "'sum %.2f' % float(tf.reduce_sum(x))",
                              "'input out of range'"])
            body = ['if %s:' % cond, '    raise %s(%s)' % (exc, msg)]
    elif kind == 'fallible':
        exc = 'tf.errors.InvalidArgumentError'
        r = rng.random()
        if r < 0.6:
            idx = b.fresh('idx')
            n = b.x.length
            wrap = rng.random() < 0.4
            odd = rng.choice([n, n + 1, n + 3, -1, -n - 1])
            every = rng.choice([1, 2, 2, 3])

            def values(i, idx=idx, n=n, wrap=wrap, odd=odd, every=every):
                v = odd if (b.regime(i) and i % every == 0) else i % n
                return 'tf.constant(%d)' % v if wrap else str(v)
            b.params.append((idx, values))
            where = '%s + %s' % (idx, j) if j and rng.random() < 0.5 else idx
            body = [rng.choice(['acc = acc + tf.gather(x, %s)' % where,
                                'row_ = tf.gather(acc, %s)\nacc = acc * 0.5 + row_' % where])]
        elif r < 0.8:
            body = [rng.choice(["acc = acc + tf.debugging.check_numerics(tf.math.log(x), 'log of x')",
                                "acc = acc + tf.debugging.check_numerics(tf.sqrt(x - 0.5), 'sqrt')"])]
        else:
            b.x.spikes.add(rng.randint(max(b.flip, 1), b.ncalls - 1))
            body = ["tf.debugging.assert_less(tf.reduce_max(tf.cast(x, tf.float32)), 2.875, "
                    "message='x too large')"]
        body = [ln for chunk in body for ln in chunk.split('\n')]
        if rng.random() < 0.5:
            v = b.fresh('VT')
            b.glob(v, 'tf.Variable(0.0)')
            body.insert(0, '%s.assign_add(1.0)' % v)
            b.mutations.append('%s.assign(-2.0)' % v)
            if rng.random() < 0.4:
                body.append('%s.assign_add(0.5)' % v)
    else:
        brk = True
        r = rng.random()
        if r < 0.3:
            table, out = _holder(b, 'table', "{'a': 1.0, 'b': 2.5}")
            key = b.fresh('key')
            b.params.append((key, lambda i: "'c'" if b.regime(i) and i % 2 == 0 else
                             ("'a'" if i % 3 else "'b'")))
            body = ['acc = acc + %s[%s]' % (table, key)]
            exc = 'KeyError'
            b.mutations += ["%s.pop('a', None)" % out, "%s['c'] = 0.5" % out]
        elif r < 0.5:
            s = b.fresh('txt')
            b.params.append((s, lambda i: _try_text(i, b)))
            body = ['n_ = int(%s)' % s, 'acc = acc + n_']
            exc = 'ValueError'
        elif r < 0.75:
            q, out = _holder(b, 'queue', '[0.5, 1.5]')
            body = ['v_ = next(iter(%s))' % q, 'acc = acc + v_']
            exc = 'StopIteration'
            b.mutations += ['%s.clear()' % out, '%s.append(2.5)' % out]
            b.flip_mutations.append('%s.clear()' % out)
        else:
            q, out = _holder(b, 'queue', '[0.5, 1.5, 2.5]')
            body = ['v_ = %s.pop()' % q, 'acc = acc + v_']
            exc = 'IndexError'
            b.mutations += ['%s.extend([0.5, 1.5])' % out, '%s.clear()' % out]
    return dict(pre=pre, body=body, exc=exc, brk=brk)


def _try_text(i, b):
    """A string argument ``int()`` reads: a number, or (regime 1, some calls) not one."""
    if b.regime(i) and i % 2 == 0:
        return "'x%d'" % i
    return "'%d'" % (i % 3) if i % 2 else "' 7 '"


def _try_handler(c, j, e_ok=True):
    """(lines, uses_e): what a handler does: state writes, prints, the exception's text,
    then maybe re-raising, wrapping, continue/break (in a loop) or return."""
    rng = c.b.rng
    pool = ['@ERRORS += 1', "print('skipped')", 'acc = acc * 0.5', 'acc = tf.zeros_like(acc)',
            'acc = acc - 1.0']
    if e_ok:
        pool += ['@ERRLOG.append(str(e))', '@ERRLOG.append(type(e).__name__)',
                 "print('skip', e)", "print('caught', type(e).__name__)",
                 'msg_ = str(e)\nacc = acc + len(msg_) * 0.01', '@ERRLOG.append(e.args)',
                 '@ERRLOG.append(e)']
    lines = []
    for ln in rng.sample(pool, rng.randint(1, 3)):
        if '@ERRORS' in ln:
            ln = ln.replace('@ERRORS', c.attr('errors', '0', ['%s = 0']))
        if '@ERRLOG' in ln:
            ln = ln.replace('@ERRLOG', c.attr('errlog', '[]', ['%s.clear()']))
        lines += ln.split('\n')
    ends = ['', '', '', 'raise']
    if e_ok:
        ends += ["raise ValueError('wrapped') from e", "raise TryError('wrapped: %s' % e) from e"]
    ends += ['continue', 'continue', 'break'] if j else ['return acc * 0.25']
    end = rng.choice(ends)
    if end:
        lines.append(end)
    return lines, any(re.search(r'\be\b', ln) for ln in lines)


def _try_block(c, j=None, inner=False):
    """A try statement (lines, and whether it is a graph break) around a raiser, with
    handlers, else, finally; ``inner``: nested in another try."""
    b, rng = c.b, c.b.rng
    r = _try_raiser(c, j)
    body = list(r['body'])
    if rng.random() < 0.4:
        body.insert(0, arith(b, 1))
    if rng.random() < 0.4:
        body.append(rng.choice([arith(b, 1), '%s += 1' % c.attr('ok', '0', ['%s = 0'])]))
    if not j and not inner and rng.random() < 0.15:
        cond = b.cond_tensor() if rng.random() < 0.5 else b.cond_python()
        body += ['if %s:' % cond, '    return acc * 2.0']
    pre = list(r['pre'])
    form = rng.choice(['match', 'match', 'base', 'base', 'tuple', 'mismatch', 'multi',
                       'finally'] + (['mismatch', 'finally'] if inner else []))
    depth = form == 'finally' or rng.random() < 0.25
    lines = ['try:'] + _indent(body)
    if form != 'finally':
        clauses = [form] if form != 'multi' else ['mismatch', rng.choice(['match', 'base'])]
        for f in clauses:
            catch = _try_catch(rng, r['exc'], f)
            if f in ('match', 'base') and rng.random() < 0.15:
                # the class caught chosen by a flag on the state, changed from outside:
                # which handler matches is decided per call (a class object kept on the
                # state itself, ``except self.retry_on``, crashes runner.compare)
                catch = '(%s if %s else %s)' % (catch or 'Exception',
                                                c.attr('strict', 'True', ['%s = True'],
                                                       ['%s = False']),
                                                _try_catch(rng, r['exc'], 'mismatch'))
            hl, uses_e = _try_handler(c, j, e_ok=bool(catch))
            if not catch:
                lines.append('except:')
            else:
                lines.append('except %s%s:' % (catch, ' as e' if uses_e else ''))
            lines += _indent(hl)
        if rng.random() < 0.25:
            lines += ['else:'] + _indent([rng.choice(['%s += 1' % c.attr('ok', '0', ['%s = 0']),
                                                      'acc = acc + 0.125', "print('ok')"])])
    if depth:
        d = c.attr('depth', '0', ['%s = 0'])
        pre.append('%s += 1' % d)
        fin = ['%s -= 1' % d]
        if rng.random() < 0.3:
            fin.append(rng.choice(["print('depth', %s)" % d,
                                   '%s += 1' % c.attr('done', '0', ['%s = 0'])]))
        lines += ['finally:'] + _indent(fin)
    elif rng.random() < 0.1:
        lines += ['finally:', "    print('finally')"]
    return pre + lines, r['brk']


def f_try_stmt(b):
    """``try`` statements as users write them, traced as Python (DESIGN: "`try`
    statements are traced as Python"): a user ``raise``/``assert`` under a Python
    condition (an argument, a counter on the state, a shape) or a tensor condition,
    caught by its class, a base class, or not at all; ops that fail at run time
    (``tf.gather`` out of range, ``check_numerics``) under ``except
    tf.errors.InvalidArgumentError``/``Exception``, after a variable update; exceptions
    of Python itself (``d[k]``, ``int(s)``, ``next``, ``pop``: graph breaks); handlers
    writing state, printing the exception, re-raising or wrapping it; ``finally``
    keeping a depth counter (a ``return`` in the body too), ``else``, nested try and
    try in a loop with ``continue``/``break``.  The flip and outside changes move
    calls from one path to the other."""
    _module_chunk(b, TRY_CLASSES)
    c = _TryCtx(b)
    rng = b.rng
    b.ncalls = max(b.ncalls, rng.randint(8, 12))
    if rng.random() < 0.6:
        b.flip = rng.randint(4, b.ncalls - 2)
    if b.pattern == 'none' and rng.random() < 0.7:
        b.pattern = rng.choice(['step', 'back', 'alternate', 'once'])
    for _ in range(rng.choice([1, 1, 2])):
        shape = rng.choice(['plain', 'plain', 'loop', 'nested'])
        if shape == 'loop':
            j = b.fresh('j')
            bound = b.need_p() if rng.random() < 0.3 else str(rng.randint(2, 4))
            lines, brk = _try_block(c, j)
            tail = ['acc = acc + 0.25 * %s' % j] if rng.random() < 0.6 else []
            lines = ['for %s in range(%s):' % (j, bound)] + _indent(lines + tail)
        elif shape == 'nested':
            inner, brk = _try_block(c, None, inner=True)
            outer = rng.choice(['Exception', 'Exception', 'TryError', 'ValueError', ''])
            hl, uses_e = _try_handler(c, None, e_ok=bool(outer))
            hl = [re.sub(r'\be\b', 'e2', ln) for ln in hl]
            lines = (['try:'] + _indent(inner + [arith(b, 1)]) +
                     ['except %s%s:' % (outer, ' as e2' if uses_e else '') if outer else 'except:'] +
                     _indent(hl))
        else:
            lines, brk = _try_block(c)
        b.item(lines, loopable=rng.random() < 0.4, brk=brk)
        if brk:
            _break_calls(b)
    for base in ('errors', 'errlog', 'depth', 'ok'):
        if base in c.names and rng.random() < 0.5:
            b.outs.append('%s.%s' % (c.O, c.names[base]))


# recursion over Python objects (issue 21; appended last: skipping REC_FEATURES gives the
# programs of before)

REC_CLASSES = '''
class RLeaf:
    def __init__(self, word, w):
        self.word, self.w = word, w


class RPair:
    def __init__(self, left, right):
        self.left, self.right = left, right


class RNode:
    def __init__(self, w, left=None, right=None):
        self.w, self.left, self.right = w, left, right


def r_tree(seed, size, kind):
    """A tree of ``size`` leaves whose shape and values follow ``seed``."""
    if kind == 'node':
        if size <= 1:
            return RNode(0.25 * (seed % 5 + 1))
        k = 1 + seed % (size - 1) if size > 1 else 1
        return RNode(0.25 * (seed % 3), r_tree(seed * 7 + 1, k, kind),
                     r_tree(seed * 3 + 2, size - k, kind) if seed % 4 else None)
    if size <= 1:
        return RLeaf(seed % 4, 0.25 * (seed % 5 + 1))
    k = 1 + seed % (size - 1)
    return RPair(r_tree(seed * 7 + 1, k, kind), r_tree(seed * 3 + 2, size - k, kind))
'''


def f_recursion(b):
    """A recursive helper over a tree of objects passed in (new every call; its size and
    shape follow the call and the regime): isinstance dispatch or ``is None`` tests,
    tensor or number results, a counter on the state object, a raise at some leaf."""
    rng = b.rng
    if REC_CLASSES not in b.module:
        b.module.append(REC_CLASSES)
    kind = rng.choice(['pair', 'pair', 'node'])
    T = b.fresh('tr')
    small, big = rng.choice([(1, 3), (2, 5), (3, 8), (4, 4)])
    b.params.append((T, lambda i: 'r_tree(%d, %d, %r)' % (
        i * 5 + 3, big if b.regime(i) else small + i % 3, kind)))
    fn = b.fresh('rec')
    result = rng.choice(['tensor', 'tensor', 'number'])
    counter = rng.random() < 0.35
    raises = rng.random() < 0.2
    lines = ['def %s(node, t%s):' % (fn, ', st' if counter else '')]
    if counter:
        b.need_state()
        b.state_init.append('self.visits = 0')
        lines.append('    st.visits += 1')
    if kind == 'pair':
        lines.append('    if isinstance(node, RLeaf):')
        if raises:
            lines.append("        if node.word == 3:\n            raise KeyError('word %d' % node.word)")
        lines.append('        return %s' % ('t * node.w' if result == 'tensor' else 'node.word + 1'))
        rec = '%s(node.left, t%s)' % (fn, ', st' if counter else '')
        rec2 = '%s(node.right, t%s)' % (fn, ', st' if counter else '')
        lines.append('    return %s' % rng.choice(['%s + %s * 0.5' % (rec, rec2),
                                                   '%s - %s' % (rec2, rec),
                                                   'max(%s, %s)' % (rec, rec2)
                                                   if result == 'number' else
                                                   'tf.maximum(%s, %s)' % (rec, rec2)]))
    else:
        base = 't * node.w' if result == 'tensor' else '1'
        lines.append('    out = %s' % base)
        lines.append('    if node.left is not None:')
        lines.append('        out = out + %s(node.left, t%s)' % (fn, ', st' if counter else ''))
        lines.append('    if node.right is not None:')
        lines.append('        out = out + %s(node.right, t%s) * 2' % (fn, ', st' if counter else ''))
        lines.append('    return out')
    b.module.append('\n'.join(lines))
    call = '%s(%s, acc%s)' % (fn, T, ', %s' % b.obj if counter else '')
    if result == 'tensor':
        b.item('acc = acc + %s' % call)
    else:
        b.item('acc = acc + %s' % call)
    if counter:
        b.outs.append('%s.visits' % b.obj)


REC_WORD_CLASSES = '''
class WNode:
    """A parse-tree node as users write it: a leaf has a word, an inner node has None."""

    def __init__(self, word=None, left=None, right=None):
        self.word, self.left, self.right = word, left, right

    def is_leaf(self):
        return self.left is None


def w_tree(seed, size, hole):
    """A tree of ``size`` leaves; ``hole``: an inner node holding a word (a leaf's None
    elsewhere is not read)."""
    if size <= 1:
        return WNode(seed % 4)
    k = 1 + seed % (size - 1)
    return WNode(seed % 3 if hole else None, w_tree(seed * 7 + 1, k, False),
                 w_tree(seed * 3 + 2, size - k, False))
'''


def f_rec_word(b):
    """A recursive helper over parse-tree nodes whose ``word`` is a number or None:
    ``node.word is not None`` or a node method ``node.is_leaf()`` decides; in some
    calls an inner node's word is read as a number (a None there: eager's TypeError)."""
    rng = b.rng
    if REC_WORD_CLASSES not in b.module:
        b.module.append(REC_WORD_CLASSES)
    T = b.fresh('wt')
    size = rng.randint(1, 6)
    hole = rng.choices(['no', 'test', 'use'], weights=[0.6, 0.25, 0.15])[0]
    b.params.append((T, lambda i: 'w_tree(%d, %d, %s)' % (
        i * 5 + 3, size + (i % 3 if b.regime(i) else 0), hole != 'no' and i % 4 == 3)))
    fn = b.fresh('wrec')
    test = rng.choice(['node.word is not None', 'node.is_leaf()', 'not node.is_leaf()'])
    leaf_first = test != 'not node.is_leaf()'
    leaf = rng.choice(['t * (node.word + 1)', 'tf.gather(t_vec, [node.word])[0] + t'])
    inner = rng.choice(['%s(node.left, t, t_vec) + %s(node.right, t, t_vec) * 0.5',
                        'tf.maximum(%s(node.left, t, t_vec), %s(node.right, t, t_vec))'])
    inner = inner % (fn, fn)
    if hole == 'test':
        inner = '(%s) * (1 + (node.word is not None))' % inner
    elif hole == 'use':   # a None word used as a number: eager's TypeError
        inner = '(%s) * (node.word + 1)' % inner
    lines = ['def %s(node, t, t_vec):' % fn,
             '    if %s:' % test,
             '        return %s' % (leaf if leaf_first else inner),
             '    return %s' % (inner if leaf_first else leaf)]
    b.module.append('\n'.join(lines))
    b.item('acc = acc + %s(%s, acc, tf.constant([1.0, 2.0, 3.0, 4.0]))' % (fn, T))


REC_LIST_TREES = '''
def l_tree(seed, size, arity, leaf):
    """A nested list of ``size`` leaves, lists of 2..``arity`` items, some tuples;
    ``leaf``: 'int', 'float', or 'odd' (one leaf a string: no graph reads that)."""
    def build(seed, size):
        if size <= 1:
            if leaf == 'odd' and seed % 5 == 0:
                return 'w%d' % (seed % 3)
            return seed % 7 if leaf != 'float' else (seed % 9) / 4
        parts = min(2 + seed % max(1, arity - 1), size)
        sizes = [size // parts + (1 if j < size % parts else 0) for j in range(parts)]
        items = [build(seed * 7 + 3 * j + 1, n) for j, n in enumerate(sizes)]
        return tuple(items) if seed % 4 == 1 else items
    return list(build(seed, size)) if size > 1 else [build(seed, 1), build(seed + 1, 1)]
'''


def f_rec_list(b):
    """A recursive helper over a nested list passed in (new every call; its shape
    follows the call and the regime): a generator sum, a for loop, unpacking of
    pairs (a triple there: eager's ValueError), ``len`` or a ``max`` depth."""
    rng = b.rng
    if REC_LIST_TREES not in b.module:
        b.module.append(REC_LIST_TREES)
    T = b.fresh('lt')
    form = rng.choice(['sum', 'loop', 'pair', 'depth', 'len'])
    arity = 2 if form == 'pair' else rng.choice([2, 3])
    leaf = rng.choices(['int', 'float', 'odd'], weights=[0.6, 0.3, 0.1])[0]
    if form == 'pair' and rng.random() < 0.3:
        arity = 3   # a triple where the helper unpacks a pair: eager's ValueError
    small, big = rng.choice([(2, 4), (3, 7), (2, 2)])
    b.params.append((T, lambda i: 'l_tree(%d, %d, %d, %r)' % (
        i * 5 + 3, big if b.regime(i) else small + i % 3, arity, leaf)))
    fn = b.fresh('lrec')
    seq = '(list, tuple)'
    if form == 'sum':
        body = ['    if isinstance(node, %s):' % seq,
                '        return sum(%s(c, t) for c in node)' % fn,
                '    return t * node']
    elif form == 'loop':
        body = ['    if not isinstance(node, %s):' % seq,
                '        return t + node',
                '    acc = t * 0.0',
                '    for c in node:',
                '        acc = acc + %s(c, t) * 0.5' % fn,
                '    return acc']
    elif form == 'pair':
        body = ['    if isinstance(node, (int, float)):',
                '        return t * (node + 1)',
                '    left, right = node',
                '    return %s(left, t) - %s(right, t) * 0.5' % (fn, fn)]
    elif form == 'depth':
        body = ['    if not isinstance(node, %s):' % seq,
                '        return 0',
                '    return 1 + max(%s(c, t) for c in node)' % fn]
    else:
        body = ['    if isinstance(node, %s):' % seq,
                '        total = len(node) * t',
                '        for j in range(len(node)):',
                '            total = total + %s(node[j], t)' % fn,
                '        return total',
                '    return t * node']
    b.module.append('\n'.join(['def %s(node, t):' % fn] + body))
    b.item('acc = acc + %s(%s, acc)' % (fn, T))



REC_LEVEL_CLASSES = '''
class LvTag:
    def __init__(self, scale):
        self.scale = scale


class LvNode:
    def __init__(self, tag, value=None, left=None, right=None):
        self.tag, self.value, self.left, self.right = tag, value, left, right


def lv_forest(seed, count, size):
    """``count`` trees of up to ``size`` leaves: a leaf holds a value, every node a tag."""
    def build(seed, size):
        tag = LvTag(0.5 * (seed % 3 + 1))
        if size <= 1:
            return LvNode(tag, value=seed % 5)
        k = 1 + seed % (size - 1)
        return LvNode(tag, left=build(seed * 7 + 1, k), right=build(seed * 3 + 2, size - k))
    return [build(seed + 11 * j, max(1, size - j % 2)) for j in range(count)]
'''


def f_rec_levels(b):
    """A recursive helper over a forest passed in, called once per tree (janus computes
    every node a depth at a time): it reads a child or a tag object without
    recursing into it, recurses on the left only or on both children, raises at some
    leaf it reaches (a node no call reaches is computed too), and gets one tensor for
    every tree or a new one per tree; later calls bring deeper trees."""
    rng = b.rng
    if REC_LEVEL_CLASSES not in b.module:
        b.module.append(REC_LEVEL_CLASSES)
    T = b.fresh('lf')
    count, small, big = rng.choice([(2, 2, 5), (3, 3, 9), (1, 4, 4), (4, 1, 6)])
    b.params.append((T, lambda i: 'lv_forest(%d, %d, %d)' % (
        i * 5 + 3, count, big if b.regime(i) else small + i % 3)))
    fn = b.fresh('lvrec')
    form = rng.choice(['spine', 'both', 'both'])
    raises = rng.random() < 0.25
    leaf = 't * (node.value + 1) * node.tag.scale'
    body = ['    if node.left is None:']
    if raises:
        body.append("        if node.value == 4:\n            raise ValueError('leaf 4')")
    body.append('        return %s' % leaf)
    if form == 'spine':
        body.append('    return %s(node.left, t) * node.right.tag.scale + t' % fn)
    else:
        body.append('    return %s(%s(node.left, t), %s(node.right, t) * 0.5) * node.tag.scale'
                    % (rng.choice(['tf.maximum', 'tf.minimum', 'tf.add']), fn, fn))
    b.module.append('\n'.join(['def %s(node, t):' % fn] + body))
    shared = b.fresh('lvt')
    tree = b.fresh('tr')
    per_tree = rng.random() < 0.4
    b.item(['%s = acc * 0.5' % shared,
            'for %s in %s:' % (tree, T),
            '    acc = acc + %s(%s, %s)' % (fn, tree, 'acc' if per_tree else shared)],
           loopable=False)


# local names across graph breaks (issue 35; appended last: skipping NAMES_FEATURES gives the
# programs of before)
#
# How a local name crosses a cut between the Python statements of a graph break and the
# graph segments around it, in the idioms users write: a walrus in a comprehension, in an
# ``if`` test or under ``and``/``or``/a conditional expression (so it may not run); a
# lambda's or nested function's default reading a local; ``match`` capture, star and
# mapping-rest patterns; a ``with`` that swallows an exception before a local is rebound;
# a comprehension whose first iterable is its own loop variable's name; ``del``; an
# ``except E as e`` unbinding a local ``e``.  Every such local has a module global of the
# same name, so code that reads the name where eager reads the local reads the global
# (silently, or raising where eager does not) instead of an UnboundLocalError or the local.
# The arguments (a dict with or without its key, a dict or a sequence, an empty list, a
# flag) move calls from one path to another at the regime flip.

def _names_arg(b, base, first, then):
    """A parameter: ``first[i % len]`` (sources) before the flip, ``then[i % len]`` after
    it (on every call, or on every second)."""
    name = b.fresh(base)
    every = b.rng.choice([1, 1, 2])

    def values(i):
        alts = then if b.regime(i) and i % every == 0 else first
        return alts[i % len(alts)]
    b.params.append((name, values))
    return name


NAMES_DICTS = ([["{'k': 1.5}"], ["{'k': 0.5, 'n': 2}"], ["{'k': 1.5}", "{'k': 2.0, 'lr': 0.25}"]],
               [['{}'], ["{'n': 2}"], ["{'K': 1.0}", "{'k': -0.5}"]])
NAMES_SEQS = ([['[0.5, 1.5]'], ['[1.0]'], ['[0.5, 1.5]', '[2.5, 0.25, 1.0]']],
              [['[]'], ['[2.5, 0.25, 1.0]'], ['[]', '[3.0]']])
NAMES_CFGS = ([["{'k': 1.5, 'lr': 0.25}"], ['[0.5, 2.0]'], ["{'k': 0.5}", "{'k': 1.5, 'n': 2}"],
               ["{'k': 1.5}", '[2.0, 1.0, 0.5]']],
              [['[0.5, 1.5, 2.5]'], ['(2.0,)'], ["{'lr': 1.0}"], ['[]'], ["'text'"],
               ["{'k': -0.5, 'm': 1, 'n': 2}"], ['[3.0, 0.25]', "{'k': 2.5}"]])


class _NamesCtx:
    """What one break_names feature's items share: arguments, the log, the cut."""

    def __init__(self, b):
        self.b, self.rng = b, b.rng
        self.args = {}
        self.log_ref = None

    def glob(self, base, init):
        """A fresh local name, with a module global of the same name (``init``)."""
        name = self.b.fresh(base)
        self.b.glob(name, init)
        return name

    def arg(self, kind):
        """A dict with or without 'k', a list that may be empty, a dict or a sequence
        ('cfg'), a flag True after the flip: kept for the feature's other items half the
        time."""
        if kind in self.args and self.rng.random() < 0.5:
            return self.args[kind]
        if kind == 'flag':
            name = _names_arg(self.b, 'drop', ['False'], ['True'])
        else:
            first, then = {'dict': NAMES_DICTS, 'seq': NAMES_SEQS, 'cfg': NAMES_CFGS}[kind]
            name = _names_arg(self.b, kind, self.rng.choice(first), self.rng.choice(then))
        self.args[kind] = name
        return name

    def pcond(self):
        """A Python condition the arguments decide (it may hold in either regime)."""
        if self.rng.random() < 0.6:
            return self.b.cond_python()
        r = self.rng.random()
        if r < 0.5:
            return "'k' in %s" % self.arg('dict')
        return 'not %s' % self.arg('flag') if r < 0.75 else 'len(%s) > 1' % self.arg('seq')

    def log(self, expr):
        """A line appending ``expr`` to a list kept outside (compared after each call)."""
        if self.log_ref is None:
            self.log_ref = _list_home(self.b, 'names')
        return '%s.append(%s)' % (self.log_ref, expr)

    def cut(self, lines):
        """``lines`` with one of their '@CUT' markers (an '@CUT?' one, a quarter of the
        time; with only '@CUT?' ones, one half of the time) made a graph break, the
        others dropped."""
        plain = [i for i, ln in enumerate(lines) if ln.strip() == '@CUT']
        opt = [i for i, ln in enumerate(lines) if ln.strip() == '@CUT?']
        pick = None
        if opt and not plain:
            pick = self.rng.choice(opt) if self.rng.random() < 0.5 else None
        elif opt and self.rng.random() < 0.25:
            pick = self.rng.choice(opt)
        elif plain:
            pick = self.rng.choice(plain)
        out = []
        for i, ln in enumerate(lines):
            if ln.strip() in ('@CUT', '@CUT?'):
                if i == pick:
                    indent = ln[:len(ln) - len(ln.lstrip())]
                    brk = _sub(self.rng.choice(BREAK_PRINTS), T=self.rng.choice(['acc', 'acc', 'x']))
                    out.append(indent + brk)
                continue
            out.append(ln)
        return out


def _nm_walrus_comp(c):
    """``[(m := f(v)) for v in seq]``, ``m`` read after the cut (bound before always,
    on some paths, or never: an empty list leaves it unbound); or the comprehension is
    the break itself."""
    rng = c.rng
    m, ms = c.glob('m', '100.0'), c.glob('ms', '[100.0]')
    kind = rng.choice(['py', 'py', 'tensor', 'break'])
    if kind == 'break':
        src = rng.choice(['acc.numpy()', 'x.numpy().tolist()', 'np.abs(acc.numpy())'])
        lines = ['%s = [(%s := float(v_) * 0.5) for v_ in %s]' % (ms, m, src),
                 'acc = acc + %s + len(%s) * 0.25' % (m, ms)]
        if rng.random() < 0.5:
            lines.append(c.log('round(%s, 3)' % m))
        return lines
    seq = c.arg('seq')
    bound = rng.choice(['always', 'always', 'cond', 'never'])
    init = '0.5' if kind == 'py' or rng.random() < 0.5 else 'acc * 0.0'
    if bound == 'always':
        pre = ['%s = %s' % (m, init)]
    elif bound == 'cond':
        pre = ['if %s:' % c.pcond(), '    %s = %s' % (m, init)]
    else:
        pre = []
    if kind == 'py':
        comp = '%s = [(%s := float(v_) * 2.0) for v_ in %s]' % (ms, m, seq)
        use = ['acc = acc + %s * 0.25 + len(%s)' % (m, ms)]
    else:
        comp = '%s = [(%s := acc * v_) for v_ in %s]' % (ms, m, seq)
        use = ['acc = acc + %s' % m]
    if rng.random() < 0.4:
        use.append(c.log('round(float(tf.reduce_sum(%s)), 3)' % m))
    return pre + ['@CUT?', comp, '@CUT'] + use


def _nm_walrus_if(c):
    """``if (n := expr) > t:`` (a Python, a tensor or a break's value; or
    ``while (n := n - 1) > 0``), ``n`` read after the cut."""
    rng, b = c.rng, c.b
    n = c.glob('n', '100.0')
    kind = rng.choice(['len', 'p', 'tensor', 'break', 'while'])
    if kind == 'while':
        return ['%s = %s + 1' % (n, b.need_p()), '@CUT?', 'while (%s := %s - 1) > 0:' % (n, n),
                '    acc = acc + 0.25', '@CUT', 'acc = acc + %s' % n]
    if kind == 'len':
        expr, thr = 'len(%s)' % c.arg(rng.choice(['seq', 'dict'])), '1'
    elif kind == 'p':
        p = b.need_p()
        expr, thr = 'float(%s) * 0.5' % p, repr(b.p_values[0] * 0.5)
    elif kind == 'tensor':
        expr, thr = rng.choice([('tf.reduce_sum(x)', '0.0'), ('tf.reduce_max(acc)', '1.125'),
                                ('tf.reduce_mean(acc)', '0.0')])
    else:
        expr, thr = rng.choice([('float(tf.reduce_sum(acc))', '0.0'),
                                ('acc.numpy().max().item()', '1.0'),
                                ('int(tf.size(x).numpy())', '3')])
    lines = ['if (%s := %s) > %s:' % (n, expr, thr), '    acc = acc + %s' % n]
    if rng.random() < 0.3:
        lines += ['else:', '    acc = acc - 0.25']
    lines += ['@CUT', 'acc = acc - %s * 0.5' % n]
    if kind != 'tensor' and rng.random() < 0.4:
        lines.append(c.log(n))
    return lines


def _nm_walrus_short(c):
    """A walrus under ``and``/``or`` or in a conditional expression: it may not run, so
    the name is bound before, or read only where it ran, or (a flag) not bound at all:
    eager raises UnboundLocalError after the cut."""
    rng, b = c.rng, c.b
    q = c.glob('q', '100.0')
    expr = rng.choice(['float(%s) * 0.5' % b.need_p(), 'tf.reduce_mean(acc)',
                       'len(%s)' % c.arg('seq'), "%s.get('k', 0.25)" % c.arg('dict')])
    form = rng.choice(['and_bound', 'and_guarded', 'or_bound', 'ternary', 'ternary',
                       'unbound'])
    if form == 'and_bound':
        cond = c.pcond()
        return ['%s = 1.0' % q, '@CUT?', 'if %s and (%s := %s) > 0.25:' % (cond, q, expr),
                '    acc = acc * 0.5', '@CUT', 'acc = acc + %s' % q]
    if form == 'and_guarded':
        cond = c.pcond()
        return ['if %s and (%s := %s) is not None:' % (cond, q, expr), '    acc = acc - 0.125',
                '@CUT', 'if %s:' % cond, '    acc = acc + %s' % q]
    if form == 'or_bound':
        cond = c.pcond()
        return ['%s = 0.5' % q, '@CUT?', 'if %s or (%s := %s) < 0.0:' % (cond, q, expr),
                '    acc = acc - 0.25', '@CUT', 'acc = acc + %s' % q]
    if form == 'ternary':
        r = c.glob('r', '100.0')
        cond = c.pcond() if rng.random() < 0.6 else b.cond_tensor()
        return ['%s = 0.25' % q, '%s = (%s := acc * 2.0) if %s else acc - 1.0' % (r, q, cond),
                '@CUT', 'acc = %s + %s' % (r, q)]
    ok = c.glob('ok', '100.0')
    return ['%s = %s or (%s := %s)' % (ok, c.arg('flag'), q, expr), '@CUT', 'acc = acc + %s' % q]


def _nm_lambda(c):
    """A lambda or nested function whose default reads a local (``lambda t, k=k: t * k``),
    defined after the cut in code that reads the local nowhere else (or rebinds it
    after the definition without reading it); also a default under another name, a
    default expression, a closure (late binding), ``map`` with such a lambda, lambdas
    made in a comprehension over the local's name."""
    rng, b = c.rng, c.b
    k = c.glob('k', '100.0')
    f = b.fresh('g')
    py = ['float(%s) * 0.5 + 0.25' % b.need_p(), "%s.get('k', 0.5)" % c.arg('dict'),
          'len(%s) * 0.5 + 0.25' % c.arg('seq')]
    src = rng.choice(py + ['tf.reduce_mean(acc)', 'acc * 0.5'])
    form = rng.choice(['lambda', 'lambda', 'def', 'other_name', 'expr_default', 'closure',
                       'map', 'comp'])
    tail = []
    if rng.random() < 0.4:          # read again after a second break
        tail = [_sub(rng.choice(BREAK_PRINTS), T='acc'),
                rng.choice(['acc = acc + %s * 0.1' % k, c.log('round(float(tf.reduce_sum(%s)), 3)' % k)])]
    if form == 'map':
        src = rng.choice(py)
        return ['%s = %s' % (k, src), '@CUT',
                'ws_ = list(map(lambda v_, %s=%s: v_ * %s, %s))' % (k, k, k, c.arg('seq')),
                'acc = acc + sum(ws_)'] + tail
    if form == 'comp':
        return ['%s = %s' % (k, src), '@CUT',
                'fs_ = [lambda t, %s=%s: t * %s for %s in (0.5, 1.5)]' % (k, k, k, k), '@CUT?',
                'acc = fs_[0](acc) + fs_[1](acc) * 0.5 + %s' % k]
    if form == 'def':
        define = ['def %s(t, %s=%s):' % (f, k, k), '    return t + %s' % k]
    else:
        define = [{'lambda': '%s = lambda t, %s=%s: t * %s' % (f, k, k, k),
                   'other_name': '%s = lambda t, s_=%s: t * s_' % (f, k),
                   'expr_default': '%s = lambda t, %s=%s * 2.0: t - %s' % (f, k, k, k),
                   'closure': '%s = lambda t: t * %s' % (f, k)}[form]]
    lines = ['%s = %s' % (k, src), '@CUT'] + define + ['@CUT?']
    if rng.random() < 0.4:          # rebound (not read) after the definition
        lines.append('%s = %s' % (k, rng.choice(['2.5', 'acc * 0.25'])))
    return lines + ['acc = %s(acc)' % f] + tail


def _nm_match(c):
    """``match`` (a break: run in Python) on an argument that is a dict in some calls and
    a sequence (or a str) in others: mapping patterns with ``**rest``, sequence patterns
    with ``*rest`` (a guard sometimes), a capture pattern or ``_`` last.  The names are
    bound by the patterns alone (read after the match where the case that ran binds
    them), or also by assignments in the case bodies."""
    rng = c.rng
    cfg = c.arg('cfg')
    a, r = c.glob('a', '100.0'), c.glob('rest', "['GLOBAL']")
    guard = rng.choice(['', '', ' if %s > 1.0' % a])
    if rng.random() < 0.5:
        hit = c.glob('hit', '100')
        cases = [["case {'k': %s, **%s}:" % (a, r), '    %s = 1' % hit],
                 ['case [%s, *%s]%s:' % (a, r, guard), '    %s = 2' % hit]]
        rng.shuffle(cases)
        reads = ['if %s in (1, 2):' % hit, '    acc = acc + %s * 0.5 + len(%s) * 0.25' % (a, r)]
        if rng.random() < 0.5:
            o = c.glob('other', "'GLOBAL'")
            cases.append(['case %s:' % o, '    %s = 3' % hit])
            reads += ['elif %s == 3:' % hit, '    acc = acc - len(%s) * 0.125' % o]
        else:
            cases.append(['case _:', '    %s = 0' % hit])
        reads.append(c.log(hit))
        lines = ['match %s:' % cfg] + _indent([ln for case in cases for ln in case])
        return lines + ['@CUT?'] + reads
    w = c.glob('w', '100.0')
    cases = [["case {'k': %s, **%s}:" % (a, r), '    %s = %s * 2.0' % (w, a)],
             ['case [%s, *%s]%s:' % (a, r, guard), '    %s = %s + 0.5' % (w, a)]]
    rng.shuffle(cases)
    if rng.random() < 0.5:
        o = c.glob('other', "'GLOBAL'")
        cases.append(['case %s:' % o, '    %s, %s = 0.0, ()' % (a, r),
                      '    %s = float(len(%s))' % (w, o)])
    else:
        cases.append(['case _:', '    %s, %s, %s = 0.0, [], 0.25' % (a, r, w)])
    lines = ['match %s:' % cfg] + _indent([ln for case in cases for ln in case])
    lines += ['@CUT?', 'acc = acc + %s + %s * 0.5 + len(%s) * 0.25' % (w, a, r)]
    if rng.random() < 0.5:
        lines.append(c.log(rng.choice(['sorted(%s)' % r, 'len(%s)' % r, a])))
    return lines


def _nm_suppress(c):
    """A ``with`` swallowing KeyError (``contextlib.suppress``, the ``Skip`` class) before a
    rebinding of a local bound before it; the local read after the ``with``, in the
    same segment or across a break (sometimes a break inside the ``with``)."""
    rng, b = c.rng, c.b
    _module_chunk(b, 'import contextlib')
    d = c.arg('dict')
    y = c.glob('y', '100.0')
    form = rng.choice(['after', 'after', 'inside', 'partial', 'first', 'skip'])
    if form == 'skip':
        _module_chunk(b, CTX_CLASSES)
        log = _list_home(b, 'skips')
        i = c.glob('ix', '100')
        if '.' in log or not log[0].islower():       # (a closure cell's list: not from outside)
            b.mutations.append('%s.clear()' % ('S.' + log.split('.', 1)[1] if '.' in log else log))
        return ['%s = 0.5' % y, '@CUT', 'with Skip(%s) as %s:' % (log, i),
                "    %s = acc * %s['k']" % (y, d), '@CUT', 'acc = acc + %s + %s * 0.25' % (y, i)]
    mgr = rng.choice(['contextlib.suppress(KeyError)', 'contextlib.suppress(KeyError)',
                      'contextlib.suppress(IndexError, KeyError)', 'contextlib.suppress(LookupError)'])
    if form == 'after':
        return ['%s = acc * 0.5' % y, '@CUT', 'with %s:' % mgr,
                "    %s = acc + %s['k']" % (y, d), '@CUT', 'acc = acc + %s' % y]
    if form == 'inside':
        return ['%s = acc * 0.5' % y, '@CUT?', 'with %s:' % mgr, '    %s = acc * 2.0' % y,
                '    @CUT', "    %s = %s + %s['k']" % (y, y, d), 'acc = acc + %s' % y]
    if form == 'partial':
        return ['%s = 1.0' % y, 'with %s:' % mgr, '    %s = 2.0' % y, '    @CUT?',
                "    %s = %s * %s['k']" % (y, y, d), '@CUT', 'acc = acc * %s' % y, c.log(y)]
    return ['with %s:' % mgr, "    %s = %s['k'] + 0.5" % (y, d), '@CUT',
            "if 'k' in %s:" % d, '    acc = acc + %s' % y]


def _nm_comp_shadow(c):
    """A comprehension whose first iterable is its loop variable's name
    (``v = [v * 2.0 for v in v]``), the cut before or after it."""
    rng = c.rng
    v = c.glob('vals', '[100.0]')
    form = rng.choice(['py', 'py', 'genexp', 'tensor', 'unstack'])
    if form in ('py', 'genexp'):
        seq = c.arg('seq')
        if form == 'py':
            return ['%s = list(%s)' % (v, seq), '@CUT', '%s = [%s * 2.0 for %s in %s]' % (v, v, v, v),
                    '@CUT', 'acc = acc + sum(%s) * 0.1 + len(%s)' % (v, v), c.log(v)]
        return ['%s = [float(v_) for v_ in %s]' % (v, seq), '@CUT',
                '%s = sum(%s * 0.5 for %s in %s)' % (v, v, v, v), '@CUT', 'acc = acc + %s' % v]
    if form == 'tensor':
        return ['%s = acc * 0.5' % v, '@CUT', '%s = [%s + 1.0 for %s in %s]' % (v, v, v, v),
                '@CUT', 'acc = acc + tf.stack(%s) * 0.5' % v]
    return ['%s = tf.unstack(acc)' % v, '@CUT', '%s = [%s * 2.0 for %s in %s]' % (v, v, v, v),
            '@CUT', 'acc = tf.stack(%s) * 0.5' % v]


def _nm_del(c):
    """``del`` of a local on some paths and a read of it on the others (or, a flag
    deciding, a read eager answers with UnboundLocalError), across a cut; a name deleted
    and bound again; ``del`` in a loop."""
    rng, b = c.rng, c.b
    t = c.glob('tmp', '100.0')
    form = rng.choice(['guarded', 'guarded', 'raise', 'rebind', 'loop'])
    if form == 'guarded':
        fl = b.fresh('fl')
        return ['%s = acc * 2.0' % t, '%s = %s' % (fl, c.pcond()), '@CUT?', 'if %s:' % fl,
                '    del %s' % t, '@CUT', 'if not %s:' % fl, '    acc = acc + %s' % t, 'else:',
                '    acc = acc - 0.5']
    if form == 'raise':
        return ['%s = acc * 2.0' % t, 'if %s:' % c.arg('flag'), '    del %s' % t, '@CUT',
                'acc = acc + %s * 0.5' % t]
    if form == 'rebind':
        return ['%s = acc * 0.5' % t, '@CUT', 'acc = acc + %s' % t, 'del %s' % t, '@CUT',
                '%s = float(%s) + 0.5' % (t, b.need_p()), 'acc = acc - %s' % t]
    j = b.fresh('j')
    return ['for %s in range(%d):' % (j, rng.randint(1, 3)), '    %s = acc * 0.5' % t,
            '    @CUT', '    acc = acc + %s' % t, '    del %s' % t]


def _nm_except(c):
    """``except KeyError as e`` where ``e`` was bound before: Python unbinds it at the
    handler's end (even when the handler rebinds it), so a read after the cut is
    guarded by a flag, or raises UnboundLocalError eagerly."""
    rng = c.rng
    d = c.arg('dict')
    e, ok = c.glob('err', '100.0'), c.glob('ok', '100')
    form = rng.choice(['guarded', 'guarded', 'raise', 'rebound', 'cut_in_handler'])
    lines = ['%s = %s' % (e, rng.choice(['acc * 0.5', '0.5'])), '%s = True' % ok, 'try:',
             "    acc = acc + %s['k']" % d, 'except KeyError as %s:' % e, '    %s = False' % ok]
    lines.append(rng.choice(["    print('missing', %s)" % e,
                             '    acc = acc - len(str(%s)) * 0.125' % e, '    acc = acc * 0.5']))
    if form == 'cut_in_handler':
        lines.append('    @CUT')
    if form == 'rebound':
        lines.append('    %s = 0.25' % e)
    lines.append('@CUT')
    if form in ('raise', 'rebound'):
        return lines + ['acc = acc + %s' % e]
    return lines + ['if %s:' % ok, '    acc = acc + %s' % e, 'else:', '    acc = acc * 0.5',
                    c.log(ok)]


NAME_MAKERS = [_nm_walrus_comp, _nm_walrus_if, _nm_walrus_short, _nm_lambda, _nm_match,
               _nm_suppress, _nm_comp_shadow, _nm_del, _nm_except]


def f_break_names(b):
    """Local names crossing graph breaks (see above): one or two of walrus (in a
    comprehension, an ``if`` test, under ``and``/``or``, in a conditional expression),
    lambda/nested function defaults, ``match`` captures, a swallowed exception before a
    rebinding, a comprehension over its own variable's name, ``del``, ``except as``."""
    rng = b.rng
    if b.pattern == 'none' and rng.random() < 0.7:
        b.pattern = rng.choice(['step', 'back', 'alternate', 'once'])
    c = _NamesCtx(b)
    for maker in rng.sample(NAME_MAKERS, rng.choice([1, 1, 2])):
        b.item(c.cut(maker(c)))
    if c.log_ref is not None:
        b.outs.append(rng.choice([c.log_ref, 'len(%s)' % c.log_ref]))


# -- graph breaks nested in Keras layers (graphgen/nested.py; appended last: skipping
# NESTED_BREAK_FEATURES gives the programs of before)
#
# A subclassed ``tf.keras.Model`` (or ``Layer``) whose own ``call()`` holds one or two
# lines janus refuses (a stdlib ``random.Random`` draw, ``int(h.numpy().shape[0])``,
# ``float(tf.reduce_mean(h).numpy())``, a NumPy ``RandomState`` draw, ``print(h.numpy())``)
# among Dense layers, activations, tensor ``if``s and ``training`` branches; sometimes
# two deep: the model's call runs blocks of one custom Layer class in a loop, the
# refused line in the blocks' call.  The target runs the model in a training step
# (``GradientTape``, ``apply_gradients``, a step counter, the loss printed every N
# steps) or a forward pass.  A call raises a user exception when a draw crosses a
# threshold; the inputs grow (or the batch size changes) at the regime flip, so the
# tensor ``if``s inside the call flip; from outside, the caller draws from and reseeds
# the layers' RNGs and freezes layers.  Both sides build their model right after
# ``tf.keras.utils.set_random_seed`` (the same weights), every RNG from a seed, and
# every user layer is named (Keras's name counters are shared by the sides).  The loss
# is printed and returned as a Python float rounded: a graph's float32 may differ from
# eager's by an ulp (fused kernels), and Python floats compare exactly.

NB_EXCEPTION = 'class NoiseError(Exception):\n    pass'
NB_REFUSED = ['uniform', 'uniform', 'random', 'gauss', 'size', 'read', 'read', 'np', 'print',
              'print_if']


class _NbCtx:
    """One nested_breaks model: its classes' text, what they hold."""

    def __init__(self, b):
        self.b, self.rng = b, b.rng
        self.width = self.rng.choice([4, 6, 8])
        self.inputs = self.rng.choice([3, 4])
        self.outputs = self.rng.choice([1, 2, 3])
        self.has_blocks = False
        self.block_ref = None         # how the model names its first block
        self.rngs = set()             # 'model', 'block': the classes holding self.rng

    def refused(self, init, owner):
        """Lines of a ``call`` (hidden tensor ``h``, flag ``training``) around one refused
        line; ``init`` gets the ``__init__`` lines it needs (``seed`` is in scope)."""
        rng = self.rng
        kind = rng.choice(NB_REFUSED)
        if kind in ('uniform', 'random', 'gauss') and 'self.rng = random.Random(seed)' not in init:
            init.append('self.rng = random.Random(seed)')
            self.rngs.add(owner)
        if kind == 'np' and 'self.np_rng = np.random.RandomState(seed)' not in init:
            init.append('self.np_rng = np.random.RandomState(seed)')
        s = self.b.fresh('s')
        if kind == 'uniform':
            lines = ['%s = self.rng.uniform(0.8, 1.2)' % s]
            if rng.random() < 0.5:
                _module_chunk(self.b, NB_EXCEPTION)
                raise_ = rng.choice(["NoiseError('scale %%.3f too large' %% %s)" % s,
                                     "ValueError('scale %%.3f in %%s' %% (%s, self.name))" % s])
                lines += ['if %s > %s:' % (s, rng.choice(['1.17', '1.18', '1.19'])),
                          '    raise ' + raise_]
            lines.append('h = h * %s' % s)
        elif kind == 'random':
            lines = rng.choice([['if self.rng.random() < 0.3:', '    h = h * 0.5'],
                                ['%s = self.rng.random()' % s, 'h = h + (%s - 0.5) * 0.1' % s]])
        elif kind == 'gauss':
            lines = ['h = h + self.rng.gauss(0.0, %s)' % rng.choice(['0.05', '0.1'])]
        elif kind == 'size':
            use = rng.choice(['h = h + tf.reshape(tf.range(@S, dtype=h.dtype), [-1, 1]) * 0.01',
                              'h = h * (2.0 / (@S + 1))',
                              'h = tf.concat([h, tf.zeros([@S, 1], h.dtype)], 1)[:, :-1]'])
            lines = ['%s = int(h.numpy().shape[0])' % s, _sub(use, S=s)]
        elif kind == 'read':
            lines = ['%s = float(tf.reduce_mean(h).numpy())' % s]
            lines += rng.choice([['if %s > %s:' % (s, rng.choice(['0.5', '2.0'])),
                                  '    h = h * 0.5'],
                                 ['h = h - %s * 0.5' % s],
                                 ['if abs(%s) > 20.0:' % s,
                                  "    raise ValueError('activations %%.2f' %% %s)" % s]])
        elif kind == 'np':
            lines = rng.choice([['h = h + self.np_rng.uniform(-0.05, 0.05)'],
                                ['h = h * float(self.np_rng.uniform(0.9, 1.1))'],
                                ['%s = self.np_rng.uniform(-0.1, 0.1, size=h.shape[-1])' % s,
                                 'h = h + tf.constant(%s, h.dtype)' % s]])
        elif kind == 'print':
            lines = [rng.choice(['print(h.numpy())', 'print(self.name, h.numpy()[0])',
                                 "print('shape', h.numpy().shape)"])]
        else:
            lines = ['if tf.reduce_max(h) > %s:' % rng.choice(['1.0', '4.0']),
                     "    print('large', self.name, h.numpy().max())"]
        if kind in ('uniform', 'random', 'gauss', 'np') and rng.random() < 0.6:
            lines = ['if training:'] + _indent(lines)
        return lines

    def tensor_if(self):
        """A tensor ``if`` on the hidden values (the inputs grow at the flip)."""
        rng = self.rng
        cond = rng.choice(['tf.reduce_mean(h) > %s' % rng.choice(['0.5', '2.0']),
                           'tf.reduce_max(tf.abs(h)) > 10.0', 'tf.reduce_sum(h) < 0.0'])
        body = rng.choice(['h = h * 0.5', 'h = h / 10.0', 'h = tf.nn.relu(h)'])
        lines = ['if %s:' % cond, '    ' + body]
        if rng.random() < 0.4:
            lines += ['else:', '    h = h + 0.125']
        return lines

    def insert(self, chunks, lines, first=0):
        """``lines`` as a chunk of ``chunks`` at a random place from ``first`` on."""
        chunks.insert(self.rng.randint(first, len(chunks)), lines)

    def block_class(self, name):
        """A custom Layer(units, seed): a Dense layer and the refused line(s)."""
        rng = self.rng
        init = ['super().__init__(**kw)',
                'self.dense = tf.keras.layers.Dense(units, activation=%r)'
                % rng.choice(['relu', 'tanh', None])]
        chunks = [['h = self.dense(h)']]
        for _ in range(rng.choice([1, 1, 2])):
            self.insert(chunks, self.refused(init, 'block'))
        if rng.random() < 0.5:
            chunks.append(self.tensor_if())
        if rng.random() < 0.3:
            init.append('self.seen = 0')
            chunks.insert(0, ['self.seen += 1'])
        if rng.random() < 0.4:
            chunks = [['inp = h']] + chunks + [['h = h + inp']]     # residual
        body = [ln for chunk in chunks for ln in chunk] + ['return h']
        lines = ['class %s(tf.keras.layers.Layer):' % name,
                 '    def __init__(self, units, seed, **kw):'] + _indent(init, 8)
        lines += ['', '    def call(self, h, training=False):'] + _indent(body, 8)
        return '\n'.join(lines)

    def model_class(self, name, block):
        """A subclassed Model(seed) (or Layer): a Dense input layer, blocks of ``block``
        (or none), a head; refused lines in its own call when there are no blocks
        (sometimes also with them)."""
        rng = self.rng
        w = self.width
        base = rng.choice(['tf.keras.Model', 'tf.keras.Model', 'tf.keras.layers.Layer'])
        init = ['super().__init__(**kw)',
                'self.inp = tf.keras.layers.Dense(%d, activation=%r)'
                % (w, rng.choice(['relu', None]))]
        chunks = []
        if rng.random() < 0.4:
            chunks.append(['if tf.reduce_max(tf.abs(x)) > 10.0:', '    x = x / 10.0'])
        chunks.append(['h = self.inp(x)'])
        first = len(chunks)
        if block is not None:
            n = rng.choice([1, 2, 2, 3])
            if n == 1 and rng.random() < 0.5:
                init.append("self.block = %s(%d, seed + 1, name=self.name + '_b')" % (block, w))
                chunks.append(['h = self.block(h, training=training)'])
                self.block_ref = 'block'
            else:
                init.append("self.blocks = [%s(%d, seed + k, name=self.name + '_b%%d' %% k) "
                            "for k in range(%d)]" % (block, w, n))
                chunks.append(['for blk in self.blocks:', '    h = blk(h, training=training)'])
                self.has_blocks = True
                self.block_ref = 'blocks[0]'
        if block is None or rng.random() < 0.3:
            for _ in range(rng.choice([1, 1, 2])):
                self.insert(chunks, self.refused(init, 'model'), first)
        r = rng.random()
        if r < 0.2:
            init.append('self.drop = tf.keras.layers.Dropout(0.25, seed=seed)')
            chunks.append(['h = self.drop(h, training=training)'])
        elif r < 0.45:
            chunks.append(['if training:', '    h = h * 0.9'])
        if rng.random() < 0.5:
            chunks.append(self.tensor_if())
        init.append('self.head = tf.keras.layers.Dense(%d)' % self.outputs)
        body = [ln for chunk in chunks for ln in chunk] + ['return self.head(h)']
        lines = ['class %s(%s):' % (name, base), '    def __init__(self, seed, **kw):']
        lines += _indent(init, 8)
        lines += ['', '    def call(self, x, training=False):'] + _indent(body, 8)
        return '\n'.join(lines)


def _nb_batch(b, base, width, seed, change, sizes):
    """A parameter: a stateless random batch [n, width] seeded by the call's number;
    after the flip (``change``), scaled up or of the other batch size (``sizes``)."""
    name = b.fresh(base)
    scale = b.rng.choice(['40.0', '25.0'])

    def values(i):
        n = sizes[1] if change == 'batch' and b.regime(i) else sizes[0]
        src = 'tf.random.stateless_normal([%d, %d], seed=[%d, %d])' % (n, width, i, seed)
        return src + ' * ' + scale if change == 'scale' and b.regime(i) else src
    b.params.append((name, values))
    return name


def f_nested_breaks(b):
    """A subclassed Keras model whose call (or whose blocks' call) holds refused lines
    (see above), trained or run forward by the target."""
    rng = b.rng
    _module_chunk(b, 'import random')
    c = _NbCtx(b)
    k = b.counter + 1
    block = None
    if rng.random() < 0.65:
        block = 'Block%d' % k
        _module_chunk(b, c.block_class(block))
    model = 'Net%d' % k
    _module_chunk(b, c.model_class(model, block))
    build = ['tf.keras.utils.set_random_seed(%d)' % rng.randint(0, 99),
             "@M = %s(%d, name='net%d')" % (model, rng.randint(0, 99), k),
             '@M(tf.zeros([1, %d]))' % c.inputs]
    opt_src = rng.choice(['tf.keras.optimizers.SGD(0.05)', 'tf.keras.optimizers.SGD(0.01)',
                          'tf.keras.optimizers.SGD(0.05, momentum=0.5)'])
    train = rng.random() < 0.65
    if rng.random() < 0.3:
        b.need_state()
        m, opt = '%s.net%d' % (b.obj, k), '%s.opt%d' % (b.obj, k)
        out_m, out_opt = 'S.net%d' % k, 'S.opt%d' % k
        b.state_init += [_sub(ln, M='self.net%d' % k) for ln in build]
        if train:
            b.state_init.append('self.opt%d = %s' % (k, opt_src))
    else:
        m, opt = 'NET%d' % k, 'OPT%d' % k
        out_m, out_opt = m, opt
        b.module.append('\n'.join(_sub(ln, M=m) for ln in build) + '\n')
        if train:
            b.glob(opt, opt_src)
    change = rng.choice(['scale', 'scale', 'batch', 'none'])
    sizes = (rng.choice([2, 3, 4]), rng.choice([1, 3, 5]))
    xb = _nb_batch(b, 'xb', c.inputs, rng.randint(0, 99), change, sizes)
    if train:
        tape, out, loss = b.fresh('tape'), b.fresh('out'), b.fresh('loss')
        grads = b.fresh('grads')
        target = rng.choice(['label', 'mean', 'zero'])
        if target == 'label':
            yb = _nb_batch(b, 'yb', c.outputs, rng.randint(0, 99),      # (never scaled)
                           'batch' if change == 'batch' else 'none', sizes)
            loss_src = 'tf.reduce_mean(tf.square(%s - %s))' % (out, yb)
        elif target == 'mean':
            loss_src = 'tf.reduce_mean(tf.square(%s - tf.reduce_mean(%s, axis=1, keepdims=True)))' \
                % (out, xb)
        else:
            loss_src = 'tf.reduce_mean(tf.square(%s))' % out
        step = _number(b, 'step', '0', _home(b, ('attr', 'attr', 'global', 'cell')))
        S = step.ref
        lines = ['with tf.GradientTape() as %s:' % tape,
                 '    %s = %s(%s, training=True)' % (out, m, xb),
                 '    %s = %s' % (loss, loss_src),
                 '%s = %s.gradient(%s, %s.trainable_variables)' % (grads, tape, loss, m)]
        if change == 'scale' or rng.random() < 0.5:
            # (large inputs: unclipped steps would blow ulp-sized graph-vs-eager differences up)
            lines.append('%s, _ = tf.clip_by_global_norm(%s, 1.0)' % (grads, grads))
        lines += ['%s.apply_gradients(zip(%s, %s.trainable_variables))' % (opt, grads, m),
                  '%s += 1' % S, 'if %s %% %d == 0:' % (S, rng.choice([2, 3, 4])),
                  '    ' + rng.choice(["print('step', %s, 'loss', round(float(%s), 4))" % (S, loss),
                                       "print('step %%d loss %%.4f' %% (%s, float(%s)))" % (S, loss),
                                       "print(f'step {%s}: loss {float(%s):.4f}')" % (S, loss)])]
        if rng.random() < 0.5:
            lines.append('acc = acc + tf.cast(tf.reduce_mean(%s), acc.dtype) * 0.01' % out)
        loop = rng.random() < 0.2
        b.item(lines, loopable=loop)
        b.outs.append(S if loop else rng.choice([loss, S, 'round(float(%s), 3)' % loss]))
        if step.setter is not None and rng.random() < 0.5:
            b.mutations.append(step.set('0'))
        b.flip_mutations.append('%s.learning_rate = 0.001' % out_opt)
    if not train or rng.random() < 0.4:
        pred = b.fresh('pred')
        r = rng.random()
        flag = ''
        if r < 0.3:
            tr = b.fresh('training')
            period = rng.choice([2, 3])
            b.params.append((tr, lambda i: 'True' if i % period == 0 else 'False'))
            flag = ', training=%s' % tr
        elif r < 0.6:
            flag = ', training=False'
        lines = ['%s = %s(%s%s)' % (pred, m, xb, flag),
                 rng.choice(['acc = acc + tf.cast(tf.reduce_sum(%s), acc.dtype) * 0.01' % pred,
                             'acc = acc + tf.cast(tf.reduce_max(tf.nn.softmax(%s)), acc.dtype)'
                             % pred,
                             'acc = acc + tf.cast(tf.size(%s), acc.dtype) * 0.125' % pred])]
        loop = rng.random() < 0.3
        b.item(lines, loopable=loop)
        if not loop:
            b.outs.append(rng.choice([pred, 'tf.argmax(%s, axis=1)' % pred]))
    # from outside: draws from and reseeds the layers' RNGs, freezes layers
    for owner, ref in (('model', out_m), ('block', '%s.%s' % (out_m, c.block_ref))):
        if owner in c.rngs and (owner == 'model' or c.block_ref):
            b.mutations += ["print('draw', %s.rng.random())" % ref, '%s.rng.seed(7)' % ref]
    b.flip_mutations.append('%s.head.trainable = False' % out_m)
    if c.has_blocks:
        b.flip_mutations.append('%s.blocks[-1].trainable = False' % out_m)
    b.ncalls = max(b.ncalls, rng.randint(12, 16))
    if b.pattern == 'none' and rng.random() < 0.7:
        b.pattern = rng.choice(['step', 'back', 'alternate', 'once'])
    b.flip = rng.randint(min(8, b.ncalls - 2), b.ncalls - 2)


# rows of 2-d NumPy arrays from outside the call (issue 36's detection step; appended last:
# skipping ROWS_FEATURES gives the programs of before)

def f_array_rows(b):
    """A 2-d NumPy array from outside (a global, an attribute or an argument: anchor
    masks, anchors) iterated in the target as detection code does: ``for``, ``zip``
    with other lists, ``enumerate``, unpacking, ``list()``, a comprehension, a row
    kept in a history; between calls it is written in place, rebound with another
    row count, or rebound to a 1-d array (whose items are NumPy scalars: refused)."""
    rng = b.rng
    rows = rng.choice([2, 3])
    dtype = rng.choice(['np.float32', 'np.float64', 'np.int64'])
    init = 'np.arange(%d.0).reshape(%d, 2).astype(%s)' % (2 * rows, rows, dtype)
    home = rng.choice(['global', 'global', 'attr', 'arg'])
    if home == 'global':
        A = b.fresh('ROWS')
        b.glob(A, init)
        b.mutations += ['%s[0, 1] = 7' % A, '%s = np.ones((%d, 2), %s)' % (A, rows + 1, dtype),
                        '%s = np.arange(3.0)' % A]
    elif home == 'attr':
        b.need_state()
        name = b.fresh('rows')
        A = '%s.%s' % (b.obj, name)
        b.state_init.append('self.%s = %s' % (name, init))
        b.mutations += ['S.%s[-1, 0] = -3' % name, 'S.%s = np.zeros((1, 2), %s)' % (name, dtype)]
    else:
        A = b.fresh('arr')
        b.params.append((A, lambda i: 'np.full((%d, 2), %r, %s)' % (
            rows + b.regime(i), 0.5 + i, dtype)))
    H = b.fresh('HROWS')
    b.glob(H, '[]')
    cast = 'tf.cast(tf.reduce_sum(tf.constant(%s)), acc.dtype)'
    pool = ['for r_ in %s:\n    acc = acc + %s * 0.1' % (A, cast % 'r_'),
            'for i_, r_ in enumerate(%s):\n    acc = acc * 0.5 + float(i_) + %s * 0.01'
            % (A, cast % 'r_'),
            'for w_, r_ in zip([1.0, 2.0, 3.0], %s):\n    acc = acc + w_ * %s * 0.01'
            % (A, cast % 'r_'),
            'n_ = sum(len(r_) for r_ in %s)\nacc = acc + n_' % A,
            'rows_ = list(%s)\nacc = acc + len(rows_) + %s * 0.01'
            % (A, cast % 'rows_[-1]'),
            'for r_ in reversed(%s):\n    %s.append(r_)\nacc = acc + len(%s)' % (A, H, H),
            'first_, *rest_ = %s\nacc = acc + %s * 0.1 + len(rest_)' % (A, cast % 'first_'),
            'ts_ = [tf.constant(r_, tf.float32) for r_ in %s]\n'
            'acc = acc + tf.cast(tf.reduce_sum(tf.stack(ts_)), acc.dtype) * 0.01' % A]
    for line in rng.sample(pool, rng.randint(1, 3)):
        b.item(line)
    b.outs.append(rng.choice(['len(%s)' % H, A, '[r_.tolist() for r_ in %s]' % H]))


# graph breaks nested in plain functions and methods (graphgen/nested.py; appended last:
# skipping NESTED_CALL_FEATURES gives the programs of before)

def f_nested_calls(b):
    """A plain Python class's method (``forward(model, h, training)``) runs a Dense layer
    and holds refused lines (``_NbCtx.refused``: stdlib or NumPy RNG draws, ``.numpy()``
    reads and sizes, prints, a user exception past a threshold) among tensor ``if``s;
    the target calls it directly or through a module-level function, in a training step
    (tape, SGD, step counter) or a forward pass.  From outside, the caller draws from and
    reseeds its RNG; at the flip the inputs grow (the tensor ``if``s flip)."""
    rng = b.rng
    _module_chunk(b, 'import random')
    c = _NbCtx(b)
    k = b.counter + 1
    init = ["self.name = 'head%d'" % k]
    chunks = [['h = model(h, training=training)' if rng.random() < 0.5 else 'h = model(h)']]
    for _ in range(rng.choice([1, 1, 2])):
        c.insert(chunks, c.refused(init, 'head'), 1)
    if rng.random() < 0.5:
        chunks.append(c.tensor_if())
    if rng.random() < 0.4:
        init.append('self.calls = 0')
        chunks.insert(0, ['self.calls += 1'])
    body = [ln for chunk in chunks for ln in chunk] + ['return h']
    cls = 'Head%d' % k
    lines = ['class %s:' % cls, '    def __init__(self, seed):'] + _indent(init, 8)
    lines += ['', '    def forward(self, model, h, training=False):'] + _indent(body, 8)
    _module_chunk(b, '\n'.join(lines))
    head, model = 'HEAD%d' % k, 'DK%d' % k
    b.module.append('tf.keras.utils.set_random_seed(%d)\n%s = tf.keras.layers.Dense(%d, '
                    "activation=%r, name='dk%d')\n%s.build((None, %d))\n%s = %s(%d)\n"
                    % (rng.randint(0, 99), model, c.width, rng.choice(['relu', 'tanh', None]),
                       k, model, c.inputs, head, cls, rng.randint(0, 99)))
    call = '%s.forward(%s, @X, training=@T)' % (head, model)
    if rng.random() < 0.4:
        via = 'forward%d' % k
        _module_chunk(b, 'def %s(head, model, x, training):\n'
                         '    y = head.forward(model, x * 1.0, training=training)\n'
                         '    return tf.reduce_mean(y, axis=1, keepdims=True) + y' % via)
        call = '%s(%s, %s, @X, @T)' % (via, head, model)
    xb = _nb_batch(b, 'xb', c.inputs, rng.randint(0, 99),
                   rng.choice(['scale', 'batch', 'none']), (rng.choice([2, 3]), 4))
    out = b.fresh('out')
    if rng.random() < 0.6:
        tape, loss, opt = b.fresh('tape'), b.fresh('loss'), 'OPTK%d' % k
        b.glob(opt, 'tf.keras.optimizers.SGD(0.01)')
        S = b.fresh('STEPK')
        b.glob(S, '0')
        b.decls.append('global %s' % S)
        closure = rng.random() < 0.35   # the step a local def, run directly or by strategy.run
        x_in = 'xk_' if closure else xb
        lines = ['with tf.GradientTape() as %s:' % tape,
                 '    %s = %s' % (out, _sub(call, X=x_in, T='True')),
                 '    %s = tf.reduce_mean(tf.square(%s))' % (loss, out),
                 'gk_ = %s.gradient(%s, %s.trainable_variables)' % (tape, loss, model),
                 'gk_, _ = tf.clip_by_global_norm(gk_, 1.0)',
                 '%s.apply_gradients(zip(gk_, %s.trainable_variables))' % (opt, model),
                 '%s += 1' % S,
                 'if %s %% 3 == 0:' % S,
                 "    print('step', %s, round(float(%s), 4))" % (S, loss)]
        if closure:
            run = rng.choice(['%s = tf.distribute.get_strategy().run(stepk_, args=(%s,))',
                              '%s = stepk_(%s)'])
            lines = (['def stepk_(xk_):', '    global %s' % S] + _indent(lines)
                     + ['    return %s' % loss, run % (loss, xb)])
        b.item(lines, loopable=False)
        b.outs.append(rng.choice([S, 'round(float(%s), 3)' % loss]))
    else:
        b.item(['%s = %s' % (out, _sub(call, X=xb, T=rng.choice(['True', 'False']))),
                'acc = acc + tf.cast(tf.reduce_sum(%s), acc.dtype) * 0.01' % out],
               loopable=rng.random() < 0.3)
    if 'head' in c.rngs:
        b.mutations += ["print('draw', %s.rng.random())" % head, '%s.rng.seed(7)' % head]
    b.ncalls = max(b.ncalls, rng.randint(10, 14))


# graph breaks in a tf.map_fn body (graphgen/nested.py; appended last: skipping
# MAP_BODY_FEATURES gives the programs of before)

def f_map_body(b):
    """A module-level function over one row (``rowfK(row)``) holds refused lines
    (``.numpy()`` sizing and reads, prints, a global history, NumPy and stdlib RNG
    draws, a user exception past a threshold) among tensor work; the target maps it
    over a batch with ``tf.map_fn``: directly, through a lambda, or through a local
    ``def``, sometimes under a tape differentiating the batch.  From outside, the RNGs
    are drawn from and reseeded; at the flip the inputs grow (a threshold passes).
    Eagerly ``tf.map_fn`` runs the body converted by AutoGraph, whose builtins differ
    from Python's; janus runs the statement in Python (not routed: graphgen/nested.py)."""
    rng = b.rng
    _module_chunk(b, 'import random')
    k = b.counter + 1
    fname, hist, nprng, pyrng = 'rowf%d' % k, 'HISTM%d' % k, 'NPRM%d' % k, 'PYRM%d' % k
    body = ['h = tf.tanh(row * 0.5) + row']
    kinds = rng.sample(['size', 'read', 'print', 'hist', 'np', 'random', 'raise'],
                       rng.choice([1, 1, 2]))
    for kind in kinds:
        if kind == 'size':
            body += ['n_ = int(tf.reduce_sum(tf.cast(h > 0.0, tf.int32)).numpy())',
                     'h = h + tf.reduce_sum(tf.math.top_k(h, k=max(n_, 1)).values) * 0.1']
        elif kind == 'read':
            body += ['s_ = float(tf.reduce_mean(h))']
            body += rng.choice([['if s_ > 0.5:', '    h = h * 0.5'], ['h = h - s_ * 0.25']])
        elif kind == 'print':
            # (AutoGraph converts the body eagerly: float() of a tensor is a cast there,
            # so round() of it raises, and print of a tensor is tf.print)
            body.append(rng.choice(["print('row', round(float(tf.reduce_sum(h)), 3))",
                                    "print('row', tf.reduce_sum(h))",
                                    "print('argmax', int(tf.argmax(h).numpy()))"]))
        elif kind == 'hist':
            body.append('%s.append(int(tf.argmax(h).numpy()))' % hist)
        elif kind == 'np':
            body.append('h = h * float(%s.uniform(0.9, 1.1))' % nprng)
        elif kind == 'random':
            body.append('h = h + %s.gauss(0.0, 0.1)' % pyrng)
        else:
            body += ['if float(tf.reduce_max(tf.abs(h))) > 30.0:',
                     "    raise ValueError('row too large: %.1f' % float(tf.reduce_max(h)))"]
    if rng.random() < 0.5:
        body += ['if tf.reduce_mean(h) > %s:' % rng.choice(['0.5', '2.0']), '    h = h * 0.5']
    body.append('return tf.reduce_sum(h * h) * 0.1')
    _module_chunk(b, '%s = []\n%s = np.random.RandomState(%d)\n%s = random.Random(%d)\n'
                     'def %s(row):\n%s' % (hist, nprng, rng.randint(0, 99), pyrng,
                                           rng.randint(0, 99), fname,
                                           '\n'.join(_indent(body, 4))))
    xb = _nb_batch(b, 'xm', rng.choice([3, 4]), rng.randint(0, 99),
                   rng.choice(['scale', 'batch', 'none']), (rng.choice([2, 3]), 4))
    out = b.fresh('outm')
    how = rng.choice(['direct', 'direct', 'lambda', 'local'])
    mapped = {'direct': fname, 'lambda': 'lambda r_: %s(r_) * 2.0' % fname,
              'local': 'bodym_'}[how]
    call = 'tf.map_fn(%s, %s, fn_output_signature=tf.float32)' % (mapped, xb)
    lines = ['def bodym_(r_):', '    return %s(r_ * 1.0) + 1.0' % fname] if how == 'local' else []
    if rng.random() < 0.3:
        tape = b.fresh('tapem')
        lines += ['with tf.GradientTape() as %s:' % tape, '    %s.watch(%s)' % (tape, xb),
                  '    %s = %s' % (out, call),
                  '    lm_ = tf.reduce_sum(%s)' % out,
                  'acc = acc + tf.cast(tf.reduce_sum(%s.gradient(lm_, %s)), acc.dtype) * 0.01'
                  % (tape, xb)]
    else:
        lines += ['%s = %s' % (out, call),
                  'acc = acc + tf.cast(tf.reduce_sum(%s), acc.dtype) * 0.01' % out]
    b.item(lines, loopable=False)
    b.outs.append(rng.choice([out, 'len(%s)' % hist, 'list(%s)' % hist]))
    b.mutations += ["print('draw', %s.uniform())" % nprng, '%s.seed(3)' % nprng,
                    "print('draw', %s.random())" % pyrng, '%s.seed(5)' % pyrng,
                    '%s.clear()' % hist]
    b.ncalls = max(b.ncalls, rng.randint(8, 12))


# a janus function of a callable, called by the target (appended last: skipping
# JANUS_CALLEE_FEATURES gives the programs of before)

def f_janus_callee(b):
    """``inner = jit(callable)`` at module level, called by the target: janus inlines a
    janus function whose target is a Keras layer of yours (Python state in its ``call``),
    a Dense layer or a ``functools.partial`` of a TF function (both without Python code of
    their own: janus runs ``call_through``), or an object with a Python ``__call__``.
    From outside, the layer's or object's factor changes; eagerly ``jit`` is the identity."""
    rng = b.rng
    k = b.counter + 1
    kind = rng.choice(['layer', 'layer', 'dense', 'partial', 'object'])
    inner, obj = 'INNERJ%d' % k, 'OBJJ%d' % k
    if kind in ('layer', 'object'):
        base = '(tf.keras.layers.Layer)' if kind == 'layer' else ''
        method = 'call' if kind == 'layer' else '__call__'
        init = ('    def __init__(self, factor):\n' +
                # named: Keras's name counter is shared by the sides
                ("        super().__init__(name='scalej%d')\n" % k if kind == 'layer' else '') +
                '        self.factor = factor\n        self.calls = 0\n')
        _module_chunk(b, 'class ScaleJ%d%s:\n%s    def %s(self, v):\n'
                         '        self.calls += 1\n'
                         '        return v * self.factor + 1.0\n' % (k, base, init, method))
        b.glob(obj, 'ScaleJ%d(%s)' % (k, rng.choice(['0.5', '2.0'])))
        if kind == 'layer' and k % 2:   # half built before any trace (finding 44-1)
            b.glob('BUILTJ%d' % k, '%s(tf.zeros([1, 1]))' % obj)
        b.glob(inner, 'jit(%s)' % obj)
        b.outs.append('%s.calls' % obj)
        b.flip_mutations.append('%s.factor = %s' % (obj, rng.choice(['0.25', '3.0'])))
    elif kind == 'dense':
        b.glob(obj, "tf.keras.layers.Dense(1, kernel_initializer='ones', "
                    "bias_initializer='zeros', name='densej%d')" % k)
        b.glob(inner, 'jit(%s)' % obj)
        b.flip_mutations.append('%s.trainable = False' % obj)
    else:
        _module_chunk(b, 'import functools')
        b.glob(inner, 'jit(functools.partial(tf.add, %s))' % rng.choice(['1.0', '0.5']))
    b.item('yj_ = %s(tf.reshape(tf.cast(acc, tf.float32), [1, -1]))\n'
           'acc = acc + tf.cast(tf.reduce_sum(yj_), acc.dtype) * 0.1' % inner)


# stand-ins returned and stored (appended last: skipping STAND_IN_FEATURES gives the
# programs of before)

def f_stand_ins_out(b):
    """Values janus holds a stand-in for, returned or stored (``StandIn.materialize``):
    an outside NumPy array argument and views of it (the very array; a view per
    expression), a relaxed number's arithmetic, text formatted after the run, and what
    a run cannot give back: a mixed ``and`` of a relaxed number's test and a bool tensor,
    a list grown in a tensor-dependent loop (each refused for its own reason, the call
    runs as plain Python)."""
    rng = b.rng
    kind = rng.choice(['array', 'array', 'number', 'text', 'and_or', 'grown'])
    if kind == 'array':
        A = b.fresh('arrm')
        b.params.append((A, lambda i: 'np.arange(%d.0) * %r' % (3 + b.regime(i), 0.5 + i)))
        v = b.fresh('viewm')
        b.item('%s = %s[None]\nacc = acc + tf.cast(tf.reduce_sum(%s), acc.dtype) * 0.01'
               % (v, A, A))
        b.outs += rng.sample([A, v, v, '%s[1:]' % A], 2)
    elif kind in ('number', 'and_or'):
        n = b.fresh('nm')
        b.params.append((n, lambda i: repr(i % 5 if b.regime(i) else 1)))
        if kind == 'number':
            b.outs.append(rng.choice(['%s * 2' % n, '%s + 0.5' % n, '-%s' % n]))
        else:
            b.outs.append('(%s > 2) and (tf.reduce_sum(acc) > 0.0)' % n)
    elif kind == 'text':
        b.need_state()
        b.item("%s.note = f'acc {tf.reduce_sum(acc):.3f}'" % b.obj)
        b.outs.append('%s.note' % b.obj)
    else:
        g = b.fresh('grownm')
        # the trip count changes with x: after it breaks, a tf.while_loop grows the list
        b.item('%s = []\ni_ = tf.constant(0)\n'
               'while i_ < tf.cast(tf.reduce_sum(tf.abs(x)) * 4.0, tf.int32) %% 4:\n'
               '    %s.append(acc * 0.5)\n    i_ += 1' % (g, g))
        b.outs.append(g)


FEATURES = {
    'arith': f_arith, 'pylocals': f_pylocals, 'list_arg': f_list_arg, 'dict_arg': f_dict_arg,
    'tuple_arg': f_tuple_arg, 'obj_state': f_obj_state, 'globals': f_globals,
    'closure': f_closure, 'inner_fn': f_inner_fn, 'callee_default': f_callee_default,
    'dunder': f_dunder, 'enum': f_enum, 'strings': f_strings, 'print': f_print,
    'variable': f_variable, 'generator': f_generator, 'dataset': f_dataset,
    'mapfn_cond': f_mapfn_cond, 'raise': f_raise, 'alias': f_alias, 'tape': f_tape,
    'refuse': f_refuse, 'private': f_private, 'cyclic': f_cyclic, 'early_return': f_early_return,
    'target_defaults': f_target_defaults, 'scalar_args': f_scalar_args,
    'state_methods': f_state_methods, 'getattr_obj': f_getattr_obj, 'tensor_list': f_tensor_list,
    'state_tensors': f_state_tensors, 'global_tensor': f_global_tensor, 'keras': f_keras,
    'python_ops': f_python_ops, 'tensor_ops': f_tensor_ops, 'varargs': f_varargs,
    'callee_raises': f_callee_raises, 'class_attr': f_class_attr, 'objects_list': f_objects_list,
    'del': f_del, 'tensor_locals': f_tensor_locals, 'alias_global': f_alias_global,
    'lazy_var': f_lazy_var, 'attr_builtins': f_attr_builtins, 'new_global': f_new_global,
    'tensor_list_items': f_tensor_list_items, 'observe': f_observe,
    'counter': f_counter, 'schedule': f_schedule, 'best': f_best, 'every_n': f_every_n,
    'var_counter': f_var_counter, 'number_mix': f_number_mix, 'number_print': f_number_print,
    'every_n_io': f_every_n_io,
    # issue 17 (appended last: with them skipped, a seed's programs are those of before)
    'swap': f_swap, 'callbacks': f_callbacks, 'type_attr': f_type_attr, 'nested': f_nested,
    'set_deque': f_set_deque, 'memo': f_memo, 'raise_mid': f_raise_mid,
    'static_eager': f_static_eager,
    # issue 19: graph breaks (appended last, like issue 17's)
    'break_print': f_break_print, 'break_size': f_break_size, 'break_numpy': f_break_numpy,
    'break_rng': f_break_rng, 'break_iter': f_break_iter, 'break_try': f_break_try,
    'break_stats': f_break_stats, 'break_unbound': f_break_unbound,
    'break_raise': f_break_raise, 'break_counters': f_break_counters,
    'break_tape': f_break_tape,
    # issue 19, second set (appended last: skipping BREAK_FEATURES2 gives the programs of before)
    'break_ctx': f_break_ctx, 'break_gen': f_break_gen, 'break_log': f_break_log,
    # issue 20 (appended last)
    'ds_loop': f_ds_loop,
    # issue 20, second set (appended last: skipping DATASET_FEATURES2 gives the programs of before)
    'ds_iter_arg': f_ds_iter_arg, 'bool_flag': f_bool_flag, 'keras_list': f_keras_list,
    # issue 20, third set (appended last)
    'list_iter_arg': f_list_iter_arg, 'mutate_loop': f_mutate_loop,
    # try statements traced as Python (appended last: skipping TRY_FEATURES gives the programs
    # of before)
    'try_stmt': f_try_stmt,
    # recursion over objects (appended last: skipping REC_FEATURES gives the programs of before)
    'recursion': f_recursion,
    # number-or-None attributes and node methods (appended last: skipping REC_FEATURES2
    # gives the programs of before)
    'rec_word': f_rec_word,
    # nested lists (appended last: skipping REC_FEATURES3 gives the programs of before)
    'rec_list': f_rec_list,
    # level-by-level recursion (appended last: skipping REC_FEATURES4 gives the programs
    # of before)
    'rec_levels': f_rec_levels,
    # local names across graph breaks (appended last: skipping NAMES_FEATURES gives the
    # programs of before)
    'break_names': f_break_names,
    # graph breaks nested in Keras layers' call (appended last: skipping
    # NESTED_BREAK_FEATURES gives the programs of before)
    'nested_breaks': f_nested_breaks,
    # rows of 2-d NumPy arrays (appended last: skipping ROWS_FEATURES gives the programs of
    # before)
    'array_rows': f_array_rows,
    # graph breaks nested in plain functions and methods (appended last: skipping
    # NESTED_CALL_FEATURES gives the programs of before)
    'nested_calls': f_nested_calls,
    # graph breaks in a tf.map_fn body (appended last: skipping MAP_BODY_FEATURES gives the
    # programs of before)
    'map_body': f_map_body,
    # a janus function of a callable, called by the target (appended last: skipping
    # JANUS_CALLEE_FEATURES gives the programs of before)
    'janus_callee': f_janus_callee,
    # stand-ins returned and stored (appended last: skipping STAND_IN_FEATURES gives the
    # programs of before)
    'stand_ins_out': f_stand_ins_out,
}
ISSUE17_FEATURES = ('swap', 'callbacks', 'type_attr', 'nested', 'set_deque', 'memo',
                    'raise_mid', 'static_eager')
BREAK_FEATURES = ('break_print', 'break_size', 'break_numpy', 'break_rng', 'break_iter',
                  'break_try', 'break_stats', 'break_unbound', 'break_raise', 'break_counters',
                  'break_tape')
BREAK_FEATURES2 = ('break_ctx', 'break_gen', 'break_log')
BREAK_FEATURES += BREAK_FEATURES2
DATASET_FEATURES2 = ('ds_iter_arg', 'bool_flag', 'keras_list')
DATASET_FEATURES3 = ('list_iter_arg', 'mutate_loop')
DATASET_FEATURES = ('ds_loop',) + DATASET_FEATURES2 + DATASET_FEATURES3
TRY_FEATURES = ('try_stmt',)
REC_FEATURES2 = ('rec_word',)
REC_FEATURES3 = ('rec_list',)
REC_FEATURES4 = ('rec_levels',)
REC_FEATURES = ('recursion',) + REC_FEATURES2 + REC_FEATURES3 + REC_FEATURES4
NAMES_FEATURES = ('break_names',)
BREAK_FEATURES += NAMES_FEATURES
NESTED_BREAK_FEATURES = ('nested_breaks',)
BREAK_FEATURES += NESTED_BREAK_FEATURES
ROWS_FEATURES = ('array_rows',)
NESTED_CALL_FEATURES = ('nested_calls',)
BREAK_FEATURES += NESTED_CALL_FEATURES
MAP_BODY_FEATURES = ('map_body',)
BREAK_FEATURES += MAP_BODY_FEATURES
JANUS_CALLEE_FEATURES = ('janus_callee',)
STAND_IN_FEATURES = ('stand_ins_out',)
WEIGHTS = {'arith': 3, 'pylocals': 3, 'list_arg': 3, 'dict_arg': 2, 'tuple_arg': 2,
           'obj_state': 5, 'globals': 3, 'closure': 2, 'inner_fn': 2, 'callee_default': 2,
           'dunder': 2, 'enum': 2, 'strings': 2, 'print': 3, 'variable': 3, 'generator': 2,
           'dataset': 1, 'mapfn_cond': 2, 'raise': 2, 'alias': 2, 'tape': 1, 'refuse': 3,
           'private': 1, 'cyclic': 1, 'early_return': 2, 'target_defaults': 2, 'scalar_args': 3,
           'state_methods': 2, 'getattr_obj': 1, 'tensor_list': 2, 'state_tensors': 3,
           'global_tensor': 2, 'keras': 1, 'python_ops': 2, 'tensor_ops': 3, 'varargs': 1,
           'callee_raises': 1, 'class_attr': 1, 'objects_list': 1, 'del': 1,
           'tensor_locals': 3, 'alias_global': 1, 'lazy_var': 1, 'attr_builtins': 1,
           'new_global': 1, 'tensor_list_items': 2, 'observe': 4,
           'counter': 2, 'schedule': 2, 'best': 1, 'every_n': 2, 'var_counter': 1,
           'number_mix': 2, 'number_print': 1, 'every_n_io': 2,
           'swap': 2, 'callbacks': 2, 'type_attr': 1, 'nested': 2, 'set_deque': 2, 'memo': 2,
           'raise_mid': 2, 'static_eager': 1,
           'break_print': 3, 'break_size': 2, 'break_numpy': 2, 'break_rng': 2, 'break_iter': 2,
           'break_try': 2, 'break_stats': 2, 'break_unbound': 1, 'break_raise': 2,
           'break_counters': 2, 'break_tape': 2,
           'break_ctx': 3, 'break_gen': 3, 'break_log': 3,
           'ds_loop': 2, 'ds_iter_arg': 2, 'bool_flag': 2, 'keras_list': 2,
           'list_iter_arg': 2, 'mutate_loop': 2,
           'try_stmt': 3, 'recursion': 3, 'rec_word': 3, 'rec_list': 3, 'rec_levels': 3,
           'break_names': 3, 'nested_breaks': 3, 'array_rows': 2,
           'nested_calls': 3, 'map_body': 2, 'janus_callee': 2, 'stand_ins_out': 2}


# -- control flow wrappers ---------------------------------------------------------------

def _take(b, k, tensor=False):
    """Removes up to k work items (not early returns, for loops) from the pool; for
    a tensor-dependent wrapper, mostly pure tensor code (Python state writes there
    are refused, which makes the whole function imperative)."""
    picked = []
    for _ in range(k):
        cands = [it for it in b.items if it['loopable']]
        pure = [it for it in cands if it.get('pure')]
        breaks = [it for it in cands if it.get('brk')]
        if b.prefer_break and breaks:
            cands = breaks            # a graph break inside this loop or branch
            b.prefer_break = False
        elif tensor and pure and b.rng.random() < 0.75:
            cands = pure
        if not cands:
            break
        it = b.rng.choice(cands)
        b.items.remove(it)
        picked.append(it)
    return picked


def _body(b, items, extra=True):
    lines = [ln for it in items for ln in it['lines']]
    if not lines or (extra and b.rng.random() < 0.3):
        lines.append(arith(b, 1))
    return lines


def w_py_if(b):
    cond = b.cond_python()
    items = _take(b, b.rng.randint(1, 2))
    lines = ['if %s:' % cond] + _indent(_body(b, items[:1]))
    r = b.rng.random()
    if r < 0.4:
        lines += ['elif %s:' % b.cond_python()] + _indent([arith(b, 1)])
    if r < 0.8:
        lines += ['else:'] + _indent(_body(b, items[1:]))
    b.item(lines)


def w_tensor_if(b):
    cond = b.cond_tensor()
    items = _take(b, b.rng.randint(1, 2), tensor=True)
    lines = ['if %s:' % cond] + _indent(_body(b, items[:1]))
    r = b.rng.random()
    if r < 0.3:
        lines += ['elif %s:' % b.cond_tensor()] + _indent([arith(b, 1)])
    if r < 0.8:
        lines += ['else:'] + _indent(_body(b, items[1:]))
    b.item(lines)


def w_ternary(b):
    cond = b.cond_tensor() if b.rng.random() < 0.6 else b.cond_python()
    b.item('acc = acc * 2.0 if %s else acc - 1.0' % cond)


def _loop_extras(b, var, tensor_ok=True):
    """Optional break/continue/return lines at the start of a loop body."""
    out = []
    r = b.rng.random()
    if r < 0.5:
        stmt = b.rng.choice(['break', 'continue', 'return acc' if b.rng.random() < 0.5 else 'break'])
        if var and b.rng.random() < 0.5:
            cond = b.rng.choice(['%s == 1' % var, '%s %% 2 == 1' % var, '%s >= 2' % var])
        elif tensor_ok:
            cond = b.rng.choice(['tf.reduce_sum(acc) > 4.0', 'tf.reduce_max(acc) > 2.0',
                                 'tf.reduce_sum(acc) < -1.0'])
        else:
            cond = 'False'
        out += ['if %s:' % cond, '    ' + stmt]
    return out


def w_py_for(b):
    j = b.fresh('j')
    items = _take(b, b.rng.randint(1, 2))
    kind = b.rng.random()
    if kind < 0.5:
        bound = b.need_p() if b.rng.random() < 0.6 else str(b.rng.randint(1, 3))
        head = 'for %s in range(%s):' % (j, bound)
    elif kind < 0.75:
        head = 'for %s, w_ in enumerate([0.5, 1.5]):' % j
    else:
        head = 'for %s in (1, 2, 3):' % j
    b.item([head] + _indent(_loop_extras(b, j) + _body(b, items)))


def w_tensor_for(b):
    e = b.fresh('e')
    items = _take(b, b.rng.randint(0, 1), tensor=True)
    body = ['acc = acc + %s' % e] + _body(b, items, extra=False)
    b.item(['for %s in x:' % e] + _indent(_loop_extras(b, None) + body))


def w_py_while(b):
    j = b.fresh('w')
    bound = b.need_p() if b.rng.random() < 0.6 else str(b.rng.randint(1, 3))
    items = _take(b, b.rng.randint(1, 2))
    b.item(['%s = 0' % j, 'while %s < %s:' % (j, bound)] +
           _indent(['%s += 1' % j] + _loop_extras(b, j) + _body(b, items)))


def w_tensor_while(b):
    i = b.fresh('i')
    items = _take(b, b.rng.randint(1, 2), tensor=True)
    cond = b.rng.choice([
        '%s < tf.cast(tf.reduce_max(tf.abs(x)) * 2.0, tf.int32)' % i,
        '%s < 4 and tf.reduce_sum(acc) < 6.0' % i,
        '%s < tf.shape(x)[0]' % i])
    b.item(['%s = tf.constant(0)' % i, 'while %s:' % cond] +
           _indent(['%s = %s + 1' % (i, i)] + _loop_extras(b, None) + _body(b, items)))


WRAPPERS = {'py_if': w_py_if, 'tensor_if': w_tensor_if, 'ternary': w_ternary,
            'py_for': w_py_for, 'tensor_for': w_tensor_for, 'py_while': w_py_while,
            'tensor_while': w_tensor_while}


# -- assembly -----------------------------------------------------------------------------

FOCUS_WEIGHT = 10     # how much more often --focus features are drawn


def generate(seed, index=None, skip=(), focus=()):
    """The program for ``seed`` (and ``index``, for a seed's n-th program).

    ``skip``: feature names never to use (e.g. to mask a known divergence while
    hunting for others; the programs of a seed then differ).  ``focus``: feature
    names drawn FOCUS_WEIGHT times as often (still mixed with the others)."""
    key = '%s:%s' % (seed, index) if index is not None else str(seed)
    rng = random.Random(key)
    b = Builder(rng, 'p_%s' % key.replace(':', '_'))
    names = [n for n in FEATURES if n not in skip]
    weights = [WEIGHTS[n] * (FOCUS_WEIGHT if n in focus else 1) for n in names]
    chosen = []
    for _ in range(rng.choice([1, 1, 2, 2, 3, 3, 4, 5])):
        name = rng.choices(names, weights=weights)[0]
        if name not in chosen:
            chosen.append(name)
    if 'closure' in chosen:
        b.variant = 'closure'   # before any feature names the state object
    elif b.variant == 'closure':
        if 'closure' in skip:
            b.variant = 'function'
        else:
            chosen.append('closure')
    for name in chosen:
        before = len(b.items)
        FEATURES[name](b)
        if name in BREAK_FEATURES:
            for it in b.items[before:]:
                it['brk'] = True
    if any(name in BREAK_FEATURES for name in chosen):
        _break_calls(b)
    b.features = chosen
    if not b.items:
        f_arith(b)
    wrappers = []
    nwrap = rng.choice([0, 1, 1, 2, 2, 3])
    if any(it.get('brk') for it in b.items) and rng.random() < 0.5:
        b.prefer_break = True         # (drawn only for programs with breaks: the others
        nwrap = max(nwrap, 1)         # are the programs of before)
    for _ in range(nwrap):
        w = rng.choice([w for w in WRAPPERS if w not in skip] or [None])
        if w is None:
            break
        WRAPPERS[w](b)
        wrappers.append(w)
    b.features = chosen + ['~' + w for w in wrappers]
    return _assemble(b)


def _target_lines(b, name):
    params = ['x'] + [p for p, _ in b.params]
    if b.variant == 'method':
        params = ['self'] + params
    if b.varargs:
        params.append('*extra')
    params += ['%s=%s' % kv for kv in b.default_params]   # keyword-only after *extra
    body = list(b.decls)
    body.append('acc = x * 1.0')
    body += b.inits
    items = list(b.items)
    b.rng.shuffle(items)
    for it in items:
        body += it['lines']
    outs = b.outs
    r = b.rng.random()
    if r < 0.04:
        pass                                  # falls off the end: returns None
    elif not outs or r < 0.15:
        body.append('return acc')
    elif r < 0.75:
        body.append('return acc, %s' % ', '.join(outs))
    elif r < 0.9:
        body.append('return [acc, %s]' % ', '.join(outs))
    else:
        body.append("return {'acc': acc, %s}" % ', '.join("'o%d': %s" % (k, o)
                                                          for k, o in enumerate(outs)))
    return ['@jit', 'def %s(%s):' % (name, ', '.join(params))] + _indent(body)


def _assemble(b):
    out = ['import enum', 'import math', 'import numpy as np', 'import tensorflow as tf', '']
    for chunk in b.module:
        out += _lines(chunk) if '\n' in chunk.strip('\n') else [chunk.strip()]
        if '\n' in chunk.strip('\n'):
            out.append('')
    method = b.rng.choice(['forward', 'forward', '__call__'])
    if b.uses_state:
        if b.state_base:
            out += ['', 'class Base:', '    def base_fn(self, y):', '        return y + 1.0']
        out += ['', 'class State%s:' % ('(Base)' if b.state_base else ''), '    def __init__(self):']
        out += _indent(b.state_init or ['pass'], 8)
        for chunk in b.state_methods:
            out.append('')
            out += _indent(_lines(chunk))
        if b.variant == 'method':
            out.append('')
            out += _indent(_target_lines(b, method))
        out += ['', 'S = State()', 'S2 = State()', '']
    if b.variant == 'function':
        out += [''] + _target_lines(b, 'f')
        target = 'f'
    elif b.variant == 'closure':
        out += ['', 'def make():'] + _indent(b.closure_lines)
        out += _indent(_target_lines(b, 'f'))
        for chunk in b.closure_after:
            out += _indent(_lines(chunk))
        out += _indent(['return %s' % ', '.join(['f'] + b.closure_returns)])
        out += ['', '%s = make()' % ', '.join(['f'] + b.closure_returns)]
        target = 'f'
    else:
        target = 'S' if method == '__call__' else 'S.' + method
    driver = b.rng.random() < 0.12
    if driver:   # some calls come through a user function calling the target twice
        out += ['', 'def driver(*args, **kwargs):',
                '    first = %s(*args, **kwargs)' % target,
                '    return first, %s(*args, **kwargs)' % target]
    source = '\n'.join(out).rstrip() + '\n'

    steps = []
    keyword = b.rng.random() < 0.2 and not b.varargs
    for i in range(b.ncalls):
        if i == b.flip and b.flip_mutations and b.rng.random() < 0.7:
            steps.append(('do', b.rng.choice(b.flip_mutations)))
        elif i > 0 and b.mutations and b.rng.random() < 0.2:
            steps.append(('do', b.rng.choice(b.mutations)))
        regime = b.regime(i)
        args = [b.x.source(i, regime)]
        for name, argfn in b.params:
            v = argfn(i)
            args.append('%s=%s' % (name, v) if keyword and i % 2 else v)
        if b.varargs:
            args += ['%d' % (k + 1) for k in range(b.regime(i) + (i % 2))]
        for name, argfn in b.default_args:
            v = argfn(i)
            if v is not None:
                args.append('%s=%s' % (name, v))
        steps.append(('call', 'driver' if driver and i % 3 == 2 else target, ', '.join(args)))
    return Program(b.name, source, steps, b.features)


def render(program, divergence=None):
    """The program and its call sequence, as one readable text."""
    from .runner import describe_steps
    return '%s\n# call sequence:\n%s\n' % (
        program.source, '\n'.join('# ' + ln for ln in describe_steps(program, divergence).split('\n')))
