#!/usr/bin/env python3
"""The annotation loop, simulated on a tagged corpus: the pool is the training file with its tags
hidden, and "annotating" a sentence reveals them.

Each seed starts from the same random sentences; then, for each strategy, rounds of `nertrain
select` over the sentences not yet labelled (as text, their words joined by spaces) add
sentences, and each round trains a model on what is labelled (`nertrain fit`, the experiment
given, dev for early stopping; afresh, or with --continue continuing the last round's model) and
records its test F1. A round's budget is STEP sentences, or with --budget-unit tokens, STEP
tokens to decide; the loop stops at UNTIL sentences, or at the round that reaches --until-share
of the training file's tokens decided. A model on the whole training file per seed gives the
full-data F1 the curves are measured against.

A strategy is one of select's (random, least-confidence, margin, entropy, expected-errors, mnlp,
bald), optionally with options after colons: `mnlp:diversity=1`, `mnlp:regions=0.99`,
`mnlp:regions=0.99:self`, `mnlp:regions=budget` (the round's budget of the pool's least sure
tokens, `select --regions budget`), `mnlp:regions=budget:floor=0.999` (none at or above 0.999).
With `regions`, select marks each chosen sentence's doubtful regions
and only they are revealed (widened to the gold entities they touch, as an annotator decides
whole entities); outside them the model's entities stay as it pre-annotated them (what an
annotator submits with the task) and the rest is unknown (`-`, a partial label) or, with
`self`, `O` as the model has it (self-training on what the model is sure of). Tokens decided
are the tokens revealed.

Two options run the loop as `nertrain serve` runs it for Label Studio (scripts/experiments/
live_loop.py), so that the two can be compared at the same settings: --served-order trains each
round as a version trains, on the sentences chosen as Label Studio exports them (tasks in the
corpus's order, the order they were imported in; each a text, cut into words by the model's
tokenizer, with the annotator's result: `check` regions over what was decided) and then the
starting sentences (the base model's training file, in the corpus's order, rehearsed), rather
than on one CoNLL file of the starting sentences then each round's in select's order; --judge
keeps a round's model only when its dev F1 is not below the kept model's, as
`serve --dev` serves a version, and otherwise selects with, continues from and reports the kept
one. With --max-similarity 1 (Label Studio's order skips no near duplicates) the file loop
then takes the same sentences as the live one.

With --distill CONFIG, the loop's last model teaches a student of that experiment (its
`[distill]`, docs/usage.md): the sentences the last round trained on are its labelled data
(partial labels and all), and the rest of the pool, its tags hidden, is text it learns from the
teacher alone. Its dev and test F1 go to distilled.jsonl and the summary, beside the student
experiment's own full-data F1 on the whole training file (unless --no-full).

Writes, under --out: results.jsonl (one line per seed, strategy and round), summary.json, and
curves.svg (test F1 against the share of the training tokens decided, mean over seeds). Prints
the summary table. Every run directory is kept under --out/runs. `--summarize DIR ...` merges
the results of several runs (seeds or strategies run apart) into --out.

    scripts/experiments/active_learning.py                # CoNLL-2003 from ../shared/data (about an hour)
    scripts/experiments/active_learning.py --quick        # the shipped sample, in seconds (CI runs this)
"""

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nerscripts import mean_std, read_blocks, write_blocks  # noqa: E402 (scripts/nerscripts.py)
import nertrain  # noqa: E402 (the wheel: crates/python)
STRATEGIES = ["random", "least-confidence", "margin", "entropy", "expected-errors", "mnlp", "bald"]
STRATEGY_OPTIONS = {"diversity", "regions", "floor", "self"}


