#!/usr/bin/env python3
"""What the dictionaries bring, in Markdown: runs grouped by name (runs/NAME-sSEED), scored on
CoNLL-2003 test (overall, per type, and on the test entities never seen in training) and on
CoNLL++, mean ± std over seeds; then the lists' coverage of each type in train and test.

    scripts/experiments/dictionary_report.py --list lists/places.tsv --list lists/persons.tsv \\
        runs/glove-doc-s{1,2,3} runs/lists-s{1,2,3} > /tmp/report.md

Each model is scored by `nertrain eval` (its own consistency weight, chosen on dev), whose
`--output` gives the predicted tags. An entity is *unseen* when its words, as written, never
form an entity of any type in train. Unseen F1 of a type: gold = its unseen test entities,
predicted = the predicted entities of the type whose words are unseen, correct = exact matches.
Coverage: a LOC list covers an entity whose words, joined by spaces, are one of its phrases (as
written: the lists match case); the name lists cover an entity every word of which is a listed
first or last name. Everything read comes from ../shared/data (or --corpus, and $CONLLPP) and the run
directories; nothing is written but a scratch file per run under $TMPDIR.
"""
import argparse
import os
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

# CoNLL++ is scored as summarize_runs.py scores it ($CONLLPP, by default ../shared/data/conllpp).
from summarize_runs import conllpp_f1  # noqa: E402 (beside this script)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nerscripts import format_mean_std, nertrain_json  # noqa: E402 (scripts/nerscripts.py)
import nertrain  # noqa: E402 (the wheel: crates/python)

NERTRAIN = os.environ.get("NERTRAIN", "target/release/nertrain")
TYPES = ["LOC", "MISC", "ORG", "PER"]


def read_sentences(path, tag_column=-1):
    """A CoNLL file's sentences as (words, tags), as nertrain reads it."""
    return [(s["words"], s["tags"])
            for document in nertrain.read_conll(path, tag_column=tag_column) for s in document]


def entities(corpus):
    """Every entity as (sentence, start, end, type, surface)."""
    return [
        (s, a, b, kind, " ".join(words[a:b]))
        for s, (words, tags) in enumerate(corpus)
        for a, b, kind in nertrain.entities(tags)
    ]


def f1(gold, predicted, sentences):
    """F1 of the entities (sentence, start, end, type) found against the gold ones, scored by
    nertrain as `eval` scores exact spans."""
    by_sentence = lambda entities: [  # noqa: E731
        [(a, b, kind) for s, a, b, kind in entities if s == i] for i in range(sentences)]
    return nertrain.score_entities(by_sentence(gold), by_sentence(predicted))["overall"]["f1"]


def score(run, test, seen):
    """Test F1 overall and per type, and unseen F1 of each type, from `eval --output`."""
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as out:
        report = nertrain_json(NERTRAIN, "eval", "--model", run, "--data", test, "--json", "--output", out.name)
        predicted_corpus = read_sentences(out.name, tag_column=-1)
    gold = entities(read_sentences(test))
    predicted = entities(predicted_corpus)
    row = {"test": report["overall"]["f1"]}
    for kind in TYPES:
        row[kind] = report["types"].get(kind, {}).get("f1", 0.0)
        g = {e[:4] for e in gold if e[3] == kind and e[4] not in seen}
        p = {e[:4] for e in predicted if e[3] == kind and e[4] not in seen}
        row[f"unseen {kind}"] = f1(g, p, len(predicted_corpus))
    return row


def read_lists(paths):
    phrases = defaultdict(set)
    for path in paths:
        for line in open(path, encoding="utf-8"):
            if line.startswith("#") or not line.strip():
                continue
            label, phrase = line.rstrip("\n").split("\t")[:2]
            phrases[label].add(" ".join(phrase.split()))
    return phrases


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--list", action="append", required=True, dest="lists",
                        help="a dictionary file (LABEL<TAB>phrase lines); repeatable")
    parser.add_argument("--corpus", default="../shared/data/conll2003")
    args = parser.parse_args()
    train = read_sentences(os.path.join(args.corpus, "train.txt"))
    test_path = os.path.join(args.corpus, "test.txt")
    seen = {e[4] for e in entities(train)}

    groups = defaultdict(list)
    for run in args.runs:
        name = re.sub(r"-s\d+$", "", os.path.basename(run.rstrip("/")))
        row = score(run, test_path, seen)
        row["CoNLL++"] = conllpp_f1(run)
        groups[name].append(row)
        print(f"{run}: {row}", file=sys.stderr)

    columns = ["test"] + TYPES + [f"unseen {k}" for k in TYPES] + ["CoNLL++"]
    print("| runs | seeds | " + " | ".join(columns) + " |")
    print("|---|---:|" + "---:|" * len(columns))
    for name, rows in groups.items():
        cells = [format_mean_std([r[c] for r in rows]) for c in columns]
        print(f"| `{name}` | {len(rows)} | " + " | ".join(cells) + " |")

    lists = read_lists(args.lists)
    names = lists.get("PER_FIRST", set()) | lists.get("PER_LAST", set())
    places = lists.get("LOC", set())
    print()
    print("| split | type | entities | unseen in train | whole entity a LOC phrase | "
          "every word a listed name |")
    print("|---|---|---:|---:|---:|---:|")
    for split in ["train", "test"]:
        found = entities(read_sentences(os.path.join(args.corpus, f"{split}.txt")))
        for kind in TYPES:
            mine = [e for e in found if e[3] == kind]
            unseen = sum(e[4] not in seen for e in mine)
            place = sum(e[4] in places for e in mine)
            person = sum(all(w in names for w in e[4].split()) for e in mine)
            share = lambda n: f"{n} ({100 * n / max(len(mine), 1):.1f}%)"
            print(f"| {split} | {kind} | {len(mine)} | "
                  f"{share(unseen) if split == 'test' else '-'} | {share(place)} | "
                  f"{share(person)} |")


if __name__ == "__main__":
    main()
