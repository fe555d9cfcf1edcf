//! Tag schemes (IOB1, IOB2, IOBES), entity spans, and conversion between schemes.
//!
//! Chunks are defined once, here, by conlleval's rules ([`start_of_chunk`], [`end_of_chunk`]):
//! [`spans`], conversion and scoring all read them, so what is scored, what is converted and what
//! `tag` shows are the same entities. A chunk starts at `B-X`, at `I-X` after `O`, after another
//! type or at a sentence start; `S-X` and `E-X` are read as `B-X` and `I-X` that also close their
//! chunk, so the malformed IOBES `S-PER I-PER` is two entities everywhere.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::label::{Label, TagColumn};

/// How chunk boundaries are written in tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TagScheme {
    /// `I-X` inside chunks and at their start; `B-X` only to split adjacent chunks of one type.
    Iob1,
    /// `B-X` at every chunk start, `I-X` inside.
    Iob2,
    /// `S-X` for one-token chunks, `B-X`, `I-X`, `E-X` for longer ones.
    Iobes,
}

impl TagScheme {
    /// Every scheme.
    pub const ALL: [TagScheme; 3] = [TagScheme::Iob1, TagScheme::Iob2, TagScheme::Iobes];

    /// Guesses the scheme of tagged sentences: IOBES if any `E-`/`S-` appears, IOB1 if some chunk
    /// starts with `I-`, otherwise IOB2.
    pub fn detect<'a, L: TagColumn + 'a>(
        sentences: impl IntoIterator<Item = &'a [L]>,
    ) -> TagScheme {
        let mut iob1 = false;
        for tags in sentences {
            let mut previous: Option<(char, &str)> = None;
            // What follows an unknown tag says nothing of the scheme.
            let mut after_unknown = false;
            for tag in tags {
                let Some(tag) = tag.tag() else {
                    after_unknown = true;
                    continue;
                };
                let parsed = parse_tag(tag);
                if let Some(('E' | 'S', _)) = parsed {
                    return TagScheme::Iobes;
                }
                if let Some(('I', label)) = parsed
                    && !after_unknown
                {
                    iob1 |= previous.is_none_or(|(_, previous_label)| previous_label != label);
                }
                previous = parsed;
                after_unknown = false;
            }
        }
        if iob1 {
            TagScheme::Iob1
        } else {
            TagScheme::Iob2
        }
    }
}

impl fmt::Display for TagScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TagScheme::Iob1 => "iob1",
            TagScheme::Iob2 => "iob2",
            TagScheme::Iobes => "iobes",
        })
    }
}

impl FromStr for TagScheme {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "iob1" => Ok(TagScheme::Iob1),
            "iob2" | "bio" => Ok(TagScheme::Iob2),
            "iobes" | "bioes" => Ok(TagScheme::Iobes),
            _ => Err(format!(
                "unknown tag scheme {s:?}: expected iob1, iob2 or iobes"
            )),
        }
    }
}

/// Splits a tag into its prefix and type: `B-PER` → `('B', "PER")`; `O` → `None`. Types may
/// contain hyphens (`B-MISC-X` has type `MISC-X`), as conlleval allows.
pub fn parse_tag(tag: &str) -> Option<(char, &str)> {
    let (prefix, label) = tag.split_once('-')?;
    let mut chars = prefix.chars();
    match (chars.next(), chars.next()) {
        (Some(p @ ('B' | 'I' | 'E' | 'S')), None) if !label.is_empty() => Some((p, label)),
        _ => None,
    }
}

/// Checks that a tag is `O` or a scheme prefix followed by a type.
pub fn check_tag(tag: &str) -> Result<(), String> {
    if tag == "O" || parse_tag(tag).is_some() {
        Ok(())
    } else if Label::is_unknown(tag) {
        Err(format!(
            "an unknown label ({tag:?}): expected a tag here; unknown labels are for training data"
        ))
    } else {
        Err(format!(
            "expected a tag O, B-TYPE, I-TYPE, E-TYPE or S-TYPE, found {tag:?}"
        ))
    }
}

/// Whether `next` may follow `previous` in a well-formed tag sequence of `scheme`. `None` as
/// `previous` is the sentence start, as `next` the sentence end.
///
/// IOB2: `I-X` only after `B-X` or `I-X`. IOB1: `B-X` only after `B-X` or `I-X` (it separates two
/// chunks of one type). IOBES: `I-X`/`E-X` only after `B-X`/`I-X`; `B-`, `S-`, `O` and the end only
/// after `O`, `E-`, `S-` or the start.
pub fn transition_allowed(scheme: TagScheme, previous: Option<&str>, next: Option<&str>) -> bool {
    let previous = previous.map(|tag| parse_tag(tag).unwrap_or(('O', "")));
    let next = next.map(|tag| parse_tag(tag).unwrap_or(('O', "")));
    let inside_of = |label: &str| matches!(previous, Some(('B' | 'I', l)) if l == label);
    match scheme {
        TagScheme::Iob2 => match next {
            Some(('I', label)) => inside_of(label),
            _ => true,
        },
        TagScheme::Iob1 => match next {
            Some(('B', label)) => inside_of(label),
            _ => true,
        },
        TagScheme::Iobes => match next {
            Some(('I' | 'E', label)) => inside_of(label),
            _ => !matches!(previous, Some(('B' | 'I', _))),
        },
    }
}

