#!/usr/bin/env bash
# Executes every notebook in notebooks/ headless (jupyter nbconvert --to notebook --execute) against
# the committed results, and checks the PNGs they export: every figure a notebook saves goes to
# results/figures/ (or --figures DIR), and a notebook that fails, or a figure that is missing or
# empty, fails this script. The executed notebooks (with their outputs) go to a temporary folder,
# or --executed DIR; the committed notebooks stay without outputs.
#   bash scripts/notebooks.sh [--figures DIR] [--executed DIR] [--results DIR] [NOTEBOOK...]
# --results reads another results folder (default results/). Installs its dependencies first
# (scripts/install-deps.sh, idempotent) unless ENGRAM_SKIP_INSTALL=1; runs on the pinned Python
# environment (scripts/python/env.sh), whose ipykernel is the notebooks' kernel.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
figures=$root/results/figures
results=$root/results
executed=""
names=()
while [ $# -gt 0 ]; do
  case "$1" in
    --figures) figures=$(realpath -m "$2"); shift ;;
    --executed) executed=$(realpath -m "$2"); shift ;;
    --results) results=$(realpath -m "$2"); shift ;;
    -*) echo "usage: $0 [--figures DIR] [--executed DIR] [--results DIR] [NOTEBOOK...]" >&2; exit 2 ;;
    *) names+=("$1") ;;
  esac
  shift
done
[ "${ENGRAM_SKIP_INSTALL:-0}" = 1 ] || bash "$root/scripts/install-deps.sh" >&2
source "$root/scripts/python/env.sh"
if ! "$ENGRAM_PY" -c "import nbconvert, matplotlib, ipykernel" 2> /dev/null; then
  echo "notebooks: jupyter nbconvert, matplotlib or ipykernel is missing: run scripts/install-deps.sh" >&2
  exit 1
fi
if [ ${#names[@]} -eq 0 ]; then
  for nb in "$root"/notebooks/*.ipynb; do names+=("$(basename "$nb" .ipynb)"); done
fi
executed_tmp=""
if [ -z "$executed" ]; then
  executed=$(mktemp -d)
  executed_tmp=$executed
fi
mkdir -p "$figures" "$executed"
# Each notebook's figures, in the order it saves them (figures.save's names): a figure missing
# here fails the run, so a notebook cannot silently stop drawing one.
declare -A expected=(
  [npi]="npi_generalization npi_sample_efficiency npi_training_curves npi_call_tree"
  [memory]="memory_timeline memory_tradeoff"
  [tbcnn]="tbcnn_accuracy tbcnn_vectors"
  [dp]="dp_timeline dp_link_speed"
)
export ENGRAM_RESULTS=$results ENGRAM_FIGURES=$figures
export PYDEVD_DISABLE_FILE_VALIDATION=1  # ipykernel's debugger warns about frozen modules
export MPLBACKEND=Agg
# Jupyter's connection files, IPython's profile and matplotlib's font cache in a scratch folder: no
# user configuration changes a figure, and a read-only home does not stop the run.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch" ${executed_tmp:-}' EXIT
export JUPYTER_RUNTIME_DIR=$scratch/runtime IPYTHONDIR=$scratch/ipython MPLCONFIGDIR=$scratch/mpl
status=0
for name in "${names[@]}"; do
  nb=$root/notebooks/$name.ipynb
  if [ ! -f "$nb" ]; then
    echo "notebooks: no notebook $name ($nb)" >&2
    exit 2
  fi
  for png in ${expected[$name]:-}; do rm -f "$figures/$png.png"; done
  start=$(date +%s)
  if ! (cd "$root/notebooks" && "$ENGRAM_PY" -m nbconvert --to notebook --execute \
    --ExecutePreprocessor.timeout=600 --output-dir "$executed" "$nb" > "$executed/$name.log" 2>&1)
  then
    echo "notebooks: $name.ipynb failed:" >&2
    grep -v "^0.00s - \|Debugger warning" "$executed/$name.log" | tail -25 >&2
    status=1
    continue
  fi
  for png in ${expected[$name]:-}; do
    file=$figures/$png.png
    if [ ! -s "$file" ]; then
      echo "notebooks: $name.ipynb did not write $file" >&2
      status=1
    fi
  done
  echo "notebooks: $name.ipynb ran in $(($(date +%s) - start)) s: ${expected[$name]:-no figures listed}"
done
exit $status
