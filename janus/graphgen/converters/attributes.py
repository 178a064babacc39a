"""Pass: attribute and subscript reads and writes go through the runtime.

``obj.a`` → ``__jr.attr(obj, 'a')`` and ``obj[k]`` → ``__jr.item(obj, __jr.KEY[k])``
so values read from outside the call are guarded (tensors re-read each run);
``obj.a = v`` → ``__jr.setattr_(obj, 'a', v)`` and ``obj[k] = v`` →
``__jr.setitem(...)`` so writes to objects from outside the call go to the
shadow heap (written back after a successful run) while writes to objects the
call made itself stay plain Python.

An assignment with several targets or an unpacking target that stores into
attributes or items (``self.x, self.y = self.y, self.x``, ``a = b.c = v``)
becomes what Python does: the value (unpacked into temporaries), then each
target assigned in turn, left to right, its object evaluated when it is
assigned.  Any other attribute or item store (a loop, ``with`` or
comprehension target) is refused: it would run as plain Python at trace time.
"""
from __future__ import annotations

import gast

from janus.reasons import Reason
from janus.graphgen.converters import common


def _key(node: gast.Subscript) -> gast.Subscript:
    """``__jr.KEY[<slice>]``: evaluates any slice syntax to a key object."""
    return gast.Subscript(common.runtime_attr('KEY'), node.slice, gast.Load())


def _is_simple_path(node: gast.AST) -> bool:
    """A name or ``a.b.c``: reading it twice reads the same (guarded) thing."""
    while isinstance(node, gast.Attribute):
        node = node.value
    return isinstance(node, gast.Name)


def _inplace(node: gast.AugAssign, read: gast.expr) -> gast.Call:
    """``read op= value`` as Python evaluates it: in place where the type does it
    (a list's ``+=`` extends the very list other names share)."""
    return common.runtime_call('inplace', [common.const(type(node.op).__name__), read,
                                           node.value], like=node)


def _stores_into_objects(target: gast.AST) -> bool:
    """Whether an assignment target stores into an attribute or an item."""
    return any(isinstance(n, (gast.Attribute, gast.Subscript)) and isinstance(n.ctx, gast.Store)
               for n in gast.walk(target))


