#!/usr/bin/env bash
# Installs the kcl Python package into Debian's python3, offline, from this repository:
# installs the build dependencies (scripts/install-deps.sh: apt packages including
# pybind11-dev, python3-dev), builds the library and the extension module in build/python
# and copies the package (kcl/: the module and its Python files) into the interpreter's
# site directory for local packages (/usr/local/lib/python3.<minor>/dist-packages on Debian).
# It also builds the `kcl` command line (build/python/tools/kcl/kcl: create-stream, put, tail,
# ...), which the README's Python walk-through uses.
#
#   bash scripts/install-python.sh
#   KCL_PYTHON=/opt/python3.12/bin/python3 bash scripts/install-python.sh   # another Python 3
#                                        (its headers installed; the package goes to its site
#                                        directory)
#   KCL_PYTHON_INSTALL_DIR=/some/dir bash scripts/install-python.sh        # elsewhere (then
#                                        put /some/dir on PYTHONPATH)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
python="${KCL_PYTHON:-/usr/bin/python3}"
if [ "${KCL_SKIP_DEPS:-0}" != "1" ]; then bash scripts/install-deps.sh; fi
args=(-DKCL_PYTHON_EXECUTABLE="$python" -DKCL_BUILD_PYTHON=ON -DKCL_BUILD_TESTS=OFF
      -DKCL_BUILD_BENCH=OFF -DKCL_BUILD_TOOLS=ON)
if [ -n "${KCL_PYTHON_INSTALL_DIR:-}" ]; then args+=(-DKCL_PYTHON_INSTALL_DIR="$KCL_PYTHON_INSTALL_DIR"); fi
echo "install-python: building for $python"
cmake -S . -B build/python -G Ninja -DCMAKE_BUILD_TYPE=Release "${args[@]}" >/dev/null
cmake --build build/python --target kcl_python kcl_cli -j "${KCL_JOBS:-$(nproc)}"
cmake --install build/python --component python
# The check runs outside the repository, so it imports the installed package.
(cd / && "$python" -c 'import kcl, sys; print("install-python: kcl installed at", kcl.__path__[0], "for", sys.executable)')
