"""The `nertrain` module against the `nertrain` binary, run on the installed wheel.

NERTRAIN_BIN names the binary (by default target/release/nertrain under CARGO_TARGET_DIR or the
workspace). The sample model is trained once, through the module.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

import nertrain

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "data" / "sample"
TEXTS = [
    json.loads(line)["text"]
    for line in (SAMPLE / "rawtext.jsonl").read_text(encoding="utf-8").splitlines()
][:40] + ["", "Anna Schmidt (Siemens) flew to Lisbon on Monday.", "Zoë  met  Łukasz in Kraków 🙂."]


def binary() -> str:
    if "NERTRAIN_BIN" in os.environ:
        return os.environ["NERTRAIN_BIN"]
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return str(target / "release" / "nertrain")


def cli(*args: str) -> str:
    done = subprocess.run(
        [binary(), *args], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture(scope="session")
def events(tmp_path_factory):
    """The sample model, trained through the module: its run directory and every event."""
    seen = []
    run = nertrain.fit(
        ROOT / "configs" / "sample.toml",
        {"train.output": str(tmp_path_factory.mktemp("fit") / "run"), "train.epochs": 3},
        progress=seen.append,
    )
    return run, seen


@pytest.fixture(scope="session")
def model(events):
    return events[0]


@pytest.fixture(scope="session")
def tagger(model):
    return nertrain.Tagger(model)


def test_fit_reports_its_events_and_returns_the_run(events):
    run, seen = events
    assert (run / "model.json").is_file()
    names = [event["event"] for event in seen]
    assert names.count("epoch_started") == 3
    assert names.count("epoch_ended") == 3
    assert "batch" in names and "info" in names
    finished = [e for e in seen if e["event"] == "finished"]
    assert len(finished) == 1
    ended = [e["metrics"] for e in seen if e["event"] == "epoch_ended"]
    assert [m["epoch"] for m in ended] == [1, 2, 3]
    assert finished[0]["best_dev_f1"] == max(m["dev_f1"] for m in ended)
    # The module prints nothing: events are the caller's to show.


def test_tag_equals_the_cli_json(tagger, model):
    for options, kwargs in [([], {}), (["--probs", "--nbest", "3"], {"probs": True, "nbest": 3})]:
        printed = cli("tag", "--model", str(model), "--format", "json", *options, "--", *TEXTS)
        expected = [json.loads(line) for line in printed.splitlines()]
        assert tagger.tag(TEXTS, **kwargs) == expected


def test_a_model_with_a_pretrained_encoder_tags_as_the_cli_and_copies_whole(tmp_path):
    # The tiny random BERT of data/encoders, frozen under the BiLSTM-CRF.
    run = nertrain.fit(
        ROOT / "configs" / "sample-encoder.toml",
        {"train.output": str(tmp_path / "run"), "train.epochs": 1},
    )
    tagger = nertrain.Tagger(run)
    printed = cli("tag", "--model", str(run), "--format", "json", "--", *TEXTS)
    assert tagger.tag(TEXTS) == [json.loads(line) for line in printed.splitlines()]
    copy = tmp_path / "copy"
    tagger.copy_to(copy)
    assert (copy / "subwords.json").read_bytes() == (run / "subwords.json").read_bytes()
    assert nertrain.Tagger(copy).tag(TEXTS) == tagger.tag(TEXTS)
    # Its layers kept on disk (`fit --encoder-cache`), the same model.
    kept = nertrain.fit(
        ROOT / "configs" / "sample-encoder.toml",
        {"train.output": str(tmp_path / "kept"), "train.epochs": 1},
        encoder_cache=tmp_path / "layers",
    )
    assert any(path.is_file() for path in (tmp_path / "layers").rglob("*"))
    assert nertrain.Tagger(kept).tag(TEXTS) == tagger.tag(TEXTS)
    # `select` and `evaluate` read the layers through the same store, and answer as without it.
    pool = (SAMPLE / "pool.txt").read_text(encoding="utf-8").splitlines()
    chosen = nertrain.select(run, pool, 40, budget_unit="tokens", strategy="mnlp", regions="budget")
    for _ in range(2):
        assert nertrain.select(run, pool, 40, budget_unit="tokens", strategy="mnlp",
                               regions="budget", encoder_cache=tmp_path / "layers") == chosen
    scores = nertrain.evaluate(run, SAMPLE / "test.txt")
    assert nertrain.evaluate(run, SAMPLE / "test.txt", encoder_cache=tmp_path / "layers") == scores


def test_thresholds_stored_or_given_apply_as_the_cli_applies_them(tmp_path, model):
    copy = tmp_path / "model"
    nertrain.Tagger(model).copy_to(copy)
    assert sorted(p.name for p in copy.iterdir()) == sorted(
        name for name in ["model.json", "vocab.json", "model.bpk", "dev.json", "test.json"]
        if (model / name).exists()
    )
    cli("eval", "--model", str(copy), "--data", str(SAMPLE / "dev.txt"), "--thresholds",
        "--recall", "PER=50", "--store")
    stored = nertrain.Tagger(copy)
    assert set(stored.info["thresholds"]) == {"PER"}
    printed = cli("tag", "--model", str(copy), "--format", "json", "--", *TEXTS)
    assert stored.tag(TEXTS) == [json.loads(line) for line in printed.splitlines()]
    every = cli("tag", "--model", str(copy), "--format", "json", "--all-entities", "--", *TEXTS)
    every = [json.loads(line) for line in every.splitlines()]
    assert stored.tag(TEXTS, all_entities=True) == every
    assert nertrain.Tagger(copy, thresholds={}).tag(TEXTS) == every
    assert sum(len(r["entities"]) for r in stored.tag(TEXTS)) < sum(len(r["entities"]) for r in every)
    given = cli("tag", "--model", str(copy), "--format", "json", "--threshold", "LOC=0.95", "--", *TEXTS)
    assert nertrain.Tagger(copy, thresholds={"LOC": 0.95}).tag(TEXTS) == [
        json.loads(line) for line in given.splitlines()]
    biased = cli("tag", "--model", str(copy), "--format", "json", "--bias", "PER=1.5", "--", *TEXTS)
    assert nertrain.Tagger(copy, biases={"PER": 1.5}).tag(TEXTS) == [
        json.loads(line) for line in biased.splitlines()]
    assert nertrain.Tagger(copy, biases={"PER": 1.5}).info["biases"] == {"PER": 1.5}
    with pytest.raises(ValueError, match="CITY: not a label of the model"):
        nertrain.Tagger(copy, thresholds={"CITY": 0.5})
    with pytest.raises(ValueError, match="expected a number from -100 to 100"):
        nertrain.Tagger(copy, biases={"PER": 1e9})
    # A copy of a model with thresholds carries them; one without loses any stale ones there.
    nertrain.Tagger(model).copy_to(copy)
    assert "thresholds" not in nertrain.Tagger(copy).info


def test_entity_offsets_slice_the_python_string(tagger):
    for text, record in zip(TEXTS, tagger.tag(TEXTS)):
        assert record["text"] == text
        for entity in record["entities"]:
            assert text[entity["start"] : entity["end"]] == entity["text"]
            assert entity["label"] in tagger.labels


def test_evaluate_equals_eval_json(model):
    for data in [SAMPLE / "test.txt", SAMPLE / "rawtext.jsonl"]:
        printed = cli("eval", "--model", str(model), "--data", str(data), "--json")
        assert nertrain.evaluate(model, data) == json.loads(printed)


def test_info_equals_the_servers_model_answer(tagger, model):
    server = subprocess.Popen(
        [binary(), "serve", "--model", str(model), "--addr", "127.0.0.1:0"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        address = re.search(r"http://(\S+)", server.stderr.readline()).group(1)
        with urllib.request.urlopen(f"http://{address}/model", timeout=30) as answer:
            served = json.load(answer)
        # The server adds the served weights' id (Label Studio's model version).
        assert re.fullmatch(r"[0-9a-f]{12}", served.pop("version"))
        assert tagger.info == served
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert tagger.labels == tagger.info["labels"]


def test_threads_share_one_tagger(tagger):
    expected = [tagger.tag([text]) for text in TEXTS]
    results = {}

    def work(worker):
        for round in range(3):
            for i, text in enumerate(TEXTS):
                if (i + worker + round) % 4 == 0:
                    results[(worker, round, i)] = tagger.tag([text])

    # Daemons with a deadline: a deadlock fails the test instead of hanging the run.
    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive(), "threads sharing a tagger hang"
    calls = [(w, r, i) for w in range(8) for r in range(3) for i in range(len(TEXTS))]
    assert len(results) == sum(1 for w, r, i in calls if (i + w + r) % 4 == 0)
    for (_, _, i), got in results.items():
        assert got == expected[i]


def test_the_gil_is_released_while_tagging(tagger):
    # Another Python thread keeps running while a long call tags.
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            stop.wait(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    before = len(ticks)
    tagger.tag(TEXTS * 20)
    during = len(ticks) - before
    stop.set()
    ticker.join()
    assert during > 5


def test_a_tagger_with_its_own_threads_tags_the_same(tagger, model):
    assert nertrain.Tagger(model, threads=1).tag(TEXTS) == tagger.tag(TEXTS)


def test_missing_files_are_file_not_found(tmp_path, model):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        nertrain.Tagger(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="nowhere.txt"):
        nertrain.evaluate(model, tmp_path / "nowhere.txt")
    with pytest.raises(FileNotFoundError, match="nowhere.toml"):
        nertrain.fit(tmp_path / "nowhere.toml")


def test_bad_input_is_a_value_error_naming_file_and_line(tmp_path, model):
    with pytest.raises(ValueError, match="model"):
        nertrain.Tagger(tmp_path)
    bad = tmp_path / "bad.txt"
    bad.write_text("Peter B-PER\nlives\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.txt:2"):
        nertrain.evaluate(model, bad)
    with pytest.raises(ValueError, match="model.hiden"):
        nertrain.fit(ROOT / "configs" / "sample.toml", {"model.hiden": 10})
    with pytest.raises(ValueError, match="nbest"):
        nertrain.Tagger(model).tag(["x"], nbest=0)
    with pytest.raises(ValueError, match="threads"):
        nertrain.Tagger(model, threads=0)
    with pytest.raises(TypeError):
        nertrain.Tagger(model).tag("a string, not a list of them")


def test_a_failing_callback_stops_training_resumably(tmp_path):
    class Stop(Exception):
        pass

    def stop_in_epoch_two(event):
        if event["event"] == "batch" and epochs[-1] == 2:
            raise Stop("enough")
        if event["event"] == "epoch_started":
            epochs.append(event["epoch"])

    epochs = [0]
    settings = {"train.output": str(tmp_path / "run"), "train.epochs": 3}
    with pytest.raises(Stop, match="enough"):
        nertrain.fit(ROOT / "configs" / "sample.toml", settings, progress=stop_in_epoch_two)
    seen = []
    run = nertrain.fit(ROOT / "configs" / "sample.toml", settings, resume=True, progress=seen.append)
    assert [e["epoch"] for e in seen if e["event"] == "epoch_started"] == [2, 3]
    assert (run / "model.json").is_file()


def test_evaluate_warns_about_the_gold_data(tmp_path, model):
    gold = tmp_path / "gold.txt"
    gold.write_text("Peter B-PER\nin O\nRome B-CITY\n\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="CITY"):
        nertrain.evaluate(model, gold)


def test_the_docs_example_runs_as_written(tmp_path):
    page = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    example = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    for name in ["configs", "data"]:
        (tmp_path / name).symlink_to(ROOT / name)
    done = subprocess.run(
        [sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert "LOC Berlin 23 29" in done.stdout
    shutil.rmtree(tmp_path / "runs")


@pytest.fixture(scope="session")
def document_model(tmp_path_factory):
    """The sample model reading documents."""
    return nertrain.fit(
        ROOT / "configs" / "sample.toml",
        {
            "train.output": str(tmp_path_factory.mktemp("fit-doc") / "run"),
            "train.epochs": 2,
            "data.context": "document",
        },
    )


def test_lines_are_read_as_tag_input_reads_them(document_model):
    """With `lines=True`, a file's lines up to a blank one are one document, as `tag --input`
    reads them."""
    lines = (SAMPLE / "rawtext.txt").read_text(encoding="utf-8").splitlines()
    expected = [
        json.loads(line)
        for line in cli(
            "tag", "--model", str(document_model), "--format", "json", "--input",
            str(SAMPLE / "rawtext.txt"),
        ).splitlines()
    ]
    tagger = nertrain.Tagger(document_model)
    assert tagger.reads_documents
    assert tagger.tag(lines, lines=True) == expected


def _tag_in_child(index):
    return _FORKED.tag([TEXTS[index]])[0]


def test_a_tagger_works_in_a_forked_child(tagger):
    """multiprocessing's fork start method: the child has the tagger but not its threads."""
    import multiprocessing

    global _FORKED
    _FORKED = tagger
    expected = [tagger.tag([text])[0] for text in TEXTS[:6]]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        got = pool.map_async(_tag_in_child, range(6)).get(timeout=120)
    for record, want in zip(got, expected):
        assert [(e["label"], e["start"], e["end"]) for e in record["entities"]] == [
            (e["label"], e["start"], e["end"]) for e in want["entities"]
        ]
        for e, w in zip(record["entities"], want["entities"]):
            assert abs(e["confidence"] - w["confidence"]) < 1e-6


