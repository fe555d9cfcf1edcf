//! Partial labels: tokens whose tag nobody gave. A CoNLL tag column writes them `-`, and only
//! [`Label`] reads and writes that; in span files they lie outside the regions a line says were
//! annotated. They are not `O`: training sums over every tag they could have ([`Label::Open`],
//! worked out in the training scheme by `Sentence::labels_in`), so
//! that an entity an annotator skipped is not taught as "no entity".

use crate::label::{Allowed, Label, TagColumn};
use crate::scheme::{Span, Tag, TagScheme, spans};

/// Where a chunk that touches unknown tokens may begin or end: known from the tag, or open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Boundary {
    /// It begins (or ends) at this token.
    Here,
    /// It goes on into the unknown tokens.
    Beyond,
    /// Either: the tag does not say.
    Open,
}

impl Boundary {
    fn options(self) -> &'static [bool] {
        match self {
            Boundary::Here => &[true],
            Boundary::Beyond => &[false],
            Boundary::Open => &[true, false],
        }
    }
}

/// What each token of a sentence (labels in `source`) may be in `target` (IOB2 or IOBES; IOB1
/// is written as IOB2's chunks with `I-` starts): its one tag, or what stays open. Each run of
/// labelled tokens keeps its chunks; where a chunk meets unknown tokens, what the tags say about
/// its boundary is kept and what they leave open stays open: IOB2's `B-PER` before an unknown
/// token may be IOBES `B-PER` or `S-PER`, IOBES `E-PER` closes its chunk, so the unknown token
/// after it may not continue it, and a run starting `I-PER` continues a chunk begun before it. A
/// token the labels on either side leave no tag at all is open to an empty list.
pub(crate) fn labels_in(labels: &[Label], source: TagScheme, target: TagScheme) -> Vec<Label> {
    let tags: Vec<Option<&str>> = labels.iter().map(TagColumn::tag).collect();
    let mut allowed = vec![Allowed::Any; tags.len()];
    let mut start = 0;
    while start < tags.len() {
        if tags[start].is_none() {
            start += 1;
            continue;
        }
        let end = (start..tags.len())
            .find(|&i| tags[i].is_none())
            .unwrap_or(tags.len());
        let run: Vec<&str> = tags[start..end].iter().flatten().copied().collect();
        for (i, options) in run_tags(&run, source, target, start > 0, end < tags.len())
            .into_iter()
            .enumerate()
        {
            allowed[start + i] = Allowed::OneOf(options);
        }
        // The unknown neighbours of a chunk at the run's edge, where the tags fix them.
        let first = Tag::parse(run[0]);
        if start > 0 && first.prefix == "I" && left_boundary(run[0], source) == Boundary::Beyond {
            let before = std::mem::replace(&mut allowed[start - 1], Allowed::Any);
            let continuing = [("B", first.label), ("I", first.label)]
                .map(|(p, l)| format!("{p}-{l}"))
                .to_vec();
            allowed[start - 1] = before.intersect(Allowed::OneOf(continuing));
        }
        let last = Tag::parse(run[run.len() - 1]);
        if end < tags.len()
            && last.prefix != "O"
            && right_boundary(run[run.len() - 1], source) == Boundary::Here
        {
            let continuations = ["I", "E"].map(|p| format!("{p}-{}", last.label)).to_vec();
            let after = std::mem::replace(&mut allowed[end], Allowed::Any);
            allowed[end] = after.intersect(Allowed::Except(continuations));
        }
        start = end;
    }
    allowed.into_iter().map(Label::from_allowed).collect()
}

/// What each of `len` tokens may be in `target` when `entities` (token ranges, in order, none
/// overlapping another) are known to be entities exactly, and nothing else is known: each
/// entity's tokens carry its tags, the token after it may not continue it, and the rest is
/// open. What an annotator's corrections force on a decoding.
pub fn forced_labels(entities: &[Span], len: usize, target: TagScheme) -> Vec<Label> {
    let rendered = crate::render_spans(entities, len, TagScheme::Iobes);
    let mut labels = vec![Label::UNKNOWN; len];
    for entity in entities {
        for t in entity.start..entity.end.min(len) {
            labels[t] = Label::Tag(rendered[t].clone());
        }
    }
    labels_in(&labels, TagScheme::Iobes, target)
}

