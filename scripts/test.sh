#!/usr/bin/env bash
# Runs the test suite in .venv, setting it up first (see setup_env.sh).
# Usage: bash scripts/test.sh [--long] [pytest args]
#   no arguments: the fast tier, every test but those marked long (minutes);
#   --long alone: the long tier, the tests marked long (the fuzz slice, the Horovod job);
#   pytest arguments: what they select, whatever the tier.
#
# Horovod (scripts/install_horovod.sh: built once, about 4 minutes) is
# installed only when the selected tests need it: the long tier, a directory
# holding tests/test_horovod.py, or tests/test_horovod.py itself.
# `bash scripts/test.sh tests/test_usage.py` never builds it.  .ci/run runs
# both tiers.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
janus_setup_env

# Does this pytest command line select tests/test_horovod.py?
needs_horovod() {
  local arg path any_path=0
  for arg in "$@"; do
    case "$arg" in -*) continue ;; esac
    path="${arg%%::*}"
    [ -e "$path" ] || continue      # an option's value (-k EXPR, -m MARK), not a path
    any_path=1
    if [ -d "$path" ]; then
      [ -e "$path/test_horovod.py" ] || [ -e "$path/tests/test_horovod.py" ] && return 0
    elif [ "$(basename "$path")" = test_horovod.py ]; then
      return 0
    fi
  done
  [ "$any_path" -eq 0 ]   # no path: pytest collects all of tests/
}

tier=fast
if [ "${1:-}" = "--long" ]; then tier=long; shift; fi
install=0
if [ "$#" -gt 0 ]; then
  if needs_horovod "$@"; then install=1; fi
elif [ "$tier" = long ]; then
  set -- -m long tests
  install=1
else
  set -- -m "not long" tests    # the fast tier: no Horovod test in it
fi

if [ "$install" -eq 1 ]; then
  # The horovod extra: tests/test_horovod.py runs a 2-process job.
  VENV_PYTHON="$VENV_PYTHON" bash scripts/install_horovod.sh
else
  echo "[janus] not installing Horovod: the selected tests do not include tests/test_horovod.py" >&2
fi
janus_step "running pytest $* (a dot per passed test)"
status=0
"$VENV_PYTHON" -m pytest -q "$@" || status=$?
janus_step_done
exit "$status"
