"""Finishes a GPU benchmark's results file (relu_cuda.sh, cudnn_conv.sh): reads the report the
benchmark wrote to OUT.partial, refuses one that says "skipped" (no device) or a machine whose
GPU nvidia-smi does not name (OUT is left as it was, OUT.partial removed either way), adds how
it was made (script, commit, command, and the machine with its GPU: collect.py's machine()) and
writes OUT atomically.

    python3 gpu_result.py OUT COMMIT SCRIPT COMMAND
"""
import json
import os
import sys

from collect import machine


def main(out, commit, script, command):
    with open(out + ".partial") as f:
        report = json.load(f)
    os.remove(out + ".partial")
    if report.get("skipped"):
        sys.exit(f"{script}: no GPU here ({report.get('reason')}); {out} left as it was")
    found = machine()
    if not found.get("gpu"):
        sys.exit(f"{script}: nvidia-smi names no GPU here, and the results name the device they "
                 f"measured; {out} left as it was")
    report["reproduce"] = {
        "script": script, "commit": commit,
        "commands": [command.replace(out + ".partial", os.path.basename(out))],
        "machine": found}
    with open(out + ".tmp", "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print("usage: gpu_result.py OUT COMMIT SCRIPT COMMAND", file=sys.stderr)
        sys.exit(2)
    main(*sys.argv[1:])
