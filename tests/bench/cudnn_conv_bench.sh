#!/usr/bin/env bash
# engram_cudnn_conv_bench end to end. Without a device: the report says "skipped", with the
# ResNet-18's convolutions found from the model (20 layers, the first without an input gradient).
# With one (a GPU machine, scripts/gpu-check.sh): every layer's passes measured, and every plan's
# chosen algorithms within its limit. Then the usage errors. Checks the JSON, never timings.
# Usage: cudnn_conv_bench.sh BENCH_BINARY WORK_DIR
set -euo pipefail
bench=$1
work=$2/cudnn_conv_bench.$$
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
"$bench" --json "$work/conv.json" --batch 4 --repeats 1 --limits-mb 0,1 > "$work/out.txt"
python3 - "$work/conv.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
shapes = d["shapes"]
names = [n for s in shapes for n in s["layers"]]
assert len(names) == 20 and len(set(names)) == 20, names
assert names[0] == "stem.conv" and "stage4.0.shortcut_conv" in names, names
assert [s["input_grad"] for s in shapes].count(False) == 1 and not shapes[0]["input_grad"]
assert shapes[0]["shape"] == "4x3x32x32 -> 64, k3 s1 p1", shapes[0]
assert any(s["shape"] == "4x256x8x8 -> 512, k1 s2 p0" for s in shapes), shapes
if d["skipped"]:
    assert d["reason"], d
    print("no device:", d["reason"])
    sys.exit(0)
assert d["errors"] == [], d["errors"]
for layer in d["layers"]:
    passes = layer["passes"]
    assert set(passes) == ({"forward", "backward_data", "backward_filter"} if layer["input_grad"]
                           else {"forward", "backward_filter"}), layer["layers"]
    for name, p in passes.items():
        ok = [a for a in p["algorithms"] if a["supported"]]
        assert ok and p["default"] in [a["algorithm"] for a in ok], (layer["layers"], name)
        for a in p["algorithms"]:
            assert not a["failed"], a
        for a in ok:
            assert a["ms"] > 0 and a["max_rel_diff"] < 1e-3, a
default = d["default_plan"]
assert default["feasible"] and not default["replaced"], default
assert d["plans"][0]["limit_bytes"] is None and d["plans"][0]["feasible"], d["plans"][0]
for plan in d["plans"]:
    # A limit may leave a pass with no algorithm at all (then no peak and no time).
    if not plan["feasible"]:
        assert plan["conv_ms_per_step"] is None and plan["time_vs_default"] is None, plan
        continue
    if plan["limit_bytes"] is not None:
        assert plan["peak_workspace_bytes"] <= plan["limit_bytes"], plan
        for r in plan["replaced"]:
            assert r["workspace_to"] <= plan["limit_bytes"], r
print("measured", len(d["layers"]), "shapes on", d["device"])
PY
set +e
"$bench" --json "$work/x.json" --frobnicate 1 2> "$work/err.txt"; rc=$?
set -e
[ $rc -eq 2 ] && grep -q "unknown option --frobnicate" "$work/err.txt" || {
  echo "an unknown option gave exit $rc: $(cat "$work/err.txt")"; exit 1; }
set +e
"$bench" --json "$work/x.json" --batch 1e3 2> "$work/err.txt"; rc=$?
set -e
[ $rc -eq 2 ] && grep -q "bad value '1e3' for --batch" "$work/err.txt" || {
  echo "a partial number gave exit $rc: $(cat "$work/err.txt")"; exit 1; }
set +e
"$bench" --json "$work/x.json" --limits-mb 1,lots 2> "$work/err.txt"; rc=$?
set -e
[ $rc -eq 2 ] && grep -q "bad value '1,lots' for --limits-mb" "$work/err.txt" || {
  echo "a bad limit gave exit $rc: $(cat "$work/err.txt")"; exit 1; }
[ ! -e "$work/x.json" ] || { echo "a usage error wrote a report"; exit 1; }
echo "ok"
