#!/usr/bin/env bash
# Installs Horovod (CPU, Gloo, TensorFlow) into .venv: the `horovod` extra.
#
# Horovod 0.28.1 does not build against TF 2.21 as shipped (shared/notes/
# horovod-tf2.21.md): it needs two Debian header packages, and its XLA
# custom-call file includes a header path TF moved, so that block (only
# used for XLA on GPU) is disabled in the sdist before building.  The wheel
# is built once (8-10 minutes on 2 cores) and kept in $HOROVOD_WHEEL_DIR for
# later installs.  Run after scripts/setup_env.sh has made .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV_PYTHON="$(cd "$(dirname "${VENV_PYTHON:-.venv/bin/python}")" && pwd)/$(basename "${VENV_PYTHON:-.venv/bin/python}")"
WHEEL_DIR="${HOROVOD_WHEEL_DIR:-$HOME/.cache/janus/wheels}"
VERSION=0.28.1

if "$VENV_PYTHON" -c 'import horovod.tensorflow' 2>/dev/null; then
  exit 0
fi
mkdir -p "$WHEEL_DIR"
wheel=$(ls "$WHEEL_DIR"/horovod-$VERSION-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "horovod: building the $VERSION wheel (about 10 minutes)" >&2
  if ! dpkg -s libhighwayhash-dev libfarmhash-dev >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq libhighwayhash-dev libfarmhash-dev >/dev/null
  fi
  "$VENV_PYTHON" -m pip install -q cmake 'setuptools>=64' wheel packaging psutil pyyaml cloudpickle
  work=$(mktemp -d)
  "$VENV_PYTHON" -m pip download -q --no-deps --no-binary :all: horovod==$VERSION -d "$work"
  tar -xzf "$work"/horovod-$VERSION.tar.gz -C "$work"
  src="$work/horovod-$VERSION"
  sed -i 's/#if TENSORFLOW_VERSION >= 2006000000/#if 0 \&\& TENSORFLOW_VERSION >= 2006000000/' \
    "$src/horovod/tensorflow/xla_mpi_ops.cc"
  (cd "$src" && HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
    HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=-j2 \
    "$VENV_PYTHON" -m pip wheel -q --no-build-isolation --no-deps -w "$WHEEL_DIR" .)
  rm -rf "$work"
  wheel=$(ls "$WHEEL_DIR"/horovod-$VERSION-*.whl | head -n 1)
fi
"$VENV_PYTHON" -m pip install -q "$wheel"
"$VENV_PYTHON" -c 'import horovod.tensorflow' && echo "horovod: installed" >&2
