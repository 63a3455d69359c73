#!/usr/bin/env bash
# scripts/notebooks.sh on an empty results folder must fail (exit 1), name the missing file, and
# leave no figure behind. Usage: fails_without_results.sh SOURCE_DIR WORK_DIR
set -uo pipefail
src=$1
work=$2
rm -rf "$work"
mkdir -p "$work/results"
bash "$src/scripts/notebooks.sh" --results "$work/results" --figures "$work/figures" npi \
  > "$work/out.txt" 2> "$work/err.txt"
rc=$?
if [ "$rc" -ne 1 ]; then
  echo "expected exit 1, got $rc"; cat "$work/err.txt"; exit 1
fi
if ! grep -q "npi_generalization.json is missing" "$work/err.txt"; then
  echo "the error does not name the missing results file:"; cat "$work/err.txt"; exit 1
fi
if [ -n "$(ls -A "$work/figures" 2>/dev/null)" ]; then
  echo "figures were written without results:"; ls "$work/figures"; exit 1
fi
bash "$src/scripts/notebooks.sh" --results "$work/results" no-such-notebook > /dev/null 2>&1
rc=$?
[ "$rc" -eq 2 ] || { echo "an unknown notebook should be a usage error (2), got $rc"; exit 1; }
echo "ok"
