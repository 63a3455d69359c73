#!/usr/bin/env bash
# A torchrun job across hosts made on this machine, as `engram bench dp --hosts netns` makes
# them: each node a network namespace with its own address (10.79.0.1, .2, ...) on an interface
# `eth0`, joined through a bridge in a namespace of its own, each host's link optionally shaped by
# Linux traffic control (tbf). Node r runs
#   torchrun --nnodes N --node_rank r --nproc_per_node P --master_addr 10.79.0.1 \
#            --master_port 29500 --no_python PROGRAM ARGS...
# with GLOO_SOCKET_IFNAME=eth0, in the current folder; the script exits with the first failing
# node's status (0 when all succeed), and removes the namespaces (and whatever still runs in them)
# however it ends. Needs root and iproute2's `ip` and `tc`. The nodes share this machine's GPUs,
# each node's ranks counting from GPU 0: a model on a GPU sums over `--dist-backend gloo` here,
# since NCCL takes one rank a GPU and each node sees itself as a host of its own.
#
# Usage: scripts/netns-torchrun.sh [--nodes N] [--nproc-per-node P] [--rate BYTES_PER_SECOND]
#                                  [--timeout SECONDS] -- PROGRAM [ARGS...]
#   e.g. scripts/netns-torchrun.sh --nodes 2 --rate 12500000 -- \
#          build/cli/engram train npi --task addition --data traces.jsonl --out model.pt
# --rate: each host's outgoing link in bytes per second (0, the default: unshaped);
# --timeout: each node's torchrun is ended after this many seconds (0, the default: never).
# ENGRAM_TORCHRUN names torchrun (default: the pinned environment's, scripts/python/env.sh).
set -euo pipefail
usage() { sed -n '/^# Usage:/,/^# ENGRAM_TORCHRUN/ s/^# \{0,1\}//p' "$0" >&2; exit 2; }
nodes=2 per_node=1 rate=0 limit=0
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) nodes=${2:?}; shift 2 ;;
    --nproc-per-node) per_node=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --timeout) limit=${2:?}; shift 2 ;;
    --) shift; break ;;
    *) echo "netns-torchrun.sh: unknown option '$1'" >&2; usage ;;
  esac
done
[ $# -ge 1 ] || { echo "netns-torchrun.sh: no program after --" >&2; usage; }
for n in "$nodes" "$per_node" "$rate" "$limit"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "netns-torchrun.sh: '$n' is not a whole number" >&2; exit 2; }
done
(( nodes >= 1 && nodes <= 200 )) || { echo "netns-torchrun.sh: --nodes is 1..200" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "netns-torchrun.sh: network namespaces need root" >&2; exit 1; }
for tool in ip tc; do
  command -v "$tool" > /dev/null ||
    { echo "netns-torchrun.sh: iproute2's '$tool' is not in PATH" >&2; exit 1; }
done
if [ -z "${ENGRAM_TORCHRUN:-}" ]; then
  source "$(dirname "$0")/python/env.sh"
  ENGRAM_TORCHRUN=$ENGRAM_VENV/bin/torchrun
fi

tag=egtr$$
switch=$tag-sw
names=()
for ((h = 0; h < nodes; h++)); do names+=("$tag-h$h"); done
names+=("$switch")
cleanup() {
  for ns in "${names[@]}"; do ip netns pids "$ns" 2> /dev/null | xargs -r kill -9 2> /dev/null || true; done
  for ns in "${names[@]}"; do ip netns del "$ns" 2> /dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for ns in "${names[@]}"; do ip netns add "$ns"; done
ip -n "$switch" link add br0 type bridge
ip -n "$switch" link set br0 up
for ((h = 0; h < nodes; h++)); do
  ns=$tag-h$h
  ip link add name eth0 netns "$ns" type veth peer name "p$h" netns "$switch"
  ip -n "$switch" link set "p$h" master br0
  ip -n "$switch" link set "p$h" up
  ip -n "$ns" addr add "10.79.0.$((h + 1))/24" dev eth0
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  if [ "$rate" != 0 ]; then
    # As bench/NetnsHosts.cpp shapes a link: a token bucket of 1 ms of the rate, at least 128 KiB.
    burst=$(( rate / 1000 > 131072 ? rate / 1000 : 131072 ))
    tc -n "$ns" qdisc add dev eth0 root tbf rate "$((rate * 8))bit" burst "$burst" latency 100ms
  fi
done

pids=()
for ((h = 0; h < nodes; h++)); do
  run=(ip netns exec "$tag-h$h" env GLOO_SOCKET_IFNAME=eth0)
  [ "$limit" != 0 ] && run+=(timeout "$limit")
  "${run[@]}" "$ENGRAM_TORCHRUN" --nnodes "$nodes" --node_rank "$h" \
    --nproc_per_node "$per_node" --master_addr 10.79.0.1 --master_port 29500 --no_python "$@" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || { code=$?; [ "$status" = 0 ] && status=$code; }
done
exit "$status"
