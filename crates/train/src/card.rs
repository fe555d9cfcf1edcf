//! A run's model card: a README.md with the Hugging Face model-card metadata (`model-index` with
//! the dev and test scores the run recorded, per label), the data it was trained on, the
//! experiment, the labels and scheme, how to tag, and its limits, all read from the run
//! directory. The metadata is YAML in JSON's flow style, which every YAML reader reads and which
//! keeps each value exactly as the score files hold it.

use std::fmt::Write;
use std::path::Path;

use nertrain_data::TagScheme;
use nertrain_model::encoder::LayerUse;
use nertrain_model::{ModelFiles, ModelMeta, RecordedScores, StoredThresholds};
use nertrain_tagger::entity_types;
use serde::Serialize;

use crate::{ModelDir, Result};

/// The first line of the body of every card `nertrain card` writes: how a card is told from a
/// README.md of someone else's, which it never replaces.
pub const CARD_MARK: &str = "<!-- Written by `nertrain card` from the model directory: write the model again, not this. -->";

/// One split's scores in `model-index`.
#[derive(Serialize)]
struct IndexResult {
    task: Task,
    dataset: Dataset,
    metrics: Vec<Metric>,
}

#[derive(Serialize)]
struct Task {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'static str,
}

#[derive(Serialize)]
struct Dataset {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    split: &'static str,
}

#[derive(Serialize)]
struct Metric {
    #[serde(rename = "type")]
    kind: &'static str,
    value: f64,
    name: String,
}

#[derive(Serialize)]
struct ModelIndex {
    name: String,
    results: Vec<IndexResult>,
}

/// What a card is made from: everything the run directory records.
struct Run {
    name: String,
    meta: ModelMeta,
    dev: Option<RecordedScores>,
    test: Option<RecordedScores>,
    thresholds: Option<StoredThresholds>,
    experiment: Option<String>,
    weights_sha256: String,
}

/// The model card of the run (or model) in `dir`, as `README.md`'s text.
pub fn model_card(dir: &Path) -> Result<String> {
    let run = read_run(dir)?;
    let mut card = String::new();
    front_matter(&mut card, &run)?;
    body(&mut card, &run, dir);
    Ok(card)
}

fn read_run(dir: &Path) -> Result<Run> {
    let files = ModelFiles::new(dir);
    let meta = files.read_meta()?;
    let vocab = files.read_vocab(&meta)?;
    let labels = entity_types(vocab.tags.items());
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dir.display().to_string());
    let config = ModelDir::new(dir).config_file();
    Ok(Run {
        name,
        dev: files.read_dev_scores().ok(),
        test: files.read_test_scores().ok(),
        thresholds: files.read_thresholds(&labels)?,
        experiment: std::fs::read_to_string(config).ok(),
        weights_sha256: files.weights_sha256()?,
        meta,
    })
}

/// The split's file as `model-index` names its dataset: the file's folder (`conll2003`) and
/// name; the split alone for a model that did not record its files.
fn dataset(path: Option<&Path>, split: &'static str) -> Dataset {
    let name = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| !n.is_empty())
    };
    let folder = name(path.and_then(Path::parent));
    let (name, kind) = match (folder, name(path)) {
        (Some(folder), Some(file)) => (format!("{folder} ({file})"), folder),
        (None, Some(file)) => (file.clone(), file),
        _ => (format!("{split} file"), split.to_string()),
    };
    Dataset { name, kind, split }
}

fn index_result(scores: &RecordedScores, dataset: Dataset) -> IndexResult {
    let overall = &scores.scores.overall;
    let mut metrics = vec![
        metric("f1", overall.f1, "F1"),
        metric("precision", overall.precision, "Precision"),
        metric("recall", overall.recall, "Recall"),
    ];
    for (label, score) in &scores.scores.types {
        metrics.push(metric("f1", score.f1, &format!("{label} F1")));
        metrics.push(metric(
            "precision",
            score.precision,
            &format!("{label} Precision"),
        ));
        metrics.push(metric("recall", score.recall, &format!("{label} Recall")));
    }
    IndexResult {
        task: Task {
            kind: "token-classification",
            name: "Named Entity Recognition",
        },
        dataset,
        metrics,
    }
}

