"""A Label Studio project that labels some of a model's labels (PER alone, say), learnt from as
`serve --train-into` learns: the served model continued on the project's annotations by a fit
job, judged on held-out tasks. Runs the job twice, as the learner did before (the labels the
project lacks taught as `O`, and scored) and as it does now (left open in training where the
annotations say `O`, `data.open_labels`, and out of the judging), and prints each model's F1 on
a test file by label, beside the held-out scores each judging rule sees.

    python3 scripts/experiments/label_subset.py --nertrain target/release/nertrain \
        --model runs/sample --project-data data/sample/dev.txt --test data/sample/test.txt

Every fifth task is held out. Writes nothing outside a temporary directory.
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nerscripts import nertrain_json  # noqa: E402 (scripts/nerscripts.py)
import nertrain  # noqa: E402 (the wheel: crates/python)


def spans(words, tags, keep):
    """The text (words joined by spaces) and its entities of the labels `keep`, in characters."""
    made = nertrain.sentence_text(words, tags)
    return made["text"], [(s, e, label) for s, e, label in made["entities"] if label in keep]


def scores(binary, model, data):
    return nertrain_json(binary, "eval", "--model", model, "--data", data, "--json")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nertrain", required=True)
    parser.add_argument("--model", required=True, help="the served model, a run directory")
    parser.add_argument("--project-data", required=True, help="CoNLL sentences the project labels")
    parser.add_argument("--test", required=True, help="a CoNLL file to report F1 on")
    parser.add_argument("--labels", default="PER", help="the labels the project labels, comma-separated")
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    keep = args.labels.split(",")
    model_labels = sorted(scores(args.nertrain, args.model, args.test)["types"])
    lacking = [label for label in model_labels if label not in keep]
    work = Path(tempfile.mkdtemp(prefix="nertrain-subset-"))
    tasks, heldout = [], []
    sentences = [s for document in nertrain.read_conll(args.project_data) for s in document]
    for i, sentence in enumerate(sentences):
        words, tags = sentence["words"], sentence["tags"]
        text, found = spans(words, tags, keep)
        if i % 5 == 4:
            heldout.append({"text": text, "label": [[s, e, label] for s, e, label in found]})
            continue
        result = [nertrain.label_studio_region(text, s, e, label) for s, e, label in found]
        tasks.append({"id": i + 1, "data": {"text": text}, "annotations": [{"result": result}]})
    (work / "train.json").write_text(json.dumps(tasks), encoding="utf-8")
    (work / "heldout.jsonl").write_text("".join(json.dumps(h) + "\n" for h in heldout), encoding="utf-8")
    rows = {"served": args.model}
    for name, open_labels in (("taught as O", []), ("left open", lacking)):
        output = work / name.replace(" ", "-")
        nertrain.write_fit_job(work / f"{output.name}.job", start_from=Path(args.model).resolve(),
                               train=work / "train.json", heldout=work / "heldout.jsonl",
                               output=output, epochs=args.epochs, open_labels=open_labels,
                               events=work / f"{output.name}.events", keep_checkpoint=False)
        subprocess.run([args.nertrain, "fit", "--job", str(work / f"{output.name}.job")],
                       capture_output=True, check=True)
        rows[name] = output
    print(f"project labels {keep}; the model's others {lacking}; {len(tasks)} tasks trained on, "
          f"{len(heldout)} held out")
    print(f"{'model':<14} {'held-out F1, all':>16} {'held-out F1, project':>21} {'test F1':>8}  "
          + "  ".join(f"{label:>6}" for label in model_labels))
    for name, model in rows.items():
        held = scores(args.nertrain, model, work / "heldout.jsonl")
        counts = [held["types"].get(label, {}) for label in keep]
        gold = sum(c.get("gold", 0) for c in counts)
        found = sum(c.get("found", 0) for c in counts)
        correct = sum(c.get("correct", 0) for c in counts)
        project = 200 * correct / (gold + found) if gold + found else 0.0
        test = scores(args.nertrain, model, args.test)
        print(f"{name:<14} {held['overall']['f1']:>16.2f} {project:>21.2f} {test['overall']['f1']:>8.2f}  "
              + "  ".join(f"{test['types'].get(label, {}).get('f1', 0.0):>6.2f}" for label in model_labels))


if __name__ == "__main__":
    main()
