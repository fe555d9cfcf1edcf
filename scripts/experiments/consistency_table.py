#!/usr/bin/env python3
"""Mean ± std per configuration of `scripts/experiments/consistency.sh` lines, as a Markdown table.

    for r in runs/doc-s*; do scripts/experiments/consistency.sh $r; done | scripts/experiments/consistency_table.py

Runs are grouped by their directory name without the `-sSEED` suffix. Columns: dev, test and
CoNLL++ F1 decoded sentence by sentence (weight 0) and with the weight chosen on dev, the weights
chosen, and each run's epochs (best) from its record (`nertrain.read_run`).
"""
import re
import sys
from collections import OrderedDict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nerscripts import format_mean_std  # noqa: E402 (scripts/nerscripts.py)
import nertrain  # noqa: E402 (the wheel: crates/python)


def epochs(run):
    records = nertrain.read_run(run)["metrics"]
    best = max((r for r in records if r["best"]), key=lambda r: r["epoch"])["epoch"]
    return f"{len(records)} ({best})"


groups = OrderedDict()
for line in sys.stdin:
    fields = line.split()
    if not fields:
        continue
    run, values = fields[0], dict(f.split("=", 1) for f in fields[1:])
    groups.setdefault(re.sub(r"-s\d+$", "", run.rstrip("/")), []).append((run, values))

print("| runs | seeds | dev F1 (0) | dev F1 (chosen) | test F1 (0) | test F1 (chosen) "
      "| CoNLL++ (0) | CoNLL++ (chosen) | weights | epochs (best) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
for name, runs in groups.items():
    col = lambda key: format_mean_std([float(v[key]) for _, v in runs])
    print(f"| `{name}` | {len(runs)} | {col('dev@0')} | {col('dev')} | {col('test@0')} "
          f"| **{col('test')}** | {col('conllpp@0')} | {col('conllpp')} "
          f"| {', '.join(v['chosen'] for _, v in runs)} | {', '.join(epochs(r) for r, _ in runs)} |")
