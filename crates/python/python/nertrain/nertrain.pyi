"""nertrain: train, evaluate and run BiLSTM-CRF named-entity taggers (written in Rust).

Every dict here is the JSON object the ``nertrain`` binary prints for the same call.
Offsets count code points, as ``str`` slices: ``text[entity["start"]:entity["end"]]``.
"""

import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypedDict, Union

__version__: str

StrPath = Union[str, "os.PathLike[str]"]

class _EntityBase(TypedDict):
    label: str
    start: int
    end: int
    text: str

class Entity(_EntityBase, total=False):
    confidence: float
    """p(this span has this label | text), from the CRF's marginals."""

class TokenProbabilities(TypedDict):
    text: str
    start: int
    end: int
    tag: str
    probs: Dict[str, float]

class Alternative(TypedDict):
    probability: float
    entities: List[Entity]

class _RecordBase(TypedDict):
    text: str
    entities: List[Entity]

class Record(_RecordBase, total=False):
    """One text tagged, as ``nertrain tag --format json`` prints it."""

    tokens: List[TokenProbabilities]
    """With ``probs=True``: every token with its tag probabilities."""
    nbest: List[Alternative]
    """With ``nbest > 1``: the best paths' entities and probabilities."""

class _ModelInfoOptional(TypedDict, total=False):
    thresholds: Dict[str, float]
    """By label, the confidence below which entities are left out; absent when none."""
    biases: Dict[str, float]
    """By label, the bias of its tags' emission scores in decoding; absent when none."""

class ModelInfo(_ModelInfoOptional):
    """What a model is, as ``nertrain serve`` answers ``GET /model``."""

    labels: List[str]
    tags: List[str]
    scheme: str
    context: str
    consistency: float
    tokenizer: str
    dev_f1: Optional[float]
    test_f1: Optional[float]
    trained_on_dev: bool
    trained_by: str
    nertrain_version: str

class TypeScore(TypedDict):
    precision: float
    recall: float
    f1: float
    gold: int
    found: int
    correct: int

CalibrationBin = TypedDict(
    "CalibrationBin",
    {"from": float, "to": float, "entities": int, "mean_confidence": float, "precision": float},
)

class _ScoresBase(TypedDict):
    tokens: int
    accuracy: float
    overall: TypeScore
    types: Dict[str, TypeScore]

class Scores(_ScoresBase, total=False):
    """What ``nertrain eval --json`` prints."""

    calibration: List[CalibrationBin]

class Tagger:
    """A trained model loaded for tagging text.

    Calls release the GIL and run one at a time on the tagger's own ``threads`` (by default
    ``RAYON_NUM_THREADS``, or one per core); a tagger may be shared by Python threads.
    """

    def __init__(
        self,
        model_dir: StrPath,
        threads: Optional[int] = None,
        *,
        dictionaries: Sequence[StrPath] = (),
        replace_dictionary: bool = False,
        thresholds: Optional[Mapping[str, float]] = None,
        biases: Optional[Mapping[str, float]] = None,
    ) -> None:
        """Loads a model directory written by ``nertrain fit``.

        ``dictionaries`` are dictionary files (``LABEL<TAB>phrase`` lines) whose entries are
        added to the model's own for the labels it has dictionary features for, or replace those
        labels' entries with ``replace_dictionary``: as ``nertrain tag --dictionary``.

        ``thresholds`` maps labels to confidences (0 to 1): entities below their label's are left
        out, their words tagged ``O``, in place of the thresholds stored with the model
        (``thresholds.json``, which ``nertrain eval --thresholds --store`` writes); ``{}`` keeps
        every entity. ``biases`` maps labels to what is added to their tags' emission scores when
        the best path is chosen (above 0: more of their entities, recall bought with
        precision). Either given replaces both stored ones: as ``nertrain tag --threshold``
        and ``--bias``.

        Raises FileNotFoundError when it is not there, ValueError when it is not a model.
        """

    def tag(
        self,
        texts: Sequence[str],
        probs: bool = False,
        nbest: int = 1,
        lines: bool = False,
        *,
        all_entities: bool = False,
    ) -> List[Record]:
        """Tags each text (one document, for a model that reads documents): one record a text.

        ``probs`` adds every token's tag probabilities; ``nbest`` (1 to 100) the best paths.
        With ``lines``, the texts are a file's lines, read as ``nertrain tag --input`` reads
        them: for a model that reads documents, lines up to a blank one are one document.
        Texts are tagged a chunk at a time, as ``tag --input`` tags them; Ctrl-C (or any
        signal handler that raises) stops the call between two chunks. ``all_entities`` keeps
        every entity as the model decodes it, whatever the tagger's thresholds and biases.
        """

    @property
    def reads_documents(self) -> bool:
        """Whether the model reads documents rather than sentences alone."""

    @property
    def feature_columns(self) -> List[int]:
        """The columns of its training data whose values the model reads beside the words:
        empty for a model that reads words alone, and so tags text; one that reads columns
        scores and tags CoNLL files only."""

    @property
    def tokenize(self, texts: Sequence[str]) -> List[List[Tuple[int, int]]]:
        """Each text cut into words as ``tag`` cuts it (the unit of ``select``'s token budget):
        ``(start, end)`` code points per word. A text of more words than a text may have is a
        ``ValueError``."""
    def labels(self) -> List[str]:
        """The entity types the model finds."""

    @property
    def info(self) -> ModelInfo:
        """What the model is, with the scores its run recorded."""

    def copy_to(self, dir: StrPath) -> None:
        """Copies the model's files (not its run's checkpoint or metrics) into ``dir``, created
        when missing, so that ``Tagger(dir)`` loads the same model."""

