//! `curves.svg`: a run's learning curves, drawn with plotters: training loss (log scale), dev and
//! test span F1 with the best epoch marked, and the learning rate, one panel each over the epochs.

use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::EpochMetrics;

const WIDTH: u32 = 800;
const PANEL_HEIGHT: u32 = 300;
const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const LOSS: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const DEV: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
const TEST: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
const RATE: RGBColor = RGBColor(0xd6, 0x27, 0x28);

/// The SVG document for a run's epochs so far.
pub fn render(history: &[EpochMetrics]) -> String {
    static FONT_REGISTERED: Once = Once::new();
    FONT_REGISTERED.call_once(|| {
        // The font is compiled in and known to parse.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 3 * PANEL_HEIGHT)).into_drawing_area();
        // Drawing into a string cannot fail but for a bug; a chart is never worth a failed run.
        let _ = draw(&root, history);
        let _ = root.present();
    }
    svg
}

fn draw(root: &DrawingArea<SVGBackend, Shift>, history: &[EpochMetrics]) -> Result<(), String> {
    let error = |e: DrawingAreaErrorKind<_>| e.to_string();
    root.fill(&WHITE).map_err(error)?;
    let panels = root.split_evenly((3, 1));
    let last = history.last().map_or(1, |m| m.epoch).max(2);
    let epochs = 1..last;
    let best = history.iter().rfind(|m| m.best);

    let losses: Vec<(usize, f64)> = history
        .iter()
        .filter(|m| m.loss > 0.0 && m.loss.is_finite())
        .map(|m| (m.epoch, m.loss))
        .collect();
    let (low, high) = bounds(losses.iter().map(|p| p.1), 1.0);
    let mut chart = panel(&panels[0], "training loss per sentence (log scale)")
        .build_cartesian_2d(epochs.clone(), (low / 1.5..high * 1.5).log_scale())
        .map_err(error)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc("loss")
        .draw()
        .map_err(error)?;
    series(&mut chart, &losses, LOSS, "loss")?;

    let dev: Vec<(usize, f64)> = history.iter().map(|m| (m.epoch, m.dev_f1)).collect();
    let test: Vec<(usize, f64)> = history
        .iter()
        .filter_map(|m| m.test_f1.map(|f| (m.epoch, f)))
        .collect();
    let (low, high) = bounds(dev.iter().chain(&test).map(|p| p.1), 0.0);
    let (low, high) = ((low - 2.0).max(0.0), (high + 2.0).min(100.0));
    let mut chart = panel(&panels[1], "span F1")
        .build_cartesian_2d(epochs.clone(), low..high.max(low + 1.0))
        .map_err(error)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc("F1")
        .draw()
        .map_err(error)?;
    series(&mut chart, &dev, DEV, "dev")?;
    if !test.is_empty() {
        series(&mut chart, &test, TEST, "test (reported only)")?;
    }
    if let Some(best) = best {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(best.epoch, low), (best.epoch, high)],
                BLACK.mix(0.4).stroke_width(1),
            )))
            .map_err(error)?
            .label(format!(
                "best: epoch {}, dev F1 {:.2}",
                best.epoch, best.dev_f1
            ))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.4)));
        // A ring around the best point, visible also where the line runs along the edge.
        chart
            .draw_series(std::iter::once(Circle::new(
                (best.epoch, best.dev_f1),
                7,
                BLACK.stroke_width(2),
            )))
            .map_err(error)?;
    }
    legend(&mut chart)?;

    let rates: Vec<(usize, f64)> = history.iter().map(|m| (m.epoch, m.lr)).collect();
    let (low, high) = bounds(rates.iter().map(|p| p.1), 1.0);
    let mut chart = panel(&panels[2], "learning rate")
        .build_cartesian_2d(epochs, low * 0.9..high * 1.1)
        .map_err(error)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc("lr")
        .y_label_formatter(&|v| format!("{v:.4}"))
        .draw()
        .map_err(error)?;
    series(&mut chart, &rates, RATE, "learning rate")?;
    Ok(())
}

fn panel<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64);
    builder
}

/// The smallest and largest value, or `empty` twice when there are none.
fn bounds(values: impl Iterator<Item = f64>, empty: f64) -> (f64, f64) {
    values
        .fold(None, |range: Option<(f64, f64)>, v| {
            Some(range.map_or((v, v), |(low, high)| (low.min(v), high.max(v))))
        })
        .unwrap_or((empty, empty))
}

fn series<X, Y>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    points: &[(usize, f64)],
    colour: RGBColor,
    label: &str,
) -> Result<(), String>
where
    X: plotters::coord::ranged1d::Ranged<ValueType = usize>,
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    let error = |e: DrawingAreaErrorKind<_>| e.to_string();
    chart
        .draw_series(LineSeries::new(
            points.iter().copied(),
            colour.stroke_width(2),
        ))
        .map_err(error)?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
    chart
        .draw_series(
            points
                .iter()
                .map(|&point| Circle::new(point, 3, colour.filled())),
        )
        .map_err(error)?;
    Ok(())
}

fn legend<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
) -> Result<(), String>
where
    X: plotters::coord::ranged1d::Ranged,
    Y: plotters::coord::ranged1d::Ranged,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(|e| e.to_string())
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
            test_f1: Some(dev_f1 - 3.0),
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
        for text in [
            "training loss per sentence (log scale)",
            "span F1",
            "learning rate",
            "best: epoch 2, dev F1 80.50",
            "test (reported only)",
            "epoch",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert_eq!(
            svg.matches("<circle").count(),
            13,
            "a point per epoch for loss, dev, test and rate, and a ring around the best"
        );
        assert!(
            render(&history[..1]).contains("best: epoch 1"),
            "one epoch draws too"
        );
        assert!(render(&[]).contains("</svg>"));
    }
}
