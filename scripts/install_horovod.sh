#!/usr/bin/env bash
# Installs Horovod 0.28.1 (CPU, Gloo, TensorFlow) into .venv, for the 2-process
# tests (tests/test_horovod.py) and examples/horovod_mlp.py.
#
# Why a script and not `pip install horovod`: Horovod 0.28.1 does not build
# against TF 2.21 as published.  Its build needs two Debian header packages
# that TF 2.21's headers include (libhighwayhash-dev, libfarmhash-dev), and its
# XLA custom-call file includes a header TF moved, so that block (used only
# for XLA on GPU) is disabled in the downloaded sdist before building.  The
# wheel is built once (about 4 minutes on 2 cores) and kept in
# $HOROVOD_WHEEL_DIR (default ~/.cache/janus/wheels); later runs install it in
# seconds.  Run after .venv exists (scripts/test.sh makes it, then calls this).
# Usage: bash scripts/install_horovod.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python="${VENV_PYTHON:-.venv/bin/python}"   # the environment to install into
source scripts/setup_env.sh   # progress helpers only (this does not set up .venv)
VENV_PYTHON="$(cd "$(dirname "$python")" && pwd)/$(basename "$python")"
WHEEL_DIR="${HOROVOD_WHEEL_DIR:-$HOME/.cache/janus/wheels}"
VERSION=0.28.1
APT_PACKAGES=(libhighwayhash-dev libfarmhash-dev)

if "$VENV_PYTHON" -c 'import horovod.tensorflow' 2>/dev/null; then
  exit 0
fi
mkdir -p "$WHEEL_DIR"
wheel=$(ls "$WHEEL_DIR"/horovod-$VERSION-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "[janus] Horovod $VERSION: no wheel in $WHEEL_DIR yet, so building one" \
    "(once, about 5 minutes in all; the tests of janus.DistributedOptimizer need it)" >&2
  if ! dpkg -s "${APT_PACKAGES[@]}" >/dev/null 2>&1; then
    janus_step "apt-get: installing the Debian packages ${APT_PACKAGES[*]}" \
      "(headers TensorFlow's headers include; Horovod's build needs them)"
    if [ "$(id -u)" -ne 0 ]; then
      echo "[janus] not root: run  sudo apt-get install ${APT_PACKAGES[*]}  and try again" >&2
      exit 1
    fi
    janus_quiet_run "running apt-get" \
      bash -c "apt-get update -qq && apt-get install -y -qq ${APT_PACKAGES[*]} >/dev/null"
    janus_step_done
  fi
  janus_step "pip: installing Horovod's build tools (cmake, packaging, psutil, pyyaml," \
    "cloudpickle) into $(dirname "$(dirname "$VENV_PYTHON")")"
  janus_quiet_run "installing build tools" \
    "$VENV_PYTHON" -m pip install -q --disable-pip-version-check \
    cmake 'setuptools>=64' wheel packaging psutil pyyaml cloudpickle
  janus_step_done
  work=$(mktemp -d)
  janus_step "pip: downloading the Horovod $VERSION sdist and disabling its XLA block"
  "$VENV_PYTHON" -m pip download -q --disable-pip-version-check --no-deps \
    --no-binary :all: horovod==$VERSION -d "$work"
  tar -xzf "$work"/horovod-$VERSION.tar.gz -C "$work"
  src="$work/horovod-$VERSION"
  sed -i 's/#if TENSORFLOW_VERSION >= 2006000000/#if 0 \&\& TENSORFLOW_VERSION >= 2006000000/' \
    "$src/horovod/tensorflow/xla_mpi_ops.cc"
  janus_step_done
  janus_step "building the Horovod $VERSION wheel (C++ against TensorFlow; about 4 minutes on 2 cores)"
  (cd "$src" && HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
    HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=-j2 \
    janus_quiet_run "building Horovod" \
    "$VENV_PYTHON" -m pip wheel -q --disable-pip-version-check --no-build-isolation \
    --no-deps -w "$WHEEL_DIR" .)
  janus_step_done
  rm -rf "$work"
  wheel=$(ls "$WHEEL_DIR"/horovod-$VERSION-*.whl | head -n 1)
fi
janus_step "installing Horovod from $wheel"
"$VENV_PYTHON" -m pip install -q --disable-pip-version-check "$wheel"
"$VENV_PYTHON" -c 'import horovod.tensorflow'
janus_step_done
