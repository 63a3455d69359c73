#!/usr/bin/env bash
# Claim (out-of-order backprop in one process, issue "Out-of-order backprop, host-side
# accumulation ..."): the addition NPI (hidden 256, batch 32) trained for 200 steps three ways,
# each twice, alternating: one intra-op thread; two intra-op threads; and --ooo-threads 2 (the
# weight gradients on a second thread while the input-gradient chain goes on, each thread with
# one intra-op thread). The throughput of each (the faster of its two runs), --ooo-threads 2
# against the best of the other two, and whether its model file equals the one-thread run's
# byte for byte (the same gradients). Timings are recorded, never asserted. Writes
# results/npi_ooo_threads.json. --quick: hidden 32, 10 steps, one run each.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/npi_ooo_threads.json}
steps=200 hidden=256 batch=32 repeats=2
[ "$quick" = 1 ] && steps=10 hidden=32 batch=8 repeats=1
run_logged data data gen --task addition --out "$work/addition.jsonl" > /dev/null
runs=()
for r in $(seq "$repeats"); do
  for config in threads1 threads2 ooo2; do
    case $config in
      threads1) flags=(--threads 1) ;;
      threads2) flags=(--threads 2) ;;
      ooo2) flags=(--threads 1 --ooo-threads 2) ;;
    esac
    name=$config.run$r
    seconds=$(train_timed "$name" --task addition --data "$work/addition.jsonl" \
      --out "$work/$name.pt" --steps "$steps" --hidden "$hidden" --batch "$batch" \
      --log-every "$steps" "${flags[@]}")
    runs+=("$name=$seconds")
    echo "$name: $seconds s" >&2
  done
done
/usr/bin/python3 - "$out" "$work" "$root/scripts/reproduce" "$steps" "$batch" "$hidden" \
  "${runs[@]}" <<'PY'
import filecmp, json, os, sys
out, work, here, steps, batch, hidden = sys.argv[1:7]
sys.path.insert(0, here)
from collect import write_result
steps, batch = int(steps), int(batch)
best, runs = {}, []
for spec in sys.argv[7:]:
    name, seconds = spec.split("=")
    config = name.split(".")[0]
    seconds = float(seconds)
    runs.append({"name": name, "seconds": seconds,
                 "commands": [l.strip() for l in open(os.path.join(work, name + ".cmd")) if l.strip()]})
    best[config] = min(best.get(config, float("inf")), seconds)
throughput = {c: steps * batch / s for c, s in best.items()}
baseline = max(throughput["threads1"], throughput["threads2"])
identical = filecmp.cmp(os.path.join(work, "threads1.run1.pt"), os.path.join(work, "ooo2.run1.pt"),
                        shallow=False)
write_result(out, "one process: weight gradients on a second thread against 1 and 2 intra-op threads",
             {"steps": steps, "batch": batch, "hidden": int(hidden), "runs": runs,
              "examples_per_second": throughput,
              "ooo_threads_over_best_intra_op": throughput["ooo2"] / baseline,
              "model_bytes_identical_to_one_thread": identical,
              "reproduce": {"script": "scripts/reproduce/npi_ooo_threads.sh"}})
print(json.dumps(throughput), throughput["ooo2"] / baseline, identical)
PY
echo "wrote $out"
