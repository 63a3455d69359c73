#!/usr/bin/env bash
# readme_tables_fails_on_edit.sh RESULTS WORKDIR: copies RESULTS (docs/RESULTS.md, the file that
# holds every generated table, the npi table of scripts/reproduce/npi_addition.sh among them) into
# WORKDIR with one figure of that table edited by hand (addition seed 1's training seconds made
# 9999) and passes only if `readme_tables.py --check --file COPY` then fails with a diff that
# shows that figure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
copy=$2/$(basename "$1" .md).edited.md
sed '0,/npi_addition.sh` | seed1 | [0-9.]* |/s//npi_addition.sh` | seed1 | 9999 |/' "$1" > "$copy"
grep -q 'seed1 | 9999 |' "$copy" || { echo "no figure edited in $copy"; exit 1; }
out=$(/usr/bin/python3 "$here/../scripts/reproduce/readme_tables.py" --check --file "$copy" 2>&1)
rc=$?
echo "$out"
if [ "$rc" -ne 1 ]; then echo "expected --check to exit 1 on the edited copy, got $rc"; exit 1; fi
echo "$out" | grep -q '^-| `scripts/reproduce/npi_addition.sh` | seed1 | 9999 |' ||
  { echo "the diff does not show the edited figure"; exit 1; }
