//! Reading a run's data and describing a new run: the corpora with every tag checked and
//! converted to the training scheme, the vocabularies (extended by pretrained vectors), the
//! model description, and the facts about the training words that the loop needs.

use std::ops::Range;
use std::path::Path;

use burn::tensor::Device;
use nertrain_annotate::read_sentences;
use nertrain_data::{
    ColumnSpec, Context, Corpus, DataError, Dictionary, Encoded, Featurizer, Label, Mention,
    Sentence, SubwordTokenizer, TOKENIZER_FILE, TagScheme, TextNormalization, Tokenizer,
    TokenizerSpec, Vectors, Vocab, Vocabularies, convert_tags, read_dictionary, read_vectors,
};
use nertrain_model::encoder::{
    CONFIG_FILE, EncoderConfig, PretrainedEncoder, Tuning, load_checkpoint,
};
use nertrain_model::files::{DictionaryMeta, SubwordsCopy};
use nertrain_model::{
    DataSummary, DocumentContext, FORMAT_VERSION, FileSummary, ModelFiles, ModelMeta, Network,
    NetworkConfig, StartedFrom, VocabSizes, first_non_finite,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::Serialize;

use super::checkpoint::{Checkpoint, reopen_run};
use super::distill::Teachers;
use super::events::{FitEvent, FitOptions};
use crate::model_dir::ModelDir;
use crate::{Experiment, Result};

/// Reads a training, dev or test file ([`read_sentences`]): CoNLL columns (unknown labels
/// allowed, refused later where every label is needed), or an annotation tool's export cut into
/// words and sentences by the treebank rules, its warnings shown.
fn read_corpus(
    path: &Path,
    columns: &ColumnSpec,
    events: &mut dyn FnMut(FitEvent),
) -> Result<Corpus<Label>> {
    let (corpus, warnings) = read_sentences(path, columns)?;
    for warning in warnings {
        events(FitEvent::warning(warning));
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
    /// The model a new run continues (`train.start_from`), read and checked whole before
    /// anything of the run was written.
    pub(super) start: Option<Network>,
    /// The pretrained encoder a run starts from (`model.pretrained`), read and checked once
    /// before anything of the run was written; `None` when the run continues a model or
    /// resumes from a checkpoint, whose weights replace it.
    pub(super) pretrained: Option<PretrainedEncoder>,
    /// Train (and, training with dev, dev after it), in the training scheme.
    pub(super) train: Corpus<Label>,
    pub(super) dev: Corpus,
    pub(super) encoded: Vec<Encoded>,
    pub(super) dev_encoded: Vec<Encoded>,
    pub(super) dev_documents: Vec<Range<usize>>,
    pub(super) test_set: Option<TestSet>,
    /// The dictionaries whose phrases are features, when the model has them.
    pub(super) dictionary: Option<Dictionary>,
    /// The phrases found in each training sentence (empty without a dictionary), some of which
    /// each batch hides (`train.dictionary_dropout`).
    pub(super) train_mentions: Vec<Vec<Mention>>,
    /// Labels the data does not decide (`data.open_labels`), out of the dev score.
    pub(super) open_labels: Vec<String>,
}

/// Reads and checks the experiment's corpora and describes the run (a new one from its training
/// data, a resumed one from its directory). A previous run in `train.output` is replaced, with
/// `overwrite`, only once every input has been read and checked. With `with_dev`, dev is trained
/// on too.
pub(super) fn prepare(
    experiment: &Experiment,
    options: &FitOptions,
    with_dev: bool,
    device: &Device,
    events: &mut dyn FnMut(FitEvent),
) -> Result<Prepared> {
    let run = ModelDir::new(&experiment.train.output);
    let config_toml = experiment.to_toml();
    if !options.resume {
        refuse_new_run_early(experiment, options, &run)?;
    }
    // Teachers first, refused before anything is written.
    let teachers = Teachers::load(experiment, options, device, events)?;
    let read = read_corpora(experiment, with_dev, teachers.as_ref(), events)?;
    let (mut meta, vocab, state, vectors, start, dictionary) = open_or_describe(
        experiment,
        (&run, &config_toml),
        (options.resume, with_dev),
        &read,
        device,
        events,
    )?;
    if let Some(teachers) = &teachers {
        teachers.describe(&mut meta, options.resume, &read.unlabelled, &run.path)?;
    }
    let Read {
        train, dev, test, ..
    } = read;
    let pretrained = pretrained_weights(experiment, &meta, state.is_some(), device)?;
    let subwords = subwords((experiment, options.resume), (&run, &meta))?;
    let featurizer = Featurizer::new(&vocab)
        .with_dictionary(dictionary.as_ref())
        .with_subwords(subwords.tokenizer().zip(max_positions(&meta)));
    let EncodedCorpora {
        mut encoded,
        train_mentions,
        dev_encoded,
        dev_documents,
        test_set,
    } = encode(experiment, &featurizer, &train, &dev, test)?;
    if let Some(teachers) = &teachers {
        let tags = (&vocab.tags, meta.train_scheme);
        teachers.set_marginals(&mut encoded, &train, tags, events)?;
    }
    if !options.resume {
        let copy = subwords.copy();
        meta.subwords_sha256 = copy.map(|copy| copy.sha256.clone());
        let subwords = copy.map(|copy| copy.bytes.as_slice());
        let description = Description::new(&meta, &vocab, dictionary.as_ref(), &config_toml);
        write_new_run(&run, options.overwrite, description.with_subwords(subwords))?;
    }
    warn_of_unknown_tags(&dev, &vocab, experiment.data.train_scheme, events);
    Ok(Prepared {
        run,
        meta,
        vocab,
        state,
        vectors,
        start,
        pretrained,
        train,
        dev,
        encoded,
        dev_encoded,
        dev_documents,
        test_set,
        dictionary,
        train_mentions,
        open_labels: experiment.data.open_labels.clone(),
    })
}

/// Whether a new run may be written where the experiment puts it: checked again before anything
/// is written; here so that a refusal comes at once.
fn refuse_new_run_early(
    experiment: &Experiment,
    options: &FitOptions,
    run: &ModelDir,
) -> Result<()> {
    run.check_new(options.overwrite)?;
    match &experiment.train.start_from {
        Some(from) => refuse_start_inside(from, run),
        None => Ok(()),
    }
}

/// What [`open_or_describe`] gives: the model's description, vocabularies, a resumed run's
/// checkpoint, the vectors a new run's word table starts from, the network it continues, and
/// the dictionary.
type RunDescription = (
    ModelMeta,
    Vocabularies,
    Option<Checkpoint>,
    Option<Vectors>,
    Option<Network>,
    Option<Dictionary>,
);

/// The run described: a resumed one from its directory, a new one from its training data (with
/// what its data were, and whether dev is trained on too).
fn open_or_describe(
    experiment: &Experiment,
    (run, config_toml): (&ModelDir, &str),
    (resume, with_dev): (bool, bool),
    read: &Read,
    device: &Device,
    events: &mut dyn FnMut(FitEvent),
) -> Result<RunDescription> {
    if resume {
        let (meta, vocab, state) = reopen_run(run, experiment, config_toml, events)?;
        let dictionary = run.read_dictionary(&meta)?;
        return Ok((meta, vocab, state, None, None, dictionary));
    }
    let corpora = Corpora {
        train: &read.train,
        dev: &read.dev,
        test: read.test.as_ref(),
    };
    let ((mut meta, vocab, vectors, dictionary), start) =
        describe_new_run(experiment, &corpora, read.file_scheme, device, events)?;
    meta.trained_on_dev = with_dev;
    meta.data = Some(DataSummary {
        train: read.train_summary.clone(),
        dev: FileSummary::of(&read.dev),
        test: read.test.as_ref().map(FileSummary::of),
    });
    Ok((meta, vocab, None, vectors, start, dictionary))
}

/// Warns of the tags of `dev` that training never saw, which the model cannot predict.
fn warn_of_unknown_tags(
    dev: &Corpus,
    vocab: &Vocabularies,
    scheme: TagScheme,
    events: &mut dyn FnMut(FitEvent),
) {
    let unknown = unknown_tags(dev, vocab, scheme);
    if !unknown.is_empty() {
        events(FitEvent::warning(format!(
            "{}: tags never seen in training, which the model cannot predict: {}",
            dev.path.display(),
            unknown.join(", ")
        )));
    }
}

/// What a new run's directory is given before it trains.
struct Description<'a> {
    meta: &'a ModelMeta,
    vocab: &'a Vocabularies,
    dictionary: Option<&'a Dictionary>,
    config_toml: &'a str,
    /// The encoder's tokenizer to write in (`subwords.json`), when the model has an encoder.
    subwords: Option<&'a [u8]>,
}

impl<'a> Description<'a> {
    fn new(
        meta: &'a ModelMeta,
        vocab: &'a Vocabularies,
        dictionary: Option<&'a Dictionary>,
        config_toml: &'a str,
    ) -> Self {
        Self {
            meta,
            vocab,
            dictionary,
            config_toml,
            subwords: None,
        }
    }

    /// With the encoder's tokenizer's bytes, when the model has an encoder.
    fn with_subwords(self, subwords: Option<&'a [u8]>) -> Self {
        Self { subwords, ..self }
    }
}

/// Replaces a previous run in `run` (with `overwrite`) by a new one's description, once every
/// input has been read and checked.
fn write_new_run(run: &ModelDir, overwrite: bool, description: Description) -> Result<()> {
    run.check_new(overwrite)?;
    if run.is_run() {
        run.clear()?;
    }
    let Description {
        meta,
        vocab,
        dictionary,
        config_toml,
        subwords,
    } = description;
    run.write_description(meta, vocab, dictionary, config_toml)?;
    if let Some(bytes) = subwords {
        run.files().write_subwords(bytes)?;
    }
    Ok(())
}

/// The run's pretrained encoder's tokenizer, when it has an encoder: read from the run itself,
/// resumed, or from the checkpoint or the model continued, for a new run, which copies it in.
enum Subwords {
    /// No encoder (or, continued, none to read).
    None,
    /// The resumed run's own.
    Resumed(SubwordTokenizer),
    /// What a new run copies in.
    Copied(SubwordsCopy),
}

impl Subwords {
    /// The tokenizer the sentences are cut into sub-words by.
    fn tokenizer(&self) -> Option<&SubwordTokenizer> {
        match self {
            Subwords::None => None,
            Subwords::Resumed(tokenizer) => Some(tokenizer),
            Subwords::Copied(copy) => Some(&copy.tokenizer),
        }
    }

    /// What a new run copies in.
    fn copy(&self) -> Option<&SubwordsCopy> {
        match self {
            Subwords::Copied(copy) => Some(copy),
            _ => None,
        }
    }
}

/// The run's pretrained encoder's tokenizer, when it has an encoder.
fn subwords(
    (experiment, resume): (&Experiment, bool),
    (run, meta): (&ModelDir, &ModelMeta),
) -> Result<Subwords> {
    if meta.sizes.encoder.is_none() {
        return Ok(Subwords::None);
    }
    if resume {
        return Ok(run
            .files()
            .read_subwords(meta)?
            .map_or(Subwords::None, Subwords::Resumed));
    }
    Ok(subwords_of_new_run(experiment, meta)?.map_or(Subwords::None, Subwords::Copied))
}

/// The most sub-tokens the model's encoder reads at once, when it has one.
fn max_positions(meta: &ModelMeta) -> Option<usize> {
    meta.sizes
        .encoder
        .as_ref()
        .map(|encoder| encoder.max_positions)
}

/// Each sentence's words, as written.
fn sentence_words<L>(corpus: &Corpus<L>) -> Vec<&[String]> {
    corpus
        .sentences
        .iter()
        .map(|s| s.words.as_slice())
        .collect()
}

/// The encoder a run starts from, with the weights of its checkpoint (`model.pretrained`)
/// checked against what its `config.json` describes: read once, before anything of the run is
/// written, so that a bad one is refused first. Not read for a run that continues a model, or
/// one resumed from a checkpoint (`checkpointed`): their own weights are the encoder's.
fn pretrained_weights(
    experiment: &Experiment,
    meta: &ModelMeta,
    checkpointed: bool,
    device: &Device,
) -> Result<Option<PretrainedEncoder>> {
    let (None, false, Some(encoder), Some(checkpoint)) = (
        &meta.started_from,
        checkpointed,
        &meta.sizes.encoder,
        &experiment.model.pretrained,
    ) else {
        return Ok(None);
    };
    Ok(Some(load_checkpoint(
        encoder.init(device),
        encoder,
        checkpoint,
    )?))
}

/// The pretrained encoder's tokenizer of a new run, read to be copied in: the checkpoint's
/// (`model.pretrained`), or that of the model the run continues.
fn subwords_of_new_run(experiment: &Experiment, meta: &ModelMeta) -> Result<Option<SubwordsCopy>> {
    let Some(encoder) = &meta.sizes.encoder else {
        return Ok(None);
    };
    let path = match (&meta.started_from, &experiment.model.pretrained) {
        (Some(from), _) => ModelFiles::new(&from.path).subwords_file(),
        (None, Some(checkpoint)) => checkpoint.join(TOKENIZER_FILE),
        (None, None) => return Ok(None),
    };
    Ok(Some(ModelFiles::subwords_to_copy(&path, encoder)?))
}

/// An experiment's corpora as read and checked: train in the training scheme (with what it
/// rehearses, dev after it when training with dev, and the unlabelled text after them), dev
/// and test as gold, and the scheme the files are in.
struct Read {
    train: Corpus<Label>,
    /// Train as labelled: without the unlabelled text.
    train_summary: FileSummary,
    /// The unlabelled files, as read.
    unlabelled: Vec<FileSummary>,
    dev: Corpus,
    test: Option<Corpus>,
    file_scheme: TagScheme,
}

/// Reads and checks the experiment's corpora.
fn read_corpora(
    experiment: &Experiment,
    with_dev: bool,
    teachers: Option<&Teachers>,
    events: &mut dyn FnMut(FitEvent),
) -> Result<Read> {
    let data = &experiment.data;
    let columns = data.columns();
    let train = read_corpus(&data.train, &columns, events)?;
    let dev =
        read_corpus(&data.dev, &columns, events)?.complete("dev data, which chooses the model,")?;
    let test = data
        .test
        .as_deref()
        .map(|path| -> Result<Corpus> {
            Ok(read_corpus(path, &columns, events)?.complete("test data")?)
        })
        .transpose()?;
    let file_scheme = data
        .scheme
        .unwrap_or_else(|| TagScheme::detect(train.sentences.iter().map(|s| s.tags.as_slice())));
    let mut train = train.into_scheme(file_scheme, data.train_scheme)?;
    train.open_labels(&data.open_labels, data.train_scheme);
    if let Some(path) = &data.rehearse {
        let rehearsed = rehearsal(experiment, path, file_scheme, events)?;
        append_documents(&mut train, rehearsed);
    }
    if with_dev {
        let dev = Corpus::<Label>::from(dev.clone()).into_scheme(file_scheme, data.train_scheme)?;
        append_documents(&mut train, dev);
    }
    let train_summary = FileSummary::of(&train);
    let unlabelled = match teachers {
        Some(teachers) => teachers.read_unlabelled(&experiment.distill.unlabelled, &columns)?,
        None => Vec::new(),
    };
    let unlabelled_summaries = unlabelled.iter().map(FileSummary::of).collect();
    for corpus in unlabelled {
        append_documents(&mut train, corpus);
    }
    Ok(Read {
        train,
        train_summary,
        unlabelled: unlabelled_summaries,
        dev,
        test,
        file_scheme,
    })
}

/// A new run's description, from its training data or continuing the model it starts from, and
/// that model's network.
fn describe_new_run(
    experiment: &Experiment,
    corpora: &Corpora,
    file_scheme: TagScheme,
    device: &Device,
    events: &mut dyn FnMut(FitEvent),
) -> Result<(Described, Option<Network>)> {
    Ok(match &experiment.train.start_from {
        Some(from) => {
            let start = StartModel::load(from, device)?;
            let described =
                describe_continued_run(experiment, corpora, file_scheme, &start, events)?;
            (described, Some(start.model))
        }
        None => (
            describe_run(experiment, corpora, file_scheme, events)?,
            None,
        ),
    })
}

/// The corpora as the model reads them: train, dev and test with their documents' pieces (none
/// when sentences are read alone), and the dictionary's phrases in each training sentence.
struct EncodedCorpora {
    encoded: Vec<Encoded>,
    /// Each training sentence's dictionary phrases, which dictionary dropout hides from; none
    /// without a dictionary.
    train_mentions: Vec<Vec<Mention>>,
    dev_encoded: Vec<Encoded>,
    dev_documents: Vec<Range<usize>>,
    test_set: Option<TestSet>,
}

/// The pieces of `corpus`'s documents the experiment reads together; none when it reads
/// sentences alone.
fn read_together<L>(experiment: &Experiment, corpus: &Corpus<L>) -> Vec<Range<usize>> {
    let data = &experiment.data;
    match data.context {
        Context::Sentence => Vec::new(),
        Context::Document => corpus.documents(data.document_tokens),
    }
}

/// The corpora made the model's inputs by `featurizer`, each read in its documents as the
/// experiment reads them.
fn encode(
    experiment: &Experiment,
    featurizer: &Featurizer,
    train: &Corpus<Label>,
    dev: &Corpus,
    test: Option<Corpus>,
) -> Result<EncodedCorpora> {
    let train_documents = read_together(experiment, train);
    let mut encoded = featurizer.encode_corpus(train, true)?;
    let train_mentions =
        featurizer.complete(&mut encoded, &sentence_words(train), &train_documents)?;
    let dev_documents = read_together(experiment, dev);
    let mut dev_encoded = featurizer.encode_corpus(dev, false)?;
    featurizer.complete(&mut dev_encoded, &sentence_words(dev), &dev_documents)?;
    let test_set: Option<TestSet> = test
        .map(|corpus| -> Result<TestSet> {
            let documents = read_together(experiment, &corpus);
            let mut encoded = featurizer.encode_corpus(&corpus, false)?;
            featurizer.complete(&mut encoded, &sentence_words(&corpus), &documents)?;
            Ok((corpus, encoded, documents))
        })
        .transpose()?;
    Ok(EncodedCorpora {
        encoded,
        train_mentions,
        dev_encoded,
        dev_documents,
        test_set,
    })
}

/// The experiment's dictionaries, read and compiled with the model's tokenizer, when it names
/// any; how much each held is said as it is read.
fn read_dictionaries(
    experiment: &Experiment,
    tokenizer: &TokenizerSpec,
    events: &mut dyn FnMut(FitEvent),
) -> Result<Option<Dictionary>> {
    let sources = &experiment.data.dictionaries;
    if sources.is_empty() {
        return Ok(None);
    }
    let tokenizer = Tokenizer::new(tokenizer).map_err(|e| {
        DataError::file(
            &experiment.data.train,
            format!("the model's tokenizer: {e}"),
        )
    })?;
    let mut entries = Vec::new();
    for source in sources {
        let (path, case) = source.file();
        let (read, counts) = read_dictionary(path, case, &tokenizer)?;
        events(FitEvent::info(counts.summary(path)));
        entries.extend(read);
    }
    let mut labels: Vec<String> = entries.iter().map(|e| e.label.clone()).collect();
    labels.sort();
    labels.dedup();
    let dictionary = Dictionary::new(labels, entries).map_err(|e| {
        DataError::file(
            sources[0].file().0,
            format!("compiling the dictionaries: {e}"),
        )
    })?;
    Ok(Some(dictionary))
}

/// Appends `more`'s sentences to `corpus`, its documents after `corpus`'s.
fn append_documents(corpus: &mut Corpus<Label>, more: Corpus<Label>) {
    let after = corpus.sentences.last().map_or(0, |s| s.document + 1);
    corpus
        .sentences
        .extend(more.sentences.into_iter().map(|mut sentence| {
            sentence.document += after;
            sentence
        }));
}

/// The sentences of an earlier training file mixed in (`data.rehearse`): `rehearse_sentences`
/// of them drawn with the run's seed, in file order, or all; in the training scheme.
fn rehearsal(
    experiment: &Experiment,
    path: &Path,
    file_scheme: TagScheme,
    events: &mut dyn FnMut(FitEvent),
) -> Result<Corpus<Label>> {
    let data = &experiment.data;
    if experiment.train.start_from.is_none() {
        return Err(DataError::file(
            path,
            "data.rehearse mixes an earlier training file into a continued model's training; \
             set train.start_from to the model, or add the file to the training data",
        )
        .into());
    }
    let mut corpus = read_corpus(path, &data.columns(), events)?;
    let wanted = data.rehearse_sentences;
    if wanted > 0 && wanted < corpus.sentences.len() {
        let mut keep = vec![false; corpus.sentences.len()];
        let mut order: Vec<usize> = (0..keep.len()).collect();
        order.shuffle(&mut StdRng::seed_from_u64(experiment.train.seed));
        for &i in &order[..wanted] {
            keep[i] = true;
        }
        let mut kept = keep.into_iter();
        corpus.sentences.retain(|_| kept.next() == Some(true));
    }
    events(FitEvent::info(format!(
        "rehearsal: {} sentences of {}",
        corpus.sentences.len(),
        path.display()
    )));
    Ok(corpus.into_scheme(file_scheme, data.train_scheme)?)
}

/// The first setting in which `given` and `kept` differ, as its key and each one's value as
/// written (JSON, as TOML has it); `None` when they agree.
fn first_difference<T: Serialize>(given: &T, kept: &T) -> Option<(String, String, String)> {
    let object = |value: &T| match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(object)) => object,
        _ => unreachable!("settings serialise as a table"),
    };
    let (given, kept) = (object(given), object(kept));
    given.into_iter().find_map(|(key, value)| {
        let was = &kept[&key];
        (value != *was).then(|| (key, value.to_string(), was.to_string()))
    })
}

