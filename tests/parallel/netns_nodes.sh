#!/usr/bin/env bash
# Two nodes as two hosts: each rank in its own network namespace with its own address (the
# kernel's TCP between them, not loopback), torchrun's rendezvous on the first host's address and
# Gloo bound to each host's interface (GLOO_SOCKET_IFNAME):
#   1. `torchrun --nnodes 2 --node_rank 0|1 --master_addr 10.79.0.1 ...` on two hosts that
#      scripts/netns-torchrun.sh makes (through a bridge, links shaped to 1 Gb/s) writes the model
#      the one-node job (two ranks on loopback) writes, byte for byte;
#   2. on two namespaces joined by a veth pair, the second host's link taken down mid-training
#      (ip link set ... down): rank 0 exits 1 within --dist-timeout with one line naming rank 1,
#      and no model file is left.
# The namespaces and the link are removed whatever happens. Needs root and iproute2's `ip`:
# without them it says which and skips (ctest: exit 77).
# Usage: netns_nodes.sh ENGRAM_BINARY WORK_DIR
set -euo pipefail
engram=$1
if [ "$(id -u)" != 0 ]; then echo "skipped: network namespaces need root"; exit 77; fi
if ! command -v ip > /dev/null; then echo "skipped: no iproute2 'ip' command"; exit 77; fi
torchrun=${ENGRAM_TORCHRUN:?names the torchrun of the pinned environment}
tag=eg$$
ns0=${tag}h0 ns1=${tag}h1 if0=${tag}a if1=${tag}b
addr0=10.77.0.1 addr1=10.77.0.2
work=$2/netns_nodes.$$
mkdir -p "$work"
cleanup() {
  kill $(jobs -p) 2> /dev/null || true
  ip netns pids "$ns0" 2> /dev/null | xargs -r kill -9 2> /dev/null || true
  ip netns pids "$ns1" 2> /dev/null | xargs -r kill -9 2> /dev/null || true
  ip netns del "$ns0" 2> /dev/null || true
  ip netns del "$ns1" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

# Namespaces an earlier run could not remove (killed at its time limit) go first.
for stale in $(ip netns list 2> /dev/null | awk '{ print $1 }' | grep -E '^eg[0-9]+h[01]$' || true); do
  owner=${stale#eg}
  kill -0 "${owner%h?}" 2> /dev/null || ip netns del "$stale" 2> /dev/null || true
done
if ! ip netns add "$ns0" 2> netns.err; then
  echo "skipped: cannot make a network namespace ($(head -1 netns.err))"
  exit 77
fi
ip netns add "$ns1"
ip link add "$if0" type veth peer name "$if1"
ip link set "$if0" netns "$ns0"
ip link set "$if1" netns "$ns1"
ip -n "$ns0" addr add "$addr0/24" dev "$if0"
ip -n "$ns1" addr add "$addr1/24" dev "$if1"
for ns in "$ns0" "$ns1"; do ip -n "$ns" link set lo up; done
ip -n "$ns0" link set "$if0" up
ip -n "$ns1" link set "$if1" up

"$engram" data gen --task addition --out traces.jsonl --per-length 4 --max-len 8 >/dev/null
train=(train npi --task addition --data traces.jsonl --steps 12 --batch 2 --hidden 32 --seed 3)
port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

timeout 120 "$torchrun" --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$(port)" \
  --no_python "$engram" "${train[@]}" --out one_node.pt > one_node.log 2>&1 ||
  { cat one_node.log; fail "torchrun --nproc_per_node 2 on loopback"; }

# The same job as two nodes on two hosts (scripts/netns-torchrun.sh makes them: a bridge, each
# host's link shaped to 1 Gb/s), each node's torchrun in its namespace, Gloo on its interface.
bash "$(dirname "$0")/../../scripts/netns-torchrun.sh" --nodes 2 --rate 125000000 --timeout 120 \
  -- "$engram" "${train[@]}" --out two_hosts.pt > two_hosts.log 2>&1 ||
  { cat two_hosts.log; fail "scripts/netns-torchrun.sh --nodes 2"; }
cmp one_node.pt two_hosts.pt || fail "two hosts and one node wrote different models"
echo "two hosts (scripts/netns-torchrun.sh, 1 Gb/s links): the one-node job's model, byte for byte"

# The second host's link down mid-training.
long=(train npi --task addition --data traces.jsonl --steps 1000000 --batch 2 --hidden 32
      --dist-timeout 10 --out down.pt)
for r in 0 1; do
  ns=$ns0 ifname=$if0 addr=$addr0
  [ $r = 1 ] && ns=$ns1 ifname=$if1 addr=$addr1
  (exec ip netns exec "$ns" env RANK=$r LOCAL_RANK=0 WORLD_SIZE=2 MASTER_ADDR=$addr0 \
    MASTER_PORT=29578 GLOO_SOCKET_IFNAME=$ifname timeout 90 "$engram" "${long[@]}" \
    > rank$r.out 2> rank$r.err) &
  eval "pid$r=$!"
done
sleep 5
kill -0 "$pid0" 2> /dev/null || { cat rank0.err rank1.err; fail "rank 0 stopped before the link went down"; }
ip -n "$ns1" link set "$if1" down
down_at=$(date +%s%N)
set +e
wait "$pid0"
code=$?
set -e
elapsed_ms=$(( ($(date +%s%N) - down_at) / 1000000 ))
[ "$code" = 1 ] || { cat rank0.err; fail "rank 0 exited $code, not 1"; }
[ "$(wc -l < rank0.err)" = 1 ] || { cat rank0.err; fail "rank 0's error is not one line"; }
grep -q "rank 1" rank0.err || { cat rank0.err; fail "rank 1 not named"; }
(( elapsed_ms < 20000 )) || fail "rank 0 took ${elapsed_ms} ms after the link went down"
if ls down.pt* 2> /dev/null; then fail "a model file was left"; fi
echo "link down: rank 0 exited 1 ${elapsed_ms} ms after it: $(cat rank0.err)"
kill -9 "$pid1" 2> /dev/null || true
wait "$pid1" 2> /dev/null || true
