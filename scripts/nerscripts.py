"""What the Python scripts share that the Rust does not own: a CoNLL file's token lines as written
(to cut and rewrite files), mean ± std over seeds, and a `nertrain` command's JSON answer.
Reading CoNLL sentences and tags, their entities, a sentence as text with character offsets and
scoring entity sets are the wheel's (`import nertrain`: `read_conll`, `entities`,
`sentence_text`, `score_entities`).

A script in a family folder (scripts/experiments/, scripts/data/, ...) imports it with
`sys.path.insert(0, str(Path(__file__).resolve().parents[1]))`.
"""
import json
import statistics
import subprocess
from pathlib import Path


def read_blocks(path):
    """A CoNLL file's sentences, each a list of its token lines as written (documents' marks
    dropped)."""
    return [sentence for document in read_documents(path) for sentence in document]


def read_documents(path):
    """A CoNLL file's documents (its `-DOCSTART-` blocks; one for a file without them), each a
    list of its sentences' token lines as written."""
    documents, sentence = [[]], []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("-DOCSTART-"):
            if sentence:
                documents[-1].append(sentence)
                sentence = []
            if line.startswith("-DOCSTART-") and documents[-1]:
                documents.append([])
            continue
        sentence.append(line)
    if sentence:
        documents[-1].append(sentence)
    return [d for d in documents if d]


def write_blocks(path, sentences):
    """Writes sentences of token lines as a CoNLL file."""
    Path(path).write_text("".join("\n".join(s) + "\n\n" for s in sentences), encoding="utf-8")


def nertrain_json(binary, *args):
    """The JSON that `BINARY ARGS` prints (ARGS asks for it: `--json`); on failure the script
    ends with nertrain's own message."""
    done = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"nertrain {' '.join(map(str, args))}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def mean_std(values):
    """Mean and sample standard deviation (0 for one value)."""
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def format_mean_std(values):
    """`mean ± std` to two places, the value alone for one, `-` for none (Nones left out)."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    mean, std = mean_std(values)
    return f"{mean:.2f} ± {std:.2f}"
