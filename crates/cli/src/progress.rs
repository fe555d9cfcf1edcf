//! What `fit` shows of a training run: each epoch's progress (an indicatif bar on a terminal, a
//! few plain lines otherwise) on stderr, and its results on stdout.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use nertrain_train::FitEvent;

/// Renders a run's [`FitEvent`]s as they come. When stdout cannot be written (a closed pipe, a
/// full disk), it stops printing and asks the run to stop as Ctrl-C does, saving first.
pub struct FitReporter {
    progress: Option<EpochProgress>,
    interrupt: Arc<AtomicBool>,
    /// The first failed write to stdout.
    pub stdout_error: Option<std::io::Error>,
}

impl FitReporter {
    pub fn new(interrupt: Arc<AtomicBool>) -> Self {
        Self {
            progress: None,
            interrupt,
            stdout_error: None,
        }
    }

    /// A line of results on stdout, unless stdout has already failed.
    fn line(&mut self, line: std::fmt::Arguments<'_>) {
        if self.stdout_error.is_some() {
            return;
        }
        let mut out = std::io::stdout().lock();
        let written = out
            .write_fmt(line)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        if let Err(error) = written {
            self.stdout_error = Some(error);
            self.interrupt.store(true, Ordering::SeqCst);
        }
    }

    pub fn show(&mut self, event: FitEvent) {
        match event {
            FitEvent::Info { message } => self.line(format_args!("{message}")),
            FitEvent::Warning { message } => eprintln!("warning: {message}"),
            FitEvent::EpochStarted {
                epoch,
                epochs,
                sentences,
                done,
                loss_sum,
            } => {
                let mut progress = EpochProgress::new(epoch, epochs, sentences);
                if done > 0 {
                    progress.advance(done, loss_sum);
                }
                self.progress = Some(progress);
            }
            FitEvent::Batch { sentences, loss } => {
                if let Some(progress) = &mut self.progress {
                    progress.advance(sentences, loss);
                }
            }
            FitEvent::EpochTrained => {
                if let Some(progress) = self.progress.take() {
                    progress.finish();
                }
            }
            FitEvent::EpochEnded { metrics: m } => self.line(format_args!(
                "epoch {:>3}: loss {:.4}  dev P {:.2} R {:.2} F1 {:.2}{}{}  {:.0} sent/s  {:.1}s train, {:.1}s dev  lr {:.5}",
                m.epoch,
                m.loss,
                m.dev_precision,
                m.dev_recall,
                m.dev_f1,
                if m.best { " *" } else { "" },
                m.test_f1
                    .map(|f| format!("  test F1 {f:.2}"))
                    .unwrap_or_default(),
                m.sentences_per_second,
                m.train_seconds,
                m.eval_seconds,
                m.lr
            )),
            FitEvent::Interrupted { epoch, batch } => self.line(format_args!(
                "interrupted: saved after batch {batch} of epoch {epoch}; continue with --resume"
            )),
            FitEvent::EarlyStop { patience } => {
                self.line(format_args!("early stop: no better dev F1 in {patience} epochs"))
            }
            FitEvent::Finished {
                best_epoch,
                best_dev_f1,
                weights,
            } => self.line(format_args!(
                "best dev F1 {best_dev_f1:.2} at epoch {best_epoch} → {}",
                weights.display()
            )),
            FitEvent::ConsistencyChosen {
                scores,
                weight,
                dev_f1,
            } => {
                let tried: Vec<String> = scores
                    .iter()
                    .map(|(w, f1)| format!("{w}: {f1:.2}"))
                    .collect();
                self.line(format_args!(
                    "document consistency {weight} (dev F1 {dev_f1:.2}; by weight {})",
                    tried.join(", ")
                ))
            }
            FitEvent::TrainingWithDev { epochs, output } => self.line(format_args!(
                "\ntraining on train and dev for {epochs} epochs into {} (its dev scores are not \
                 held out)",
                output.display()
            )),
            FitEvent::TestScored { path, report } => {
                self.line(format_args!(
                    "test {}: F1 {:.2}\n{report}",
                    path.display(),
                    report.f1()
                ))
            }
        }
    }
}

struct EpochProgress {
    bar: Option<ProgressBar>,
    label: String,
    total: usize,
    done: usize,
    loss_sum: f64,
    started: Instant,
    next_log: usize,
}

impl EpochProgress {
    fn new(epoch: usize, epochs: usize, total: usize) -> Self {
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

    fn advance(&mut self, sentences: usize, loss: f64) {
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

    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
