//! The JSON forms the files are written in: scores and dictionaries as written, and a model's
//! description merged with the keys a caller gives.

use nertrain_data::Dictionary;

use super::{RecordedScores, StoredDictionary};

/// `dictionary.json`'s bytes.
pub(super) fn dictionary_json(dictionary: &Dictionary) -> Vec<u8> {
    // Strings and lists of them: nothing here fails to serialise.
    serde_json::to_vec(&StoredDictionary::of(dictionary)).expect("a dictionary serialises")
}

/// Overlays `given` on `base`, table by table: settings added after a file was written take
/// their defaults from `base`.
pub fn merge_json(base: &mut serde_json::Value, given: serde_json::Value) {
    match (base, given) {
        (serde_json::Value::Object(base), serde_json::Value::Object(given)) => {
            for (key, value) in given {
                match base.get_mut(&key) {
                    Some(slot) => merge_json(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (slot, value) => *slot = value,
    }
}

/// Scores as their files (`dev.json`, `test.json`) hold them: keys sorted, as `eval --json`
/// prints them.
pub fn scores_json(scores: &RecordedScores) -> Vec<u8> {
    // Numbers, strings and maps of them: nothing here fails to serialise.
    nertrain_data::io::to_sorted_json(scores, true)
        .expect("scores serialise")
        .into_bytes()
}