/// Refuses settings the experiment gives other than the model it continues has, naming the first
/// as `{section}.{key}`.
fn agree<T: Serialize + PartialEq>(
    section: &str,
    given: &T,
    kept: &T,
) -> std::result::Result<(), String> {
    if given == kept {
        return Ok(());
    }
    match first_difference(given, kept) {
        Some((key, value, was)) => Err(format!(
            "{section}.{key} is {value} in the experiment but {was} in the model"
        )),
        None => Ok(()),
    }
}

/// How a model reads its data, as the experiment's `[data]` names the settings: what a continued
/// model keeps.
#[derive(PartialEq, Serialize)]
struct ContinuedReading {
    train_scheme: TagScheme,
    context: Context,
    lowercase: bool,
    digits_to_zero: bool,
    features: Vec<isize>,
}

/// Refuses to continue a model that lies inside the run directory that replaces it (the run
/// itself, its with-dev model, or a link to either): clearing the run would delete the model.
fn refuse_start_inside(from: &Path, run: &ModelDir) -> Result<()> {
    let (Ok(start), Ok(output)) = (from.canonicalize(), run.path.canonicalize()) else {
        // A start model that does not exist is reported when it is read; an output that does
        // not exist yet holds nothing.
        return Ok(());
    };
    if start.starts_with(&output) {
        return Err(crate::Error::refused(
            from,
            format!(
                "cannot continue a model inside train.output ({}), which this run replaces: \
                 write the continued model to another directory",
                run.path.display()
            ),
        ));
    }
    Ok(())
}