def test_ctrl_c_stops_a_long_tag_between_chunks(tagger):
    """A long call stops at the next chunk after SIGINT, not when it ends: timed against a call a
    quarter as long left to finish, so that neither the machine's speed nor its load (a call
    four times faster or slower than the one timed) decides the outcome."""
    import signal
    import time

    texts = ["Anna Schmidt, who works for Siemens, arrived in Lisbon on Monday."] * 40_000
    # Python raises KeyboardInterrupt only if SIGINT was not ignored when it started, and a shell
    # ignores it for the commands it starts in the background: the test says what it needs.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    # Warm first: the word cache kept across calls makes a later call faster than the first.
    tagger.tag(texts[:1_000])
    started = time.perf_counter()
    tagger.tag(texts)
    quarter = time.perf_counter() - started
    timer = threading.Timer(quarter / 4, lambda: os.kill(os.getpid(), signal.SIGINT))
    started = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        tagger.tag(texts * 4)
    stopped = time.perf_counter() - started
    timer.join()
    signal.signal(signal.SIGINT, previous)
    assert stopped < 2 * quarter, f"stopped after {stopped:.2f} s of a {4 * quarter:.2f} s call"


def test_a_model_whose_tokenizer_cannot_be_built_is_a_value_error(tmp_path, model):
    changed = tmp_path / "run"
    shutil.copytree(model, changed, ignore=shutil.ignore_patterns("checkpoint", "with-dev"))
    description = json.loads((changed / "model.json").read_text())
    description["tokenizer"]["rules"] = 99
    (changed / "model.json").write_text(json.dumps(description))
    with pytest.raises(ValueError, match=re.escape(str(changed / "model.json"))):
        nertrain.Tagger(changed)


