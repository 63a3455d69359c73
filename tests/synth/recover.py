"""Every function of tests/synth/functions.py: `engram synth` recovers the program its
`# expect:` line names (NEW: a primitive of the function's own, not the library's), and the
program agrees with the function on every checked random list.

    python3 recover.py ENGRAM_BINARY [--checks N] [--check-length L]
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def expectations(path):
    pairs = []
    lines = open(path).read().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"# expect: (.+)$", line)
        if m:
            name = re.match(r"def (\w+)\(", lines[i + 1]).group(1)
            pairs.append((name, m.group(1).strip()))
    return pairs


def matches(expected, got, function):
    pattern = re.escape(expected).replace("NEW", rf"{function}_(map|filter|fold|scan|zipwith)_\d+(_\d+)?")
    return re.fullmatch(pattern, got) is not None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("engram")
    parser.add_argument("--checks", type=int, default=1000)
    parser.add_argument("--check-length", type=int, default=100)
    a = parser.parse_args()
    source = os.path.join(HERE, "functions.py")
    failures = 0
    cases = expectations(source)
    for name, expected in cases:
        run = subprocess.run([a.engram, "synth", "--source", source, "--function", name, "--json",
                              "--checks", str(a.checks), "--check-length", str(a.check_length)],
                             capture_output=True, text=True, timeout=300)
        if run.returncode != 0 and not run.stdout:
            print(f"FAIL {name}: exit {run.returncode}: {run.stderr.strip()}")
            failures += 1
            continue
        report = json.loads(run.stdout)
        got, check = report["expression"], report["check"]
        ok = matches(expected, got, name) and check["agreed"] == check["lists"] == a.checks
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {got}  ({check['agreed']}/{check['lists']} lists)"
              + ("" if ok else f"  expected {expected}"))
        failures += 0 if ok else 1
    print(f"{len(cases) - failures} of {len(cases)} functions recovered as expected")
    return 1 if failures or len(cases) < 25 else 0


if __name__ == "__main__":
    sys.exit(main())
