//! What an annotation tool's numbers mean: offsets counted in code points (Python tools, Label
//! Studio today) or in UTF-16 units (JavaScript tools: doccano, older Label Studio), and the
//! times that say which of a task's annotations is the latest.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::TimeZone;

/// A text's character offsets in UTF-16 units, for converting from and to code points. Texts
/// whose characters are all in the Basic Multilingual Plane count the same in both and keep no
/// table.
pub(crate) struct Utf16Offsets {
    /// The UTF-16 offset of each code point, and of the text's end; empty when they are equal.
    starts: Vec<usize>,
    /// The text's length in code points.
    chars: usize,
}

impl Utf16Offsets {
    /// The table for `text`.
    pub(crate) fn new(text: &str) -> Self {
        let chars = text.chars().count();
        if text.chars().all(|c| c.len_utf16() == 1) {
            return Self {
                starts: Vec::new(),
                chars,
            };
        }
        let mut starts = Vec::with_capacity(chars + 1);
        let mut at = 0;
        for c in text.chars() {
            starts.push(at);
            at += c.len_utf16();
        }
        starts.push(at);
        Self { starts, chars }
    }

    /// Whether UTF-16 units and code points count alike in this text.
    pub(crate) fn is_identity(&self) -> bool {
        self.starts.is_empty()
    }

    /// The code point at UTF-16 offset `units`, or `None` past the text's end or inside a
    /// surrogate pair (an emoji cut in half).
    pub(crate) fn to_chars(&self, units: usize) -> Option<usize> {
        if self.is_identity() {
            return (units <= self.chars).then_some(units);
        }
        self.starts.binary_search(&units).ok()
    }

    /// The UTF-16 offset of code point `chars` (at most the text's length).
    pub(crate) fn to_units(&self, chars: usize) -> usize {
        if self.is_identity() {
            chars
        } else {
            self.starts[chars]
        }
    }
}

/// A time as Label Studio writes it (RFC 3339: `2024-05-01T10:00:00.500000Z`, an offset in place
/// of `Z`, or no zone, read as UTC), as an instant for comparing: as strings, `…00Z` sorts
/// after the later `…00.500000Z`.
pub(crate) fn parse_time(text: &str) -> Option<Timestamp> {
    text.parse::<Timestamp>().ok().or_else(|| {
        let civil: DateTime = text.parse().ok()?;
        TimeZone::UTC.to_timestamp(civil).ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_offsets_count_an_emoji_twice_and_refuse_its_middle() {
        let offsets = Utf16Offsets::new("a😀b 中");
        assert!(!offsets.is_identity());
        assert_eq!(
            (0..=6).map(|u| offsets.to_chars(u)).collect::<Vec<_>>(),
            [Some(0), Some(1), None, Some(2), Some(3), Some(4), Some(5)]
        );
        assert_eq!(offsets.to_chars(7), None);
        assert_eq!(
            (0..=5).map(|c| offsets.to_units(c)).collect::<Vec<_>>(),
            [0, 1, 3, 4, 5, 6]
        );
        let plain = Utf16Offsets::new("中文 é");
        assert!(plain.is_identity());
        assert_eq!(plain.to_chars(4), Some(4));
        assert_eq!(plain.to_chars(5), None);
    }

    #[test]
    fn times_compare_as_instants() {
        let t = |s: &str| parse_time(s).unwrap_or_else(|| panic!("{s}"));
        assert!(t("2024-05-01T10:00:00.500000Z") > t("2024-05-01T10:00:00Z"));
        assert_eq!(t("2024-05-01T12:00:00+02:00"), t("2024-05-01T10:00:00Z"));
        assert_eq!(t("1970-01-01T00:00:00Z"), Timestamp::UNIX_EPOCH);
        assert_eq!(t("2000-03-01T00:00:00Z").as_second(), 951_868_800);
        assert_eq!(
            t("2024-05-01T10:00:00.123456789Z").subsec_nanosecond(),
            123_456_789
        );
        assert_eq!(t("2024-05-01 10:00:00"), t("2024-05-01T10:00:00Z"));
        assert_eq!(t("2024-05-01t10:00:00z"), t("2024-05-01T10:00:00Z"));
        for bad in [
            "",
            "yesterday",
            "2024-13-01T00:00:00Z",
            "2024-05-01T25:00:00Z",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }
}
