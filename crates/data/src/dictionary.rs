//! Dictionaries (gazetteers): lists of phrases by label, found in a text's words.
//!
//! A dictionary file has a `LABEL<TAB>phrase` line per entry (UTF-8; `#` starts a comment line;
//! blank lines are skipped), optionally with a third column, `match-case` or `ignore-case`, that
//! overrides the file's case rule for that entry. Phrases are cut into words by the model's
//! tokenizer, so that they match as the text is cut.
//!
//! In a text, each label's phrases are taken leftmost-longest: of the phrases that begin
//! earliest, the longest, then on after its end. Every word then has, per label, its place in
//! the phrase that covers it: B, I, E, S, or none ([`Dictionary::places`]). Finding them is one
//! pass of an Aho-Corasick automaton over the words written as fixed-width ids (a marker byte
//! and three 7-bit bytes, so that a phrase can only match from a word's first byte to a word's
//! last), for phrases that match case and one for those that ignore it: linear in the text.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use rand::Rng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use crate::{DataError, Encoded, Tokenizer};

/// The most words a phrase may have; longer entries are counted and left out.
pub const MAX_PHRASE_WORDS: usize = 16;

/// Whether an entry matches only as written, or whatever the case of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CaseRule {
    /// `Paris` matches `Paris` only.
    MatchCase,
    /// `Paris` matches `paris` and `PARIS` too.
    IgnoreCase,
}

impl std::str::FromStr for CaseRule {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "match-case" => Ok(Self::MatchCase),
            "ignore-case" => Ok(Self::IgnoreCase),
            other => Err(format!(
                "`{other}` is not a case rule; expected match-case or ignore-case"
            )),
        }
    }
}

/// A phrase of a label, as words (lowercased when it ignores case).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Entry {
    /// Its label.
    pub label: String,
    /// Its words, as the tokenizer cut the phrase.
    pub words: Vec<String>,
    /// How it matches.
    pub case: CaseRule,
}

/// What reading a dictionary file left out, and kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DictionaryCounts {
    /// Entries read.
    pub entries: usize,
    /// Entries given before in the file (the same label, words and case rule).
    pub duplicates: usize,
    /// Entries of more than [`MAX_PHRASE_WORDS`] words, left out.
    pub too_long: usize,
}

impl DictionaryCounts {
    /// What reading `path` found, as every command that reads a dictionary says it: its
    /// entries, those given twice and those left out for their length.
    pub fn summary(&self, path: &Path) -> String {
        let mut said = format!("{}: {} entries", path.display(), self.entries);
        if self.duplicates > 0 {
            said += &format!(", {} given twice", self.duplicates);
        }
        if self.too_long > 0 {
            said += &format!(
                ", {} of more than {MAX_PHRASE_WORDS} words left out",
                self.too_long
            );
        }
        said
    }
}

/// Reads a dictionary file, cutting its phrases with `tokenizer`; entries without a case
/// column follow `case`.
pub fn read_dictionary(
    path: &Path,
    case: CaseRule,
    tokenizer: &Tokenizer,
) -> Result<(Vec<Entry>, DictionaryCounts), DataError> {
    // A byte that is not UTF-8 is an error at its line.
    let text = crate::conll::read_text(path)?;
    parse_dictionary(&text, path, case, tokenizer)
}

/// [`read_dictionary`] of a file's text; `path` is used only to locate errors.
pub fn parse_dictionary(
    text: &str,
    path: &Path,
    case: CaseRule,
    tokenizer: &Tokenizer,
) -> Result<(Vec<Entry>, DictionaryCounts), DataError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut counts = DictionaryCounts::default();
    let mut seen = std::collections::HashSet::new();
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = |message: String| DataError::at(path, i + 1, message);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let columns: Vec<&str> = line.split('\t').collect();
        let (label, phrase, rule) = match columns.as_slice() {
            [label, phrase] => (*label, *phrase, case),
            [label, phrase, rule] => (*label, *phrase, rule.trim().parse().map_err(at)?),
            _ => {
                return Err(at(format!(
                    "expected LABEL<TAB>phrase, optionally <TAB>match-case or ignore-case; \
                     found {} tab-separated columns",
                    columns.len()
                )));
            }
        };
        let label = label.trim();
        if label.is_empty() || label.chars().any(char::is_whitespace) {
            return Err(at(format!(
                "the label `{label}` is empty or has spaces; expected LABEL<TAB>phrase"
            )));
        }
        let mut words: Vec<String> = tokenizer
            .tokens(phrase)
            .into_iter()
            .map(|t| t.text)
            .collect();
        if words.is_empty() {
            return Err(at("the phrase is empty; expected LABEL<TAB>phrase".into()));
        }
        if words.len() > MAX_PHRASE_WORDS {
            counts.too_long += 1;
            continue;
        }
        if rule == CaseRule::IgnoreCase {
            words = words.iter().map(|w| w.to_lowercase()).collect();
        }
        let entry = Entry {
            label: label.to_string(),
            words,
            case: rule,
        };
        if seen.insert(entry.clone()) {
            entries.push(entry);
            counts.entries += 1;
        } else {
            counts.duplicates += 1;
        }
    }
    Ok((entries, counts))
}

