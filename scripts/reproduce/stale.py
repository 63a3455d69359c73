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

Where the script is known and runs `engram` commands only, the parts of the tree that serve some
commands count only for the results that ran them: cli/commands/ by the commands the script's
lines run (`run_logged NAME CMD...` or `"$engram" CMD...`, in the lines that run: its own, and
the bodies of the shell functions of common.sh it calls), bench/ and its peers only where a
`bench` command ran, fuzz/ not at all, and of scripts/ outside reproduce/ only what the build
(scripts/build.sh) or the script's shell code (not its comments) names, and what those name. A
command the lines leave open (a variable in its place) counts every command it could be. A
script that runs something else (an engram_* executable, scripts/test.sh or scripts/demo.sh),
or no command seen, counts the whole tree, and tests/ too where it runs tests.

A file is stale when `git diff COMMIT HEAD` changes measured code, when its commit is not in
this clone's history, or when it records none. A change to comments alone (and docstrings, blank
lines: scripts/reproduce/code_text.py reads Python, C++, CUDA, shell and CMake) does not
count. Each stale file gets one line with its commit, the number of measured files changed and
the first few of them.

It names, it does not judge: the exit status is 0 whatever it finds (2 on a usage error, 1 when
git or DIR cannot be read). A stale file is not wrong; its figures are from older code, and
rerunning its script (the file's `reproduce` or its claim says which) makes it current.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from code_text import code_of  # noqa: E402

# Not measured code: the results themselves, prose, notebooks, tests and CI.
EXCLUDED = ["results", "docs", "README.md", "notebooks", "tests", "examples/*.py", ".ci", "*.md"]
SHOWN = 4  # changed files named per stale results file


def read(path):
    """The text of `path`, or "" when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


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
    claim = data.get("claim") if isinstance(data, dict) else None
    if not isinstance(script, str) and isinstance(claim, str):
        found = [w for w in claim.replace("`", " ").split() if w.startswith(REPRODUCE)]
        script = found[0] if found else None
    if isinstance(script, str):
        return script if os.path.isfile(os.path.join(repo, script)) else None
    stem = os.path.splitext(os.path.basename(name))[0]
    folder = os.path.join(repo, REPRODUCE)
    scripts = sorted(n for n in os.listdir(folder) if n.endswith(".sh"))
    if stem + ".sh" in scripts:
        return REPRODUCE + stem + ".sh"
    # The one script that names the file (memory_reuse.sh writes memory_swap_rss.json too) ...
    naming = [n for n in scripts if stem + ".json" in read(os.path.join(folder, n))]
    if len(naming) == 1:
        return REPRODUCE + naming[0]
    # ... else the script of a variant's stem (tbcnn_masked.sh's tbcnn_masked_modules_selected).
    parts = stem.split("_")
    for end in range(len(parts) - 1, 0, -1):
        if "_".join(parts[:end]) + ".sh" in scripts:
            return REPRODUCE + "_".join(parts[:end]) + ".sh"
    return None


def script_files(repo, script):
    """`script` and the files of scripts/reproduce/ it names (by file name, or a Python module
    by its import), followed through those it names in turn."""
    folder = os.path.join(repo, REPRODUCE)
    names = sorted(n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n)))
    found, todo = {script}, [script]
    while todo:
        text = read(os.path.join(repo, todo.pop()))
        for n in names:
            stem, ext = os.path.splitext(n)
            named = n in text or (ext == ".py" and (f"import {stem}" in text
                                                    or f"from {stem} import" in text))
            if named and REPRODUCE + n not in found:
                found.add(REPRODUCE + n)
                todo.append(REPRODUCE + n)
    return found


COMMANDS = "cli/commands/"
# Scripts that build and run the whole tree: a result made through them measures all of it.
WHOLE_TREE = ("scripts/test.sh", "scripts/demo.sh")
FUNCTION = re.compile(r"^(\w+)\(\)\s*\{")
# An engram command line: the binary's variable, or run_logged NAME; then up to two words.
INVOCATION = re.compile(r'(?:"?\$\{?engram\}?"?|\brun_logged\s+\S+)[ \t]+(\S+)(?:[ \t]+(\S+))?')


def command_table(repo):
    """{command words: file} for cli/commands/: `Command register_bench_memory(` is the command
    ("bench", "memory"), `register_run(` is ("run",)."""
    table = {}
    folder = os.path.join(repo, COMMANDS)
    for n in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        for name in re.findall(r"\bCommand\s+register_(\w+)\s*\(", read(os.path.join(folder, n))):
            table[tuple(name.split("_"))] = COMMANDS + n
    return table


def code_lines(text):
    """The lines of a shell script that are not comments."""
    return "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))


def lines_that_run(texts):
    """The code lines (no comments) of shell scripts `texts` that run: each script's lines
    outside its functions, and the bodies of the functions that those lines (or a body already
    counted) call. A function is `name() {` to a line that starts with `}`, or one line."""
    top, bodies = [], {}
    for text in texts:
        current = None
        for line in code_lines(text).splitlines():
            found = FUNCTION.match(line)
            if current is None and found:
                body = line[found.end():]
                if body.rstrip().endswith("}"):
                    bodies.setdefault(found.group(1), []).append(body.rstrip()[:-1])
                else:
                    current = bodies.setdefault(found.group(1), [])
                    current.append(body)
            elif current is not None and line.startswith("}"):
                current = None
            else:
                (top if current is None else current).append(line)
    running, called = list(top), set()
    while True:
        text = "\n".join(running)
        new = [f for f in bodies if f not in called and re.search(rf"\b{f}\b", text)]
        if not new:
            return running
        for f in new:
            called.add(f)
            running.extend(bodies[f])


def commands_run(lines, table):
    """The commands (keys of `table`) that `lines` run, or None when one is left open so far
    that it could be any command."""
    groups = {c[0] for c in table if len(c) == 2}
    used = set()
    for line in lines:
        for first, second in INVOCATION.findall(line):
            first, second = first.strip('"'), second.strip('"')
            if first.startswith(("$@", "${@", "$*")):
                continue  # run_logged's own body: the caller's line names the command
            if first.startswith("$"):
                return None
            if first in groups:
                if not second or second.startswith("$"):
                    used.update(c for c in table if c[0] == first)
                elif (first, second) in table:
                    used.add((first, second))
                else:
                    return None
            elif (first,) in table:
                used.add((first,))
    return used


def scripts_named(repo, texts, start=()):
    """The files of scripts/ outside reproduce/ that the shell `texts` name in their code (not
    in comments), with those these name in turn, beginning with `start`."""
    scripts = [f for f in git(repo, "ls-files", "scripts").stdout.split()
               if not f.startswith(REPRODUCE)]
    found = set(start)
    todo = [code_lines(t) for t in texts] + [code_lines(read(os.path.join(repo, f))) for f in start]
    while todo:
        text = todo.pop()
        for f in scripts:
            if f not in found and (f in text or os.path.basename(f) in text):
                found.add(f)
                todo.append(code_lines(read(os.path.join(repo, f))))
    return found


def measured_by(repo, script):
    """A predicate on a changed file (repository path): whether it is measured code of the
    results `script` made, beyond the exclusions that hold for every file (EXCLUDED but tests/,
    which counts only where the script runs tests)."""
    files = sorted(script_files(repo, script))
    texts = [read(os.path.join(repo, f)) for f in files]
    shell = [t for f, t in zip(files, texts) if f.endswith(".sh")]
    everything = "\n".join(texts)
    # tests/ counts where the script runs tests: a test executable, or the suite.
    tests = "engram_tests_" in everything or "scripts/test.sh" in everything

    def whole_tree(c):
        if c.startswith(REPRODUCE):
            return c in files
        return tests or not c.startswith("tests/")
    if re.search(r"\bengram_\w", everything) or any(w in everything for w in WHOLE_TREE):
        return whole_tree
    table = command_table(repo)
    used = commands_run(lines_that_run(shell), table)
    if not used:
        return whole_tree
    command_files = {table[c] for c in used}
    bench = any(c[0] == "bench" for c in used)
    # The build (scripts/build.sh and what it runs) and what the script's own code runs.
    scripts = scripts_named(repo, shell, start=("scripts/build.sh",))

    def measured(c):
        if c.startswith(REPRODUCE):
            return c in files
        if c.startswith("tests/"):
            return tests
        if c.startswith(COMMANDS):
            return c in command_files
        if c.startswith("bench/"):
            return bench
        if c.startswith("fuzz/"):
            return False
        if c.startswith("scripts/"):
            return c in scripts
        return True
    return measured


def read_blobs(repo, ids, cache):
    """Fills `cache` {blob id: text} with the blobs `ids` (one `git cat-file --batch`)."""
    wanted = sorted({i for i in ids if i not in cache and set(i) != {"0"}})
    if not wanted:
        return
    out = subprocess.run(["git", "-C", repo, "cat-file", "--batch"], capture_output=True,
                         input=("\n".join(wanted) + "\n").encode()).stdout
    pos = 0
    for blob in wanted:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        if len(header) < 3:  # "<id> missing"
            pos = end + 1
            continue
        size = int(header[2])
        # Bytes that are not UTF-8 stay distinct (a replacement character would make them equal).
        cache[blob] = out[end + 1:end + 1 + size].decode("utf-8", errors="surrogateescape")
        pos = end + 1 + size + 1


BLOBS = {}  # blob id: text, shared by every results file's diff
CODE = {}  # (path, blob id): code_of its text; HEAD's blobs recur in every results file's diff


def code_of_blob(path, blob):
    if (path, blob) not in CODE:
        CODE[path, blob] = code_of(path, BLOBS[blob])
    return CODE[path, blob]


def only_comments_changed(path, old, new):
    """Whether blobs `old` and `new` of `path`, read into BLOBS, hold the same code
    (code_text.code_of)."""
    if old not in BLOBS or new not in BLOBS:
        return False  # added, removed, or unreadable: a change
    before = code_of_blob(path, old)
    return before is not None and before == code_of_blob(path, new)


def changed_measured(repo, commit, script=None):
    """(list of measured files changed from commit to HEAD, None) or (None, reason). With
    `script`, what counts is what that script measures (measured_by); without, every file. A
    file whose change is only to comments and layout (code_text.code_of) is not counted."""
    if not all(c in "0123456789abcdefABCDEF" for c in commit):
        return None, f"commit {commit!r} is not a commit id"
    found = git(repo, "rev-parse", "--verify", "--quiet", commit + "^{commit}")
    if found.returncode != 0:
        return None, f"commit {commit} is not in this clone's history"
    # tests/ is left to the predicate: a script that runs tests measures them.
    pathspecs = ["."] + [f":(exclude){p}" for p in EXCLUDED if p != "tests"]
    diff = git(repo, "diff", "--raw", "--no-abbrev", "--no-renames", "-z",
               found.stdout.strip(), "HEAD", "--", *pathspecs)
    if diff.returncode != 0:
        return None, f"git diff from {commit} failed: {diff.stderr.strip()}"
    fields = diff.stdout.split("\0")
    changed = {}  # path: (old mode, new mode, old blob, new blob)
    for header, path in zip(fields[0::2], fields[1::2]):
        parts = header.lstrip(":").split()
        if len(parts) >= 4:
            changed[path] = tuple(parts[:4])
    measured = measured_by(repo, script) if script is not None else \
        (lambda c: not c.startswith("tests/"))
    counted = {c: changed[c] for c in sorted(changed) if measured(c)}
    read_blobs(repo, [blob for _, _, old, new in counted.values() for blob in (old, new)], BLOBS)
    # A file made executable (or no longer) runs differently whatever its text.
    return [c for c, (old_mode, new_mode, old, new) in counted.items()
            if old_mode != new_mode or not only_comments_changed(c, old, new)], None


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
          f"{head.stdout.strip()} (measured code: tracked files outside {', '.join(EXCLUDED)}; "
          "of cli/commands/, bench/, fuzz/ and scripts/, what each file's script runs; changes to "
          "comments alone not counted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
