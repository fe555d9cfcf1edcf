#!/usr/bin/env python3
"""Whole-corpus variants of CoNLL-2003 for training on, written outside the project: does document
context still do no harm when the training data has no documents, or is small or noisy?

    scripts/experiments/corpus_variants.py OUT_DIR [--corpus ../shared/data/conll2003] [--seed 1]

Writes OUT_DIR/VARIANT/{train,valid,test}.txt for each variant:

  shuffled  every file's sentences in random order with no -DOCSTART- markers (doc_variants.py's
            `shuffled`): neighbours are unrelated, so context has nothing to offer
  small     the first documents of train.txt up to 2,000 sentences (about 1/7 of it); dev and
            test as distributed
  noisy     `small` with 10% of its entities corrupted: each, with probability 0.1, gets another
            type (or, one time in four, loses its tags: a missed annotation)

Train on a variant with `scripts/experiments/seeds.sh NAME CONFIG` and `CORPUS=OUT_DIR/VARIANT`.
"""
import argparse
import os
import random
import sys
from pathlib import Path

from doc_variants import write

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nerscripts import read_documents  # noqa: E402 (scripts/nerscripts.py)
import nertrain  # noqa: E402 (the wheel: crates/python)

TYPES = ["PER", "ORG", "LOC", "MISC"]


def first_sentences(documents, limit):
    kept, count = [], 0
    for document in documents:
        if count >= limit:
            break
        kept.append(document)
        count += len(document)
    return kept


def corrupt(documents, rng, rate):
    """Each entity (of the last column, as nertrain reads it) gets another type or loses its
    tags."""
    noisy = []
    for document in documents:
        new_document = []
        for sentence in document:
            rows = [line.split(" ") for line in sentence]
            kept = []
            for start, end, label in nertrain.entities([row[-1] for row in rows]):
                if rng.random() < rate:
                    if rng.random() < 0.25:
                        continue
                    label = rng.choice([t for t in TYPES if t != label])
                kept.append((start, end, label))
            for row, tag in zip(rows, nertrain.tags(len(rows), kept)):
                row[-1] = tag
            new_document.append([" ".join(row) for row in rows])
        noisy.append(new_document)
    return noisy


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--corpus", default="../shared/data/conll2003")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--small", type=int, default=2000, help="sentences in `small`")
    parser.add_argument("--noise", type=float, default=0.1, help="entities corrupted in `noisy`")
    args = parser.parse_args()
    files = {name: read_documents(os.path.join(args.corpus, name))
             for name in ("train.txt", "valid.txt", "test.txt")}
    rng = random.Random(args.seed)
    small = first_sentences(files["train.txt"], args.small)
    for variant in ("shuffled", "small", "noisy"):
        os.makedirs(os.path.join(args.out, variant), exist_ok=True)
        for name, documents in files.items():
            markers = True
            if variant == "shuffled":
                sentences = [s for d in documents for s in d]
                rng.shuffle(sentences)
                documents, markers = [sentences], False
            elif name == "train.txt" and variant == "small":
                documents = small
            elif name == "train.txt":
                documents = corrupt(small, rng, args.noise)
            write(os.path.join(args.out, variant, name), documents, markers)
        sentences = sum(len(d) for d in (small if variant != "shuffled" else files["train.txt"]))
        print(f"{args.out}/{variant}: train {sentences} sentences", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
