"""A small gast toolkit with no TensorFlow imports: parse, annotate, analyse, emit."""