fn metric(kind: &'static str, value: f64, name: &str) -> Metric {
    Metric {
        kind,
        value,
        name: name.into(),
    }
}

fn front_matter(card: &mut String, run: &Run) -> Result<()> {
    let data = run.meta.data.as_ref();
    let mut results = Vec::new();
    if let Some(dev) = &run.dev {
        let path = data.map(|d| d.dev.path.as_path());
        results.push(index_result(dev, dataset(path, "validation")));
    }
    if let Some(test) = &run.test {
        let path = data.and_then(|d| d.test.as_ref()).map(|t| t.path.as_path());
        results.push(index_result(test, dataset(path, "test")));
    }
    let index = [ModelIndex {
        name: run.name.clone(),
        results,
    }];
    card.push_str("---\n");
    writeln!(card, "library_name: {}", json("nertrain")?).ok();
    writeln!(card, "pipeline_tag: {}", json("token-classification")?).ok();
    let tags = ["nertrain", "named-entity-recognition", "bilstm-crf"];
    writeln!(card, "tags: {}", json(&tags)?).ok();
    writeln!(card, "metrics: {}", json(&["f1", "precision", "recall"])?).ok();
    writeln!(card, "model-index: {}", json(&index)?).ok();
    card.push_str("---\n\n");
    Ok(())
}

/// A front-matter value: JSON, which YAML reads as its flow style.
fn json<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| crate::Error::model("model card", e))
}

fn body(card: &mut String, run: &Run, dir: &Path) {
    let meta = &run.meta;
    let labels: Vec<String> = run
        .dev
        .as_ref()
        .map(|d| d.scores.types.keys().cloned().collect())
        .unwrap_or_default();
    writeln!(card, "{CARD_MARK}\n\n# {}\n", text(&run.name)).ok();
    writeln!(
        card,
        "A BiLSTM-CRF sequence labeller trained with nertrain {}; it finds {}.\n",
        meta.nertrain_version,
        if labels.is_empty() {
            "entities".to_string()
        } else {
            labels
                .iter()
                .map(|l| text(l))
                .collect::<Vec<_>>()
                .join(", ")
        }
    )
    .ok();
    scores_section(card, run);
    data_section(card, meta);
    model_section(card, meta);
    thresholds_section(card, run);
    usage_section(card, dir);
    limits_section(card, run);
    if let Some(experiment) = &run.experiment {
        writeln!(
            card,
            "## Experiment\n\nThe run's resolved experiment (`config.toml`):\n"
        )
        .ok();
        writeln!(card, "```toml\n{}```\n", experiment).ok();
    }
}

fn scores_section(card: &mut String, run: &Run) {
    card.push_str("## Scores\n\n");
    let splits: Vec<(&str, &RecordedScores)> = [("dev", &run.dev), ("test", &run.test)]
        .into_iter()
        .filter_map(|(name, s)| s.as_ref().map(|s| (name, s)))
        .collect();
    if splits.is_empty() {
        card.push_str("The run recorded no scores.\n\n");
        return;
    }
    card.push_str(
        "Span precision, recall and F1 by conlleval's rules, as the run recorded them \
         (`dev.json`, `test.json`).\n\n",
    );
    for (name, scores) in splits {
        let epoch = scores
            .epoch
            .map(|e| format!(", epoch {e}"))
            .unwrap_or_default();
        writeln!(card, "**{name}**{epoch}: {} tokens\n", scores.scores.tokens).ok();
        card.push_str("| label | precision | recall | F1 | gold | found |\n");
        card.push_str("|---|---:|---:|---:|---:|---:|\n");
        let overall = std::iter::once(("overall", &scores.scores.overall));
        let types = scores.scores.types.iter().map(|(l, s)| (l.as_str(), s));
        for (label, s) in overall.chain(types) {
            writeln!(
                card,
                "| {} | {:.2} | {:.2} | {:.2} | {} | {} |",
                text(label),
                s.precision,
                s.recall,
                s.f1,
                s.gold,
                s.found
            )
            .ok();
        }
        card.push('\n');
    }
}

