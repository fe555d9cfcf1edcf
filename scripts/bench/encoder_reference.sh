#!/usr/bin/env bash
# Speed and memory of nertrain with a pretrained encoder against PyTorch (`transformers` +
# pytorch-crf, scripts/bench/encoder_torch.py) on the same checkpoint, in one sitting, each pinned
# to one core with one thread:
#
#   scripts/bench/encoder_reference.sh [RUNS]      default 3; prints medians and ratios, writes JSON
#
# Both models: the encoder's layers mixed, each word's first sub-token beside a word embedding
# (50) and character CNN features (30, 50 filters), BiLSTM 100 a direction, CRF; sentences on
# their own. Per run, alternating which goes first:
#   - a training epoch over the first $SENTENCES (default 1000) CoNLL-2003 training sentences,
#     the encoder fine-tuned, batch 10: tokens/s of the epoch's steps, and the peak RSS of the process;
#   - tagging CoNLL-2003 test's 3,453 sentences given as raw text (one line each) end to end, the
#     process's wall time from start to the last entity, batch 32: tokens/s of the whole, of
#     tagging alone (a one-line run's wall time taken off), and the peak RSS.
# Each side tags with the model its own epoch wrote. Both cut raw text into words their own way
# (nertrain as its training data was cut, PyTorch with a regular expression).
#
# Needs: the checkpoint ($CHECKPOINT, default checkpoints/all-MiniLM-L6-v2, installed by
# scripts/encoders/install_minilm.sh), CoNLL-2003 in ../shared/data, and a Python with torch,
# transformers, pytorch-crf and seqeval ($TORCH_PYTHON, default ~/.cache/nertrain-encoders).
# KEEP=FILE keeps every run's JSON.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
core=${CORE:-1}
sentences=${SENTENCES:-1000}
checkpoint=$(realpath "${CHECKPOINT:-checkpoints/all-MiniLM-L6-v2}")
python=${TORCH_PYTHON:-$HOME/.cache/nertrain-encoders/bin/python}
corpus=../shared/data/conll2003
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/nertrain-target}
nertrain=${NERTRAIN_BIN:-}
if [ -z "$nertrain" ]; then
  cargo build --release --quiet -p nertrain-cli
  nertrain=$CARGO_TARGET_DIR/release/nertrain
