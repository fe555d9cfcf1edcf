//! `curves.svg`: loss, dev F1 and learning rate per epoch, three stacked line charts in plain SVG.

use std::fmt::Write;

use crate::EpochMetrics;

const WIDTH: f64 = 720.0;
const PANEL: f64 = 190.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 30.0;

/// The SVG document for a run's epochs so far.
pub fn render(history: &[EpochMetrics]) -> String {
    let panels: [(&str, &str, Vec<f64>); 3] = [
        (
            "training loss (per sentence)",
            "#1f77b4",
            history.iter().map(|m| m.loss).collect(),
        ),
        (
            "dev span F1",
            "#2ca02c",
            history.iter().map(|m| m.dev_f1).collect(),
        ),
        (
            "learning rate",
            "#d62728",
            history.iter().map(|m| m.lr).collect(),
        ),
    ];
    let height = panels.len() as f64 * (PANEL + TOP + BOTTOM);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let best = history
        .iter()
        .filter(|m| m.best)
        .map(|m| m.epoch)
        .next_back();
    for (index, (title, colour, values)) in panels.iter().enumerate() {
        let top = index as f64 * (PANEL + TOP + BOTTOM) + TOP;
        panel(
            &mut svg,
            top,
            title,
            colour,
            values,
            if index == 1 { best } else { None },
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn panel(
    svg: &mut String,
    top: f64,
    title: &str,
    colour: &str,
    values: &[f64],
    marked_epoch: Option<usize>,
) {
    let (bottom, right) = (top + PANEL, WIDTH - RIGHT);
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="{}" font-weight="bold">{title}</text>"#,
        top - 10.0
    );
    let _ = writeln!(
        svg,
        r##"<polyline points="{LEFT},{top} {LEFT},{bottom} {right},{bottom}" fill="none" stroke="#444"/>"##
    );
    if values.is_empty() {
        return;
    }
    let (mut low, mut high) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    if high - low < 1e-12 {
        (low, high) = (low - 0.5, high + 0.5);
    }
    let epochs = values.len();
    let x = |i: usize| {
        if epochs == 1 {
            (LEFT + right) / 2.0
        } else {
            LEFT + (right - LEFT) * i as f64 / (epochs - 1) as f64
        }
    };
    let y = |v: f64| bottom - (bottom - top) * (v - low) / (high - low);
    for (value, anchor_y) in [(high, top + 4.0), (low, bottom)] {
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{anchor_y}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            number(value)
        );
    }
    for (i, label) in [(0, 1), (epochs - 1, epochs)] {
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">epoch {label}</text>"#,
            x(i),
            bottom + 18.0
        );
    }
    let points: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, &v)| format!("{:.1},{:.1}", x(i), y(v)))
        .collect();
    let _ = writeln!(
        svg,
        r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
        points.join(" ")
    );
    for (i, &v) in values.iter().enumerate() {
        let _ = writeln!(
            svg,
            r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"/>"#,
            x(i),
            y(v)
        );
    }
    if let Some(epoch) = marked_epoch {
        let (cx, cy) = (x(epoch - 1), y(values[epoch - 1]));
        let _ = writeln!(
            svg,
            r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="6" fill="none" stroke="black"/>"#
        );
        let _ = writeln!(
            svg,
            r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle">best {}</text>"#,
            cy - 10.0,
            number(values[epoch - 1])
        );
    }
}

fn number(value: f64) -> String {
    if value.abs() >= 1.0 || value == 0.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.5}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(epoch: usize, loss: f64, dev_f1: f64, best: bool) -> EpochMetrics {
        EpochMetrics {
            epoch,
            lr: 0.015 / (1.0 + 0.05 * (epoch - 1) as f64),
            loss,
            train_seconds: 1.0,
            sentences_per_second: 1.0,
            tokens_per_second: 1.0,
            dev_precision: dev_f1,
            dev_recall: dev_f1,
            dev_f1,
            eval_seconds: 0.1,
            best,
            test_f1: None,
        }
    }

    #[test]
    fn draws_every_epoch_and_marks_the_best() {
        let history = [
            epoch(1, 3.0, 70.0, true),
            epoch(2, 1.5, 80.5, true),
            epoch(3, 1.0, 79.0, false),
        ];
        let svg = render(&history);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(
            svg.matches("<polyline points=\"").count(),
            6,
            "an axis and a line per panel"
        );
        assert_eq!(
            svg.matches(r#"r="3""#).count(),
            9,
            "a point per epoch per panel"
        );
        assert!(svg.contains(">best 80.50<"));
        assert!(
            render(&history[..1]).contains("epoch 1"),
            "one epoch draws too"
        );
        assert!(render(&[]).contains("</svg>"));
    }
}