fn data_section(card: &mut String, meta: &ModelMeta) {
    card.push_str("## Training data\n\n");
    let Some(data) = &meta.data else {
        card.push_str(
            "Not recorded: the model was written by a nertrain that did not record its data.\n\n",
        );
        return;
    };
    card.push_str("| | file | sentences | words |\n|---|---|---:|---:|\n");
    let rows = [
        ("train", Some(&data.train)),
        ("dev", Some(&data.dev)),
        ("test", data.test.as_ref()),
    ];
    for (split, file) in rows {
        if let Some(file) = file {
            writeln!(
                card,
                "| {split} | {} | {} | {} |",
                code(&file.path.display().to_string()),
                file.sentences,
                file.tokens
            )
            .ok();
        }
    }
    card.push('\n');
    if meta.trained_on_dev {
        card.push_str("It was trained on the dev file too (after the training file).\n\n");
    }
    if let Some(distilled) = &meta.distilled {
        distillation(card, distilled);
    }
}

/// What a distilled model learnt from besides its gold labels.
fn distillation(card: &mut String, distilled: &nertrain_model::Distillation) {
    let teachers: Vec<String> = (distilled.teachers.iter())
        .map(|t| {
            format!(
                "{} (weights {})",
                code(&t.path.display().to_string()),
                t.weights_id
            )
        })
        .collect();
    writeln!(
        card,
        "It was distilled from {}: the teachers' share of the loss {}, their scores divided by \
         {} before their marginals were taken.",
        teachers.join(", "),
        distilled.weight,
        distilled.temperature
    )
    .ok();
    for file in &distilled.unlabelled {
        writeln!(
            card,
            "- unlabelled, learnt from the teachers alone: {}, {} sentences, {} words",
            code(&file.path.display().to_string()),
            file.sentences,
            file.tokens
        )
        .ok();
    }
    card.push('\n');
}

fn model_section(card: &mut String, meta: &ModelMeta) {
    let m = &meta.model;
    card.push_str("## Model\n\n");
    let scheme = |s: TagScheme| s.to_string().to_uppercase();
    writeln!(
        card,
        "- Tags: written in {}, learned in {} ({} tags).",
        scheme(meta.file_scheme),
        scheme(meta.train_scheme),
        meta.sizes.tags
    )
    .ok();
    let chars = serde_json::to_value(m.char_features).ok();
    let chars = chars.as_ref().and_then(|c| c.as_str()).unwrap_or("none");
    writeln!(
        card,
        "- Words: {} words of {} values; character features: {chars}; casing {}.",
        meta.sizes.words, m.word_dim, m.casing_dim
    )
    .ok();
    if let Some(encoder) = &meta.sizes.encoder {
        let tuning = match m.pretrained_tuning {
            nertrain_model::encoder::Tuning::FineTune => "fine-tuned",
            nertrain_model::encoder::Tuning::Frozen => "frozen",
        };
        let family = serde_json::to_value(encoder.family).ok();
        let family = family.as_ref().and_then(|f| f.as_str()).unwrap_or("bert");
        let given = match m.pretrained_layers {
            LayerUse::Mix => "a mix of its layers".to_string(),
            LayerUse::ConcatLast(n) => format!("its last {n} layers side by side"),
        };
        writeln!(
            card,
            "- Pretrained encoder: {}, {} layers of {}, {tuning}; each word is given {given} \
             at its first sub-token (its tokenizer is the model's `subwords.json`).",
            text(family),
            encoder.layers,
            encoder.hidden
        )
        .ok();
    }
    writeln!(
        card,
        "- BiLSTM: {} per direction, dropout {}.",
        m.hidden, m.dropout
    )
    .ok();
    writeln!(
        card,
        "- CRF: decoding {}constrained to the scheme.",
        if meta.crf.constrained_decoding {
            ""
        } else {
            "not "
        }
    )
    .ok();
    let context = match meta.document {
        Some(d) => format!("its document (consistency weight {})", d.consistency),
        None => "the sentence alone".into(),
    };
    writeln!(card, "- Reads each sentence with {context}.").ok();
    if let Some(dictionary) = &meta.dictionary {
        writeln!(
            card,
            "- Dictionary features: {} entries of {}.",
            dictionary.entries,
            dictionary.labels.join(", ")
        )
        .ok();
    }
    card.push('\n');
}

