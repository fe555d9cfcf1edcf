//! Reading a run's data and describing a new run: the corpora with every tag checked and
//! converted to the training scheme, the vocabularies (extended by pretrained vectors), the
//! model description, and the facts about the training words that the loop needs.

use std::ops::Range;
use std::path::Path;

use nertrain_data::{
    ColumnSpec, Context, Corpus, DataError, Encoded, TagScheme, Tokenizer, TokenizerSpec, Vectors,
    Vocab, Vocabularies, convert_tags, is_annotated, read_annotated, read_tagged, read_vectors,
    set_mention_casing,
};
use nertrain_model::{DocumentContext, FORMAT_VERSION, ModelMeta, VocabSizes};

use super::checkpoint::{Checkpoint, reopen_run};
use super::events::{FitEvent, FitOptions};
use crate::model_dir::ModelDir;
use crate::{Experiment, Result};

/// Reads a training, dev or test file: CoNLL columns, or span-annotated text (`.jsonl`) cut into
/// words and sentences by the treebank rules, its spans that fall between words reported.
fn read_corpus(
    path: &Path,
    columns: ColumnSpec,
    events: &mut dyn FnMut(FitEvent),
) -> Result<Corpus> {
    if !is_annotated(path) {
        return Ok(read_tagged(path, columns)?);
    }
    let tokenizer = Tokenizer::new(&TokenizerSpec::treebank()).expect("the treebank rules");
    let annotated = read_annotated(path)?;
    for warning in &annotated.warnings {
        events(FitEvent::warning(warning.clone()));
    }
    let (corpus, misaligned) = annotated.tokenize(&tokenizer);
    let spans = annotated.span_count();
    // Left out, most entities would be learned as `O`: the offsets are not what they say.
    if 2 * misaligned.len() > spans {
        let first = misaligned
            .first()
            .map_or(String::new(), |m| format!("; the first: {m}"));
        return Err(DataError::file(
            path,
            format!(
                "{} of its {spans} spans do not start and end at word boundaries, so most \
                 entities would be learned as O; offsets must count code points (not bytes or \
                 UTF-16 units), end exclusive{first}",
                misaligned.len()
            ),
        )
        .into());
    }
    if let Some(first) = misaligned.first() {
        events(FitEvent::warning(format!(
            "{first} ({} span{} in all)",
            misaligned.len(),
            if misaligned.len() == 1 { "" } else { "s" }
        )));
    }
    Ok(corpus)
}

/// A test set as the loop scores it: the corpus, its encoded sentences and its documents.
pub(super) type TestSet = (Corpus, Vec<Encoded>, Vec<Range<usize>>);

/// Everything a run trains on, read, checked and described.
pub(super) struct Prepared {
    pub(super) run: ModelDir,
    pub(super) meta: ModelMeta,
    pub(super) vocab: Vocabularies,
    /// Where a resumed run continues from; `None` for a new one.
    pub(super) state: Option<Checkpoint>,
    /// Pretrained vectors for a new run's word table.
    pub(super) vectors: Option<Vectors>,
    /// Train (and, training with dev, dev after it), in the training scheme.
    pub(super) train: Corpus,
    pub(super) dev: Corpus,
    pub(super) encoded: Vec<Encoded>,
    pub(super) dev_encoded: Vec<Encoded>,
    pub(super) dev_documents: Vec<Range<usize>>,
    pub(super) test_set: Option<TestSet>,
}

