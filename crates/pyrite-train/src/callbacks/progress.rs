//! [`ProgressBar`]: a bar per training epoch with it/s, the ETA and the `prog_bar` metrics
//! (Lightning's `TQDMProgressBar`, drawn with indicatif); plain lines when stderr is not a
//! terminal.

use crate::callback::Callback;
use crate::module::LightningModule;
use crate::trainer::Trainer;
use pyrite_core::Result;
use std::io::IsTerminal;
use std::time::Instant;

/// The Trainer's default progress bar.
pub struct ProgressBar {
    bar: Option<indicatif::ProgressBar>,
    tty: bool,
    started: Option<Instant>,
}

impl Default for ProgressBar {
    fn default() -> Self {
        ProgressBar { bar: None, tty: std::io::stderr().is_terminal(), started: None }
    }
}

fn metrics_text(trainer: &Trainer) -> String {
    trainer
        .progress_bar_metrics()
        .iter()
        .map(|(k, v)| {
            format!(
                "{k}={}",
                if v.abs() >= 1e-3 || *v == 0.0 { format!("{v:.4}") } else { format!("{v:.3e}") }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Callback for ProgressBar {
    fn on_train_epoch_start(&mut self, trainer: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        self.started = Some(Instant::now());
        if self.tty {
            let bar = indicatif::ProgressBar::new(trainer.num_training_batches() as u64);
            let style = indicatif::ProgressStyle::with_template(
                "Epoch {prefix}: {percent:>3}% [{bar:25}] {pos}/{len} [{elapsed}<{eta}, {per_sec}] {msg}",
            )
            .expect("a valid template")
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(trainer.current_epoch().to_string());
            self.bar = Some(bar);
        }
        Ok(())
    }

    fn on_train_batch_end(
        &mut self,
        trainer: &mut Trainer,
        _m: &mut dyn LightningModule,
        _o: &crate::StepOutput,
        _b: &pyrite_data::Sample,
        _i: usize,
    ) -> Result<()> {
        if let Some(bar) = &self.bar {
            bar.inc(1);
            bar.set_message(metrics_text(trainer));
        }
        Ok(())
    }

    fn on_train_epoch_end(&mut self, trainer: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        let text = metrics_text(trainer);
        let n = trainer.num_training_batches();
        let secs = self.started.map_or(0.0, |s| s.elapsed().as_secs_f64());
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        eprintln!(
            "Epoch {}: {n}/{n} [{secs:.1}s, {:.1} it/s] {text}",
            trainer.current_epoch(),
            n as f64 / secs.max(1e-9)
        );
        Ok(())
    }
}
