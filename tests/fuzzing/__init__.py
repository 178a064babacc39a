"""Random-program differential fuzzer for janus.

``programs.generate(seed)`` writes a small imperative TF2 program (source
text plus a call sequence); ``runner.run_program`` execs it twice, into fresh
namespaces, once with ``jit`` = identity (eager) and once with ``jit`` =
``janus.function``, and compares every call; ``minimize.minimize`` shrinks a
diverging program.  CLI: ``python -m tests.fuzzing --seed S --programs N``.
"""
