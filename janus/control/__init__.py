"""Control-flow operators converted code calls while it is traced.

Needs a ``TraceContext`` (``tracing.current()``) carrying a ``Plan``.
Every test or loop is decided per evaluation (``statements.py``): a Python
value runs as plain Python (its inputs are guarded); a tensor (or a dynamic
scalar, ``scalars.py``) whose outcome the plan assumes runs only the assumed
path and adds a ``Janus>Assert`` of the assumption; any other tensor builds
real ``tf.cond`` (``cond.py``) / ``tf.while_loop`` (``loops.py``).  Inside
those, every nested decision is dynamic: a branch traced once runs many
times.  A test that depends on a state change made earlier in the same call
(``v.assign_add(1); if v % 10 == 0``) is never assumed: its assertion could
not run before the change (``graph/graph_analysis.py``).

The package's modules, each importing only those before it:
``common`` (shared values and helpers), ``values`` (merging values across a
tf.cond), ``branch_writes`` (Python writes inside a branch), ``hoisting``
(a branch's assertions checked before it), ``cond``, ``loops``, ``datasets``,
``outside_iterators`` (loops over a list/tuple/range iterator from outside),
``exceptions`` (``try`` statements traced: which exceptions a handler may
see), ``statements`` (what converted code calls).
"""
from janus.control.common import (INTERNAL_FLAGS, UNDEFINED, CannotBuild, TensorList,
                                          TestValue, Undefined, bool_tensor, read_local)
from janus.control import datasets, exceptions, outside_iterators
from janus.control.hoisting import HOISTED
from janus.control.statements import (boolop, for_stmt, if_stmt, ifexp, not_, test,
                                              unrolled_items, while_stmt)

__all__ = ['datasets', 'exceptions', 'outside_iterators', 'INTERNAL_FLAGS', 'UNDEFINED', 'CannotBuild', 'TensorList', 'TestValue', 'Undefined',
           'read_local', 'bool_tensor', 'HOISTED', 'boolop', 'for_stmt', 'if_stmt', 'ifexp', 'not_', 'test',
           'unrolled_items', 'while_stmt']