/// Whether a chunk whose first labelled token is `tag`, after unknown tokens, begins there.
fn left_boundary(tag: &str, source: TagScheme) -> Boundary {
    match (Tag::parse(tag).prefix, Tag::parse(tag).closes, source) {
        ("B", _, _) => Boundary::Here,
        ("I", _, TagScheme::Iob1) => Boundary::Open,
        _ => Boundary::Beyond,
    }
}

/// Whether a chunk whose last labelled token is `tag`, before unknown tokens, ends there.
fn right_boundary(tag: &str, source: TagScheme) -> Boundary {
    match (Tag::parse(tag).closes, source) {
        (true, _) => Boundary::Here,
        (false, TagScheme::Iobes) => Boundary::Beyond,
        (false, _) => Boundary::Open,
    }
}

/// The target tags each token of a run of labelled tokens may have: its chunks written in
/// `target`, with the prefixes of a chunk at an edge that meets unknown tokens left open as
/// [`left_boundary`] and [`right_boundary`] say.
fn run_tags(
    run: &[&str],
    source: TagScheme,
    target: TagScheme,
    unknown_before: bool,
    unknown_after: bool,
) -> Vec<Vec<String>> {
    let mut options = vec![vec!["O".to_string()]; run.len()];
    for span in spans(run) {
        let begins = if span.start == 0 && unknown_before {
            left_boundary(run[0], source)
        } else {
            Boundary::Here
        };
        let ends = if span.end == run.len() && unknown_after {
            right_boundary(run[run.len() - 1], source)
        } else {
            Boundary::Here
        };
        for (i, slot) in options
            .iter_mut()
            .enumerate()
            .take(span.end)
            .skip(span.start)
        {
            let starts: &[bool] = if i == span.start {
                begins.options()
            } else {
                &[false]
            };
            let stops: &[bool] = if i + 1 == span.end {
                ends.options()
            } else {
                &[false]
            };
            let mut tags: Vec<String> = starts
                .iter()
                .flat_map(|&s| stops.iter().map(move |&e| (s, e)))
                .map(|(s, e)| format!("{}-{}", prefix(target, s, e), span.label))
                .collect();
            tags.dedup();
            *slot = tags;
        }
    }
    options
}

