#!/usr/bin/env bash
# Sweep trials on one GPU: K `fit`s of an experiment sharing the GPU at once (what
# `scripts/ray/sweep.py run --gpus-per-trial 1/K` gives each trial), against one-thread fits on every
# CPU core, in one sitting. Says how many trials a GPU takes before they slow each other down,
# and what a GPU's trials train against the machine's cores.
#
#   NERTRAIN=target/release/nertrain scripts/bench/gpu_trials.sh [EXPERIMENT]
#
# EXPERIMENT: default configs/conll-adam.toml, its data taken from CORPUS.
# NERTRAIN: a binary built with `--features wgpu`. CORPUS: a folder with CoNLL-2003's train.txt,
# valid.txt and test.txt (default ../shared/data/conll2003). EPOCHS: epochs each fit runs (default
# 2; the last is the one reported, the first pays cubecl's autotuning). SHARES: the trial counts
# sharing the GPU (default "1 4 8"). GPU_THREADS: rayon threads of each GPU fit (default 2).
# CPU_TRIALS: one-thread flex fits run at once (default: the machine's cores). Each GPU fit's
# adapter is CUBECL_WGPU_DEFAULT_DEVICE (default DiscreteGpu(0), as sweep.py sets it for Ray's
# GPU 0). Every fit's last epoch goes to RESULTS (default gpu-trials.jsonl); the table is printed
# at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
experiment=${1:-configs/conll-adam.toml}
nertrain=${NERTRAIN:?set NERTRAIN to a binary built with --features wgpu}
corpus=${CORPUS:-../shared/data/conll2003}
epochs=${EPOCHS:-2}
shares=${SHARES:-1 4 8}
gpu_threads=${GPU_THREADS:-2}
cpu_trials=${CPU_TRIALS:-$(nproc)}
export CUBECL_WGPU_DEFAULT_DEVICE=${CUBECL_WGPU_DEFAULT_DEVICE:-DiscreteGpu(0)}
for split in train valid test; do
  [ -f "$corpus/$split.txt" ] || { echo "no $corpus/$split.txt (set CORPUS)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=${RESULTS:-gpu-trials.jsonl}
: > "$results"

# K fits of the experiment at once on BACKEND with THREADS each (seeds 1..K); each one's last
# epoch, and the group's wall seconds, appended to the results.
group() {
  local backend=$1 count=$2 threads=$3 name=$4
  local started ended pids=()
  started=$(date +%s.%N)
  for i in $(seq 1 "$count"); do
    RAYON_NUM_THREADS=$threads "$nertrain" --backend "$backend" fit --config "$experiment" \
      --set "data.train=\"$corpus/train.txt\"" --set "data.dev=\"$corpus/valid.txt\"" \
      --set "data.test=\"$corpus/test.txt\"" --set "train.epochs=$epochs" --set "train.seed=$i" \
      --set "train.output=\"$work/$name-$i\"" > "$work/$name-$i.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || { echo "a fit of $name failed:" >&2; cat "$work/$name"-*.log >&2; exit 1; }
  done
  ended=$(date +%s.%N)
  for i in $(seq 1 "$count"); do
    tail -1 "$work/$name-$i/metrics.jsonl" | python3 -c "
import json, sys
r = json.load(sys.stdin)
r.update(setup='$name', backend='$backend', trials=$count, threads=$threads, wall_seconds=$ended - $started)
print(json.dumps(r))" >> "$results"
  done
  rm -rf "$work/$name"-*
}

for k in $shares; do
  group wgpu "$k" "$gpu_threads" "gpu-x$k"
done
group flex "$cpu_trials" 1 "cpu-x$cpu_trials"

python3 - "$results" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print("| setup | fits at once | threads each | last epoch's training s (median) | sentences/s, all fits | wall s |")
print("|---|---:|---:|---:|---:|---:|")
for setup in dict.fromkeys(r["setup"] for r in rows):
    group = [r for r in rows if r["setup"] == setup]
    first = group[0]
    print(f"| {first['backend']} | {first['trials']} | {first['threads']} | "
          f"{statistics.median(r['train_seconds'] for r in group):.1f} | "
          f"{sum(r['sentences_per_second'] for r in group):,.0f} | {first['wall_seconds']:.0f} |")
EOF
