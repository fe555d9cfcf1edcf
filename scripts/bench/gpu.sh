#!/usr/bin/env bash
# Speed on a GPU: nertrain's wgpu backend against the PyTorch + pytorch-crf reference on CUDA, by
# training batch size, measured in the same sitting.
#
#   scripts/bench/gpu.sh [RUNS] [BATCH...]      default 3 runs; batches 10 32 128 512
#
# For each run and batch size: `nertrain --backend wgpu bench` with the fused recurrence (the
# default), the same with the tensor-op recurrence (NERTRAIN_TENSOR_RECURRENCE=1, what ran before
# the fused kernels), and the reference's `--bench --device cuda`, with the same model sizes
# (embeddings 100, BiLSTM 2x100, no character features). Prints medians; every row goes to
# bench-gpu-results.jsonl as it is measured.
#
# NERTRAIN: a binary built with `--features wgpu` (default: build one here).
# REF_PYTHON: a Python with torch (CUDA) and pytorch-crf (default: ../shared-ref-venv/bin/python,
#   else python3); without one that imports them, only nertrain is measured.
# CORPUS: a folder with CoNLL-2003 train.txt and valid.txt (default ../shared/data/conll2003;
#   without it, a synthetic corpus of the same shape).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
shift || true
batches=${*:-10 32 128 512}
if [ -z "${NERTRAIN:-}" ]; then
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/nertrain-target}
  cargo build --release --quiet --features wgpu
  NERTRAIN=$CARGO_TARGET_DIR/release/nertrain
fi
ref_script=${REF_SCRIPT:-../shared/ref/bilstm_crf_torch.py}
ref_python=${REF_PYTHON:-../shared-ref-venv/bin/python}
[ -x "$ref_python" ] || ref_python=python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

. scripts/bench/corpus.sh
bench_corpus "$work"
have_ref=0
if [ -f "$ref_script" ] && "$ref_python" -c "import torch, torchcrf; assert torch.cuda.is_available()" 2>/dev/null; then
  have_ref=1
else
  echo "no CUDA reference ($ref_python with torch and pytorch-crf): measuring nertrain only"
fi

# Timed steps at each size, after as many untimed ones: cubecl autotunes its matmuls for each new
# shape (a new longest sentence in the batch) the first time it meets one, which a real run pays
# in its first epoch only.
steps_for() { case $1 in 10) echo 150 ;; 32) echo 100 ;; *) echo 60 ;; esac; }
results=bench-gpu-results.jsonl
: > "$results"
for run in $(seq 1 "$runs"); do
  for batch in $batches; do
    steps=$(steps_for "$batch")
    for recurrence in fused tensor; do
      if [ "$recurrence" = tensor ]; then export NERTRAIN_TENSOR_RECURRENCE=1; else unset NERTRAIN_TENSOR_RECURRENCE; fi
      "$NERTRAIN" --backend wgpu bench --train "$train" --dev "$dev" --batch-size "$batch" --steps "$steps" --warmup "$steps" \
        | python3 -c "import json,sys; r=json.load(sys.stdin); r.update(tool='nertrain-$recurrence',run=$run); print(json.dumps(r))" >> "$results"
    done
    unset NERTRAIN_TENSOR_RECURRENCE
    if [ "$have_ref" = 1 ]; then
      "$ref_python" "$ref_script" --bench --device cuda --batch-size "$batch" --bench-steps "$steps" --bench-warmup "$steps" \
        --train "$train" --dev "$dev" --json "$work/ref.json" > /dev/null
      python3 -c "import json; r=json.load(open('$work/ref.json'))['bench']; r.update(tool='reference',run=$run); print(json.dumps(r))" >> "$results"
    fi
    echo "run $run, batch $batch: done" >&2
  done
done

python3 - "$results" <<'PY' | tee bench-gpu-results.txt
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
tools = ["nertrain-fused", "nertrain-tensor", "reference"]
for key, name in [("train_tokens_per_s", "training tokens/s"), ("decode_tokens_per_s", "tagging tokens/s (dev, batch 100)")]:
    print(f"{name}")
    print(f"{'batch':>6} {'fused':>10} {'tensor-op':>10} {'PyTorch':>10} {'fused/PyTorch':>14} {'fused/tensor-op':>16}")
    for batch in sorted({r["batch_size"] for r in rows}):
        med = {}
        for tool in tools:
            values = [r[key] for r in rows if r["tool"] == tool and r["batch_size"] == batch and key in r]
            med[tool] = statistics.median(values) if values else float("nan")
        f, t, p = (med[tool] for tool in tools)
        print(f"{batch:>6} {f:>10.0f} {t:>10.0f} {p:>10.0f} {f / p:>14.2f} {f / t:>16.2f}")
print(f"(medians over {max(r['run'] for r in rows)} runs; full rows in bench-gpu-results.jsonl)")
PY
