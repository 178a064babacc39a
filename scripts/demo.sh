#!/usr/bin/env bash
# Runs the MLP demo (examples/demo_mlp.py) in .venv, setting it up first (see
# setup_env.sh).
# Usage: bash scripts/demo.sh [demo args, e.g. --model cnn]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
janus_setup_env
janus_step "running examples/demo_mlp.py${*:+ $*}: importing TensorFlow first (up to ~20 s" \
  "on a cold machine), then training the model eagerly, under janus" \
  "and as a tf.function (about 20 s more)"
status=0
janus_quiet_run "running the demo" "$VENV_PYTHON" examples/demo_mlp.py "$@" || status=$?
janus_step_done
exit "$status"