/// Reads and checks the experiment's corpora and describes the run (a new one from its training
/// data, a resumed one from its directory). A previous run in `train.output` is replaced, with
/// `overwrite`, only once every input has been read and checked. With `with_dev`, dev is trained
/// on too.
pub(super) fn prepare(
    experiment: &Experiment,
    options: &FitOptions,
    with_dev: bool,
    events: &mut dyn FnMut(FitEvent),
) -> Result<Prepared> {
    let data = &experiment.data;
    let run = ModelDir::new(&experiment.train.output);
    let config_toml = experiment.to_toml();
    if !options.resume {
        // Checked again before anything is written; here so that a refusal comes at once.
        run.check_new(options.overwrite)?;
    }

    let train = read_corpus(&data.train, data.columns(), events)?;
    let dev = read_corpus(&data.dev, data.columns(), events)?;
    let test = data
        .test
        .as_deref()
        .map(|path| read_corpus(path, data.columns(), events))
        .transpose()?;
    let file_scheme = data
        .scheme
        .unwrap_or_else(|| TagScheme::detect(train.sentences.iter().map(|s| s.tags.as_slice())));
    let mut train = with_scheme(&train, data.train_scheme);
    if with_dev {
        let after = train.sentences.last().map_or(0, |s| s.document + 1);
        train.sentences.extend(
            with_scheme(&dev, data.train_scheme)
                .sentences
                .into_iter()
                .map(|mut sentence| {
                    sentence.document += after;
                    sentence
                }),
        );
    }

    let (meta, vocab, state, vectors) = if options.resume {
        let (meta, vocab, state) = reopen_run(&run, experiment, &config_toml, events)?;
        (meta, vocab, state, None)
    } else {
        let corpora = Corpora {
            train: &train,
            dev: &dev,
            test: test.as_ref(),
        };
        let (mut meta, vocab, vectors) = describe_run(experiment, &corpora, file_scheme, events)?;
        meta.trained_on_dev = with_dev;
        (meta, vocab, None, vectors)
    };

    let context = data.context;
    let documents = |corpus: &Corpus| match context {
        Context::Sentence => Vec::new(),
        Context::Document => corpus.documents(data.document_tokens),
    };
    let train_documents = documents(&train);
    let mut encoded = vocab.encode_corpus(&train)?;
    with_mention_casing(&mut encoded, &train, &train_documents);
    if !options.resume {
        // Every input has been read and checked: only now is a previous run replaced.
        run.check_new(options.overwrite)?;
        if run.is_run() {
            run.clear()?;
        }
        run.write_description(&meta, &vocab, &config_toml)?;
    }
    let dev_documents = documents(&dev);
    let mut dev_encoded = vocab.encode_corpus_words(&dev);
    with_mention_casing(&mut dev_encoded, &dev, &dev_documents);
    let test_set: Option<TestSet> = test.map(|corpus| {
        let documents = documents(&corpus);
        let mut encoded = vocab.encode_corpus_words(&corpus);
        with_mention_casing(&mut encoded, &corpus, &documents);
        (corpus, encoded, documents)
    });
    let dev_unknown_tags = unknown_tags(&dev, &vocab, data.train_scheme);
    if !dev_unknown_tags.is_empty() {
        events(FitEvent::warning(format!(
            "{}: tags never seen in training, which the model cannot predict: {}",
            dev.path.display(),
            dev_unknown_tags.join(", ")
        )));
    }
    Ok(Prepared {
        run,
        meta,
        vocab,
        state,
        vectors,
        train,
        dev,
        encoded,
        dev_encoded,
        dev_documents,
        test_set,
    })
}

/// Sets the mention casing of `encoded` (`corpus`'s sentences) from `documents`, when reading
/// documents.
fn with_mention_casing(encoded: &mut [Encoded], corpus: &Corpus, documents: &[Range<usize>]) {
    if !documents.is_empty() {
        let words: Vec<&[String]> = corpus
            .sentences
            .iter()
            .map(|s| s.words.as_slice())
            .collect();
        set_mention_casing(encoded, &words, documents);
    }
}

fn with_scheme(corpus: &Corpus, scheme: TagScheme) -> Corpus {
    let mut converted = corpus.clone();
    for sentence in &mut converted.sentences {
        sentence.tags = convert_tags(&sentence.tags, scheme);
    }
    converted
}

/// The corpora of an experiment, as read.
struct Corpora<'a> {
    train: &'a Corpus,
    dev: &'a Corpus,
    test: Option<&'a Corpus>,
}

