#!/usr/bin/env bash
# nertrain serve as the ML backend of a real Label Studio (pinned, from PyPI), on loopback:
# installs it in a venv unless $LABEL_STUDIO_VENV has it (.ci/run installs it there), starts it on
# a throwaway SQLite data directory, and runs tests/label_studio/live.py and loop.py against it,
# then the annotation loop live on the sample (scripts/experiments/live_loop.py --quick), which
# must match the file loop at the same settings round by round.
# Usage: scripts/ci/label_studio_live.sh NERTRAIN RESULTS.json
set -euo pipefail
cd "$(dirname "$0")/../.."
nertrain=$(realpath "$1")
results=$2
version=${LABEL_STUDIO_VERSION:-1.23.2}
work=$(mktemp -d)
venv=${LABEL_STUDIO_VENV:-$HOME/.cache/nertrain-label-studio-$version}
scripts/ci/venv.sh "$venv" "label-studio==$version"
# The tests read CoNLL and make text of it with the nertrain wheel (crates/python), installed in
# the same venv (.ci/run installs the one it built).
if ! "$venv/bin/python" -c "import nertrain" 2>/dev/null; then
    echo "$venv lacks the nertrain wheel: build it (maturin build --release -m crates/python/Cargo.toml) and pip install it there" >&2
    exit 1
fi
port=8090
token=0123456789abcdef0123456789abcdef01234567
# A loopback backend is refused unless both SSRF guards are off; the setup request names this
# address so that the backend can fetch the project's annotations.
# In a session of its own, and not our child: on its way out Label Studio signals its parent and
# process group.
(ML_BLOCK_LOCAL_IP=false SSRF_PROTECTION_ENABLED=false SENTRY_DSN= FRONTEND_SENTRY_DSN= \
    LABEL_STUDIO_HOST=http://localhost:$port LABEL_STUDIO_BASE_DATA_DIR="$work/data" \
    setsid sh -c 'echo $$ >"$0/pid"; exec "$@"' "$work" \
    "$venv/bin/label-studio" start --no-browser --port $port --data-dir "$work/data" \
    --username ci@example.com --password ci-password-1 --user-token $token \
    --enable-legacy-api-token >"$work/label-studio.log" 2>&1 &)
for _ in $(seq 1 50); do [ -s "$work/pid" ] && break; sleep 0.1; done
studio=$(cat "$work/pid")
trap 'kill -- -$studio 2>/dev/null; sleep 1; rm -rf "$work"' EXIT
for _ in $(seq 1 120); do
    curl -sf -o /dev/null "http://localhost:$port/health" && break
    kill -0 $studio 2>/dev/null || { tail -30 "$work/label-studio.log"; exit 1; }
    sleep 1
done
# A base model that still has much to learn, so that a version trained on the annotations is
# served; it reads the sample's dictionary, and is served with one more entry given at start
# (`--dictionary`), which the versions it learns must read too.
"$nertrain" fit --config configs/sample.toml --set train.epochs=2 \
    --set "train.output=\"$work/base\"" --set 'data.dictionaries=["data/sample/lists.tsv"]' \
    --set model.dictionary_dim=3 >/dev/null 2>&1
printf 'LOC\tZorblat\n' >"$work/extra.tsv"
"$venv/bin/python" tests/label_studio/live.py --nertrain "$nertrain" --model "$work/base" \
    --dictionary "$work/extra.tsv" \
    --data data/sample/dev.txt --label-studio "http://localhost:$port" --token $token \
    --results "$results"
# A base the annotations surely improve on: one epoch.
"$nertrain" fit --config configs/sample.toml --set train.epochs=1 \
    --set "train.output=\"$work/weak\"" >/dev/null 2>&1
"$venv/bin/python" tests/label_studio/loop.py --nertrain "$nertrain" --model "$work/weak" \
    --data data/sample/dev.txt --label-studio "http://localhost:$port" --token $token \
    --results "$work/loop.json"
# The file loop at the backend's settings first: the live loop must take the same tasks and train
# the same models, round by round.
"$venv/bin/python" scripts/experiments/active_learning.py --quick --binary "$nertrain" --seeds 1 \
    --budget-unit tokens --step 600 --until-share 0.35 --patience 4 --continue --served-order \
    --judge --max-similarity 1 --no-full --strategies mnlp:regions=budget \
    --out "$work/file-loop" >/dev/null 2>&1
"$venv/bin/python" scripts/experiments/live_loop.py --quick --binary "$nertrain" --port 8937 \
    --label-studio "http://localhost:$port" --token $token --out "$work/live-loop" \
    --file-results "$work/file-loop/results.jsonl" >/dev/null
python3 - "$results" "$work/loop.json" "$work/live-loop/summary.json" <<'EOF'
import json, sys
results = json.load(open(sys.argv[1]))
results["loop"] = json.load(open(sys.argv[2]))
results["live_loop_quick"] = {k: v for k, v in json.load(open(sys.argv[3])).items() if k != "rounds"}
json.dump(results, open(sys.argv[1], "w"), indent=2)
EOF