/// The model a run continues, read whole: description, vocabularies and weights.
struct StartModel {
    path: std::path::PathBuf,
    meta: ModelMeta,
    vocab: Vocabularies,
    model: Network,
}

impl StartModel {
    /// Reads the model in `from` and checks that its weights are numbers.
    fn load(from: &Path, device: &Device) -> Result<Self> {
        let files = ModelFiles::new(from);
        let (meta, vocab, model) = files
            .load(device)
            .map_err(|e| crate::Error::model(from, format!("cannot continue this model: {e}")))?;
        if let Some(parameter) = first_non_finite(&model) {
            return Err(crate::Error::model(
                files.weights_file(),
                format!(
                    "parameter {parameter} holds values that are not numbers (NaN or infinite): \
                     the weights are damaged, and cannot be continued"
                ),
            ));
        }
        Ok(Self {
            path: from.to_path_buf(),
            meta,
            vocab,
            model,
        })
    }
}

/// Whether the experiment continues `start` with its network and reads its data as it did.
fn check_continuable(experiment: &Experiment, start: &StartModel) -> Result<()> {
    let data = &experiment.data;
    let (from, old) = (start.path.as_path(), &start.meta);
    let refuse = |message: String| -> Result<()> {
        Err(crate::Error::refused(
            from,
            format!("cannot continue this model: {message}"),
        ))
    };
    let (given, kept) = (experiment.model.architecture(), old.model.architecture());
    if let Err(message) = agree("model", &given, &kept) {
        return refuse(format!("{message}; a continued model keeps its network"));
    }
    let reading = |scheme, document: bool, normalization: TextNormalization, columns: &[isize]| {
        ContinuedReading {
            train_scheme: scheme,
            context: if document {
                Context::Document
            } else {
                Context::Sentence
            },
            lowercase: normalization.lowercase,
            digits_to_zero: normalization.digits_to_zero,
            features: columns.to_vec(),
        }
    };
    let given = reading(
        data.train_scheme,
        data.context == Context::Document,
        data.normalization(),
        &data.columns().feature_columns,
    );
    let kept = reading(
        old.train_scheme,
        old.document.is_some(),
        start.vocab.normalization,
        &old.columns.feature_columns,
    );
    if let Err(message) = agree("data", &given, &kept) {
        return refuse(format!(
            "{message}; a continued model reads its data as it did"
        ));
    }
    Ok(())
}

