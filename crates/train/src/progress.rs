//! Progress of a training epoch: an indicatif bar on a terminal, a few plain lines otherwise.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct EpochProgress {
    bar: Option<ProgressBar>,
    label: String,
    total: usize,
    done: usize,
    loss_sum: f64,
    started: Instant,
    next_log: usize,
}

impl EpochProgress {
    pub fn new(epoch: usize, epochs: usize, total: usize) -> Self {
        let label = format!("epoch {epoch}/{epochs}");
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar =
                ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} sentences {msg} ETA {eta}",
                )
                .expect("a valid template")
                .progress_chars("=> "),
            );
            bar.set_prefix(label.clone());
            bar
        });
        Self {
            bar,
            label,
            total,
            done: 0,
            loss_sum: 0.0,
            started: Instant::now(),
            next_log: total / 4,
        }
    }

    pub fn advance(&mut self, sentences: usize, loss: f64) {
        self.done += sentences;
        self.loss_sum += loss;
        let rate = self.done as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
        let loss = self.loss_sum / self.done as f64;
        match &self.bar {
            Some(bar) => {
                bar.set_position(self.done as u64);
                bar.set_message(format!("{rate:.0} sent/s, loss {loss:.3}"));
            }
            None if self.done >= self.next_log && self.done < self.total => {
                eprintln!(
                    "{}: {}/{} sentences, {rate:.0} sent/s, loss {loss:.3}",
                    self.label, self.done, self.total
                );
                self.next_log += self.total / 4;
            }
            None => {}
        }
    }

    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
