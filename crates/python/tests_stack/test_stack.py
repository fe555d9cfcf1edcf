"""nertrain in the user's stack, on the installed wheel, against spaCy, displaCy, Presidio and
huggingface_hub from PyPI (scripts/requirements-stack.txt): the spaCy component gives the CLI's
entities, `nertrain card`'s metadata reads back as Hugging Face reads it, and docs/python.md's
Presidio example runs.

NERTRAIN_BIN names the binary (by default target/release/nertrain under CARGO_TARGET_DIR or the
workspace). CoNLL-2003 dev text is read from ../shared/data when it is there.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy import displacy
from spacy.tokens import Doc

import nertrain

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "data" / "sample"
CONLL_DEV = ROOT.parent / "shared" / "data" / "conll2003" / "valid.txt"
TEXTS = [
    json.loads(line)["text"]
    for line in (SAMPLE / "rawtext.jsonl").read_text(encoding="utf-8").splitlines()
] + ["", "Anna Schmidt (Siemens) flew to Lisbon on Monday.", "Zoë  met  Łukasz in Kraków 🙂."]


def binary() -> str:
    if "NERTRAIN_BIN" in os.environ:
        return os.environ["NERTRAIN_BIN"]
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return str(target / "release" / "nertrain")


def cli(*args: str) -> str:
    return subprocess.run(
        [binary(), *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture(scope="session")
def model(tmp_path_factory):
    """The sample model, with its dev and test scores."""
    return nertrain.fit(
        ROOT / "configs" / "sample.toml",
        {"train.output": str(tmp_path_factory.mktemp("fit") / "run"), "train.epochs": 3},
    )


def cli_entities(model, texts, tmp_path, *extra):
    """`nertrain tag --input`'s entities for each text, one text a line."""
    lines = tmp_path / "texts.txt"
    lines.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    out = cli("tag", "--model", str(model), "--format", "json", "--input", str(lines), *extra)
    return [json.loads(line)["entities"] for line in out.splitlines()]


def conll_dev_texts(limit):
    """CoNLL-2003 dev's first `limit` sentences, each as nertrain makes text of it."""
    sentences = [s for document in nertrain.read_conll(CONLL_DEV) for s in document][:limit]
    return [nertrain.sentence_text(s["words"], s["tags"])["text"] for s in sentences]


def compare(docs, expected):
    """Each doc's spans against the CLI's entities: each entity a span of the same characters,
    label and confidence, or listed in the doc's misaligned entities with what was done to it
    (its span moved to spaCy's tokens, or dropped). The count of those listed."""
    explained = 0
    for doc, entities in zip(docs, expected):
        spans = [
            {"label": e.label_, "start": e.start_char, "end": e.end_char, "text": e.text,
             "confidence": e._.confidence}
            for e in doc.ents
        ]
        misaligned = {(m["start"], m["end"]): m for m in doc._.nertrain_misaligned}
        wanted = []
        for entity in entities:
            moved = misaligned.pop((entity["start"], entity["end"]), None)
            if moved is None:
                wanted.append(entity)
                continue
            explained += 1
            assert moved["label"] == entity["label"] and moved["action"] in (
                "expanded", "contracted", "dropped")
            if moved["span"] is not None:
                start, end = moved["span"]["start"], moved["span"]["end"]
                wanted.append({**entity, "start": start, "end": end, "text": doc.text[start:end]})
        assert not misaligned, "every misaligned entity is one of the CLI's"
        assert spans == wanted, doc.text
    return explained


