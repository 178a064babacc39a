"""Helpers shared by the passes: building runtime calls and reporting errors."""
import gast

from janus.errors import ConversionError

RUNTIME = '__jr'     # the janus.runtime.operators module, a closure of converted code
NAMESPACE = '__ns'   # the converted function's FunctionNamespace, also a closure
RESERVED = (RUNTIME, NAMESPACE)


def load(name):
    return gast.Name(name, gast.Load(), None, None)


def runtime_attr(name):
    return gast.Attribute(load(RUNTIME), name, gast.Load())


def runtime_call(name, args, keywords=(), like=None):
    call = gast.Call(runtime_attr(name), list(args), list(keywords))
    if like is not None:
        gast.copy_location(call, like)
    return call


def is_runtime_ref(node):
    return (isinstance(node, gast.Attribute) and isinstance(node.value, gast.Name)
            and node.value.id == RUNTIME)


def is_runtime_call(node):
    return isinstance(node, gast.Call) and is_runtime_ref(node.func)


def const(value):
    return gast.Constant(value, None)


class Pass(gast.NodeTransformer):
    """Base pass: knows the user's file so it can name the offending line."""

    def __init__(self, ctx):
        self.ctx = ctx

    def unsupported(self, node, what):
        lineno = getattr(node, 'lineno', None)
        raise ConversionError(what, self.ctx.filename, lineno, self.ctx.line(lineno))
