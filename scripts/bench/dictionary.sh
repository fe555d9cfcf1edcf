#!/usr/bin/env bash
# What a large dictionary costs: `nertrain bench` of a model without dictionary features and of
# the same model reading a dictionary of ENTRIES entries (its phrases found in every tagged
# sentence), in turn in one sitting, pinned to one core with one thread, on CoNLL-2003 from
# $CORPUS (default ../shared/data/conll2003; a synthetic corpus of the same shape without it).
# Prints the median tagging tokens/s of each, their ratio, the dictionary's read and compile
# seconds, its phrase-finding speed and each run's peak RSS.
#
#   scripts/bench/dictionary.sh BINARY [ENTRIES] [RUNS]    default 1,000,000 entries, 5 runs
#
# The dictionary: the place and name lists of scripts/data/make_dictionaries.py when lists/ holds
# them, and made-up names (syllables drawn with a fixed seed; nothing from CoNLL) for the rest,
# under four labels, one to three words each.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(realpath "$1")
entries=${2:-1000000}
runs=${3:-5}
core=${CORE:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. scripts/bench/corpus.sh
bench_corpus "$work"

python3 - "$entries" "$work/dictionary.tsv" <<'PY'
import random, sys
from pathlib import Path
wanted, out = int(sys.argv[1]), Path(sys.argv[2])
lines = []
for path in [Path("lists/places.tsv"), Path("lists/persons.tsv")]:
    if path.exists():
        lines += [l for l in path.read_text(encoding="utf-8").splitlines() if l and not l.startswith("#")]
lines = lines[:wanted]
rng = random.Random(7)
syllables = ["ka", "lo", "mi", "ren", "tor", "va", "sel", "dun", "bri", "ost", "qua", "zen",
             "pel", "mor", "tis", "gar", "lin", "vek", "sto", "har"]
labels = ["PRODUCT", "LOC", "PER_LAST", "ORG"]
while len(lines) < wanted:
    words = [("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))).title()
             for _ in range(rng.randint(1, 3))]
    lines.append(f"{rng.choice(labels)}\t{' '.join(words)}")
out.write_text("\n".join(lines) + "\n", encoding="utf-8")
PY

one() {
  local name=$1 run=$2; shift 2
  RAYON_NUM_THREADS=1 taskset -c "$core" "$bin" bench --train "$train" --dev "$dev" \
    --batch-size 32 --steps 100 "$@" |
    python3 -c "import json,sys; r=json.load(sys.stdin); r.update(build='$name',run=$run); print(json.dumps(r))" \
      >> "$work/results.jsonl"
}
for run in $(seq 1 "$runs"); do
  if [ $(( run % 2 )) = 0 ]; then
    one none "$run"; one dictionary "$run" --dictionary "$work/dictionary.tsv"
  else
    one dictionary "$run" --dictionary "$work/dictionary.tsv"; one none "$run"
  fi
  echo "run $run of $runs done" >&2
done
if [ -n "${KEEP:-}" ]; then cp "$work/results.jsonl" "$KEEP"; fi
python3 - "$work/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
of = lambda build, key: [r[key] for r in rows if r["build"] == build]
med = lambda build, key: statistics.median(of(build, key))
none, dictionary = med("none", "decode_tokens_per_s"), med("dictionary", "decode_tokens_per_s")
d = [r for r in rows if r["build"] == "dictionary"][0]
print(f"{len(rows) // 2} runs of each, one core, one thread; medians")
print(f"dictionary: {d['dictionary_entries']:,} entries; read {med('dictionary', 'dictionary_read_s'):.2f} s, "
      f"compiled {med('dictionary', 'dictionary_compile_s'):.2f} s; "
      f"finds phrases at {med('dictionary', 'dictionary_match_tokens_per_s'):,.0f} tokens/s")
print(f"tagging tokens/s: none {none:,.0f}, with the dictionary {dictionary:,.0f}: "
      f"{dictionary / none:.3f} ({100 * (1 - dictionary / none):.1f}% slower)")
print(f"peak RSS MiB: none {med('none', 'peak_rss_mb'):.0f}, with the dictionary {med('dictionary', 'peak_rss_mb'):.0f}")
PY
