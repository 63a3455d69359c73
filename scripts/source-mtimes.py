#!/usr/bin/env python3
"""Keeps a build folder's sources looking as old as when it was built, across copies of the tree
that give every file a new modification time (a device machine's copy, sent again for each
command, while its build folder stays): ninja rebuilds what is newer than its outputs, so an
unchanged tree copied anew would be compiled again from scratch.

    scripts/source-mtimes.py save ROOT MANIFEST      after a build: each source's hash and time
    scripts/source-mtimes.py restore ROOT MANIFEST   before the next: a file whose content is the
                                                     same as when saved gets its saved time back

Sources: every file below ROOT but the build folders (build*), third_party/deps (the bundle of
.debs, unpacked elsewhere), results, .git and __pycache__; the grammars of third_party/grammars
are compiled, so they count. A file whose content changed keeps its new time, so ninja rebuilds what depends on
it, as it should. No manifest: restore does nothing. Prints one line of counts.
"""

import hashlib
import json
import os
import sys

SKIPPED = {"results", ".git", "__pycache__", os.path.join("third_party", "deps")}


def sources(root):
    for folder, dirs, files in os.walk(root):
        here = os.path.relpath(folder, root)
        dirs[:] = [d for d in dirs
                   if d not in SKIPPED and os.path.normpath(os.path.join(here, d)) not in SKIPPED
                   and not (folder == root and d.startswith("build"))]
        for name in files:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not os.path.islink(path):
                yield os.path.relpath(path, root)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def save(root, manifest):
    entries = {}
    for rel in sources(root):
        path = os.path.join(root, rel)
        entries[rel] = [digest(path), os.stat(path).st_mtime_ns]
    tmp = manifest + ".tmp"
    with open(tmp, "w") as f:
        json.dump(entries, f)
    os.replace(tmp, manifest)
    print(f"source-mtimes: saved {len(entries)} files")


def restore(root, manifest):
    if not os.path.exists(manifest):
        print("source-mtimes: no manifest, nothing restored")
        return
    with open(manifest) as f:
        entries = json.load(f)
    restored = changed = 0
    for rel in sources(root):
        saved = entries.get(rel)
        path = os.path.join(root, rel)
        if saved is None or digest(path) != saved[0]:
            changed += 1
            continue
        if os.stat(path).st_mtime_ns != saved[1]:
            os.utime(path, ns=(saved[1], saved[1]))
            restored += 1
    print(f"source-mtimes: {restored} times restored, {changed} files new or changed")


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("save", "restore"):
        sys.exit("usage: source-mtimes.py save|restore ROOT MANIFEST")
    root = os.path.abspath(sys.argv[2])
    (save if sys.argv[1] == "save" else restore)(root, sys.argv[3])


if __name__ == "__main__":
    main()
