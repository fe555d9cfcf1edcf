#!/usr/bin/env bash
# A real two-node Ray cluster (pinned, from PyPI: scripts/ray/requirements.txt) on loopback
# only, and scripts/ray/tests/cluster.py against it: the sweep (scripts/ray/sweep.py) with a node lost
# mid-trial, and Ray Data tagging (scripts/ray/ray_tag.py).
#
# Ray talks over the machine's interface address even when told 127.0.0.1, so the cluster, the
# driver and every trial run in a network namespace of their own where only loopback exists
# (../shared/specs/ray-on-loopback.md): nothing can leave the machine. They run in a process
# namespace of their own too: `ray stop --force` and the test's process searches find Ray's
# processes by name, and must not reach a Ray of the user's running beside the test.
# Usage: scripts/ci/ray_cluster.sh NERTRAIN WHEEL RESULTS.json [NERTRAIN_GPU]
# NERTRAIN_GPU, the binary the trials given a GPU share run (default NERTRAIN), may be written
# while the cluster runs: the GPU trials wait for it, after the other checks.
set -euo pipefail
cd "$(dirname "$0")/../.."
nertrain=$(realpath "$1")
wheel=$(realpath "$2")
results=$(realpath -m "$3")
nertrain_gpu=$(realpath -m "${4:-$1}")
# Named by its pins, as .ci/run names it, so a change of pins makes a new one.
venv=${RAY_VENV:-$HOME/.cache/nertrain-ray-$(sha256sum scripts/ray/requirements.txt | cut -c1-12)}
scripts/ci/venv.sh "$venv" -r scripts/ray/requirements.txt
"$venv/bin/pip" install -q --force-reinstall --no-deps "$wheel"
# Root makes the namespaces itself; anyone else maps to root in a user namespace of their own.
as=(--net --pid --fork --mount-proc)
[ "$(id -u)" = 0 ] || as+=(--map-root-user)
exec timeout 2700 unshare "${as[@]}" bash -s "$venv" "$nertrain" "$results" "$nertrain_gpu" <<'EOF'
set -euo pipefail
venv=$1 nertrain=$2 results=$3 nertrain_gpu=$4
ip link set lo up
export PATH="$venv/bin:$PATH" RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled
# A lost node is noticed within seconds, not the default half minute.
export RAY_health_check_period_ms=500 RAY_health_check_failure_threshold=4
trap 'ray stop --force >/dev/null 2>&1 || true' EXIT
# The head has one GPU for Ray to share out: here Mesa's software Vulkan driver, which wgpu
# counts as a CPU adapter, so the trials are told so rather than Ray's GPU number.
export CUBECL_WGPU_DEFAULT_DEVICE=Cpu
ray start --head --port=6393 --num-cpus=1 --num-gpus=1 --include-dashboard=false --disable-usage-stats >/dev/null
ray start --address=127.0.0.1:6393 --num-cpus=1 --disable-usage-stats \
    --node-manager-port=6401 >/dev/null
# The second node's raylet (its workers are its children): what losing the node stops.
raylet=$(pgrep -f -- 'raylet.*--node_manager_port=6401' | head -1)
[ -n "$raylet" ] || { echo "no raylet for the second node" >&2; exit 1; }
python scripts/ray/tests/cluster.py --nertrain "$nertrain" --nertrain-gpu "$nertrain_gpu" --address 127.0.0.1:6393 \
    --experiment scripts/ray/tests/experiment.toml --space scripts/ray/tests/space.toml \
    --space-lost scripts/ray/tests/space-lost.toml \
    --second-node-pids "$raylet" --results "$results"
EOF
