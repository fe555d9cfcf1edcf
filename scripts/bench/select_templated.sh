#!/usr/bin/env bash
# select's near-duplicate filter on a machine-made pool: 20,000 texts of one template, eight
# words shared and two of their own, so that any two are alike (Jaccard 8/12) but under the
# threshold (0.7) and every text is chosen. Times `select --budget 6000` with the filter and
# without (--max-similarity 1), median of RUNS, for each binary given, in one sitting.
# Usage: scripts/bench/select_templated.sh MODEL RUNS BINARY...
set -euo pipefail
model=$1
runs=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work/pool.txt" <<'PY'
import sys
with open(sys.argv[1], "w") as out:
    for i in range(20000):
        out.write(f"Officials said on Monday that shares in {i}alpha {i}beta rose .\n")
PY
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for binary in "$@"; do
    for similarity in 0.7 1; do
        seconds=$(for _ in $(seq "$runs"); do
            start=$(date +%s.%N)
            "$binary" select --model "$model" --input "$work/pool.txt" --budget 6000 \
                --strategy random --seed 1 --max-similarity "$similarity" \
                --output "$work/chosen.json" 2>/dev/null
            end=$(date +%s.%N)
            echo "$end - $start" | bc
        done | median)
        chosen=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$work/chosen.json")
        echo "$binary max-similarity=$similarity: ${seconds} s (median of $runs), $chosen texts chosen"
    done
done
