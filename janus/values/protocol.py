"""The one protocol every trace-time stand-in for a Python value implements.

Needs nothing run before it, and imports nothing of janus: the stand-ins' own
modules (``values/scalars.py``, ``values/arrays.py``, ``recursion/structures.py``,
``trace/tracing.py``, ``control/common.py``, ``trace/lazy_text.py``) derive from
``StandIn``, and the runtime's operators (``trace/access.py``, ``trace/observe.py``,
``trace/attributes.py``, ``trace/calls.py``, ``trace/scalar_calls.py``; ``control/``'s tests,
tf.cond merges and tf.while_loop carries) dispatch on it once: ``isinstance(value,
StandIn)``, then the operation's method.

The contract.  Each method models one operation converted code applies to the
stand-in, and either answers it (a value), refuses it (raises ``Unsupported``,
with the stand-in's own reason and message), or gives ``NOT_MODELLED``: the
stand-in leaves that operation to the operator's generic path, which then runs
exactly as it does for any Python value.  The defaults give ``NOT_MODELLED``, so a
stand-in implements only the operations it models.  A write (``trace_set_*``) that
gives anything but ``NOT_MODELLED`` is done.  The methods' names are
janus's (``trace_*``): a stand-in is never the user's object, and a name the user
could read as an attribute of a number or an array (``item``, ``call``) would
shadow the one Python gives.

When two stand-ins meet in one operation (a node indexed by an array), the one
of higher ``RANK`` answers first (a node before an array); within a rank, the
order the operators always asked them in: the key before the container for a
read (``item``), the container before the key for a write (``set_item``) and for
``in`` (``contains``), the target before the value (``in_place``), the left operand
before the right (``binary``, ``identity``), the arguments in order (``builtin``).
A dynamic number answers last (RANK -1).

What a run gives back for a stand-in returned or stored (a graph break's live values
too) is the stand-in's ``materialize``: a description (``Outside``, ``ViewOf``,
``GraphNumber``, ``Formatted``), records of this module that ``graphgen/templating.py``,
in the generation tier, turns into templates; or the stand-in's refusal.

Besides the operations: ``graph_number_type``, ``is_graph_number`` and ``graph_tensor``
ask a value whether it stands for a number the graph gives, and for its tensor (the
one place outside the number's own module that asks); ``library_call`` asks the
arguments of a library function (a list grown in a tensor-dependent loop answers
``tf.stack`` of it).
"""
import dataclasses
import typing


class _NotModelled:
    """The answer of an operation a stand-in leaves to the generic path."""

    def __repr__(self) -> str:
        return 'NOT_MODELLED'


NOT_MODELLED: typing.Any = _NotModelled()