def evaluate(
    model_dir: StrPath,
    path: StrPath,
    *,
    threads: Optional[int] = None,
    dictionaries: Sequence[StrPath] = (),
    replace_dictionary: bool = False,
    encoder_cache: Optional[StrPath] = None,
) -> Scores:
    """Scores a model on a gold file: a CoNLL file, or span-annotated text (``.jsonl``).

    The numbers ``nertrain eval --json`` prints; warnings about the gold data (and about files
    of ``encoder_cache``, a directory keeping a frozen encoder's layers between calls, that
    could not be read or written) are issued as ``UserWarning``.
    """

def select(
    model_dir: StrPath,
    texts: Sequence[str],
    budget: int,
    *,
    strategy: str = "margin",
    budget_unit: str = "texts",
    max_similarity: float = 0.7,
    diversity: float = 0.0,
    regions: Union[float, str, None] = None,
    seed: int = 1,
    threads: Optional[int] = None,
    encoder_cache: Optional[StrPath] = None,
) -> List[Dict[str, Any]]:
    """Chooses the texts of an unlabelled pool most worth labelling next (``nertrain select``).

    ``strategy`` is ``least-confidence``, ``margin``, ``entropy``, ``expected-errors``,
    ``mnlp``, ``bald`` or ``random``; ``budget`` counts texts, or with ``budget_unit="tokens"``
    tokens to decide. A text whose words overlap a chosen one's by more than ``max_similarity``
    (Jaccard) is skipped; ``diversity`` weighs a text's likeness to those chosen (in the
    model's own representation) against its worth. With ``regions`` (a marginal threshold such as
    ``0.99``, or ``"budget"`` / ``"budget:0.9"``: the tokens below a floor, or while the pool
    holds fewer than ``budget`` of them, its least sure tokens until they fill it; as
    ``select --regions``), only each text's doubtful regions are to be decided. Returns, best first, each chosen
    text's record as ``tag`` makes it (its entities with confidences, to pre-annotate it) with
    its ``index`` in ``texts``, its ``worth`` by the strategy (higher first), its task's
    ``score`` (the model's certainty, lowest first, as ``select``'s task files have it) and,
    with ``regions``, its ``regions``
    (``(start, end)`` tuples in code points). ``encoder_cache``, a directory, keeps a frozen
    encoder's layers of the pool between calls (``select --encoder-cache``); files it could not
    read or write are ``UserWarning``.
    """

Event = Dict[str, Any]
"""A training event: ``event`` names it (``info``, ``warning``, ``epoch_started``, ``batch``,
``epoch_trained``, ``epoch_ended`` with ``metrics``, ``interrupted``, ``early_stop``,
``finished``, ``consistency_chosen``, ``training_with_dev``, ``test_scored``); the other keys
are its fields."""

