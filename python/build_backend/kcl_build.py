"""kcl-cpp's PEP 517 / PEP 660 build backend for the kcl Python package (python/pyproject.toml).

It drives CMake to build the extension module kcl._kcl (python/CMakeLists.txt, which links
kcl-cpp statically) and writes the wheel itself, with the standard library only, so that
`pip install --no-build-isolation ./python` works offline in a fresh virtual environment,
which has pip and setuptools but not the `wheel` package that setuptools' bdist_wheel needs.

Where the extension comes from:
- KCL_CMAKE_BUILD_DIR=DIR (or `--config-settings build-dir=DIR`): an existing kcl-cpp CMake
  build directory configured with the Python package (the default when pybind11 is found);
  the backend brings its target kcl_python up to date there (nothing to do when built) and
  takes DIR/python/kcl/_kcl<suffix>;
- otherwise its own build directory, <repo>/build/python-wheel-<interpreter>, configured once
  (Release, Ninja when present, ccache as compiler launcher when present) for the interpreter
  running the backend, and built with KCL_JOBS parallel jobs (default: all cores).

The version is the CMake project version (the top-level CMakeLists.txt), the one place it
is set. The module is stripped of debug information in the wheel (KCL_WHEEL_STRIP=0 keeps it).
"""
from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # python/
ROOT = PACKAGE_DIR.parent                             # the kcl-cpp checkout

_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


# ----- what the wheel is -------------------------------------------------------------------

def _project() -> Dict[str, object]:
    import tomllib  # Python 3.11+: requires-python in pyproject.toml says so
    with open(PACKAGE_DIR / "pyproject.toml", "rb") as f:
        return dict(tomllib.load(f)["project"])


def version() -> str:
    """The CMake project version of kcl-cpp (CMakeLists.txt: project(kcl VERSION x.y.z))."""
    cmakelists = ROOT / "CMakeLists.txt"
    try:
        text = cmakelists.read_text()
    except OSError as e:
        raise RuntimeError("kcl_build: cannot read %s (%s); the kcl package is built from a "
                           "kcl-cpp checkout, with python/ next to the C++ sources"
                           % (cmakelists, e)) from e
    m = re.search(r"project\(\s*kcl\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)", text)
    if not m:
        raise RuntimeError("kcl_build: %s has no `project(kcl VERSION x.y.z)`" % cmakelists)
    return m.group(1)


def _dist_name() -> str:
    return re.sub(r"[-_.]+", "_", str(_project()["name"])).lower()


def wheel_tag() -> str:
    if sys.implementation.name != "cpython":
        raise RuntimeError("kcl_build: the kcl extension module is built for CPython, not %s"
                           % sys.implementation.name)
    py = "cp%d%d" % sys.version_info[:2]
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return "%s-%s%s-%s" % (py, py, sys.abiflags, platform)


def _metadata() -> str:
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: %s" % p["name"], "Version: %s" % version(),
             "Summary: %s" % p.get("description", "")]
    licence = p.get("license")
    if isinstance(licence, dict) and licence.get("text"):
        lines.append("License: %s" % licence["text"])
    if "requires-python" in p:
        lines.append("Requires-Python: %s" % p["requires-python"])
    for keyword in p.get("keywords", []) or []:  # type: ignore[union-attr]
        lines.append("Keywords: %s" % keyword)
    for classifier in p.get("classifiers", []) or []:  # type: ignore[union-attr]
        lines.append("Classifier: %s" % classifier)
    for label, url in dict(p.get("urls", {}) or {}).items():  # type: ignore[call-overload]
        lines.append("Project-URL: %s, %s" % (label, url))
    return "\n".join(lines) + "\n"


def _dist_info_files() -> List[Tuple[str, bytes]]:
    info = "%s-%s.dist-info" % (_dist_name(), version())
    files = [
        (info + "/METADATA", _metadata().encode()),
        (info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: kcl_build (kcl-cpp)\n"
                           "Root-Is-Purelib: false\nTag: %s\n" % wheel_tag()).encode()),
        (info + "/top_level.txt", b"kcl\n"),
    ]
    licence = ROOT / "LICENSE"
    if licence.is_file():
        files.append((info + "/LICENSE", licence.read_bytes()))
    scripts = dict(_project().get("scripts", {}) or {})  # type: ignore[call-overload]
    if scripts:
        text = "[console_scripts]\n" + "".join("%s = %s\n" % kv for kv in scripts.items())
        files.append((info + "/entry_points.txt", text.encode()))
    return files


def _package_files() -> List[Tuple[str, bytes]]:
    """The package's Python files, stubs and py.typed, from the source tree."""
    out = []
    src = PACKAGE_DIR / "kcl"
    for path in sorted(src.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        if path.suffix in (".py", ".pyi") or path.name == "py.typed":
            out.append(("kcl/" + path.relative_to(src).as_posix(), path.read_bytes()))
    return out


# ----- building the extension ----------------------------------------------------------------

def _run(cmd: List[str], what: str) -> None:
    print("kcl_build: " + " ".join(cmd), file=sys.stderr, flush=True)
    r = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr)
    if r.returncode != 0:
        raise RuntimeError("kcl_build: %s failed (exit %d): %s"
                           % (what, r.returncode, " ".join(cmd)))


def _given_build_dir(given: str) -> Path:
    """KCL_CMAKE_BUILD_DIR as the user meant it. pip runs the backend in the package's
    directory (python/), so a relative path is also looked up from the repository's root and
    from the directory pip was started in (PWD), e.g. KCL_CMAKE_BUILD_DIR=build/release."""
    path = Path(given)
    candidates = [path] if path.is_absolute() else [
        Path.cwd() / path, ROOT / path, Path(os.environ.get("PWD", ".")) / path]
    for candidate in candidates:
        if (candidate / "CMakeCache.txt").is_file():
            return candidate.resolve()
    raise RuntimeError("kcl_build: KCL_CMAKE_BUILD_DIR=%s is not a configured CMake build "
                       "directory (no CMakeCache.txt in %s)"
                       % (given, ", ".join(str(c.resolve()) for c in candidates)))


