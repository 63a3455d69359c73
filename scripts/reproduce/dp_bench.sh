#!/usr/bin/env bash
# Benchmark (timings are recorded, never asserted): `engram bench dp` on this machine, 2 ranks
# with one compute thread each, the CIFAR ResNet-18 (per-rank batch 16) and the addition NPI
# (hidden 256, per-rank batch 8), loopback and emulated links of 10 Gb/s, 1 Gb/s and 100 Mb/s,
# every schedule (none, after, overlap, ooo, host), beside PyTorch DDP with the same emulation;
# once with the default buckets (25 MiB, first 1 MiB, as DDP) and once with 2 MiB buckets (both
# sides).
# Writes results/dp_bench.json. --quick: one timed step, two links.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/dp_bench.json}
extra=()
[ "$quick" = 1 ] && extra=(--steps 1 --warmup 1 --links 0,125000000 --resnet-batch 4)
for mb in 25 2; do
  run_logged bench bench dp --bucket-mb "$mb" --json "$work/bench$mb.json" "${extra[@]}" >&2
done
/usr/bin/python3 - "$out" "$work" "$root/scripts/reproduce" <<'PY'
import json, os, sys
out, work, here = sys.argv[1:4]
sys.path.insert(0, here)
from collect import write_result
runs = []
for mb in ("25", "2"):
    with open(os.path.join(work, f"bench{mb}.json")) as f:
        run = json.load(f)
    run.pop("machine", None)
    runs.append(run)
commands = [l.strip() for l in open(os.path.join(work, "bench.cmd")) if l.strip()]
write_result(out, "data-parallel step: Engram's schedules beside PyTorch DDP, emulated links",
             {"runs": runs, "reproduce": {"script": "scripts/reproduce/dp_bench.sh",
                                          "commands": commands}})
PY
echo "wrote $out"
