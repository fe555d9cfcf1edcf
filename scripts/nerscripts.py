"""What the Python scripts share: reading CoNLL files, conlleval's chunks, F1 of entity sets,
and mean ± std over seeds.

A script in a family folder (scripts/experiments/, scripts/data/, ...) imports it with
`sys.path.insert(0, str(Path(__file__).resolve().parents[1]))`.
"""
import statistics
from pathlib import Path


def read_blocks(path):
    """A CoNLL file's sentences, each a list of its token lines as written (documents' marks
    dropped)."""
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


def write_blocks(path, sentences):
    """Writes sentences of token lines as a CoNLL file."""
    Path(path).write_text("".join("\n".join(s) + "\n\n" for s in sentences), encoding="utf-8")


def read_documents(path, tag_column=-1):
    """Documents of sentences of (word, tag), -DOCSTART- lines starting documents."""
    documents, sentence = [[]], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if not fields:
                if sentence:
                    documents[-1].append(sentence)
                sentence = []
                continue
            if fields[0] == "-DOCSTART-":
                if sentence:
                    documents[-1].append(sentence)
                    sentence = []
                if documents[-1]:
                    documents.append([])
                continue
            sentence.append((fields[0], fields[tag_column]))
    if sentence:
        documents[-1].append(sentence)
    return [d for d in documents if d]


def read_sentences(path, tag_column=-1):
    """Sentences as (words, tags), documents' marks dropped."""
    return [
        ([w for w, _ in sentence], [t for _, t in sentence])
        for document in read_documents(path, tag_column)
        for sentence in document
    ]


def chunks(tags):
    """conlleval's chunks of IOB1/IOB2/IOBES tags: (start, end, label) over token indices."""
    spans, start, label, previous = [], None, None, ("O", "")
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, kind = (tag.split("-", 1) + [""])[:2] if tag != "O" else ("O", "")
        p_prefix, p_kind = previous
        ends = (
            p_prefix in ("B", "I", "E", "S")
            and (
                prefix in ("O", "B", "S")
                or p_prefix in ("E", "S")
                or kind != p_kind
            )
        )
        if ends and start is not None:
            spans.append((start, i, label))
            start = None
        begins = prefix in ("B", "S") or (
            prefix in ("I", "E") and (p_prefix in ("O", "E", "S") or kind != p_kind)
        )
        if i < len(tags) and begins:
            start, label = i, kind
        previous = (prefix, kind)
    return spans


def f1(gold, predicted):
    """F1 (percent) of a set of predicted entities against the gold set."""
    correct = len(gold & predicted)
    p = correct / len(predicted) if predicted else 0.0
    r = correct / len(gold) if gold else 0.0
    return 100 * (2 * p * r / (p + r) if p + r else 0.0)


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
