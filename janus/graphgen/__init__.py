"""The speculative graph generator: AST passes (converters/), the pipeline
that runs them (generator.py), and the tracer that turns the converted
function into a guarded ConcreteFunction (tracer.py)."""
