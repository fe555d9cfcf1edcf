#!/usr/bin/env python3
"""Writes DIR/train.txt and DIR/dev.txt: a synthetic corpus shaped like CoNLL-2003 (14,041 and
3,250 sentences, ~14.5 tokens each, a Zipfian vocabulary of ~20k words, 9 IOB2 tags), for
benchmarks on machines without the real corpus. The words are meaningless; only the shape is."""
import random, sys
from pathlib import Path

def write(path, rng, sentences):
    types = ["PER", "LOC", "ORG", "MISC"]
    lines = []
    for _ in range(sentences):
        length = max(1, min(124, int(rng.lognormvariate(2.45, 0.75))))
        t = 0
        while t < length:
            if rng.random() < 0.12:
                kind = rng.choice(types)
                for i in range(min(rng.randint(1, 3), length - t)):
                    lines.append(f"W{int(rng.paretovariate(1.0)) % 20000} {'B' if i == 0 else 'I'}-{kind}")
                    t += 1
            else:
                lines.append(f"w{int(rng.paretovariate(1.0)) % 20000} O")
                t += 1
        lines.append("")
    Path(path).write_text("\n".join(lines))

out = Path(sys.argv[1])
rng = random.Random(7)
write(out / "train.txt", rng, 14041)
write(out / "dev.txt", rng, 3250)
