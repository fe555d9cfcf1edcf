//! A token's label in training data, and what a tag column holds: the one type that reads and
//! writes `-`, a label nobody gave. It knows nothing of tag schemes, so that schemes, partial
//! labels and vocabularies can all use it.

use std::fmt;

/// A token's label in training data: the tag given, or open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Label {
    /// The tag given.
    Tag(String),
    /// Any tag [`Allowed`] admits: [`Allowed::Any`] where nobody gave one; once converted to
    /// the training scheme, what the labels beside an unknown token leave open.
    Open(Allowed),
}

impl Label {
    /// A label nobody gave.
    pub const UNKNOWN: Label = Label::Open(Allowed::Any);

    /// How a CoNLL tag column writes a label that is not one tag.
    const UNKNOWN_FIELD: &str = "-";

    /// A tag column's field: `-` is unknown, anything else a tag (not checked here).
    pub fn parse(field: &str) -> Label {
        if Self::is_unknown(field) {
            Label::UNKNOWN
        } else {
            Label::Tag(field.to_string())
        }
    }

    /// Whether a tag column's field says the label is unknown.
    pub fn is_unknown(field: &str) -> bool {
        field == Self::UNKNOWN_FIELD
    }

    /// The label `allowed` leaves: its one tag, if it allows exactly one.
    pub(crate) fn from_allowed(allowed: Allowed) -> Label {
        match allowed.single() {
            Some(tag) => Label::Tag(tag.to_string()),
            None => Label::Open(allowed),
        }
    }
}

impl fmt::Display for Label {
    /// The tag, or `-` where the label is open.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.tag().unwrap_or(Self::UNKNOWN_FIELD))
    }
}

/// What a tag column holds for each token: a tag ([`String`]: gold, every token labelled) or a
/// [`Label`] (training data, where some may be open).
pub trait TagColumn: Clone {
    /// The token's tag, where one is given.
    fn tag(&self) -> Option<&str>;

    /// What the token may be, where no one tag is given.
    fn open(&self) -> Option<&Allowed>;
}

impl TagColumn for String {
    fn tag(&self) -> Option<&str> {
        Some(self)
    }

    fn open(&self) -> Option<&Allowed> {
        None
    }
}

impl TagColumn for Label {
    fn tag(&self) -> Option<&str> {
        match self {
            Label::Tag(tag) => Some(tag),
            Label::Open(_) => None,
        }
    }

    fn open(&self) -> Option<&Allowed> {
        match self {
            Label::Tag(_) => None,
            Label::Open(allowed) => Some(allowed),
        }
    }
}

/// The tags of a sentence, if every one is given.
pub fn known_tags<L: TagColumn>(labels: &[L]) -> Option<Vec<&str>> {
    labels.iter().map(TagColumn::tag).collect()
}

/// What one token's tag may be, in the training scheme.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// Any tag of the tag set.
    Any,
    /// Any tag but these (a token after an entity known to end there may not continue it).
    Except(Vec<String>),
    /// One of these (a labelled token; two where a boundary next to unknown tokens is open).
    OneOf(Vec<String>),
}

impl Allowed {
    /// Whether each tag of `tags` (a tag vocabulary's items, in id order) is allowed.
    pub fn mask(&self, tags: &[String]) -> Vec<bool> {
        let among = |list: &[String], item: &str| list.iter().any(|t| t == item);
        tags.iter()
            .map(|tag| match self {
                Allowed::Any => true,
                Allowed::Except(list) => !among(list, tag),
                Allowed::OneOf(list) => among(list, tag),
            })
            .collect()
    }

    /// The tags these allow in common.
    pub(crate) fn intersect(self, other: Allowed) -> Allowed {
        match (self, other) {
            (Allowed::Any, x) | (x, Allowed::Any) => x,
            (Allowed::Except(mut a), Allowed::Except(b)) => {
                a.extend(b);
                Allowed::Except(a)
            }
            (Allowed::OneOf(a), Allowed::Except(b)) | (Allowed::Except(b), Allowed::OneOf(a)) => {
                Allowed::OneOf(a.into_iter().filter(|t| !b.contains(t)).collect())
            }
            (Allowed::OneOf(a), Allowed::OneOf(b)) => {
                Allowed::OneOf(a.into_iter().filter(|t| b.contains(t)).collect())
            }
        }
    }

    /// Whether no tag is allowed.
    pub fn is_empty(&self) -> bool {
        matches!(self, Allowed::OneOf(list) if list.is_empty())
    }

    /// The one tag allowed, if exactly one is.
    pub fn single(&self) -> Option<&str> {
        match self {
            Allowed::OneOf(list) if list.len() == 1 => Some(&list[0]),
            _ => None,
        }
    }
}
