#!/usr/bin/env python3
"""Document context where it has nothing (or less) to offer: variants of the CoNLL-2003 dev set
scored by a sentence-level and a document-level model, side by side.

    scripts/experiments/doc_variants.py RUN [RUN ...] [--corpus ../shared/data/conll2003] [--seed 1]

Each RUN is a model directory; its row shows dev F1 (conlleval) on each variant, with the model's
own settings (a document-level model with its consistency weight chosen on dev), and the peak
RSS of `nertrain eval` on it. `RUN@W` decodes with consistency weight W instead (`eval
--consistency W`), which a sentence-level model takes too. The variants, built in a temporary directory from valid.txt (never
written into the project):

  as-is       the file as distributed: -DOCSTART- documents
  no-markers  every -DOCSTART- line removed: the file is one stream of sentences
  shuffled    the sentences in random order (seeded), no markers: neighbours are unrelated
  within-doc  each document's sentences in random order, markers kept
  long-docs   consecutive documents merged into documents of at least 10,000 tokens
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nerscripts import read_documents  # noqa: E402 (scripts/nerscripts.py)

NERTRAIN = os.environ.get("NERTRAIN", "target/release/nertrain")


def write(path, documents, markers):
    with open(path, "w", encoding="utf-8") as f:
        for document in documents:
            if markers:
                f.write("-DOCSTART- -X- -X- O\n\n")
            for sentence in document:
                f.write("\n".join(sentence) + "\n\n")


def variants(documents, seed):
    rng = random.Random(seed)
    sentences = [s for d in documents for s in d]
    shuffled = sentences[:]
    rng.shuffle(shuffled)
    within = []
    for d in documents:
        d = d[:]
        rng.shuffle(d)
        within.append(d)
    long_docs, current, tokens = [], [], 0
    for d in documents:
        current.extend(d)
        tokens += sum(len(s) for s in d)
        if tokens >= 10000:
            long_docs.append(current)
            current, tokens = [], 0
    if current:
        long_docs.append(current)
    return [
        ("as-is", documents, True),
        ("no-markers", [sentences], False),
        ("shuffled", [shuffled], False),
        ("within-doc", within, True),
        ("long-docs", long_docs, True),
    ]


def evaluate(run, data):
    """`run`'s dev F1 on `data` (`eval --json`) and the peak RSS of the `eval`, in KiB."""
    run, _, weight = run.partition("@")
    extra = ["--consistency", weight] if weight else []
    result = subprocess.run(
        ["/usr/bin/time", "-f", "%M", NERTRAIN, "eval", "--model", run, "--data", data, "--json"]
        + extra, capture_output=True, text=True, check=True)
    f1 = json.loads(result.stdout)["overall"]["f1"]
    rss_kib = int(result.stderr.strip().splitlines()[-1])
    return f1, rss_kib


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--corpus", default="../shared/data/conll2003")
    parser.add_argument("--dev", default="valid.txt", help="the dev file's name in --corpus")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    documents = read_documents(os.path.join(args.corpus, args.dev))
    with tempfile.TemporaryDirectory() as work:
        built = []
        for name, docs, markers in variants(documents, args.seed):
            path = os.path.join(work, f"{name}.txt")
            write(path, docs, markers)
            longest = max(sum(len(s) for s in d) for d in docs)
            built.append((name, path, len(docs), longest))
        print("| model | " + " | ".join(f"{n} ({d} docs, longest {t:,} tokens)"
                                        for n, _, d, t in built) + " |")
        print("|---|" + "---:|" * len(built))
        for run in args.runs:
            cells = []
            for _, path, _, _ in built:
                f1, rss = evaluate(run, path)
                cells.append(f"{f1:.2f} ({rss // 1024} MiB)")
            print(f"| {run} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