def test_an_override_of_two_lines_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="one line"):
        nertrain.fit(
            ROOT / "configs" / "sample.toml",
            {"train.output": str(tmp_path / "run"), "train.epochs=1\ntrain.lr": 0.1},
        )


def test_select_chooses_as_the_cli_does(model):
    """`nertrain.select` returns what `nertrain select` writes: the same texts, scores and
    entities."""
    pool = (SAMPLE / "pool.txt").read_text(encoding="utf-8").splitlines()
    for strategy in ["margin", "expected-errors", "random"]:
        chosen = nertrain.select(model, pool, 4, strategy=strategy)
        printed = cli(
            "select", "--model", str(model), "--input", str(SAMPLE / "pool.txt"),
            "--budget", "4", "--strategy", strategy, "--format", "doccano",
        )
        expected = [json.loads(line) for line in printed.splitlines()]
        assert [c["index"] + 1 for c in chosen] == [e["line"] for e in expected]
        assert [c["score"] for c in chosen] == [e["score"] for e in expected]
        for c, e in zip(chosen, expected):
            assert c["text"] == pool[c["index"]] == e["text"]
            assert [[x["start"], x["end"], x["label"]] for x in c["entities"]] == e["label"]
    # A budget of tokens, regions to decide (below a threshold, or by the budget), and the
    # model's own likeness of texts.
    for strategy, regions in [("mnlp", 0.95), ("bald", 0.95), ("mnlp", "budget:0.5")]:
        options = {"budget_unit": "tokens", "regions": regions, "diversity": 1.0}
        chosen = nertrain.select(model, pool, 40, strategy=strategy, **options)
        printed = cli(
            "select", "--model", str(model), "--input", str(SAMPLE / "pool.txt"),
            "--budget", "40", "--strategy", strategy, "--format", "doccano",
            "--budget-unit", "tokens", "--regions", str(regions), "--diversity", "1",
        )
        expected = [json.loads(line) for line in printed.splitlines()]
        assert [c["index"] + 1 for c in chosen] == [e["line"] for e in expected]
        assert [c["score"] for c in chosen] == [e["score"] for e in expected]
        assert [[list(r) for r in c["regions"]] for c in chosen] == [e["known"] for e in expected]
    with pytest.raises(ValueError, match="strategy"):
        nertrain.select(model, pool, 4, strategy="best")
    with pytest.raises(ValueError, match="budget_unit"):
        nertrain.select(model, pool, 4, budget_unit="pages")
    with pytest.raises(ValueError, match="regions"):
        nertrain.select(model, pool, 4, regions=2.0)
    with pytest.raises(ValueError, match="regions"):
        nertrain.select(model, pool, 4, regions="lowest")