/// A tag as conlleval reads it: split at the first hyphen, with IOBES prefixes folded into IOB2
/// ones (`S-` → `B-`, `E-` → `I-`) that close their chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tag<'a> {
    /// `B`, `I` or `O` (after folding IOBES).
    pub prefix: &'a str,
    /// The entity type (empty for `O`).
    pub label: &'a str,
    /// `S-` or `E-`: nothing may continue this chunk.
    pub closes: bool,
}

impl<'a> Tag<'a> {
    /// The tag `O`.
    pub const OUTSIDE: Tag<'static> = Tag {
        prefix: "O",
        label: "",
        closes: false,
    };

    /// Reads a tag as conlleval does.
    pub fn parse(tag: &'a str) -> Self {
        match tag.split_once('-') {
            Some((prefix, label)) => {
                let (prefix, closes) = match prefix {
                    "S" => ("B", true),
                    "E" => ("I", true),
                    other => (other, false),
                };
                Tag {
                    prefix,
                    label,
                    closes,
                }
            }
            None => Tag {
                prefix: tag,
                label: "",
                closes: false,
            },
        }
    }
}

/// conlleval's `endOfChunk`: whether a chunk ends between `previous` and `current`.
pub(crate) fn end_of_chunk(previous: Tag, current: Tag) -> bool {
    let (p, t) = (previous.prefix, current.prefix);
    matches!(
        (p, t),
        ("B", "B") | ("B", "O") | ("I", "B") | ("I", "O") | ("E", "E") | ("E", "I") | ("E", "O")
    ) || (p != "O" && p != "." && previous.label != current.label)
        || p == "]"
        || p == "["
        || previous.closes
}

/// Whether an entity whose last tag is `previous` ends before a token tagged `next` (rather
/// than `next` continuing it): the chunk definition's own rule, for any scheme.
pub fn ends_before(previous: &str, next: &str) -> bool {
    end_of_chunk(Tag::parse(previous), Tag::parse(next))
}

/// conlleval's `startOfChunk`: whether a chunk starts at `current`.
pub(crate) fn start_of_chunk(previous: Tag, current: Tag) -> bool {
    let (p, t) = (previous.prefix, current.prefix);
    matches!(
        (p, t),
        ("B", "B") | ("I", "B") | ("O", "B") | ("O", "I") | ("E", "E") | ("E", "I") | ("O", "E")
    ) || (t != "O" && t != "." && previous.label != current.label)
        || t == "["
        || t == "]"
        || (previous.closes && t != "O" && t != ".")
}

/// An entity: tokens `start..end` carry `label`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Span {
    /// Its first token.
    pub start: usize,
    /// One past its last token.
    pub end: usize,
    /// Its entity type.
    pub label: String,
}

/// An entity as character offsets into its text: a [`Span`] of raw text rather than of tokens.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CharSpan {
    /// Its first character, in code points.
    pub start: usize,
    /// One past its last character, in code points.
    pub end: usize,
    /// Its type.
    pub label: String,
}

/// The chunks of one sentence's tags, read with conlleval's rules (any scheme, leniently): the
/// entities that scoring counts.
pub fn spans<S: AsRef<str>>(tags: &[S]) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    let mut open: Option<Span> = None;
    let mut previous = Tag::OUTSIDE;
    let ends = tags
        .iter()
        .map(|t| Tag::parse(t.as_ref()))
        .chain(std::iter::once(Tag::OUTSIDE));
    for (index, current) in ends.enumerate() {
        if end_of_chunk(previous, current) {
            spans.extend(open.take());
        }
        if index < tags.len() && start_of_chunk(previous, current) {
            open = Some(Span {
                start: index,
                end: index,
                label: current.label.to_string(),
            });
        }
        if let Some(span) = open.as_mut() {
            span.end = index + 1;
        }
        previous = current;
    }
    spans
}

/// The first place where a sentence's tags are not well formed in `scheme`, as the index of the
/// offending tag (or the last tag, when the sentence may not end where it does).
pub fn first_malformed<S: AsRef<str>>(tags: &[S], scheme: TagScheme) -> Option<usize> {
    let previous = std::iter::once(None).chain(tags.iter().map(|t| Some(t.as_ref())));
    let next = tags
        .iter()
        .map(|t| Some(t.as_ref()))
        .chain(std::iter::once(None));
    previous
        .zip(next)
        .position(|(p, n)| !transition_allowed(scheme, p, n))
        .map(|i| i.min(tags.len().saturating_sub(1)))
}

