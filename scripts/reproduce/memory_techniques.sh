#!/usr/bin/env bash
# Claims (issue 4, swap and recompute; every technique side by side). ResNet-18 (CIFAR layout,
# batch 32, 32x32 images), each row a fresh model from the same seed on the same batch:
#   memory_techniques.json  none, relu, recompute, swap, all with every unit treated (no budget),
#                           beside torch.profiler and PyTorch's own checkpointing of every unit
#                           (bench/peers/resnet_checkpoint_peer.py), in the same invocation;
#   memory_budget.json      none, recompute, swap, all under --budget 0.5x (half of none's
#                           activation peak), the planner choosing per unit (--explain's plans in
#                           the JSON);
#   memory_budget_tight.json  none, swap, all under --budget 0.33x (all reaches 0.322x at best);
#   memory_swap_bandwidth.json  none, swap with the spill file throttled to 1 GB/s: stall time of
#                           the slack schedule against on-demand swap-in.
# Every row: max_abs_grad_diff exactly 0. Writes the four files under results/ (--out FILE: the
# first there, the others beside it). --quick: small images and widths, one measured step, a
# budget of 0.7x (the figures are checked, not the claims' bounds).
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/memory_techniques.json}
dir=$(dirname "$out")
base=$(basename "$out" .json)
budget_out="$dir/${base%memory_techniques}memory_budget.json"
tight_out="$dir/${base%memory_techniques}memory_budget_tight.json"
bandwidth_out="$dir/${base%memory_techniques}memory_swap_bandwidth.json"
if [ "$base" = "${base%memory_techniques}" ]; then  # another name: files beside it
  budget_out="$dir/${base}_budget.json"
  tight_out="$dir/${base}_budget_tight.json"
  bandwidth_out="$dir/${base}_swap_bandwidth.json"
fi
extra=(--steps 3)
budget=0.5x
tight=0.33x
if [ "$quick" = 1 ]; then
  extra=(--batch 4 --image-size 16 --width 8 --steps 1)
  budget=0.7x  # at this size recompute alone cannot reach half
  tight=0.5x
fi
run_logged techniques bench memory --workload resnet --techniques none,relu,recompute,swap,all \
  --explain --json "$out" "${extra[@]}"
run_logged budget bench memory --workload resnet --techniques none,recompute,swap,all \
  --budget "$budget" --no-peer --explain --json "$budget_out" "${extra[@]}"
run_logged tight bench memory --workload resnet --techniques none,swap,all --budget "$tight" \
  --no-peer --explain --json "$tight_out" "${extra[@]}"
run_logged bandwidth bench memory --workload resnet --techniques none,swap --swap-bandwidth 1e9 \
  --no-peer --explain --json "$bandwidth_out" "${extra[@]}"
# Record how each file was made (script, commands, commit) inside it.
for pair in "techniques:$out" "budget:$budget_out" "tight:$tight_out" "bandwidth:$bandwidth_out"; do
  name=${pair%%:*}
  file=${pair#*:}
  /usr/bin/python3 - "$file" "$work/$name.cmd" "$ENGRAM_REPRO_COMMIT" <<'PY'
import json, os, sys
path, cmd_file, commit = sys.argv[1:4]
with open(path) as f:
    report = json.load(f)
report["reproduce"] = {"script": "scripts/reproduce/memory_techniques.sh", "commit": commit,
                       "commands": [line.strip() for line in open(cmd_file) if line.strip()]}
with open(path + ".tmp", "w") as f:
    json.dump(report, f, indent=2)
    f.write("\n")
os.replace(path + ".tmp", path)
PY
  echo "wrote $file"
done