fn thresholds_section(card: &mut String, run: &Run) {
    let Some(thresholds) = run.thresholds.as_ref().filter(|t| !t.labels.is_empty()) else {
        return;
    };
    card.push_str(
        "## Confidence thresholds\n\nEntities below their label's threshold are left out, and \
         a label's bias is added to its tags' emission scores when the best path is chosen \
         (`thresholds.json`; `--all-entities` decodes without either).\n\n",
    );
    card.push_str("| label | threshold | bias | chosen on | recall asked | precision | recall |\n");
    card.push_str("|---|---:|---:|---|---:|---:|---:|\n");
    for (label, t) in &thresholds.labels {
        let (label, threshold, bias) = (text(label), t.threshold, t.bias);
        match &t.chosen {
            Some(c) => writeln!(
                card,
                "| {label} | {threshold:.4} | {bias:.4} | {} | {} | {:.2} | {:.2} |",
                code(&c.file.display().to_string()),
                c.target_recall,
                c.precision,
                c.recall
            ),
            None => writeln!(card, "| {label} | {threshold:.4} | {bias:.4} | | | | |"),
        }
        .ok();
    }
    card.push('\n');
}

/// `raw` as Markdown text that shows it as it is, in a table cell too: HTML and Markdown's
/// marks escaped, `|` as `\|` (which ends a cell otherwise).
fn text(raw: &str) -> String {
    let mut escaped = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '&' => escaped.push_str("&amp;"),
            '\n' | '\r' => escaped.push(' '),
            '\\' | '|' | '`' | '*' | '_' | '[' | ']' | '#' | '!' => {
                escaped.push('\\');
                escaped.push(c);
            }
            c => escaped.push(c),
        }
    }
    escaped
}

/// `raw` as a code span that a table cell holds: `|` escaped (tables split cells before code
/// spans are read); text as [`text`] makes it where a backtick would end the span.
fn code(raw: &str) -> String {
    if raw.contains('`') || raw.contains(['\n', '\r']) {
        return text(raw);
    }
    format!("`{}`", raw.replace('|', "\\|"))
}

fn usage_section(card: &mut String, dir: &Path) {
    let dir = dir.display();
    writeln!(
        card,
        "## How to tag\n\n```sh\nnertrain tag --model {dir} \"Peter lives in Berlin.\"\n\
         nertrain eval --model {dir} --data gold.txt\nnertrain serve --model {dir}\n```\n\n\
         ```python\nimport nertrain\n\ntagger = nertrain.Tagger(\"{dir}\")\n\
         print(tagger.tag([\"Peter lives in Berlin.\"]))\n```\n"
    )
    .ok();
}

fn limits_section(card: &mut String, run: &Run) {
    let meta = &run.meta;
    card.push_str("## Limits\n\n");
    card.push_str(
        "- It finds only the labels above, as its training data marked them; text from \
         elsewhere (another genre, period or language) scores lower than the test file.\n",
    );
    let tokenizer = match meta.tokenizer {
        Some(nertrain_data::TokenizerSpec::Treebank { .. }) => {
            "treebank rules, with the words its training data kept whole"
        }
        _ => "BERT's pre-tokenizer",
    };
    writeln!(
        card,
        "- Text is cut into words with {tokenizer}; an entity ends at a word's edge."
    )
    .ok();
    if meta.trained_on_dev {
        card.push_str("- Its dev scores are not held out: it was trained on the dev file.\n");
    } else {
        card.push_str("- The dev file chose the epoch: the test scores are the held-out ones.\n");
    }
    if meta.file_scheme == TagScheme::Iob1 {
        card.push_str("- Its tags are written in IOB1, as its training files were.\n");
    }
    writeln!(
        card,
        "- The card describes the weights whose SHA-256 is `{}` (`model.bpk`).\n",
        run.weights_sha256
    )
    .ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_paths_show_as_they_are_and_keep_a_table_row_whole() {
        let row = format!(
            "| {} | {} |",
            text("A|B<script>x</script>&_*"),
            code("a|b.txt")
        );
        assert_eq!(
            row,
            "| A\\|B&lt;script&gt;x&lt;/script&gt;&amp;\\_\\* | `a\\|b.txt` |"
        );
        // Cells are split at the unescaped pipes only: two cells.
        let cells = row.trim_matches('|').split(" | ").count();
        assert_eq!(cells, 2);
        assert_eq!(code("we`ird"), "we\\`ird");
        assert_eq!(text("line\nbreak"), "line break");
    }
}
