"""Finishes a GPU benchmark's results file (relu_cuda.sh, cudnn_conv.sh): reads the report the
benchmark wrote to OUT.partial, refuses one that says "skipped" (no device: OUT is left as it
was), adds how it was made (script, commit, command, machine) and writes OUT atomically.

    python3 gpu_result.py OUT COMMIT GPU SCRIPT COMMAND
"""
import json
import os
import sys

from collect import machine


def main(out, commit, gpu, script, command):
    with open(out + ".partial") as f:
        report = json.load(f)
    os.remove(out + ".partial")
    if report.get("skipped"):
        sys.exit(f"{script}: no GPU here ({report.get('reason')}); {out} left as it was")
    report["reproduce"] = {
        "script": script, "commit": commit,
        "commands": [command.replace(out + ".partial", os.path.basename(out))],
        "machine": {**machine(), "gpu": gpu}}
    with open(out + ".tmp", "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
