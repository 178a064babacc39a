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


class CannotFold(Exception):
    """A jump sits where folding cannot move the code after it (a loop, a with)."""


def fold_jumps(block, jumps_in, lower_jump):
    """Rewrites ``block`` so no statement of it jumps (return/break/continue).

    ``jumps_in(node)`` says whether ``node`` contains such a jump;
    ``lower_jump(stmt)`` gives the statements that replace a jump statement,
    or None if ``stmt`` is not one.  When one branch of an ``if`` always
    jumps, the code after the ``if`` moves into the other branch.  Returns
    (statements, whether every path through them jumps); raises CannotFold.
    """
    out = []
    for index, stmt in enumerate(block):
        lowered = lower_jump(stmt)
        if lowered is not None:
            return out + lowered, True
        if isinstance(stmt, gast.If) and jumps_in(stmt):
            rest = block[index + 1:]
            body, body_jumps = fold_jumps(stmt.body, jumps_in, lower_jump)
            orelse, else_jumps = fold_jumps(stmt.orelse, jumps_in, lower_jump)
            if body_jumps and not else_jumps:
                orelse, else_jumps = fold_jumps(stmt.orelse + rest, jumps_in, lower_jump)
            elif else_jumps and not body_jumps:
                body, body_jumps = fold_jumps(stmt.body + rest, jumps_in, lower_jump)
            elif not (body_jumps and else_jumps):
                raise CannotFold()
            stmt.body, stmt.orelse = body or [gast.Pass()], orelse
            out.append(stmt)
            return out, body_jumps and else_jumps
        if jumps_in(stmt):
            raise CannotFold()
        out.append(stmt)
    return out, False
