#!/usr/bin/env python3
"""recognizer_check.py OBSERVED.jsonl [--label FUNCTION=CLASS ...]: recognizer.sh's expectations,
fixed in advance by what each function computes (LABELS), never by what the TBCNN answered.

Each line of OBSERVED is one `engram synth --recognizer tbcnn` run: {"model", "classes" (the
model's classes), "function", "read" (the class `engram classify --function` gives first),
"exit", "stdout", "stderr", "checks"}. Every function of LABELS must be observed with both
models:
  all       a loop-task model trained on every class: it must read the function as its label, and
            synth must go on (exit 0) with a JSON whose recognizer is the TBCNN at that stage,
            whose program's outermost stage is the label and whose check agreed on every list;
  without   a model trained on classes that do not include the labels (map and zipwith): it must
            read another class, one of its own, and synth must stop (exit 1) naming that class and
            the trace's program, with nothing on stdout.
--label FUNCTION=CLASS replaces a label (tests/claims_fail_on_spoiled.py flips one to show the
check failing). Exit 0 when every expectation holds, 1 naming the first that does not.
"""
import argparse
import json
import sys

# What each function of recognizer.sh's f.py computes: its trace's outermost stage.
LABELS = {"evens": "filter", "total": "fold"}


def check(observed, labels):
    seen = set()
    for o in observed:
        fn, model, read, label = o["function"], o["model"], o["read"], labels.get(o["function"])
        where = f"{fn} with the {model} model"
        if label is None:
            return f"{where}: no known label for {fn}"
        seen.add((fn, model))
        if model == "all":
            if read != label:
                return f"{where}: the TBCNN reads {read}, the function computes {label}"
            if o["exit"] != 0:
                return f"{where}: synth exit {o['exit']}, expected 0: {o['stderr']}"
            try:
                r = json.loads(o["stdout"])
            except ValueError:
                return f"{where}: synth printed no JSON: {o['stdout'][:200]}"
            rec = r.get("recognizer", {})
            if rec.get("name") != "tbcnn" or rec.get("stage") != label:
                return f"{where}: recognizer {rec}, expected the tbcnn at stage {label}"
            if not 0 < rec.get("probability", 0) <= 1:
                return f"{where}: probability {rec.get('probability')}"
            if r.get("shape", "").split("(")[0] != label:
                return f"{where}: program {r.get('shape')}, expected {label}(...)"
            if r.get("check", {}).get("agreed") != o["checks"]:
                return f"{where}: check {r.get('check')}, expected {o['checks']} lists agreed"
        elif model == "without":
            if label in o["classes"]:
                return f"{where}: the model's classes {o['classes']} include {label}"
            if read not in o["classes"] or read == label:
                return f"{where}: the TBCNN reads {read}, expected one of {o['classes']}"
            if o["exit"] != 1:
                return f"{where}: synth exit {o['exit']}, expected 1 (refused)"
            if f"the tbcnn recogniser reads the loop of {fn} as {read}" not in o["stderr"]:
                return f"{where}: the refusal does not name the TBCNN's class: {o['stderr']}"
            if f"computes {label}(" not in o["stderr"]:
                return f"{where}: the refusal does not name the trace's {label}: {o['stderr']}"
            if o["stdout"].strip():
                return f"{where}: output on a refusal: {o['stdout'][:200]}"
        else:
            return f"{where}: unknown model kind {model}"
    missing = sorted({(fn, m) for fn in labels for m in ("all", "without")} - seen)
    if missing:
        return f"not observed: {missing}"
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("observed")
    parser.add_argument("--label", action="append", default=[], metavar="FUNCTION=CLASS")
    args = parser.parse_args()
    labels = dict(LABELS)
    for item in args.label:
        fn, _, cls = item.partition("=")
        labels[fn] = cls
    with open(args.observed) as f:
        observed = [json.loads(line) for line in f if line.strip()]
    problem = check(observed, labels)
    if problem:
        print(f"recognizer: {problem}", file=sys.stderr)
        return 1
    print(f"recognizer: {len(observed)} runs as their functions' labels {labels} call for")
    return 0


if __name__ == "__main__":
    sys.exit(main())