/// Describes a run that continues the model in `from`: its vocabularies with the training
/// data's new words, characters and tags appended (so every old id keeps its meaning), its
/// architecture, scheme and tokenizer. The experiment must agree with it on what shapes the
/// network and reads the data; dropout and the language-model weight may change.
fn describe_continued_run(
    experiment: &Experiment,
    corpora: &Corpora,
    file_scheme: TagScheme,
    start: &StartModel,
    events: &mut dyn FnMut(FitEvent),
) -> Result<Described> {
    let data = &experiment.data;
    let (from, old) = (start.path.as_path(), &start.meta);
    check_continuable(experiment, start)?;
    let mut vocab = start.vocab.clone();
    let fresh = Vocabularies::build(
        &corpora.train.sentences,
        vocab.normalization,
        data.min_word_count,
    );
    let tags_added = vocab.extend(&fresh);
    let vectors = add_vectors(experiment, corpora, &mut vocab, events)?;
    events(FitEvent::info(format!(
        "continuing {}: {} new words, {} new characters, new tags: {}",
        from.display(),
        vocab.words.len() - old.sizes.words,
        vocab.chars.len() - old.sizes.chars,
        if tags_added.is_empty() {
            "none".to_string()
        } else {
            tags_added.join(", ")
        }
    )));
    // Its architecture is the model's (checked above); its regularisation the experiment's.
    let model = experiment.model.clone();
    let sizes = VocabSizes {
        lm_words: old.sizes.lm_words,
        dictionary_labels: old.sizes.dictionary_labels,
        encoder: old.sizes.encoder.clone(),
        ..VocabSizes::from(&vocab)
    };
    let started_from = StartedFrom {
        path: from.to_path_buf(),
        sizes: old.sizes.clone(),
        tags_added,
    };
    let mut meta = describe(experiment, model, sizes, file_scheme, old.tokenizer.clone());
    meta.started_from = Some(started_from);
    // The dictionary's labels are the model's features: a continued model keeps its own.
    let dictionary = ModelFiles::new(from)
        .read_dictionary(old)
        .map_err(|e| crate::Error::model(from, format!("cannot continue this model: {e}")))?;
    if dictionary.is_none() && !data.dictionaries.is_empty() {
        return Err(crate::Error::model(
            from,
            "was trained without dictionaries, and a continued model keeps its features: train \
             a new model to use data.dictionaries",
        ));
    }
    meta.dictionary = old.dictionary.clone();
    Ok((meta, vocab, vectors, dictionary))
}

