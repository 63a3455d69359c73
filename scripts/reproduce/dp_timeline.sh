#!/usr/bin/env bash
# Data for notebooks/dp.ipynb (issue 19): one data-parallel ResNet-18 step (2 ranks, per-rank
# batch 16, as dp_bench.sh) per gradient schedule (none, after, overlap) on an emulated 1 Gb/s
# link, where communication alone takes about as long as compute alone: engram bench dp --trace
# writes each rank's Chrome trace (phases, each layer's weight-gradient task, each bucket's
# all-reduce) into results/traces/dp-CONFIG-rankR.json.gz, listed in results/dp_timeline.json
# beside the step's figures. The schedules' step times at every link speed are dp_bench.sh's.
# --quick: batch 4, one step.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/dp_timeline.json}
traces=$(dirname "$out")/traces
link=125000000
extra=(--steps 2 --warmup 1)
[ "$quick" = 1 ] && extra=(--steps 1 --warmup 1 --resnet-batch 4)
mkdir -p "$traces" "$work/traces"
run_logged bench bench dp --models resnet --links "$link" --schedules none,after,overlap \
  --no-peer --trace "$work/traces" --json "$work/dp.json" "${extra[@]}" >&2
/usr/bin/python3 - "$out" "$work" "$traces" "$root/scripts/reproduce" <<'PY'
import glob, json, os, sys
out, work, traces, here = sys.argv[1:5]
sys.path.insert(0, here)
from collect import store_trace, write_result
with open(os.path.join(work, "dp.json")) as f:
    bench = json.load(f)
bench.pop("machine", None)
stored = []
for src in sorted(glob.glob(os.path.join(work, "traces", "*.json"))):
    dst = os.path.join(traces, "dp-" + os.path.basename(src) + ".gz")
    store_trace(src, dst)
    stored.append(os.path.relpath(dst, os.path.dirname(out)))
commands = [l.strip() for l in open(os.path.join(work, "bench.cmd")) if l.strip()]
write_result(out, "one data-parallel ResNet-18 step per gradient schedule on an emulated 1 Gb/s "
             "link, each rank's Chrome trace (data for notebooks/dp.ipynb)",
             {"bench": bench, "traces": stored,
              "reproduce": {"script": "scripts/reproduce/dp_timeline.sh", "commands": commands}})
PY
echo "wrote $out"
