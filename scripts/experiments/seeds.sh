#!/usr/bin/env bash
# Trains one configuration once per seed on CoNLL-2003 from ../shared/data (never copied into the
# project), each run on one thread, JOBS runs at a time, into runs/NAME-sSEED. Extra arguments
# are `--set` overrides for every run.
#
#   scripts/experiments/seeds.sh NAME CONFIG [--set key=value ...]
#   SEEDS="1 2 3" JOBS=2 scripts/experiments/seeds.sh conll-doc configs/conll-doc.toml
#   scripts/experiments/seeds.sh conll-glove-doc configs/conll-doc.toml --set data.vectors=GLOVE --set model.word_dim=50
#
# GLOVE in an override stands for ../shared/data/glove/glove.6B.50d.conll2003.txt.gz.
# Summarise with scripts/experiments/summarize_runs.py runs/NAME-s*.
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1 config=$2
shift 2
corpus=${CORPUS:-../shared/data/conll2003}
glove=${GLOVE:-../shared/data/glove/glove.6B.50d.conll2003.txt.gz}
[ -f "$corpus/train.txt" ] || { echo "no $corpus/train.txt: see ../shared/data/SOURCES.md" >&2; exit 1; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/nertrain-target}
if [ -z "${NERTRAIN:-}" ]; then
  cargo build --release --quiet
  NERTRAIN=$CARGO_TARGET_DIR/release/nertrain
fi
overrides=()
for arg in "$@"; do overrides+=("${arg//GLOVE/$glove}"); done
mkdir -p runs
run_one() {
  local seed=$1 out=runs/$name-s$seed
  RAYON_NUM_THREADS=1 "$NERTRAIN" fit --config "$config" \
    --set data.train="$corpus/train.txt" --set data.dev="$corpus/valid.txt" \
    --set data.test="$corpus/test.txt" --set train.seed="$seed" --set train.output="$out" \
    --overwrite "${overrides[@]}" > "runs/$name-s$seed.log" 2>&1 \
    && echo "$out: $(tail -n 1 "runs/$name-s$seed.log")" \
    || { echo "$out: FAILED, see runs/$name-s$seed.log" >&2; return 1; }
}
status=0
running=0
for seed in ${SEEDS:-1 2 3}; do
  run_one "$seed" &
  running=$((running + 1))
  if [ "$running" -ge "${JOBS:-2}" ]; then wait -n || status=1; running=$((running - 1)); fi
done
while [ "$running" -gt 0 ]; do wait -n || status=1; running=$((running - 1)); done
exit $status