/// A new run's model description, in this version's format: `model` with vocabularies of
/// `sizes`, trained on files in `file_scheme` as the experiment reads them, neither on dev nor
/// from another model (yet).
fn describe(
    experiment: &Experiment,
    model: NetworkConfig,
    sizes: VocabSizes,
    file_scheme: TagScheme,
    tokenizer: Option<TokenizerSpec>,
) -> ModelMeta {
    let data = &experiment.data;
    ModelMeta {
        format: FORMAT_VERSION,
        nertrain_version: env!("CARGO_PKG_VERSION").to_string(),
        model,
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
        tokenizer,
        started_from: None,
        dictionary: None,
        subwords_sha256: None,
        data: None,
        distilled: None,
    }
}

/// A run described: the model's description, vocabularies, the vectors its word table starts
/// from and its dictionary.
type Described = (ModelMeta, Vocabularies, Option<Vectors>, Option<Dictionary>);

/// The corpora of an experiment, as read.
struct Corpora<'a> {
    train: &'a Corpus<Label>,
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
) -> Result<Described> {
    let data = &experiment.data;
    let train = corpora.train;
    let mut vocab =
        Vocabularies::build(&train.sentences, data.normalization(), data.min_word_count);
    if vocab.tags.is_empty() {
        return Err(DataError::file(
            &train.path,
            "no labelled token: every tag is unknown (-), so there is nothing to learn",
        )
        .into());
    }
    let vectors = add_vectors(experiment, corpora, &mut vocab, events)?;
    let mut sizes = VocabSizes::from(&vocab);
    if experiment.model.char_lm {
        sizes.lm_words = lm_vocabulary_size(&vocab, train, data.lm_min_count);
        events(FitEvent::info(lm_coverage(
            experiment,
            &vocab,
            train,
            sizes.lm_words,
        )));
    }
    for (feature, values) in data.features.iter().zip(&vocab.features) {
        events(FitEvent::info(format!(
            "feature column {}: {} values",
            feature.column,
            values.len() - 2
        )));
    }
    sizes.encoder = (experiment.model.pretrained.as_deref())
        .map(|checkpoint| read_encoder_config(experiment, checkpoint, events))
        .transpose()?;
    let tokenizer = TokenizerSpec::learn(&train.sentences);
    let dictionary = read_dictionaries(experiment, &tokenizer, events)?;
    sizes.dictionary_labels = dictionary.as_ref().map_or(0, |d| d.labels().len());
    let mut meta = describe(
        experiment,
        experiment.model.clone(),
        sizes,
        file_scheme,
        Some(tokenizer),
    );
    meta.dictionary = dictionary.as_ref().map(DictionaryMeta::of);
    Ok((meta, vocab, vectors, dictionary))
}