/// Writes spans as tags of `scheme` for a sentence of `len` tokens.
pub fn render_spans(spans: &[Span], len: usize, scheme: TagScheme) -> Vec<String> {
    let mut tags = vec!["O".to_string(); len];
    let mut previous_end_label: Option<(usize, &str)> = None;
    for span in spans {
        let touches_same_type = previous_end_label == Some((span.start, span.label.as_str()));
        for (index, tag) in tags.iter_mut().enumerate().take(span.end).skip(span.start) {
            let prefix = match scheme {
                TagScheme::Iob2 => {
                    if index == span.start {
                        'B'
                    } else {
                        'I'
                    }
                }
                TagScheme::Iob1 => {
                    if index == span.start && touches_same_type {
                        'B'
                    } else {
                        'I'
                    }
                }
                TagScheme::Iobes => match (index == span.start, index + 1 == span.end) {
                    (true, true) => 'S',
                    (true, false) => 'B',
                    (false, true) => 'E',
                    (false, false) => 'I',
                },
            };
            *tag = format!("{prefix}-{}", span.label);
        }
        previous_end_label = Some((span.end, span.label.as_str()));
    }
    tags
}

/// Rewrites one sentence's tags into `scheme`, keeping its chunks.
pub fn convert_tags<S: AsRef<str>>(tags: &[S], scheme: TagScheme) -> Vec<String> {
    render_spans(&spans(tags), tags.len(), scheme)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entity_ends_before_any_tag_that_does_not_continue_it() {
        for (previous, next, ends) in [
            ("B-PER", "I-PER", false),
            ("I-PER", "I-PER", false),
            ("I-PER", "B-PER", true),
            ("I-PER", "I-LOC", true),
            ("I-PER", "O", true),
            ("B-PER", "E-PER", false),
            ("E-PER", "I-PER", true),
            ("S-PER", "E-PER", true),
            ("S-PER", "O", true),
        ] {
            assert_eq!(ends_before(previous, next), ends, "{previous} {next}");
        }
    }

    fn tags(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn span(start: usize, end: usize, label: &str) -> Span {
        Span {
            start,
            end,
            label: label.into(),
        }
    }

    #[test]
    fn parses_tags() {
        assert_eq!(parse_tag("B-PER"), Some(('B', "PER")));
        assert_eq!(parse_tag("I-MISC-X"), Some(('I', "MISC-X")));
        assert_eq!(parse_tag("O"), None);
        assert_eq!(parse_tag("B-"), None);
        assert_eq!(parse_tag("BI-PER"), None);
        assert!(check_tag("NN").is_err());
        assert!(check_tag("O").is_ok());
    }

    #[test]
    fn reads_spans_in_every_scheme() {
        let expected = vec![span(0, 2, "PER"), span(2, 3, "PER"), span(4, 5, "LOC")];
        assert_eq!(spans(&tags("B-PER I-PER B-PER O B-LOC")), expected);
        assert_eq!(spans(&tags("I-PER I-PER B-PER O I-LOC")), expected);
        assert_eq!(spans(&tags("B-PER E-PER S-PER O S-LOC")), expected);
    }

    #[test]
    fn stray_and_switching_inside_tags_start_chunks() {
        assert_eq!(
            spans(&tags("O I-LOC I-PER")),
            vec![span(1, 2, "LOC"), span(2, 3, "PER")]
        );
        assert_eq!(
            spans(&tags("B-ORG I-PER")),
            vec![span(0, 1, "ORG"), span(1, 2, "PER")]
        );
    }

    #[test]
    fn malformed_iobes_closes_its_chunks() {
        assert_eq!(
            spans(&tags("S-PER I-PER")),
            vec![span(0, 1, "PER"), span(1, 2, "PER")]
        );
        assert_eq!(
            spans(&tags("B-PER E-PER E-PER O")),
            vec![span(0, 2, "PER"), span(2, 3, "PER")]
        );
        assert_eq!(
            convert_tags(&tags("S-PER I-PER"), TagScheme::Iob2),
            tags("B-PER B-PER")
        );
        assert_eq!(
            first_malformed(&tags("S-PER I-PER"), TagScheme::Iobes),
            Some(1)
        );
        assert_eq!(first_malformed(&tags("B-PER"), TagScheme::Iobes), Some(0));
        assert_eq!(
            first_malformed(&tags("B-PER E-PER"), TagScheme::Iobes),
            None
        );
    }

    /// For random tag sequences in every scheme, malformed ones included: the entities scoring
    /// counts are those `spans` finds (and `tag` shows), conversion to any scheme keeps them, and
    /// the converted sequence is well formed.
    #[test]
    fn scoring_spans_and_conversion_agree_on_random_sequences() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};

        let alphabet = [
            "O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC",
        ];
        let mut rng = StdRng::seed_from_u64(11);
        for _ in 0..20_000 {
            let len = rng.random_range(1..9);
            let sequence: Vec<&str> = (0..len)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect();
            let found = spans(&sequence);
            let mut scorer = crate::Scorer::new();
            scorer.add_sentence(&sequence, &sequence);
            let report = scorer.report();
            assert_eq!(report.overall.found, found.len(), "{sequence:?}");
            assert_eq!(report.overall.correct, found.len(), "{sequence:?}");
            for (label, counts) in &report.by_type {
                let of_type = found.iter().filter(|s| &s.label == label).count();
                assert_eq!(counts.found, of_type, "{label} in {sequence:?}");
            }
            for scheme in TagScheme::ALL {
                let converted = convert_tags(&sequence, scheme);
                assert_eq!(spans(&converted), found, "{sequence:?} as {scheme}");
                assert_eq!(
                    first_malformed(&converted, scheme),
                    None,
                    "{sequence:?} as {scheme}: {converted:?}"
                );
            }
        }
    }

    #[test]
    fn converts_between_all_schemes() {
        let iob1 = tags("I-PER I-PER B-PER O I-LOC I-ORG");
        let iob2 = tags("B-PER I-PER B-PER O B-LOC B-ORG");
        let iobes = tags("B-PER E-PER S-PER O S-LOC S-ORG");
        let all = [
            (TagScheme::Iob1, &iob1),
            (TagScheme::Iob2, &iob2),
            (TagScheme::Iobes, &iobes),
        ];
        for (_, from) in all {
            for (scheme, to) in all {
                assert_eq!(&convert_tags(from, scheme), to, "to {scheme}");
            }
        }
    }

    #[test]
    fn detects_schemes() {
        let detect = |s: &str| TagScheme::detect([tags(s).as_slice()]);
        assert_eq!(detect("B-PER I-PER O"), TagScheme::Iob2);
        assert_eq!(detect("I-PER I-PER O"), TagScheme::Iob1);
        assert_eq!(detect("O O"), TagScheme::Iob2);
        assert_eq!(detect("B-PER E-PER O"), TagScheme::Iobes);
    }

    /// A sequence is well formed when every step, from the start to the end, is allowed.
    fn well_formed(scheme: TagScheme, tags: &[String]) -> bool {
        let steps = std::iter::once(None).chain(tags.iter().map(|t| Some(t.as_str())));
        let nexts = tags
            .iter()
            .map(|t| Some(t.as_str()))
            .chain(std::iter::once(None));
        steps
            .zip(nexts)
            .all(|(p, n)| transition_allowed(scheme, p, n))
    }

    #[test]
    fn transition_rules_accept_each_schemes_own_output() {
        let cases = [
            (TagScheme::Iob2, "B-PER I-PER B-PER O B-LOC I-LOC"),
            (TagScheme::Iob1, "I-PER I-PER B-PER O I-LOC I-ORG"),
            (TagScheme::Iobes, "B-PER E-PER S-PER O B-LOC I-LOC E-LOC"),
        ];
        for (scheme, text) in cases {
            assert!(well_formed(scheme, &tags(text)), "{scheme}: {text}");
            // Whatever spans a lenient reading finds, rendering them is well formed.
            assert!(well_formed(
                scheme,
                &convert_tags(&tags("O I-PER I-LOC B-ORG I-PER"), scheme)
            ));
        }
    }

    #[test]
    fn transition_rules_reject_malformed_sequences() {
        let bad = [
            (TagScheme::Iob2, "I-PER"),
            (TagScheme::Iob2, "O I-PER"),
            (TagScheme::Iob2, "B-PER I-LOC"),
            (TagScheme::Iob1, "B-PER"),
            (TagScheme::Iob1, "O B-PER"),
            (TagScheme::Iob1, "I-LOC B-PER"),
            (TagScheme::Iobes, "B-PER"),
            (TagScheme::Iobes, "B-PER O"),
            (TagScheme::Iobes, "E-PER"),
            (TagScheme::Iobes, "S-PER I-PER E-PER"),
            (TagScheme::Iobes, "B-PER E-LOC"),
            (TagScheme::Iobes, "B-PER I-PER S-PER"),
        ];
        for (scheme, text) in bad {
            assert!(!well_formed(scheme, &tags(text)), "{scheme}: {text}");
        }
    }

    #[test]
    fn scheme_names() {
        assert_eq!("IOB2".parse::<TagScheme>(), Ok(TagScheme::Iob2));
        assert_eq!("bioes".parse::<TagScheme>(), Ok(TagScheme::Iobes));
        assert!("bilou".parse::<TagScheme>().is_err());
    }
}
