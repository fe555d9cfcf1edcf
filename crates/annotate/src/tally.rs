//! What reading a file left out or changed, counted as it is read, for one warning each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Counts of what was left out or changed, kept by every tool's reader.
#[derive(Default)]
pub(crate) struct Tally {
    /// Prodigy answers other than `accept`, by answer.
    pub(crate) answers: BTreeMap<String, usize>,
    /// Label Studio tasks without an annotation that counts.
    pub(crate) unannotated: Vec<String>,
    /// JSON-MIN rows of a task whose later annotation was read instead.
    pub(crate) superseded: usize,
    /// Label Studio results on another `<Text>` of their task, by its name.
    pub(crate) other_texts: BTreeMap<String, usize>,
    /// Label Studio results of a kind not read, by kind.
    pub(crate) other_kinds: BTreeMap<String, usize>,
    /// Label Studio regions whose offsets were UTF-16 units.
    pub(crate) realigned: usize,
    /// brat: discontinuous spans (`file:line`), `.txt` files without a `.ann`, subdirectories.
    pub(crate) discontinuous: Vec<String>,
    pub(crate) lone_texts: Vec<PathBuf>,
    pub(crate) subdirectories: Vec<PathBuf>,
}

impl Tally {
    /// How many texts were left out whole: when none is read, the reason.
    pub(crate) fn texts_left_out(&self) -> usize {
        self.answers.values().sum::<usize>() + self.unannotated.len() + self.lone_texts.len()
    }

    /// One warning a kind of thing left out or changed, naming `path`.
    pub(crate) fn into_warnings(self, path: &Path) -> Vec<String> {
        let file = path.display();
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let counts = |map: &BTreeMap<String, usize>| {
            map.iter()
                .map(|(name, n)| format!("{n} {name}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut warnings = Vec::new();
        if !self.answers.is_empty() {
            warnings.push(format!(
                "{file}: lines whose answer is not `accept` are not gold and were left out ({})",
                counts(&self.answers)
            ));
        }
        if let Some(first) = self.unannotated.first() {
            warnings.push(format!(
                "{file}: {} without an annotation that was not cancelled or skipped, left out \
                 (the first: {first})",
                plural(self.unannotated.len(), "task", "tasks")
            ));
        }
        if self.superseded > 0 {
            warnings.push(format!(
                "{file}: {} of a task that has a later annotation left out (one annotation per \
                 task: the latest by updated_at)",
                plural(self.superseded, "row", "rows")
            ));
        }
        if !self.other_texts.is_empty() {
            warnings.push(format!(
                "{file}: results on another <Text> of their task left out (to_name: {})",
                counts(&self.other_texts)
            ));
        }
        if !self.other_kinds.is_empty() {
            warnings.push(format!(
                "{file}: results of a kind not read left out ({}); only `labels` on a <Text> \
                 are entities here",
                counts(&self.other_kinds)
            ));
        }
        if self.realigned > 0 {
            warnings.push(format!(
                "{file}: {} counted in UTF-16 units (as older Label Studio versions do), read as \
                 such",
                plural(
                    self.realigned,
                    "region's offsets were",
                    "regions' offsets were"
                )
            ));
        }
        if let Some(first) = self.discontinuous.first() {
            warnings.push(format!(
                "{first}: a discontinuous span, left out: entities here are contiguous ({} in all)",
                self.discontinuous.len()
            ));
        }
        if let Some(first) = self.lone_texts.first() {
            warnings.push(format!(
                "{file}: {} without a .ann of the same name, left out (the first: {})",
                plural(self.lone_texts.len(), ".txt file", ".txt files"),
                first.display()
            ));
        }
        if let Some(first) = self.subdirectories.first() {
            warnings.push(format!(
                "{file}: {} not read (only the directory's own .ann files are; the first: {})",
                plural(self.subdirectories.len(), "subdirectory", "subdirectories"),
                first.display()
            ));
        }
        warnings
    }
}
