//! Labelled sequences on the host: reading CoNLL column files, tag schemes and their conversion,
//! entity spans and conlleval-exact scoring, documents and the context they give a word,
//! vocabularies, pretrained word vectors, the one featurizer of training and tagging
//! ([`Featurizer`]), and padded, length-bucketed batches.
//!
//! Nothing here knows about tensors: the model crate turns a [`Batch`] into them.

#![warn(missing_docs)]

mod batch;
mod casing;
mod conll;
mod context;
mod dictionary;
mod error;
mod featurize;
pub mod io;
pub mod job;
mod label;
pub mod lock;
mod operating;
mod partial;
mod pieces;
mod scheme;
mod score;
mod tokenize;
mod unlabelled;
mod vectors;
mod vocab;

pub use batch::{Batch, BatchPlan, CharIds, SentenceChars, SubwordIds};
pub use casing::Casing;
pub use conll::{
    ColumnSpec, Corpus, Sentence, char_spans, convert_tag_column, parse_conll,
    parse_partially_tagged, parse_tagged, read_conll, read_partially_tagged, read_tagged,
    read_text, text_from_bytes, words_as_text,
};
pub use context::{
    Context, DEFAULT_DOCUMENT_TOKENS, MentionCasing, document_pieces, set_mention_casing,
};
pub use dictionary::{
    CaseRule, Dictionary, DictionaryCounts, Entry, MAX_PHRASE_WORDS, Mention, parse_dictionary,
    place, read_dictionary, set_dictionary_places,
};
pub use error::DataError;
pub use featurize::Featurizer;
pub use io::{WriteError, write_output};
pub use label::{Allowed, Label, TagColumn, known_tags};
pub use operating::{LabelConfidences, OperatingPoint, THRESHOLD_GRID, label_confidences};
pub use partial::forced_labels;
pub use pieces::{
    DOCUMENT_CONTEXT, MAX_TOKENIZER_BYTES, Pieces, SubwordTokenizer, TOKENIZER_FILE, Window,
};
pub use scheme::{
    CharSpan, Span, TagScheme, check_tag, convert_tags, ends_before, first_malformed, parse_tag,
    render_spans, spans, transition_allowed,
};
pub use score::{
    CalibrationBin, ChunkCounts, Confusion, Report, Scorer, Scores, SpanScorer, TypeScore,
    calibration,
};
pub use tokenize::{
    MAX_KEEP_BYTES, MAX_KEEP_WORDS, TREEBANK_RULES, Token, Tokenizer, TokenizerError, TokenizerSpec,
};
pub use unlabelled::read_unlabelled;
pub use vectors::{Vectors, parse_vectors, read_vectors};
pub use vocab::{
    Encoded, FeatureCoverage, PAD, TeacherMarginals, TextNormalization, UNK, Vocab, Vocabularies,
};
