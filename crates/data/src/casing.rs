//! A word's shape as one of a few classes (Reimers & Gurevych, 2017), for models whose word
//! vocabulary is lowercased or whose characters are not looked at.

/// The classes, tested in this order; `Padding` is only ever a padding slot's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Casing {
    /// A padding slot.
    Padding,
    /// Digits only: `1996`.
    Numeric,
    /// More than half digits: `3-1`, `1,200`.
    MainlyNumeric,
    /// Letters, none upper-case: `berlin`, `co.`.
    AllLower,
    /// Letters, none lower-case: `EU`, `U.S.`.
    AllUpper,
    /// An upper-case first character: `Berlin`, `McDonald`.
    InitialUpper,
    /// Some digit, and neither of the casings above: `iPhone4`, `1-`.
    ContainsDigit,
    /// Anything else: `iPhone`, `-`.
    Other,
}

impl Casing {
    /// How many classes there are, `Padding` included.
    pub const COUNT: usize = 8;

    /// The class of `word`.
    pub fn of(word: &str) -> Self {
        let chars = word.chars().count();
        let digits = word.chars().filter(char::is_ascii_digit).count();
        let upper = word.chars().filter(|c| c.is_uppercase()).count();
        let lower = word.chars().filter(|c| c.is_lowercase()).count();
        if chars > 0 && digits == chars {
            Self::Numeric
        } else if 2 * digits > chars {
            Self::MainlyNumeric
        } else if lower > 0 && upper == 0 {
            Self::AllLower
        } else if upper > 0 && lower == 0 {
            Self::AllUpper
        } else if word.chars().next().is_some_and(char::is_uppercase) {
            Self::InitialUpper
        } else if digits > 0 {
            Self::ContainsDigit
        } else {
            Self::Other
        }
    }

    /// The class's id, in the casing embedding.
    pub fn id(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_words_in_order() {
        let cases = [
            ("1996", Casing::Numeric),
            ("3-1", Casing::MainlyNumeric),
            ("1,200", Casing::MainlyNumeric),
            ("berlin", Casing::AllLower),
            ("co.", Casing::AllLower),
            ("EU", Casing::AllUpper),
            ("U.S.", Casing::AllUpper),
            ("A", Casing::AllUpper),
            ("Berlin", Casing::InitialUpper),
            ("McDonald", Casing::InitialUpper),
            ("F-16", Casing::AllUpper),
            ("f-16", Casing::AllLower),
            ("Über", Casing::InitialUpper),
            ("ÉTÉ", Casing::AllUpper),
            ("iPhone", Casing::Other),
            ("-", Casing::Other),
            ("x1y2z", Casing::AllLower),
            ("1x", Casing::AllLower),
            ("iPhone4", Casing::ContainsDigit),
            ("1-", Casing::ContainsDigit),
            ("", Casing::Other),
        ];
        for (word, casing) in cases {
            assert_eq!(Casing::of(word), casing, "{word:?}");
        }
    }

    #[test]
    fn ids_are_dense_and_padding_is_zero() {
        assert_eq!(Casing::Padding.id(), 0);
        assert_eq!(Casing::Other.id(), Casing::COUNT - 1);
    }
}