def parse_strategy(spec):
    """A strategy spec (`mnlp:regions=0.99:self`) as (select's strategy, its options)."""
    name, *parts = spec.split(":")
    if name not in STRATEGIES:
        raise argparse.ArgumentTypeError(f"{spec}: {name!r} is none of {', '.join(STRATEGIES)}")
    options = {}
    for part in parts:
        key, _, value = part.partition("=")
        if key not in STRATEGY_OPTIONS:
            raise argparse.ArgumentTypeError(f"{spec}: {key!r} is none of {sorted(STRATEGY_OPTIONS)}")
        try:
            options[key] = float(value) if value else True
        except ValueError:
            if (key, value) != ("regions", "budget"):
                raise argparse.ArgumentTypeError(f"{spec}: {part!r}: expected a number") from None
            options[key] = value
    if "floor" in options and options.get("regions") != "budget":
        raise argparse.ArgumentTypeError(f"{spec}: floor is the floor of regions=budget")
    if "self" in options and "regions" not in options:
        raise argparse.ArgumentTypeError(f"{spec}: self needs regions (what is left to the model)")
    return name, options


def made_text(sentence):
    """A sentence's token lines made text by nertrain: its text and each token's offsets."""
    return nertrain.sentence_text([line.split()[0] for line in sentence])


def text_of(sentence):
    return made_text(sentence)["text"]


def run(args, **kwargs):
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))}\n{done.stderr}")
    return done


def fit(options, train_file, output, seed, start_from=None, rehearse=None, student=None):
    """Trains on `train_file` (continuing the model in `start_from`, when given, and mixing in
    `rehearse` after it); its dev and test F1 and the seconds it took. With `student` (more
    settings), trains --distill's experiment with them instead, at its own epochs."""
    started = time.perf_counter()
    config = options.config if student is None else options.distill
    args = [options.binary, "fit", "--config", config, "--overwrite"]
    if start_from is not None:
        args += ["--start-from", str(start_from)]
    if rehearse is not None:
        args += ["--set", f"data.rehearse={json.dumps(str(rehearse))}"]
    if options.encoder_cache is not None:
        args += ["--encoder-cache", options.encoder_cache]
    for setting in [
        f"data.train={json.dumps(str(train_file))}",
        f"train.output={json.dumps(str(output))}",
        f"train.seed={seed}",
        *([f"train.epochs={options.epochs}", f"train.patience={options.patience}"]
          if student is None else student),
        *options.set,
    ]:
        args += ["--set", setting]
    run(args)
    seconds = time.perf_counter() - started
    recorded = nertrain.read_run(output)
    return recorded["dev"]["overall"]["f1"], recorded["test"]["overall"]["f1"], seconds


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


def select(options, model, texts, spec, seed, work):
    """What `nertrain select` chooses of `texts`: for each chosen text, its index, the regions
    to decide (code points; None for the whole text) and the model's entities (start, end,
    label), read from the Label Studio tasks it writes."""
    strategy, extra = parse_strategy(spec)
    pool = work / "pool.txt"
    pool.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    chosen = work / "chosen.json"
    args = [
        options.binary, "select", "--model", str(model), "--input", str(pool),
        "--budget", str(options.step), "--budget-unit", options.budget_unit,
        "--strategy", strategy, "--seed", str(seed),
        "--max-similarity", str(options.max_similarity), "--format", "label-studio",
        "--output", str(chosen),
    ]
    if "diversity" in extra:
        args += ["--diversity", str(extra["diversity"])]
    if "regions" in extra:
        regions = str(extra["regions"])
        if "floor" in extra:
            regions += f":{extra['floor']}"
        args += ["--regions", regions]
    if options.encoder_cache is not None:
        args += ["--encoder-cache", options.encoder_cache]
    run(args)
    picked = []
    for task in json.loads(chosen.read_text(encoding="utf-8")):
        entities = [
            (r["value"]["start"], r["value"]["end"], r["value"]["labels"][0])
            for r in task["predictions"][0]["result"] if r["from_name"] == "label"
        ]
        regions = task["data"].get("known") if "regions" in extra else None
        picked.append((task["data"]["line"] - 1, regions, entities))
    return picked


def token_offsets(sentence):
    """Each token's (start, end) in the sentence's text (its words joined by spaces)."""
    return [tuple(offsets) for offsets in made_text(sentence)["tokens"]]


def gold_entities(tags):
    """The entities of `tags` as token ranges (start, end), as nertrain reads them."""
    return [(start, end) for start, end, _ in nertrain.entities(tags)]


