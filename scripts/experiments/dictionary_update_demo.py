#!/usr/bin/env python3
"""A dictionary updated at tag time, on dev (a demonstration, never a test figure): the dev
LOC and PER entities a dictionary model misses go into an extra list, dev is tagged again with
`--dictionary` (no retraining), and the script reports how many of them are then found and what
else changed.

    scripts/experiments/dictionary_update_demo.py runs/lists-s1 [../shared/data/conll2003/valid.txt]

A missed LOC entity is added as a LOC phrase; a missed PER entity as its first word's PER_FIRST
entry and its other words' PER_LAST entries (single words: PER_LAST), the model's own labels.
The extra list is written next to nothing: a temporary directory, removed at the end.
"""
import os
import sys
import tempfile
from pathlib import Path

import dictionary_report as report  # noqa: E402 (beside this script)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nerscripts import nertrain_json  # noqa: E402 (scripts/nerscripts.py)

NERTRAIN = os.environ.get("NERTRAIN", "target/release/nertrain")


def predict(model, data, extra, out):
    args = ["eval", "--model", model, "--data", data, "--json", "--output", out]
    if extra:
        args += ["--dictionary", extra]
    scores = nertrain_json(NERTRAIN, *args)
    entities = {e[:4]: e[4] for e in report.entities(report.read_sentences(out))}
    return scores, entities


def main():
    model = sys.argv[1]
    dev = sys.argv[2] if len(sys.argv) > 2 else "../shared/data/conll2003/valid.txt"
    gold = {e[:4]: e[4] for e in report.entities(report.read_sentences(dev))}
    with tempfile.TemporaryDirectory() as tmp:
        before_scores, before = predict(model, dev, None, os.path.join(tmp, "before.txt"))
        missed = {k: v for k, v in gold.items() if k[3] in ("LOC", "PER") and k not in before}
        lines = set()
        for (_, _, _, kind), surface in missed.items():
            words = surface.split()
            if kind == "LOC":
                lines.add(f"LOC\t{surface}")
            elif len(words) == 1:
                lines.add(f"PER_LAST\t{words[0]}")
            else:
                lines.add(f"PER_FIRST\t{words[0]}")
                lines.update(f"PER_LAST\t{w}" for w in words[1:])
        extra = os.path.join(tmp, "missed.tsv")
        with open(extra, "w", encoding="utf-8") as f:
            f.write("".join(f"{line}\n" for line in sorted(lines)))
        after_scores, after = predict(model, dev, extra, os.path.join(tmp, "after.txt"))

    found = [k for k in missed if k in after]
    lost = [k for k in before if k in gold and k not in after]
    spurious_before = sum(k not in gold for k in before)
    spurious_after = sum(k not in gold for k in after)
    print(f"model {model}, {dev}")
    print(f"dev LOC and PER entities missed: {len(missed)} "
          f"(LOC {sum(k[3] == 'LOC' for k in missed)}, PER {sum(k[3] == 'PER' for k in missed)}); "
          f"extra dictionary entries: {len(lines)}")
    print(f"found after the update: {len(found)} of {len(missed)} "
          f"(LOC {sum(k[3] == 'LOC' for k in found)}, PER {sum(k[3] == 'PER' for k in found)})")
    print(f"correct entities lost: {len(lost)}; wrong entities predicted: {spurious_before} -> "
          f"{spurious_after}")
    for kind in ["overall", "LOC", "MISC", "ORG", "PER"]:
        b = before_scores["overall"] if kind == "overall" else before_scores["types"][kind]
        a = after_scores["overall"] if kind == "overall" else after_scores["types"][kind]
        print(f"dev F1 {kind}: {b['f1']:.2f} -> {a['f1']:.2f}")


if __name__ == "__main__":
    main()
