#!/usr/bin/env bash
# Claim: the exact memory accounting of a training step with no memory technique, the baseline that
# later techniques divide by. ResNet-18 (CIFAR layout, batch 32, 32x32 images): our
# activation_peak_bytes within 5% of what torch.profiler reports for the same network and batch
# (the Python peer, run in the same invocation); and the NPI (addition, batch 8 traces).
# Writes results/memory_resnet.json and results/memory_npi.json (--out FILE: the ResNet JSON there,
# the NPI JSON beside it). --quick: small images and widths, one measured step.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/memory_resnet.json}
case "$out" in
  *memory_resnet.json) npi_out="${out%memory_resnet.json}memory_npi.json" ;;
  *) npi_out="${out%.json}_npi.json" ;;
esac
resnet_extra=()
npi_extra=()
if [ "$quick" = 1 ]; then
  resnet_extra=(--batch 4 --image-size 16 --width 16 --steps 1)
  npi_extra=(--hidden 32 --steps 1)
fi
run_logged resnet bench memory --workload resnet --techniques none --json "$out" \
  "${resnet_extra[@]}"
run_logged npi bench memory --workload npi --techniques none --json "$npi_out" "${npi_extra[@]}"
# Record how each file was made (script, commands, commit) inside it.
for name in resnet npi; do
  file=$out
  [ "$name" = npi ] && file=$npi_out
  /usr/bin/python3 - "$file" "$work/$name.cmd" "$ENGRAM_REPRO_COMMIT" <<'PY'
import json, sys
path, cmd_file, commit = sys.argv[1:4]
with open(path) as f:
    report = json.load(f)
report["reproduce"] = {"script": "scripts/reproduce/memory_baseline.sh", "commit": commit,
                       "commands": [line.strip() for line in open(cmd_file) if line.strip()]}
with open(path + ".tmp", "w") as f:
    json.dump(report, f, indent=2)
    f.write("\n")
import os
os.replace(path + ".tmp", path)
PY
done
echo "wrote $out and $npi_out"