def decided_tokens(sentence, regions):
    """What an annotator decides of `sentence` when asked to decide `regions` (code points of
    its text): the tokens they touch, widened to the gold entities those touch. Each token's
    offsets, its gold tag, and whether it is decided."""
    offsets = token_offsets(sentence)
    tags = [line.split()[-1] for line in sentence]
    decided = [any(s < ce and cs < e for cs, ce in regions) for s, e in offsets]
    for start, end in gold_entities(tags):
        if any(decided[start:end]):
            decided[start:end] = [True] * (end - start)
    return offsets, tags, decided


def revealed(sentence, regions, entities, self_train):
    """`sentence` as an annotator leaves it who decides only `regions` (code points of its
    text): the tokens they touch, widened to the gold entities those touch, keep their gold
    tags; outside them the model's `entities` stay as it pre-annotated them (IOB2; unknown
    where an entity does not fall on token edges) and the rest is unknown (`-`) or, with
    `self_train`, `O` as the model has it. The lines, and the tokens decided."""
    offsets, tags, decided = decided_tokens(sentence, regions)
    edges = {s for s, _ in offsets}, {e for _, e in offsets}
    aligned, unaligned = [], []
    for start, end, label in entities:
        inside = [i for i, (s, e) in enumerate(offsets) if s >= start and e <= end]
        if not inside or start not in edges[0] or end not in edges[1]:
            unaligned.append((start, end))
        else:
            aligned.append((inside[0], inside[-1] + 1, label))
    guessed = nertrain.tags(len(sentence), aligned)
    for start, end in unaligned:
        for i, (s, e) in enumerate(offsets):
            if s < end and start < e:
                guessed[i] = "-"
    lines = []
    for line, tag, decide, guess in zip(sentence, tags, decided, guessed):
        # The model's entities outside the regions stay as pre-annotated (the annotator
        # submits them with the task); its O there is unknown, unless it is trusted too.
        keep = tag if decide else (guess if self_train or guess[:2] in ("B-", "I-") else "-")
        lines.append(" ".join(line.split()[:-1] + [keep]))
    return lines, sum(decided)


def labels_region(text, start, end, name, label):
    """A Label Studio region of control `name` over text[start:end], as nertrain makes it."""
    return nertrain.label_studio_region(text, start, end, label, from_name=name)


def submitted(sentence, checks, entities):
    """What an annotator submits in Label Studio for `sentence` when asked to decide `checks`
    (regions, code points of its text; None for all of it) on a task pre-annotated with the
    model's `entities` (start, end, label): the tokens the regions touch, widened to the gold
    entities those touch, with their gold entities; the model's entities elsewhere; and the
    tokens decided as `check` regions. The result, and the tokens decided."""
    text = text_of(sentence)
    offsets, tags, decided = decided_tokens(sentence, checks or [])
    gold = gold_entities(tags)
    if checks is None:
        return [labels_region(text, offsets[s][0], offsets[e - 1][1], "label", tags[s][2:])
                for s, e in gold], len(sentence)
    result = [labels_region(text, offsets[s][0], offsets[e - 1][1], "label", tags[s][2:])
              for s, e in gold if decided[s]]
    for s, e, label in entities:
        if not any(decided[i] for i, (a, b) in enumerate(offsets) if a < e and s < b):
            result.append(labels_region(text, s, e, "label", label))
    t = 0
    while t < len(decided):
        if decided[t]:
            end = t
            while end < len(decided) and decided[end]:
                end += 1
            result.append(labels_region(text, offsets[t][0], offsets[end - 1][1], "check", "check"))
            t = end
        else:
            t += 1
    return result, sum(decided)


def interpolate(points, x):
    """The curve through `points` ((x, y), x ascending) at `x`; None outside it."""
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1
    return None