class StandIn:
    """A value janus puts where converted code expects a Python value while a trace
    runs (a dynamic number, an outside NumPy array, a node of a recursive structure,
    a local a tensor-dependent ``if`` left unmerged...)."""

    __slots__ = ()

    # Which stand-in answers first where two meet in one operation (higher first).
    RANK: typing.ClassVar[int] = 0
    # What a message calls it where the value has no class of its own (``type_name``).
    SHOWN_AS: typing.ClassVar[str] = 'value janus computes in the graph'

    def trace_attribute(self, name: str) -> typing.Any:
        """``self.name``."""
        return NOT_MODELLED

    def trace_set_attribute(self, name: str, value: typing.Any) -> typing.Any:
        """``self.name = value``."""
        return NOT_MODELLED

    def trace_item(self, key: typing.Any) -> typing.Any:
        """``self[key]``, ``self`` the container."""
        return NOT_MODELLED

    def trace_key(self, container: typing.Any) -> typing.Any:
        """``container[self]``, ``self`` the key (before the container answers)."""
        return NOT_MODELLED

    def trace_set_item(self, container: typing.Any, key: typing.Any,
                       value: typing.Any) -> typing.Any:
        """``container[key] = value``, ``self`` the container or the key."""
        return NOT_MODELLED

    def trace_class(self) -> typing.Any:
        """``type(self)``, ``self.__class__``: the class of the value it stands for."""
        return NOT_MODELLED

    def trace_call(self, args: tuple, kwargs: dict) -> typing.Any:
        """``self(*args, **kwargs)``, ``self`` the callee."""
        return NOT_MODELLED

    def trace_truth(self) -> typing.Any:
        """``bool(self)`` at a test."""
        return NOT_MODELLED

    def trace_binary(self, left: typing.Any, right: typing.Any, forward: str, reflected: str,
                     symbol: str) -> typing.Any:
        """``left symbol right`` (an arithmetic operator or a comparison), ``self`` one of
        the two; ``forward``/``reflected``: the special methods Python would try."""
        return NOT_MODELLED

    def trace_iterate(self, what: str) -> typing.Any:
        """The items a loop over ``self`` takes (``for x in self``, a comprehension),
        ``what`` naming the iteration where it refuses."""
        return NOT_MODELLED

    def trace_unpack(self, count: int | None,
                     nested: typing.Callable[[tuple], typing.Any]) -> typing.Any:
        """``a, b = self`` (``count`` targets; None: all its items, for ``f(*self)``,
        ``[*self]``, a starred target): its items.  ``nested(items)``: the items, each
        one a nested target (``a, (b, c) = self``) takes unpacked in turn, for a
        stand-in whose items Python could not unpack itself."""
        return NOT_MODELLED

    def materialize(self) -> typing.Any:
        """What a run gives back for it, returned or stored (at a graph break too: a
        segment gives its live values back the same way): a description (``Outside``,
        ``ViewOf``, ``GraphNumber``, ``Formatted``) that the generation tier turns into
        a template (``graphgen/templating.py``), or a refusal.  Asked with its trace
        current (``tracing.current``), the trace's call having returned."""
        return NOT_MODELLED

    # -- control flow (helper P2) --
    # What ``control/`` asks of a stand-in: a test on it, what a tf.cond or a
    # tf.while_loop gives out and carries for it, and how it comes back.

    def trace_tested_in_graph(self) -> bool:
        """Whether the graph decides a test on it (``if``, ``while``, ``not``,
        ``and``/``or``): its truth is a tensor (``trace_test``).  False: Python
        decides it (``trace_truth``)."""
        return False

    def trace_test(self) -> typing.Any:
        """``bool(self)`` as a scalar bool tensor, for a stand-in the graph tests."""
        return NOT_MODELLED

    def trace_not(self) -> typing.Any:
        """``not self`` in a test, for a stand-in the graph tests: the negation, a
        stand-in of its own kind (a dynamic bool, a test value)."""
        return NOT_MODELLED

    def trace_lineage(self) -> frozenset:
        """The relaxed numbers its value was computed from (what a refusal redoes the
        trace with constant); none by default."""
        return frozenset()

    def trace_number_type(self) -> typing.Any:
        """``int``, ``float`` or ``bool``: the Python number it stands for, one whose
        value the graph gives (a dynamic number); it merges and is carried with
        Python numbers of that type."""
        return NOT_MODELLED

    def trace_tensor(self) -> typing.Any:
        """The graph tensor that holds its value: what a tf.cond branch gives out for
        it, and what a branch's writes export."""
        return NOT_MODELLED

    def trace_carry(self, value: typing.Any, where: str) -> typing.Any:
        """What the tf.while_loop at ``where`` carries for ``value``, the value after an
        iteration of a loop variable that started as ``self`` (``value`` is ``self``
        as the loop starts): a tensor or TensorArray, or a refusal; NOT_MODELLED: the
        loop does not carry ``value`` (the loop refuses it; for ``self``: the
        loop keeps it a Python value)."""
        return NOT_MODELLED

    def trace_uncarry(self, carried: typing.Any, where: str, lineage: frozenset) -> typing.Any:
        """The loop variable (or cond output) of ``self``'s kind back from ``carried``,
        what the loop carried for it (``trace_carry``) or a tf.cond gave out for its
        ``trace_tensor``; ``lineage``: relaxed numbers it also depends on (how often
        the loop ran)."""
        return NOT_MODELLED

    # -- numbers (helper P1) --
    def trace_unary(self, op: str) -> typing.Any:
        """``-self``, ``+self``, ``~self`` (``op``: ``'USub'``, ``'UAdd'``, ``'Invert'``)
        and ``not self`` where no test takes it (``'Not'``; NOT_MODELLED there: its
        truth decides, ``trace_truth``)."""
        return NOT_MODELLED

    def trace_identity(self, other: typing.Any) -> typing.Any:
        """``self is other`` (``self`` on either side; ``is not`` is its negation): a
        bool, a bool tensor where the run decides, or a refusal."""
        return NOT_MODELLED

    def trace_operand(self) -> typing.Any:
        """``self`` as the other operand of an operator another stand-in computes (a
        dynamic number's ``n + self``): ``NOT_MODELLED`` takes it as it is; a refusal
        refuses the operator (text formatted after the run, as the generic path does)."""
        return NOT_MODELLED

    def trace_builtin(self, callee: typing.Callable, args: tuple, kwargs: dict) -> typing.Any:
        """``callee(*args, **kwargs)``, ``self`` one of the positional ``args``: a builtin
        or ``math`` function it answers for itself (``abs(self)``, ``max(self, 0)``,
        ``isinstance(self, int)``, ``type(self)``)."""
        return NOT_MODELLED

    # -- recursion, arrays and the rest (helper P3) --
    def trace_attribute_is_none(self, name: str) -> typing.Any:
        """``self.name is None`` (``is not``: its negation), answered without reading the
        attribute: a bool or a dynamic bool."""
        return NOT_MODELLED

    def trace_contains(self, container: typing.Any, key: typing.Any) -> typing.Any:
        """``key in container``, ``self`` the container or the key."""
        return NOT_MODELLED

    def trace_in_place(self, target: typing.Any, value: typing.Any, symbol: str) -> typing.Any:
        """``target symbol= value`` (``+=``...), ``self`` the target or the value."""
        return NOT_MODELLED

    def trace_isinstance(self, classes: typing.Any) -> typing.Any:
        """``isinstance(self, classes)``: a bool, or a bool tensor where the run decides."""
        return NOT_MODELLED

    # -- the last checks (helper P4) --
    def trace_library_call(self, callee: typing.Callable, args: tuple,
                           kwargs: dict) -> typing.Any:
        """``callee(*args, **kwargs)``, ``callee`` a library function (TF's), ``self`` one
        of the arguments (positional or keyword): its result, or a refusal (a list grown
        in a tensor-dependent loop: ``tf.stack`` of its TensorArray)."""
        return NOT_MODELLED


