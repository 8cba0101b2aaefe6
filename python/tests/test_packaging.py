"""The kcl package as Python users install it: `pip install --no-build-isolation ./python` into
a fresh virtual environment, and the wheel of `python3 -m build --no-isolation --wheel`
installed into another; each imported from outside the source tree, shown by `pip show`
and removed by `pip uninstall`. The extension is the one the CMake build already made
(KCL_CMAKE_BUILD_DIR, set by CTest): nothing is compiled again here."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
import zipfile
from typing import Dict, List

import pytest

from conftest import ROOT

BUILD_DIR = os.environ.get("KCL_CMAKE_BUILD_DIR", "")
pytestmark = pytest.mark.skipif(
    not BUILD_DIR, reason="KCL_CMAKE_BUILD_DIR (a CMake build directory with the extension "
                          "built) is not set; CTest's python_pytest sets it")


def cmake_version() -> str:
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"project\(\s*kcl\s+VERSION\s+([0-9.]+)", f.read())
    assert m, "CMakeLists.txt has no project version"
    return m.group(1)


def run(cmd: List[str], cwd: str, env: Dict[str, str]) -> str:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, "%s failed (%d):\n%s\n%s" % (cmd, r.returncode, r.stdout, r.stderr)
    return r.stdout


def clean_env() -> Dict[str, str]:
    """No PYTHONPATH (the suite's points at the build tree) and the build directory given."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["KCL_CMAKE_BUILD_DIR"] = BUILD_DIR
    env["PIP_NO_INDEX"] = "1"  # offline: nothing may come from PyPI
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def make_venv(path: str) -> str:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return os.path.join(path, "bin", "python")


def check_installed(python: str, elsewhere: str, env: Dict[str, str]) -> None:
    """Imported from a directory outside the tree, from the venv's platlib, at the version."""
    out = run([python, "-c",
               "import kcl, kcl._kcl, kcl.kclpy, sysconfig, sys; "
               "print(kcl.__version__); print(kcl._kcl.__file__); "
               "print(sysconfig.get_paths()['platlib']); print(len(kcl.worker_options()))"],
              elsewhere, env).split("\n")
    version, module, platlib, n_options = out[0], out[1], out[2], int(out[3])
    assert version == cmake_version()
    assert module.startswith(platlib + os.sep), (module, platlib)
    assert n_options > 10
    show = run([python, "-m", "pip", "show", "kcl-cpp"], elsewhere, env)
    assert "Version: %s" % cmake_version() in show, show
    assert re.search(r"Summary: .*Kinesis", show), show
    assert "License: Apache-2.0" in show, show
    files = run([python, "-m", "pip", "show", "-f", "kcl-cpp"], elsewhere, env)
    assert "kcl/_kcl" in files and "kcl/py.typed" in files, files


def check_uninstalled(python: str, elsewhere: str, env: Dict[str, str]) -> None:
    platlib = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                  elsewhere, env).strip()
    run([python, "-m", "pip", "uninstall", "-y", "kcl-cpp"], elsewhere, env)
    r = subprocess.run([python, "-c", "import kcl"], cwd=elsewhere, env=env,
                       capture_output=True, text=True)
    assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr, r.stderr
    left = [n for n in os.listdir(platlib) if n.startswith(("kcl", "kcl_cpp"))]
    assert left == [], "pip uninstall left %s in %s" % (left, platlib)
    assert not os.path.exists(os.path.join(os.path.dirname(python), "kcl-kclpy"))


def test_pip_install_into_a_fresh_venv(tmp_path):
    env = clean_env()
    python = make_venv(str(tmp_path / "venv"))
    elsewhere = str(tmp_path)
    run([python, "-m", "pip", "install", "--no-build-isolation", os.path.join(ROOT, "python")],
        elsewhere, env)
    check_installed(python, elsewhere, env)
    out = run([os.path.join(os.path.dirname(python), "kcl-kclpy"), "--version"], elsewhere, env)
    assert out.strip() == "kcl-cpp " + cmake_version()
    check_uninstalled(python, elsewhere, env)


def test_the_wheel_installs_without_the_source_tree(tmp_path):
    env = clean_env()
    dist = str(tmp_path / "dist")
    run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", dist,
         os.path.join(ROOT, "python")], str(tmp_path), env)
    wheels = os.listdir(dist)
    tag = "cp%d%d" % sys.version_info[:2]
    assert len(wheels) == 1 and re.fullmatch(
        r"kcl_cpp-%s-%s-%s-linux_x86_64\.whl" % (re.escape(cmake_version()), tag, tag),
        wheels[0]), wheels
    wheel = os.path.join(dist, wheels[0])
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        wheel_meta = z.read("kcl_cpp-%s.dist-info/WHEEL" % cmake_version()).decode()
    assert "Root-Is-Purelib: false" in wheel_meta
    assert "kcl/kclpy.py" in names and any(n.startswith("kcl/_kcl.") for n in names)
    # A second venv and a directory with nothing of the tree: the wheel alone.
    python = make_venv(str(tmp_path / "venv2"))
    elsewhere = str(tmp_path / "elsewhere")
    os.mkdir(elsewhere)
    run([python, "-m", "pip", "install", wheel], elsewhere, env)
    check_installed(python, elsewhere, env)
    check_uninstalled(python, elsewhere, env)


def test_a_relative_build_dir_is_found_from_the_repository_root(tmp_path, monkeypatch):
    """pip runs the backend in python/: KCL_CMAKE_BUILD_DIR=build/release, as the docs write
    it from the repository's root, still names the build directory."""
    sys.path.insert(0, os.path.join(ROOT, "python", "build_backend"))
    try:
        import kcl_build  # noqa: E402 - the backend module, as pip imports it
    finally:
        sys.path.pop(0)
    relative = os.path.relpath(BUILD_DIR, ROOT)
    monkeypatch.chdir(os.path.join(ROOT, "python"))
    monkeypatch.setenv("PWD", str(tmp_path))
    assert str(kcl_build._given_build_dir(relative)) == os.path.realpath(BUILD_DIR)
    with pytest.raises(RuntimeError, match="no CMakeCache.txt"):
        kcl_build._given_build_dir("no/such/build")
