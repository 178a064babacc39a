#!/usr/bin/env bash
# Runs the MLP demo in .venv, setting it up first (see setup_env.sh).
# Usage: bash scripts/demo.sh [demo args]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
janus_setup_env
exec "$VENV_PYTHON" examples/demo_mlp.py "$@"