class RouteAttributesAndItems(common.Pass):

    def visit_Assign(self, node: gast.Assign) -> gast.AST | list[gast.stmt]:
        if (len(node.targets) != 1 or isinstance(node.targets[0], (gast.Tuple, gast.List))) \
                and any(_stores_into_objects(t) for t in node.targets):
            return self._assign_in_turn(node)
        target = node.targets[0]
        if isinstance(target, gast.Attribute):
            node.value = self.visit(node.value)
            call = common.runtime_call('setattr_', [self.visit(target.value),
                                                    common.const(target.attr), node.value],
                                       like=node)
            return gast.copy_location(gast.Expr(call), node)
        if not isinstance(target, gast.Subscript):
            return self.generic_visit(node)
        node.value = self.visit(node.value)
        call = common.runtime_call('setitem', [self.visit(target.value),
                                               self.visit(_key(target)), node.value], like=node)
        return gast.copy_location(gast.Expr(call), node)

    def _assign_in_turn(self, node: gast.Assign) -> list[gast.stmt]:
        """``a = b.c = v`` / ``self.x, self.y = v``: the value (unpacked into
        temporaries), then each target in turn, as Python assigns them."""
        stores: list[tuple[gast.expr, str]] = []
        starred: list[str] = []
        if len(node.targets) == 1:   # one unpacking target: every leaf becomes a temporary
            first = gast.Assign([self._temporaries(node.targets[0], stores, starred)],
                                node.value, None)
        else:
            held = self._temporary()
            first = gast.Assign([gast.Name(held, gast.Store(), None, None)], node.value, None)
            stores = [(target, held) for target in node.targets]
        # The list a starred target collects is the call's own (``literals`` registers
        # those of names; these temporaries are made here, after it ran).
        made = [gast.Assign([gast.Name(held, gast.Store(), None, None)],
                            common.runtime_call('made', [common.load(held)]), None)
                for held in starred]
        statements = [first] + made + [gast.Assign([target], common.load(held), None)
                                       for target, held in stores]
        out = []
        for statement in statements:
            for sub in gast.walk(statement):
                gast.copy_location(sub, node)
            visited = self.visit_Assign(statement)
            out.extend(visited if isinstance(visited, list) else [visited])
        return out

    def _temporaries(self, target: gast.expr, stores: list[tuple[gast.expr, str]],
                     starred: list[str]) -> gast.expr:
        """``target`` with each leaf replaced by a fresh name; ``stores`` gets
        (leaf, name) in the order Python assigns the leaves, ``starred`` the names
        that collect a starred leaf's list."""
        if isinstance(target, (gast.Tuple, gast.List)):
            return type(target)([self._temporaries(t, stores, starred) for t in target.elts],
                                gast.Store())
        if isinstance(target, gast.Starred):
            held = self._temporaries(target.value, stores, starred)
            if isinstance(held, gast.Name):   # ``*(b, c)`` unpacks the list at once
                starred.append(held.id)
            return gast.Starred(held, gast.Store())
        held = self._temporary()
        stores.append((target, held))
        return gast.Name(held, gast.Store(), None, None)

    def _temporary(self) -> str:
        self.count = getattr(self, 'count', 0) + 1
        return '__janus_target_%d' % self.count

    def visit_AnnAssign(self, node: gast.AnnAssign) -> gast.AST | list[gast.stmt]:
        if not isinstance(node.target, (gast.Attribute, gast.Subscript)):
            return self.generic_visit(node)
        if node.value is None:
            self.unsupported(node, Reason.COMPOUND_WRITE,
                             'janus converts attribute writes only as `obj.name = value`')
        assign = gast.copy_location(gast.Assign([node.target], node.value, None), node)
        return self.visit_Assign(assign)

    def visit_Attribute(self, node: gast.Attribute) -> gast.expr:
        if isinstance(node.ctx, gast.Store):   # a store no visit_Assign rewrote
            self.unsupported(node, Reason.COMPOUND_WRITE,
                             'janus converts attribute writes only as `obj.name = value`')
        node = self.generic_visit(node)
        if common.is_runtime_ref(node) or not isinstance(node.ctx, gast.Load):
            return node
        return common.runtime_call('attr', [node.value, common.const(node.attr)], like=node)

    def visit_Subscript(self, node: gast.Subscript) -> gast.expr:
        if isinstance(node.ctx, gast.Store):
            self.unsupported(node, Reason.COMPOUND_WRITE,
                             'janus converts item assignment only as `x[k] = value`')
        node = self.generic_visit(node)
        if not isinstance(node.ctx, gast.Load) or common.is_runtime_ref(node.value):
            return node
        return common.runtime_call('item', [node.value, _key(node)], like=node)

    def visit_AugAssign(self, node: gast.AugAssign) -> gast.AST | list[gast.stmt]:
        target = node.target
        if isinstance(target, gast.Attribute):
            if not _is_simple_path(target.value):
                self.unsupported(node, Reason.COMPOUND_WRITE,
                                 'janus converts `obj.a op= v` only when obj is a name or '
                                 'a chain of attributes of a name')
            read = gast.Attribute(target.value, target.attr, gast.Load())
            assign = gast.Assign([gast.Attribute(target.value, target.attr, gast.Store())],
                                 _inplace(node, read), None)
            for sub in gast.walk(assign):
                gast.copy_location(sub, node)
            return self.visit_Assign(assign)
        if not isinstance(target, gast.Subscript):
            return self.generic_visit(node)
        simple = (gast.Name, gast.Constant)
        if not (isinstance(target.value, gast.Name) and isinstance(target.slice, simple)):
            self.unsupported(node, Reason.COMPOUND_WRITE,
                             'janus converts `x[k] op= v` only for a plain name x and key k')
        read = gast.Subscript(target.value, target.slice, gast.Load())
        value = _inplace(node, read)
        assign = gast.Assign([gast.Subscript(target.value, target.slice, gast.Store())], value, None)
        gast.copy_location(assign, node)
        for sub in gast.walk(assign):
            gast.copy_location(sub, node)
        return self.visit_Assign(assign)
