#!/usr/bin/env bash
# architecture.sh must fail on each invariant it guards: run it on copies of the source tree
# spoiled one way each (a model including nn/Runtime.h, parallel/ installing a runtime, a second
# optimizer step, a 200-line function in cli/, an upward include, a model reaching past the
# trainer into memory/, a module the arrows lack, a cycle in the arrows). Usage: architecture_fails.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: architecture_fails.sh SOURCE_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fresh() {
  rm -rf "$work/tree" && mkdir -p "$work/tree"
  for d in common memory nn datasets parallel trainer npi primitives tbcnn resnet synth bench cli fuzz \
    scripts docs; do
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
  >> "$work/tree/parallel/GradReducer.cpp"
expect_failure "parallel/ installing a runtime"
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
fresh
echo '#include "trainer/Trainer.h"' >> "$work/tree/memory/MemoryTracker.cpp"
expect_failure "an upward include (memory/ including trainer/)"
fresh
echo '#include "memory/CompressingStore.h"' >> "$work/tree/tbcnn/Tbcnn.cpp"
expect_failure "a model including memory/ past the trainer"
fresh
mkdir -p "$work/tree/extra" && echo 'int extra();' > "$work/tree/extra/Extra.h"
expect_failure "a module folder the arrows lack"
fresh
sed -i 's/^memory      common$/memory      common trainer/' "$work/tree/docs/ARCHITECTURE.md"
expect_failure "a cycle in the arrows"
