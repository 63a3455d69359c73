#!/usr/bin/env bash
# Data for the example of a memory technique of one's own (docs/ARCHITECTURE.md, "Adding a
# technique of your own"): examples/techniques/Fp16Store.cpp, which `engram` links by one line of
# CMakeLists.txt, measured by `engram bench memory` beside the built-in relu with no other change.
# ResNet-18 (CIFAR layout, batch 32, 32x32 images), techniques none, relu and fp16 trained from
# the same seed on the same batch: each row's activation peak against none's, its time ratio,
# whether it is lossless, and the gradient error of the lossy fp16 (first_step_grad_rel_l2_diff,
# max_abs_grad_diff). Writes results/memory_example_technique.json (--out FILE: there).
# --quick: small images and widths, one measured step.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/memory_example_technique.json}
extra=(--steps 3)
if [ "$quick" = 1 ]; then
  extra=(--batch 4 --image-size 16 --width 8 --steps 1)
fi
run_logged example bench memory --workload resnet --techniques none,relu,fp16 --no-peer \
  --json "$out" "${extra[@]}"
# Record how the file was made (script, commands, commit) inside it.
/usr/bin/python3 - "$out" "$work/example.cmd" "$ENGRAM_REPRO_COMMIT" <<'PY'
import json, os, sys
path, cmd_file, commit = sys.argv[1:4]
with open(path) as f:
    report = json.load(f)
report["reproduce"] = {"script": "scripts/reproduce/memory_example_technique.sh",
                       "commit": commit,
                       "commands": [line.strip() for line in open(cmd_file) if line.strip()]}
with open(path + ".tmp", "w") as f:
    json.dump(report, f, indent=2)
    f.write("\n")
os.replace(path + ".tmp", path)
PY
echo "wrote $out"
