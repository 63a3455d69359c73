#!/usr/bin/env bash
# Claim (the link what-if, issue "Out-of-order backprop, host-side accumulation ..."): `engram
# bench dp --predict-link` on 2 ranks with one compute thread each, the CIFAR ResNet-18
# (per-rank batch 16) and the addition NPI (hidden 256, per-rank batch 8), schedules after,
# overlap and ooo: each schedule's step on 400 Mb/s (between measured links) and on 100 Mb/s
# (beyond them) predicted from the steps on loopback, 10 Gb/s, 2 Gb/s, 1 Gb/s and 200 Mb/s, then
# measured there; the error of each prediction. Timings are recorded, never asserted. Writes
# results/dp_predict.json. --quick: one timed step, small batches, fewer links.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/dp_predict.json}
args=(--models resnet,npi --schedules after,overlap,ooo --steps 5 --warmup 2 --no-peer
      --links 0,1250000000,250000000,125000000,25000000 --predict-link 50000000,12500000)
[ "$quick" = 1 ] && args=(--models resnet,npi --schedules overlap,ooo --steps 1 --warmup 2 --no-peer
                          --resnet-batch 4 --npi-batch 2 --hidden 32 --links 0,125000000
                          --predict-link 50000000)
run_logged bench bench dp "${args[@]}" --json "$work/predict.json" >&2
/usr/bin/python3 - "$out" "$work" "$root/scripts/reproduce" <<'PY'
import sys
out, work, here = sys.argv[1:4]
sys.path.insert(0, here)
from collect import bench_run, write_result
run, commands = bench_run(work, "predict")
errors = [p["error"] for p in run["link_predictions"]]
write_result(out, "link what-if: steps on unmeasured links predicted from measured ones",
             {"run": run, "max_error": max(errors),
              "reproduce": {"script": "scripts/reproduce/dp_predict.sh", "commands": commands}})
print("largest error", max(errors))
PY
echo "wrote $out"
