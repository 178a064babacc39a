"""Holds the compiled Janus op library ``_janus_ops.so`` (see setup.py).

A package only so that the library and ``_build_info.txt`` ship as package
data; load it through ``janus.graph.ops``, never directly.
"""
