#!/usr/bin/env python3
"""An operating point chosen on dev, reported on test: for each model, how LABEL keeps its dev
recall at TARGET or more (`nertrain eval --thresholds --recall`: the highest confidence threshold,
or the smallest bias of its emission scores when the model's own entities fall short), then test
scored so beside test as the model decodes it. Test is only
reported, never used to choose. Also draws each label's precision–recall curve on dev (the first
model's) as an SVG: by confidence threshold, then by bias of the label's emission scores.

    scripts/experiments/operating_point.py --models runs/s1 runs/s2 runs/s3 \\
        --dev ../shared/data/conll2003/valid.txt --test ../shared/data/conll2003/test.txt \\
        --recall PER=95 --out runs/operating-point

Writes OUT/operating-point.md, OUT/operating-point.json, OUT/pr-dev.svg and its numbers,
OUT/pr-dev.json.
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from nerscripts import format_mean_std, nertrain_json  # noqa: E402 (scripts/nerscripts.py)
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def eval_json(binary, model, data, *extra):
    return nertrain_json(binary, "eval", "--model", model, "--data", data, "--json", *extra)


def bias_points(binary, model, dev, labels):
    """Each label's dev precision and recall with its emission scores biased by 0.25 to 3."""
    points = {label: [] for label in labels}
    for step in range(1, 13):
        bias = step / 4
        for label in labels:
            scores = eval_json(binary, model, dev, "--bias", f"{label}={bias}")["types"][label]
            points[label].append((scores["recall"], scores["precision"]))
    return points


def pr_svg(labels, path, biased):
    """Each label's precision against recall, one line a label: at every confidence threshold
    (solid), then with its emission scores biased by 0.25 to 3 (dashed)."""
    width, height, pad = 520, 380, 55
    x = lambda r: pad + r / 100 * (width - 2 * pad)
    y = lambda p: height - pad - (p - 50) / 50 * (height - 2 * pad)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             'font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/>',
             f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="black"/>']
    for tick in range(0, 101, 20):
        parts.append(f'<text x="{x(tick) - 8:.1f}" y="{height - pad + 16}">{tick}</text>')
    for tick in range(50, 101, 10):
        parts.append(f'<text x="{pad - 28}" y="{y(tick) + 4:.1f}">{tick}</text>')
    parts.append(f'<text x="{width / 2 - 40}" y="{height - 12}">recall (%)</text>')
    parts.append(f'<text x="8" y="{pad - 30}">precision (%) on dev: by confidence threshold (solid),</text>')
    parts.append(f'<text x="8" y="{pad - 14}">then by bias of the label\'s scores, 0.25 to 3 (dashed)</text>')
    for i, (label, curve) in enumerate(sorted(labels.items())):
        points = []
        for p in curve["curve"]:
            point = (p["recall"], max(p["precision"], 50.0))
            # A point a quarter of a recall point from the last one drawn adds nothing to see.
            if not points or abs(point[0] - points[-1][0]) >= 0.25 or p is curve["curve"][-1]:
                points.append(point)
        line = " ".join(f"{x(r):.1f},{y(p):.1f}" for r, p in points)
        colour = COLOURS[i % len(COLOURS)]
        parts.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>')
        onward = [points[-1]] + [(r, max(p, 50.0)) for r, p in biased.get(label, [])]
        dashed = " ".join(f"{x(r):.1f},{y(p):.1f}" for r, p in onward)
        parts.append(f'<polyline points="{dashed}" fill="none" stroke="{colour}" stroke-width="2" '
                     'stroke-dasharray="5,4"/>')
        # The legend in the low-recall, low-precision corner, which no curve reaches.
        parts.append(f'<text x="{x(5):.1f}" y="{y(70) + 16 * i:.1f}" fill="{colour}">{label}</text>')
    parts.append("</svg>\n")
    path.write_text("".join(parts))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", required=True, type=Path)
    parser.add_argument("--dev", required=True, type=Path)
    parser.add_argument("--test", required=True, type=Path)
    parser.add_argument("--recall", required=True, help="LABEL=PERCENT, as eval --recall")
    parser.add_argument("--binary", default=str(ROOT / "target" / "release" / "nertrain"))
    parser.add_argument("--out", required=True, type=Path)
    options = parser.parse_args()
    label, target = options.recall.split("=")
    options.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, model in enumerate(options.models):
        sweep = eval_json(options.binary, model, options.dev, "--thresholds", "--recall", options.recall)
        if i == 0:
            biased = bias_points(options.binary, model, options.dev, sorted(sweep["labels"]))
            pr_svg(sweep["labels"], options.out / "pr-dev.svg", biased)
            (options.out / "pr-dev.json").write_text(json.dumps(
                {"thresholds": sweep["labels"], "biases": biased}, indent=1) + "\n")
        chosen = sweep["chosen"][label]
        threshold, bias = chosen["threshold"], chosen.get("bias", 0.0)
        every = eval_json(options.binary, model, options.test, "--all-entities")["types"][label]
        kept = eval_json(options.binary, model, options.test, "--threshold", f"{label}={threshold!r}",
                         "--bias", f"{label}={bias!r}")["types"][label]
        rows.append({"model": str(model), "threshold": threshold, "bias": bias,
                     "dev": {"precision": chosen["chosen"]["precision"], "recall": chosen["chosen"]["recall"],
                             "all": sweep["labels"][label]["all"]},
                     "test": {"precision": kept["precision"], "recall": kept["recall"], "f1": kept["f1"],
                              "all": {k: every[k] for k in ("precision", "recall", "f1")}}})
    (options.out / "operating-point.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [f"{label} recall ≥ {target}% chosen on `{options.dev}`, reported on `{options.test}`.", "",
             "| model | threshold | bias | dev P / R at it | test P / R at it | test P / R, as decoded |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        d, t = r["dev"], r["test"]
        lines.append(f"| {r['model']} | {r['threshold']:.4f} | {r['bias']:.4f} | "
                     f"{d['precision']:.2f} / {d['recall']:.2f} | "
                     f"{t['precision']:.2f} / {t['recall']:.2f} | {t['all']['precision']:.2f} / {t['all']['recall']:.2f} |")
    if len(rows) > 1:
        lines += ["", f"Test recall at the threshold: {format_mean_std([r['test']['recall'] for r in rows])}; "
                      f"precision {format_mean_std([r['test']['precision'] for r in rows])} "
                      f"(as decoded: recall {format_mean_std([r['test']['all']['recall'] for r in rows])}, "
                      f"precision {format_mean_std([r['test']['all']['precision'] for r in rows])})."]
    (options.out / "operating-point.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
