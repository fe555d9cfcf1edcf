#!/usr/bin/env bash
# Whether a training step costs the same after thousands of steps as at the start, on the corpora
# most likely to leak: every sentence one token long (no CRF transitions are used), and two tokens
# long for comparison. `nertrain bench` times each step; this compares the median step of the
# last quarter with that of the first and fails above MAX_GROWTH (default 2: the leak it was
# written for made the last steps several times slower than the first, a healthy build keeps
# them about equal).
#
#   scripts/bench/steps.sh [STEPS]       default 4000 steps of batch size 1
#
# Found this way: Burn never frees an autodiff node that no loss reaches, and every backward pass
# walks all of them; a CRF that built its transition term for one-token batches made each step
# slower than the last, and each epoch several times slower than the one before.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-4000}
MAX_GROWTH=${MAX_GROWTH:-2.0}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/nertrain-target}
# NERTRAIN_BIN names a binary already built (.ci/run passes the test build's); else it is built.
nertrain=${NERTRAIN_BIN:-$CARGO_TARGET_DIR/release/nertrain}
[ -n "${NERTRAIN_BIN:-}" ] || cargo build --release --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The shipped sample's tokens, each its own sentence, and in pairs.
awk 'NF >= 2 && $1 != "-DOCSTART-" { print $1, $NF; print "" }' data/sample/train.txt > "$work/one.txt"
awk 'NF >= 2 && $1 != "-DOCSTART-" { print $1, $NF; if (++n % 2 == 0) print "" }' data/sample/train.txt > "$work/two.txt"
status=0
for corpus in one two; do
  result=$(RAYON_NUM_THREADS=1 "$nertrain" bench --train "$work/$corpus.txt" --dev "$work/$corpus.txt" \
    --batch-size 1 --steps "$steps" --warmup 50)
  read -r first last growth < <(python3 -c "import json,sys; r=json.loads(sys.argv[1]); print(r['step_ms_first_quarter'], r['step_ms_last_quarter'], r['step_time_growth'])" "$result")
  verdict=ok
  awk -v g="$growth" -v m="$MAX_GROWTH" 'BEGIN { exit !(g <= m) }' || { verdict="FAIL (above $MAX_GROWTH)"; status=1; }
  printf '%s-token sentences, %s steps: median step %.3f ms in the first quarter, %.3f ms in the last: x%.2f %s\n' \
    "$corpus" "$steps" "$first" "$last" "$growth" "$verdict"
done
exit $status
