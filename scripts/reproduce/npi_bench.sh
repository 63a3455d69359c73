#!/usr/bin/env bash
# Benchmark (not a pass/fail claim): the NPI training step (addition, hidden 256, one thread, Adam,
# gradient clipping) in C++ and in the Python peer bench/peers/npi_peer.py, side by side in one
# run from the same initial weights, at 1 and 32 traces per step; the C++ model on the nn/ layers
# beside the same model on plain torch modules; the matrix-product floor of a step. Timings vary
# with the machine and with what else shares its cores: they are recorded, never asserted.
# Writes results/npi_bench.json (--out FILE: there) with the commit, commands and machine.
# --quick: 2 timed steps per batch size (the `slow` test checks the script with it).
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/npi_bench.json}
steps=20
[ "$quick" = 1 ] && steps=2
run_logged bench bench npi --steps "$steps" --json "$work/bench.json" >&2
/usr/bin/python3 - "$out" "$work" "$root/scripts/reproduce" <<'PY'
import json, os, sys
out, work, here = sys.argv[1:4]
sys.path.insert(0, here)
from collect import write_result

with open(os.path.join(work, "bench.json")) as f:
    bench = json.load(f)
with open(os.path.join(work, "bench.cmd")) as f:
    commands = [line.strip() for line in f if line.strip()]
# The bench's own machine block (cpu, cores) gives way to collect.py's, which adds the system.
bench.pop("machine", None)
bench["reproduce"] = {"script": "scripts/reproduce/npi_bench.sh", "commands": commands}
write_result(out, "NPI training step: C++ (nn/ layers and torch modules) beside Python PyTorch",
             bench)
PY
echo "wrote $out"