def summarize(results, full, total_tokens, _options=None):
    """Per strategy and round: mean ± std test F1 and token share; the goals' figures. `full`
    maps each seed to its full-data test F1."""
    full_f1 = mean_std(list(full.values())) if full else (float("nan"), 0.0)
    table = {}
    for r in results:
        key = (r["strategy"], r["round"])
        table.setdefault(key, []).append(r)
    curves = {}
    rows = []
    first_seen = {}
    for r in results:
        first_seen.setdefault(r["strategy"], len(first_seen))
    for (strategy, rnd), runs in sorted(table.items(), key=lambda kv: (first_seen[kv[0][0]], kv[0][1])):
        f1 = mean_std([r["test_f1"] for r in runs])
        share = statistics.mean(r["tokens"] for r in runs) / total_tokens
        curves.setdefault(strategy, []).append((share, f1[0]))
        rows.append({
            "strategy": strategy, "round": rnd,
            "sentences": statistics.mean(r["sentences"] for r in runs),
            "token_share": share, "test_f1": f1[0], "test_f1_std": f1[1],
            "dev_f1": statistics.mean(r["dev_f1"] for r in runs),
            "seeds": len(runs), "seconds": statistics.mean(r["seconds"] for r in runs),
            "select_seconds": statistics.mean(r.get("select_seconds", 0.0) for r in runs),
        })
    target = 0.99 * full_f1[0]
    goals = {"full_test_f1": full_f1[0], "full_test_f1_std": full_f1[1], "target_99": target}
    by_seed = {}
    for r in results:
        by_seed.setdefault((r["strategy"], r["seed"]), []).append(r)
    for strategy, points in curves.items():
        reached = [share for share, f1 in points if f1 >= target]
        runs = [rs for (name, _), rs in by_seed.items() if name == strategy]
        # Per seed: the first round at 99% of that seed's own full-data F1.
        per_seed = {}
        for (name, seed), rs in by_seed.items():
            if name == strategy and seed in full:
                hits = [r["tokens"] / total_tokens for r in sorted(rs, key=lambda r: r["round"])
                        if r["test_f1"] >= 0.99 * full[seed]]
                per_seed[seed] = hits[0] if hits else None
        goals[strategy] = {
            "share_at_99": min(reached) if reached else None,
            "share_at_99_per_seed": per_seed,
            "last_share": points[-1][0],
            # The whole loop's seconds (training and choosing), mean over seeds.
            "loop_seconds": statistics.mean(
                sum(r["seconds"] + r.get("select_seconds", 0.0) for r in rs) for rs in runs
            ),
        }
        third = [p for p in points][3] if len(points) > 3 else None
        if third and strategy != "random" and "random" in curves:
            # Per seed, against random's curve of the same seed at the same tokens.
            gains = []
            for seed in sorted({r["seed"] for r in results if r["strategy"] == strategy}):
                mine = sorted(by_seed.get((strategy, seed), []), key=lambda r: r["round"])
                theirs = sorted(by_seed.get(("random", seed), []), key=lambda r: r["round"])
                if len(mine) > 3 and theirs:
                    curve = [(r["tokens"], r["test_f1"]) for r in theirs]
                    at = interpolate(curve, mine[3]["tokens"])
                    if at is not None:
                        gains.append(mine[3]["test_f1"] - at)
            goals[strategy]["third_round_share"] = third[0]
            goals[strategy]["above_random_at_equal_tokens"] = mean_std(gains)[0] if gains else None
            goals[strategy]["above_random_std"] = mean_std(gains)[1] if gains else None
            goals[strategy]["above_random_per_seed"] = gains
    return rows, curves, goals


def tick_step(span, ticks=5):
    """The round step (1, 2, 2.5 or 5 times a power of ten) giving about `ticks` steps over `span`."""
    magnitude = 10 ** math.floor(math.log10(span / ticks))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude * ticks >= span)


