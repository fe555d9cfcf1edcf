#!/usr/bin/env python3
"""Partial labels and continued training, measured on CoNLL-2003 (issue 33).

Per seed, models of the same experiment (dev for early stopping, test scored once) trained on:

  full            the training file as it is
  half-unknown    half the tokens of every sentence, drawn at random, marked unknown (`-`)
  half-O          the same tokens tagged O instead: what a tool without partial labels forces
  spans-unknown   a third of the entities removed, their tokens unknown
  spans-O         the same entities removed as O (an annotator's skipped entities)
  no-MISC         MISC removed (tagged O): a first model that does not know the label
  MISC-continued  `fit --start-from` no-MISC on the full file: the label added to a trained model

The same `-` tokens and removed entities are used for both members of a pair. Writes, under
--out: results.jsonl (one line per seed and variant), summary.json and partial-labels.svg.

    scripts/experiments/partial_labels.py                   # CoNLL-2003 from ../shared/data
    scripts/experiments/partial_labels.py --quick           # the shipped sample, in seconds (CI runs this)
"""

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

import active_learning as loop  # noqa: E402 (beside this script)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nerscripts import mean_std, read_blocks, write_blocks  # noqa: E402 (scripts/nerscripts.py)
import nertrain  # noqa: E402 (the wheel: crates/python)

ROOT = Path(__file__).resolve().parents[2]

VARIANTS = ["full", "half-unknown", "half-O", "spans-unknown", "spans-O", "no-MISC", "MISC-continued"]


def split(line):
    fields = line.split()
    return fields[:-1], fields[-1]


def with_tags(sentence, tags):
    return [" ".join(split(line)[0] + [tag]) for line, tag in zip(sentence, tags)]


