#!/usr/bin/env bash
# Data for notebooks/tbcnn.ipynb (issue 19): the function vectors of the standard-library task's
# test split (functions of Debian 12's Python 3.11 standard library, labelled by top-level
# package), from a TBCNN trained as tbcnn.sh trains it (seed 1, 3000 steps), with node types only
# and with --identifiers: engram eval tbcnn --vectors. Kept per model: at most 20 examples per
# class (the first ones, in the split's order), each vector rounded to 3 significant digits, the
# file on one line.
# Writes results/tbcnn_vectors.json; --quick runs a small version (300 steps, 5 examples a class).
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/tbcnn_vectors.json}
steps=3000
per_class=20
[ "$quick" = 1 ] && steps=300 && per_class=5
stdlib_corpus
models=()
for config in "tbcnn|--model tbcnn" "tbcnn-identifiers|--model tbcnn --identifiers"; do
  name=${config%%|*}
  read -r -a opts <<< "${config#*|}"
  secs=$(train_timed_as tbcnn "$name" --corpus "$work/stdlib.corpus" --out "$work/$name.pt" \
    --seed 1 --steps "$steps" "${opts[@]}")
  run_logged "$name" eval tbcnn --model "$work/$name.pt" --corpus "$work/stdlib.corpus" \
    --split test --json --vectors "$work/$name.vectors.json" > "$work/$name.eval.json"
  models+=("$name=$secs")
done
/usr/bin/python3 - "$out" "$work" "$root/scripts/reproduce" "$per_class" "${models[@]}" <<'PY'
import json, os, sys
out, work, here, per_class = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, here)
from collect import write_result
models = []
for spec in sys.argv[5:]:
    name, seconds = spec.split("=")
    with open(os.path.join(work, name + ".vectors.json")) as f:
        vectors = json.load(f)
    with open(os.path.join(work, name + ".eval.json")) as f:
        evaluation = json.load(f)
    kept, taken = [], {}
    for ex in vectors["examples"]:
        if taken.get(ex["label"], 0) < per_class:
            taken[ex["label"]] = taken.get(ex["label"], 0) + 1
            ex["vector"] = [float(f"{v:.3g}") for v in ex["vector"]]
            kept.append(ex)
    commands = [l.strip() for l in open(os.path.join(work, name + ".cmd")) if l.strip()]
    models.append({"name": name, "train_seconds": float(seconds), "eval": evaluation,
                   "classes": vectors["classes"], "dim": vectors["dim"],
                   "examples_in_split": len(vectors["examples"]), "examples": kept,
                   "commands": commands})
corpus = [l.strip() for l in open(os.path.join(work, "corpus.cmd")) if l.strip()]
write_result(out, "function vectors of the standard-library test split from TBCNN with node "
             "types only and with identifiers, seed 1 (data for notebooks/tbcnn.ipynb)",
             {"corpus": corpus, "models": models,
              "reproduce": {"script": "scripts/reproduce/tbcnn_vectors.sh"}}, indent=None)
PY
echo "wrote $out"
