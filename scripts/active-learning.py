#!/usr/bin/env python3
"""The annotation loop, simulated on a tagged corpus: the pool is the training file with its tags
hidden, and "annotating" a sentence reveals them.

Each seed starts from the same random sentences; then, for each strategy, rounds of `nertrain
select --budget STEP` over the sentences not yet labelled (as text, their words joined by spaces)
add sentences until UNTIL, and each round trains a model afresh on what is labelled (`nertrain
fit`, the experiment given, dev for early stopping; with --continue, each round continues the
last round's model instead) and records its test F1. A model on the whole
training file per seed gives the full-data F1 the curves are measured against.

Writes, under --out: results.jsonl (one line per seed, strategy and round), summary.json, and
curves.svg (test F1 against the share of the training tokens labelled, mean over seeds). Prints
the summary table. Every run directory is kept under --out/runs.

    scripts/active-learning.py                # CoNLL-2003 from ../shared/data (about an hour)
    scripts/active-learning.py --quick        # the shipped sample, in seconds (CI runs this)
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STRATEGIES = ["random", "least-confidence", "margin", "entropy", "expected-errors"]


def read_conll(path):
    """A CoNLL file's sentences, each a list of its token lines as written."""
    sentences, current = [], []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("-DOCSTART-"):
            if current:
                sentences.append(current)
            current = []
            continue
        current.append(line)
    if current:
        sentences.append(current)
    return sentences


def write_conll(path, sentences):
    Path(path).write_text("".join("\n".join(s) + "\n\n" for s in sentences), encoding="utf-8")


def text_of(sentence):
    return " ".join(line.split()[0] for line in sentence)


def run(args, **kwargs):
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))}\n{done.stderr}")
    return done


def fit(options, train_file, output, seed, start_from=None):
    """Trains on `train_file` (continuing the model in `start_from`, when given); its dev and
    test F1 and the seconds it took."""
    started = time.perf_counter()
    args = [options.binary, "fit", "--config", options.config, "--overwrite"]
    if start_from is not None:
        args += ["--start-from", str(start_from)]
    for setting in [
        f"data.train={json.dumps(str(train_file))}",
        f"train.output={json.dumps(str(output))}",
        f"train.seed={seed}",
        f"train.epochs={options.epochs}",
        f"train.patience={options.patience}",
        *options.set,
    ]:
        args += ["--set", setting]
    run(args)
    seconds = time.perf_counter() - started
    dev = json.loads((Path(output) / "dev.json").read_text())
    test = json.loads((Path(output) / "test.json").read_text())
    return dev["overall"]["f1"], test["overall"]["f1"], seconds


