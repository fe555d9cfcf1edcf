#!/usr/bin/env bash
# Speed of nertrain against the PyTorch + pytorch-crf reference, measured in the same sitting.
#
#   scripts/bench/reference.sh [RUNS]            default 3; writes bench-results.json and prints a table
#
# For each of RUNS rounds, and each (threads, batch size) in {1, 2} x {32, 10}, runs
# `nertrain bench` and the reference's `--bench` one after the other (alternating which goes
# first), with the same model sizes (embeddings 100, BiLSTM 2x100, 9 tags), batch size and thread
# count. Reports medians and the ratio of medians. Also: peak RSS of a CoNLL training epoch and the
# cold time of `nertrain tag` on one sentence.
#
# Data: ../shared/data/conll2003 if present, else a synthetic corpus of the same shape.
# Reference: $REF_VENV (default ../shared-ref-venv, installed by ../shared/ref/setup.sh); without
# it only nertrain is measured. On a GPU: scripts/bench/gpu.sh (wgpu against PyTorch on CUDA, by
# batch size).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/nertrain-target}
cargo build --release --quiet
nertrain=$CARGO_TARGET_DIR/release/nertrain
ref_venv=${REF_VENV:-../shared-ref-venv}
ref_script=../shared/ref/bilstm_crf_torch.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

. scripts/bench/corpus.sh
bench_corpus "$work"
have_ref=0
if [ -x "$ref_venv/bin/python" ] && [ -f "$ref_script" ]; then have_ref=1; else echo "no reference at $ref_venv: measuring nertrain only"; fi

steps_for() { if [ "$1" = 32 ]; then echo 150; else echo 300; fi; }
results=$work/results.jsonl
for run in $(seq 1 "$runs"); do
  for threads in 1 2; do
    for batch in 32 10; do
      steps=$(steps_for "$batch")
      ours() {
        RAYON_NUM_THREADS=$threads "$nertrain" bench --train "$train" --dev "$dev" --batch-size "$batch" --steps "$steps" \
          | python3 -c "import json,sys; r=json.load(sys.stdin); r.update(tool='nertrain',threads=$threads,run=$run); print(json.dumps(r))" >> "$results"
      }
      theirs() {
        [ "$have_ref" = 1 ] || return 0
        "$ref_venv/bin/python" "$ref_script" --bench --threads "$threads" --batch-size "$batch" --bench-steps "$steps" \
          --train "$train" --dev "$dev" --json "$work/ref.json" > /dev/null
        python3 -c "import json; r=json.load(open('$work/ref.json'))['bench']; r.update(tool='reference',threads=$threads,run=$run); print(json.dumps(r))" >> "$results"
      }
      if [ $(( (run + threads + batch) % 2 )) = 0 ]; then ours; theirs; else theirs; ours; fi
      echo "run $run, $threads thread(s), batch $batch: done" >&2
    done
  done
done

# Peak RSS of training one CoNLL-sized epoch, and the cold start of `tag` on one sentence.
fit_dir=$work/fit
/usr/bin/time -f '%M' -o "$work/fit.rss" "$nertrain" fit --config configs/conll.toml \
  --set data.train="$train" --set data.dev="$dev" --set data.test="$dev" --set train.epochs=1 \
  --set train.output="$fit_dir" > /dev/null 2>&1
python3 - "$work" "$nertrain" "$fit_dir" <<'PY' >> "$results"
import json, statistics, subprocess, sys, time
work, nertrain, model = sys.argv[1:4]
times = []
for _ in range(7):
    start = time.perf_counter()
    subprocess.run([nertrain, "tag", "--model", model, "Peter Schmidt flew from Berlin to Lisbon ."], check=True, capture_output=True)
    times.append(time.perf_counter() - start)
rss_kb = int(open(f"{work}/fit.rss").read().split()[-1])
print(json.dumps({"tool": "nertrain", "fit_epoch_peak_rss_mb": rss_kb / 1024, "cold_tag_ms_median": 1000 * statistics.median(times)}))
PY

python3 - "$results" <<'PY' | tee bench-results.txt
import json, math, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
json.dump(rows, open("bench-results.json", "w"), indent=1)
# (nertrain's key, the reference's key, name). The reference times one tagging pass, right after
# training: its figure is in both tagging rows.
metrics = [("train_tokens_per_s", "train_tokens_per_s", "training tokens/s"),
           ("decode_tokens_per_s", "decode_tokens_per_s", "tagging tokens/s (dev, batch 100)"),
           ("first_decode_tokens_per_s", "decode_tokens_per_s", "  first pass after training"),
           ("crf_forward_tokens_per_s", "crf_forward_tokens_per_s", "CRF log-partition tokens/s"),
           ("viterbi_tokens_per_s", "viterbi_tokens_per_s", "Viterbi tokens/s")]
print(f"{'measure':36} {'threads':>7} {'batch':>5} {'nertrain':>10} {'reference':>10} {'ratio':>6}")
median_of = lambda tool, key, threads, batch: statistics.median([r[key] for r in rows if r.get("tool") == tool and r.get("threads") == threads and r.get("batch_size") == batch and key in r] or [float("nan")])
for ours_key, their_key, name in metrics:
    for threads in (1, 2):
        for batch in (32, 10):
            o, t = median_of("nertrain", ours_key, threads, batch), median_of("reference", their_key, threads, batch)
            if not math.isnan(o):
                print(f"{name:36} {threads:>7} {batch:>5} {o:>10.0f} {t:>10.0f} {o / t:>6.2f}")
scaling = [median_of("nertrain", "decode_tokens_per_s", 2, b) / median_of("nertrain", "decode_tokens_per_s", 1, b) for b in (32, 10)]
print(f"nertrain tagging, 2 threads / 1 thread (rows 32 / 10): {scaling[0]:.2f} / {scaling[1]:.2f}")
extra = [r for r in rows if "cold_tag_ms_median" in r][0]
print(f"peak RSS, one CoNLL-sized training epoch: {extra['fit_epoch_peak_rss_mb']:.0f} MiB")
print(f"cold `nertrain tag` of one sentence (median of 7): {extra['cold_tag_ms_median']:.0f} ms")
print(f"(medians over {max(r.get('run', 0) for r in rows)} alternating runs; full rows in bench-results.json)")
PY