/// What the character language model predicts (its `lm_words` words, `<unk>` and padding
/// included) of the training tokens, as said to the user.
fn lm_coverage(
    experiment: &Experiment,
    vocab: &Vocabularies,
    train: &Corpus<Label>,
    lm_words: usize,
) -> String {
    let words = || train.sentences.iter().flat_map(|s| &s.words);
    let covered = words()
        .filter(|w| (2..lm_words).contains(&vocab.word_id(w)))
        .count();
    format!(
        "language model: predicts the {} words seen at least {} times ({:.1}% of training tokens), the rest as <unk>",
        lm_words - 2,
        experiment.data.lm_min_count,
        100.0 * covered as f64 / words().count().max(1) as f64
    )
}

/// The pretrained encoder's description in `checkpoint` (`model.pretrained`), checked against
/// the layers the experiment reads of it, and said.
fn read_encoder_config(
    experiment: &Experiment,
    checkpoint: &Path,
    events: &mut dyn FnMut(FitEvent),
) -> Result<EncoderConfig> {
    let encoder = EncoderConfig::read(checkpoint)?;
    let layers = experiment.model.pretrained_layers;
    layers
        .check(&encoder)
        .map_err(|message| DataError::file(&checkpoint.join(CONFIG_FILE), message))?;
    let tuning = match experiment.model.pretrained_tuning {
        Tuning::FineTune => "fine-tuned",
        Tuning::Frozen => "frozen",
    };
    events(FitEvent::info(format!(
        "pretrained encoder {}: {:?}, {} layers of {}, {} sub-tokens, {tuning}, layers: {layers}",
        checkpoint.display(),
        encoder.family,
        encoder.layers,
        encoder.hidden,
        encoder.vocab_size,
    )));
    Ok(encoder)
}

