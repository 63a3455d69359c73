#!/usr/bin/env python3
"""module_arrows.py SOURCE_DIR: checks every #include between modules against the arrows that
docs/ARCHITECTURE.md lists (standard library only; run by tests/architecture.sh).

The list is the fenced block after the line `<!-- module arrows -->` in docs/ARCHITECTURE.md: one
line per module, its name and then the modules it may include directly (`-` for none). A module
is a top-level folder of C++ sources. Fails (exit 1), naming each offence, when:
  - a source file of a module includes a header of another module its line does not name (an
    upward include, or a shortcut past the module that should stand between them);
  - the list names a module that is not a folder, or a folder holding C++ sources is missing
    from the list (tests/, third_party/ and build folders are not modules);
  - the arrows form a cycle (the list must be an order: each module above those it includes).
Exit 2 when the list cannot be read.
"""
import os
import re
import sys

SOURCE = re.compile(r"\.(h|hpp|cpp|cc|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/')
NOT_MODULES = {"tests", "third_party", "build", "examples", "scripts", "docs", "results",
               "notebooks", "cmake"}


def read_arrows(root):
    path = os.path.join(root, "docs", "ARCHITECTURE.md")
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        print(f"module_arrows.py: cannot read {path}: {e.strerror}", file=sys.stderr)
        sys.exit(2)
    try:
        start = lines.index("<!-- module arrows -->")
    except ValueError:
        print(f"module_arrows.py: {path} has no '<!-- module arrows -->' block", file=sys.stderr)
        sys.exit(2)
    if start + 1 >= len(lines) or not lines[start + 1].startswith("```"):
        print(f"module_arrows.py: the module arrows in {path} are not a fenced block",
              file=sys.stderr)
        sys.exit(2)
    arrows = {}
    for line in lines[start + 2:]:
        if line.startswith("```"):
            return arrows
        words = line.split()
        if not words or words[0] == "module":  # blank lines and the header line
            continue
        arrows[words[0]] = set() if words[1:] == ["-"] else set(w.rstrip(",") for w in words[1:])
    print(f"module_arrows.py: the module arrows block in {path} is not closed", file=sys.stderr)
    sys.exit(2)


def source_files(folder):
    for base, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if SOURCE.search(name):
                yield os.path.join(base, name)


def cycle(arrows):
    """A cycle of the arrows as a list of modules, or None."""
    state = {}

    def visit(m, path):
        state[m] = "open"
        for n in sorted(arrows.get(m, ())):
            if state.get(n) == "open":
                return path[path.index(n):] + [n] if n in path else [m, n]
            if n not in state:
                found = visit(n, path + [n])
                if found:
                    return found
        state[m] = "done"
        return None

    for m in sorted(arrows):
        if m not in state:
            found = visit(m, [m])
            if found:
                return found
    return None


def main():
    if len(sys.argv) != 2:
        print("usage: module_arrows.py SOURCE_DIR", file=sys.stderr)
        return 2
    root = sys.argv[1]
    arrows = read_arrows(root)
    problems = []
    for module, targets in sorted(arrows.items()):
        if not os.path.isdir(os.path.join(root, module)):
            problems.append(f"the list names {module}/, which is not a folder")
        for t in sorted(targets - set(arrows)):
            problems.append(f"the list lets {module}/ include {t}/, which it does not list")
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if (os.path.isdir(folder) and name not in arrows and name not in NOT_MODULES
                and not name.startswith(".") and not name.startswith("build")
                and next(source_files(folder), None)):
            problems.append(f"{name}/ holds C++ sources and is not in the module arrows")
    found = cycle(arrows)
    if found:
        problems.append("the module arrows form a cycle: " + " -> ".join(found))
    for module, allowed in sorted(arrows.items()):
        folder = os.path.join(root, module)
        if not os.path.isdir(folder):
            continue
        for path in source_files(folder):
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m or m.group(1) == module or m.group(1) not in arrows:
                        continue
                    if m.group(1) not in allowed:
                        rel = os.path.relpath(path, root)
                        problems.append(f"{rel}:{number}: {module}/ includes {m.group(1)}/, "
                                        f"which its arrows do not allow: {line.strip()}")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