fi
[ -f "$checkpoint/model.safetensors" ] || { echo "no checkpoint at $checkpoint: run scripts/encoders/install_minilm.sh" >&2; exit 1; }
[ -f "$corpus/train.txt" ] || { echo "no CoNLL-2003 at $corpus" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$corpus" "$work" "$sentences" <<'PY'
import sys
corpus, work, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def sentences(path):
    blocks = open(path, encoding="utf-8").read().split("\n\n")
    return [b.strip("\n") for b in blocks if b.strip() and not b.startswith("-DOCSTART-")]
open(f"{work}/train.txt", "w").write("\n\n".join(sentences(f"{corpus}/train.txt")[:n]) + "\n")
open(f"{work}/dev.txt", "w").write("\n\n".join(sentences(f"{corpus}/valid.txt")[:100]) + "\n")
text = [" ".join(line.split()[0] for line in s.split("\n")) for s in sentences(f"{corpus}/test.txt")]
open(f"{work}/text.txt", "w").write("\n".join(text) + "\n")
open(f"{work}/one.txt", "w").write(text[0] + "\n")
print(sum(len(t.split()) for t in text), file=open(f"{work}/text.tokens", "w"))
PY

cat > "$work/bench.toml" <<EOF
[data]
train = "$work/train.txt"
dev = "$work/dev.txt"
word_column = 0
tag_column = -1
train_scheme = "iob2"
lowercase = true
min_word_count = 1

[model]
word_dim = 50
casing_dim = 0
mention_dim = 0
char_features = "cnn"
char_dim = 30
char_filters = 50
hidden = 100
dropout = 0.5
pretrained = "$checkpoint"
pretrained_tuning = "fine-tune"

[train]
epochs = 1
batch_size = 10
optimizer = "adam"
lr = 0.001
clip_norm = 5.0
reduction = "sum"
encoder_lr = 5e-5
encoder_weight_decay = 0.01
seed = 42
EOF

# Runs a command on one core with one thread, its wall seconds and peak RSS (KiB) written to $1.
pinned() {
  local out=$1; shift
  /usr/bin/time -f '%e %M' -o "$out" env RAYON_NUM_THREADS=1 OMP_NUM_THREADS=1 taskset -c "$core" "$@"
}
record() { python3 -c "import json,sys; r=json.loads(sys.argv[1]); r.update(json.loads(sys.argv[2])); print(json.dumps(r))" "$@" >> "$work/results.jsonl"; }
rss_of() { cut -d' ' -f2 "$1"; }
wall_of() { cut -d' ' -f1 "$1"; }

ours_train() {
  rm -rf "$work/ours"
  pinned "$work/t" "$nertrain" fit --config "$work/bench.toml" --set train.output="$work/ours" > /dev/null 2>&1
  local epoch; epoch=$(head -n 1 "$work/ours/metrics.jsonl")
  record "{\"tool\":\"nertrain\",\"what\":\"train\",\"run\":$1,\"rss_kib\":$(rss_of "$work/t")}" \
    "$(python3 -c "import json,sys; e=json.loads(sys.argv[1]); print(json.dumps({'tokens_per_second': e['tokens_per_second'], 'seconds': e['train_seconds']}))" "$epoch")"
}
theirs_train() {
  pinned "$work/t" "$python" scripts/bench/encoder_torch.py train --checkpoint "$checkpoint" \
    --train "$work/train.txt" --model "$work/theirs.pt" > "$work/theirs.json" 2> /dev/null
  record "{\"tool\":\"pytorch\",\"what\":\"train\",\"run\":$1,\"rss_kib\":$(rss_of "$work/t")}" "$(cat "$work/theirs.json")"
}
tag_with() {
  local tool=$1 run=$2; shift 2
  pinned "$work/one" "$@" "$work/one.txt" > /dev/null 2>&1
  pinned "$work/all" "$@" "$work/text.txt" > "$work/$tool.tagged" 2> /dev/null
  record "{\"tool\":\"$tool\",\"what\":\"tag\",\"run\":$run,\"rss_kib\":$(rss_of "$work/all")}" \
    "{\"seconds\":$(wall_of "$work/all"),\"start_seconds\":$(wall_of "$work/one"),\"tokens\":$(cat "$work/text.tokens")}"
}
ours_tag() { tag_with nertrain "$1" "$nertrain" tag --model "$work/ours" --format json --input; }
theirs_tag() { tag_with pytorch "$1" "$python" scripts/bench/encoder_torch.py tag --model "$work/theirs.pt" --input; }

for run in $(seq 1 "$runs"); do
  if [ $((run % 2)) = 1 ]; then ours_train "$run"; theirs_train "$run"; else theirs_train "$run"; ours_train "$run"; fi
  if [ $((run % 2)) = 1 ]; then theirs_tag "$run"; ours_tag "$run"; else ours_tag "$run"; theirs_tag "$run"; fi
  echo "run $run of $runs: done" >&2
done
[ -n "${KEEP:-}" ] && cp "$work/results.jsonl" "$KEEP"

python3 - "$work/results.jsonl" "$sentences" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def median(tool, what, key):
    return statistics.median(key(r) for r in rows if r["tool"] == tool and r["what"] == what)
measures = [
    ("train", f"training epoch ({sys.argv[2]} sentences, batch 10), tokens/s", lambda r: r["tokens_per_second"]),
    ("tag", "tagging raw text end to end (batch 32), tokens/s", lambda r: r["tokens"] / r["seconds"]),
    ("tag", "tagging alone (start-up taken off), tokens/s", lambda r: r["tokens"] / (r["seconds"] - r["start_seconds"])),
    ("tag", "start-up (one line), s", lambda r: r["start_seconds"]),
    ("train", "peak RSS of the epoch, MiB", lambda r: r["rss_kib"] / 1024),
    ("tag", "peak RSS of tagging, MiB", lambda r: r["rss_kib"] / 1024),
]
print(f"| medians of {len(rows) // 4} runs | nertrain | PyTorch | nertrain / PyTorch |")
print("|---|---:|---:|---:|")
for what, name, key in measures:
    ours, theirs = median("nertrain", what, key), median("pytorch", what, key)
    print(f"| {name} | {ours:,.1f} | {theirs:,.1f} | {ours / theirs:.2f} |")
PY
