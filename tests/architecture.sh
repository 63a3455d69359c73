#!/usr/bin/env bash
# The issue's invariants of the structure, checked on the source tree (ctest label unit):
#  - no model module, benchmark or command reaches into the layers' runtime (nn/Runtime.h):
#    only trainer/ installs activation stores and schedulers;
#  - the optimizer steps in one place, trainer/Stepper.cpp (the optimizers' own tests aside);
#  - no function in cli/ is longer than 150 lines (scripts/function-lines.py).
# Usage: architecture.sh SOURCE_DIR; prints what is wrong and exits 1.
set -uo pipefail
root=${1:?usage: architecture.sh SOURCE_DIR}
cd "$root" || exit 2
status=0
runtime=$(grep -rln --include='*.cpp' --include='*.h' 'nn/Runtime.h\|RuntimeGuard' \
  npi tbcnn primitives resnet bench cli datasets)
if [ -n "$runtime" ]; then
  echo "these files reach into nn/Runtime.h (only trainer/ may):"; echo "$runtime"; status=1
fi
steps=$(grep -rn --include='*.cpp' --include='*.h' \
  -E '(adam|sgd|opt|optimizer)[_a-z]*(\(\))?(\.|->)step\(' \
  common memory nn datasets trainer npi primitives tbcnn resnet bench cli | grep -v '///')
elsewhere=$(grep -v '^trainer/Stepper.cpp:' <<< "$steps" | grep .)
if [ -n "$elsewhere" ] || ! grep -q '^trainer/Stepper.cpp:' <<< "$steps"; then
  echo "the optimizer must step in trainer/Stepper.cpp only (its step and out-of-order"
  echo "backprop's late update); found:"; echo "$steps"; status=1
fi
/usr/bin/python3 scripts/function-lines.py --max 150 cli/*.cpp cli/*.h cli/commands/*.cpp \
  > /tmp/engram-function-lines.$$ || { cat /tmp/engram-function-lines.$$; status=1; }
rm -f /tmp/engram-function-lines.$$
exit $status
