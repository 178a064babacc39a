#!/usr/bin/env bash
# Runs the paper's evaluation (benchmarks/paper_table.py) in .venv, setting it
# up first (see setup_env.sh) plus matplotlib for the plot.
# Usage: bash scripts/benchmark.sh [paper_table.py args, e.g. --update-readme]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
janus_setup_env
if ! "$VENV_PYTHON" -c 'import matplotlib' 2>/dev/null; then
  janus_step "installing matplotlib into $VENV_DIR (for the benchmark's plot)"
  janus_quiet_run "installing matplotlib" \
    "$VENV_PYTHON" -m pip install -q --disable-pip-version-check matplotlib
  janus_step_done
fi
janus_step "running benchmarks/paper_table.py${*:+ $*}: every example model in eager, janus" \
  "and symbolic mode, one process per model, then the ablation (about 5 minutes;" \
  "a line per model as it starts)"
status=0
"$VENV_PYTHON" benchmarks/paper_table.py "$@" || status=$?
janus_step_done
exit "$status"
