"""The shadow heap (paper section 4.2.3): how graphs read and write Python objects, at trace
time (``shadow_heap``) and at run time (``heap``, the custom ops' callbacks replay runs).
"""
