#!/usr/bin/env bash
# Data for notebooks/memory.ipynb (issue 19): one measured ResNet-18 step (CIFAR layout, batch 32,
# as memory_techniques.sh) per memory technique, none, relu, recompute, swap and all (every unit
# treated, no budget), each written by engram bench memory --trace as a Chrome trace (its spans
# and the live bytes stacked by tag over the step) into results/traces/memory-TECHNIQUE.json.gz,
# and results/memory_timeline.json listing them beside each row's figures (commit, commands and
# machine inside). --quick: small images and widths, into a temporary folder beside --out.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/memory_timeline.json}
traces=$(dirname "$out")/traces
extra=(--steps 1)
if [ "$quick" = 1 ]; then
  extra=(--steps 1 --batch 4 --image-size 16 --width 8)
fi
mkdir -p "$traces"
techniques=(none relu recompute swap all)
for t in "${techniques[@]}"; do
  run_logged bench bench memory --workload resnet --techniques "$t" --no-peer \
    --json "$work/$t.json" --trace "$work/memory-$t.json" "${extra[@]}" > /dev/null
done
/usr/bin/python3 - "$out" "$work" "$traces" "$root/scripts/reproduce" "${techniques[@]}" <<'PY'
import json, os, sys
out, work, traces, here = sys.argv[1:5]
techniques = sys.argv[5:]
sys.path.insert(0, here)
from collect import store_trace, write_result
rows = []
for t in techniques:
    with open(os.path.join(work, t + ".json")) as f:
        bench = json.load(f)
    row = bench["results"][0]
    trace = os.path.join(traces, f"memory-{t}.json.gz")
    store_trace(os.path.join(work, f"memory-{t}.json"), trace)
    rows.append({"technique": t,
                 "trace": os.path.relpath(trace, os.path.dirname(out)),
                 "step_ms": row["step_ms"],
                 "peak_bytes": row["peak_bytes"],
                 "activation_peak_bytes": row["activation_peak_bytes"],
                 "live_bytes_by_tag_at_activation_peak": row["live_bytes_by_tag_at_activation_peak"]})
    config = bench["config"]
commands = [l.strip() for l in open(os.path.join(work, "bench.cmd")) if l.strip()]
write_result(out, "one ResNet-18 training step per memory technique as a Chrome trace of live "
             "bytes by tag (data for notebooks/memory.ipynb)",
             {"config": config, "rows": rows,
              "reproduce": {"script": "scripts/reproduce/memory_timeline.sh",
                            "commands": commands}})
PY
echo "wrote $out"
