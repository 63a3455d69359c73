#!/usr/bin/env bash
# `engram bench dp --hosts netns` end to end at tiny sizes: 2 ranks on 2 hosts (network
# namespaces through a bridge), the links unshaped and shaped by tbf to 2 Gb/s (fitted) and
# 1 Gb/s (predicted), overlap and ooo, the DDP peer across the hosts; checks the JSON's rows
# (both kinds of link for every configuration, the shaped link never carrying more than its
# rate), the what-if of each kind, and that no namespace is left. Then the faults: the driver
# killed (SIGKILL) mid-run leaves no namespace and no rank; without the capabilities, without
# `tc`, and (on a kernel without netem) with a delay, one line says which, exit 1.
# Usage: bench_dp_netns.sh ENGRAM_BINARY WORK_DIR
set -euo pipefail
engram=$1
if [ "$(id -u)" != 0 ]; then echo "skipped: network namespaces need root"; exit 77; fi
for tool in ip tc; do
  command -v "$tool" > /dev/null || { echo "skipped: no iproute2 '$tool' command"; exit 77; }
done
if ! ip netns add "egprobe$$" 2> /dev/null; then
  echo "skipped: this machine cannot make a network namespace"; exit 77
fi
ip netns del "egprobe$$"
work=$2/bench_dp_netns.$$
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# left PID: the namespaces of the driver PID that are still there.
left() { ip netns list | awk '{ print $1 }' | grep "^egdp$1-" || true; }

timeout 400 "$engram" bench dp --hosts netns --json "$work/dp.json" --models resnet,npi \
  --links 0,250000000 --predict-link 125000000 --schedules overlap,ooo --steps 1 --warmup 1 \
  --resnet-batch 2 --npi-batch 2 --hidden 32 > "$work/out.txt" &
driver=$!
wait "$driver" || { cat "$work/out.txt"; fail "bench dp --hosts netns"; }
[ -z "$(left "$driver")" ] || fail "namespaces left: $(left "$driver")"
/usr/bin/python3 - "$work" <<'PY'
import json, os, sys
d = json.load(open(os.path.join(sys.argv[1], "dp.json")))
rows = d["rows"]
by = {(r["model"], r["link_kind"], r["link_bandwidth"], r["schedule"]): r for r in rows}
links = (0, 250000000, 125000000)
for model in ("resnet", "npi"):
    for kind in ("emulated", "shaped"):
        for b in links:
            for s in ("overlap", "ooo"):
                r = by[(model, kind, b, s)]
                assert r["step_seconds"] > 0 and r["link_throughput"] > 0, r
                assert r["hosts"] == ("netns" if kind == "shaped" else "loopback"), r
assert len(rows) == 2 * 2 * 3 * 2, len(rows)
# The shaper caps what the link carries: 1 Gb/s of frames holds less payload than 125 MB/s (the
# ResNet's 45 MB; the NPI's 0.3 MB is not much more than the token bucket lets through at once).
r = by[("resnet", "shaped", 125000000, "overlap")]
assert r["link_throughput"] <= 125e6, r
peer = d["peer"]["rows"]
assert sorted((p["link_kind"], p["link_bandwidth"]) for p in peer) == sorted(
    (k, b) for k in ("emulated", "shaped") for b in links), peer
predictions = d["link_predictions"]
assert len(predictions) == 2 * 2 * 2, predictions
for p in predictions:
    assert p["link_bandwidth"] == 125000000 and p["predicted_step_seconds"] > 0, p
    assert ("sleep_model_step_seconds" in p) == (p["link_kind"] == "shaped"), p
print("bench dp --hosts netns: %d rows, %d peer rows, %d predictions"
      % (len(rows), len(peer), len(predictions)))
PY

# The driver killed while its ranks run on the hosts: the keeper removes the hosts and what runs
# on them.
# (Both phases take seconds: the emulated links on loopback, then the shaped ones on the hosts.)
# Its scratch folder, which nothing removes after a SIGKILL, goes into the work folder.
mkdir -p "$work/killed-tmp"
TMPDIR=$work/killed-tmp "$engram" bench dp --hosts netns --json "$work/killed.json" --models npi \
  --links 0 --schedules overlap --steps 1000 --warmup 1 --npi-batch 2 --hidden 32 \
  > /dev/null 2>&1 &
driver=$!
ranks() { for ns in $(left "$driver"); do ip netns pids "$ns" 2> /dev/null; done; }
for _ in $(seq 1 1200); do [ "$(ranks | wc -l)" -ge 2 ] && break; sleep 0.1; done
running=$(ranks)
[ "$(echo "$running" | wc -l)" -ge 2 ] || fail "the ranks never ran on the hosts"
sleep 1
kill -9 "$driver"
wait "$driver" 2> /dev/null || true
for _ in $(seq 1 100); do [ -z "$(left "$driver")" ] && break; sleep 0.1; done
[ -z "$(left "$driver")" ] || fail "namespaces left after SIGKILL: $(left "$driver")"
for pid in $running; do
  for _ in $(seq 1 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
  ! kill -0 "$pid" 2> /dev/null || fail "rank process $pid outlived its host"
done
[ ! -e "$work/killed.json" ] || fail "a result was written by a killed run"
echo "driver killed: its namespaces and ranks are gone"

# What this machine lacks, in one line each.
expect_error() {  # expect_error PATTERN COMMAND...
  local pattern=$1
  shift
  set +e
  "$@" > "$work/err.out" 2> "$work/err.txt"
  local code=$?
  set -e
  [ "$code" = 1 ] || { cat "$work/err.txt"; fail "exit $code, not 1: $*"; }
  [ "$(wc -l < "$work/err.txt")" = 1 ] || { cat "$work/err.txt"; fail "not one line: $*"; }
  grep -q -- "$pattern" "$work/err.txt" || { cat "$work/err.txt"; fail "no '$pattern': $*"; }
}
expect_error "needs root with CAP_SYS_ADMIN" setpriv --bounding-set=-sys_admin \
  "$engram" bench dp --hosts netns --json "$work/x.json"
mkdir -p "$work/bin"
ln -s "$(command -v ip)" "$work/bin/ip"
expect_error "'tc' command" env PATH="$work/bin" "$engram" bench dp --hosts netns \
  --json "$work/x.json"
probe=egprobe$$
ip netns add "$probe"
if ! tc -n "$probe" qdisc add dev lo root netem delay 1ms 2> /dev/null; then
  expect_error "no netem qdisc" "$engram" bench dp --hosts netns --link-delay 0.001 \
    --json "$work/x.json"
  echo "no netem in this kernel: the delay is refused in one line"
fi
ip netns del "$probe"
[ ! -e "$work/x.json" ] || fail "a refused run wrote its JSON"
echo "refusals: one line each, exit 1"
