"""scripts/ray/sweep.py's search spaces, expected-best curve, driver beats and resumed spaces, without
Ray (pytest)."""

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import sweep  # noqa: E402


def space(tmp_path, text):
    path = tmp_path / "space.toml"
    path.write_text(text)
    return sweep.read_space(path)


def test_a_space_reads_with_its_settings(tmp_path):
    keys, settings = space(tmp_path, '[sweep]\nsamples = 4\n[space]\n"train.lr" = { loguniform = [0.001, 0.01] }\n'
                                     '"train.seed" = { grid = [1, 2, 3] }\n"model.hidden" = { randint = [50, 60] }\n')
    assert keys == {"train.lr": ("loguniform", [0.001, 0.01]), "train.seed": ("grid", [1, 2, 3]),
                    "model.hidden": ("randint", [50, 60])}
    assert settings == {"samples": 4, "grace_epochs": 2, "reduction": 3, "seed": 0}


@pytest.mark.parametrize("text, says", [
    ("[space]\n", "empty"),
    ('[space]\n"lr" = { uniform = [0.1, 0.2] }\n', "a section and a setting"),
    ('[space]\n"train.lr" = { uniform = [0.2, 0.1] }\n', "not below"),
    ('[space]\n"train.lr" = { uniform = [0.1] }\n', "two numbers"),
    ('[space]\n"train.lr" = { uniform = ["a", "b"] }\n', "two numbers"),
    ('[space]\n"train.lr" = { loguniform = [0, 0.1] }\n', "above 0"),
    ('[space]\n"model.hidden" = { randint = [1.5, 9] }\n', "whole numbers"),
    ('[space]\n"model.hidden" = { choice = [] }\n', "non-empty list"),
    ('[space]\n"train.lr" = { uniform = [0.1, 0.2], grid = [1] }\n', "expected one of"),
    ('[space]\n"train.lr" = 0.1\n', "expected one of"),
    ('[sweep]\nsamples = 0\n[space]\n"train.lr" = { grid = [0.1] }\n', "samples"),
    ('[sweep]\nreduction = 1\n[space]\n"train.lr" = { grid = [0.1] }\n', "reduction"),
    ('[sweep]\nsample = 3\n[space]\n"train.lr" = { grid = [0.1] }\n', "unknown"),
    ('[spaces]\n', "unknown section"),
    ("[space\n", "not TOML"),
])
def test_a_space_a_user_got_wrong_is_named(tmp_path, text, says):
    with pytest.raises(sweep.SweepError) as error:
        space(tmp_path, text)
    assert says in str(error.value) and "space.toml" in str(error.value)


def test_values_are_set_as_toml():
    assert sweep.sets({"train.lr": 0.01, "data.context": "document", "model.char_lm": True}) == [
        "--set", 'data.context="document"', "--set", "model.char_lm=true", "--set", "train.lr=0.01"]


def test_the_expected_best_of_n_trials():
    values = [80.0, 85.0, 90.0]
    assert sweep.expected_best(values, 1) == pytest.approx(85.0)
    # Of two draws with replacement, the best is 90 unless both miss it: 1 - (2/3)^2.
    assert sweep.expected_best(values, 2) == pytest.approx(90 * 5 / 9 + 85 * 3 / 9 + 80 * 1 / 9)
    assert sweep.expected_best(values, 50) == pytest.approx(90.0, abs=1e-6)


def test_a_driver_that_stops_beating_is_gone_and_one_that_beats_is_not(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "DRIVER_GONE", 0.3)
    beats = tmp_path / "driver.json"
    # No beat ever seen: a node whose storage is not shared cannot tell, and goes on.
    assert not sweep.Driver(tmp_path).gone()
    beats.write_text('{"pid": 1, "beat": 1}')
    driver = sweep.Driver(tmp_path)
    for beat in range(2, 6):
        time.sleep(0.1)
        beats.write_text(f'{{"pid": 1, "beat": {beat}}}')
        assert not driver.gone()
    time.sleep(0.4)
    assert driver.gone()


def test_a_resumed_sweep_is_the_same_sweep(tmp_path):
    recorded = {"experiment": ["--config", "e.toml"], "space": {"train.lr": ("grid", [0.1, 0.2])},
                "sweep": {"samples": 1}}
    (tmp_path / "space.json").write_text(json.dumps(recorded))
    sweep.check_same_sweep(tmp_path, recorded)
    changed = {**recorded, "space": {"train.lr": ("grid", [0.1, 0.3])}}
    with pytest.raises(sweep.SweepError, match="the space differs from the one the sweep ran with"):
        sweep.check_same_sweep(tmp_path, changed)
    with pytest.raises(sweep.SweepError, match="space.json is missing"):
        sweep.check_same_sweep(tmp_path / "elsewhere", recorded)
