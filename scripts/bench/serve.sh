#!/usr/bin/env bash
# Load on `nertrain serve` from wrk (Debian: apt-get install wrk), on loopback only, bounded in
# time (SECONDS per row, default 15): 1, 8, 32 and 128 clients each sending single sentences (a CoNLL file's sentences,
# words joined by spaces), against a server on 1 and on 2 tagging threads. Prints a Markdown
# table: requests/s, tokens/s (from the server's log), p50/p99 latency, the server's peak RSS,
# failed requests, and `tag --input` on the same sentences in the same sitting.
#
#   scripts/bench/serve.sh MODEL_DIR [CONLL_FILE]
#   SOAK=600 scripts/bench/serve.sh MODEL_DIR   # also 10 minutes at 32 clients, RSS sampled
#   THREADS=2 scripts/bench/serve.sh MODEL_DIR  # only the server on 2 threads
#   SERVE_ARGS="--batch-wait-ms 0" scripts/bench/serve.sh MODEL_DIR  # other server settings
set -euo pipefail
command -v wrk >/dev/null || { echo "serve.sh needs wrk (apt-get install wrk)" >&2; exit 1; }
cd "$(dirname "$0")/../.."
model=${1:?usage: scripts/bench/serve.sh MODEL_DIR [CONLL_FILE]}
corpus=${2:-../shared/data/conll2003/valid.txt}
seconds=${SECONDS_PER_ROW:-15}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/nertrain-target}
cargo build --release --quiet
bin=$CARGO_TARGET_DIR/release/nertrain
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
awk 'NF == 0 { if (line != "") print line; line = ""; next }
     $1 == "-DOCSTART-" { next }
     { line = (line == "" ? $1 : line " " $1) }
     END { if (line != "") print line }' "$corpus" > "$work/sentences.txt"
sentences=$(wc -l < "$work/sentences.txt")
tokens=$(wc -w < "$work/sentences.txt")

# The CLI on the same sentences, one thread and two: tokens/s of the median of 3 runs.
cli_rate() {
    for _ in 1 2 3; do
        local start end
        start=$(date +%s.%N)
        RAYON_NUM_THREADS=$1 "$bin" tag --model "$model" --input "$work/sentences.txt" --format json > /dev/null
        end=$(date +%s.%N)
        echo "$tokens / ($end - $start)" | bc -l
    done | sort -n | sed -n 2p
}

start_server() {
    local threads=$1
    "$bin" serve --model "$model" --addr 127.0.0.1:0 --threads "$threads" ${SERVE_ARGS:-} 2> "$work/server.log" &
    server=$!
    for _ in $(seq 100); do
        grep -q "serving" "$work/server.log" 2>/dev/null && break
        sleep 0.1
    done
    address=$(grep -o 'http://[0-9.:]*' "$work/server.log" | head -1)
}

# The server's peak resident memory so far, in MiB.
peak_rss() {
    echo $(( $(awk '/^VmHWM/ { print $2 }' "/proc/$server/status") / 1024 ))
}

# Requests that did not get a 200: answered otherwise by the server, or lost to wrk (connect,
# read, write errors and timeouts).
failures() {
    local answered socket
    answered=$(grep -c 'POST /tag [0-9]' "$work/server.log" || true)
    answered=$(( answered - $(grep -c 'POST /tag 200' "$work/server.log" || true) ))
    socket=$(grep -o 'Socket errors: .*' "$work/wrk.txt" | grep -o '[0-9]\+' | paste -sd+ | bc || true)
    echo $(( answered + ${socket:-0} ))
}

stop_server() {
    kill -TERM "$server"
    wait "$server" || true
}

echo "sentences: $sentences ($tokens tokens) from $corpus; $seconds s per row"
echo
echo "| server threads | clients | requests/s | tokens/s | vs tag --input | p50 ms | p99 ms | failed | peak RSS MiB |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for threads in ${THREADS:-1 2}; do
    cli=$(cli_rate "$threads")
    for clients in 1 8 32 128; do
        start_server "$threads"
        wrk_threads=$(( clients < 2 ? 1 : 2 ))
        SENTENCES="$work/sentences.txt" \
            wrk -t "$wrk_threads" -c "$clients" -d "${seconds}s" --timeout 30s --latency \
            -s scripts/bench/serve.lua "$address" > "$work/wrk.txt"
        rss=$(peak_rss)
        stop_server
        done_requests=$(grep -o '^ *[0-9]* requests in' "$work/wrk.txt" | grep -o '[0-9]*' | head -1)
        served_tokens=$(grep -o 'POST /tag 200 texts=1 tokens=[0-9]*' "$work/server.log" | grep -o '[0-9]*$' | paste -sd+ | bc)
        failed=$(failures)
        p50=$(awk '$1 == "50%" { print $2 }' "$work/wrk.txt")
        p99=$(awk '$1 == "99%" { print $2 }' "$work/wrk.txt")
        ms() { case $1 in *us) echo "scale=2; ${1%us} / 1000" | bc ;; *ms) echo "${1%ms}" ;; *s) echo "scale=1; ${1%s} * 1000" | bc ;; esac; }
        rate=$(echo "$served_tokens / $seconds" | bc -l)
        printf '| %s | %s | %.0f | %.0f | %.0f%% | %s | %s | %s | %.0f |\n' "$threads" "$clients" \
            "$(echo "$done_requests / $seconds" | bc -l)" "$rate" "$(echo "100 * $rate / $cli" | bc -l)" \
            "$(ms "$p50")" "$(ms "$p99")" "$failed" "$rss"
    done
    printf '| tag --input, %s thread(s) | | | %.0f | 100%% | | | | |\n' "$threads" "$cli"
done

if [ -n "${SOAK:-}" ]; then
    echo
    echo "Soak: $SOAK s at 32 clients, 2 threads; server RSS (MiB) every 10 s:"
    start_server 2
    SENTENCES="$work/sentences.txt" \
        wrk -t 2 -c 32 -d "${SOAK}s" --timeout 30s --latency -s scripts/bench/serve.lua "$address" > "$work/wrk.txt" &
    soak=$!
    samples=()
    while kill -0 "$soak" 2>/dev/null; do
        samples+=("$(( $(ps -o rss= -p "$server") / 1024 ))")
        sleep 10
    done
    echo "${samples[*]}"
    stop_server
    echo "requests answered 200: $(grep -c 'POST /tag 200' "$work/server.log"); failed: $(failures)"
    grep -E 'Latency|50%|99%|Requests/sec|Socket|Non-2xx' "$work/wrk.txt"
fi
