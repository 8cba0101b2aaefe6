#!/usr/bin/env python3
"""Checks that every command line of a document's old version is still findable.

    python3 tests/docs/check_commands_kept.py [--inline] OLD NEW_FILE_OR_DIR...
    python3 tests/docs/check_commands_kept.py --list OLD > LIST.txt

OLD is a Markdown file (or `git:REV:PATH`, read with `git show`), or a list of commands, one a
line (a .txt file, as --list writes it: the CTest test docs_commands_kept checks
tests/docs/*_commands.txt, the commands of README.md and docs/benchmarks.md before they were
cut, so none of them gets lost later). A command line is a line of
a fenced block (``` or ```sh; not ```cpp, ```python, ```js, ...) whose first word is a
program or a path (python3, node, bash, kcl, build/..., ~/..., an environment assignment,
...); with --inline, an inline code span (`...`) that starts so counts too. Each must appear,
whitespace collapsed, in one of the new files (directories are searched for *.md). Prints
what is missing and exits 1, or prints the count and exits 0.
"""
import os
import re
import subprocess
import sys

PROGRAMS = {"python3", "node", "bash", "sh", "kcl", "unshare", "perf", "curl", "seq", "cd",
            "export", "npm", "pip", "cmake", "ctest", "git", "sudo", "docker", "aws", "mypy",
            "pytest"}
COMMAND_FENCES = {"", "sh", "bash", "shell", "console", "text"}


def read(source):
    if source.startswith("git:"):
        _, rev, path = source.split(":", 2)
        return subprocess.run(["git", "show", "%s:%s" % (rev, path)], check=True,
                              capture_output=True, text=True).stdout
    with open(source, encoding="utf-8") as f:
        return f.read()


def is_command(line):
    words = line.split()
    if not words:
        return False
    first = words[0].lstrip("(")
    return (first in PROGRAMS or first.startswith(("build/", "~/", "./", "/opt/", "/usr/"))
            or re.match(r"^[A-Z_][A-Z0-9_]*=", first) is not None)


def inline_commands(text):
    outside = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.S | re.M)
    spans = re.findall(r"`([^`]+)`", " ".join(outside.split()))
    return [" ".join(c.split()) for c in spans if is_command(c) and len(c.split()) > 1]


def command_lines(text):
    out, fence = [], None
    for line in text.splitlines():
        m = re.match(r"^\s*```(\w*)", line)
        if m:
            fence = None if fence is not None else m.group(1)
            continue
        if fence is not None and fence in COMMAND_FENCES and is_command(line):
            out.append(" ".join(line.split()))
    return out


def new_text(paths):
    parts = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, files in os.walk(p):
                parts += [read(os.path.join(root, f)) for f in sorted(files) if f.endswith(".md")]
        else:
            parts.append(read(p))
    return " ".join(" ".join(t.split()) for t in parts)


def main(argv):
    inline = "--inline" in argv
    argv = [a for a in argv if a != "--inline"]
    listing = "--list" in argv
    argv = [a for a in argv if a != "--list"]
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    old = read(argv[1])
    if argv[1].endswith(".txt"):
        wanted = [" ".join(c.split()) for c in old.splitlines() if c.strip()]
    else:
        wanted = command_lines(old) + (inline_commands(old) if inline else [])
    if listing:
        print("\n".join(dict.fromkeys(wanted)))
        return 0
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    text = new_text(argv[2:])
    missing = [c for c in wanted if c not in text]
    for c in missing:
        print("missing: " + c)
    if missing:
        print("%d of %d command lines of %s are not in %s" % (len(missing), len(wanted), argv[1],
                                                              " ".join(argv[2:])))
        return 1
    print("all %d command lines of %s are in %s" % (len(wanted), argv[1], " ".join(argv[2:])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
