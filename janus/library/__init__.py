"""Library code inside traces: which callees a graph may call (``whitelist``), Keras layers
(``layers``, ``library_config``), state library code changes, and Horovod (``distributed``).
"""
