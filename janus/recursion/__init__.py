"""Recursion in graphs: recursive calls over Python structures as one graph function that
calls itself (``Janus>Invoke``), the structures encoded as graph inputs, and levels run at once.
"""
