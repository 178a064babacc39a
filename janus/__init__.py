"""janus: speculative graph generation for imperative TensorFlow 2 programs.

Public API only.  See README.md and ``janus.explain`` for what a function did.
"""
from importlib import metadata as _metadata

from janus.config import config
from janus.replay.executor import apply_thread_config

apply_thread_config()   # before anything below can start TF's runtime
from janus.api import function  # noqa: E402
from janus.errors import (ConversionError, JanusError, JanusOpsError, JanusUsageError,  # noqa: E402
                          StrictModeError)
from janus.explain import explain, stats, to_code  # noqa: E402
from janus.distributed import DistributedOptimizer, broadcast_variables  # noqa: E402
from janus.optimizer import Optimizer  # noqa: E402

try:
    __version__ = _metadata.version('janus-tf')   # setup.py's name
except _metadata.PackageNotFoundError:   # run from a source tree that was never installed
    __version__ = '0+unknown'

__all__ = ['function', 'Optimizer', 'DistributedOptimizer', 'broadcast_variables', 'config', 'explain', 'stats', 'to_code', 'JanusError',
           'ConversionError', 'JanusOpsError', 'JanusUsageError', 'StrictModeError']