def _cache_value(build_dir: Path, key: str) -> Optional[str]:
    try:
        for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
            if line.startswith(key + ":"):
                return line.split("=", 1)[1]
    except OSError:
        pass
    return None


def _jobs() -> str:
    return os.environ.get("KCL_JOBS") or str(os.cpu_count() or 2)


def build_extension(config_settings: Optional[Mapping[str, object]] = None) -> Path:
    """Builds (or brings up to date) the target kcl_python; returns the module's path."""
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeError("kcl_build: cmake is not on PATH (Debian: apt-get install cmake; "
                           "scripts/install-deps.sh installs every build dependency)")
    given = (config_settings or {}).get("build-dir") or os.environ.get("KCL_CMAKE_BUILD_DIR")
    if given:
        build_dir = _given_build_dir(str(given))
    else:
        base_python = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
        build_dir = ROOT / "build" / ("python-wheel-" + sys.implementation.cache_tag)
        if _cache_value(build_dir, "KCL_PYTHON_EXECUTABLE") != base_python:
            cmd = [cmake, "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                   "-DKCL_BUILD_PYTHON=ON", "-DKCL_BUILD_TESTS=OFF", "-DKCL_BUILD_BENCH=OFF",
                   "-DKCL_BUILD_TOOLS=OFF", "-DKCL_PYTHON_EXECUTABLE=" + base_python]
            if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").exists():
                cmd += ["-G", "Ninja"]
            if shutil.which("ccache") and os.environ.get("KCL_NO_CCACHE") != "1":
                cmd.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
            _run(cmd, "configuring kcl-cpp")
    if _cache_value(build_dir, "KCL_BUILD_PYTHON") in ("OFF", "FALSE", "0", "NO"):
        raise RuntimeError("kcl_build: %s was configured with KCL_BUILD_PYTHON=OFF (pybind11 "
                           "or the Python headers missing?)" % build_dir)
    _run([cmake, "--build", str(build_dir), "--target", "kcl_python", "-j", _jobs()],
         "building the extension module kcl._kcl")
    module = build_dir / "python" / "kcl" / ("_kcl" + str(sysconfig.get_config_var("EXT_SUFFIX")))
    if not module.is_file():
        found = sorted(p.name for p in (build_dir / "python" / "kcl").glob("_kcl*"))
        raise RuntimeError("kcl_build: %s was not built; %s has %s (built for another Python? "
                           "this is %s)" % (module.name, module.parent, found or "no module",
                                            sys.executable))
    return module


def _module_bytes(module: Path) -> bytes:
    strip = shutil.which("strip")
    if strip is None or os.environ.get("KCL_WHEEL_STRIP") == "0":
        return module.read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / module.name
        shutil.copyfile(module, copy)
        _run([strip, "--strip-debug", str(copy)], "stripping debug information")
        return copy.read_bytes()


# ----- the wheel file -------------------------------------------------------------------------

def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d\n" % (name, digest, len(data))


def _write_wheel(wheel_directory: str, files: List[Tuple[str, bytes]]) -> str:
    files = files + _dist_info_files()
    info = "%s-%s.dist-info" % (_dist_name(), version())
    record = "".join(_record_line(n, d) for n, d in files) + info + "/RECORD,,\n"
    files.append((info + "/RECORD", record.encode()))
    name = "%s-%s-%s.whl" % (_dist_name(), version(), wheel_tag())
    path = Path(wheel_directory) / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            entry = zipfile.ZipInfo(arcname, _ZIP_TIME)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data)
    print("kcl_build: wrote %s (%d bytes)" % (path, path.stat().st_size), file=sys.stderr)
    return name


# ----- PEP 517 / PEP 660 hooks ------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings: Optional[Mapping[str, object]] = None
                                 ) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Mapping[str, object]] = None
                                    ) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Mapping[str, object]] = None
                                 ) -> List[str]:
    return []


def _prepare_metadata(metadata_directory: str) -> str:
    for arcname, data in _dist_info_files():
        target = Path(metadata_directory) / arcname
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return "%s-%s.dist-info" % (_dist_name(), version())


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Mapping[str, object]] = None
                                     ) -> str:
    return _prepare_metadata(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory: str,
                                        config_settings: Optional[Mapping[str, object]] = None
                                        ) -> str:
    return _prepare_metadata(metadata_directory)


def build_wheel(wheel_directory: str, config_settings: Optional[Mapping[str, object]] = None,
                metadata_directory: Optional[str] = None) -> str:
    module = build_extension(config_settings)
    files = _package_files() + [("kcl/" + module.name, _module_bytes(module))]
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory: str, config_settings: Optional[Mapping[str, object]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """Developers: the package is imported from python/kcl, where the built module is copied
    (rebuild and reinstall, or copy it again, after changing C++ code)."""
    module = build_extension(config_settings)
    shutil.copyfile(module, PACKAGE_DIR / "kcl" / module.name)
    pth = ("%s.pth" % _dist_name(), (str(PACKAGE_DIR) + "\n").encode())
    return _write_wheel(wheel_directory, [pth])


def build_sdist(sdist_directory: str,
                config_settings: Optional[Mapping[str, object]] = None) -> str:
    raise RuntimeError("kcl_build: no source distribution: the kcl package is built from a "
                       "kcl-cpp checkout (python/ next to the C++ sources); build a wheel "
                       "(python3 -m build --no-isolation --wheel python) or pip install ./python")