/// The prefix of a chunk's token in `target`, from whether the chunk starts and ends there.
fn prefix(target: TagScheme, starts: bool, ends: bool) -> char {
    match (target, starts, ends) {
        (TagScheme::Iobes, true, true) => 'S',
        (TagScheme::Iobes, true, false) => 'B',
        (TagScheme::Iobes, false, true) => 'E',
        (TagScheme::Iob2, true, _) => 'B',
        _ => 'I',
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::known_tags;
    use crate::vocab::Vocab;

    fn one(tags: &[&str]) -> Label {
        Label::from_allowed(Allowed::OneOf(tags.iter().map(|t| t.to_string()).collect()))
    }

    fn except(tags: &[&str]) -> Label {
        Label::Open(Allowed::Except(
            tags.iter().map(|t| t.to_string()).collect(),
        ))
    }

    fn converted(fields: &[&str], source: TagScheme, target: TagScheme) -> Vec<Label> {
        let labels: Vec<Label> = fields.iter().map(|f| Label::parse(f)).collect();
        labels_in(&labels, source, target)
    }

    #[test]
    fn only_a_dash_is_unknown_and_open_labels_are_written_as_one() {
        assert_eq!(Label::parse("-"), Label::UNKNOWN);
        assert_eq!(Label::parse("B-PER"), Label::Tag("B-PER".into()));
        assert_eq!(Label::parse("--"), Label::Tag("--".into()));
        assert_eq!(except(&["I-PER"]).to_string(), "-");
        assert_eq!(one(&["B-PER", "S-PER"]).to_string(), "-");
        assert_eq!(one(&["B-PER"]).to_string(), "B-PER");
        assert_eq!(known_tags(&[Label::parse("O"), Label::UNKNOWN]), None);
        assert_eq!(known_tags(&[Label::parse("O")]), Some(vec!["O"]));
    }

    #[test]
    fn fully_labelled_sentences_are_converted_as_usual() {
        let tags = ["B-PER", "I-PER", "O", "B-LOC"];
        let allowed = converted(&tags, TagScheme::Iob2, TagScheme::Iobes);
        assert_eq!(
            allowed,
            [
                one(&["B-PER"]),
                one(&["E-PER"]),
                one(&["O"]),
                one(&["S-LOC"])
            ]
        );
    }

    #[test]
    fn boundaries_next_to_unknown_tokens_stay_open_where_the_tags_leave_them_open() {
        // IOB2 does not say whether B-PER ends before the unknown token.
        let allowed = converted(&["B-PER", "-", "O"], TagScheme::Iob2, TagScheme::Iobes);
        assert_eq!(
            allowed,
            [one(&["S-PER", "B-PER"]), Label::UNKNOWN, one(&["O"])]
        );
        // IOB2's I-PER after an unknown token continues a chunk begun there.
        let allowed = converted(&["-", "I-PER", "O"], TagScheme::Iob2, TagScheme::Iobes);
        assert_eq!(
            allowed,
            [one(&["B-PER", "I-PER"]), one(&["E-PER"]), one(&["O"])]
        );
        let allowed = converted(&["-", "I-PER", "-"], TagScheme::Iob2, TagScheme::Iob2);
        assert_eq!(
            allowed,
            [one(&["B-PER", "I-PER"]), one(&["I-PER"]), Label::UNKNOWN]
        );
        // IOB1's I-PER may begin a chunk or continue one, so the token before it stays free.
        let allowed = converted(&["-", "I-PER"], TagScheme::Iob1, TagScheme::Iob2);
        assert_eq!(allowed, [Label::UNKNOWN, one(&["B-PER", "I-PER"])]);
    }

    #[test]
    fn a_chunk_known_to_end_is_not_continued_by_the_unknown_token_after_it() {
        let allowed = converted(&["S-PER", "-"], TagScheme::Iobes, TagScheme::Iob2);
        assert_eq!(allowed, [one(&["B-PER"]), except(&["I-PER", "E-PER"])]);
        // IOBES B-PER goes on into the unknown token.
        let allowed = converted(&["B-PER", "-"], TagScheme::Iobes, TagScheme::Iobes);
        assert_eq!(allowed, [one(&["B-PER"]), Label::UNKNOWN]);
        // Both neighbours fix one unknown token: after E-LOC, before I-PER.
        let allowed = converted(&["E-LOC", "-", "I-PER"], TagScheme::Iobes, TagScheme::Iob2);
        assert_eq!(allowed[1], one(&["B-PER", "I-PER"]));
    }

    #[test]
    fn masks_follow_the_tag_set() {
        let tags = Vocab::from(vec!["O".to_string(), "B-PER".into(), "I-PER".into()]);
        let one = |tags: &[&str]| Allowed::OneOf(tags.iter().map(|t| t.to_string()).collect());
        let except = |tags: &[&str]| Allowed::Except(tags.iter().map(|t| t.to_string()).collect());
        assert_eq!(one(&["I-PER"]).mask(tags.items()), [false, false, true]);
        assert_eq!(except(&["I-PER"]).mask(tags.items()), [true, true, false]);
        assert_eq!(Allowed::Any.mask(tags.items()), [true; 3]);
        assert!(one(&["B-PER"]).intersect(except(&["B-PER"])).is_empty());
    }

    #[test]
    fn forced_entities_are_exact_and_the_rest_is_open() {
        let span = |start, end, label: &str| Span {
            start,
            end,
            label: label.into(),
        };
        // Two touching PER entities, then a LOC at the end; tokens 3 and 4 are open.
        let entities = [span(0, 2, "PER"), span(2, 3, "PER"), span(5, 6, "LOC")];
        let iob2 = forced_labels(&entities, 6, TagScheme::Iob2);
        assert_eq!(
            iob2,
            [
                one(&["B-PER"]),
                one(&["I-PER"]),
                one(&["B-PER"]),
                except(&["I-PER", "E-PER"]),
                Label::UNKNOWN,
                one(&["B-LOC"]),
            ]
        );
        let iobes = forced_labels(&entities, 6, TagScheme::Iobes);
        assert_eq!(
            iobes[..3],
            [one(&["B-PER"]), one(&["E-PER"]), one(&["S-PER"])]
        );
        assert_eq!(iobes[5], one(&["S-LOC"]));
        // Nothing forced: everything open.
        assert!(
            forced_labels(&[], 3, TagScheme::Iob2)
                .iter()
                .all(|l| *l == Label::UNKNOWN)
        );
    }
}