/// A phrase found in a text: words `start..end`, of label number `label`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mention {
    /// Its label's index in [`Dictionary::labels`].
    pub label: usize,
    /// Its first word.
    pub start: usize,
    /// One past its last word.
    pub end: usize,
}

/// A word's place in a phrase of one label, as [`Dictionary::places`] writes it.
pub mod place {
    /// In no phrase.
    pub const NONE: u8 = 0;
    /// The first word of a phrase of two or more.
    pub const BEGIN: u8 = 1;
    /// Inside a phrase of three or more.
    pub const INSIDE: u8 = 2;
    /// The last word of a phrase of two or more.
    pub const END: u8 = 3;
    /// A phrase of one word.
    pub const SINGLE: u8 = 4;
    /// How many places there are.
    pub const COUNT: usize = 5;
}

/// The phrases of one case rule, compiled.
#[derive(Debug, Clone)]
struct Automaton {
    automaton: AhoCorasick,
    /// The labels of each pattern (a phrase may be in several).
    labels: Vec<Vec<usize>>,
}

/// Dictionaries compiled to find their phrases in text.
#[derive(Debug, Clone)]
pub struct Dictionary {
    labels: Vec<String>,
    entries: Vec<Entry>,
    /// Every word of an entry (as stored: lowercased for those that ignore case), numbered
    /// from 1; 0 is any other word. Looked up once per word of every text tagged: hashed with
    /// foldhash rather than SipHash, which guards against keys chosen to collide (the keys are
    /// the user's own entries) and showed in tagging time.
    words: HashMap<String, u32, foldhash::fast::FixedState>,
    match_case: Option<Automaton>,
    ignore_case: Option<Automaton>,
}

impl Dictionary {
    /// Compiles `entries` for the given labels, in their order (every entry's label must be
    /// one of them). Repeated entries are kept once.
    pub fn new(labels: Vec<String>, mut entries: Vec<Entry>) -> Result<Self, String> {
        entries.sort();
        entries.dedup();
        let index: HashMap<&str, usize> = labels
            .iter()
            .enumerate()
            .map(|(i, l)| (l.as_str(), i))
            .collect();
        let mut words = HashMap::with_hasher(foldhash::fast::FixedState::default());
        // Phrase (as ids) → its labels, per case rule.
        let mut phrases: [BTreeMap<Vec<u32>, Vec<usize>>; 2] = Default::default();
        for entry in &entries {
            let label = *index.get(entry.label.as_str()).ok_or_else(|| {
                format!(
                    "the dictionary label {} is not one of {}",
                    entry.label,
                    labels.join(", ")
                )
            })?;
            let mut ids = Vec::with_capacity(entry.words.len());
            for word in &entry.words {
                let next = u32::try_from(words.len() + 1)
                    .ok()
                    .filter(|&n| n < 1 << 28)
                    .ok_or("a dictionary may have at most 2^28 - 1 distinct words")?;
                ids.push(*words.entry(word.clone()).or_insert(next));
            }
            let slot = &mut phrases[entry.case as usize];
            let of_phrase = slot.entry(ids).or_default();
            if !of_phrase.contains(&label) {
                of_phrase.push(label);
            }
        }
        let [match_case, ignore_case] = phrases.map(|phrases| {
            if phrases.is_empty() {
                return Ok(None);
            }
            let patterns: Vec<Vec<u8>> = phrases.keys().map(|ids| encode(ids)).collect();
            let automaton = AhoCorasickBuilder::new()
                .match_kind(MatchKind::Standard)
                .build(&patterns)
                .map_err(|e| format!("compiling the dictionary: {e}"))?;
            Ok::<_, String>(Some(Automaton {
                automaton,
                labels: phrases.into_values().collect(),
            }))
        });
        Ok(Self {
            labels,
            entries,
            words,
            match_case: match_case?,
            ignore_case: ignore_case?,
        })
    }

