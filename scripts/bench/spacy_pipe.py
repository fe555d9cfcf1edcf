#!/usr/bin/env python3
"""The spaCy component against `nertrain tag --input`: the same entities, and the speed of each.

Run with a Python that has spaCy and the nertrain wheel (pip install -r
scripts/requirements-stack.txt, then the wheel):

    python scripts/bench/spacy_pipe.py --model runs/conll --conll ../shared/data/conll2003/valid.txt

The texts are the CoNLL file's sentences, each its words joined by spaces (or a file of one text a
line, with --texts). First the entities are compared: each of the CLI's is a span of the doc with
the same characters, label and confidence, or is listed in doc._.nertrain_misaligned (token
alignment); anything else is counted as a difference. Then `nlp.pipe` (spacy.blank("en") with the
component) and `nertrain tag --input FILE --format json` are timed in turn, --runs times each, on
the same threads (RAYON_NUM_THREADS, default 1); medians and their ratio are printed as JSON.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import nertrain
import spacy

ROOT = Path(__file__).resolve().parents[2]


def conll_texts(path):
    """The CoNLL file's sentences as texts, each its words joined by spaces (as nertrain reads
    the file and makes a sentence text)."""
    return [nertrain.sentence_text(sentence["words"])["text"]
            for document in nertrain.read_conll(path) for sentence in document]


def differences(docs, records):
    """(entities, misaligned, unexplained) over the docs against the CLI's records."""
    found = misaligned = unexplained = 0
    for doc, record in zip(docs, records):
        spans = {(e.start_char, e.end_char, e.label_): e._.confidence for e in doc.ents}
        moved = {(m["start"], m["end"]): m for m in doc._.nertrain_misaligned}
        for entity in record["entities"]:
            found += 1
            key = (entity["start"], entity["end"], entity["label"])
            if (entity["start"], entity["end"]) in moved:
                misaligned += 1
            elif spans.get(key, "missing") != entity.get("confidence"):
                unexplained += 1
    return found, misaligned, unexplained


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--conll", help="a CoNLL file whose sentences are the texts")
    source.add_argument("--texts", help="a file of one text a line")
    parser.add_argument("--binary", default=str(ROOT / "target" / "release" / "nertrain"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1000)
    options = parser.parse_args()
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    texts = conll_texts(options.conll) if options.conll else \
        Path(options.texts).read_text(encoding="utf-8").splitlines()
    words = sum(len(t.split()) for t in texts)
    with tempfile.TemporaryDirectory() as scratch:
        lines = Path(scratch) / "texts.txt"
        lines.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        command = [options.binary, "tag", "--model", options.model, "--format", "json", "--input", str(lines)]
        printed = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        records = [json.loads(line) for line in printed.splitlines()]
        nlp = spacy.blank("en")
        nlp.add_pipe("nertrain", config={"model": options.model, "batch_size": options.batch_size})
        found, misaligned, unexplained = differences(nlp.pipe(texts), records)
        cli_seconds, pipe_seconds, tokenizer_seconds = [], [], []
        for _ in range(options.runs):
            start = time.perf_counter()
            subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
            cli_seconds.append(time.perf_counter() - start)
            start = time.perf_counter()
            for _ in nlp.pipe(texts):
                pass
            pipe_seconds.append(time.perf_counter() - start)
            start = time.perf_counter()
            for _ in nlp.tokenizer.pipe(texts):
                pass
            tokenizer_seconds.append(time.perf_counter() - start)
    cli, pipe = statistics.median(cli_seconds), statistics.median(pipe_seconds)
    print(json.dumps({
        "texts": len(texts), "words": words, "threads": os.environ["RAYON_NUM_THREADS"],
        "entities": found, "misaligned": misaligned, "unexplained": unexplained,
        "tag_input_seconds": round(cli, 3), "nlp_pipe_seconds": round(pipe, 3),
        "spacy_tokenizer_seconds": round(statistics.median(tokenizer_seconds), 3),
        "tag_input_words_per_second": round(words / cli), "nlp_pipe_words_per_second": round(words / pipe),
        "pipe_over_tag": round(pipe / cli, 3),
    }, indent=2))


if __name__ == "__main__":
    main()