# -- what a run gives back for a stand-in (``StandIn.materialize``) --
# Descriptions, not templates: templates (``replay/templates.py``) belong to a tier
# above the stand-ins'; ``graphgen/templating.py`` turns each kind into one.

@dataclasses.dataclass(frozen=True, eq=False)
class Outside:
    """The very outside object the stand-in stands for (an argument's NumPy array),
    read again after each run from where the trace found it (its provenance)."""


@dataclasses.dataclass(frozen=True, eq=False)
class ViewOf:
    """The same index ``key`` of what the run gives back for ``base`` (a view made by
    basic indexing): one view per run, however often it is returned or stored."""
    base: typing.Any
    key: typing.Any


@dataclasses.dataclass(frozen=True, eq=False)
class GraphNumber:
    """A Python number of type ``kind`` (``int``, ``float``, ``bool``) whose value the
    run computes in ``tensor`` (a graph output)."""
    tensor: typing.Any
    kind: type


@dataclasses.dataclass(frozen=True, eq=False)
class Formatted:
    """Text formatted after each run (``text.render``) from what the run gives back
    for each of ``values``, in order."""
    text: typing.Any
    values: list


DESCRIPTIONS = (Outside, ViewOf, GraphNumber, Formatted)


# The protocol's own names: no stand-in's value has them as attributes (``access.attr``).
NAMES = frozenset(name for name in vars(StandIn) if not name.startswith('__'))

Operation = typing.Callable[[], typing.Any]


def _first_answer(asked: list[tuple[typing.Any, Operation]]) -> typing.Any:
    """The first answer of the operations ``asked`` of stand-ins (``(value, its
    operation)``, values that are no stand-in skipped): higher ``RANK`` first, in the
    order given within a rank; ``NOT_MODELLED`` if none answers."""
    stand_ins = [(value, operation) for value, operation in asked if isinstance(value, StandIn)]
    for _, operation in sorted(stand_ins, key=lambda pair: -pair[0].RANK):   # stable
        answer = operation()
        if answer is not NOT_MODELLED:
            return answer
    return NOT_MODELLED


