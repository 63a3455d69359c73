#!/usr/bin/env bash
# Claims (issue 5): each high-order program (map, filter, fold, zipwith, scan), trained with default
# options on lists of length at most 10, scores accuracy 1.0 on 1000 random lists of length 100 for
# every primitive of the library applied by its network (K = 10), for seeds 1, 2 and 3, each
# training within 30 minutes on 2 cores. Then a predicate held out of the library (div) gets its
# network added to the library after the programs were trained, and FILTER is evaluated with
# div(3) without retraining. The same programs are also evaluated with the networks of a K = 100
# library (200 lists of length 100 per primitive): programs never see values, so K does not
# matter to them. Writes results/npi_high_order.json; --quick runs a tiny version.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/npi_high_order.json}
train_opts=()
gen_extra=()
lib_extra=()
length=100
count=1000
count100=200
seeds="1 2 3"
if [ "$quick" = 1 ]; then
  train_opts=(--steps 300 --hidden 64)  # learns each program: accuracy 1.0 at length 6
  gen_extra=(--max-len 4 --per-length 16)
  length=6
  count=5
  count100=3
  seeds="1"
  # Only the families the programs apply: the K = 100 full adder alone trains for minutes.
  lib_extra=(--primitive succ,double,square,negate,even,prime,gt,add,mul,max,min)
fi
lib=$work/primitives.pt
run_logged primitives train primitives --out "$lib" --k 10 "${lib_extra[@]}" >&2
lib100=$work/primitives100.pt
run_logged primitives train primitives --out "$lib100" --k 100 "${lib_extra[@]}" >&2

# primitive:init for each task; FOLD and SCAN with mul start at 1 (at 0 every product is 0).
primitives_of() {
  case "$1" in
    map) echo "succ:0 double:0 square:0 negate:0" ;;
    filter) echo "even:0 prime:0 gt(5):0" ;;
    *) echo "add:0 mul:1 max:0 min:0" ;;
  esac
}
runs=()
for task in map filter fold zipwith scan; do
  for seed in $seeds; do
    name=$task-seed$seed
    run_logged "$name" data gen --task "$task" --seed "$seed" --out "$work/$name.jsonl" \
      "${gen_extra[@]}" >/dev/null
    secs=$(train_timed "$name" --task "$task" --seed "$seed" --data "$work/$name.jsonl" \
      --out "$work/$name.pt" "${train_opts[@]}")
    for spec in $(primitives_of "$task"); do
      p=${spec%%:*}
      tag=$(echo "$p" | tr -d '()')
      init=()  # --init is for the accumulating programs only
      case "$task" in fold | scan) init=(--init "${spec##*:}") ;; esac
      run_logged "$name" eval npi --model "$work/$name.pt" --task "$task" --primitives "$lib" \
        --primitive "$p" "${init[@]}" --length "$length" --count "$count" --seed "$seed" \
        --json > "$work/$name.eval.$tag.json"
      run_logged "$name" eval npi --model "$work/$name.pt" --task "$task" --primitives "$lib100" \
        --primitive "$p" "${init[@]}" --length "$length" --count "$count100" \
        --seed "$seed" --json > "$work/$name.eval.k100.$tag.json"
    done
    runs+=("$name=$secs")
  done
done

# The held-out predicate: only its network is trained; the FILTER programs stay as they are.
run_logged heldout train primitives --out "$lib" --k 10 --add --primitive div >&2
for seed in $seeds; do
  name=filter-seed$seed
  run_logged "$name" eval npi --model "$work/$name.pt" --task filter --primitives "$lib" \
    --primitive "div(3)" --length "$length" --count "$count" --seed "$seed" \
    --json > "$work/$name.eval.heldout-div3.json"
done
/usr/bin/python3 "$root/scripts/reproduce/collect.py" "$out" \
  "map/filter/fold/zipwith/scan trained on lists of length <= 10 (default options): accuracy 1.0 on 1000 lists of length 100 with every library primitive as a network (K=10), seeds 1-3; FILTER with the held-out div(3) added afterwards; the same programs with K=100 networks (200 lists)" \
  "$work" "${runs[@]}"
echo "wrote $out"