def fit(
    config: StrPath,
    overrides: Optional[Mapping[str, Union[bool, int, float, str, Sequence[Any]]]] = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: Optional[Callable[[Event], object]] = None,
    threads: Optional[int] = None,
    start_from: Optional[StrPath] = None,
    encoder_cache: Optional[StrPath] = None,
) -> Path:
    """Trains a model as the experiment file describes (``nertrain fit``); returns its run directory.

    ``overrides`` maps ``"section.key"`` to a value, as ``--set``. ``progress`` is called with
    each event. Ctrl-C, or an exception raised by ``progress``, stops training after the current
    batch with a checkpoint saved (``resume=True`` continues it), and is raised. ``start_from``,
    a trained model's directory, continues that model (``fit --start-from``).
    ``encoder_cache``, a directory, keeps a frozen encoder's layers between runs (``fit
    --encoder-cache``).
    """

class Sentence(TypedDict):
    """A sentence of a CoNLL file: its words and their tags."""

    words: List[str]
    tags: List[str]

EntitySpan = Tuple[int, int, str]
"""An entity as ``(start, end, label)``: token indices, or code points of a text; ``end``
exclusive."""

def read_conll(path: StrPath, *, word_column: int = 0, tag_column: int = -1) -> List[List[Sentence]]:
    """Reads a CoNLL file as ``fit`` and ``eval`` read it: its documents (``-DOCSTART-`` blocks;
    one for a file without them), each a list of sentences. An error names the file and line."""

def entities(tags: Sequence[str]) -> List[EntitySpan]:
    """The entities of a sentence's tags as conlleval reads them (IOB1, IOB2 or IOBES,
    leniently), over token indices."""

def tags(length: int, entities: Sequence[EntitySpan], scheme: str = "iob2") -> List[str]:
    """The tags of a sentence of `length` tokens whose entities are `entities` (token indices,
    in order, not overlapping), in `scheme` (iob2, iob1 or iobes); the inverse of `entities`."""

class SentenceText(TypedDict):
    """A sentence made text: its words joined by single spaces."""

    text: str
    tokens: List[Tuple[int, int]]
    entities: List[EntitySpan]

def sentence_text(words: Sequence[str], tags: Sequence[str] = ()) -> SentenceText:
    """A sentence's words as the text it is tagged and annotated as (joined by single spaces):
    the ``text``, each word's ``tokens`` offsets and the ``entities`` of ``tags``, in code points
    of that text."""

def score_entities(
    gold: Sequence[Sequence[EntitySpan]], found: Sequence[Sequence[EntitySpan]]
) -> Dict[str, Any]:
    """Scores found entities against gold ones, a list of them per text, each matched exactly
    (same place, same label), as ``eval`` scores span-annotated text: ``overall`` and ``types``,
    each with ``gold``, ``found``, ``correct``, ``precision``, ``recall`` and ``f1``."""

def read_run(run_dir: StrPath) -> Dict[str, Any]:
    """A run directory's record, as ``fit`` wrote it: ``config`` (the resolved experiment, a dict
    of its sections), ``metrics`` (a dict per epoch: ``epoch``, ``loss``, ``dev_f1``,
    ``test_f1``, ``train_seconds``, ``best``, ...), ``dev`` (the best epoch's dev scores and its
    ``epoch``) and ``test`` (the best model's test scores, or ``None``)."""

def line_documents(lines: Sequence[str]) -> List[Tuple[int, int]]:
    """A file's lines as documents, as ``tag --input`` (and ``Tagger.tag(lines=True)``) reads
    them for a model that reads documents: each run of non-blank lines is one, each blank line
    one alone; as ``(start, end)`` line indices."""

def label_studio_region(
    text: str, start: int, end: int, label: str, *, from_name: str = "label", to_name: str = "text"
) -> Dict[str, Any]:
    """A region of ``text[start:end]`` labelled ``label``, as an annotator submits it in Label
    Studio under the control ``from_name`` on the object ``to_name``: the dict ``fit`` reads in
    an export's results."""

def write_fit_job(
    path: StrPath,
    *,
    start_from: StrPath,
    train: StrPath,
    heldout: StrPath,
    output: StrPath,
    epochs: int,
    events: StrPath,
    open_labels: Sequence[str] = (),
    overrides: Sequence[str] = (),
    keep_checkpoint: bool = True,
    rehearse_own: bool = True,
) -> None:
    """Writes the job ``nertrain fit --job PATH`` runs: ``start_from``'s model continued on
    ``train``, its epoch chosen and scored on ``heldout``, into ``output``, each epoch appended
    to ``events``; written whole or not at all."""
