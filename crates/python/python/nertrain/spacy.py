"""nertrain as a spaCy pipeline component.

    import spacy
    nlp = spacy.blank("en")
    nlp.add_pipe("nertrain", config={"model": "runs/conll"})
    doc = nlp("Peter lives in Berlin.")
    [(e.text, e.label_, e._.confidence) for e in doc.ents]

spaCy finds the factory through the wheel's entry point (``spacy_factories``), so no import is
needed. nertrain cuts each doc's text as its training data was cut and tags it; its entities,
in character offsets, are then laid on spaCy's tokens. An entity whose edges fall inside a spaCy
token is never moved silently: ``alignment`` says what happens to it ("expand" widens it to the
tokens it touches, "contract" narrows it to the tokens inside it, "drop" leaves it out), and each
one is listed in ``doc._.nertrain_misaligned`` with what was done.

Entities go to ``doc.ents`` (replacing those set before), or with ``spans_key`` to
``doc.spans[spans_key]``, where they may overlap other components' spans. ``nlp.pipe`` tags
``batch_size`` docs per call to the tagger; ``nlp.to_disk`` saves the model's files with the
pipeline, and ``spacy.load`` reads them from there, wherever the pipeline was moved.
``thresholds`` and ``biases`` (by label) replace those stored with the model, as
``nertrain tag --threshold`` and ``--bias`` do.
"""

from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional

from spacy.language import Language
from spacy.tokens import Doc, Span

from .nertrain import Tagger

ALIGNMENTS = ("expand", "contract", "drop")
MODEL_DIR = "model"

if not Span.has_extension("confidence"):
    Span.set_extension("confidence", default=None)
if not Doc.has_extension("nertrain_misaligned"):
    Doc.set_extension("nertrain_misaligned", default=None)


@Language.factory(
    "nertrain",
    default_config={
        "model": None,
        "spans_key": None,
        "alignment": "expand",
        "thresholds": None,
        "biases": None,
        "batch_size": 256,
        "threads": None,
    },
    assigns=["doc.ents", "span._.confidence", "doc._.nertrain_misaligned"],
)
def make_nertrain(
    nlp: Language,
    name: str,
    model: Optional[str],
    spans_key: Optional[str],
    alignment: str,
    thresholds: Optional[Dict[str, float]],
    biases: Optional[Dict[str, float]],
    batch_size: int,
    threads: Optional[int],
) -> "NertrainComponent":
    """The ``nertrain`` component: ``model`` is a directory ``nertrain fit`` wrote."""
    return NertrainComponent(
        nlp.vocab,
        name=name,
        model=model,
        spans_key=spans_key,
        alignment=alignment,
        thresholds=thresholds,
        biases=biases,
        batch_size=batch_size,
        threads=threads,
    )


class NertrainComponent:
    """Tags each doc's text with a nertrain model and sets its entities on the doc."""

    def __init__(
        self,
        vocab: Any,
        *,
        name: str = "nertrain",
        model: Optional[str] = None,
        spans_key: Optional[str] = None,
        alignment: str = "expand",
        thresholds: Optional[Dict[str, float]] = None,
        biases: Optional[Dict[str, float]] = None,
        batch_size: int = 256,
        threads: Optional[int] = None,
    ) -> None:
        if alignment not in ALIGNMENTS:
            raise ValueError(
                f"nertrain component: alignment {alignment!r}; expected one of {', '.join(ALIGNMENTS)}"
            )
        if batch_size < 1:
            raise ValueError(f"nertrain component: batch_size {batch_size}; expected at least 1")
        self.vocab = vocab
        self.name = name
        self.model = model
        self.spans_key = spans_key
        self.alignment = alignment
        self.thresholds = thresholds
        self.biases = biases
        self.batch_size = batch_size
        self.threads = threads
        self._tagger: Optional[Tagger] = None
        # A pipeline loaded from disk gives its model in from_disk; a model given here that is
        # not there is an error at the first doc, naming it.
        if model is not None and Path(model).exists():
            self._tagger = self._load(Path(model))

    def _load(self, path: Path) -> Tagger:
        return Tagger(path, self.threads, thresholds=self.thresholds, biases=self.biases)

    @property
    def tagger(self) -> Tagger:
        """The loaded nertrain tagger."""
        if self._tagger is None:
            if self.model is None:
                raise ValueError(
                    "nertrain component: no model; give config={'model': DIR}, a directory "
                    "`nertrain fit` wrote, or load a pipeline saved with one"
                )
            raise FileNotFoundError(f"nertrain component: no model directory at {self.model}")
        return self._tagger

    @property
    def labels(self) -> List[str]:
        """The entity types the model finds (none known before a model is loaded: spaCy reads
        them while loading a pipeline, before the model saved with it)."""
        return self._tagger.labels if self._tagger is not None else []

    def __call__(self, doc: Doc) -> Doc:
        return self._set([doc])[0]

    def pipe(self, stream: Iterable[Doc], batch_size: Optional[int] = None) -> Iterator[Doc]:
        size = batch_size or self.batch_size
        batch: List[Doc] = []
        for doc in stream:
            batch.append(doc)
            if len(batch) >= size:
                yield from self._set(batch)
                batch = []
        if batch:
            yield from self._set(batch)

    def _set(self, docs: List[Doc]) -> List[Doc]:
        records = self.tagger.tag([doc.text for doc in docs])
        for doc, record in zip(docs, records):
            spans, misaligned = self._spans(doc, record["entities"])
            if self.spans_key is None:
                doc.ents = spans
            else:
                doc.spans[self.spans_key] = spans
            doc._.nertrain_misaligned = misaligned
        return docs

    def _spans(self, doc: Doc, entities: List[Dict[str, Any]]):
        """The entities as spans of the doc's tokens, and those that did not fall on them."""
        spans: List[Span] = []
        misaligned: List[Dict[str, Any]] = []
        for entity in entities:
            start, end, label = entity["start"], entity["end"], entity["label"]
            span = doc.char_span(start, end, label=label)
            action = None
            if span is None:
                mode = "strict" if self.alignment == "drop" else self.alignment
                span = None if mode == "strict" else doc.char_span(start, end, label=label, alignment_mode=mode)
                action = {"expand": "expanded", "contract": "contracted"}.get(mode, "dropped")
                if span is None or len(span) == 0:
                    span, action = None, "dropped"
            if span is not None and spans and span.start < spans[-1].end:
                # Widened onto the entity before it (both in one spaCy token): left out.
                span, action = None, "dropped"
            if action is not None:
                moved = {"start": span.start_char, "end": span.end_char} if span is not None else None
                misaligned.append({**entity, "action": action, "span": moved})
            if span is not None:
                span._.confidence = entity.get("confidence")
                spans.append(span)
        return spans, misaligned

    def to_disk(self, path: Any, *, exclude: Iterable[str] = ()) -> None:
        """Saves the model's files with the pipeline (in ``path/model``)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.tagger.copy_to(path / MODEL_DIR)

    def from_disk(self, path: Any, *, exclude: Iterable[str] = ()) -> "NertrainComponent":
        """Loads the model saved with the pipeline."""
        model = Path(path) / MODEL_DIR
        self._tagger = self._load(model)
        self.model = str(model)
        return self
