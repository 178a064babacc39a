# Sourced by scripts/test.sh and scripts/demo.sh: makes .venv ready to run janus.
#
# Idempotent: creates .venv if missing, installs the pinned dependencies once
# (a stamp in .venv records which), and (re)installs janus editably only when
# the op sources, build files or package layout changed since the last time.
# The install uses --no-build-isolation so janus_ops/_janus_ops.so is compiled
# against the TensorFlow in .venv, the one it will be loaded into.
# Exports VENV_PYTHON. Set PYTHON to pick the interpreter that creates .venv.

JANUS_REQUIREMENTS=(tensorflow-cpu==2.21.0 gast astunparse numpy pytest
                    'setuptools>=64' wheel gymnasium)   # gymnasium: CartPole for examples/a3c.py
VENV_DIR="${VENV_DIR:-.venv}"
VENV_PYTHON="$VENV_DIR/bin/python"

janus_create_venv() {
  if [ ! -x "$VENV_PYTHON" ]; then
    echo "setup: creating $VENV_DIR" >&2
    "${PYTHON:-python3}" -m venv "$VENV_DIR"
  fi
}

janus_install_requirements() {
  local stamp="$VENV_DIR/.janus-requirements"
  if [ "$(cat "$stamp" 2>/dev/null)" != "${JANUS_REQUIREMENTS[*]}" ]; then
    echo "setup: installing ${JANUS_REQUIREMENTS[*]}" >&2
    "$VENV_PYTHON" -m pip install -q --disable-pip-version-check \
      "${JANUS_REQUIREMENTS[@]}"
    echo "${JANUS_REQUIREMENTS[*]}" > "$stamp"
    rm -f "$VENV_DIR/.janus-install"  # new TF: the op library must be rebuilt
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
    echo "setup: building janus ops and installing janus (editable)" >&2
    "$VENV_PYTHON" -m pip install -q --disable-pip-version-check \
      --no-build-isolation --no-deps -e .
    janus_install_fingerprint > "$stamp"
  fi
}

janus_setup_env() {
  janus_create_venv
  janus_install_requirements
  janus_install_project
}
