#!/usr/bin/env bash
# Every executable given needs libstdc++ before any LibTorch library (CMakeLists.txt, the link
# options after find_package(Torch)): otherwise a pip LibTorch's own copies of libstdc++
# functions win the executable's lookups, and its std::filesystem::remove_all crashed.
# Usage: link_order.sh EXECUTABLE...; prints what is wrong and exits 1.
set -uo pipefail
status=0
for exe in "$@"; do
  needed=$(readelf -d "$exe" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  stdcxx=$(grep -n '^libstdc++\.so' <<< "$needed" | head -1 | cut -d: -f1)
  torch=$(grep -n -E '^lib(torch|c10)' <<< "$needed" | head -1 | cut -d: -f1)
  if [ -z "$stdcxx" ] || [ -z "$torch" ]; then
    echo "$exe: expected to need both libstdc++ and LibTorch; needs:"; echo "$needed"; status=1
  elif [ "$stdcxx" -gt "$torch" ]; then
    echo "$exe: needs LibTorch before libstdc++:"; echo "$needed"; status=1
  fi
done
exit $status
