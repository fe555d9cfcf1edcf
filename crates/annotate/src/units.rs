//! What an annotation tool's numbers mean: offsets counted in code points (Python tools, Label
//! Studio today) or in UTF-16 units (JavaScript tools: doccano, older Label Studio), and the
//! times that say which of a task's annotations is the latest.

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
/// of `Z`, or no zone, read as UTC), as seconds and nanoseconds since 1970 for comparing: as
/// strings, `…00Z` sorts after the later `…00.500000Z`.
pub(crate) fn parse_time(text: &str) -> Option<(i64, u32)> {
    let number = |s: &str| -> Option<i64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let (date, rest) = text.split_at_checked(10)?;
    let mut parts = date.split('-');
    let (year, month, day) = (
        number(parts.next()?)?,
        number(parts.next()?)?,
        number(parts.next()?)?,
    );
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (clock, mut zone) = rest.split_at_checked(8)?;
    let mut fields = clock.split(':');
    let (hour, minute, second) = (
        number(fields.next()?)?,
        number(fields.next()?)?,
        number(fields.next()?)?,
    );
    let mut nanos = 0u32;
    if let Some(fraction) = zone.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        let (digits_text, after) = fraction.split_at(digits);
        let kept = &digits_text[..digits.min(9)];
        nanos = u32::try_from(number(kept)?).ok()? * 10u32.pow(9 - kept.len() as u32);
        zone = after;
    }
    let offset = match zone {
        "" | "Z" | "z" => 0,
        _ => {
            let sign = match zone.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (hours, minutes) = zone[1..].split_once(':')?;
            sign * (number(hours)? * 3600 + number(minutes)? * 60)
        }
    };
    let valid = (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && hour < 24
        && minute < 60
        && second <= 60;
    if !valid {
        return None;
    }
    // Days from 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Some((
        days * 86_400 + hour * 3600 + minute * 60 + second - offset,
        nanos,
    ))
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
        assert_eq!(t("1970-01-01T00:00:00Z"), (0, 0));
        assert_eq!(t("2000-03-01T00:00:00Z").0, 951_868_800);
        assert_eq!(t("2024-05-01T10:00:00.123456789123Z").1, 123_456_789);
        assert_eq!(t("2024-05-01 10:00:00"), t("2024-05-01T10:00:00Z"));
        for bad in [
            "",
            "yesterday",
            "2024-13-01T00:00:00Z",
            "2024-05-01T10:00:00+0200",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }
}