def test_fit_continues_a_model_as_the_cli_does(tmp_path, model):
    """`start_from` continues the model, with the same run as `fit --start-from`."""
    settings = {"train.epochs": 1}
    run = nertrain.fit(
        ROOT / "configs" / "sample.toml",
        {**settings, "train.output": str(tmp_path / "module")},
        start_from=model,
    )
    meta = json.loads((run / "model.json").read_text())
    assert meta["started_from"]["path"] == str(model)
    cli("fit", "--config", "configs/sample.toml", "--start-from", str(model),
        "--set", "train.epochs=1", "--set", f"train.output={json.dumps(str(tmp_path / 'cli'))}")
    metrics = lambda d: [
        (m["loss"], m["dev_f1"])
        for m in map(json.loads, (d / "metrics.jsonl").read_text().splitlines())
    ]
    assert metrics(run) == metrics(tmp_path / "cli")


@pytest.fixture(scope="session")
def dictionary_model(tmp_path_factory):
    """The sample model with the sample's dictionary as features."""
    return nertrain.fit(
        ROOT / "configs" / "sample.toml",
        {
            "train.output": str(tmp_path_factory.mktemp("fit-dict") / "run"),
            "train.epochs": 2,
            "data.dictionaries": [str(SAMPLE / "lists.tsv")],
            "model.dictionary_dim": 3,
        },
    )


