#!/usr/bin/env bash
# Claim (host-side accumulation in chunks, issue "Out-of-order backprop, host-side accumulation
# ..."): `engram bench dp`, 2 ranks with one compute thread each, the CIFAR ResNet-18 (per-rank
# batch 16) and the addition NPI (hidden 256, per-rank batch 8), schedules overlap and host (its
# chunk searched on the first steps: 1, 2, 4, ... layers while a step gets faster), loopback and
# emulated links of 10 Gb/s, 1 Gb/s and 100 Mb/s: the chosen chunk, the search path and host's
# step beside overlap's at each link (no claim of which wins). Timings are recorded, never
# asserted. Writes results/dp_host.json. --quick: one timed step, small batches, two links.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/dp_host.json}
args=(--models resnet,npi --schedules overlap,host --steps 8 --warmup 2 --no-peer
      --links 0,1250000000,125000000,12500000)
[ "$quick" = 1 ] && args=(--models resnet,npi --schedules overlap,host --steps 1 --warmup 2
                          --no-peer --resnet-batch 4 --npi-batch 2 --hidden 32 --links 0,125000000)
run_logged bench bench dp "${args[@]}" --json "$work/host.json" >&2
/usr/bin/python3 - "$out" "$work" "$root/scripts/reproduce" <<'PY'
import sys
out, work, here = sys.argv[1:4]
sys.path.insert(0, here)
from collect import bench_run, write_result
run, commands = bench_run(work, "host")
write_result(out, "host-side accumulation in searched chunks of layers beside overlap",
             {"run": run, "reproduce": {"script": "scripts/reproduce/dp_host.sh",
                                        "commands": commands}})
PY
echo "wrote $out"