def item(container: typing.Any, key: typing.Any) -> typing.Any:
    """``container[key]`` where the container or the key may be a stand-in: the key
    first within a rank."""
    return _first_answer([(key, lambda: key.trace_key(container)),
                          (container, lambda: container.trace_item(key))])


def set_item(container: typing.Any, key: typing.Any, value: typing.Any) -> typing.Any:
    """``container[key] = value`` where the container or the key may be a stand-in:
    the container first within a rank."""
    return _first_answer([(container, lambda: container.trace_set_item(container, key, value)),
                          (key, lambda: key.trace_set_item(container, key, value))])


def identity(left: typing.Any, right: typing.Any) -> typing.Any:
    """``left is right`` where either side may be a stand-in: the left first within a
    rank."""
    return _first_answer([(left, lambda: left.trace_identity(right)),
                          (right, lambda: right.trace_identity(left))])


def contains(container: typing.Any, key: typing.Any) -> typing.Any:
    """``key in container`` where either may be a stand-in: the container first within
    a rank."""
    return _first_answer([(container, lambda: container.trace_contains(container, key)),
                          (key, lambda: key.trace_contains(container, key))])


def in_place(target: typing.Any, value: typing.Any, symbol: str) -> typing.Any:
    """``target symbol= value`` where either may be a stand-in: the target first within
    a rank."""
    return _first_answer([(target, lambda: target.trace_in_place(target, value, symbol)),
                          (value, lambda: value.trace_in_place(target, value, symbol))])


def binary(left: typing.Any, right: typing.Any, forward: str, reflected: str,
           symbol: str) -> typing.Any:
    """``left symbol right`` where either side may be a stand-in: the left first
    within a rank."""
    def asking(value: typing.Any) -> Operation:
        return lambda: value.trace_binary(left, right, forward, reflected, symbol)
    return _first_answer([(left, asking(left)), (right, asking(right))])


# -- numbers (helper P1) --

def builtin(callee: typing.Callable, args: tuple, kwargs: dict) -> typing.Any:
    """``callee(*args, **kwargs)`` where positional arguments may be stand-ins: in
    their order within a rank."""
    def asking(value: typing.Any) -> Operation:
        return lambda: value.trace_builtin(callee, args, kwargs)
    return _first_answer([(value, asking(value)) for value in args])


# -- the last checks (helper P4) --
# "Is this a number the graph gives, and which tensor holds it": asked here, of the
# stand-in (``trace_number_type``, ``trace_tensor``), by every module outside the
# number's own (``values/scalars.py``): a dynamic number answers.

def graph_number_type(value: typing.Any) -> typing.Any:
    """``int``/``float``/``bool`` where ``value`` stands for a Python number whose value
    the graph gives (``trace_number_type``: a dynamic number), else None."""
    if not isinstance(value, StandIn):
        return None
    kind = value.trace_number_type()
    return None if kind is NOT_MODELLED else kind


def is_graph_number(value: typing.Any) -> bool:
    """A stand-in of a number whose value the graph gives (a dynamic number)."""
    return graph_number_type(value) is not None


def library_call(callee: typing.Callable, args: tuple, kwargs: dict) -> typing.Any:
    """``callee(*args, **kwargs)``, a library function, where arguments (positional, then
    keyword) may be stand-ins: in their order within a rank."""
    def asking(value: typing.Any) -> Operation:
        return lambda: value.trace_library_call(callee, args, kwargs)
    return _first_answer([(value, asking(value))
                          for value in list(args) + list(kwargs.values())])


def type_name(value: typing.Any) -> str:
    """The name of ``value``'s type as the user's code sees it, for messages: a
    stand-in's ``trace_class`` (a dynamic number's ``int``, text's ``str``), else what it
    is shown as (``SHOWN_AS``: a node of the structure...), never janus's class."""
    if not isinstance(value, StandIn):
        return type(value).__name__
    kind = value.trace_class()
    return value.SHOWN_AS if kind is NOT_MODELLED else kind.__name__


def graph_tensor(value: typing.Any) -> typing.Any:
    """The tensor that holds a stand-in's value in the graph (``trace_tensor``: a
    dynamic number's), else None."""
    if not isinstance(value, StandIn):
        return None
    tensor = value.trace_tensor()
    return None if tensor is NOT_MODELLED else tensor
