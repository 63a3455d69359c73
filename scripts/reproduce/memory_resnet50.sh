#!/usr/bin/env bash
# Claims (issue 35's larger workload, on the CPU): ImageNet's ResNet-50 (bottleneck blocks,
# 224x224 synthetic images, 1000 classes, batch 8), every memory technique in one invocation,
# each row a fresh model from the same seed on the same batch: none, relu, recompute, swap,
# reuse, algo and all (relu + recompute + swap, every unit treated: no budget), beside
# torch.profiler's count of the same step and PyTorch's checkpointing of the same units
# (torch.utils.checkpoint, both modes). Every lossless row trains none's gradients bit for bit;
# algo is lossy, and its error is recorded beside what float32 rounding alone moves the same
# network's first gradients in PyTorch (bench/peers/resnet_rounding_peer.py). The activation
# peaks are exactly counted, so the rows' ratios are what the same techniques free on a GPU
# (scripts/reproduce/gpu_memory_resnet50.sh measures them there, where cuDNN's workspaces and
# the allocator's rounding join them). Timings are this machine's, recorded, never asserted.
# Writes results/memory_resnet50.json. --quick: batch 2 at 64x64, one measured step.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/memory_resnet50.json}
extra=(--batch 8 --steps 3)
if [ "$quick" = 1 ]; then
  extra=(--batch 2 --image-size 64 --steps 1)
fi
run_logged bench bench memory --workload resnet50 \
  --techniques none,relu,recompute,swap,reuse,algo,all --json "$work/bench.json" \
  "${extra[@]}" > "$work/bench.txt"
cat "$work/bench.txt" >&2
# The yardstick of the lossy algo row: how far float32 rounding alone moves the same network's
# first gradients in PyTorch (two convolution implementations; float32 against float64).
read -r batch size < <(/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["config"]
print(c["batch"], c["image_size"])' "$work/bench.json")
rounding=("$ENGRAM_VENV/bin/python" "$root/bench/peers/resnet_rounding_peer.py" --batch "$batch"
  --image-size "$size" --blocks 3,4,6,3 --bottleneck --imagenet-stem --num-classes 1000)
echo "+ ${rounding[*]}" >&2
"${rounding[@]}" > "$work/rounding.json"
/usr/bin/python3 - "$root" "$work" "$out" "${rounding[*]}" <<'PY'
import json, os, sys
root, work, out, rounding_command = sys.argv[1:5]
sys.path.insert(0, os.path.join(root, "scripts", "reproduce"))
from collect import bench_run, write_result

run, commands = bench_run(work, "bench")
with open(os.path.join(work, "rounding.json")) as f:
    rounding = json.load(f)
rounding["command"] = rounding_command.replace(root + "/", "")
write_result(out, "ResNet-50 at 224x224 on the CPU: every memory technique's activation peak and "
             "step time against none's, exactly counted, beside torch.profiler and "
             "torch.utils.checkpoint; float32 rounding's own gradient difference on the network",
             {"runs": [run], "commands": commands, "float32_rounding": rounding})
PY
echo "wrote $out"
