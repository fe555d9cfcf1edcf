#!/usr/bin/env bash
# The page of `nertrain serve` in a real browser: headless Chromium (Debian: apt-get install
# chromium) loads it from a server on loopback with a sample text, and the DOM it renders must
# show the entities `tag --format json` finds in it; so must the offline page of
# `tag --format html`. With a second
# argument, also writes a screenshot (PNG) of the served page with the 3 best paths.
#
#   scripts/ci/page_check.sh MODEL_DIR [SCREENSHOT.png]
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:?usage: scripts/ci/page_check.sh MODEL_DIR [SCREENSHOT.png]}
screenshot=${2:-}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "page_check.sh needs Chromium (apt-get install chromium)" >&2; exit 1; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/nertrain-target}
bin=${NERTRAIN:-$CARGO_TARGET_DIR/release/nertrain}
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT

text="Anna Schmidt, who works for Siemens, arrived in Lisbon on Monday."
query="text=Anna%20Schmidt%2C%20who%20works%20for%20Siemens%2C%20arrived%20in%20Lisbon%20on%20Monday.&nbest=3"
browse() {
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$work/profile" --virtual-time-budget=10000 "$@" 2>> "$work/browser.log"
}
# The entities `tag --format json` finds in the text, as the page marks them: `Lisbon<sub>LOC</sub>`.
"$bin" tag --model "$model" --format json "$text" |
    grep -o '"label":"[^"]*","start":[0-9]*,"end":[0-9]*,"text":"[^"]*"' |
    sed -E 's/"label":"([^"]*)".*"text":"([^"]*)"/\2<sub>\1<\/sub>/' > "$work/expected"
[ -s "$work/expected" ] || { echo "the model finds no entity in: $text" >&2; exit 1; }
expect() {
    local dom=$1 where=$2
    while read -r entity; do
        if ! grep -qF ">$entity</mark>" "$dom"; then
            echo "$where: the page does not show $entity" >&2
            exit 1
        fi
    done < "$work/expected"
    echo "$where: the page shows the $(wc -l < "$work/expected") entities tag finds: $(tr '\n' ' ' < "$work/expected")"
}

"$bin" serve --model "$model" --addr 127.0.0.1:0 2> "$work/server.log" &
server=$!
for _ in $(seq 100); do
    grep -q "serving" "$work/server.log" 2>/dev/null && break
    sleep 0.1
done
address=$(grep -o 'http://[0-9.:]*' "$work/server.log" | head -1)
browse --dump-dom "$address/?$query" > "$work/served.html"
expect "$work/served.html" "served page"
grep -q 'class="alt"' "$work/served.html" || { echo "served page: no n-best paths" >&2; exit 1; }
if [ -n "$screenshot" ]; then
    browse --window-size=900,520 --screenshot="$work/page.png" "$address/?$query" > /dev/null
    cp "$work/page.png" "$screenshot"
    echo "screenshot: $screenshot"
fi
kill -TERM "$server"
wait "$server"
server=

"$bin" tag --model "$model" --format html "$text" > "$work/offline.html"
browse --dump-dom "file://$work/offline.html" > "$work/offline-dom.html"
expect "$work/offline-dom.html" "tag --format html"
