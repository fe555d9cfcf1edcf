//! Any bytes through the CoNLL reader, the scheme conversions, the conlleval scorer and the
//! tag-column rewriter: errors are fine, panics and hangs are not.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use nertrain_data::{ColumnSpec, Scorer, TagScheme, convert_tag_column, convert_tags, parse_conll, spans};

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else { return };
    let path = Path::new("fuzz.txt");
    for columns in [ColumnSpec::default(), ColumnSpec { word_column: 1, tag_column: -2 }] {
        if let Ok(corpus) = parse_conll(text, path, columns) {
            let mut scorer = Scorer::new();
            for sentence in &corpus.sentences {
                assert_eq!(sentence.words.len(), sentence.tags.len());
                for scheme in TagScheme::ALL {
                    let converted = convert_tags(&sentence.tags, scheme);
                    // Conversion never changes the chunks.
                    assert_eq!(spans(&converted), spans(&convert_tags(&sentence.tags, TagScheme::Iob2)));
                }
                scorer.add_sentence(&sentence.tags, &sentence.tags);
            }
            let report = scorer.report();
            assert_eq!(report.overall.found, report.overall.gold);
            let _ = report.to_string();
        }
        for scheme in TagScheme::ALL {
            let _ = convert_tag_column(text, path, columns, Some(scheme), TagScheme::Iobes);
        }
    }
});
