#!/usr/bin/env bash
# `engram bench dp` end to end at tiny sizes: 2 ranks, both models, loopback and an emulated
# 1 Gb/s link, every schedule (ooo with the k it chooses, host with the chunk it searches), the DDP peer under torchrun; checks the JSON's rows (not timings:
# those are the benchmark's to report, never a test's to assert).
# Usage: bench_dp.sh ENGRAM_BINARY WORK_DIR
set -euo pipefail
engram=$1
work=$2/bench_dp.$$
mkdir -p "$work"
# On a failure, what the driver printed (its stderr, naming a failed rank, is the test's own).
trap 'rc=$?; [ $rc -eq 0 ] || cat "$work/out.txt" 2>/dev/null; rm -rf "$work"' EXIT
"$engram" bench dp --json "$work/dp.json" --models resnet,npi --links 0,125000000 --steps 1 \
  --warmup 1 --resnet-batch 2 --npi-batch 2 --hidden 32 --trace "$work" > "$work/out.txt"
/usr/bin/python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
d = json.load(open(os.path.join(work, "dp.json")))
rows = d["rows"]
assert len(rows) == 2 * 2 * 5, len(rows)
for r in rows:
    assert r["step_seconds"] > 0 and r["compute_seconds"] > 0, r
    if r["schedule"] == "none":
        assert r["bytes_per_step"] == 0 and r["communication_seconds"] == 0, r
    else:
        assert r["bytes_per_step"] > 0 and r["communication_seconds"] > 0, r
by = {(r["model"], r["link"], r["schedule"]): r for r in rows}
for model in ("resnet", "npi"):
    for link in ("loopback", "1.0 Gb/s"):
        after, overlap = by[(model, link, "after")], by[(model, link, "overlap")]
        assert after["buckets"] == 1 and after["buckets_sent_during_backward"] == 0, after
        assert overlap["bytes_per_step"] == after["bytes_per_step"], (after, overlap)
        assert overlap["buckets_sent_during_backward"] >= 1, overlap
        ooo = by[(model, link, "ooo")]
        assert ooo["bytes_per_step"] == overlap["bytes_per_step"], (ooo, overlap)
        choice = ooo["ooo"]
        assert choice["automatic"] and 0 <= choice["k"] <= choice["layers"] > 1, choice
        assert len(choice["predicted_step_seconds"]) == choice["layers"] + 1, choice
        host = by[(model, link, "host")]
        assert host["bytes_per_step"] == overlap["bytes_per_step"], (host, overlap)
        h = host["host"]
        assert h["searched"] and h["search_path"] and 1 <= h["chunk_layers"] <= h["layers"], h
        assert h["chunk_layers"] in [p["chunk_layers"] for p in h["search_path"]], h
# The emulated link is slower than loopback for the same bytes: 2(N-1)/N * bytes / bandwidth.
r = by[("resnet", "1.0 Gb/s", "after")]
assert r["communication_seconds"] >= r["bytes_per_step"] / 125e6 * 0.95, r
peer = d["peer"]["rows"]
assert [p["link_bandwidth"] for p in peer] == [0, 125000000], peer
assert all(p["step_seconds"] > 0 for p in peer), peer
traces = [f for f in os.listdir(work) if f.endswith("-rank0.json") or f.endswith("-rank1.json")]
assert len(traces) == 2 * (1 + 2 * 4) * 2, traces
trace = json.load(open(os.path.join(work, "resnet-125000000-overlap-rank0.json")))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
assert any(e.get("name", "").startswith("bucket") for e in events), "no bucket span"
print("bench dp: %d rows, %d peer rows, %d traces" % (len(rows), len(peer), len(traces)))
PY
