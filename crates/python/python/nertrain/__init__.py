"""Train, evaluate and run BiLSTM-CRF named-entity taggers (nertrain, in Rust) from Python.

The module is the Rust extension `nertrain.nertrain`, re-exported; `nertrain.spacy` is its spaCy
pipeline component (`nlp.add_pipe("nertrain", config={"model": DIR})`).
"""

from .nertrain import (
    Tagger,
    __version__,
    entities,
    evaluate,
    fit,
    label_studio_region,
    line_documents,
    read_conll,
    read_run,
    score_entities,
    select,
    sentence_text,
    tags,
    write_fit_job,
)

__all__ = [
    "Tagger",
    "__version__",
    "entities",
    "evaluate",
    "fit",
    "label_studio_region",
    "line_documents",
    "read_conll",
    "read_run",
    "score_entities",
    "select",
    "sentence_text",
    "tags",
    "write_fit_job",
]