def variants(train, seed):
    """Each variant's training sentences (CoNLL lines) but the continued one."""
    rng = random.Random(seed)
    out = {name: [] for name in VARIANTS[:-1]}
    for sentence in train:
        tags = [split(line)[1] for line in sentence]
        out["full"].append(sentence)
        hidden = set(rng.sample(range(len(tags)), len(tags) // 2))
        for name, mark in [("half-unknown", "-"), ("half-O", "O")]:
            out[name].append(with_tags(sentence, [mark if i in hidden else t for i, t in enumerate(tags)]))
        removed = [span for span in nertrain.entities(tags) if rng.random() < 1 / 3]
        inside = {i for start, end, _ in removed for i in range(start, end)}
        for name, mark in [("spans-unknown", "-"), ("spans-O", "O")]:
            out[name].append(with_tags(sentence, [mark if i in inside else t for i, t in enumerate(tags)]))
        out["no-MISC"].append(with_tags(sentence, ["O" if t.endswith("-MISC") else t for t in tags]))
    return out


def summarize(results):
    table = {}
    for r in results:
        table.setdefault(r["variant"], []).append(r)
    rows = {}
    for name in VARIANTS:
        runs = table.get(name, [])
        if not runs:
            continue
        f1 = mean_std([r["test_f1"] for r in runs])
        misc = mean_std([r["test_misc_f1"] for r in runs])
        rows[name] = {
            "test_f1": f1[0], "test_f1_std": f1[1], "test_misc_f1": misc[0],
            "test_misc_f1_std": misc[1], "seconds": statistics.mean(r["seconds"] for r in runs),
            "seeds": len(runs),
        }
    return rows


def svg(rows, path):
    """Mean test F1 of each variant as a bar, its standard deviation as a whisker."""
    names = [n for n in VARIANTS if n in rows]
    width, height, left, bottom, top = 640, 320, 60, 70, 20
    lo = min(rows[n]["test_f1"] - rows[n]["test_f1_std"] for n in names) - 2
    hi = max(rows[n]["test_f1"] + rows[n]["test_f1_std"] for n in names) + 1
    y = lambda v: top + (height - top - bottom) * (hi - v) / (hi - lo)
    step = (width - left - 20) / len(names)
    colours = {"unknown": "#2ca02c", "O": "#d62728"}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 20}" y2="{height - bottom}" stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>',
        f'<text x="14" y="{(top + height - bottom) / 2}" transform="rotate(-90 14 {(top + height - bottom) / 2})" text-anchor="middle">test F1 (mean ± std over seeds)</text>',
    ]
    for k in range(6):
        v = lo + (hi - lo) * k / 5
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4}" text-anchor="end">{v:.1f}</text>')
    for i, name in enumerate(names):
        row = rows[name]
        x = left + step * i + step * 0.15
        colour = colours.get(name.split("-")[-1], "#1f77b4")
        parts.append(f'<rect x="{x:.1f}" y="{y(row["test_f1"]):.1f}" width="{step * 0.7:.1f}" '
                     f'height="{height - bottom - y(row["test_f1"]):.1f}" fill="{colour}"/>')
        mid = x + step * 0.35
        parts.append(f'<line x1="{mid:.1f}" y1="{y(row["test_f1"] - row["test_f1_std"]):.1f}" x2="{mid:.1f}" '
                     f'y2="{y(row["test_f1"] + row["test_f1_std"]):.1f}" stroke="black"/>')
        parts.append(f'<text x="{mid:.1f}" y="{y(row["test_f1"]) - 6:.1f}" text-anchor="middle">{row["test_f1"]:.2f}</text>')
        # Neighbouring names would overlap on one line: every other one goes a line lower.
        parts.append(f'<text x="{mid:.1f}" y="{height - bottom + 16 + 16 * (i % 2)}" '
                     f'text-anchor="middle">{name}</text>')
    parts.append("</svg>\n")
    Path(path).write_text("\n".join(parts), encoding="utf-8")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the shipped sample, tiny runs")
    parser.add_argument("--config", default="configs/conll-adam.toml")
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/conll2003"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--variants", nargs="+", default=VARIANTS, choices=VARIANTS)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--patience", type=int, default=4)
    parser.add_argument("--set", action="append", default=[], help="more fit overrides")
    parser.add_argument("--encoder-cache", metavar="DIR", default=None,
                        help="keep a frozen encoder's layers here between runs "
                             "(fit --encoder-cache)")
    parser.add_argument("--out", default="runs/partial-labels")
    parser.add_argument("--binary", default=None)
    options = parser.parse_args()
    if options.quick:
        options.config, options.data = "configs/sample.toml", str(ROOT / "data/sample")
        options.seeds, options.epochs = options.seeds[:1], 3
    data = loop.with_corpus(options)
    train = read_blocks(data / "train.txt")
    out = Path(options.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    results = []
    with open(out / "results.jsonl", "w") as log:
        for seed in options.seeds:
            work = out / "runs" / f"seed{seed}"
            work.mkdir(exist_ok=True)
            files = variants(train, seed)
            for name in options.variants:
                run = work / name
                if name == "MISC-continued":
                    dev_f1, test_f1, seconds = loop.fit(
                        options, work / "full.txt", run, seed, start_from=work / "no-MISC"
                    )
                else:
                    write_blocks(work / f"{name}.txt", files[name])
                    dev_f1, test_f1, seconds = loop.fit(options, work / f"{name}.txt", run, seed)
                recorded = nertrain.read_run(run)
                record = {
                    "seed": seed, "variant": name, "dev_f1": dev_f1, "test_f1": test_f1,
                    "test_misc_f1": recorded["test"]["types"].get("MISC", {}).get("f1", 0.0),
                    "seconds": round(seconds, 2),
                    "epochs": len(recorded["metrics"]),
                }
                results.append(record)
                log.write(json.dumps(record) + "\n")
                log.flush()
                print(json.dumps(record), file=sys.stderr)
    rows = summarize(results)
    (out / "summary.json").write_text(json.dumps(rows, indent=2) + "\n")
    svg(rows, out / "partial-labels.svg")
    print("| training data | test F1 | MISC F1 | seconds |")
    print("|---|---:|---:|---:|")
    for name, row in rows.items():
        print(f"| {name} | {row['test_f1']:.2f} ± {row['test_f1_std']:.2f} | "
              f"{row['test_misc_f1']:.2f} ± {row['test_misc_f1_std']:.2f} | {row['seconds']:.0f} |")


if __name__ == "__main__":
    main()
