"""Private-name mangling for function source compiled outside its class.

Nothing must run before this module.  Python rewrites ``self.__x`` in a class
body to ``self._Class__x`` when it compiles the class.  janus recompiles a
method's source on its own (the converter's output; ``recompile``'s check
of a parse), outside the class body, so without this pass
``self.__x`` would name another attribute and raise ``AttributeError`` where
eager code does not.  ``mangle`` applies the compiler's rule to a parsed
function, with the class taken from the code object's qualified name.
"""
from __future__ import annotations
import types
import typing

import gast


def owner_class(fn: types.FunctionType) -> str | None:
    """The name of the class whose body ``fn`` was compiled in, or None.

    ``co_qualname`` is fixed at compile time (``functools.wraps`` does not
    change it): ``A.m`` and ``A.m.<locals>.helper`` were compiled inside
    ``A``; ``f.<locals>.g`` inside no class.
    """
    code = getattr(fn, '__code__', None)
    qualname = getattr(code, 'co_qualname', None) or getattr(fn, '__qualname__', '')
    parts = qualname.split('.')[:-1]   # type: ignore[union-attr]
    for index in range(len(parts) - 1, -1, -1):
        name = parts[index]
        if name == '<locals>':
            continue
        if index + 1 < len(parts) and parts[index + 1] == '<locals>':
            continue   # a function: its locals, not a class body
        return name
    return None


def mangled(class_name: str | None, name: str) -> str:
    """The compiler's rule (``_Py_Mangle``): ``__x`` in class ``_C`` is ``_C__x``; janus's
    own names in the code it generates (``__jr``, ``__janus_segments``) stay as they are,
    so a tree mangled once (a graph-break segment's, converted again) keeps them."""
    if not class_name or not name.startswith('__') or name.endswith('__') or '.' in name \
            or name == '__jr' or name.startswith('__janus'):
        return name
    stripped = class_name.lstrip('_')
    if not stripped:
        return name
    return '_%s%s' % (stripped, name)


def mangle(tree: gast.AST, class_name: str | None) -> gast.AST:
    """Mangles private names in ``tree`` (a gast function) as its class body would."""
    if not class_name:
        return tree
    keep = {node.name for node in gast.walk(tree) if node is not tree
            and isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef))}
    return _Mangler(class_name, keep).visit(tree)


class _Mangler(gast.NodeTransformer):
    """Renames names, attributes, parameters and global/nonlocal declarations.

    Keyword names in calls are not mangled (nor does Python mangle them).
    Names of nested ``def``/``class`` statements are kept unmangled, with
    every reference to them, so the objects keep their ``__name__``.
    """

    def __init__(self, class_name: str | None, keep: typing.AbstractSet[str]) -> None:
        self.class_name = class_name
        self.keep = keep

    def _name(self, name: str) -> str:
        return name if name in self.keep else mangled(self.class_name, name)

    def visit_Name(self, node: gast.Name) -> gast.AST:
        node.id = self._name(node.id)
        return self.generic_visit(node)

    def visit_Attribute(self, node: gast.Attribute) -> gast.AST:
        node.attr = mangled(self.class_name, node.attr)
        return self.generic_visit(node)

    def visit_Global(self, node: gast.AST) -> gast.AST:
        node.names = [self._name(n) for n in node.names]
        return node

    visit_Nonlocal = visit_Global

    def visit_alias(self, node: gast.alias) -> gast.alias:
        if node.asname:
            node.asname = self._name(node.asname)
        return node

    def visit_ClassDef(self, node: gast.ClassDef) -> gast.ClassDef:
        # Bases and decorators belong to the enclosing class; the body to this one.
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        inner = _Mangler(node.name, self.keep)
        node.body = [inner.visit(statement) for statement in node.body]
        return node
