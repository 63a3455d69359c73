"""The trace recogniser on loops it has never seen: synth/python/loop_corpus.py writes N random
functions per class (map, filter, fold, scan, zipwith) in varied styles and names; `engram synth`
must recover a program whose outermost stage is the class, agreeing with the function on every
checked list.

    python3 generated.py ENGRAM_BINARY [--per-class N] [--seed S]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR = os.path.join(HERE, "..", "..", "synth", "python", "loop_corpus.py")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("engram")
    parser.add_argument("--per-class", type=int, default=6)
    parser.add_argument("--seed", type=int, default=7)
    a = parser.parse_args()
    failures = total = 0
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, GENERATOR, "--out", out, "--per-class", str(a.per_class),
                        "--seed", str(a.seed)], check=True)
        for cls in sorted(os.listdir(out)):
            for name in sorted(os.listdir(os.path.join(out, cls))):
                path = os.path.join(out, cls, name)
                function = re.findall(r"^def (\w+)\(", open(path).read(), re.M)[-1]
                run = subprocess.run([a.engram, "synth", "--source", path, "--function", function,
                                      "--json", "--checks", "100", "--check-length", "50"],
                                     capture_output=True, text=True, timeout=300)
                total += 1
                if not run.stdout:
                    print(f"FAIL {cls}/{name}: {run.stderr.strip()}\n{open(path).read()}")
                    failures += 1
                    continue
                r = json.loads(run.stdout)
                ok = r["shape"].split("(")[0] == cls and r["check"]["agreed"] == r["check"]["lists"]
                if not ok:
                    print(f"FAIL {cls}/{name}: {r['expression']} {r['check']}\n{open(path).read()}")
                failures += 0 if ok else 1
    print(f"{total - failures} of {total} generated functions recovered with their class")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
