//! Words to sub-tokens as the Python `tokenizers` library cuts them (the fixtures of
//! `scripts/encoders/make_fixtures.py`), and windows over long sentences that score every word
//! once.

use std::path::{Path, PathBuf};

use nertrain_data::{Pieces, SubwordTokenizer, Window};
use serde::Deserialize;

#[derive(Deserialize)]
struct Expected {
    sentences: Vec<Sentence>,
}

#[derive(Deserialize)]
struct Sentence {
    words: Vec<String>,
    ids: Vec<u32>,
    /// -1 for the special sub-tokens.
    word_ids: Vec<i64>,
}

fn fixture(family: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/encoders")
        .join(family)
}

fn tokenizer(family: &str) -> SubwordTokenizer {
    SubwordTokenizer::from_file(&fixture(family).join("tokenizer.json")).unwrap()
}

fn expected(family: &str) -> Expected {
    let text = std::fs::read_to_string(fixture(family).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn words(sentence: &Sentence) -> Vec<&str> {
    sentence.words.iter().map(String::as_str).collect()
}

#[test]
fn sub_tokens_and_word_ids_are_those_python_gives() {
    for family in ["bert", "distilbert", "roberta"] {
        let tokenizer = tokenizer(family);
        for sentence in expected(family).sentences {
            let (ids, word_ids) = tokenizer.encode_words(&words(&sentence)).unwrap();
            let word_ids: Vec<i64> = word_ids.iter().map(|w| w.map_or(-1, i64::from)).collect();
            assert_eq!(ids, sentence.ids, "{family}: {:?}", sentence.words);
            assert_eq!(
                word_ids, sentence.word_ids,
                "{family}: {:?}",
                sentence.words
            );
        }
    }
}

#[test]
fn the_padding_and_truncation_in_the_file_are_cleared() {
    // The BERT fixture's tokenizer.json pads and truncates to 24, as all-MiniLM-L6-v2's pads
    // to 128.
    let tokenizer = tokenizer("bert");
    let words: Vec<String> = (0..30).map(|i| format!("word{i}")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let (ids, _) = tokenizer.encode_words(&words).unwrap();
    assert!(ids.len() > 30, "{}", ids.len());
    let (ids, _) = tokenizer.encode_words(&["Berlin"]).unwrap();
    assert!(ids.len() < 24, "{}", ids.len());
}

/// BPE dropout left in a `tokenizer.json` would cut the same words differently on every call,
/// and the same text would be tagged differently each time.
#[test]
fn bpe_dropout_in_the_file_is_cleared() {
    let text = std::fs::read_to_string(fixture("roberta").join("tokenizer.json")).unwrap();
    let mut file: serde_json::Value = serde_json::from_str(&text).unwrap();
    file["model"]["dropout"] = serde_json::json!(0.9);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, file.to_string()).unwrap();
    let with_dropout = SubwordTokenizer::from_file(&path).unwrap();
    let words = [
        "Germany",
        "imported",
        "sheep",
        "from",
        "Britain",
        "yesterday",
    ];
    let cut = tokenizer("roberta").encode_words(&words).unwrap();
    for _ in 0..10 {
        assert_eq!(with_dropout.encode_words(&words).unwrap(), cut);
    }
}

#[test]
fn a_word_that_comes_out_as_nothing_is_given_the_unknown_sub_token() {
    let tokenizer = tokenizer("bert");
    let unknown = 1; // "[UNK]" in the fixture's vocabulary
    let words = ["Japan", "\u{200b}", "coach", "\u{00ad}"];
    let pieces = tokenizer.pieces(&words).unwrap();
    assert_eq!(pieces.words(), 4);
    for w in 0..4 {
        assert!(
            pieces.word_starts[w] < pieces.word_starts[w + 1],
            "word {w}: {pieces:?}"
        );
    }
    assert_eq!(pieces.ids[pieces.word_starts[1]], unknown);
    assert_eq!(pieces.ids[pieces.word_starts[3]], unknown);
    assert_eq!(pieces.word_starts[4], pieces.ids.len());
}

/// Every word scored exactly once, at its own first sub-token, within `max_len`.
fn check_windows(
    tokenizer: &SubwordTokenizer,
    pieces: &Pieces,
    windows: &[Window],
    max_len: usize,
) {
    let mut scored = Vec::new();
    for window in windows {
        assert!(
            window.ids.len() <= max_len,
            "{} > {max_len}",
            window.ids.len()
        );
        assert_eq!(window.first_pieces.len(), window.scored.len());
        for (w, &at) in window.scored.clone().zip(&window.first_pieces) {
            assert_eq!(
                window.ids[at], pieces.ids[pieces.word_starts[w]],
                "word {w}"
            );
            scored.push(w);
        }
        assert!(window.ids.len() >= tokenizer.specials());
    }
    assert_eq!(scored, (0..pieces.words()).collect::<Vec<_>>());
}

#[test]
fn long_sentences_are_read_in_windows_that_score_each_word_once() {
    for family in ["bert", "roberta"] {
        let tokenizer = tokenizer(family);
        let text = "Peter Blackburn lives in Berlin and works for the European Commission , \
                    Xylophonics Zwölfkampf !";
        let words: Vec<&str> = text.split(' ').cycle().take(200).collect();
        let pieces = tokenizer.pieces(&words).unwrap();
        for max_len in [6, 9, 16, 40, 64, 1000] {
            let windows = tokenizer.windows(&pieces, max_len);
            check_windows(&tokenizer, &pieces, &windows, max_len);
            if pieces.ids.len() + tokenizer.specials() <= max_len {
                assert_eq!(windows.len(), 1);
            } else {
                assert!(windows.len() > 1);
                // Context around the scored words, where there is room for it.
                let middle = &windows[windows.len() / 2];
                let scored_pieces: usize = middle
                    .scored
                    .clone()
                    .map(|w| pieces.word_starts[w + 1] - pieces.word_starts[w])
                    .sum();
                if max_len >= 16 {
                    assert!(middle.ids.len() > scored_pieces + tokenizer.specials());
                }
            }
        }
    }
}

#[test]
fn a_word_longer_than_a_window_keeps_its_first_sub_tokens() {
    let tokenizer = tokenizer("roberta");
    let words = ["Peter", "Xylophonicsxylophonicsxylophonics", "Berlin"];
    let pieces = tokenizer.pieces(&words).unwrap();
    let windows = tokenizer.windows(&pieces, 6);
    check_windows(&tokenizer, &pieces, &windows, 6);
}

#[test]
fn read_in_documents_a_sentence_is_given_its_neighbours_as_context_it_does_not_score() {
    use nertrain_data::{DOCUMENT_CONTEXT, Encoded};
    let tokenizer = tokenizer("bert");
    let sentences: Vec<Vec<&str>> = vec![
        vec!["Peter", "Blackburn", "lives", "in", "Berlin", "."],
        vec!["EU", "rejects", "German", "call", "."],
        vec!["Japan", "coach", "Shu", "Kamo", "said", "."],
        // Another document.
        vec!["Rare", "Hendrix", "song", "draft", "sells", "."],
    ];
    let words: Vec<&[&str]> = sentences.iter().map(Vec::as_slice).collect();
    let pieces: Vec<Pieces> = sentences
        .iter()
        .map(|s| tokenizer.pieces(s).unwrap())
        .collect();
    for max_len in [24, 64, 512] {
        let mut encoded: Vec<Encoded> = (0..4).map(|_| Encoded::default()).collect();
        tokenizer
            .set_windows(&mut encoded, &words, &[0..3, 3..4], max_len)
            .unwrap();
        for (i, sentence) in encoded.iter().enumerate() {
            let own = &pieces[i];
            check_windows(&tokenizer, own, &sentence.windows, max_len);
            let window = &sentence.windows[0];
            let first = window.first_pieces[0];
            let context_left = first - 1; // after [CLS]
            let context_right = window.ids.len() - 1 - (first + own.ids.len());
            assert!(context_left <= DOCUMENT_CONTEXT && context_right <= DOCUMENT_CONTEXT);
            // The sentence's own sub-tokens, whole, between its neighbours'.
            assert_eq!(window.ids[first..first + own.ids.len()], own.ids[..]);
            let before: Vec<u32> = pieces[..i].iter().flat_map(|p| p.ids.clone()).collect();
            let after: Vec<u32> = pieces[i + 1..].iter().flat_map(|p| p.ids.clone()).collect();
            match i {
                0 | 3 => assert_eq!(context_left, 0, "sentence {i} opens its document"),
                _ => assert_eq!(window.ids[1..first], before[before.len() - context_left..]),
            }
            match i {
                2 | 3 => assert_eq!(context_right, 0, "sentence {i} ends its document"),
                _ => assert_eq!(
                    window.ids[first + own.ids.len()..window.ids.len() - 1],
                    after[..context_right]
                ),
            }
            if max_len == 512 && i == 1 {
                assert_eq!(
                    (context_left, context_right),
                    (pieces[0].ids.len(), pieces[2].ids.len())
                );
            }
        }
    }
}