def test_a_dictionary_model_tags_and_scores_as_the_cli_does(dictionary_model, tmp_path):
    extra = tmp_path / "extra.tsv"
    extra.write_text("LOC\tZorblat\nORG\tKraków Steel\n", encoding="utf-8")
    texts = TEXTS + ["Anna Novak flew to Zorblat to meet Kraków Steel ."]
    for given, kwargs in [([], {}), (["--dictionary", str(extra)], {"dictionaries": [extra]}),
                          (["--dictionary", str(extra), "--replace-dictionary"],
                           {"dictionaries": [extra], "replace_dictionary": True})]:
        printed = cli("tag", "--model", str(dictionary_model), "--format", "json", "--probs",
                      *given, "--", *texts)
        tagger = nertrain.Tagger(dictionary_model, **kwargs)
        assert tagger.tag(texts, probs=True) == [json.loads(line) for line in printed.splitlines()]
        printed = cli("eval", "--model", str(dictionary_model), "--data", str(SAMPLE / "test.txt"),
                      "--json", *given)
        assert nertrain.evaluate(dictionary_model, SAMPLE / "test.txt", **kwargs) == json.loads(printed)
    assert nertrain.Tagger(dictionary_model).info["dictionary"]["labels"] == ["LOC", "ORG", "PER_LAST"]
    with pytest.raises(ValueError, match="not one of the model's dictionary labels"):
        bad = tmp_path / "bad.tsv"
        bad.write_text("GENE\tBRCA1\n", encoding="utf-8")
        nertrain.Tagger(dictionary_model, dictionaries=[bad])


