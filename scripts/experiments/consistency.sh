#!/usr/bin/env bash
# Chooses a model's document consistency weight on dev, as `fit` does for a document-level run
# (the smallest of the best among 0, 1, 2, 4, 8, 16, 32), and scores test and CoNLL++ with it. The
# model must read documents (`eval --consistency` refuses one that reads sentences alone). Prints
# one line:
#
#   RUN dev@0 dev@0.5 ... chosen=W dev=F test=F conllpp=F
#
#   scripts/experiments/consistency.sh RUN [CORPUS_DIR]     default: ../shared/data/conll2003
set -euo pipefail
cd "$(dirname "$0")/../.."
run=$1
corpus=${2:-../shared/data/conll2003}
conllpp=${CONLLPP:-../shared/data/conllpp/test.txt}
nertrain=${NERTRAIN:-target/release/nertrain}
f1() { "$nertrain" eval --model "$run" --data "$1" --consistency "$2" | grep -o 'FB1: *[0-9.]*' | head -n 1 | grep -o '[0-9.]*$'; }
best_weight=0 best_f1=-1 line="$run"
for weight in 0 1 2 4 8 16 32; do
  dev=$(f1 "$corpus/valid.txt" "$weight")
  line="$line dev@$weight=$dev"
  if awk -v a="$dev" -v b="$best_f1" 'BEGIN { exit !(a > b) }'; then best_weight=$weight best_f1=$dev; fi
done
test=$(f1 "$corpus/test.txt" "$best_weight")
pp=$( [ -f "$conllpp" ] && f1 "$conllpp" "$best_weight" || echo "-")
test0=$(f1 "$corpus/test.txt" 0)
pp0=$( [ -f "$conllpp" ] && f1 "$conllpp" 0 || echo "-")
echo "$line chosen=$best_weight dev=$best_f1 test=$test conllpp=$pp test@0=$test0 conllpp@0=$pp0"
