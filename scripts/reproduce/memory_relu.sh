#!/usr/bin/env bash
# Claim (issue 4, ReLU compression): ResNet-18 (CIFAR layout, batch 32, 32x32 images), techniques
# none and relu trained from the same seed on the same batch: max_abs_grad_diff exactly 0 in both
# rows; relu's activation-peak saving within 5% of what bitmap plus values predicts from the
# measured sparsity (results.1.relu.saving_vs_prediction in 0.95..1.05) at time_ratio <= 1.10;
# the compressed format within 1% of bitmap plus values; the CPU kernels' throughput against
# memcpy (relu_kernels). Writes results/memory_relu.json (--out FILE: there). --quick: small
# images and widths, one measured step (the figures are checked, not the claim's bounds).
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/memory_relu.json}
extra=(--steps 3)
if [ "$quick" = 1 ]; then
  extra=(--batch 4 --image-size 16 --width 16 --steps 1)
fi
run_logged relu bench memory --workload resnet --techniques none,relu --no-peer --json "$out" \
  "${extra[@]}"
# Record how the file was made (script, commands, commit) inside it.
/usr/bin/python3 - "$out" "$work/relu.cmd" "$ENGRAM_REPRO_COMMIT" <<'PY'
import json, os, sys
path, cmd_file, commit = sys.argv[1:4]
with open(path) as f:
    report = json.load(f)
report["reproduce"] = {"script": "scripts/reproduce/memory_relu.sh", "commit": commit,
                       "commands": [line.strip() for line in open(cmd_file) if line.strip()]}
with open(path + ".tmp", "w") as f:
    json.dump(report, f, indent=2)
    f.write("\n")
os.replace(path + ".tmp", path)
PY
echo "wrote $out"
