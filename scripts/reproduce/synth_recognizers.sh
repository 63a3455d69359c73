#!/usr/bin/env bash
# Claim (issue 21): which high-order function a loop computes, told two ways on functions
# neither saw before: the localized TBCNN with the loop as pivot (trained on a generated corpus
# of loop variants, synth/python/loop_corpus.py: for/while/comprehension/generator/builtins,
# random names, helpers), and the trace recogniser of `engram synth` (no training). Both on the
# corpus's test split, and both on the one-stage functions of the hand-written suite
# tests/synth/functions.py (a TBCNN classifies one loop; which of several loops is the
# outermost stage is no question for it). Writes results/synth_recognizers.json; --quick runs a
# tiny version.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/synth_recognizers.json}
per_class=400
seeds="1 2 3"
train_opts=()
trace_limit=0  # test functions traced (0: all)
if [ "$quick" = 1 ]; then
  per_class=40
  seeds="1"
  train_opts=(--steps 200)
  trace_limit=10
fi
/usr/bin/python3 "$root/synth/python/loop_corpus.py" --out "$work/src" --per-class "$per_class" \
  --seed 1
echo "+ python3 synth/python/loop_corpus.py --out src --per-class $per_class --seed 1" \
  > "$work/corpus.cmd"
run_logged corpus data code --lang python --src "$work/src" --out "$work/loops.corpus" \
  > "$work/corpus.txt"
runs=()
for seed in $seeds; do
  name=tbcnn-seed$seed
  secs=$(train_timed_as tbcnn "$name" --corpus "$work/loops.corpus" --out "$work/$name.pt" \
    --task loop --model localized --seed "$seed" "${train_opts[@]}")
  run_logged "$name" eval tbcnn --model "$work/$name.pt" --corpus "$work/loops.corpus" \
    --split test --json > "$work/$name.eval.json"
  runs+=("$name=$secs")
done
# The suite: one file per function, the function last (after the module's other lines), which
# is where the loop task looks; its class is its expected program's outermost stage.
/usr/bin/python3 - "$root/tests/synth/functions.py" "$work/suite" <<'PY'
import ast, os, re, sys
source, out = sys.argv[1], sys.argv[2]
text = open(source).read()
tree = ast.parse(text)
lines = text.splitlines()
expected = {}
for i, line in enumerate(lines):
    m = re.match(r"# expect: (\w+)\((.*)$", line)
    # One-stage programs only: a TBCNN looks at one loop, which of several is the outermost
    # stage is no question for it.
    if m and not re.search(r"\b(map|filter|fold|scan|zipwith)\(", m.group(2)):
        expected[re.match(r"def (\w+)\(", lines[i + 1]).group(1)] = m.group(1)
others = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name in expected)]
for node in tree.body:
    if isinstance(node, ast.FunctionDef) and node.name in expected:
        folder = os.path.join(out, expected[node.name])
        os.makedirs(folder, exist_ok=True)
        parts = [ast.get_source_segment(text, n) for n in others]
        parts.append(ast.get_source_segment(text, node))
        with open(os.path.join(folder, node.name + ".py"), "w") as f:
            f.write("\n\n\n".join(parts) + "\n")
PY
# Each recogniser's class for a list of files: "path class-by-tbcnn" / "path class-by-trace".
classify_all() {  # classify_all MODEL LIST OUT
  while read -r path; do
    cls=$("$engram" classify --model "$1" --file "$path" 2> /dev/null | head -n 1 | awk '{print $1}')
    echo "$path ${cls:-none}"
  done < "$2" > "$3"
}
trace_all() {  # trace_all LIST OUT
  while read -r path; do
    fn=$(grep -o "^def [a-z_0-9]*" "$path" | tail -n 1 | cut -c5-)
    shape=$("$engram" synth --source "$path" --function "$fn" --checks 50 --check-length 30 \
      --json 2> /dev/null | /usr/bin/python3 -c \
      "import json,sys; print(json.load(sys.stdin)['shape'].split('(')[0])" 2> /dev/null)
    echo "$path ${shape:-none}"
  done < "$1" > "$2"
}
/usr/bin/python3 - "$work/loops.corpus" "$work/src" "$trace_limit" > "$work/test_files.txt" <<'PY'
import json, os, sys
corpus, src, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
paths = []
with open(corpus) as f:
    next(f)
    for line in f:
        s = json.loads(line)
        if s["split"] == "test":
            paths.append(os.path.join(src, s["path"]))
paths.sort()
if limit:
    by_class = {}
    for p in paths:
        by_class.setdefault(os.path.basename(os.path.dirname(p)), []).append(p)
    paths = [p for c in sorted(by_class) for p in by_class[c][:max(1, limit // len(by_class))]]
print("\n".join(paths))
PY
find "$work/suite" -name "*.py" | sort > "$work/suite_files.txt"
echo "+ engram synth --source FILE --function F --checks 50 --check-length 30 --json (each file)" \
  > "$work/trace.cmd"
trace_all "$work/test_files.txt" "$work/trace_test.txt"
trace_all "$work/suite_files.txt" "$work/trace_suite.txt"
for seed in $seeds; do
  classify_all "$work/tbcnn-seed$seed.pt" "$work/test_files.txt" "$work/tbcnn-seed$seed.test.txt"
  classify_all "$work/tbcnn-seed$seed.pt" "$work/suite_files.txt" "$work/tbcnn-seed$seed.suite.txt"
done
/usr/bin/python3 - "$out" "$work" "$root" "$per_class" "${runs[@]}" <<'PY'
import json, os, sys
out, work, root, per_class = sys.argv[1:5]
sys.path.insert(0, os.path.join(root, "scripts", "reproduce"))
from collect import write_result
def score(path):
    rows = [l.split() for l in open(path) if l.strip()]
    right = sum(1 for p, c in rows if os.path.basename(os.path.dirname(p)) == c)
    wrong = [f"{os.path.basename(os.path.dirname(p))}/{os.path.basename(p)}: {c}"
             for p, c in rows if os.path.basename(os.path.dirname(p)) != c]
    return {"functions": len(rows), "correct": right,
            "accuracy": round(right / len(rows), 4) if rows else None, "wrong": wrong}
def cmds(name):
    return [l.rstrip("\n") for l in open(os.path.join(work, name + ".cmd")) if l.strip()]
tbcnn = []
for spec in sys.argv[5:]:
    name, secs = spec.split("=")
    ev = json.load(open(os.path.join(work, name + ".eval.json")))
    tbcnn.append({"name": name, "train_seconds": float(secs), "commands": cmds(name),
                  "eval": ev,
                  "test_functions": score(os.path.join(work, name + ".test.txt")),
                  "suite": score(os.path.join(work, name + ".suite.txt"))})
write_result(out, "which high-order function a loop computes, on functions neither recogniser "
             "saw: the localized TBCNN (loop task, trained on generated loop variants) beside "
             "the trace recogniser, on the generated test split and on tests/synth/functions.py",
             {"corpus": {"per_class": int(per_class), "commands": cmds("corpus"),
                         "report": open(os.path.join(work, "corpus.txt")).read().strip()},
              "tbcnn": tbcnn,
              "trace": {"commands": cmds("trace"),
                        "test_functions": score(os.path.join(work, "trace_test.txt")),
                        "suite": score(os.path.join(work, "trace_suite.txt"))},
              "reproduce": {"script": "scripts/reproduce/synth_recognizers.sh"}})
PY
echo "wrote $out"
