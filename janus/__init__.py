"""janus: speculative graph generation for imperative TensorFlow 2 programs.

Public API only.  See README.md and ``janus.explain`` for what a function did.
"""
from janus.api import function
from janus.config import config
from janus.errors import (ConversionError, JanusError, JanusOpsError, JanusUsageError,
                          StrictModeError)
from janus.explain import explain, stats, to_code
from janus.distributed import DistributedOptimizer, broadcast_variables
from janus.optimizer import Optimizer
from janus.executor import apply_thread_config

apply_thread_config()

__all__ = ['function', 'Optimizer', 'DistributedOptimizer', 'broadcast_variables', 'config', 'explain', 'stats', 'to_code', 'JanusError',
           'ConversionError', 'JanusOpsError', 'JanusUsageError', 'StrictModeError']
