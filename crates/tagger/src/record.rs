//! The JSON records of tagged text: what `nertrain tag --format json` prints, one per text.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::Tagged;

/// An entity found in a text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entity {
    /// Its type (`PER`, `LOC`, ...).
    pub label: String,
    /// Its first character's offset in the text, in code points.
    pub start: usize,
    /// One past its last character's offset, in code points.
    pub end: usize,
    /// The text it covers.
    pub text: String,
    /// The probability that exactly these words form an entity of this type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// The tokens it covers (indices into [`Tagged::tokens`]).
    #[serde(skip)]
    pub tokens: Range<usize>,
}

impl Entity {
    /// Its characters and label, as the annotation tools' readers and writers take spans.
    pub fn span(&self) -> nertrain_annotate::CharSpan {
        nertrain_annotate::CharSpan {
            start: self.start,
            end: self.end,
            label: self.label.clone(),
        }
    }
}

/// A token with its tag and p(tag | text) for every tag of the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenProbabilities {
    /// The word as written.
    pub text: String,
    /// Its offsets, in code points.
    pub start: usize,
    /// One past its end, in code points.
    pub end: usize,
    /// Its tag on the best path.
    pub tag: String,
    /// p(tag | text) for every tag of the model.
    pub probs: BTreeMap<String, f64>,
}

/// One of the n best tag paths, as entities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alternative {
    /// p(path | text).
    pub probability: f64,
    /// The path's entities.
    pub entities: Vec<Entity>,
}

/// One tagged text as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The text as given.
    pub text: String,
    /// The best path's entities.
    pub entities: Vec<Entity>,
    /// With marginals: every token with its tag probabilities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<TokenProbabilities>,
    /// With n-best paths: each path's entities and probability.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nbest: Vec<Alternative>,
}

impl Tagged {
    /// This text as its JSON record; `labels` are the model's tags ([`crate::Tagger::tags`]).
    pub fn into_record(self, labels: &[String]) -> Record {
        let tokens = self
            .marginals
            .into_iter()
            .zip(self.tokens)
            .zip(self.tags)
            .map(|((probs, token), tag)| TokenProbabilities {
                text: token.text,
                start: token.start,
                end: token.end,
                tag,
                probs: labels.iter().cloned().zip(probs).collect(),
            })
            .collect();
        Record {
            text: self.text,
            entities: self.entities,
            tokens,
            nbest: self
                .nbest
                .into_iter()
                .map(|path| Alternative {
                    probability: path.probability,
                    entities: path.entities,
                })
                .collect(),
        }
    }
}

/// At least as many bytes as the JSON record of `text`, of `tokens` tokens, tagged with
/// `options` by a model of `labels`, takes: what a server can check before tagging it. Every
/// byte of text may take six escaped (`\u0000`), every number 24; entities are at most one a
/// token, and their texts together at most the text.
pub fn record_size_bound(
    text: &str,
    tokens: usize,
    labels: &[String],
    options: &crate::TagOptions,
) -> usize {
    let escaped = 6 * text.len();
    let longest_label = labels.iter().map(String::len).max().unwrap_or(0);
    let entities = escaped + tokens * (100 + longest_label);
    let paths = if options.nbest > 1 {
        options.nbest * (40 + entities)
    } else {
        0
    };
    let marginals = if options.marginals {
        let per_token: usize =
            80 + longest_label + labels.iter().map(|l| l.len() + 28).sum::<usize>();
        escaped + tokens * per_token
    } else {
        0
    };
    20 + escaped + entities + paths + marginals
}

/// The page that shows tagged texts with their entities highlighted by type (confidence on
/// hover, the n best paths under each text): one self-contained HTML file that fetches nothing.
/// With `records`, it shows them (`nertrain tag --format html`); without, it is `nertrain serve`'s
/// page, which sends what is pasted into it to `POST /tag`.
pub fn html_page(records: Option<&[Record]>) -> String {
    let json = serde_json::to_string(&records).expect("records serialise");
    // Inside a <script> element, `</script` closes it and `<!--` starts a state in which the
    // page's own script is swallowed: `\u003c` is the same character in a JSON string, and `<`
    // appears nowhere else in the JSON (nor `>` and `&`, escaped alike for good measure).
    let json = json
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    PAGE.replace("RECORDS", &json)
}

const PAGE: &str = include_str!("page.html");
