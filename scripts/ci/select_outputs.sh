#!/usr/bin/env bash
# `select`'s tasks for every strategy and format on the shipped sample, into one directory per
# binary, so that two builds can be compared with `diff -r` (as scripts/ci/interface_outputs.sh
# does for the other interfaces):
#
#   scripts/ci/select_outputs.sh OLD_BINARY MODEL /tmp/old
#   scripts/ci/select_outputs.sh target/release/nertrain MODEL /tmp/new
#   diff -r /tmp/old /tmp/new && echo identical
#
# MODEL is a model directory both use (one with dropout, for bald), e.g. `fit --config
# configs/sample.toml`'s. The pool is data/sample/pool.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(realpath "$1")
model=$2
out=$3
rm -rf "$out"
mkdir -p "$out"
pool=data/sample/pool.txt
choose() {
    local name=$1
    shift
    "$bin" select --model "$model" --input "$pool" "$@" --output "$out/$name" \
        2>"$out/$name.stderr"
}
for strategy in least-confidence margin entropy expected-errors mnlp bald random; do
    for format in label-studio doccano; do
        choose "$strategy.$format" --strategy "$strategy" --budget 40 --format "$format"
        choose "$strategy-tokens.$format" --strategy "$strategy" --budget 400 \
            --budget-unit tokens --format "$format"
    done
done
for format in label-studio doccano; do
    choose "regions-unknown.$format" --strategy mnlp --budget 300 --budget-unit tokens \
        --regions 0.99 --format "$format"
    choose "regions-model.$format" --strategy mnlp --budget 300 --budget-unit tokens \
        --regions 0.99 --rest model --format "$format"
    choose "diversity.$format" --strategy margin --budget 40 --diversity 1 --format "$format"
    choose "similarity.$format" --strategy entropy --budget 40 --max-similarity 0.3 \
        --format "$format"
done
choose remaining.label-studio --strategy margin --budget 25 --remaining "$out/remaining.txt"