def test_the_pipeline_gives_the_cli_entities(model, tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("nertrain", config={"model": str(model), "batch_size": 1000})
    docs = list(nlp.pipe(TEXTS))
    expected = cli_entities(model, TEXTS, tmp_path)
    assert sum(len(e) for e in expected) > 20
    assert compare(docs, expected) == 0, "spaCy's English tokens hold every sample entity"


@pytest.mark.skipif(not CONLL_DEV.exists(), reason="CoNLL-2003 is not at ../shared/data")
def test_the_pipeline_gives_the_cli_entities_on_conll_dev(model, tmp_path):
    texts = conll_dev_texts(1000)
    nlp = spacy.blank("en")
    nlp.add_pipe("nertrain", config={"model": str(model), "batch_size": 1000})
    expected = cli_entities(model, texts, tmp_path)
    explained = compare(list(nlp.pipe(texts)), expected)
    found = sum(len(e) for e in expected)
    print(f"CoNLL dev, {len(texts)} sentences: {found} entities, {explained} misaligned")
    assert found > 500 and explained <= found // 50


def test_a_model_with_a_pretrained_encoder_gives_the_cli_entities(tmp_path):
    # The tiny random BERT of data/encoders, frozen under the BiLSTM-CRF.
    model = nertrain.fit(
        ROOT / "configs" / "sample-encoder.toml",
        {"train.output": str(tmp_path / "run"), "train.epochs": 1},
    )
    nlp = spacy.blank("en")
    nlp.add_pipe("nertrain", config={"model": str(model), "batch_size": 1000})
    expected = cli_entities(model, TEXTS, tmp_path)
    assert compare(list(nlp.pipe(TEXTS)), expected) == 0
    assert sum(len(e) for e in expected) > 0


def test_several_processes_give_the_same_docs(model):
    nlp = spacy.blank("en")
    nlp.add_pipe("nertrain", config={"model": str(model), "threads": 1})
    seen = lambda docs: [[(e.start_char, e.end_char, e.label_, e._.confidence) for e in d.ents]
                         for d in docs]
    one = seen(nlp.pipe(TEXTS))
    two = seen(nlp.pipe(TEXTS, n_process=2, batch_size=8))
    # The same entities; confidences may differ in their last digits, as the word cache of
    # each process fills in another order.
    assert [[e[:3] for e in d] for d in two] == [[e[:3] for e in d] for d in one]
    flat = lambda docs: [e[3] for d in docs for e in d]
    assert flat(two) == pytest.approx(flat(one))
    assert sum(map(len, one)) > 20


def test_the_factory_needs_no_import(model):
    # A fresh interpreter: spaCy finds the component through the wheel's entry point.
    code = (
        "import spacy, sys; assert 'nertrain' not in sys.modules; nlp = spacy.blank('en'); "
        f"nlp.add_pipe('nertrain', config={{'model': {str(model)!r}}}); "
        "print([(e.text, e.label_) for e in nlp('Peter Weber lives in Berlin.').ents])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Berlin" in done.stdout, done.stdout + done.stderr


def test_the_pipeline_round_trips_through_disk_wherever_it_goes(model, tmp_path):
    moved_model = tmp_path / "model-elsewhere"
    shutil.copytree(model, moved_model)
    nlp = spacy.blank("en")
    nlp.add_pipe("nertrain", config={"model": str(moved_model)})
    before = [[(e.start_char, e.end_char, e.label_, e._.confidence) for e in d.ents]
              for d in nlp.pipe(TEXTS)]
    nlp.to_disk(tmp_path / "pipeline")
    # The pipeline carries its model: the directory it was made from can go.
    shutil.rmtree(moved_model)
    loaded = spacy.load(tmp_path / "pipeline")
    after = [[(e.start_char, e.end_char, e.label_, e._.confidence) for e in d.ents]
             for d in loaded.pipe(TEXTS)]
    assert after == before
    assert sum(len(d) for d in before) > 20
    # Saved again, from where it was loaded, it is the same model.
    loaded.to_disk(tmp_path / "again")
    assert (tmp_path / "again" / "nertrain" / "model" / "model.bpk").read_bytes() == (
        tmp_path / "pipeline" / "nertrain" / "model" / "model.bpk").read_bytes()


def test_a_pipeline_saves_the_weights_it_uses_or_nothing(model, tmp_path):
    moved_model = tmp_path / "model-rewritten"
    shutil.copytree(model, moved_model)
    nlp = spacy.blank("en")
    nlp.add_pipe("nertrain", config={"model": str(moved_model)})
    nlp("Peter Weber lives in Berlin.")
    # The run is written again under the pipeline in use: other weights.
    weights = moved_model / "model.bpk"
    weights.write_bytes(weights.read_bytes()[::-1])
    with pytest.raises(Exception, match="written again since the model in use was loaded"):
        nlp.to_disk(tmp_path / "pipeline")
    assert not (tmp_path / "pipeline" / "nertrain" / "model" / "model.bpk").exists()


def test_a_missing_model_is_named_at_the_first_doc(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("nertrain", config={"model": str(tmp_path / "nowhere")})
    with pytest.raises(FileNotFoundError, match="nowhere"):
        nlp("Peter lives in Berlin.")
    with pytest.raises(ValueError, match="alignment"):
        spacy.blank("en").add_pipe("nertrain", config={"model": None, "alignment": "shift"})


def whitespace_nlp(model, **config):
    """A pipeline whose tokens are the text's space-separated pieces: `Berlin.` is one token."""
    nlp = spacy.blank("en")
    nlp.tokenizer = lambda text: Doc(nlp.vocab, words=text.split(" "))
    nlp.add_pipe("nertrain", config={"model": str(model), **config})
    return nlp


def test_entities_between_tokens_are_expanded_contracted_or_dropped_as_asked(model):
    text = "Peter Weber flew to Berlin."
    tagged = nertrain.Tagger(model).tag([text])[0]["entities"]
    berlin = [e for e in tagged if e["text"] == "Berlin"]
    assert berlin, tagged
    for alignment, action, span in [("expand", "expanded", "Berlin."),
                                    ("contract", "dropped", None),
                                    ("drop", "dropped", None)]:
        doc = whitespace_nlp(model, alignment=alignment)(text)
        (misaligned,) = doc._.nertrain_misaligned
        assert misaligned["text"] == "Berlin" and misaligned["action"] == action
        texts = [e.text for e in doc.ents]
        if span is None:
            assert misaligned["span"] is None and "Berlin" not in " ".join(texts)
        else:
            assert span in texts and misaligned["span"] == {"start": 20, "end": 27}
        # The entities on token boundaries are there whatever the mode.
        assert "Peter Weber" in texts


def test_a_span_group_leaves_the_docs_entities_alone(model):
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "CITY", "pattern": "Berlin"}])
    nlp.add_pipe("nertrain", config={"model": str(model), "spans_key": "nertrain"})
    doc = nlp("Peter Weber lives in Berlin.")
    assert [(e.text, e.label_) for e in doc.ents] == [("Berlin", "CITY")]
    group = doc.spans["nertrain"]
    assert ("Berlin", "LOC") in [(s.text, s.label_) for s in group]
    assert all(0 < s._.confidence <= 1 for s in group)
    html = displacy.render(doc, style="span", options={"spans_key": "nertrain"})
    assert "Weber" in html and "LOC" in html


