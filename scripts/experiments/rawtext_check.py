#!/usr/bin/env python3
"""Raw text in, the benchmark's F1 out: how closely `nertrain` tagging text as people write it
matches `nertrain eval` on the tokenized file.

For each CoNLL file given, every sentence is detokenized with Moses (sacremoses,
`MosesDetokenizer('en')`, the usual way to turn CoNLL tokens back into text), then:

1. round trip: the model's tokenizer (`nertrain tokenize`) cuts each detokenized sentence again;
   the share of sentences whose tokens come back identical, and the most common differences;
2. raw-text F1 (with --score): the detokenized text with the gold entities as character spans is
   written as span-annotated JSON lines (`.jsonl`) in two layouts, one sentence per line with a
   document's lines together (`doc` key), and one paragraph per document; `nertrain eval` scores
   the entities found in it as exact character spans, beside `nertrain eval` on the CoNLL file.

Usage (the corpora stay in ../shared/data; nothing of them is written into the repository):
    pip install sacremoses
    scripts/experiments/rawtext_check.py --model runs/conll-glove-doc --score \
        ../shared/data/conll2003/test.txt
Writes its JSON lines under --work (default: a temporary directory) and prints Markdown tables.
"""

import argparse
import collections
import difflib
import json
import os
import subprocess
import sys
import tempfile

from sacremoses import MosesDetokenizer

from nertrain import entities, read_conll  # noqa: E402 (the wheel: crates/python)


def read_documents(path, tag_column):
    """A CoNLL file's documents of sentences of (word, tag), as nertrain reads it."""
    return [[list(zip(s["words"], s["tags"])) for s in document]
            for document in read_conll(path, tag_column=tag_column)]


def align(words, text):
    """Character offsets (code points) of each word in its detokenized text, or None."""
    offsets, at = [], 0
    for word in words:
        found = text.find(word, at)
        if found < 0:
            return None
        offsets.append((found, found + len(word)))
        at = found + len(word)
    return offsets


def nertrain(binary, *args, stdin=None):
    result = subprocess.run(
        [binary, *args], input=stdin, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        sys.exit(f"nertrain {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


def round_trip(binary, model, sentences, texts):
    output = nertrain(binary, "tokenize", "--model", model, stdin="\n".join(texts) + "\n")
    blocks = output.split("\n\n")
    same, differences = 0, collections.Counter()
    for sentence, block in zip(sentences, blocks):
        words = [w for w, _ in sentence]
        tokens = block.split()
        if tokens == words:
            same += 1
            continue
        matcher = difflib.SequenceMatcher(a=words, b=tokens, autojunk=False)
        for op, a0, a1, b0, b1 in matcher.get_opcodes():
            if op != "equal":
                differences[(" ".join(words[a0:a1]), " ".join(tokens[b0:b1]))] += 1
    return same, differences


def annotated(documents, detokenize, paragraphs):
    """JSON lines of the detokenized text with gold character spans; lines lost to alignment."""
    lines, lost = [], 0
    for d, document in enumerate(documents):
        texts = []
        for sentence in document:
            words = [w for w, _ in sentence]
            text = detokenize(words)
            offsets = align(words, text)
            if offsets is None:
                lost += 1
                continue
            spans = [
                {"start": offsets[s][0], "end": offsets[e - 1][1], "label": label}
                for s, e, label in entities([t for _, t in sentence])
            ]
            texts.append((text, spans))
        if paragraphs:
            text, spans, at = "", [], 0
            for sentence_text, sentence_spans in texts:
                if text:
                    text += " "
                at = len(text)
                text += sentence_text
                spans += [dict(s, start=s["start"] + at, end=s["end"] + at) for s in sentence_spans]
            if text:
                lines.append({"text": text, "spans": spans, "doc": d})
        else:
            lines += [{"text": t, "spans": s, "doc": d} for t, s in texts]
    return lines, lost


def f1(binary, model, data):
    report = json.loads(nertrain(binary, "eval", "--model", model, "--data", data, "--json"))
    return report["overall"]["f1"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="tagged CoNLL files")
    parser.add_argument("--model", required=True, help="a model directory (its tokenizer)")
    parser.add_argument("--nertrain", default="target/release/nertrain")
    parser.add_argument("--score", action="store_true", help="also tag and score raw text")
    parser.add_argument("--work", help="where the JSON lines go (default: a temporary directory)")
    parser.add_argument("--differences", type=int, default=15)
    parser.add_argument("--tag-column", type=int, default=-1)
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="rawtext-check-")
    os.makedirs(work, exist_ok=True)
    moses = MosesDetokenizer("en")
    detokenize = lambda words: moses.detokenize(words)

    print("| file | sentences | round trip identical |")
    print("|---|---:|---:|")
    all_differences = {}
    for path in args.files:
        documents = read_documents(path, args.tag_column)
        sentences = [s for d in documents for s in d]
        texts = [detokenize([w for w, _ in s]) for s in sentences]
        same, differences = round_trip(args.nertrain, args.model, sentences, texts)
        print(f"| {path} | {len(sentences)} | {same} ({100 * same / len(sentences):.2f}%) |")
        all_differences[path] = differences
    for path, differences in all_differences.items():
        print(f"\nMost common differences in {path} (corpus tokens → nertrain's):")
        for (words, tokens), count in differences.most_common(args.differences):
            print(f"- `{words}` → `{tokens}`: {count}")

    if not args.score:
        return
    print("\n| file | `eval` on the CoNLL file | text, a sentence a line | text, a paragraph a document |")
    print("|---|---:|---:|---:|")
    for path in args.files:
        documents = read_documents(path, args.tag_column)
        row = [f"{f1(args.nertrain, args.model, path):.2f}"]
        for paragraphs in (False, True):
            lines, lost = annotated(documents, detokenize, paragraphs)
            # Named by the whole path: conll2003/test.txt and conllpp/test.txt both end in test.txt.
            stem = os.path.normpath(path).strip(os.sep + ".").replace(os.sep, "_")
            name = os.path.join(work, stem + (".paragraphs" if paragraphs else ".lines") + ".jsonl")
            with open(name, "w", encoding="utf-8") as f:
                for line in lines:
                    f.write(json.dumps(line, ensure_ascii=False) + "\n")
            row.append(f"{f1(args.nertrain, args.model, name):.2f}" + (f" ({lost} lost)" if lost else ""))
        print(f"| {path} | " + " | ".join(row) + " |")
    print(f"\nJSON lines in {work}")


if __name__ == "__main__":
    main()
