//! Decoding with an annotator's corrections forced: the entities they have drawn on a text are
//! taken as given, and the model decodes the rest around them (the CRF's best path through the
//! tags they allow, and its marginals and confidences conditioned on them), so that one
//! correction fixes its neighbours consistently.

use std::ops::Range;

use nertrain_annotate::CharSpan;
use nertrain_data::{Allowed, Label, Span, TagScheme, Token, forced_labels};

use crate::{Error, Result};

/// Each segment's allowed tags (`[len * tags]`, in the model's tag order), where its text has
/// forced entities; `None` where it has none. `texts[i]` is cut into `tokens[i]` and read in
/// `segments[i]` (token ranges); `forced[i]` are its entities in code points (empty: none).
pub(crate) fn segment_masks(
    tokens: &[Vec<Token>],
    segments: &[Vec<Range<usize>>],
    forced: &[Vec<CharSpan>],
    tags: &[String],
    scheme: TagScheme,
) -> Result<Vec<Option<Vec<bool>>>> {
    let mut masks = Vec::new();
    for (text, (tokens, segments)) in tokens.iter().zip(segments).enumerate() {
        let spans = forced.get(text).map_or(&[][..], Vec::as_slice);
        let mut of_segment: Vec<Vec<Span>> = vec![Vec::new(); segments.len()];
        for span in spans {
            let known = tags
                .iter()
                .any(|t| nertrain_data::parse_tag(t).is_some_and(|(_, l)| l == span.label));
            if !known {
                return Err(Error::Forced {
                    text,
                    start: span.start,
                    end: span.end,
                    message: format!(
                        "label {:?} is not one of the model's ({})",
                        span.label,
                        crate::entity_types(tags).join(", ")
                    ),
                });
            }
            let (segment, entity) =
                place(tokens, segments, span).map_err(|message| Error::Forced {
                    text,
                    start: span.start,
                    end: span.end,
                    message,
                })?;
            of_segment[segment].push(entity);
        }
        for (segment, mut entities) in segments.iter().zip(of_segment) {
            if entities.is_empty() {
                masks.push(None);
                continue;
            }
            entities.sort_by_key(|e| e.start);
            if let Some(pair) = entities.windows(2).find(|w| w[1].start < w[0].end) {
                let at = |e: &Span| tokens[segment.start + e.start].start;
                return Err(Error::Forced {
                    text,
                    start: at(&pair[1]),
                    end: tokens[segment.start + pair[1].end - 1].end,
                    message: format!(
                        "shares words with the entity from {}; forced entities may not overlap",
                        at(&pair[0])
                    ),
                });
            }
            masks.push(Some(mask(&entities, segment.len(), tags, scheme)));
        }
    }
    Ok(masks)
}

/// The segment of `span` and its tokens there: every word it touches. An error when it touches
/// none, crosses a sentence end, or has a label the model lacks.
fn place(
    tokens: &[Token],
    segments: &[Range<usize>],
    span: &CharSpan,
) -> std::result::Result<(usize, Span), String> {
    if span.start >= span.end {
        return Err("an empty entity: expected start < end".into());
    }
    let touched: Vec<usize> = (0..tokens.len())
        .filter(|&t| tokens[t].start < span.end && span.start < tokens[t].end)
        .collect();
    let (Some(&first), Some(&last)) = (touched.first(), touched.last()) else {
        return Err("covers no word of the text".into());
    };
    let segment = segments
        .iter()
        .position(|p| p.contains(&first))
        .ok_or("covers no word the model reads")?;
    let range = &segments[segment];
    if last >= range.end {
        return Err("crosses the end of a sentence; an entity lies within one".into());
    }
    Ok((
        segment,
        Span {
            start: first - range.start,
            end: last + 1 - range.start,
            label: span.label.clone(),
        },
    ))
}

