//! Prodigy's JSON lines: spaCy's span shape ([`crate::spacy_spans`]), with an `answer`. Only an
//! `accept` (or a line without an answer) is gold; `reject` and `ignore` lines are left out and
//! counted, and any other answer is an error.

use crate::tally::Tally;

/// Whether a line with `answer` is gold; a line that is not is counted in `tally`. An error
/// says which answers there are.
pub(crate) fn is_gold(answer: Option<&str>, tally: &mut Tally) -> Result<bool, String> {
    match answer {
        None | Some("accept") => Ok(true),
        Some(answer @ ("reject" | "ignore")) => {
            *tally.answers.entry(answer.to_string()).or_default() += 1;
            Ok(false)
        }
        Some(other) => Err(format!(
            "answer {other:?}: expected Prodigy's accept, reject or ignore"
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::parse_annotated;
    use crate::testing::spans_of;

    #[test]
    fn prodigy_answers_other_than_accept_are_left_out_and_counted() {
        let lines = concat!(
            r#"{"text": "Anna flew.", "spans": [{"start": 0, "end": 4, "label": "PER"}], "answer": "accept"}"#,
            "\n",
            r#"{"text": "Paris flew.", "spans": [{"start": 0, "end": 5, "label": "PER"}], "answer": "reject"}"#,
            "\n",
            r#"{"text": "Kim flew.", "spans": [{"start": 0, "end": 3, "label": "ORG"}], "answer": "ignore"}"#,
            "\n",
            r#"{"text": "Lee flew.", "spans": [{"start": 0, "end": 3, "label": "ORG"}], "answer": "reject"}"#,
            "\n",
        );
        let corpus = parse_annotated(lines, Path::new("teach.jsonl")).unwrap();
        assert_eq!(spans_of(&corpus), [vec![(0, 4, "PER")]]);
        assert_eq!(
            corpus.warnings,
            [
                "teach.jsonl: lines whose answer is not `accept` are not gold and were left out \
              (1 ignore, 2 reject)"
            ]
        );
        let error = parse_annotated(
            r#"{"text": "a", "spans": [], "answer": "maybe"}"#,
            Path::new("t.jsonl"),
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("t.jsonl:1: answer \"maybe\""),
            "{error}"
        );
        let error = parse_annotated(
            r#"{"text": "a", "spans": [], "answer": "reject"}"#,
            Path::new("t.jsonl"),
        )
        .unwrap_err();
        assert!(error.to_string().contains("no annotated text"), "{error}");
    }
}
