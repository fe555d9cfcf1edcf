#!/usr/bin/env python3
"""Writes data/sample/rawtext.txt, data/sample/rawtext.jsonl and data/sample/pool.txt: the same synthetic sentences,
tokenized as CoNLL-2003 is (treebank conventions: U.S., did n't, 3.5, 1996-08-28, J. Smith) and as
text people write (Moses-detokenized), the gold entities as character spans. CI tags the text and
checks that it scores as `eval` scores the tokenized file (crates/cli/tests/rawtext.rs).

Names come from scripts/data/make_sample.py; no sentence comes from any corpus. Deterministic.
Needs sacremoses (pip install sacremoses).
"""
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[1:1] = [str(HERE.parent), str(HERE.parent / "experiments")]

import make_sample as sample  # noqa: E402 (beside this script)
import rawtext_check as check  # noqa: E402

TEMPLATES = [
    "{PER} said the U.S. economy grew 3.5 percent in the year to March .",
    "{ORG} did n't comment on the report , {PER} 's spokesman said .",
    "{LOC} 1996-08-28",
    "{PER} ( {LOC} ) beat {PER} 6-4 7-5 on Sunday .",
    "Shares of {ORG} rose 1.25 to 34.50 after the U.N. report .",
    "\" We are n't worried , \" {PER} told reporters in {LOC} .",
    "{ORG} 's profit fell to $ 1,250 million in the 12-month period .",
    "The {MISC} delegation met {PER} at 10:30 a.m. in {LOC} .",
    "J. {PER} won the {MISC} title for {ORG} .",
    "{PER} , 34 , moved from {LOC} to {LOC} in mid-1995 .",
    "It 's the first time {ORG} has lost to {ORG} since 1992 .",
    "{LOC} 's central bank cut rates by 0.25 percentage points on Friday .",
]


def sentence(rng):
    out = []
    for token in rng.choice(TEMPLATES).split():
        if token.startswith("{") and token.endswith("}"):
            kind = token[1:-1]
            words = sample.pick(rng, kind, held_out=True)
            out += [(w, ("B-" if i == 0 else "I-") + kind) for i, w in enumerate(words)]
        else:
            out.append((token, "O"))
    return out


if __name__ == "__main__":
    from sacremoses import MosesDetokenizer

    root = HERE.parents[1] / "data" / "sample"
    rng = random.Random(24)
    documents = [[sentence(rng) for _ in range(10)] for _ in range(6)]
    conll = []
    for document in documents:
        conll += ["-DOCSTART- O", ""]
        for s in document:
            conll += [f"{w} {t}" for w, t in s] + [""]
    (root / "rawtext.txt").write_text("\n".join(conll))
    moses = MosesDetokenizer("en")
    lines, lost = check.annotated(documents, moses.detokenize, paragraphs=False)
    assert lost == 0, "every sentence aligns with its text"
    with open(root / "rawtext.jsonl", "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    # The same texts without their spans: the unlabelled pool of the annotation loop's example.
    with open(root / "pool.txt", "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line["text"] + "\n")
