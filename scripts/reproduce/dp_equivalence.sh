#!/usr/bin/env bash
# Claim: data-parallel training computes the update of one process on the global batch. For the
# NPI (addition, hidden 256) and the CIFAR ResNet-18 (synchronised batch norm), with Adam, and
# the ResNet also with SGD (momentum 0.9), 2 ranks x batch b against 1 process x batch 2b, 20
# steps from the same seed: the first step's gradients and the parameters' max abs difference
# after 20 steps (the issue's bound is 1e-5; reported, checked at the tests' sizes; without the
# exchange they are further apart), and the `after` and `overlap` schedules bit-identical. The jobs are those of the integration tests
# (tests/parallel/DistTest.cpp: 2 processes on loopback, Gloo), here at full size (ENGRAM_DIST_FULL=1).
# Writes results/dp_equivalence.json. --quick: the tests' small models.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/dp_equivalence.json}
tests=${ENGRAM_DIST_TESTS:-$root/build/tests/parallel/engram_tests_parallel}
[ -x "$tests" ] || { echo "$0: $tests not built; run scripts/build.sh first" >&2; exit 1; }
full=1
[ "$quick" = 1 ] && full=0
filter='DistJob.TwoRanksTrain*:DistJob.AfterAndOverlapAreBitIdentical'
echo "+ ENGRAM_DIST_FULL=$full engram_tests_parallel --gtest_filter=$filter" | tee "$work/dp.cmd" >&2
ENGRAM_DIST_FULL=$full ENGRAM_DIST_REPORT="$work/report.jsonl" \
  "$tests" --gtest_filter="$filter" > "$work/tests.txt" 2>&1 || { cat "$work/tests.txt" >&2; exit 1; }
/usr/bin/python3 - "$out" "$work" "$root/scripts/reproduce" "$full" <<'PY'
import json, os, sys
out, work, here, full = sys.argv[1:5]
sys.path.insert(0, here)
from collect import write_result
lines = [json.loads(l) for l in open(os.path.join(work, "report.jsonl")) if l.strip()]
commands = [l.strip() for l in open(os.path.join(work, "dp.cmd")) if l.strip()]
write_result(out, "2 ranks x b against 1 process x 2b: first-step gradients and parameters "
             "after 20 steps (NPI and ResNet-18 with Adam, ResNet-18 with SGD; the issue's "
             "bound 1e-5); after and overlap bit-identical",
             {"full_size": full == "1",
              "equivalence": [l for l in lines if "max_abs_difference" in l],
              "schedules": [l for l in lines if "after_vs_overlap_bit_identical" in l],
              "reproduce": {"script": "scripts/reproduce/dp_equivalence.sh",
                            "commands": commands}})
PY
echo "wrote $out"
