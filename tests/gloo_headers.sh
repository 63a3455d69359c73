#!/usr/bin/env bash
# gloo_headers.sh ENGRAM COMMUNICATOR_OBJECT: Engram compiles c10d's ProcessGroupGloo.hpp against
# Debian's Gloo headers (libgloo-dev, a 2022 snapshot), while the wheel's libtorch_cpu carries
# its own, newer Gloo: safe only while Engram (1) never links or loads Debian's libgloo (its
# symbols would take over libtorch's Gloo calls) and (2) never calls into Gloo itself, holding its
# types only through shared_ptr (their layouts and virtual tables differ between the snapshots).
# Fails when either stops holding.
set -uo pipefail
if [ $# -ne 2 ] || [ ! -f "$1" ] || [ ! -f "$2" ]; then
  echo "usage: $0 ENGRAM COMMUNICATOR_OBJECT (both existing files)" >&2
  exit 2
fi
engram=$1 object=$2
# The object must be the one that constructs the Gloo process group, or nothing is checked.
symbols=$(nm -C "$object")
if ! grep -q 'c10d::ProcessGroupGloo::ProcessGroupGloo' <<< "$symbols"; then
  echo "FAIL: $object does not construct c10d::ProcessGroupGloo: not Communicator.cpp's object"
  exit 1
fi
status=0
if readelf -d "$engram" | grep -E 'NEEDED.*libgloo'; then
  echo "FAIL: $engram needs Debian's libgloo (above): libtorch_cpu's own Gloo must be the only one"
  status=1
fi
# Undefined symbols of Gloo's own namespace: a call into Gloo compiled against the wrong headers.
calls=$(nm -uC "$object" | grep -E '(^|[^A-Za-z0-9_])gloo::' || true)
if [ -n "$calls" ]; then
  echo "FAIL: $object calls into Gloo directly:"
  echo "$calls"
  status=1
fi
# What it defines that names Gloo's types must be the standard library's containers of pointers.
defined=$(nm -C --defined-only "$object" | grep -E '(^|[^A-Za-z0-9_])gloo::' |
  grep -vE 'std::(vector|shared_ptr|__shared_ptr|_Sp_)' || true)
if [ -n "$defined" ]; then
  echo "FAIL: $object instantiates code over Gloo's types beyond shared_ptr and vector:"
  echo "$defined"
  status=1
fi
[ $status -eq 0 ] && echo "ok: no libgloo, no Gloo calls, Gloo types only behind shared_ptr"
exit $status