def svg(curves, goals, path):
    """Test F1 against the share of training tokens labelled, one line per strategy."""
    width, height, left, bottom, top, right = 640, 400, 60, 50, 20, 150
    xs = [x for points in curves.values() for x, _ in points] + [0.0]
    ys = [y for points in curves.values() for _, y in points] + [goals["target_99"]]
    x_max, y_min, y_max = max(xs) * 1.05, min(ys) - 1, max(ys + [goals["full_test_f1"]]) + 1
    px = lambda x: left + (width - left - right) * x / x_max
    py = lambda y: top + (height - top - bottom) * (y_max - y) / (y_max - y_min)
    palette = ["#777777", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
               "#e377c2", "#17becf", "#bcbd22"]
    colours = dict(zip(curves, palette))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>',
        f'<text x="{(left + width - right) / 2}" y="{height - 12}" text-anchor="middle">'
        "training tokens decided (share of the training file)</text>",
        f'<text x="14" y="{(top + height - bottom) / 2}" transform="rotate(-90 14 {(top + height - bottom) / 2})" '
        'text-anchor="middle">test F1</text>',
    ]
    # Round shares on the x axis, each label where its value lies.
    step = tick_step(x_max)
    for k in range(int(x_max / step + 1e-9) + 1):
        x = step * k
        parts.append(f'<text x="{px(x)}" y="{height - bottom + 16}" text-anchor="middle">{100 * x:g}%</text>')
    for k in range(6):
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
    # The legend starts under the reference lines' labels.
    legend_top = max(top + 60, py(goals["target_99"]) + 36)
    for n, (strategy, points) in enumerate(curves.items()):
        colour = colours.get(strategy, "black")
        path_d = " ".join(f"{'M' if i == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for i, (x, y) in enumerate(points))
        parts.append(f'<path d="{path_d}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in points:
            parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
        parts.append(f'<text x="{width - right + 4}" y="{legend_top + 16 * n}" fill="{colour}">{strategy}</text>')
    parts.append("</svg>\n")
    Path(path).write_text("\n".join(parts), encoding="utf-8")


def report(results, full, total_tokens, out, strategies, students=None):
    """Writes summary.json and curves.svg under `out` and prints the table and the goals (and
    --distill's students against their experiment's full-data F1)."""
    rows, curves, goals = summarize(results, full, total_tokens, None)
    summary = {"rows": rows, "goals": goals}
    if students and students["runs"]:
        summary["distilled"] = students
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if full:
        svg(curves, goals, out / "curves.svg")
    print(f"all data: test F1 {goals['full_test_f1']:.2f} ± {goals['full_test_f1_std']:.2f}; "
          f"99%: {goals['target_99']:.2f}")
    print("| strategy | round | sentences | tokens decided | test F1 |")
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['strategy']} | {row['round']} | {row['sentences']:.0f} | "
              f"{100 * row['token_share']:.1f}% | {row['test_f1']:.2f} ± {row['test_f1_std']:.2f} |")
    # Each strategy's test F1 at the same shares of tokens decided: each seed's curve read there
    # (between its rounds), then mean ± std over the seeds whose curve reaches it.
    shares = [0.05, 0.075, 0.10, 0.15, 0.20, 0.25, 0.30]
    print("| strategy | " + " | ".join(f"{100 * x:g}%" for x in shares) + " |")
    print("|---|" + "---:|" * len(shares))
    for strategy in strategies:
        cells = []
        for x in shares:
            values = []
            for seed in sorted({r["seed"] for r in results if r["strategy"] == strategy}):
                curve = sorted((r["tokens"] / total_tokens, r["test_f1"]) for r in results
                               if r["strategy"] == strategy and r["seed"] == seed)
                at = interpolate(curve, x)
                if at is not None:
                    values.append(at)
            if values:
                mean, std = mean_std(values)
                cells.append(f"{mean:.2f} ± {std:.2f}" + ("" if len(values) == 3 else f" ({len(values)})"))
            else:
                cells.append("")
        print(f"| {strategy} | " + " | ".join(cells) + " |")
    for strategy in strategies:
        g = goals.get(strategy, {})
        share = g.get("share_at_99")
        above = g.get("above_random_at_equal_tokens")
        seeds = g.get("share_at_99_per_seed", {})
        per_seed = ", ".join("-" if v is None else f"{100 * v:.1f}%" for _, v in sorted(seeds.items()))
        print(f"{strategy}: 99% of all-data F1 at "
              f"{'not reached' if share is None else f'{100 * share:.1f}% of the tokens'}"
              + (f" (per seed: {per_seed})" if seeds else "")
              + f" (last round {100 * g.get('last_share', 0):.1f}%)"
              + ("" if above is None else
                 f"; third round {above:+.2f} ± {g['above_random_std']:.2f} F1 over random at equal tokens")
              + f"; loop {g.get('loop_seconds', 0):.0f} s")
    for student in (students or {}).get("runs", []):
        whole = students["full"].get(student["seed"])
        print(f"{student['strategy']} seed {student['seed']}: distilled into {student['student']} "
              f"at {100 * student['tokens'] / total_tokens:.1f}% decided: test F1 {student['test_f1']:.2f}"
              + ("" if whole is None else f" ({100 * student['test_f1'] / whole:.1f}% of its full-data {whole:.2f})"))


