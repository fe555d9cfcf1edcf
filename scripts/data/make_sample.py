#!/usr/bin/env python3
"""Writes data/sample/{train,dev,test}.txt: a small synthetic English NER corpus in CoNLL format
(word and IOB2 tag, space separated, -DOCSTART- lines between documents); and
data/sample/lists.tsv, a dictionary of its name lists.

Every sentence comes from the templates and name lists below; none is taken from any corpus.
Dev and test draw partly on names that train never uses, so scores measure generalisation.
Deterministic: run it again and the files come out byte for byte the same.
"""
import random
from pathlib import Path

FIRST = "Anna Peter Maria John Laura Ahmed Chen Olga Pedro Fatima Lars Ingrid Kenji Amara Tomas Elena Rafael Nadia Hugo Priya Samuel Yuki Marta Diego Clara Ivan Leila Oscar Sofia Bruno".split()
LAST = "Schmidt Novak Garcia Okafor Lindqvist Tanaka Rossi Dubois Kowalski Haddad Silva Jensen Moreau Petrov Nakamura Costa Fischer Brennan Mendes Ortiz Varga Keller Sato Horvat Larsen Ibrahim Weber Marin Quinn Adler".split()
CITY = "Berlin Paris Madrid Lagos Tokyo Oslo Lima Cairo Vienna Dublin Prague Nairobi Seoul Lisbon Warsaw Quito Helsinki Manila Athens Bogota Kyoto Porto Zagreb Accra".split()
COUNTRY = "Germany France Spain Nigeria Japan Norway Peru Egypt Austria Ireland Kenya Brazil Canada Poland Chile Finland Greece Colombia Portugal Croatia Ghana Mexico".split()
ORG = ["Siemens", "Reuters", "Toyota", "Nokia", "Unilever", "Petrobras", "Interpol", "UNESCO",
       "Red Cross", "World Bank", "Bayern Munich", "Real Madrid", "Ajax", "Nordic Steel",
       "Atlas Airlines", "Kessler Group", "Blue River Bank", "Orion Labs", "Delta Mining",
       "Union Rail", "Harbor Foods", "Summit Energy", "Vega Motors", "Polar Telecom"]
MISC = ["German", "French", "Spanish", "Japanese", "Olympic", "Nobel", "Brazilian", "Irish",
        "Kenyan", "Polish", "Greek", "World Cup", "Grand Prix", "European", "Asian", "Catholic"]
TEMPLATES = [
    "{PER} was born in {LOC} .",
    "{PER} , who works for {ORG} , arrived in {LOC} on Monday .",
    "{ORG} said on Tuesday that profits rose {NUM} percent .",
    "The {MISC} team beat {ORG} {NUM} - {NUM} in {LOC} .",
    "{PER} told reporters in {LOC} that {ORG} would not comment .",
    "Shares of {ORG} fell {NUM} percent after the {MISC} report .",
    "{LOC} and {LOC} signed a trade agreement on Friday .",
    "{PER} and {PER} met in {LOC} to discuss the {MISC} elections .",
    "The {MISC} minister {PER} visited {ORG} headquarters .",
    "{ORG} will open a new office in {LOC} next year , {PER} said .",
    "Police in {LOC} arrested {NUM} people on Sunday .",
    "{PER} scored twice as {ORG} won the {MISC} final .",
    "Rain delayed the match between {ORG} and {ORG} in {LOC} .",
    "The {MISC} embassy in {LOC} was closed for {NUM} days .",
    "{PER} ( {LOC} ) finished {NUM} seconds behind {PER} .",
    "Prices in {LOC} rose by {NUM} percent in March .",
    "It was a quiet day on the markets .",
    "{ORG} chief executive {PER} resigned on Wednesday .",
]

def pick(rng, kind, held_out):
    pool = {"LOC": CITY + COUNTRY, "ORG": ORG, "MISC": MISC}.get(kind)
    if kind == "PER":
        first, last = (FIRST, LAST)
        split = lambda xs: xs[: len(xs) * 3 // 4] if not held_out else xs
        words = [rng.choice(split(first)), rng.choice(split(last))]
        return words[-1:] if rng.random() < 0.2 else words
    if kind == "NUM":
        return [str(rng.randint(1, 99))]
    names = pool[: len(pool) * 3 // 4] if not held_out else pool
    return rng.choice(names).split()

def sentence(rng, held_out):
    out = []
    for token in rng.choice(TEMPLATES).split():
        if token.startswith("{") and token.endswith("}"):
            kind = token[1:-1]
            words = pick(rng, kind, held_out)
            for i, w in enumerate(words):
                out.append((w, "O" if kind == "NUM" else ("B-" if i == 0 else "I-") + kind))
        else:
            out.append((token, "O"))
    return out

def write(path, rng, count, held_out):
    lines = []
    for i in range(count):
        if i % 20 == 0:
            lines += ["-DOCSTART- O", ""]
        lines += [f"{w} {t}" for w, t in sentence(rng, held_out)] + [""]
    Path(path).write_text("\n".join(lines))

if __name__ == "__main__":
    root = Path(__file__).resolve().parents[2] / "data" / "sample"
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(2026)
    write(root / "train.txt", rng, 600, held_out=False)
    write(root / "dev.txt", rng, 150, held_out=True)
    write(root / "test.txt", rng, 150, held_out=True)
    # A dictionary of the sample's own name lists (every name, the held-out ones too, as a
    # user's list knows names their training data never saw), for dictionary features.
    entries = ([("LOC", name) for name in CITY + COUNTRY] + [("ORG", name) for name in ORG]
               + [("PER_LAST", name) for name in LAST])
    (root / "lists.tsv").write_text(
        "# The sample's dictionary (scripts/data/make_sample.py): LABEL<TAB>phrase\n"
        + "".join(f"{label}\t{name}\n" for label, name in entries))
