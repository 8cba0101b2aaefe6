#!/usr/bin/env bash
# Installs the kcl Python package with pip into a virtual environment, offline, from this
# repository: a thin wrapper over docs/python.md's install steps. It installs the build
# dependencies (scripts/install-deps.sh), makes the venv if it does not exist, builds the
# library, the extension module and the `kcl` command line in build/python (Release; the
# command line is build/python/tools/kcl/kcl, which docs/python.md's walk-through uses) and runs
# `pip install --no-build-isolation ./python` with KCL_CMAKE_BUILD_DIR=build/python, so pip
# packs that build instead of compiling again. `pip uninstall kcl-cpp` removes it.
#
#   bash scripts/install-python.sh                 # into ~/kcl-venv
#   bash scripts/install-python.sh /path/to/venv   # into another venv (made if missing)
#   KCL_PYTHON=/opt/python3.12/bin/python3 bash scripts/install-python.sh   # a venv of another
#                                                  # Python 3.11+ (its headers installed)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
python="${KCL_PYTHON:-/usr/bin/python3}"
venv="${1:-$HOME/kcl-venv}"
if [ "${KCL_SKIP_DEPS:-0}" != "1" ]; then bash scripts/install-deps.sh; fi
if [ ! -x "$venv/bin/python" ]; then
  echo "install-python: making the virtual environment $venv"
  "$python" -m venv "$venv"
fi
args=(-DCMAKE_BUILD_TYPE=Release -DKCL_PYTHON_EXECUTABLE="$python" -DKCL_BUILD_PYTHON=ON
      -DKCL_BUILD_TESTS=OFF -DKCL_BUILD_BENCH=OFF -DKCL_BUILD_TOOLS=ON)
if command -v ccache >/dev/null 2>&1; then args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
echo "install-python: building for $python in build/python"
cmake -S . -B build/python -G Ninja "${args[@]}" >/dev/null
cmake --build build/python --target kcl_python kcl_cli -j "${KCL_JOBS:-$(nproc)}"
KCL_CMAKE_BUILD_DIR="$here/build/python" PIP_NO_INDEX=1 \
  "$venv/bin/pip" install --no-build-isolation "$here/python"
# The check runs outside the repository, so it imports the installed package.
(cd / && "$venv/bin/python" -c 'import kcl, sys; print("install-python: kcl", kcl.__version__, "installed at", kcl.__path__[0], "for", sys.executable)')
