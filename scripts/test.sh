#!/usr/bin/env bash
# Runs the test suite in .venv, setting it up first (see setup_env.sh).
# Usage: bash scripts/test.sh [pytest args]   (default: the whole tests/ dir)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
janus_setup_env
# The horovod extra: its tests run a 2-process job (tests/test_horovod.py).
VENV_PYTHON="$VENV_PYTHON" bash scripts/install_horovod.sh
if [ "$#" -eq 0 ]; then set -- tests; fi
exec "$VENV_PYTHON" -m pytest -q "$@"
