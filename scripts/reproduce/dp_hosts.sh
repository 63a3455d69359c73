#!/usr/bin/env bash
# Claim (issue "Real links between separate hosts"): `engram bench dp --hosts netns` on 2 ranks,
# each on a host of its own (a network namespace, a veth through a bridge), one compute thread
# each, the CIFAR ResNet-18 (per-rank batch 16) and the addition NPI (hidden 256, per-rank
# batch 8), schedules after, overlap and ooo, beside PyTorch DDP: every link measured twice, as
# the sleep model emulates it on loopback and as a tbf shaper on each host's link; unshaped,
# 1 Gb/s, 200 Mb/s and 100 Mb/s fitted, 400 Mb/s predicted from them (the what-if of each
# kind) and measured; per configuration, the median of 10 steps (of each step's slowest rank:
# a mean of 5 was moved by a fifth by one slow step). Needs root. Timings are recorded, never
# asserted.
# Writes results/dp_hosts.json. --quick: one timed step, small batches, two links.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/dp_hosts.json}
args=(--hosts netns --models resnet,npi --schedules after,overlap,ooo --steps 10 --warmup 2
      --links 0,125000000,25000000,12500000 --predict-link 50000000)
[ "$quick" = 1 ] && args=(--hosts netns --models resnet,npi --schedules overlap,ooo --steps 1
                          --warmup 1 --resnet-batch 2 --npi-batch 2 --hidden 32
                          --links 0,250000000 --predict-link 125000000)
run_logged bench bench dp "${args[@]}" --json "$work/hosts.json" >&2
/usr/bin/python3 - "$out" "$work" "$root/scripts/reproduce" <<'PY'
import sys
out, work, here = sys.argv[1:4]
sys.path.insert(0, here)
from collect import bench_run, write_result
run, commands = bench_run(work, "hosts")
shaped = [p for p in run["link_predictions"] if p["link_kind"] == "shaped"]
write_result(out, "shaped links between hosts: the what-if on a real link, beside the sleep model",
             {"run": run,
              "max_error_shaped": max(p["error"] for p in shaped),
              "max_sleep_model_difference": max(p["sleep_model_difference"] for p in shaped),
              "reproduce": {"script": "scripts/reproduce/dp_hosts.sh", "commands": commands}})
for p in shaped:
    print(p["model"], p["schedule"], "error %.1f%%" % (100 * p["error"]),
          "sleep model off by %.1f%%" % (100 * p["sleep_model_difference"]))
PY
echo "wrote $out"
