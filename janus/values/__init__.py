"""Stand-ins for Python values while a trace runs: dynamic scalars, outside NumPy arrays and
number lists fed as graph inputs, static values and shapes as converted code sees them.
"""