def with_corpus(options):
    """Completes `options` (the binary, and the corpus's dev and test files with a
    sentence-level model as overrides); the corpus directory."""
    if options.binary is None:
        target = Path(__import__("os").environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        options.binary = str(target / "release" / "nertrain")
    data = Path(options.data)
    dev = data / "valid.txt" if (data / "valid.txt").exists() else data / "dev.txt"
    options.set += [
        f"data.dev={json.dumps(str(dev))}",
        f"data.test={json.dumps(str(data / 'test.txt'))}",
        'data.context="sentence"',
        "model.mention_dim=0",
    ]
    return data


def select(options, model, texts, strategy, seed, work):
    """The indices into `texts` that `nertrain select` chooses."""
    pool = work / "pool.txt"
    pool.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    chosen = work / "chosen.jsonl"
    run([
        options.binary, "select", "--model", str(model), "--input", str(pool),
        "--budget", str(options.step), "--strategy", strategy, "--seed", str(seed),
        "--max-similarity", str(options.max_similarity), "--format", "doccano",
        "--output", str(chosen),
    ])
    # Split at line feeds only, as select writes them: a text may hold U+2028.
    lines = chosen.read_text(encoding="utf-8").split("\n")
    return [json.loads(line)["line"] - 1 for line in lines if line]


def mean_std(values):
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def interpolate(points, x):
    """The curve through `points` ((x, y), x ascending) at `x`; None outside it."""
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1
    return None


def summarize(results, full, total_tokens, options):
    """Per strategy and round: mean ± std test F1 and token share; the goals' figures."""
    full_f1 = mean_std(full) if full else (float("nan"), 0.0)
    table = {}
    for r in results:
        key = (r["strategy"], r["round"])
        table.setdefault(key, []).append(r)
    curves = {}
    rows = []
    for (strategy, rnd), runs in sorted(table.items(), key=lambda kv: (STRATEGIES.index(kv[0][0]), kv[0][1])):
        f1 = mean_std([r["test_f1"] for r in runs])
        share = statistics.mean(r["tokens"] for r in runs) / total_tokens
        curves.setdefault(strategy, []).append((share, f1[0]))
        rows.append({
            "strategy": strategy, "round": rnd, "sentences": runs[0]["sentences"],
            "token_share": share, "test_f1": f1[0], "test_f1_std": f1[1],
            "dev_f1": statistics.mean(r["dev_f1"] for r in runs),
            "seeds": len(runs), "seconds": statistics.mean(r["seconds"] for r in runs),
        })
    target = 0.99 * full_f1[0]
    goals = {"full_test_f1": full_f1[0], "full_test_f1_std": full_f1[1], "target_99": target}
    for strategy, points in curves.items():
        reached = [share for share, f1 in points if f1 >= target]
        goals[strategy] = {"share_at_99": min(reached) if reached else None}
        third = [p for p in points][3] if len(points) > 3 else None
        if third and strategy != "random" and "random" in curves:
            at = interpolate(curves["random"], third[0])
            goals[strategy]["third_round_share"] = third[0]
            goals[strategy]["above_random_at_equal_tokens"] = (
                third[1] - at if at is not None else None
            )
    return rows, curves, goals


def svg(curves, goals, path):
    """Test F1 against the share of training tokens labelled, one line per strategy."""
    width, height, left, bottom, top, right = 640, 400, 60, 50, 20, 150
    xs = [x for points in curves.values() for x, _ in points] + [0.0]
    ys = [y for points in curves.values() for _, y in points] + [goals["target_99"]]
    x_max, y_min, y_max = max(xs) * 1.05, min(ys) - 1, max(ys + [goals["full_test_f1"]]) + 1
    px = lambda x: left + (width - left - right) * x / x_max
    py = lambda y: top + (height - top - bottom) * (y_max - y) / (y_max - y_min)
    colours = dict(zip(STRATEGIES, ["#777777", "#1f77b4", "#d62728", "#2ca02c", "#9467bd"]))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>',
        f'<text x="{(left + width - right) / 2}" y="{height - 12}" text-anchor="middle">'
        "training tokens labelled (share of the training file)</text>",
        f'<text x="14" y="{(top + height - bottom) / 2}" transform="rotate(-90 14 {(top + height - bottom) / 2})" '
        'text-anchor="middle">test F1</text>',
    ]
    for k in range(6):
        x = x_max * k / 5
        parts.append(f'<text x="{px(x)}" y="{height - bottom + 16}" text-anchor="middle">{100 * x:.0f}%</text>')
        y = y_min + (y_max - y_min) * k / 5
        parts.append(f'<text x="{left - 6}" y="{py(y) + 4}" text-anchor="end">{y:.1f}</text>')
    # The two reference lines lie close together: one label above its line, one below.
    for value, label, dash, shift in [
        (goals["full_test_f1"], "all data", "2,2", -4),
        (goals["target_99"], "99%", "6,3", 12),
    ]:
        parts.append(f'<line x1="{left}" y1="{py(value)}" x2="{width - right}" y2="{py(value)}" '
                     f'stroke="black" stroke-dasharray="{dash}"/>')
        parts.append(f'<text x="{width - right + 4}" y="{py(value) + shift}">{label} {value:.2f}</text>')
    for n, (strategy, points) in enumerate(curves.items()):
        colour = colours.get(strategy, "black")
        path_d = " ".join(f"{'M' if i == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for i, (x, y) in enumerate(points))
        parts.append(f'<path d="{path_d}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in points:
            parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
        parts.append(f'<text x="{width - right + 4}" y="{top + 60 + 16 * n}" fill="{colour}">{strategy}</text>')
    parts.append("</svg>\n")
    Path(path).write_text("\n".join(parts), encoding="utf-8")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the shipped sample, tiny rounds")
    parser.add_argument("--config", default="configs/conll-adam.toml")
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/conll2003"),
                        help="the corpus directory (train.txt, valid.txt, test.txt)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--strategies", nargs="+", default=STRATEGIES, choices=STRATEGIES)
    parser.add_argument("--start", type=int, default=500, help="random sentences to start from")
    parser.add_argument("--step", type=int, default=500, help="sentences chosen a round")
    parser.add_argument("--until", type=int, default=4000, help="sentences at the last round")
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--patience", type=int, default=5)
    parser.add_argument("--max-similarity", type=float, default=0.7)
    parser.add_argument("--set", action="append", default=[], help="more fit overrides")
    parser.add_argument("--out", default="runs/active-learning")
    parser.add_argument("--binary", default=None)
    parser.add_argument("--continue", dest="continue_", action="store_true",
                        help="each round continues the last round's model (fit --start-from) "
                             "instead of training afresh")
    parser.add_argument("--no-full", action="store_true",
                        help="skip the model on the whole training file")
    options = parser.parse_args()
    if options.quick:
        options.config, options.data = "configs/sample.toml", str(ROOT / "data/sample")
        options.seeds, options.strategies = options.seeds[:1], ["random", "margin"]
        options.start, options.step, options.until, options.epochs = 60, 60, 180, 3
    data = with_corpus(options)
    train = read_conll(data / "train.txt")
    total_tokens = sum(len(s) for s in train)
    out = Path(options.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    results, full = [], []
    with open(out / "results.jsonl", "w") as log:
        for seed in options.seeds:
            work = out / "runs" / f"seed{seed}"
            work.mkdir(exist_ok=True)
            if not options.no_full:
                write_conll(work / "all.txt", train)
                _, full_f1, seconds = fit(options, work / "all.txt", work / "full", seed)
                full.append(full_f1)
                print(f"seed {seed}: all {len(train)} sentences: test F1 {full_f1:.2f} ({seconds:.0f} s)", file=sys.stderr)
            order = list(range(len(train)))
            random.Random(seed).shuffle(order)
            initial = order[: options.start]
            for strategy in options.strategies:
                labelled = list(initial)
                for rnd in range(1 + (options.until - options.start) // options.step):
                    subset = work / f"{strategy}-{rnd}.txt"
                    write_conll(subset, [train[i] for i in labelled])
                    model = work / f"{strategy}-{rnd}"
                    previous = work / f"{strategy}-{rnd - 1}" if options.continue_ and rnd > 0 else None
                    dev_f1, test_f1, seconds = fit(options, subset, model, seed, previous)
                    record = {
                        "seed": seed, "strategy": strategy, "round": rnd,
                        "sentences": len(labelled), "tokens": sum(len(train[i]) for i in labelled),
                        "dev_f1": dev_f1, "test_f1": test_f1, "seconds": round(seconds, 2),
                    }
                    results.append(record)
                    log.write(json.dumps(record) + "\n")
                    log.flush()
                    print(json.dumps(record), file=sys.stderr)
                    if len(labelled) >= options.until:
                        break
                    taken = set(labelled)
                    rest = [i for i in range(len(train)) if i not in taken]
                    started = time.perf_counter()
                    chosen = select(options, model, [text_of(train[i]) for i in rest], strategy, seed, work)
                    record["select_seconds"] = round(time.perf_counter() - started, 2)
                    labelled += [rest[j] for j in chosen]
    rows, curves, goals = summarize(results, full, total_tokens, options)
    (out / "summary.json").write_text(json.dumps({"rows": rows, "goals": goals}, indent=2) + "\n")
    if full:
        svg(curves, goals, out / "curves.svg")
    print(f"all data: test F1 {goals['full_test_f1']:.2f} ± {goals['full_test_f1_std']:.2f}; "
          f"99%: {goals['target_99']:.2f}")
    print("| strategy | round | sentences | tokens | test F1 |")
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['strategy']} | {row['round']} | {row['sentences']} | "
              f"{100 * row['token_share']:.1f}% | {row['test_f1']:.2f} ± {row['test_f1_std']:.2f} |")
    for strategy in options.strategies:
        g = goals.get(strategy, {})
        share = g.get("share_at_99")
        above = g.get("above_random_at_equal_tokens")
        print(f"{strategy}: 99% of all-data F1 at "
              f"{'not reached' if share is None else f'{100 * share:.1f}% of the tokens'}"
              + ("" if above is None else f"; third round {above:+.2f} F1 over random at equal tokens"))


if __name__ == "__main__":
    main()