def _with_type_column(split, path):
    """The sample's split with each token's entity type as a column between word and tag."""
    lines = []
    for line in (SAMPLE / f"{split}.txt").read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] != "-DOCSTART-":
            kind = fields[1].split("-", 1)[1] if "-" in fields[1] else "O"
            line = f"{fields[0]} X{kind} {fields[1]}"
        lines.append(line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_model_reading_columns_scores_files_and_refuses_text(tmp_path):
    files = {split: _with_type_column(split, tmp_path / f"{split}.txt")
             for split in ["train", "dev", "test"]}
    run = nertrain.fit(
        ROOT / "configs" / "sample.toml",
        {
            "train.output": str(tmp_path / "run"),
            "train.epochs": 2,
            "data.train": str(files["train"]),
            "data.dev": str(files["dev"]),
            "data.test": str(files["test"]),
            "data.features": [{"column": 1, "dim": 4}],
        },
    )
    printed = cli("eval", "--model", str(run), "--data", str(files["test"]), "--json")
    assert nertrain.evaluate(run, files["test"]) == json.loads(printed)
    assert nertrain.Tagger(run).feature_columns == [1]
    with pytest.raises(ValueError, match=r"reads feature columns \[1\]"):
        nertrain.Tagger(run).tag(["Anna flew to Oslo ."])


def test_reading_and_scoring_agree_with_the_binary(model, tmp_path):
    documents = nertrain.read_conll(SAMPLE / "test.txt")
    sentences = [s for document in documents for s in document]
    assert sentences and all(len(s["words"]) == len(s["tags"]) for s in sentences)
    with pytest.raises(FileNotFoundError):
        nertrain.read_conll(tmp_path / "nowhere.txt")
    assert nertrain.entities(["B-PER", "I-PER", "O", "I-LOC", "S-ORG"]) == [
        (0, 2, "PER"), (3, 4, "LOC"), (4, 5, "ORG")]
    # Tags from entities, the inverse, in each scheme: every test sentence's tags read back.
    for sentence in sentences:
        found = nertrain.entities(sentence["tags"])
        assert nertrain.tags(len(sentence["tags"]), found) == sentence["tags"]
        for scheme in ["iob1", "iobes"]:
            assert nertrain.entities(nertrain.tags(len(sentence["tags"]), found, scheme)) == found
    assert nertrain.tags(3, [(0, 1, "PER"), (1, 3, "PER")], "iob1") == ["I-PER", "B-PER", "I-PER"]
    with pytest.raises(ValueError, match=r"entities\[0\]: \(1, 3\)"):
        nertrain.tags(2, [(1, 3, "PER")])
    with pytest.raises(ValueError, match="starts before"):
        nertrain.tags(4, [(0, 2, "PER"), (1, 3, "LOC")])
    with pytest.raises(ValueError, match="scheme"):
        nertrain.tags(1, [], "bilou")
    made = nertrain.sentence_text(["Peter", "Müller", "in", "Berlin"],
                                  ["B-PER", "I-PER", "O", "B-LOC"])
    text = made["text"]
    assert text == "Peter Müller in Berlin"
    assert [text[s:e] for s, e in made["tokens"]] == ["Peter", "Müller", "in", "Berlin"]
    assert [text[s:e] for s, e, _ in made["entities"]] == ["Peter Müller", "Berlin"]
    with pytest.raises(ValueError, match="tags"):
        nertrain.sentence_text(["a", "b"], ["O"])
    assert nertrain.label_studio_region("Peter Müller lives", 0, 12, "PER") == {
        "from_name": "label", "to_name": "text", "type": "labels",
        "value": {"start": 0, "end": 12, "text": "Peter Müller", "labels": ["PER"]}}
    with pytest.raises(ValueError, match="start 3, end 99"):
        nertrain.label_studio_region("Peter", 3, 99, "PER")
    assert nertrain.line_documents(["a", "b", "", "c", " ", "", "d", "e"]) == [
        (0, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 8)]
    # The sample's test file as text with its entities: scored by the binary as exact spans,
    # and by score_entities from the binary's own tagging, the same numbers.
    lines, gold = [], []
    for sentence in sentences:
        made = nertrain.sentence_text(sentence["words"], sentence["tags"])
        text, spans = made["text"], made["entities"]
        lines.append(json.dumps({"text": text, "spans": [
            {"start": s, "end": e, "label": label} for s, e, label in spans]}))
        gold.append(spans)
    data = tmp_path / "test.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expected = json.loads(cli("eval", "--model", str(model), "--data", str(data), "--json"))
    tagged = nertrain.Tagger(model).tag([json.loads(line)["text"] for line in lines])
    found = [[(e["start"], e["end"], e["label"]) for e in record["entities"]] for record in tagged]
    scores = nertrain.score_entities(gold, found)
    assert scores["overall"] == expected["overall"]
    assert scores["types"] == expected["types"]
    with pytest.raises(ValueError, match="same texts"):
        nertrain.score_entities(gold, found[:-1])


def test_a_run_reads_as_fit_wrote_it(model):
    run = nertrain.read_run(model)
    metrics = [json.loads(line) for line in (Path(model) / "metrics.jsonl").read_text().splitlines()]
    assert run["metrics"] == metrics
    assert run["dev"] == json.loads((Path(model) / "dev.json").read_text())
    assert run["test"] == json.loads((Path(model) / "test.json").read_text())
    assert run["config"]["model"]["hidden"] > 0 and isinstance(run["config"]["train"]["seed"], int)
    with pytest.raises(FileNotFoundError):
        nertrain.read_run(Path(model) / "nowhere")


def test_tokenize_cuts_text_as_tag_does(model, tagger):
    texts = ["Peter lives in Berlin.", "U.S.-based Acme Corp. hired Anna Schmidt."]
    cut = tagger.tokenize(texts)
    conll = cli("tag", "--model", str(model), "--format", "conll", *texts)
    tagged = [[line.rsplit(" ", 1)[0] for line in block.splitlines()]
              for block in conll.strip("\n").split("\n\n")]
    assert [[text[s:e] for s, e in tokens] for text, tokens in zip(texts, cut)] == tagged


def test_a_fit_job_written_by_the_wheel_runs(model, tmp_path):
    job = tmp_path / "job.json"
    nertrain.write_fit_job(job, start_from=model, train=SAMPLE / "dev.txt",
                           heldout=SAMPLE / "test.txt", output=tmp_path / "run", epochs=1,
                           events=tmp_path / "events.jsonl", keep_checkpoint=False)
    cli("fit", "--job", str(job))
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["epoch", "done"]
    assert nertrain.read_run(tmp_path / "run")["test"]["overall"]["f1"] >= 0
    with pytest.raises(ValueError, match="epochs"):
        nertrain.write_fit_job(tmp_path / "bad.json", start_from=model, train="t", heldout="h",
                               output="o", epochs=0, events="e")
    assert not (tmp_path / "bad.json").exists()