def test_thresholds_leave_entities_out_as_the_cli_does(model, tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("nertrain", config={"model": str(model), "thresholds": {"PER": 0.9},
                                     "batch_size": 1000})
    expected = cli_entities(model, TEXTS, tmp_path, "--threshold", "PER=0.9")
    assert compare(list(nlp.pipe(TEXTS)), expected) == 0
    every = cli_entities(model, TEXTS, tmp_path)
    assert sum(map(len, expected)) < sum(map(len, every))
    nlp = spacy.blank("en")
    nlp.add_pipe("nertrain", config={"model": str(model), "biases": {"PER": 1.5},
                                     "batch_size": 1000})
    biased = cli_entities(model, TEXTS, tmp_path, "--bias", "PER=1.5")
    assert compare(list(nlp.pipe(TEXTS)), biased) == 0
    assert biased != every


def test_displacy_renders_the_entities(model):
    nlp = spacy.blank("en")
    nlp.add_pipe("nertrain", config={"model": str(model)})
    doc = nlp("Peter Weber lives in Berlin.")
    html = displacy.render(doc, style="ent")
    for entity in doc.ents:
        assert entity.text in html and entity.label_ in html


def test_the_card_reads_back_as_hugging_face_reads_it(model):
    from huggingface_hub import ModelCard

    cli("card", "--model", str(model))
    card = ModelCard.load(model / "README.md")
    results = {(r.dataset_split, r.metric_name): r.metric_value for r in card.data.eval_results}
    for split, file in [("validation", "dev.json"), ("test", "test.json")]:
        recorded = json.loads((model / file).read_text())
        assert results[(split, "F1")] == recorded["overall"]["f1"]
        for label, scores in recorded["types"].items():
            assert results[(split, f"{label} Recall")] == scores["recall"]
            assert results[(split, f"{label} Precision")] == scores["precision"]
    assert card.data.library_name == "nertrain"


def test_the_presidio_example_finds_people(model, tmp_path):
    # docs/python.md's example: Presidio's NLP engine over a pipeline with the component.
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import NerModelConfiguration, SpacyNlpEngine

    nlp = spacy.blank("en")
    nlp.add_pipe("nertrain", config={"model": str(model)})
    nlp.to_disk(tmp_path / "pipeline")

    engine = SpacyNlpEngine(
        models=[{"lang_code": "en", "model_name": str(tmp_path / "pipeline")}],
        ner_model_configuration=NerModelConfiguration(
            model_to_presidio_entity_mapping={"PER": "PERSON", "LOC": "LOCATION",
                                              "ORG": "ORGANIZATION"},
        ),
    )
    analyzer = AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])
    text = "Peter Weber lives in Berlin."
    found = analyzer.analyze(text=text, language="en", entities=["PERSON", "LOCATION"])
    assert ("PERSON", "Peter Weber") in [(r.entity_type, text[r.start:r.end]) for r in found]
