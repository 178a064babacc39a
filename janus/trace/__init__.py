"""Trace time: what one trace knows (``trace_context``), the ``__jr`` operators converted code
calls (``operators``), and how they read, call and observe Python values.

Needs the converter's generated code (``graphgen``) to call it, inside a trace
(``tracing.enter_trace``).
"""
