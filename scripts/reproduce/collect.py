#!/usr/bin/env python3
"""Assembles a reproduce run's pieces into one JSON file (standard library only).

Usage: collect.py [--curves] OUT.json CLAIM WORKDIR RUN...
       collect.py --bench-runs OUT.json CLAIM WORKDIR NAME...
The second form writes {"runs": [...], "commands": [...]}: each NAME's `engram bench` JSON at
WORKDIR/NAME.json (bench_run) and the commands of WORKDIR/bench.cmd. In the first, each RUN is NAME=TRAIN_SECONDS, and WORKDIR holds NAME.train.txt (engram train's output),
NAME.metrics.jsonl and NAME.eval*.json (engram eval --json), and optionally NAME.jsonl (the
training traces: their header, with the training lengths, is kept as the run's "data") and
NAME.run.json (engram run --json: a query's call tree, kept as the run's "query"). --curves keeps each run's training
curve ("curve": at most 100 of its metrics lines, evenly spaced, the last always). The output is
written atomically.
"""
import glob
import gzip
import json
import os
import platform
import subprocess
import sys
import time


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    found = {"cpu": model, "cores": os.cpu_count(), "system": platform.platform()}
    # A GPU machine's device (the runs there name it): nvidia-smi's name, memory and driver.
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30).stdout.strip().splitlines()
        if gpu:
            found["gpu"] = gpu[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return found


def thin(lines, at_most=100):
    """At most `at_most` of `lines`, evenly spaced, keeping the first and the last."""
    if len(lines) <= at_most:
        return lines
    step = (len(lines) - 1) / (at_most - 1)
    return [lines[round(i * step)] for i in range(at_most)]


def main():
    args = sys.argv[1:]
    if args and args[0] == "--bench-runs":
        out, claim, work, names = args[1], args[2], args[3], args[4:]
        runs, commands = [], []
        for name in names:
            run, commands = bench_run(work, name)
            runs.append(run)
        write_result(out, claim, {"runs": runs, "commands": commands})
        return
    curves = "--curves" in args
    args = [a for a in args if a != "--curves"]
    out, claim, work = args[0], args[1], args[2]
    runs = []
    for spec in args[3:]:
        name, seconds = spec.split("=")
        run = {"name": name, "train_seconds": round(float(seconds), 1)}
        with open(os.path.join(work, name + ".cmd")) as f:
            run["commands"] = [line.rstrip("\n") for line in f if line.strip()]
        with open(os.path.join(work, name + ".metrics.jsonl")) as f:
            lines = [json.loads(l) for l in f if l.strip()]
        run["final_metrics"] = lines[-1] if lines else None
        if curves:
            run["curve"] = thin(lines)
        evals = []
        for path in sorted(glob.glob(os.path.join(work, name + ".eval*.json"))):
            with open(path) as f:
                data = json.load(f)
            for item in data if isinstance(data, list) else [data]:
                item["failures"] = item.get("failures", [])[:3]
                evals.append(item)
        run["eval"] = evals
        traces = os.path.join(work, name + ".jsonl")
        if os.path.exists(traces):
            with open(traces) as f:
                header = json.loads(f.readline() or "{}")
            if header.get("format") == "engram-traces":
                run["data"] = header
        query = os.path.join(work, name + ".run.json")
        if os.path.exists(query):
            with open(query) as f:
                run["query"] = json.load(f)
        runs.append(run)
    write_result(out, claim, {"runs": runs})


def store_trace(src, dst):
    """Copies the Chrome trace `src` to `dst` (.json.gz) gzipped without a timestamp, so the same
    trace always gives the same bytes; atomically."""
    with open(src, "rb") as f:
        data = gzip.compress(f.read(), mtime=0)
    with open(dst + ".tmp", "wb") as f:
        f.write(data)
    os.replace(dst + ".tmp", dst)


def head():
    """The checkout's commit, or "" where there is none (a tree without .git, no git) or where
    ENGRAM_REPRO_NO_GIT says the tree's .git is not its own (scripts/gpu-check.sh: a copy on
    the GPU machine, whose runs name their commit in ENGRAM_REPRO_COMMIT)."""
    if os.environ.get("ENGRAM_REPRO_NO_GIT"):
        return ""
    try:
        git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=os.path.dirname(os.path.abspath(__file__)))
    except OSError:
        return ""
    return git.stdout.strip() if git.returncode == 0 else ""


def bench_run(work, name):
    """`engram bench`'s JSON at WORK/NAME.json without its machine (write_result records it), and
    the commands of WORK/bench.cmd (common.sh's run_logged under the name `bench`)."""
    with open(os.path.join(work, name + ".json")) as f:
        run = json.load(f)
    run.pop("machine", None)
    commands = [l.strip() for l in open(os.path.join(work, "bench.cmd")) if l.strip()]
    return run, commands


def write_result(out, claim, figures, indent=2):
    """Writes {claim, date, commit, [commit_at_end], machine, **figures} to `out` atomically.

    `commit` is the commit the binary was built from (common.sh's ENGRAM_REPRO_COMMIT, from
    `engram --version`, which common.sh checks against the checkout); when HEAD moved while the
    run went on, `commit_at_end` is the commit checked out when the file was written. Whatever a results file says is written here or by its script:
    results/ is never edited by hand. indent=None writes one line (files of many numbers).
    """
    end = head()
    commit = os.environ.get("ENGRAM_REPRO_COMMIT", "") or end
    result = {
        "claim": claim,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit,
    }
    if end and not (commit.startswith(end) or end.startswith(commit)):
        result["commit_at_end"] = end
    result["machine"] = machine()
    result.update(figures)
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=indent)
        f.write("\n")
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