/// Describes a new run: vocabularies from the training set (extended by pretrained vectors when
/// given) and the model description. Nothing is written.
fn describe_run(
    experiment: &Experiment,
    corpora: &Corpora,
    file_scheme: TagScheme,
    events: &mut dyn FnMut(FitEvent),
) -> Result<(ModelMeta, Vocabularies, Option<Vectors>)> {
    let data = &experiment.data;
    let (train, dev) = (corpora.train, corpora.dev);
    let mut vocab =
        Vocabularies::build(&train.sentences, data.normalization(), data.min_word_count);
    let vectors = data.vectors.as_deref().map(read_vectors).transpose()?;
    if let Some(vectors) = &vectors {
        if vectors.dim != experiment.model.word_dim {
            let path = data.vectors.as_deref().unwrap_or(Path::new(""));
            let message = format!(
                "model.word_dim is {} but the vectors in {} have {} dimensions",
                experiment.model.word_dim,
                path.display(),
                vectors.dim
            );
            return Err(DataError::file(path, message).into());
        }
        let corpora: Vec<&Corpus> = [Some(train), Some(dev), corpora.test]
            .into_iter()
            .flatten()
            .collect();
        let added = vocab.extend_with_vectors(&corpora, vectors);
        let coverage = |corpus: &Corpus| {
            let words = corpus.sentences.iter().flat_map(|s| &s.words);
            let found = words.clone().filter(|w| vectors.get(w).is_some()).count();
            100.0 * found as f64 / words.count().max(1) as f64
        };
        events(FitEvent::info(format!(
            "vectors: {} words of {} dimensions; {:.1}% of train and {:.1}% of dev tokens have one \
                 (OOV {:.1}% / {:.1}%); {added} words added to the vocabulary",
            vectors.len(),
            vectors.dim,
            coverage(train),
            coverage(dev),
            100.0 - coverage(train),
            100.0 - coverage(dev)
        )));
    }
    let mut sizes = VocabSizes::from(&vocab);
    if experiment.model.char_lm {
        sizes.lm_words = lm_vocabulary_size(&vocab, train, data.lm_min_count);
        let covered: usize = train
            .sentences
            .iter()
            .flat_map(|s| &s.words)
            .filter(|w| (2..sizes.lm_words).contains(&vocab.word_id(w)))
            .count();
        events(FitEvent::info(format!(
            "language model: predicts the {} words seen at least {} times ({:.1}% of training tokens), the rest as <unk>",
            sizes.lm_words - 2,
            data.lm_min_count,
            100.0 * covered as f64
                / train
                    .sentences
                    .iter()
                    .map(|s| s.words.len())
                    .sum::<usize>()
                    .max(1) as f64
        )));
    }
    let meta = ModelMeta {
        format: FORMAT_VERSION,
        nertrain_version: env!("CARGO_PKG_VERSION").to_string(),
        model: experiment.model.clone(),
        crf: experiment.crf.clone(),
        sizes,
        file_scheme,
        train_scheme: data.train_scheme,
        columns: data.columns(),
        max_word_len: data.max_word_len,
        document: (data.context == Context::Document).then_some(DocumentContext {
            max_tokens: data.document_tokens,
            consistency: 0.0,
        }),
        trained_on_dev: false,
        tokenizer: Some(TokenizerSpec::learn(&train.sentences)),
    };
    Ok((meta, vocab, vectors))
}

/// How many of the most frequent word ids the language model predicts (with `<pad>` and `<unk>`):
/// the vocabulary orders training words by count, so those seen `min_count` times are a prefix.
fn lm_vocabulary_size(vocab: &Vocabularies, train: &Corpus, min_count: usize) -> usize {
    let mut counts = vec![0usize; vocab.words.len()];
    for word in train.sentences.iter().flat_map(|s| &s.words) {
        counts[vocab.word_id(word)] += 1;
    }
    2 + counts[2..].iter().take_while(|&&n| n >= min_count).count()
}

/// Which word ids occur exactly once in the training sentences.
pub(super) fn singleton_words(sentences: &[Encoded], vocab_size: usize) -> Vec<bool> {
    let mut counts = vec![0usize; vocab_size];
    for id in sentences.iter().flat_map(|s| &s.words) {
        counts[*id] += 1;
    }
    counts
        .into_iter()
        .enumerate()
        .map(|(id, n)| n == 1 && id != Vocab::UNK_ID)
        .collect()
}

/// Tags of `corpus` (converted to `scheme`) that the tag vocabulary lacks.
fn unknown_tags(corpus: &Corpus, vocab: &Vocabularies, scheme: TagScheme) -> Vec<String> {
    let mut unknown: Vec<String> = corpus
        .sentences
        .iter()
        .flat_map(|s| convert_tags(&s.tags, scheme))
        .filter(|tag| vocab.tags.id(tag).is_none())
        .collect();
    unknown.sort();
    unknown.dedup();
    unknown
}