def parse_options():
    """The command line, checked, with --quick's settings applied."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the shipped sample, tiny rounds")
    parser.add_argument("--config", default="configs/conll-adam.toml")
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/conll2003"),
                        help="the corpus directory (train.txt, valid.txt, test.txt)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--strategies", nargs="+", default=STRATEGIES[:5],
                        help="select's strategies, each with options after colons "
                             "(mnlp:diversity=1, mnlp:regions=0.99:self)")
    parser.add_argument("--start", type=int, default=500, help="random sentences to start from")
    parser.add_argument("--budget-unit", choices=["texts", "tokens"], default="texts",
                        help="what --step counts: sentences, or tokens to decide")
    parser.add_argument("--step", type=int, default=500, help="the budget of a round")
    parser.add_argument("--until", type=int, default=4000,
                        help="sentences at the last round (with --budget-unit texts)")
    parser.add_argument("--until-share", type=float, default=None,
                        help="stop at the round whose tokens decided reach this share of the "
                             "training file's")
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--patience", type=int, default=5)
    parser.add_argument("--max-similarity", type=float, default=0.7)
    parser.add_argument("--served-order", action="store_true",
                        help="train as serve's versions do: the sentences chosen as Label Studio "
                             "tasks in the corpus's order, then the starting ones rehearsed")
    parser.add_argument("--judge", action="store_true",
                        help="keep a round's model only when its dev F1 is not below the kept "
                             "one's (as serve --dev does); otherwise go on from the kept one")
    parser.add_argument("--set", action="append", default=[], help="more fit overrides")
    parser.add_argument("--encoder-cache", metavar="DIR", default=None,
                        help="keep a frozen encoder's layers here between rounds "
                             "(fit and select --encoder-cache)")
    parser.add_argument("--out", default="runs/active-learning")
    parser.add_argument("--binary", default=None)
    parser.add_argument("--continue", dest="continue_", action="store_true",
                        help="each round continues the last round's model (fit --start-from) "
                             "instead of training afresh")
    parser.add_argument("--no-full", action="store_true",
                        help="skip the model on the whole training file")
    parser.add_argument("--distill", metavar="CONFIG", default=None,
                        help="after each strategy's last round, distil its model into a student "
                             "of this experiment (the rest of the pool as unlabelled text)")
    parser.add_argument("--summarize", nargs="+", metavar="DIR", default=None,
                        help="only merge the results.jsonl and full.jsonl of these --out "
                             "directories into --out")
    options = parser.parse_args()
    if options.served_order and not options.continue_:
        parser.error("--served-order: a version continues the served model; add --continue")
    if options.distill and (options.served_order or options.judge):
        parser.error("--distill: the student learns from a CoNLL round file; drop --served-order and --judge")
    for spec in options.strategies:
        try:
            parse_strategy(spec)
        except argparse.ArgumentTypeError as error:
            parser.error(f"--strategies: {error}")
    if options.quick:
        options.config, options.data = "configs/sample.toml", str(ROOT / "data/sample")
        options.seeds, options.strategies = options.seeds[:1], options.strategies[:2]
        if options.strategies == STRATEGIES[:2]:
            options.strategies = ["random", "margin"]
        options.start, options.epochs = 60, 3
        options.step, options.until = (60, 180) if options.budget_unit == "texts" else (600, 10**9)
        if options.budget_unit == "tokens" and options.until_share is None:
            options.until_share = 0.6
    return options


def merge_results(options, total_tokens, out):
    """Merges the results of the --summarize directories into --out, and reports them."""
    results, full = [], {}
    for directory in options.summarize:
        directory = Path(directory)
        results += [json.loads(l) for l in (directory / "results.jsonl").read_text().splitlines() if l]
        if (directory / "full.jsonl").exists():
            for line in (directory / "full.jsonl").read_text().splitlines():
                if line:
                    record = json.loads(line)
                    full[record["seed"]] = record["test_f1"]
    strategies = list(dict.fromkeys(r["strategy"] for r in results))
    with open(out / "results.jsonl", "w") as log:
        log.writelines(json.dumps(r) + "\n" for r in results)
    report(results, full, total_tokens, out, strategies)


def fit_full(options, train, work, seed, full_log):
    """The model on the whole training file: its test F1, logged."""
    write_blocks(work / "all.txt", train)
    _, full_f1, seconds = fit(options, work / "all.txt", work / "full", seed)
    full_log.write(json.dumps({"seed": seed, "test_f1": full_f1, "seconds": round(seconds, 2)}) + "\n")
    full_log.flush()
    print(f"seed {seed}: all {len(train)} sentences: test F1 {full_f1:.2f} ({seconds:.0f} s)", file=sys.stderr)
    return full_f1


def fit_full_student(options, train, work, seed, log):
    """--distill's experiment on the whole training file: its test F1, logged."""
    write_blocks(work / "all.txt", train)
    _, f1, seconds = fit(options, work / "all.txt", work / "full-student", seed, student=[])
    record = {"seed": seed, "student": options.distill, "whole_file": True, "test_f1": f1}
    log.write(json.dumps({**record, "seconds": round(seconds, 2)}) + "\n")
    log.flush()
    return f1


