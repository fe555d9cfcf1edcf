#!/usr/bin/env bash
# Tagging a text file with Ray Data (scripts/ray/ray_tag.py) against `nertrain tag --input`, in one
# sitting: the median seconds of RUNS runs each, tokens/s, and whether Ray's output, sorted by
# id, equals the binary's.
#
#   pip install "ray[data]" dist/nertrain-*.whl      # in the Python that runs this
#   scripts/bench/ray.sh MODEL TEXT_FILE
#
# Tokens are counted as the model cuts them (`nertrain tokenize`). Ray's seconds are the
# pipeline's, from reading the file to the last line written; starting the local cluster
# (`ray.init`) is not counted. DICTIONARY=FILE: both read that dictionary beside the model's
# (`--dictionary FILE`).
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:?usage: scripts/bench/ray.sh MODEL TEXT_FILE}
input=${2:?usage: scripts/bench/ray.sh MODEL TEXT_FILE}
runs=${RUNS:-3}
python=${PYTHON:-python3}
nertrain=${NERTRAIN:-${CARGO_TARGET_DIR:-target}/release/nertrain}
work=$(mktemp -d)
dictionary=()
if [ -n "${DICTIONARY:-}" ]; then dictionary=(--dictionary "$DICTIONARY"); fi
trap 'rm -rf "$work"' EXIT

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
tokens=$("$nertrain" tokenize --model "$model" <"$input" | wc -w)
echo "input: $(wc -l <"$input") lines, $tokens tokens"
echo "| run | threads | median s | tokens/s |"
echo "|---|---|---|---|"
row() { printf '| %s | %s | %s | %.0f |\n' "$1" "$2" "$3" "$(echo "$tokens / $3" | bc -l)"; }

for threads in 1 2; do
    seconds=$(for _ in $(seq "$runs"); do
        start=$(date +%s.%N)
        RAYON_NUM_THREADS=$threads "$nertrain" tag --model "$model" --input "$input" \
            --format json "${dictionary[@]}" >"$work/cli.json"
        echo "$(date +%s.%N) - $start" | bc -l
    done | median)
    row "nertrain tag --input" "$threads" "$seconds"
done

for shape in "1 1" "1 2" "2 1"; do
    read -r workers threads <<<"$shape"
    seconds=$(for _ in $(seq "$runs"); do
        rm -rf "$work/ray"
        "$python" scripts/ray/ray_tag.py --model "$model" --input "$input" --output "$work/ray" \
            --workers "$workers" --threads "$threads" "${dictionary[@]}" 2>/dev/null |
            "$python" -c 'import json, sys; print(json.load(sys.stdin)["seconds"])'
    done | median)
    row "Ray Data, $workers worker(s)" "$threads each" "$seconds"
done

# Entities must be the same; a confidence's last digits may differ, as they depend on the words
# the process had met before (the word cache: crates/model/src/word_gates.rs), and each worker
# meets other lines first.
"$python" - "$work/ray" "$work/cli.json" <<'EOF'
import glob, json, sys
ray = [json.loads(line) for path in glob.glob(sys.argv[1] + "/*.jsonl") for line in open(path)]
ray.sort(key=lambda record: record["id"])
assert [r["id"] for r in ray] == list(range(len(ray))), "ids are not 0..n-1"
for record in ray:
    del record["id"]
cli = [json.loads(line) for line in open(sys.argv[2])]
assert len(ray) == len(cli), f"{len(ray)} records from Ray, {len(cli)} from tag"
spans = lambda r: (r["text"], [(e["label"], e["start"], e["end"], e["text"]) for e in r["entities"]])
differ = [i for i, (a, b) in enumerate(zip(ray, cli)) if spans(a) != spans(b)]
assert not differ, f"lines {differ[:10]} have other entities"
gap = max((abs(x["confidence"] - y["confidence"]) for a, b in zip(ray, cli)
           for x, y in zip(a["entities"], b["entities"])), default=0.0)
same = sum(a == b for a, b in zip(ray, cli))
print(f"Ray's output sorted by id: the same entities as tag --input on all {len(cli)} lines; "
      f"{same} records identical; confidences at most {gap:.1e} apart")
EOF