    /// The labels, in the order of [`Mention::label`] and of [`Self::places`].
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// The entries, sorted, each once.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The phrases found in `words`: per label, leftmost-longest, sorted by label and start.
    pub fn mentions<S: AsRef<str>>(&self, words: &[S]) -> Vec<Mention> {
        let mut found = Vec::new();
        let passes = [
            (&self.match_case, CaseRule::MatchCase),
            (&self.ignore_case, CaseRule::IgnoreCase),
        ];
        let mut ids = Vec::with_capacity(words.len());
        for (automaton, case) in passes {
            let Some(automaton) = automaton else { continue };
            ids.clear();
            ids.extend(words.iter().map(|w| self.word_id(w.as_ref(), case)));
            let text = encode(&ids);
            let mut first = 0;
            while first < ids.len() {
                if ids[first] == 0 {
                    first += 1;
                    continue;
                }
                let last = ids[first..]
                    .iter()
                    .position(|&id| id == 0)
                    .map_or(ids.len(), |n| first + n);
                let run = &text[4 * first..4 * last];
                for hit in automaton.automaton.find_overlapping_iter(run) {
                    let (start, end) = (first + hit.start() / 4, first + hit.end() / 4);
                    for &label in &automaton.labels[hit.pattern().as_usize()] {
                        found.push(Mention { label, start, end });
                    }
                }
                first = last;
            }
        }
        // Leftmost-longest per label: by start, the longest first, each after the last kept.
        found.sort_unstable_by_key(|m| (m.label, m.start, std::cmp::Reverse(m.end)));
        found.dedup_by(|mention, kept| mention.label == kept.label && mention.start < kept.end);
        found
    }

    /// `word`'s number among the entries' words under `case`, 0 if no entry has it.
    fn word_id(&self, word: &str, case: CaseRule) -> u32 {
        let id = match case {
            CaseRule::MatchCase => self.words.get(word),
            // Most words have no capital to lower: those are looked up as they are.
            CaseRule::IgnoreCase if !word.bytes().any(|b| b.is_ascii_uppercase() || b >= 0x80) => {
                self.words.get(word)
            }
            CaseRule::IgnoreCase => self.words.get(&word.to_lowercase()),
        };
        id.copied().unwrap_or(0)
    }

    /// Each word's place ([`place`]) in the mentions of each label: `words × labels` values,
    /// a word's labels together.
    pub fn places(&self, mentions: &[Mention], words: usize) -> Vec<u8> {
        let labels = self.labels.len();
        let mut places = vec![place::NONE; words * labels];
        for m in mentions {
            if m.end - m.start == 1 {
                places[m.start * labels + m.label] = place::SINGLE;
                continue;
            }
            places[m.start * labels + m.label] = place::BEGIN;
            for w in m.start + 1..m.end - 1 {
                places[w * labels + m.label] = place::INSIDE;
            }
            places[(m.end - 1) * labels + m.label] = place::END;
        }
        places
    }
}

/// Sets each sentence's dictionary places ([`Encoded::dictionary`]) from its words as written
/// (`words`, parallel to `encoded`). With `hide`, each phrase found is left out with that
/// probability: dictionary dropout while training, so that the model learns to read the context
/// when the list is silent rather than trust the list alone.
pub fn set_dictionary_places<S: AsRef<str>>(
    encoded: &mut [Encoded],
    words: &[&[S]],
    dictionary: &Dictionary,
    mut hide: Option<(&mut StdRng, f64)>,
) {
    for (sentence, words) in encoded.iter_mut().zip(words) {
        let mut mentions = dictionary.mentions(words);
        if let Some((rng, share)) = hide.as_mut() {
            mentions.retain(|_| !rng.random_bool(*share));
        }
        sentence.dictionary = dictionary.places(&mentions, words.len());
    }
}