/// Reads the experiment's pretrained vectors, when it names them, and adds the words of its
/// corpora that they know to `vocab`.
fn add_vectors(
    experiment: &Experiment,
    corpora: &Corpora,
    vocab: &mut Vocabularies,
    events: &mut dyn FnMut(FitEvent),
) -> Result<Option<Vectors>> {
    let data = &experiment.data;
    let (train, dev) = (corpora.train, corpora.dev);
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
        fn words<L>(sentences: &[Sentence<L>]) -> impl Iterator<Item = &String> + '_ {
            sentences.iter().flat_map(|s| &s.words)
        }
        let test = corpora.test.map_or(&[][..], |t| &t.sentences);
        let added = vocab.extend_with_vectors(
            words(&train.sentences)
                .chain(words(&dev.sentences))
                .chain(words(test)),
            vectors,
        );
        let coverage = |words: &mut dyn Iterator<Item = &String>| {
            let (mut found, mut all) = (0, 0);
            for word in words {
                found += usize::from(vectors.get(word).is_some());
                all += 1;
            }
            100.0 * found as f64 / all.max(1) as f64
        };
        let (train, dev) = (
            coverage(&mut words(&train.sentences)),
            coverage(&mut words(&dev.sentences)),
        );
        events(FitEvent::info(format!(
            "vectors: {} words of {} dimensions; {:.1}% of train and {:.1}% of dev tokens have one \
                 (OOV {:.1}% / {:.1}%); {added} words added to the vocabulary",
            vectors.len(),
            vectors.dim,
            train,
            dev,
            100.0 - train,
            100.0 - dev
        )));
    }
    Ok(vectors)
}

