"""The ``__jr`` namespace: what converted code calls while it is traced into a graph.

Needs nothing run before it; its operators need a ``TraceContext`` entered
(``tracer.py`` does it) before any converted function runs.  Only generated
code uses this module (``graphgen/converters/common.RUNTIME``); every
operator lives by job in a module of its own: reads and writes of names,
attributes and items and ``with`` (``access.py``; attributes that run your
properties or ``__getattr__``: ``attributes.py``), calls (``calls.py``),
control flow, a loop's iterable, ``assert`` and ``try`` (``control/``), observations
of values (``observe.py``; text that needs the run's values: ``lazy_text.py``).
"""
from janus.trace.access import (KEY, closure_write, enter, item, load,  # noqa: F401
                                  made, setitem, store)
from janus.trace.attributes import attr, attr_is_none, setattr_  # noqa: F401
from janus.trace.calls import call  # noqa: F401
from janus.control import (UNDEFINED, boolop, for_stmt, if_stmt, ifexp,  # noqa: F401
                                   not_, read_local, test, while_stmt)
from janus.control.exceptions import (TRACE_SIGNALS, caught,  # noqa: F401
                                              exception_types, finally_may_swallow,
                                              try_body)
from janus.control.statements import assert_  # noqa: F401
from janus.control.statements import loop_iterable as iter  # noqa: F401,A004
from janus.trace.lazy_text import join_text  # noqa: F401
from janus.trace.observe import (binop, compare, compare_chain, each,  # noqa: F401
                                   format_value, inplace, not_value, truth, unary,
                                   unpack)