/// Word ids as bytes: a marker byte (high bit set) and three 7-bit bytes each, so that a match
/// of whole phrases can only begin at a word's first byte and end at a word's last.
fn encode(ids: &[u32]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(4 * ids.len());
    for &id in ids {
        bytes.extend_from_slice(&[
            0x80 | ((id >> 21) & 0x7f) as u8,
            ((id >> 14) & 0x7f) as u8,
            ((id >> 7) & 0x7f) as u8,
            (id & 0x7f) as u8,
        ]);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn parse(text: &str) -> Result<(Vec<Entry>, DictionaryCounts), DataError> {
        parse_dictionary(
            text,
            Path::new("places.tsv"),
            CaseRule::MatchCase,
            &Tokenizer::new(&crate::TokenizerSpec::treebank()).unwrap(),
        )
    }

    fn dictionary(text: &str) -> Dictionary {
        let (entries, _) = parse(text).unwrap();
        let mut labels: Vec<String> = entries.iter().map(|e| e.label.clone()).collect();
        labels.sort();
        labels.dedup();
        Dictionary::new(labels, entries).unwrap()
    }

    #[test]
    fn reads_entries_cut_by_the_tokenizer_counting_duplicates_and_long_ones() {
        let long = vec!["w"; MAX_PHRASE_WORDS + 1].join(" ");
        let text = format!(
            "# places\n\nLOC\tNew York\nLOC\tSt. Louis\tignore-case\nLOC\tNew York\nPER\t{long}\r\n\
             LOC\tnew york\tignore-case\n"
        );
        let (entries, counts) = parse(&text).unwrap();
        assert_eq!(
            counts,
            DictionaryCounts {
                entries: 3,
                duplicates: 1,
                too_long: 1
            }
        );
        assert_eq!(entries[0].words, ["New", "York"]);
        // Cut as the tokenizer cuts text (these rules, with no corpus learnt, split "St.").
        assert_eq!(entries[1].words, ["st", ".", "louis"]);
        assert_eq!(entries[1].case, CaseRule::IgnoreCase);
    }

    #[test]
    fn bad_lines_are_errors_naming_file_and_line() {
        for (text, message) in [
            ("LOC Paris\n", "places.tsv:1: expected LABEL<TAB>phrase"),
            (
                "LOC\tParis\n\nX Y\tParis\n",
                "places.tsv:3: the label `X Y`",
            ),
            ("\tParis\n", "places.tsv:1: the label ``"),
            ("LOC\t \n", "places.tsv:1: the phrase is empty"),
            (
                "LOC\tParis\tsome-case\n",
                "places.tsv:1: `some-case` is not a case rule",
            ),
            (
                "LOC\tParis\tignore-case\tx\n",
                "found 4 tab-separated columns",
            ),
        ] {
            let error = parse(text).unwrap_err().to_string();
            assert!(error.contains(message), "{error}");
        }
    }

    #[test]
    fn finds_the_longest_phrase_of_each_label_and_places_its_words() {
        let dictionary = dictionary(
            "LOC\tNew York\nLOC\tNew York City\nLOC\tYork\nORG\tNew York Times\nLOC\tparis\tignore-case\n",
        );
        let words = [
            "The", "New", "York", "Times", "in", "New", "York", "City", "and", "PARIS",
        ];
        let mentions = dictionary.mentions(&words);
        let span = |m: &Mention| (dictionary.labels()[m.label].as_str(), m.start, m.end);
        assert_eq!(
            mentions.iter().map(span).collect::<Vec<_>>(),
            [("LOC", 1, 3), ("LOC", 5, 8), ("LOC", 9, 10), ("ORG", 1, 4)]
        );
        let places = dictionary.places(&mentions, words.len());
        use place::*;
        // Each word: its LOC place, then its ORG place.
        assert_eq!(
            places,
            [
                NONE, NONE, BEGIN, BEGIN, END, INSIDE, NONE, END, NONE, NONE, BEGIN, NONE, INSIDE,
                NONE, END, NONE, NONE, NONE, SINGLE, NONE
            ]
        );
        // Case is matched as each entry says.
        assert!(dictionary.mentions(&["new", "york"]).is_empty());
        assert_eq!(dictionary.mentions(&["Paris"]).len(), 1);
        // A word no entry has matches nothing, and a phrase never matches inside a word.
        assert!(dictionary.mentions(&["NewYork", "Yorkshire"]).is_empty());
    }

    /// Leftmost-longest by brute force: at each word, the longest phrase of the label that
    /// begins there, then on after it.
    fn brute_force(entries: &[Entry], labels: &[String], words: &[String]) -> Vec<Mention> {
        let mut out = Vec::new();
        for (label_index, label) in labels.iter().enumerate() {
            let mut at = 0;
            while at < words.len() {
                let longest = entries
                    .iter()
                    .filter(|e| &e.label == label)
                    .filter(|e| {
                        let n = e.words.len();
                        at + n <= words.len()
                            && e.words
                                .iter()
                                .zip(&words[at..at + n])
                                .all(|(p, w)| match e.case {
                                    CaseRule::MatchCase => p == w,
                                    CaseRule::IgnoreCase => *p == w.to_lowercase(),
                                })
                    })
                    .map(|e| e.words.len())
                    .max();
                match longest {
                    Some(n) => {
                        out.push(Mention {
                            label: label_index,
                            start: at,
                            end: at + n,
                        });
                        at += n;
                    }
                    None => at += 1,
                }
            }
        }
        out
    }

    #[test]
    fn agrees_with_brute_force_on_random_dictionaries_and_texts() {
        // Letters outside ASCII whose case is folded too; texts also have a word no entry has,
        // which splits them into runs searched apart.
        let vocabulary = ["a", "A", "b", "B", "c", "d", "é", "É"];
        let in_texts = [&vocabulary[..], &["-"]].concat();
        let labels: Vec<String> = ["X", "Y", "Z"].map(String::from).to_vec();
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..300 {
            let entries: Vec<Entry> = (0..rng.random_range(1..12))
                .map(|_| {
                    let case = if rng.random_bool(0.5) {
                        CaseRule::MatchCase
                    } else {
                        CaseRule::IgnoreCase
                    };
                    let words = (0..rng.random_range(1..5))
                        .map(|_| {
                            let w = vocabulary[rng.random_range(0..vocabulary.len())];
                            match case {
                                CaseRule::MatchCase => w.to_string(),
                                CaseRule::IgnoreCase => w.to_lowercase(),
                            }
                        })
                        .collect();
                    Entry {
                        label: labels[rng.random_range(0..3)].clone(),
                        words,
                        case,
                    }
                })
                .collect();
            let dictionary = Dictionary::new(labels.clone(), entries.clone()).unwrap();
            let words: Vec<String> = (0..rng.random_range(0..20))
                .map(|_| in_texts[rng.random_range(0..in_texts.len())].to_string())
                .collect();
            assert_eq!(
                dictionary.mentions(&words),
                brute_force(&entries, &labels, &words),
                "{entries:?} {words:?}"
            );
        }
    }

    #[test]
    fn places_are_set_per_sentence_and_dropout_hides_whole_phrases() {
        let dictionary = dictionary("LOC\tNew York\nLOC\tParis\n");
        let words: Vec<Vec<&str>> = (0..200)
            .map(|_| vec!["New", "York", "and", "Paris"])
            .collect();
        let words: Vec<&[&str]> = words.iter().map(Vec::as_slice).collect();
        let blank = || Encoded {
            words: vec![0; 4],
            chars: vec![Vec::new(); 4],
            casing: vec![0; 4],
            mentions: vec![0; 4],
            tags: Vec::new(),
            allowed: Vec::new(),
            dictionary: Vec::new(),
            features: Vec::new(),
            windows: Vec::new(),
            encoder_states: Vec::new(),
            teacher: None,
        };
        let mut encoded: Vec<Encoded> = (0..200).map(|_| blank()).collect();
        set_dictionary_places(&mut encoded, &words, &dictionary, None);
        use place::*;
        assert!(
            encoded
                .iter()
                .all(|e| e.dictionary == [BEGIN, END, NONE, SINGLE])
        );
        let mut rng = StdRng::seed_from_u64(3);
        set_dictionary_places(&mut encoded, &words, &dictionary, Some((&mut rng, 0.5)));
        let hidden = |e: &Encoded, at: usize| e.dictionary[at] == NONE;
        // A phrase is hidden whole, about half of them.
        assert!(encoded.iter().all(|e| hidden(e, 0) == hidden(e, 1)));
        let york_hidden = encoded.iter().filter(|e| hidden(e, 0)).count();
        assert!((60..=140).contains(&york_hidden), "{york_hidden}");
    }

    #[test]
    fn an_entry_of_an_unknown_label_is_an_error() {
        let (entries, _) = parse("GENE\tBRCA1\n").unwrap();
        let error = Dictionary::new(vec!["LOC".into()], entries).unwrap_err();
        assert!(error.contains("GENE is not one of LOC"), "{error}");
    }
}
