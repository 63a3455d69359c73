#!/usr/bin/env bash
# stale.py names what it cannot vouch for: on a results folder holding a file made at HEAD, one at
# a commit this clone does not have, one recording no commit and one made at HEAD with the commit
# under reproduce (the memory benchmarks' layout), it must exit 0 and name exactly the second and
# the third, the bogus one with its reason. (What makes a file of a real commit stale, a change
# to its measured code, is checked in scratch clones: stale_scopes_scripts.sh and
# stale_scopes_commands.sh; here it would depend on what HEAD last changed.)
# Usage: stale_names_bogus_commit.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: stale_names_bogus_commit.sh SOURCE_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head=$(git -C "$src" rev-parse --short HEAD) || { echo "FAIL: $src is not a git clone"; exit 1; }
bogus=0badc0ffee0badc0ffee0badc0ffee0badc0ffee
if git -C "$src" cat-file -e "$bogus^{commit}" 2> /dev/null; then
  echo "FAIL: $bogus is a commit of this clone"; exit 1
fi
mkdir -p "$work/results"
printf '{"claim": "made at HEAD", "commit": "%s"}\n' "$head" > "$work/results/current.json"
printf '{"claim": "made elsewhere", "commit": "%s"}\n' "$bogus" > "$work/results/bogus.json"
printf '{"claim": "no commit"}\n' > "$work/results/nocommit.json"
printf '{"claim": "memory", "reproduce": {"commit": "%s"}}\n' "$head" > "$work/results/nested.json"
expect=2
out=$(/usr/bin/python3 "$src/scripts/reproduce/stale.py" --repo "$src" --results "$work/results")
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: stale.py exited $rc; it names, it does not fail"; exit 1; }
echo "$out" | grep -q "^stale: .*bogus.json: commit $bogus is not in this clone's history" ||
  { echo "FAIL: the file of a bogus commit is not named with its reason"; exit 1; }
echo "$out" | grep -q "^stale: .*nocommit.json: records no commit" ||
  { echo "FAIL: the file without a commit is not named"; exit 1; }
if echo "$out" | grep -q "current.json\|nested.json"; then
  echo "FAIL: a file made at HEAD is named stale"; exit 1
fi
echo "$out" | grep -q "^stale.py: $expect of $((expect + 2)) results files stale" ||
  { echo "FAIL: the summary line does not count $expect of $((expect + 2))"; exit 1; }
echo "stale.py names the stale files ($expect), not those made at HEAD"
