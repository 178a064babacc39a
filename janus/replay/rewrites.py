"""Which of TensorFlow's graph rewrites (grappler) janus's graphs run under.

Needs nothing run before it.  Three grappler passes give other numbers than
eager execution in TF 2.21 on programs janus meets (its own ``tf.function`` has
them too; found by the fuzzer, ``tests/fuzzing/FINDINGS.md``): the remapper
fuses ``tf.maximum(x * c, x)`` into ``LeakyRelu(alpha=c)``, wrong for ``c > 1``,
the arithmetic optimizer breaks a loop over a tensor whose length changed, and
constant folding reassociates arithmetic with constants (``(x * 0.5) * c`` as
``x * (0.5 * c)``), which changes float results in their last bits (a
``float(loss)`` kept in a Python list then differs from eager's).
With ``config.safe_rewrites`` on, janus runs its graphs with the three passes off,
for its own function calls only: the thread's function-call options are
swapped around each run (about a microsecond), so the user's own
``tf.function``s are optimized as before.
"""
from __future__ import annotations
import typing
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
from tensorflow.python.eager import context

from janus.config import config

_safe = {}   # the caller's options' serialized config -> the options janus runs with


def _safe_options(current: context.FunctionCallOptions) -> context.FunctionCallOptions:
    key = (current.executor_type, current.config_proto_serialized)
    options = _safe.get(key)
    if options is None:
        proto = config_pb2.ConfigProto()
        proto.ParseFromString(current.config_proto_serialized)
        rewrites = proto.graph_options.rewrite_options
        rewrites.remapping = rewriter_config_pb2.RewriterConfig.OFF
        rewrites.arithmetic_optimization = rewriter_config_pb2.RewriterConfig.OFF
        rewrites.constant_folding = rewriter_config_pb2.RewriterConfig.OFF
        options = _safe[key] = context.FunctionCallOptions(
            executor_type=current.executor_type, config_proto=proto)
    return options


def call_with_janus_rewrites(fn: typing.Callable, *args: object) -> typing.Any:
    """``fn(*args)`` (a graph call) with the unsound rewrites off, when configured;
    a plain function rather than a context manager: it runs on every replay."""
    if not config.safe_rewrites:
        return fn(*args)
    ctx = context.context()
    current = ctx.function_call_options
    ctx.function_call_options = _safe_options(current)
    try:
        return fn(*args)
    finally:
        ctx.function_call_options = current
