#!/usr/bin/env bash
# Claim (issue 5): every primitive network is exact on its whole domain, for K = 10 and K = 100
# (binary primitives and parameterized families: all K^2 inputs), the held-out div included.
# Writes results/primitives_networks.json; --quick trains K = 10 only.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/primitives_networks.json}
ks="10 100"
[ "$quick" = 1 ] && ks="10"
for k in $ks; do
  start=$(date +%s%N)
  run_logged "k$k" train primitives --out "$work/p$k.pt" --k "$k" > "$work/k$k.train.txt"
  run_logged "k$k" train primitives --out "$work/p$k.pt" --k "$k" --add --primitive div \
    >> "$work/k$k.train.txt"
  end=$(date +%s%N)
  echo $(((end - start) / 1000000)) > "$work/k$k.ms"
  run_logged "k$k" eval primitives --model "$work/p$k.pt" --json > "$work/k$k.eval.json"
done
/usr/bin/python3 - "$out" "$work" "$root/scripts/reproduce" $ks <<'PY'
import json, os, sys
out, work, here, ks = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
sys.path.insert(0, here)
from collect import write_result

def read(name):
    with open(os.path.join(work, name)) as f:
        return f.read()

runs = []
for k in ks:
    ev = json.loads(read(f"k{k}.eval.json"))
    runs.append({
        "k": int(k),
        "train_seconds": round(int(read(f"k{k}.ms")) / 1000, 1),
        "train_output": read(f"k{k}.train.txt").splitlines(),
        "commands": [l for l in read(f"k{k}.cmd").splitlines() if l.strip()],
        "all_exact": ev["all_exact"],
        "primitives": ev["primitives"],
    })
write_result(out, "every primitive network exact on its whole domain for K=10 and K=100",
             {"all_exact": all(r["all_exact"] for r in runs), "runs": runs})
PY
echo "wrote $out"
