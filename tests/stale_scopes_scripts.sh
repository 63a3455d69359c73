#!/usr/bin/env bash
# stale.py counts, of scripts/reproduce/, only what made a results file: in a scratch clone whose
# results/a.json was made by scripts/reproduce/a.sh (which sources common.sh and runs helper.py),
# a change to b.sh leaves a.json current; a change to a.sh, to common.sh, to helper.py, or to the
# C++ sources makes it stale. A file whose script is unknown (no reproduce.script, no NAME.sh) is
# made stale by any script's change. A comment added to a.sh, helper.py or the sources leaves it
# current (scripts/reproduce/code_text.py; tests/code_text_test.py has the finer cases); a.sh
# made executable makes it stale.
# Usage: stale_scopes_scripts.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: stale_scopes_scripts.sh SOURCE_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo=$work/repo
mkdir -p "$repo/scripts/reproduce" "$work/results" "$repo/src"
cd "$repo" || exit 1
git init -q . && git config user.email t@t && git config user.name t
for f in a.sh b.sh common.sh helper.py; do echo "# $f" > "scripts/reproduce/$f"; done
printf 'source "$(dirname "$0")/common.sh"\npython3 "$(dirname "$0")/helper.py"\n' \
  >> scripts/reproduce/a.sh
echo 'int main() {}' > src/main.cpp
git add -A && git commit -qm base
base=$(git rev-parse --short HEAD)
printf '{"commit": "%s", "reproduce": {"script": "scripts/reproduce/a.sh"}}\n' "$base" \
  > "$work/results/a.json"
printf '{"commit": "%s"}\n' "$base" > "$work/results/unknown.json"
stale() { /usr/bin/python3 "$src/scripts/reproduce/stale.py" --repo "$repo" --results "$work/results"; }
# change FILE [comment]: a line of code (or, with `comment`, a comment) added to FILE.
change() {
  local line
  case "$1:${2:-}" in
    *.cpp:comment) line='// changed' ;; *.cpp:) line='int changed;' ;;
    *.py:comment) line='# changed' ;; *.py:) line='changed = 1' ;;
    *:comment) line='# changed' ;; *) line='changed=1' ;;
  esac
  echo "$line" >> "$1" && git add -A && git commit -qm "change $1"
}
expect() {  # expect FILE stale|current WHEN
  local out
  out=$(stale)  # whole, then searched: grep -q would cut the pipe while stale.py writes
  if grep -q "^stale: .*/$1:" <<< "$out"; then got=stale; else got=current; fi
  [ "$got" = "$2" ] || { echo "FAIL: $1 is $got after $3, expected $2"; echo "$out"; exit 1; }
  echo "$1 $2 after $3"
}
change scripts/reproduce/b.sh
expect a.json current "a change to another script"
expect unknown.json stale "a change to a script, its own unknown"
git reset -q --hard "$base"
change scripts/reproduce/a.sh
expect a.json stale "a change to its own script"
git reset -q --hard "$base"
change scripts/reproduce/common.sh
expect a.json stale "a change to the common.sh it sources"
git reset -q --hard "$base"
change scripts/reproduce/helper.py
expect a.json stale "a change to the helper.py it runs"
git reset -q --hard "$base"
change src/main.cpp
expect a.json stale "a change to the sources"
out=$(stale)
line="^stale: .*/a.json: commit $base, 1 measured files changed since: src/main.cpp$"
grep -q "$line" <<< "$out" ||
  { echo "FAIL: a.json's line does not name its commit and the one file changed"; echo "$out"
    exit 1; }
for f in scripts/reproduce/a.sh scripts/reproduce/helper.py src/main.cpp; do
  git reset -q --hard "$base"
  change "$f" comment
  expect a.json current "a comment added to $f"
done
git reset -q --hard "$base"
chmod +x scripts/reproduce/a.sh && git add -A && git commit -qm "a.sh executable"
expect a.json stale "its script made executable"
