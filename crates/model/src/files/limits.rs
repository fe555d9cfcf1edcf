//! The sizes a description may give, checked before anything of that size is allocated: a
//! network's settings in range, and a model's sizes against what its files can hold.

use crate::NetworkConfig;

use super::ModelMeta;

/// The largest layer size accepted: past it a BiLSTM's weights and optimiser state alone take
/// gigabytes, and a size with zeros too many would end the process on a failed allocation.
pub const MAX_LAYER: usize = 4096;

/// The most values a model's word table may hold (4 GiB of floats), tags it may have (its CRF
/// holds their square), and characters a word may be read with.
pub(super) const MAX_WORD_TABLE: usize = 1 << 30;
pub(super) const MAX_TAGS: usize = 4096;
pub(super) const MAX_WORD_LEN: usize = 1 << 16;

/// The most feature columns a model may read.
pub(super) const MAX_FEATURES: usize = 64;

/// The most values a feature column may have (a categorical column, not a second word column).
pub(super) const MAX_FEATURE_VALUES: usize = 1 << 20;

/// Settings of a [`NetworkConfig`] out of their range: the settings (its fields' names) and what
/// they must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfRange {
    /// The settings, by their names in [`NetworkConfig`].
    pub settings: &'static [&'static str],
    /// What they must be.
    pub expected: &'static str,
}

impl std::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let named: Vec<String> = self.settings.iter().map(|s| format!("model.{s}")).collect();
        write!(f, "{}: expected {}", named.join(" and "), self.expected)
    }
}

/// The first of a network's settings that make no sense: checked for an experiment before
/// anything is read or deleted (which names them as the experiment's keys), and for a model's
/// `model.json` before anything is allocated.
pub fn check_config(m: &NetworkConfig) -> Result<(), OutOfRange> {
    let size = |v: usize| (1..=MAX_LAYER).contains(&v);
    let checks: [(bool, &'static [&'static str], &'static str); 9] = [
        (size(m.word_dim), &["word_dim"], "1 to 4096"),
        (size(m.hidden), &["hidden"], "1 to 4096"),
        (
            size(m.char_dim) && size(m.char_filters),
            &["char_dim", "char_filters"],
            "1 to 4096",
        ),
        (
            size(m.char_hidden) && size(m.char_lm_hidden),
            &["char_hidden", "char_lm_hidden"],
            "1 to 4096",
        ),
        (
            m.casing_dim <= MAX_LAYER && m.mention_dim <= MAX_LAYER,
            &["casing_dim", "mention_dim"],
            "0 to 4096",
        ),
        (
            m.dictionary_dim <= MAX_LAYER,
            &["dictionary_dim"],
            "0 to 4096",
        ),
        (
            m.feature_dims.iter().all(|&d| size(d)) && m.feature_dims.len() <= MAX_FEATURES,
            &["feature_dims"],
            "at most 64 columns, each of dim 1 to 4096",
        ),
        (
            m.lm_weight >= 0.0 && m.lm_weight.is_finite(),
            &["lm_weight"],
            "zero or positive",
        ),
        (
            (0.0..1.0).contains(&m.dropout),
            &["dropout"],
            "a probability in [0, 1)",
        ),
    ];
    match checks.iter().find(|(ok, _, _)| !ok) {
        Some(&(_, settings, expected)) => Err(OutOfRange { settings, expected }),
        None => Ok(()),
    }
}

/// The sizes of a description that nertrain never makes, checked before any is allocated.
pub(super) fn check_sizes(meta: &ModelMeta) -> Result<(), String> {
    check_config(&meta.model).map_err(|e| e.to_string())?;
    let sizes = &meta.sizes;
    let word_table = sizes.words.saturating_mul(meta.model.word_dim);
    if word_table > MAX_WORD_TABLE || sizes.chars > MAX_WORD_TABLE / 64 {
        return Err(format!(
            "sizes: {} words of {} values and {} characters is more than nertrain makes",
            sizes.words, meta.model.word_dim, sizes.chars
        ));
    }
    if sizes.lm_words > sizes.words {
        return Err(format!(
            "sizes.lm_words: expected at most the {} words, found {}",
            sizes.words, sizes.lm_words
        ));
    }
    let dictionary_labels = meta.dictionary.as_ref().map_or(0, |d| d.labels.len());
    if sizes.dictionary_labels != dictionary_labels || dictionary_labels > MAX_TAGS {
        return Err(format!(
            "sizes.dictionary_labels: expected the {dictionary_labels} labels of the dictionary \
             (at most {MAX_TAGS}), found {}",
            sizes.dictionary_labels
        ));
    }
    let columns = meta.columns.feature_columns.len();
    if sizes.features.len() != columns || meta.model.feature_dims.len() != columns {
        return Err(format!(
            "sizes.features: expected the vocabulary sizes of the {columns} feature columns, \
             with a dim each in model.feature_dims; found {} sizes and {} dims",
            sizes.features.len(),
            meta.model.feature_dims.len()
        ));
    }
    if let Some(&values) = sizes
        .features
        .iter()
        .find(|&&v| !(2..=MAX_FEATURE_VALUES).contains(&v))
    {
        return Err(format!(
            "sizes.features: expected 2 to {MAX_FEATURE_VALUES} values per column, found {values}"
        ));
    }
    if !(1..=MAX_TAGS).contains(&sizes.tags) {
        return Err(format!(
            "sizes.tags: expected 1 to {MAX_TAGS}, found {}",
            sizes.tags
        ));
    }
    if let Some(encoder) = &sizes.encoder {
        encoder
            .check()
            .map_err(|message| format!("sizes.encoder: {message}"))?;
        meta.model.pretrained_layers.check(encoder)?;
    }
    if !(1..=MAX_WORD_LEN).contains(&meta.max_word_len) {
        return Err(format!(
            "max_word_len: expected 1 to {MAX_WORD_LEN}, found {}",
            meta.max_word_len
        ));
    }
    Ok(())
}

/// The fewest weights a model of this description has: its word table, the BiLSTM's recurrent
/// matrices (both directions, four gates) and the CRF's transitions; each a 32-bit float.
pub(super) fn least_values(meta: &ModelMeta) -> u64 {
    let (words, dim) = (meta.sizes.words as u64, meta.model.word_dim as u64);
    let (hidden, tags) = (meta.model.hidden as u64, meta.sizes.tags as u64);
    let encoder = meta
        .sizes
        .encoder
        .as_ref()
        .and_then(|e| e.parameters())
        .unwrap_or(0) as u64;
    words * dim + 8 * hidden * hidden + tags * tags + encoder
}
