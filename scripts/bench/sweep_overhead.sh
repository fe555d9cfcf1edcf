#!/usr/bin/env bash
# One trial through Ray Tune (scripts/ray/sweep.py, with the local Ray it starts) against `nertrain fit`
# alone: conll-adam for EPOCHS epochs on one thread, RUNS runs of each, alternating; prints each
# run's wall seconds, the trial's own seconds as Tune timed it, and whether the two models'
# files are the same bytes. Run it inside a loopback-only namespace as CI does:
#   unshare -n bash -c 'ip link set lo up; RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled scripts/bench/sweep_overhead.sh'
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-$HOME/.cache/nertrain-ray-2.60.0/bin/python}
nertrain=$(realpath "${NERTRAIN:-${CARGO_TARGET_DIR:-target}/release/nertrain}")
data=${DATA:-../shared/data/conll2003}
runs=${RUNS:-3}
epochs=${EPOCHS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '[space]\n"train.seed" = { grid = [42] }\n' >"$work/one.toml"
sets=(--set "data.train=\"$data/train.txt\"" --set "data.dev=\"$data/valid.txt\""
      --set "data.test=\"$data/test.txt\"" --set "train.epochs=$epochs")
for i in $(seq "$runs"); do
    t0=$(date +%s.%N)
    RAYON_NUM_THREADS=1 "$nertrain" fit --config configs/conll-adam.toml "${sets[@]}" \
        --set "train.output=\"$work/alone-$i\"" >/dev/null 2>&1
    t1=$(date +%s.%N)
    "$python" scripts/ray/sweep.py run --experiment configs/conll-adam.toml "${sets[@]}" --space "$work/one.toml" \
        --scheduler none --storage "$work" --name ray-$i --binary "$nertrain" >/dev/null 2>&1
    t2=$(date +%s.%N)
    trial=$("$python" -c "import json, glob; print(json.loads(open(glob.glob('$work/ray-$i/tune/*/result.json')[0]).read().splitlines()[-1])['time_total_s'])")
    same=$(cmp -s "$work/alone-$i/model.bpk" "$work"/ray-$i/runs/*/model.bpk && echo same || echo differ)
    echo "{\"run\": $i, \"fit_alone_s\": $(echo "$t1 - $t0" | bc), \"through_ray_s\": $(echo "$t2 - $t1" | bc), \"trial_s\": $trial, \"model\": \"$same\"}"
done
