#!/usr/bin/env bash
# The GPU measurements' scripts (scripts/reproduce/gpu_*.sh, run by scripts/gpu-check.sh) on the
# machine at hand, --quick: where this machine has no NVIDIA driver each must stop with the
# usage error that names the missing GPU and leave no results file; where it has one, each must
# write its JSON naming the device (gpu_dp_nccl.sh, one rank per GPU, only where there are two:
# with one, the usage error naming the GPU it sees). Then, on any machine, the bench-based
# scripts' collection of their runs, with a stand-in for the binary.
# Usage: gpu_scripts.sh ENGRAM_BINARY SCRATCH_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export ENGRAM_BIN=$1 ENGRAM_REPRO_ANY_BINARY=1
scratch=$2/gpu_scripts
rm -rf "$scratch"
mkdir -p "$scratch"
status=0
gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ' || true)
for script in gpu_memory_resnet.sh gpu_memory_resnet50.sh gpu_npi_addition.sh gpu_ooo_streams.sh \
    gpu_memory_cap.sh gpu_dp_nccl.sh; do
  out=$scratch/${script%.sh}.json
  bash "$root/scripts/reproduce/$script" --quick --out "$out" > "$scratch/out.txt" 2> "$scratch/err.txt"
  rc=$?
  if [ "$script" = gpu_dp_nccl.sh ] && [ -e /dev/nvidiactl ] && [ "$gpus" -lt 2 ]; then
    if [ $rc -eq 0 ] || [ -e "$out" ] || ! grep -q "sees $gpus CUDA device" "$scratch/err.txt"; then
      echo "$script: exit $rc with $gpus GPU (expected a failure naming the GPUs seen, no file):"
      cat "$scratch/err.txt"
      status=1
    fi
  elif [ -e /dev/nvidiactl ]; then
    if [ $rc -ne 0 ] || ! grep -q '"gpu"' "$out" 2> /dev/null; then
      echo "$script: exit $rc on a GPU machine, or no device named in $out:"; cat "$scratch/err.txt"
      status=1
    fi
  else
    if [ $rc -eq 0 ] || [ -e "$out" ] || ! grep -q "no CUDA device is visible" "$scratch/err.txt"; then
      echo "$script: exit $rc without a GPU (expected a failure naming the missing GPU, no file):"
      cat "$scratch/err.txt"
      status=1
    fi
  fi
done

# The scripts' own plumbing, which a GPU session would otherwise find broken only on the device:
# with a stand-in for the binary that answers --version and writes a bench report wherever
# --json points, each `bench`-based script must collect its runs and its commands into its
# results file.
fake=$scratch/fake-engram
cat > "$fake" << 'FAKE'
#!/usr/bin/env bash
if [ "$1" = --version ]; then echo "engram stand-in"; exit 0; fi
[ -n "${ENGRAM_FAKE_ARGS:-}" ] && echo "$*" >> "$ENGRAM_FAKE_ARGS"
while [ $# -gt 0 ]; do
  if [ "$1" = --json ]; then echo '{"benchmark": "stand-in", "rows": []}' > "$2"; fi
  shift
done
FAKE
chmod +x "$fake"
for script in gpu_memory_resnet.sh gpu_memory_resnet50.sh gpu_ooo_streams.sh gpu_memory_cap.sh \
    gpu_dp_nccl.sh; do
  out=$scratch/${script%.sh}.collected.json
  if ! ENGRAM_BIN=$fake bash "$root/scripts/reproduce/$script" --quick --out "$out" \
      > "$scratch/out.txt" 2> "$scratch/err.txt" ||
    ! python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["runs"] and d["commands"] and all(r["benchmark"] == "stand-in" for r in d["runs"])' "$out"
  then
    echo "$script: its runs were not collected into $out:"; cat "$scratch/err.txt"
    status=1
  fi
done
# Under gpu-check's stage (STAGE_SECONDS), the cap search stops starting trials a minute before
# the stage's end, so that it writes what it found rather than being killed.
STAGE_SECONDS=300 ENGRAM_BIN=$fake ENGRAM_FAKE_ARGS=$scratch/cap-args.txt \
  bash "$root/scripts/reproduce/gpu_memory_cap.sh" --quick --out "$scratch/cap-limited.json" \
  > "$scratch/out.txt" 2> "$scratch/err.txt"
if ! grep -q -- "--find-max-batch .*--time-limit 240" "$scratch/cap-args.txt" 2> /dev/null; then
  echo "gpu_memory_cap.sh under a 300 s stage did not pass --time-limit 240:"
  cat "$scratch/cap-args.txt" "$scratch/err.txt"
  status=1
fi
# gpu-check.sh refuses, before it unpacks or builds anything, a stage it does not have and a run
# without the commit its results must name (the copy's own .git may be another commit's).
check_refusal() {
  local what=$1 says=$2 commit=$3
  shift 3
  env -u ENGRAM_REPRO_COMMIT ${commit:+ENGRAM_REPRO_COMMIT=$commit} \
    bash "$root/scripts/gpu-check.sh" --out "$scratch/check" --prefix "$scratch/prefix" "$@" \
    > "$scratch/out.txt" 2> "$scratch/err.txt"
  local rc=$?
  if [ $rc -ne 2 ] || ! grep -q "$says" "$scratch/err.txt" || [ -e "$scratch/prefix" ]; then
    echo "gpu-check.sh $what: exit $rc (expected 2, saying '$says', nothing unpacked):"
    cat "$scratch/err.txt"
    status=1
  fi
}
check_refusal "--stages memory_cap" "no stage 'memory_cap'" abc --stages memory-cap,memory_cap
check_refusal "without ENGRAM_REPRO_COMMIT" "set ENGRAM_REPRO_COMMIT" ""
exit $status
