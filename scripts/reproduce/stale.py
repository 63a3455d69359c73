#!/usr/bin/env python3
"""stale.py [--results DIR] [--repo DIR]: names the results files whose measured code changed
since the commit they were made at (standard library only).

For each DIR/*.json (default: the repository's results/), the commit it records: its `commit`
(collect.py's write_result; the commit the run started from, whose binary it used), else its
`reproduce.commit` (the memory benchmarks' and gpu_result.py's files). The measured code is every
tracked file outside results/, docs/, notebooks/, tests/ and .ci/, other than examples/*.py and
Markdown (README.md and the rest): what builds the binary, the scripts that drive it, the peers.
Of scripts/reproduce/, only what made the file counts: the script its `reproduce.script` (or its
`claim`) names, else scripts/reproduce/NAME.sh for results/NAME.json, with every file of
scripts/reproduce/ that script names (sources, runs or imports: common.sh, collect.py,
gpu_common.sh, another script it execs); when no script is known, every file there counts.
A file is stale when `git diff --name-only COMMIT HEAD` lists measured code, when its commit is
not in this clone's history, or when it records none; each stale file gets one line with its
commit, the number of measured files changed and the first few of them.

It names, it does not judge: the exit status is 0 whatever it finds (2 on a usage error, 1 when
git or DIR cannot be read). A stale file is not wrong; its figures are from older code, and
rerunning its script (the file's `reproduce` or its claim says which) makes it current.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

# Not measured code: the results themselves, prose, notebooks, tests and CI.
EXCLUDED = ["results", "docs", "README.md", "notebooks", "tests", "examples/*.py", ".ci", "*.md"]
SHOWN = 4  # changed files named per stale results file


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)


def recorded_commit(data):
    """The commit a results file records, or None."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("commit"), str) and data["commit"]:
        return data["commit"]
    reproduce = data.get("reproduce")
    if isinstance(reproduce, dict) and isinstance(reproduce.get("commit"), str) \
            and reproduce["commit"]:
        return reproduce["commit"]
    return None


REPRODUCE = "scripts/reproduce/"


def own_script(repo, name, data):
    """The reproduce script that made results file `name` (a path), or None when unknown."""
    reproduce = data.get("reproduce") if isinstance(data, dict) else None
    script = reproduce.get("script") if isinstance(reproduce, dict) else None
    if not isinstance(script, str) and isinstance(data, dict) and isinstance(data.get("claim"), str):
        found = [w for w in data["claim"].replace("`", " ").split() if w.startswith(REPRODUCE)]
        script = found[0] if found else None
    if not isinstance(script, str):
        script = REPRODUCE + os.path.splitext(os.path.basename(name))[0] + ".sh"
    return script if os.path.isfile(os.path.join(repo, script)) else None


def script_files(repo, script):
    """`script` and the files of scripts/reproduce/ it names (by file name, or a Python module
    by its import), followed through those it names in turn."""
    folder = os.path.join(repo, REPRODUCE)
    names = sorted(n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n)))
    found, todo = {script}, [script]
    while todo:
        try:
            text = open(os.path.join(repo, todo.pop()), encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        for n in names:
            stem, ext = os.path.splitext(n)
            named = n in text or (ext == ".py" and (f"import {stem}" in text
                                                    or f"from {stem} import" in text))
            if named and REPRODUCE + n not in found:
                found.add(REPRODUCE + n)
                todo.append(REPRODUCE + n)
    return found


def changed_measured(repo, commit, script=None):
    """(list of measured files changed from commit to HEAD, None) or (None, reason). With
    `script`, the only files of scripts/reproduce/ counted are those it uses (script_files)."""
    if not all(c in "0123456789abcdefABCDEF" for c in commit):
        return None, f"commit {commit!r} is not a commit id"
    found = git(repo, "rev-parse", "--verify", "--quiet", commit + "^{commit}")
    if found.returncode != 0:
        return None, f"commit {commit} is not in this clone's history"
    pathspecs = ["."] + [f":(exclude){p}" for p in EXCLUDED]
    diff = git(repo, "diff", "--name-only", found.stdout.strip(), "HEAD", "--", *pathspecs)
    if diff.returncode != 0:
        return None, f"git diff from {commit} failed: {diff.stderr.strip()}"
    changed = [line for line in diff.stdout.splitlines() if line.strip()]
    if script is not None:
        used = script_files(repo, script)
        changed = [c for c in changed if not c.startswith(REPRODUCE) or c in used]
    return changed, None


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=os.path.normpath(os.path.join(here, "..", "..")),
                        help="the git clone whose HEAD is compared (default: this one)")
    parser.add_argument("--results", help="the folder of results files (default: REPO/results)")
    args = parser.parse_args()
    results = args.results or os.path.join(args.repo, "results")
    if not os.path.isdir(results):
        print(f"stale.py: {results} is not a folder", file=sys.stderr)
        return 1
    head = git(args.repo, "rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        print(f"stale.py: {args.repo} is not a git clone: {head.stderr.strip()}", file=sys.stderr)
        return 1
    files = sorted(glob.glob(os.path.join(results, "*.json")))
    stale = 0
    for path in files:
        name = os.path.relpath(path, args.repo) if os.path.abspath(path).startswith(
            os.path.abspath(args.repo) + os.sep) else path
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print(f"stale: {name}: unreadable ({e})")
            stale += 1
            continue
        commit = recorded_commit(data)
        if commit is None:
            print(f"stale: {name}: records no commit")
            stale += 1
            continue
        changed, reason = changed_measured(args.repo, commit, own_script(args.repo, path, data))
        if changed is None:
            print(f"stale: {name}: {reason}")
            stale += 1
        elif changed:
            more = f", ... ({len(changed) - SHOWN} more)" if len(changed) > SHOWN else ""
            print(f"stale: {name}: commit {commit}, {len(changed)} measured files changed since: "
                  f"{', '.join(changed[:SHOWN])}{more}")
            stale += 1
    print(f"stale.py: {stale} of {len(files)} results files stale against HEAD "
          f"{head.stdout.strip()} (measured code: tracked files outside {', '.join(EXCLUDED)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
