#!/usr/bin/env python3
"""Assembles npi_sample_efficiency.sh's runs into one JSON file (standard library only).

Usage:
  sample_efficiency.py OUT.json CLAIM WORKDIR RUN...
  sample_efficiency.py --failing TASK WORKDIR RUN...
where each RUN is "NAME|TASK|SEED|BUDGET|REMEDY" (REMEDY empty for the default training) and
WORKDIR holds NAME.done, NAME.cmd, NAME.metrics.jsonl, NAME.jsonl and NAME.eval.json.

The key length of a task is its second evaluation length (100; in --quick runs the second of
theirs) and the long length its third (1000), if any. --failing prints "BUDGET SEED,SEED" for the
largest budget at which some seed of TASK's default training is inexact at the key length (the
failing seeds), or nothing.
"""
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collect import write_result  # noqa: E402

CALL = re.compile(r"^([A-Z_0-9]+)(?:\((.*)\))?$")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def parse_runs(work, specs):
    runs = []
    for spec in specs:
        name, task, seed, budget, remedy = spec.split("|")
        done = os.path.join(work, name + ".done")
        if not os.path.exists(done):
            raise SystemExit(f"sample_efficiency.py: run {name} is not done ({done})")
        run = {"name": name, "task": task, "seed": int(seed), "budget": int(budget),
               "remedy": remedy or None}
        run.update(read_json(done))
        with open(os.path.join(work, name + ".cmd")) as f:
            run["commands"] = [line.rstrip("\n") for line in f if line.strip()]
        with open(os.path.join(work, name + ".metrics.jsonl")) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        run["final_metrics"] = lines[-1] if lines else None
        with open(os.path.join(work, name + ".jsonl")) as f:
            run["data"] = json.loads(f.readline())
        evals = read_json(os.path.join(work, name + ".eval.json"))
        run["eval"] = evals if isinstance(evals, list) else [evals]
        runs.append(run)
    return runs


def divergence(failure):
    """The kind of mistake at a failure's first divergence from the reference trace."""
    want, got = failure.get("expected_call", ""), failure.get("generated_call", "")
    if not want and not got:
        return "the reference's calls, a wrong answer"
    if not got:
        return f"ends where {want.split('(')[0]} is due"
    if not want:
        return f"calls {got.split('(')[0]} after the program's end"
    w, g = CALL.match(want), CALL.match(got)
    if not w or not g:
        return f"{want} -> {got}"
    if w.group(1) != g.group(1):
        return f"calls {g.group(1)} where {w.group(1)} is due"
    if w.group(1) == "WRITE":
        wa, ga = (w.group(2) or "").split(","), (g.group(2) or "").split(",")
        if len(wa) == 2 and len(ga) == 2 and wa[0] == ga[0]:
            try:
                off = (int(ga[1]) - int(wa[1])) % 10
                return "writes a digit one too high" if off == 1 else \
                    "writes a digit one too low" if off == 9 else "writes another wrong digit"
            except ValueError:
                pass
    return f"{w.group(1)} with a wrong argument"


def lengths_of(run):
    return [e["length"] for e in run["eval"]]


def accuracy_at(run, length):
    for e in run["eval"]:
        if e["length"] == length:
            return e["accuracy"]
    raise SystemExit(f"sample_efficiency.py: run {run['name']} has no evaluation at {length}")


def key_lengths(run):
    ls = lengths_of(run)
    return (ls[1] if len(ls) > 1 else ls[0]), (ls[2] if len(ls) > 2 else None)


def failing(task, runs):
    by_budget = collections.defaultdict(list)
    for r in runs:
        if r["task"] == task and not r["remedy"]:
            key, _ = key_lengths(r)
            if accuracy_at(r, key) < 1.0:
                by_budget[r["budget"]].append(r["seed"])
    if by_budget:
        budget = max(by_budget)
        print(budget, ",".join(str(s) for s in sorted(by_budget[budget])))


def summarize(runs):
    tasks = []
    for task in dict.fromkeys(r["task"] for r in runs):
        plain = [r for r in runs if r["task"] == task and not r["remedy"]]
        key, long = key_lengths(plain[0])
        budgets = sorted({r["budget"] for r in plain}, reverse=True)
        rows = []
        for b in budgets:
            at = sorted((r for r in plain if r["budget"] == b), key=lambda r: r["seed"])
            rows.append({
                "budget": b,
                "seeds": [r["seed"] for r in at],
                "accuracy": {str(length): [accuracy_at(r, length) for r in at]
                             for length in lengths_of(at[0])},
                "train_seconds": [r["train_seconds"] for r in at],
            })

        def smallest_exact(length):
            """The smallest budget from which on (it and every larger one) all seeds are exact."""
            if length is None:
                return None
            exact = [row["budget"] for row in rows
                     if all(a == 1.0 for a in row["accuracy"][str(length)])]
            # The smallest budget from which on every larger budget is exact too.
            best = None
            for row in rows:  # largest budget first
                if row["budget"] in exact:
                    best = row["budget"]
                else:
                    break
            return best

        diagnosis = []
        for row in rows:
            at = [r for r in plain if r["budget"] == row["budget"]]
            kinds = collections.Counter()
            listed = wrong = 0
            for r in at:
                for e in r["eval"]:
                    wrong += e["count"] - e["correct"]
                    for f in e.get("failures", []):
                        kinds[divergence(f)] += 1
                        listed += 1
            if listed:
                # `engram eval npi --json` lists the first 10 failures of each length: the kinds
                # are those of the listed ones, over every seed and length of the budget.
                diagnosis.append({"budget": row["budget"], "wrong_answers": wrong,
                                  "failures_listed": listed,
                                  "first_divergences_of_listed": dict(kinds.most_common())})
        tasks.append({
            "task": task,
            "key_length": key,
            "long_length": long,
            "rows": rows,
            "smallest_budget_exact_at_key_length": smallest_exact(key),
            "smallest_budget_exact_at_long_length": smallest_exact(long),
            "diagnosis": diagnosis,
        })
    remedies = []
    for r in runs:
        if not r["remedy"]:
            continue
        base = next((p for p in runs if not p["remedy"] and p["task"] == r["task"]
                     and p["seed"] == r["seed"] and p["budget"] == r["budget"]), None)
        remedies.append({
            "task": r["task"], "budget": r["budget"], "seed": r["seed"], "remedy": r["remedy"],
            "accuracy": {str(e["length"]): e["accuracy"] for e in r["eval"]},
            "default_accuracy": {str(e["length"]): e["accuracy"] for e in base["eval"]}
            if base else None,
            "train_seconds": r["train_seconds"],
        })
    return tasks, remedies


def main():
    args = sys.argv[1:]
    if args and args[0] == "--failing":
        task, work = args[1], args[2]
        failing(task, parse_runs(work, args[3:]))
        return
    out, claim, work = args[0], args[1], args[2]
    runs = parse_runs(work, args[3:])
    tasks, remedies = summarize(runs)
    for r in runs:  # the first three failures per evaluation are enough to read
        for e in r["eval"]:
            e["failures"] = e.get("failures", [])[:3]
    write_result(out, claim, {"tasks": tasks, "remedies": remedies, "runs": runs})


if __name__ == "__main__":
    main()
