#!/usr/bin/env bash
# Claim (out-of-order backprop, issue "Out-of-order backprop, host-side accumulation ..."):
# `engram bench dp`, 2 ranks with one compute thread each, the CIFAR ResNet-18 (per-rank batch
# 16) and the addition NPI (hidden 256, per-rank batch 8), schedules none, overlap and ooo (k
# chosen from the first step), beside PyTorch DDP with the same link emulation: loopback and
# emulated links of 10 Gb/s, 1 Gb/s and 100 Mb/s, then the ResNet alone on the link where its
# communication alone equals its compute alone (bytes per step over the first run's compute
# time). The claim row is the ResNet link whose communication alone is closest to its compute:
# ooo's speed-up over overlap, and its step against max(compute, communication) and against
# compute plus the CPU the loopback collectives take from the same cores. Timings are recorded,
# never asserted. Writes results/dp_ooo.json. --quick: one timed step, small batches.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/dp_ooo.json}
common=(--schedules none,overlap,ooo --steps 8 --warmup 2)
[ "$quick" = 1 ] && common=(--schedules none,overlap,ooo --steps 1 --warmup 2 --resnet-batch 4
                            --npi-batch 2 --hidden 32)
first_links=0,1250000000,125000000,12500000
[ "$quick" = 1 ] && first_links=0,125000000
run_logged bench bench dp --models resnet,npi --links "$first_links" "${common[@]}" \
  --json "$work/links.json" >&2
matched=$(/usr/bin/python3 - "$work/links.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
resnet = [r for r in rows if r["model"] == "resnet"]
compute = next(r["compute_seconds"] for r in resnet if r["schedule"] == "none")
moved = next(r["bytes_per_step"] for r in resnet if r["schedule"] == "overlap")
# Two ranks: a ring all-reduce moves each byte once through each rank's link.
print(round(moved / compute))
PY
)
run_logged bench bench dp --models resnet --links "$matched" "${common[@]}" \
  --json "$work/matched.json" >&2
/usr/bin/python3 - "$out" "$work" "$root/scripts/reproduce" <<'PY'
import json, os, sys
out, work, here = sys.argv[1:4]
sys.path.insert(0, here)
from collect import write_result
runs = []
for name in ("links", "matched"):
    with open(os.path.join(work, name + ".json")) as f:
        run = json.load(f)
    run.pop("machine", None)
    runs.append(run)
# The claim: the ResNet link whose communication alone is closest to its compute alone.
by_link = {}
for run in runs:
    for r in run["rows"]:
        if r["model"] == "resnet":
            by_link.setdefault(r["link_bandwidth"], {})[r["schedule"]] = r
candidates = [rows for rows in by_link.values() if "ooo" in rows and "overlap" in rows]
rows = min(candidates, key=lambda rows: abs(rows["ooo"]["communication_seconds"] -
                                            rows["ooo"]["compute_seconds"]))
ooo, overlap = rows["ooo"], rows["overlap"]
bound = max(ooo["compute_seconds"], ooo["communication_seconds"])
claim = {"link_bandwidth": ooo["link_bandwidth"], "link": ooo["link"],
         "compute_seconds": ooo["compute_seconds"],
         "communication_seconds": ooo["communication_seconds"],
         "communication_cpu_seconds": ooo["communication_cpu_seconds"],
         "overlap_step_seconds": overlap["step_seconds"], "ooo_step_seconds": ooo["step_seconds"],
         "ooo_k": ooo["ooo"]["k"], "ooo_layers": ooo["ooo"]["layers"],
         "ooo_speedup_over_overlap": overlap["step_seconds"] / ooo["step_seconds"],
         "ooo_step_over_max_compute_communication": ooo["step_seconds"] / bound,
         "ooo_step_over_compute_plus_communication_cpu":
             ooo["step_seconds"] / max(ooo["compute_seconds"] + ooo["communication_cpu_seconds"],
                                       ooo["communication_seconds"])}
commands = [l.strip() for l in open(os.path.join(work, "bench.cmd")) if l.strip()]
write_result(out, "out-of-order backprop (ooo) beside overlap and PyTorch DDP, emulated links",
             {"runs": runs, "ooo_claim": claim,
              "reproduce": {"script": "scripts/reproduce/dp_ooo.sh", "commands": commands}})
print(json.dumps(claim, indent=1))
PY
echo "wrote $out"
