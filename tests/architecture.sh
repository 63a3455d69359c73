#!/usr/bin/env bash
# The invariants of the structure docs/ARCHITECTURE.md describes, checked on the source tree
# (ctest label unit):
#  - every include between modules follows the module arrows listed in docs/ARCHITECTURE.md
#    (tests/module_arrows.py: no include of a module above, none the list lacks, no cycle);
#  - no module but nn/ itself and trainer/ reaches into the layers' runtime (nn/Runtime.h):
#    only trainer/ installs activation stores and schedulers;
#  - the optimizer steps in one place, trainer/Stepper.cpp (the optimizers' own tests aside);
#  - no function in cli/ is longer than 150 lines (scripts/function-lines.py);
#  - no line of C++ or CUDA is wider than .clang-format's 100 columns.
# Usage: architecture.sh SOURCE_DIR; prints what is wrong and exits 1.
set -uo pipefail
root=${1:?usage: architecture.sh SOURCE_DIR}
here=$(cd "$(dirname "$0")" && pwd)
cd "$root" || exit 2
status=0
# Lines of code, not the usage examples in documentation comments (memory's stores show one).
runtime=$(grep -rn --include='*.cpp' --include='*.h' 'nn/Runtime.h\|RuntimeGuard' \
  common memory datasets parallel npi tbcnn primitives resnet synth bench cli fuzz |
  grep -v ':[0-9]*: *///')
if [ -n "$runtime" ]; then
  echo "these lines reach into nn/Runtime.h (only nn/ and trainer/ may):"; echo "$runtime"; status=1
fi
steps=$(grep -rn --include='*.cpp' --include='*.h' \
  -E '(adam|sgd|opt|optimizer)[_a-z]*(\(\))?(\.|->)step\(' \
  common memory nn datasets parallel trainer npi primitives tbcnn resnet synth bench cli fuzz |
  grep -v '///')
elsewhere=$(grep -v '^trainer/Stepper.cpp:' <<< "$steps" | grep .)
if [ -n "$elsewhere" ] || ! grep -q '^trainer/Stepper.cpp:' <<< "$steps"; then
  echo "the optimizer must step in trainer/Stepper.cpp only (its step and out-of-order"
  echo "backprop's late update); found:"; echo "$steps"; status=1
fi
/usr/bin/python3 "$here/module_arrows.py" . || status=1
/usr/bin/python3 scripts/function-lines.py --max 150 cli/*.cpp cli/*.h cli/commands/*.cpp \
  > /tmp/engram-function-lines.$$ || { cat /tmp/engram-function-lines.$$; status=1; }
rm -f /tmp/engram-function-lines.$$
wide=$(find . \( -name 'build*' -o -name third_party -o -name .git \) -prune -o -type f \
  \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0 |
  xargs -0 awk 'length > 100 { print FILENAME ":" FNR ": " length " columns" }')
if [ -n "$wide" ]; then
  echo "these lines are wider than .clang-format's ColumnLimit of 100:"; echo "$wide"; status=1
fi
exit $status
