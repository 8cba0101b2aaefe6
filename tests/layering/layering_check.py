#!/usr/bin/env python3
"""Fails when a file of the library includes a header from a layer above its own.

The layers and their allowed dependencies are read from src/CMakeLists.txt (the
`kcl_area(name DEPS kcl_a kcl_b ...)` lines), so the build and this check share one source
of truth. A file in src/<area>/ may include:
  - headers of its own area and of the areas it depends on, directly or transitively;
  - public headers (include/kcl/*.h) that belong to base, or to an area it may include
    (PUBLIC_HEADER_AREA below names the public headers that belong to a higher layer).
Public headers may include only other public headers (and the standard library), and only
those of their own layer or below, and define no macros (a user's code gets every #define in
them; the library's own helpers live in src/base/status_macros.h).
A test (tests/unit/<area>/, tests/integration/<area>/) includes no header of another test
area: what tests share lives in tests/support.

Usage: layering_check.py <source dir>     exit 0 when clean, 1 listing every violation.
"""
import os
import re
import sys

# Public headers that belong to a layer above base (the rest are base: usable everywhere).
PUBLIC_HEADER_AREA = {
    "worker.h": "worker",
    "worker_options.h": "worker",
    "pull_consumer.h": "pull",
    "producer.h": "producer",
    "multilang.h": "multilang",
}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
DEFINE_RE = re.compile(r"^\s*#\s*define\s+(\w+)", re.M)
AREA_RE = re.compile(r"^\s*kcl_area\(\s*(\w+)([^)]*)\)", re.M)


def read_areas(src_dir):
    text = open(os.path.join(src_dir, "CMakeLists.txt")).read()
    deps = {}
    for name, rest in AREA_RE.findall(text):
        words = rest.split()
        direct, mode = set(), None
        for w in words:
            if w in ("DEPS", "EXTERNAL"):
                mode = w
            elif mode == "DEPS" and w.startswith("kcl_"):
                direct.add(w[len("kcl_"):])
        deps[name] = direct
    return deps


def sources(folder, root):
    """(path relative to root, the includes) of each .h and .cpp below folder, in order."""
    for dirpath, _, files in sorted(os.walk(folder)):
        for f in sorted(files):
            if f.endswith((".h", ".cpp")):
                path = os.path.join(dirpath, f)
                text = open(path, errors="replace").read()
                yield os.path.relpath(path, root), INCLUDE_RE.findall(text)


def closure(deps):
    allowed = {}
    for area in deps:
        seen, stack = set(), [area]
        while stack:
            a = stack.pop()
            if a in seen:
                continue
            seen.add(a)
            stack.extend(deps.get(a, ()))
        allowed[area] = seen
    return allowed


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    src = os.path.join(root, "src")
    deps = read_areas(src)
    if not deps:
        print("layering_check: no kcl_area() lines found in src/CMakeLists.txt")
        return 1
    allowed = closure(deps)
    problems = []
    checked = 0

    def public_area(header):
        return PUBLIC_HEADER_AREA.get(header, "base")

    for area in sorted(os.listdir(src)):
        folder = os.path.join(src, area)
        if not os.path.isdir(folder):
            continue
        if area not in deps:
            problems.append(f"src/{area}/ is not declared with kcl_area() in src/CMakeLists.txt")
            continue
        for rel, includes in sources(folder, root):
            checked += 1
            for inc in includes:
                top = inc.split("/", 1)[0]
                if top == "kcl":
                    owner = public_area(inc.split("/", 1)[1])
                    if owner != "base" and owner not in allowed[area]:
                        problems.append(f"{rel}: includes \"{inc}\" (public header of layer "
                                        f"{owner}), above layer {area}")
                elif top in deps:
                    if top not in allowed[area]:
                        problems.append(f"{rel}: includes \"{inc}\" from layer {top}, which "
                                        f"layer {area} does not depend on")
                elif "/" in inc:
                    problems.append(f"{rel}: includes \"{inc}\", which belongs to no layer")

    pub = os.path.join(root, "include", "kcl")
    for f in sorted(os.listdir(pub)):
        if not f.endswith(".h"):
            continue
        checked += 1
        mine = public_area(f)
        text = open(os.path.join(pub, f)).read()
        for macro in DEFINE_RE.findall(text):
            problems.append(f"include/kcl/{f}: public header defines the macro {macro}")
        for inc in INCLUDE_RE.findall(text):
            if not inc.startswith("kcl/"):
                problems.append(f"include/kcl/{f}: public header includes internal \"{inc}\"")
                continue
            owner = public_area(inc[len("kcl/"):])
            if owner != "base" and owner != mine and owner not in allowed.get(mine, set()):
                problems.append(f"include/kcl/{f}: includes \"{inc}\" of layer {owner}, above "
                                f"its own layer {mine}")

    tests = os.path.join(root, "tests")
    for kind in ("unit", "integration"):
        base = os.path.join(tests, kind)
        if not os.path.isdir(base):
            continue
        for rel, includes in sources(base, root):
            area = os.path.relpath(rel, os.path.relpath(base, root)).split(os.sep)[0]
            checked += 1
            for inc in includes:
                parts = inc.split("/")
                if parts[0] in ("unit", "integration") and len(parts) > 2 and (
                        parts[0] != kind or parts[1] != area):
                    problems.append(f"{rel}: includes \"{inc}\" from another test area "
                                    f"(shared test code belongs in tests/support)")

    for p in problems:
        print("layering violation: " + p)
    print(f"layering_check: {checked} files, {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
