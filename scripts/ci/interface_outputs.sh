#!/usr/bin/env bash
# Every interface's output on the shipped sample, into one directory per binary, so that two
# builds (before and after a change meant to keep outputs) can be compared with `diff -r`:
#
#   scripts/ci/interface_outputs.sh OLD_BINARY /tmp/old
#   scripts/ci/interface_outputs.sh target/release/nertrain /tmp/new
#   diff -r /tmp/old /tmp/new && echo identical
#
# Trains a sentence- and a document-level model on data/sample (seeded, so the same bits each
# time), then records fit's stdout, the run's files (less timings), tag in every format with
# probabilities and n-best, eval (report, JSON, confusion, calibration, columns, stdin),
# tokenize, report, convert, and serve's answers on loopback. The weights are not compared as
# bytes (Burn's file gives each tensor a random id), nor is serve's model version, their hash;
# every probability printed shows them.
# The runs go to one fixed scratch path, which fit's output and config.toml name.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(realpath "$1")
out=$2
rm -rf "$out"
mkdir -p "$out"
texts=("Anna Schmidt , who works for Siemens , arrived in Lisbon on Monday ."
    "Peter lives in Berlin. He works for Acme Corp in Paris."
    "Émile Zola et Jean Dupont à Genève ; l'ONU")
for context in sentence document; do
    dir="$out/$context"
    mkdir -p "$dir"
    run="${TMPDIR:-/tmp}/nertrain-interface-outputs/$context"
    rm -rf "$run"
    # Timings vary from run to run: masked in fit's stdout, left out of the run's files.
    "$bin" fit --config configs/sample.toml --set "train.output=\"$run\"" \
        --set "data.context=\"$context\"" 2>/dev/null |
        sed -E 's/[0-9.]+ sent\/s/N sent\/s/; s/[0-9.]+s (train|dev)/Ns \1/g' >"$dir/fit.txt"
    for file in model.json vocab.json config.toml dev.json test.json; do
        cp "$run/$file" "$dir/run.$file"
    done
    for format in text conll json html; do
        "$bin" tag --model "$run" --format "$format" "${texts[@]}" >"$dir/tag.$format"
        "$bin" tag --model "$run" --format "$format" --probs --nbest 3 "${texts[@]}" \
            >"$dir/tag-nbest.$format"
    done
    "$bin" tag --model "$run" --format json --input data/sample/rawtext.txt >"$dir/tag-input.json"
    "$bin" tag --model "$run" --unconstrained --batch-size 3 --input - \
        <data/sample/rawtext.txt >"$dir/tag-stdin.txt"
    "$bin" eval --model "$run" --data data/sample/test.txt --confusion --calibration \
        --output "$dir/eval-columns.txt" >"$dir/eval.txt"
    "$bin" eval --model "$run" --data data/sample/test.txt --json >"$dir/eval.json"
    "$bin" eval --model "$run" --data - <data/sample/test.txt >"$dir/eval-stdin.txt"
    "$bin" eval --model "$run" --data data/sample/rawtext.jsonl --json >"$dir/eval-spans.json"
    "$bin" tokenize --model "$run" "${texts[@]}" >"$dir/tokenize.txt"
    "$bin" report "$run" | sed -E 's/ +[0-9]+ +[0-9.]+$/ N N/' >"$dir/report.txt"
    # serve on a free loopback port: the page, the model, and tagging.
    "$bin" serve --model "$run" --addr 127.0.0.1:0 --threads 2 2>"$dir/serve.log" &
    server=$!
    for _ in $(seq 100); do
        grep -q "serving" "$dir/serve.log" && break
        sleep 0.1
    done
    url=$(grep -o 'http://[0-9.:]*' "$dir/serve.log")
    curl -s "$url/model" | sed -E -e 's/"nertrain_version":"[^"]*"/"nertrain_version":"V"/' \
        -e 's/"version":"[^"]*"/"version":"W"/' >"$dir/serve-model.json"
    curl -s "$url/" >"$dir/serve-page.html"
    curl -s -X POST "$url/tag" -d "{\"texts\": [\"${texts[1]}\", \"${texts[0]}\"], \"probs\": true, \"nbest\": 2}" \
        >"$dir/serve-tag.json"
    curl -s -X POST "$url/tag" -d '{"text": "Anna", "nbest": 101}' >"$dir/serve-bad.json"
    kill -TERM "$server"
    wait "$server" || true
    rm -r "$dir/serve.log" "$run"
done
"$bin" convert --to iobes data/sample/test.txt >"$out/convert.txt"
"$bin" convert --to iob1 data/sample/rawtext.jsonl >"$out/convert-spans.txt"
