"""Pass: attribute and subscript reads and writes go through the runtime.

``obj.a`` → ``__jr.attr(obj, 'a')`` and ``obj[k]`` → ``__jr.item(obj, __jr.KEY[k])``
so values read from outside the call are guarded (tensors re-read each run);
``obj.a = v`` → ``__jr.setattr_(obj, 'a', v)`` and ``obj[k] = v`` →
``__jr.setitem(...)`` so writes to objects from outside the call go to the
shadow heap (written back after a successful run) while writes to objects the
call made itself stay plain Python.
"""
import gast

from janus.graphgen.converters import common


def _key(node):
    """``__jr.KEY[<slice>]``: evaluates any slice syntax to a key object."""
    return gast.Subscript(common.runtime_attr('KEY'), node.slice, gast.Load())


def _is_simple_path(node):
    """A name or ``a.b.c``: reading it twice reads the same (guarded) thing."""
    while isinstance(node, gast.Attribute):
        node = node.value
    return isinstance(node, gast.Name)


def _inplace(node, read):
    """``read op= value`` as Python evaluates it: in place where the type does it
    (a list's ``+=`` extends the very list other names share)."""
    return common.runtime_call('inplace', [common.const(type(node.op).__name__), read,
                                           node.value], like=node)


class RouteAttributesAndItems(common.Pass):

    def visit_Attribute(self, node):
        node = self.generic_visit(node)
        if common.is_runtime_ref(node) or not isinstance(node.ctx, gast.Load):
            return node
        return common.runtime_call('attr', [node.value, common.const(node.attr)], like=node)

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        if not isinstance(node.ctx, gast.Load) or common.is_runtime_ref(node.value):
            return node
        return common.runtime_call('item', [node.value, _key(node)], like=node)

    def visit_Assign(self, node):
        if any(isinstance(t, gast.Attribute) for t in node.targets):
            return self._assign_attribute(node)
        if any(isinstance(n, gast.Attribute) and isinstance(n.ctx, gast.Store)
               for t in node.targets for n in gast.walk(t)):
            self.unsupported(node, 'janus converts attribute writes only as `obj.name = value`')
        if not any(isinstance(t, gast.Subscript) for t in node.targets):
            return self.generic_visit(node)
        if len(node.targets) != 1 or not isinstance(node.targets[0], gast.Subscript):
            self.unsupported(node, 'janus converts item assignment only as `x[k] = value`')
        target = node.targets[0]
        node = self.generic_visit(node)
        call = common.runtime_call('setitem', [target.value, _key(target), node.value], like=node)
        return gast.copy_location(gast.Expr(call), node)

    def _assign_attribute(self, node):
        if len(node.targets) != 1:
            self.unsupported(node, 'janus converts attribute writes only as `obj.name = value`')
        target = node.targets[0]
        node = self.generic_visit(node)
        call = common.runtime_call('setattr_', [target.value, common.const(target.attr),
                                                node.value], like=node)
        return gast.copy_location(gast.Expr(call), node)

    def visit_AugAssign(self, node):
        target = node.target
        if isinstance(target, gast.Attribute):
            if not _is_simple_path(target.value):
                self.unsupported(node, 'janus converts `obj.a op= v` only when obj is a name or '
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
            self.unsupported(node, 'janus converts `x[k] op= v` only for a plain name x and key k')
        read = gast.Subscript(target.value, target.slice, gast.Load())
        value = _inplace(node, read)
        assign = gast.Assign([gast.Subscript(target.value, target.slice, gast.Store())], value, None)
        gast.copy_location(assign, node)
        for sub in gast.walk(assign):
            gast.copy_location(sub, node)
        return self.visit_Assign(assign)
