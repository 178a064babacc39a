#!/usr/bin/env bash
# Runs the paper's evaluation (benchmarks/paper_table.py) in .venv, setting it
# up first (see setup_env.sh) plus matplotlib for the plot.
# Usage: bash scripts/benchmark.sh [paper_table.py args, e.g. --update-readme]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
janus_setup_env
if ! "$VENV_PYTHON" -c 'import matplotlib' 2>/dev/null; then
  echo "setup: installing matplotlib (benchmark plot)" >&2
  "$VENV_PYTHON" -m pip install -q --disable-pip-version-check matplotlib
fi
exec "$VENV_PYTHON" benchmarks/paper_table.py "$@"
