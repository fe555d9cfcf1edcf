#!/usr/bin/env python3
"""Writes the round-trip exports in data/annotations/roundtrip/: texts with emoji and CJK, as
Label Studio and doccano export them.

- label-studio.json: Label Studio's JSON export (the documented task shape): two annotators of one
  task (the later by updated_at counts, with fractional seconds against none), a cancelled
  annotation, a task nobody annotated, an annotation without entities; offsets in code points.
- label-studio-min.json: the same export made JSON-MIN by Label Studio's own converter
  (label-studio-converter's Converter.convert_to_json_min), when it is installed:
  `pip install label-studio-converter==0.0.59`.
- doccano.jsonl: doccano's sequence-labelling export, offsets in UTF-16 units (JavaScript string
  indices), with its `Comments` key.

The exports are written here as the tools write them, not by nertrain's writers (crates/annotate):
the round-trip tests read them to check those readers and writers against the tools' own shapes,
which a fixture made by the code under test could not.

Run from the repository root: python3 scripts/data/make_annotation_exports.py
"""

import json
import os
import shutil
import tempfile

OUT = os.path.join("data", "annotations", "roundtrip")

TEXTS = [
    ("🎉 Anna Schmidt works for Siemens in 北京 .", [("Anna Schmidt", "PER"), ("Siemens", "ORG"), ("北京", "LOC")]),
    ("Maria Rossi 👋 visited 東京 on Monday .", [("Maria Rossi", "PER"), ("東京", "LOC")]),
    ("Nothing to see 🙈 here .", []),
    ("Peter Müller 🇩🇪 joined BMW .", [("Peter Müller", "PER"), ("BMW", "ORG")]),
]

CONFIG = """<View>
  <Labels name="label" toName="text">
    <Label value="PER"/><Label value="ORG"/><Label value="LOC"/><Label value="MISC"/>
  </Labels>
  <Text name="text" value="$text"/>
</View>
"""


def offsets(text, entity, units):
    """Start and end of `entity` in `text`, in code points or UTF-16 units."""
    start = text.index(entity)
    if units == "utf16":
        count = lambda s: len(s.encode("utf-16-le")) // 2
        return count(text[:start]), count(text[:start]) + count(entity)
    return start, start + len(entity)


def region(text, entity, label, number):
    start, end = offsets(text, entity, "chars")
    return {
        "id": f"r{number}",
        "from_name": "label",
        "to_name": "text",
        "type": "labels",
        "origin": "manual",
        "value": {"start": start, "end": end, "text": entity, "labels": [label]},
    }


def annotation(id_, text, entities, updated_at, **extra):
    return {
        "id": id_,
        "completed_by": 1,
        "result": [region(text, e, label, i) for i, (e, label) in enumerate(entities)],
        "was_cancelled": False,
        "ground_truth": False,
        "created_at": updated_at,
        "updated_at": updated_at,
        "lead_time": 4.2,
        "task": None,
        **extra,
    }


def label_studio_tasks():
    tasks = []
    for number, (text, entities) in enumerate(TEXTS, start=1):
        if number == 3:
            annotations = [annotation(30, text, [], "2024-05-01T10:00:00.000000Z")]
        else:
            annotations = [annotation(10 * number, text, entities, "2024-05-01T10:00:00.500000Z")]
        if number == 1:
            # An earlier annotator's, wrong: later as a string, earlier as a time.
            wrong = [(e, "MISC") for e, _ in entities]
            annotations.append(annotation(11, text, wrong, "2024-05-01T10:00:00Z"))
        if number == 2:
            annotations.append(
                annotation(21, text, [], "2024-06-01T10:00:00Z", was_cancelled=True)
            )
        for a in annotations:
            a["task"] = number
        tasks.append(
            {
                "id": number,
                "data": {"text": text},
                "annotations": annotations,
                "predictions": [],
                "meta": {},
                "created_at": "2024-05-01T09:00:00.000000Z",
                "updated_at": "2024-05-01T10:00:00.500000Z",
                "project": 1,
            }
        )
    tasks.append(
        {
            "id": 5,
            "data": {"text": "Not labelled 🙂 yet ."},
            "annotations": [],
            "predictions": [],
            "project": 1,
        }
    )
    return tasks


def doccano_lines():
    for number, (text, entities) in enumerate(TEXTS, start=1):
        spans = [[*offsets(text, e, "utf16"), label] for e, label in entities]
        yield {"id": number, "text": text, "label": spans, "Comments": []}


def main():
    os.makedirs(OUT, exist_ok=True)
    export = os.path.join(OUT, "label-studio.json")
    with open(export, "w", encoding="utf-8") as f:
        json.dump(label_studio_tasks(), f, indent=2, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(OUT, "doccano.jsonl"), "w", encoding="utf-8") as f:
        for line in doccano_lines():
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    try:
        from label_studio_converter import Converter
    except ImportError:
        print("label-studio-converter is not installed: label-studio-min.json not written")
        return
    work = tempfile.mkdtemp()
    try:
        config = os.path.join(work, "config.xml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(CONFIG)
        Converter(config, project_dir=work).convert_to_json_min(export, work, is_dir=False)
        shutil.copy(os.path.join(work, "result.json"), os.path.join(OUT, "label-studio-min.json"))
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
