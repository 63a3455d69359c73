#!/usr/bin/env bash
# stale.py counts, of cli/commands/, bench/, fuzz/ and scripts/, only what a results file's script
# runs. In a scratch clone: train.json's script trains through a one-line function of common.sh
# (`train npi`), bench.json's runs `bench memory` (and also writes other.json; bench_big.json is
# its variant), open.json's runs `train "$model"`, any.json's a command held in a variable, and
# suite.json's the test suite. common.sh also holds a function that benches but no script calls,
# and a comment naming a bench command; train.sh names scripts/gpu-check.sh in a comment only.
# Usage: stale_scopes_commands.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: stale_scopes_commands.sh SOURCE_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo=$work/repo
mkdir -p "$repo"/{scripts/reproduce,cli/commands,bench,npi,fuzz,tests} "$work/results"
cd "$repo" || exit 1
git init -q . && git config user.email t@t && git config user.name t
for c in train_npi bench_memory run; do
  name=$(sed -E 's/(^|_)([a-z])/\U\2/g' <<< "$c")
  echo "Command register_$c(CLI::App& parent) { return {}; }" > "cli/commands/$name.cpp"
done
for f in bench/MemoryBench.cpp npi/Npi.cpp fuzz/Fuzz.cpp tests/t.cpp scripts/install-deps.sh \
    scripts/gpu-check.sh scripts/test.sh; do
  echo "// $f" > "$f"
done
printf '#!/usr/bin/env bash\nbash "$root/scripts/install-deps.sh"\n' > scripts/build.sh
cat > scripts/reproduce/common.sh << 'EOF'
# bench_all runs `engram bench memory` (a comment: it runs nothing).
run_logged() {
  local name=$1
  shift
  "$engram" "$@"
}
train_timed() { run_logged "$1" train npi --steps 1; }
bench_all() {
  run_logged all bench memory
}
EOF
r='source "$(dirname "$0")/common.sh"'
printf '%s\n# see scripts/gpu-check.sh\ntrain_timed x\n' "$r" > scripts/reproduce/train.sh
printf '%s\nrun_logged b bench memory --out other.json\n' "$r" > scripts/reproduce/bench.sh
printf '%s\nrun_logged x train "$model" --steps 1\n' "$r" > scripts/reproduce/open.sh
printf '%s\nrun_logged x "$command" --steps 1\n' "$r" > scripts/reproduce/any.sh
printf '%s\nbash "$root/scripts/test.sh"\n' "$r" > scripts/reproduce/suite.sh
git add -A && git commit -qm base
base=$(git rev-parse --short HEAD)
for n in train bench bench_big other open any suite; do
  printf '{"commit": "%s"}\n' "$base" > "$work/results/$n.json"
done
stale() {
  /usr/bin/python3 "$src/scripts/reproduce/stale.py" --repo "$repo" --results "$work/results"
}
# expect CHANGED NAME=stale|current...: after a change to CHANGED, each results file as said.
expect() {
  local changed=$1 out pair name want got
  shift
  git reset -q --hard "$base"
  case $changed in *.sh) echo 'changed=1' ;; *) echo 'int changed;' ;; esac >> "$changed"
  git add -A && git commit -qm "change $changed"
  out=$(stale)  # whole, then searched: grep -q would cut the pipe while stale.py writes
  for pair in "$@"; do
    name=${pair%%=*} want=${pair#*=}
    if grep -q "^stale: .*/$name.json:" <<< "$out"; then got=stale; else got=current; fi
    [ "$got" = "$want" ] ||
      { echo "FAIL: $name.json is $got after a change to $changed, expected $want"; echo "$out"
        exit 1; }
  done
  echo "after a change to $changed: $*"
}
expect bench/MemoryBench.cpp train=current open=current bench=stale bench_big=stale other=stale \
  any=stale suite=stale
expect cli/commands/BenchMemory.cpp train=current bench=stale
expect cli/commands/TrainNpi.cpp train=stale open=stale bench=current other=current
expect cli/commands/Run.cpp train=current open=current bench=current any=stale suite=stale
expect npi/Npi.cpp train=stale open=stale bench=stale any=stale suite=stale
expect fuzz/Fuzz.cpp train=current bench=current suite=stale
expect scripts/gpu-check.sh train=current bench=current suite=stale
expect scripts/install-deps.sh train=stale bench=stale
expect tests/t.cpp train=current bench=current any=current suite=stale