def distil(options, train, work, seed, spec, teacher, trained_on, log):
    """--distill's student of `teacher` (the loop's last model): the round's training file
    `trained_on` (its path, the sentences in it, the tokens decided) labelled, the rest of the
    pool unlabelled."""
    name = teacher.name
    subset, sentences, decided = trained_on
    pool = work / f"{name}-unlabelled.txt"
    # The unlabelled pool keeps the corpus's columns, each tag `-`.
    write_blocks(pool, [[" ".join(line.split()[:-1] + ["-"]) for line in train[i]]
                        for i in range(len(train)) if i not in sentences])
    settings = [
        f"distill.teachers={json.dumps([str(teacher)])}",
        f"distill.unlabelled={json.dumps([str(pool)])}",
    ]
    dev_f1, test_f1, seconds = fit(options, subset, work / f"{name}-student", seed, student=settings)
    record = {
        "seed": seed, "strategy": spec, "student": options.distill, "teacher": str(teacher),
        "sentences": len(sentences), "tokens": decided, "unlabelled": len(train) - len(sentences),
        "dev_f1": dev_f1, "test_f1": test_f1, "seconds": round(seconds, 2),
    }
    log.write(json.dumps(record) + "\n")
    log.flush()
    print(json.dumps(record), file=sys.stderr)
    return record


def write_round(options, work, name, rnd, labelled, initial):
    """The file a round trains on (and the one it rehearses, in served order)."""
    subset = work / f"{name}-{rnd}.txt"
    rehearse = None
    if options.served_order and rnd > 0:
        # The sentences chosen, each as Label Studio exports its task.
        subset, rehearse = subset.with_suffix(".json"), work / f"{name}-0.txt"
        tasks = [labelled[i] for i in sorted(set(labelled) - set(initial))]
        subset.write_text(json.dumps(tasks), encoding="utf-8")
    elif options.served_order:
        write_blocks(subset, [labelled[i] for i in sorted(labelled)])
    else:
        write_blocks(subset, list(labelled.values()))
    return subset, rehearse


