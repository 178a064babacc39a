"""One AST pass per module, run in the order ``generator.PASSES`` lists."""