/// The tags each of `len` tokens may have with `entities` forced, as one mask of `[len * tags]`.
fn mask(entities: &[Span], len: usize, tags: &[String], scheme: TagScheme) -> Vec<bool> {
    forced_labels(entities, len, scheme)
        .into_iter()
        .flat_map(|label| match label {
            Label::Tag(tag) => Allowed::OneOf(vec![tag]).mask(tags),
            Label::Open(allowed) => allowed.mask(tags),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Layout, TagOptions, Tagged, Tagger};

    fn fixture() -> Tagger {
        let run = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/fixtures/before-tokenizers/sentence");
        Tagger::load(&run, &burn::tensor::Device::flex()).unwrap()
    }

    const TEXT: &str = "Anna Schmidt, who works for Siemens, arrived in Lisbon on Monday.";

    fn span(text: &str, word: &str, label: &str) -> CharSpan {
        let start = text.find(word).unwrap();
        CharSpan {
            start,
            end: start + word.len(),
            label: label.into(),
        }
    }

    fn tag(tagger: &Tagger, forced: Vec<CharSpan>) -> crate::Result<Tagged> {
        let options = TagOptions {
            marginals: true,
            nbest: 2,
            ..tagger.options()
        };
        let tokens = vec![tagger.tokenize(TEXT).unwrap()];
        Ok(tagger
            .tag_tokens_forced(&[TEXT], tokens, &[forced], options)?
            .remove(0))
    }

    fn entities(tagged: &Tagged) -> Vec<(String, String)> {
        let pairs = tagged.entities.iter();
        pairs.map(|e| (e.text.clone(), e.label.clone())).collect()
    }

    #[test]
    fn forced_entities_are_kept_and_the_rest_decoded_around_them() {
        let tagger = fixture();
        let free = tag(&tagger, Vec::new()).unwrap();
        let plain = tagger
            .tag(&[TEXT], Layout::Texts, tagger.options())
            .unwrap();
        assert_eq!(entities(&free), entities(&plain[0]));
        // Forcing what the model predicts changes no tag, and makes those entities certain.
        let own: Vec<CharSpan> = free.entities.iter().map(crate::Entity::span).collect();
        let same = tag(&tagger, own).unwrap();
        assert_eq!(same.tags, free.tags);
        for entity in &same.entities {
            let confidence = entity.confidence.unwrap();
            assert!((confidence - 1.0).abs() < 1e-9, "{entity:?}");
        }
        // Another label, and a span the model did not see: both exactly as forced.
        let forced = vec![span(TEXT, "Anna", "ORG"), span(TEXT, "Monday", "MISC")];
        let tagged = tag(&tagger, forced).unwrap();
        let got = entities(&tagged);
        assert!(got.contains(&("Anna".into(), "ORG".into())), "{got:?}");
        assert!(got.contains(&("Monday".into(), "MISC".into())), "{got:?}");
        assert!(
            !got.iter().any(|(text, _)| text.starts_with("Anna ")),
            "{got:?}"
        );
        // The marginals are conditioned on them: all the forced tokens' mass on their tags.
        let labels = tagger.tags();
        let b_org = labels.iter().position(|t| t == "B-ORG").unwrap();
        assert!((tagged.marginals[0][b_org] - 1.0).abs() < 1e-9);
        assert!(tagged.marginals.iter().all(|row| {
            let sum: f64 = row.iter().sum();
            (sum - 1.0).abs() < 1e-9
        }));
        // And every path of the n-best list goes through them.
        for path in &tagged.nbest {
            assert_eq!(path.tags[0], "B-ORG");
        }
    }

    #[test]
    fn forced_entities_it_cannot_take_are_errors_naming_them() {
        let tagger = fixture();
        let cases = [
            (vec![span(TEXT, "Anna", "NOPE")], "not one of the model's"),
            (
                vec![
                    span(TEXT, "Anna Schmidt", "PER"),
                    span(TEXT, "Schmidt", "PER"),
                ],
                "may not overlap",
            ),
            (
                vec![CharSpan {
                    start: 3,
                    end: 3,
                    label: "PER".into(),
                }],
                "empty",
            ),
            (
                vec![CharSpan {
                    start: 200,
                    end: 205,
                    label: "PER".into(),
                }],
                "no word",
            ),
        ];
        for (forced, expected) in cases {
            let error = tag(&tagger, forced).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
            assert!(error.starts_with("text 1: the entity forced at"), "{error}");
        }
    }
}
