#!/usr/bin/env bash
# architecture.sh must fail on each invariant it guards: run it on copies of the source tree
# spoiled one way each (a model including nn/Runtime.h, dist/ installing a runtime, a second
# optimizer step, a 200-line function in cli/). Usage: architecture_fails.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: architecture_fails.sh SOURCE_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fresh() {
  rm -rf "$work/tree" && mkdir -p "$work/tree"
  for d in common memory nn datasets dist trainer npi primitives tbcnn resnet synth bench cli fuzz \
    scripts; do
    cp -r "$src/$d" "$work/tree/$d"
  done
}
expect_failure() {
  if bash "$src/tests/architecture.sh" "$work/tree" > "$work/out" 2>&1; then
    echo "architecture.sh passed a tree with $1"; exit 1
  fi
  echo "fails as it should on $1: $(head -1 "$work/out")"
}
fresh
bash "$src/tests/architecture.sh" "$work/tree" || { echo "the unspoiled copy fails"; exit 1; }
echo '#include "nn/Runtime.h"' >> "$work/tree/npi/Npi.cpp"
expect_failure "a model including nn/Runtime.h"
fresh
printf 'void install() { engram::nn::RuntimeGuard use(nullptr, nullptr); }\n' \
  >> "$work/tree/dist/GradReducer.cpp"
expect_failure "dist/ installing a runtime"
fresh
printf 'void again(Adam& optimizer) { optimizer.step(); }\n' >> "$work/tree/bench/NpiBench.cpp"
expect_failure "a second optimizer step"
fresh
printf 'void late(FusedAdam* optimizer_) { optimizer_->step({0}); }\n' >> "$work/tree/trainer/DataParallel.cpp"
expect_failure "a partial optimizer step outside the Stepper"
fresh
printf 'void sgd_again(FusedSgd& sgd) { sgd.step(); }\n' >> "$work/tree/trainer/Trainer.cpp"
expect_failure "an SGD step outside the Stepper"
fresh
printf 'void via(Stepper& s) { s.optimizer().step(); }\n' >> "$work/tree/trainer/TrainingState.cpp"
expect_failure "a step through Stepper::optimizer()"
fresh
{ echo 'int long_one() {'; for i in $(seq 200); do echo "  int v$i = $i;"; done; echo '  return 0;'; echo '}'; } \
  >> "$work/tree/cli/Cli.cpp"
expect_failure "a 200-line function in cli/"
