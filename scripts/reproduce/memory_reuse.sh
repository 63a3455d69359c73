#!/usr/bin/env bash
# Claims (issue 18, fixed-structure memory reuse and swap that leaves memory). In one bench
# invocation each, every row a fresh model from the same seed on the same batch:
#   memory_reuse.json      ResNet-18 (CIFAR layout, batch 32): none, reuse, and each of relu,
#                          recompute and swap without and with reuse: the arena against the
#                          live-bytes lower bound, hit rate, step time against the same row
#                          without reuse, gradients against none;
#   memory_reuse_npi.json  NPI addition: none, reuse: the same figures on its packed batches;
#   memory_swap_rss.json   ResNet-18: none, swap, and swap throttled to 1 GB/s: the spill file's
#                          resident pages after each write and after the steps, each row's peak
#                          RSS above its start.
# Then NPI addition trained with and without --memory reuse: the model files compared byte for
# byte (recorded in memory_reuse_npi.json). Every file under results/ (--out FILE: the first
# there, the others beside it). --quick: small images and widths, one measured step.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/memory_reuse.json}
dir=$(dirname "$out")
base=$(basename "$out" .json)
npi_out="$dir/${base}_npi.json"
rss_out="$dir/${base%memory_reuse}memory_swap_rss.json"
[ "$base" = "${base%memory_reuse}" ] && rss_out="$dir/${base}_swap_rss.json"
extra=(--steps 5)
npi_extra=(--steps 5)
train_extra=(--steps 300)
if [ "$quick" = 1 ]; then
  extra=(--batch 4 --image-size 16 --width 8 --steps 1)
  npi_extra=(--steps 1 --hidden 32)
  train_extra=(--steps 20 --hidden 32)
fi
run_logged reuse bench memory --workload resnet --no-peer \
  --techniques none,reuse,relu,reuse+relu,recompute,reuse+recompute,swap,reuse+swap \
  --json "$out" "${extra[@]}"
run_logged npi bench memory --workload npi --no-peer --techniques none,reuse --json "$npi_out" \
  "${npi_extra[@]}"
run_logged rss bench memory --workload resnet --no-peer --techniques none,swap --json \
  "$work/swap.json" "${extra[@]}"
run_logged rss bench memory --workload resnet --no-peer --techniques none,swap \
  --swap-bandwidth 1e9 --json "$work/swap_1gbs.json" "${extra[@]}"
run_logged train data gen --task addition --out "$work/add.jsonl" --seed 1 > /dev/null
for memory in none reuse; do
  run_logged train train npi --task addition --data "$work/add.jsonl" --out "$work/$memory.pt" \
    --seed 1 --memory "$memory" --metrics "$work/$memory.jsonl" "${train_extra[@]}" > /dev/null
done
identical=false
cmp -s "$work/none.pt" "$work/reuse.pt" && identical=true
/usr/bin/python3 - "$root" "$work" "$out" "$npi_out" "$rss_out" "$identical" <<'PY'
import json, os, sys
root, work, out, npi_out, rss_out, identical = sys.argv[1:7]
sys.path.insert(0, os.path.join(root, "scripts", "reproduce"))
from collect import write_result

def commands(name):
    return [l.strip() for l in open(os.path.join(work, name + ".cmd")) if l.strip()]

def bench(path, name):
    with open(path) as f:
        report = json.load(f)
    report["reproduce"] = {"script": "scripts/reproduce/memory_reuse.sh",
                           "commands": commands(name)}
    return report

for path, name in ((out, "reuse"), (npi_out, "npi")):
    report = bench(path, name)
    if name == "npi":
        lines = [json.loads(l) for l in open(os.path.join(work, "reuse.jsonl")) if l.strip()]
        report["training"] = {
            "model_files_identical": identical == "true",
            "commands": commands("train"),
            "reuse_hit_rate_per_logged_step": [l.get("reuse_hit_rate") for l in lines],
        }
    write_result(path, f"bench memory with fixed-structure reuse ({name})", report)
runs = []
for file, throttle in (("swap.json", 0), ("swap_1gbs.json", 1e9)):
    run = bench(os.path.join(work, file), "rss")
    run["spill_throttle_bytes_per_second"] = throttle  # --swap-bandwidth; 0: none
    runs.append(run)
rss = {"runs": runs}
write_result(rss_out, "swap that leaves memory: spill-file residency and peak RSS", rss)
for path in (out, npi_out, rss_out):
    print("wrote", path)
PY