/// How many of the most frequent word ids the language model predicts (with `<pad>` and `<unk>`):
/// the vocabulary orders training words by count, so those seen `min_count` times are a prefix.
fn lm_vocabulary_size(vocab: &Vocabularies, train: &Corpus<Label>, min_count: usize) -> usize {
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

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;
    use std::path::PathBuf;

    use nertrain_data::MentionCasing;
    use nertrain_tagger::Tagger;

    use super::*;
    use crate::fit;

    /// The sample's file `name` with a feature column after the words: whether each is
    /// capitalised.
    fn with_column(name: &str, dir: &Path) -> PathBuf {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sample");
        let text = std::fs::read_to_string(root.join(name)).unwrap();
        let mut out = String::new();
        for line in text.lines() {
            match line.split_once(' ') {
                Some((word, tag)) => {
                    let upper = word.chars().next().is_some_and(char::is_uppercase);
                    let value = if upper { "C" } else { "l" };
                    writeln!(out, "{word} {value} {tag}").unwrap();
                }
                None => writeln!(out, "{line}").unwrap(),
            }
        }
        let path = dir.join(name);
        std::fs::write(&path, out).unwrap();
        path
    }

    #[test]
    fn a_sentence_tagged_reads_the_inputs_it_was_trained_on() {
        let dir = tempfile::tempdir().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let (train, dev) = (
            with_column("train.txt", dir.path()),
            with_column("dev.txt", dir.path()),
        );
        let run = dir.path().join("run");
        // Every kind of feature a sentence gets beyond its words: a feature column, mention
        // casing over documents (cut into pieces), dictionary places, and an encoder's windows.
        let toml = format!(
            r#"
[data]
train = {train:?}
dev = {dev:?}
context = "document"
document_tokens = 150
dictionaries = [{lists:?}]
features = [{{ column = 1, dim = 3 }}]

[model]
word_dim = 8
mention_dim = 3
char_features = "cnn"
char_dim = 6
char_filters = 6
hidden = 8
dictionary_dim = 2
pretrained = {bert:?}
pretrained_tuning = "frozen"

[train]
epochs = 1
output = {run:?}
"#,
            lists = root.join("data/sample/lists.tsv"),
            bert = root.join("data/encoders/bert"),
        );
        let experiment = Experiment::parse(&toml, &[]).unwrap();
        let device = Device::default();
        fit(&experiment, FitOptions::default(), &device, &mut |_| {}).unwrap();
        // What training made of dev, as a run of the same experiment beside it reads it.
        let mut again = experiment.clone();
        again.train.output = dir.path().join("again");
        let prepared =
            prepare(&again, &FitOptions::default(), false, &device, &mut |_| {}).unwrap();
        let trained = &prepared.dev_encoded;
        let tagger = Tagger::load(&run, &device).unwrap();
        let tagged = tagger.corpus_inputs(&prepared.dev).unwrap();
        assert_eq!(tagged.len(), trained.len());
        for (i, (tagged, trained)) in tagged.iter().zip(trained).enumerate() {
            assert_eq!(tagged, trained, "dev sentence {i}");
        }
        // Each kind was there to compare.
        let unseen = MentionCasing::Unseen.id();
        assert!(
            trained
                .iter()
                .any(|e| e.mentions.iter().any(|&m| m != unseen))
        );
        assert!(trained.iter().any(|e| e.dictionary.iter().any(|&p| p != 0)));
        assert!(
            trained
                .iter()
                .all(|e| !e.windows.is_empty() && !e.features.is_empty())
        );
        assert!(prepared.dev_documents.len() > 1);
    }
}
