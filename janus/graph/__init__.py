"""What the ops of a TF graph do: janus's own ops (``Janus>Assert``, ``Janus>Invoke``), their
effects outside the graph, which may fail at run time, and what a graph being traced has done.

The lowest runtime package: it imports only janus's foundation modules (and the
``recursion`` package's function library, to read a recursive call's effects).
"""
