"""What a trace may decide at a branch or loop: an assumed outcome, or DYNAMIC.

Needs nothing run before it.  Shared by the plan (``graphgen/plan.py``, which
decides) and the runtime (``control/``, which acts), so neither
imports the other for it.
"""
from __future__ import annotations


class _Dynamic:
    """Build real control flow (``tf.cond`` / ``tf.while_loop``) here."""

    def __repr__(self) -> str:
        return 'DYNAMIC'


DYNAMIC = _Dynamic()
