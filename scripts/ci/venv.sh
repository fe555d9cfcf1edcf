#!/usr/bin/env bash
# A pip venv kept between runs: made at DIR with what the pip arguments name unless DIR already
# holds a complete one. Complete means the install finished (a marker written last), so a run
# stopped half-way makes the next one start the venv again rather than use half of it. Nothing is
# byte-compiled at install: Python compiles the modules a run imports when it first imports them
# (.ci/run keeps those in PYTHONPYCACHEPREFIX), not the many that none imports.
# Usage: scripts/ci/venv.sh DIR PIP-INSTALL-ARGUMENTS...
set -euo pipefail
dir=$1
shift
[ -f "$dir/.nertrain-complete" ] && exit 0
rm -rf "$dir"
python3 -m venv "$dir"
"$dir/bin/pip" install -q --no-compile "$@"
touch "$dir/.nertrain-complete"
