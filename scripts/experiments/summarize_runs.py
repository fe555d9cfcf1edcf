#!/usr/bin/env python3
"""Summarise finished `nertrain fit` runs as a Markdown table, one row per run directory.

    scripts/experiments/summarize_runs.py runs/conll runs/conll-charlstm ... > docs/results/table.md

Per run: the model's character features, the settings that differ from `configs/conll.toml`'s
(the levers: scheme, casing, normalisation, optimiser, batch size), the best dev epoch, dev F1 there,
test F1 there (as `fit` scored it each epoch), CoNLL++ test F1 of the saved model (when
../shared/data/conllpp/test.txt or $CONLLPP is present; runs `nertrain eval`), epochs trained,
the median training seconds per epoch and the summed training time. Everything comes from the
run's own record, read by the wheel (`nertrain.read_run`).
"""
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nerscripts import nertrain_json  # noqa: E402 (scripts/nerscripts.py)
import nertrain  # noqa: E402 (the wheel: crates/python)

NERTRAIN = os.environ.get("NERTRAIN", "target/release/nertrain")
# The levers' values in configs/conll.toml (section, key, value there).
BASELINE = [
    ("data", "train_scheme", "iob2"),
    ("data", "lowercase", False),
    ("data", "digits_to_zero", True),
    ("data", "singleton_unk", 0.5),
    ("model", "casing_dim", 0),
    ("train", "optimizer", "sgd"),
    ("train", "lr", 0.015),
    ("train", "batch_size", 10),
]
CONLLPP = os.environ.get("CONLLPP", "../shared/data/conllpp/test.txt")


def conllpp_f1(run):
    if not os.path.exists(CONLLPP):
        return None
    return nertrain_json(NERTRAIN, "eval", "--model", run, "--data", CONLLPP, "--json")["overall"]["f1"]


def as_toml(value):
    return str(value).lower() if isinstance(value, bool) else str(value)


def summarise(run):
    record = nertrain.read_run(run)
    # The resolved experiment names every setting; one left unset is None, as TOML leaves it out.
    config = {name: {k: v for k, v in section.items() if v is not None}
              for name, section in record["config"].items() if isinstance(section, dict)}
    epochs = record["metrics"]
    best = max(epochs, key=lambda e: (e["dev_f1"], -e["epoch"]))
    train_seconds = [e["train_seconds"] for e in epochs]
    pp = conllpp_f1(run)
    return {
        "run": run,
        "chars": config["model"]["char_features"]
        + (" + char LM" if config["model"].get("char_lm") else ""),
        "settings": ", ".join(
            f"{key} {as_toml(config[section].get(key, value))}"
            for section, key, value in BASELINE
            if config[section].get(key, value) != value
        ) or "–",
        "seed": config["train"]["seed"],
        "best_epoch": best["epoch"],
        "dev_f1": best["dev_f1"],
        "test_f1": best.get("test_f1"),
        "conllpp_f1": pp,
        "epochs": len(epochs),
        "median_epoch_s": statistics.median(train_seconds),
        "train_minutes": sum(train_seconds) / 60,
    }


def fmt(value, digits=2):
    return "–" if value is None else f"{value:.{digits}f}"


def main(runs):
    print("| run | char features | other settings | seed | best epoch | dev F1 | test F1 | CoNLL++ F1 "
          "| epochs | s/epoch (median) | training min |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        s = summarise(run)
        print(f"| `{s['run']}` | {s['chars']} | {s['settings']} | {s['seed']} | {s['best_epoch']} "
              f"| {fmt(s['dev_f1'])} | {fmt(s['test_f1'])} | {fmt(s['conllpp_f1'])} | {s['epochs']} "
              f"| {fmt(s['median_epoch_s'], 1)} | {fmt(s['train_minutes'], 1)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
