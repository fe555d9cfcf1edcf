#!/usr/bin/env bash
# Two builds of nertrain side by side in one sitting, as a refactor must show it changed no speed:
# `nertrain bench` of each in turn (alternating which goes first), pinned to one core with one
# thread, on CoNLL-2003 from $CORPUS (default ../shared/data/conll2003; a synthetic corpus of the
# same shape without it). Prints each build's median training and tagging tokens/s over the runs
# and B's over A's.
#
#   scripts/bench/compare.sh BINARY_A BINARY_B [RUNS]    default 9 runs of each, batch 32 and 10
#
# KEEP=FILE keeps every run's JSON. Single runs spread by several percent: take 15 runs or more
# when the builds should be within a few percent of each other.
#
# Build the older commit with `git worktree add /tmp/old COMMIT` and a target directory of its own
# (CARGO_TARGET_DIR), or copy its binary away before building the newer one.
set -euo pipefail
cd "$(dirname "$0")/../.."
a=$(realpath "$1")
b=$(realpath "$2")
runs=${3:-9}
core=${CORE:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. scripts/bench/corpus.sh
bench_corpus "$work"

steps_for() { if [ "$1" = 32 ]; then echo 150; else echo 300; fi; }
one() {
  local name=$1 bin=$2 batch=$3 run=$4
  RAYON_NUM_THREADS=1 taskset -c "$core" "$bin" bench --train "$train" --dev "$dev" \
    --batch-size "$batch" --steps "$(steps_for "$batch")" |
    python3 -c "import json,sys; r=json.load(sys.stdin); r.update(build='$name',run=$run); print(json.dumps(r))" \
      >> "$work/results.jsonl"
}
for run in $(seq 1 "$runs"); do
  for batch in 32 10; do
    if [ $(( (run + batch) % 2 )) = 0 ]; then
      one A "$a" "$batch" "$run"; one B "$b" "$batch" "$run"
    else
      one B "$b" "$batch" "$run"; one A "$a" "$batch" "$run"
    fi
  done
  echo "run $run of $runs done" >&2
done
if [ -n "${KEEP:-}" ]; then cp "$work/results.jsonl" "$KEEP"; fi
python3 - "$work/results.jsonl" "$a" "$b" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"A: {sys.argv[2]}\nB: {sys.argv[3]}\n{len(rows) // 4} runs of each, one core, one thread; medians")
print(f"{'':24}{'A':>12}{'B':>12}{'B / A':>9}")
for key, label in [("train_tokens_per_s", "training tokens/s"), ("decode_tokens_per_s", "tagging tokens/s")]:
    for batch in (32, 10):
        median = lambda build: statistics.median(
            r[key] for r in rows if r["build"] == build and r["batch_size"] == batch)
        a, b = median("A"), median("B")
        print(f"{label + f', batch {batch}':24}{a:>12,.0f}{b:>12,.0f}{b / a:>9.3f}")
PY