def label_chosen(options, train, rest, chosen, labelled, extra):
    """Labels what select chose, as the annotator leaves it; returns the tokens decided."""
    decided = 0
    for j, regions, entities in chosen:
        i = rest[j]
        if options.served_order:
            result, count = submitted(train[i], regions, entities)
            data = {"text": text_of(train[i])}
            if regions is not None:
                data["known"] = []
            labelled[i] = {"id": i + 1, "data": data, "annotations": [{"result": result}]}
        elif regions is None:
            labelled[i], count = train[i], len(train[i])
        else:
            labelled[i], count = revealed(train[i], regions, entities, "self" in extra)
        decided += count
    return decided


def run_strategy(options, train, work, seed, spec, initial, total_tokens, log, results):
    """One strategy's rounds from the starting sentences, each round's record logged; the last
    round's training file, the sentences in it, and the tokens decided in them."""
    _, extra = parse_strategy(spec)
    name = spec.replace(":", "_").replace("=", "")
    # Each sentence examined, as the annotator left it; and the tokens decided.
    labelled = {i: train[i] for i in initial}
    decided = sum(len(train[i]) for i in initial)
    select_seconds = 0.0
    # The model kept (with --judge, the last one its dev F1 did not judge worse):
    # its directory, dev F1 and test F1.
    kept = None
    for rnd in range(10**6):
        model = work / f"{name}-{rnd}"
        previous = kept[0] if options.continue_ and kept is not None else None
        subset, rehearse = write_round(options, work, name, rnd, labelled, initial)
        dev_f1, test_f1, seconds = fit(options, subset, model, seed, previous, rehearse)
        served = not options.judge or kept is None or dev_f1 >= kept[1]
        if served:
            kept = (model, dev_f1, test_f1)
            trained_on = (subset, set(labelled), decided)
        record = {
            "seed": seed, "strategy": spec, "round": rnd,
            "sentences": len(labelled), "tokens": decided,
            "dev_f1": kept[1], "test_f1": kept[2], "seconds": round(seconds, 2),
            "select_seconds": round(select_seconds, 2),
        }
        if options.judge:
            record.update(served=served, trained_dev_f1=dev_f1)
        results.append(record)
        log.write(json.dumps(record) + "\n")
        log.flush()
        print(json.dumps(record), file=sys.stderr)
        rest = [i for i in range(len(train)) if i not in labelled]
        if options.until_share is not None:
            if decided >= options.until_share * total_tokens:
                break
        elif len(labelled) >= options.until:
            break
        if not rest:
            break
        started = time.perf_counter()
        chosen = select(options, kept[0], [text_of(train[i]) for i in rest], spec, seed, work)
        select_seconds = time.perf_counter() - started
        before = decided
        decided += label_chosen(options, train, rest, chosen, labelled, extra)
        # With regions, what the model is sure of is never chosen: once a round
        # finds less than a tenth of its budget to decide, the rest is left to it.
        if decided - before < max(1, options.step // 10 if options.budget_unit == "tokens" else 1):
            print(f"{spec}: round {rnd + 1} would decide {decided - before} tokens; "
                  "the model is sure of the rest", file=sys.stderr)
            break
    return kept[0], trained_on


def main():
    options = parse_options()
    data = with_corpus(options)
    train = read_blocks(data / "train.txt")
    total_tokens = sum(len(s) for s in train)
    out = Path(options.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    if options.summarize:
        merge_results(options, total_tokens, out)
        return
    results, full = [], {}
    students = {"runs": [], "full": {}}
    with open(out / "results.jsonl", "w") as log, open(out / "full.jsonl", "w") as full_log, \
            open(out / "distilled.jsonl", "w") as student_log:
        for seed in options.seeds:
            work = out / "runs" / f"seed{seed}"
            work.mkdir(exist_ok=True)
            if not options.no_full:
                full[seed] = fit_full(options, train, work, seed, full_log)
                if options.distill:
                    students["full"][seed] = fit_full_student(options, train, work, seed, student_log)
            order = list(range(len(train)))
            random.Random(seed).shuffle(order)
            initial = order[: options.start]
            for spec in options.strategies:
                last = run_strategy(options, train, work, seed, spec, initial, total_tokens, log, results)
                if options.distill:
                    students["runs"].append(distil(options, train, work, seed, spec, *last, student_log))
    report(results, full, total_tokens, out, options.strategies, students)


if __name__ == "__main__":
    main()
