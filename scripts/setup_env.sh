# Sourced by the other scripts: makes .venv ready to run janus (janus_setup_env)
# and defines the progress lines every long step prints (janus_step).
#
# Idempotent: creates .venv if missing, installs the pinned dependencies once
# (a stamp in .venv records which), and (re)installs janus editably only when
# the op sources, build files or package layout changed since the last time.
# The install uses --no-build-isolation so janus_ops/_janus_ops.so is compiled
# against the TensorFlow in .venv, the one it will be loaded into.
# Exports VENV_PYTHON. Set PYTHON to pick the interpreter that creates .venv.

JANUS_REQUIREMENTS=(tensorflow-cpu==2.21.0 gast astunparse numpy bytecode==0.16.1 pytest
                    'setuptools>=64' wheel gymnasium   # gymnasium: CartPole for examples/a3c.py
                    ruff==0.17.6                       # the linter .ci/run runs: pyproject.toml [tool.ruff]
                    mypy==1.20.2)                      # the type checker .ci/run runs: [tool.mypy]
VENV_DIR="${VENV_DIR:-.venv}"
VENV_PYTHON="$VENV_DIR/bin/python"
export VENV_PYTHON

# -- progress: every step that can take long says what it does, why, and how long it took

# janus_step "what (why; about how long)": prints it and starts the step's clock.
janus_step() {
  JANUS_STEP_STARTED=$(date +%s)
  echo "[janus] $*" >&2
}

# janus_step_done: prints how long the current step took.
janus_step_done() {
  echo "[janus]   done in $(( $(date +%s) - ${JANUS_STEP_STARTED:-$(date +%s)} )) s" >&2
}

# janus_quiet_run LABEL CMD...: runs a command that prints little or nothing for
# a long time, with a heartbeat line on stderr every $JANUS_HEARTBEAT_S seconds
# (default 15).  Returns the command's status.
janus_quiet_run() {
  local label=$1; shift
  local every=${JANUS_HEARTBEAT_S:-15} parent=$$ started
  started=$(date +%s)
  (   # ends with the command, or by itself if this script is gone (Ctrl-C)
    while sleep 1; do
      kill -0 "$parent" 2>/dev/null || exit 0
      elapsed=$(( $(date +%s) - started ))
      if [ "$elapsed" -gt 0 ] && [ $(( elapsed % every )) -eq 0 ]; then
        echo "[janus]   ... still $label (${elapsed} s)" >&2
      fi
    done
  ) &
  local heartbeat=$! status=0
  "$@" || status=$?
  kill "$heartbeat" 2>/dev/null || true
  wait "$heartbeat" 2>/dev/null || true
  return "$status"
}

# -- the environment

janus_create_venv() {
  if [ ! -x "$VENV_PYTHON" ]; then
    janus_step "creating the virtual environment $VENV_DIR (python3 -m venv)"
    "${PYTHON:-python3}" -m venv "$VENV_DIR"
    janus_step_done
  fi
}

janus_install_requirements() {
  local stamp="$VENV_DIR/.janus-requirements"
  if [ "$(cat "$stamp" 2>/dev/null)" != "${JANUS_REQUIREMENTS[*]}" ]; then
    janus_step "installing ${JANUS_REQUIREMENTS[*]} into $VENV_DIR" \
      "(once; TensorFlow is a ~250 MB download: 1-3 min)"
    janus_quiet_run "installing packages" \
      "$VENV_PYTHON" -m pip install -q --disable-pip-version-check \
      "${JANUS_REQUIREMENTS[@]}"
    echo "${JANUS_REQUIREMENTS[*]}" > "$stamp"
    rm -f "$VENV_DIR/.janus-install"  # new TF: the op library must be rebuilt
    janus_step_done
  fi
}

# Everything that, when changed, needs a rebuild or a new editable finder.
janus_install_fingerprint() {
  {
    cat setup.py pyproject.toml janus_ops/*.cc
    find janus janus_ops -name __init__.py | LC_ALL=C sort
    ls janus_ops/_janus_ops.so janus_ops/_build_info.txt 2>&1
  } | sha1sum
}

janus_install_project() {
  local stamp="$VENV_DIR/.janus-install"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$(janus_install_fingerprint)" ]; then
    janus_step "compiling the C++ ops (janus_ops/*.cc) against this TensorFlow and" \
      "installing janus editably (pip install --no-build-isolation -e .; about 1 min)"
    # Before the distribution was named janus-tf it was `janus`: drop that one.
    if "$VENV_PYTHON" -m pip show janus 2>/dev/null | grep -q '^Summary: Speculative'; then
      "$VENV_PYTHON" -m pip uninstall -q -y janus
    fi
    janus_quiet_run "compiling janus_ops" \
      "$VENV_PYTHON" -m pip install -q --disable-pip-version-check \
      --no-build-isolation --no-deps -e .
    janus_install_fingerprint > "$stamp"
    janus_step_done
  fi
}

janus_setup_env() {
  janus_create_venv
  janus_install_requirements
  janus_install_project
}
