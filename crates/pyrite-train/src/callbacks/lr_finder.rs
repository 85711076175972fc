//! [`LearningRateFinder`]: the learning-rate range test (Lightning's `LearningRateFinder`
//! callback and `Tuner.lr_find`).

use super::tuner_snapshot::TunerSnapshot;
use crate::callback::Callback;
use crate::module::LightningModule;
use crate::trainer::Trainer;
use pyrite_core::{bail, Result};
use pyrite_data::DataLoader;
use std::path::PathBuf;

/// How the learning rate grows over the test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LrFinderMode {
    #[default]
    Exponential,
    Linear,
}

/// [`LearningRateFinder`]'s options, with Lightning's defaults.
#[derive(Clone, Debug)]
pub struct LrFinderOptions {
    pub min_lr: f64,
    pub max_lr: f64,
    /// Training steps of the test (default 100).
    pub num_training_steps: usize,
    pub mode: LrFinderMode,
    /// Stop when the smoothed loss exceeds this multiple of the best (default 4; `None`:
    /// never).
    pub early_stop_threshold: Option<f64>,
    /// Hand the suggestion to the module (`LightningModule::set_learning_rate`) and configure
    /// the optimizers again (default true).
    pub update_attr: bool,
    /// Where to draw the loss-versus-lr plot (`.png` and `.svg`); default
    /// `<log_dir>/lr_find`.
    pub plot_path: Option<PathBuf>,
}

impl Default for LrFinderOptions {
    fn default() -> Self {
        LrFinderOptions {
            min_lr: 1e-8,
            max_lr: 1.0,
            num_training_steps: 100,
            mode: LrFinderMode::Exponential,
            early_stop_threshold: Some(4.0),
            update_attr: true,
            plot_path: None,
        }
    }
}

/// The test's results: the learning rates tried and the smoothed losses.
#[derive(Clone, Debug, Default)]
pub struct LrFinderResult {
    pub lrs: Vec<f64>,
    pub losses: Vec<f64>,
}

impl LrFinderResult {
    /// The index of the steepest descent of the loss (Lightning's `suggestion`: skipping
    /// `skip_begin` points at the start and `skip_end` at the end, and non-finite losses).
    pub fn suggestion_index(&self, skip_begin: usize, skip_end: usize) -> Option<usize> {
        let n = self.losses.len();
        if n < skip_begin + skip_end {
            return None;
        }
        let idx: Vec<usize> = (skip_begin..n - skip_end).filter(|&i| self.losses[i].is_finite()).collect();
        if idx.len() < 2 {
            return None;
        }
        let l: Vec<f64> = idx.iter().map(|&i| self.losses[i]).collect();
        // numpy / torch.gradient: one-sided at the ends, central inside.
        let g = |i: usize| -> f64 {
            if i == 0 {
                l[1] - l[0]
            } else if i == l.len() - 1 {
                l[i] - l[i - 1]
            } else {
                (l[i + 1] - l[i - 1]) / 2.0
            }
        };
        let best =
            (0..l.len()).min_by(|&a, &b| g(a).partial_cmp(&g(b)).unwrap_or(std::cmp::Ordering::Equal))?;
        Some(idx[best])
    }

    /// The suggested learning rate (`suggestion(skip_begin=10, skip_end=1)`).
    pub fn suggestion(&self) -> Option<f64> {
        self.suggestion_index(10, 1).map(|i| self.lrs[i])
    }
}

/// Runs the range test at the start of `fit`: `num_training_steps` steps with the learning
/// rate growing from `min_lr` to `max_lr`, the loss smoothed (`beta = 0.98`); then the model
/// and optimizer are put back as they were, and the suggestion (the steepest descent) is
/// handed to the module. The loss-versus-lr curve is drawn to `lr_find.png` / `.svg`.
pub struct LearningRateFinder {
    options: LrFinderOptions,
    result: Option<LrFinderResult>,
}

impl LearningRateFinder {
    pub fn new(options: LrFinderOptions) -> Result<LearningRateFinder> {
        if !(options.min_lr > 0.0 && options.max_lr > options.min_lr) {
            bail!(
                Value,
                "LearningRateFinder: need 0 < min_lr < max_lr, got {} and {}",
                options.min_lr,
                options.max_lr
            );
        }
        if options.num_training_steps < 2 {
            bail!(Value, "LearningRateFinder: num_training_steps must be at least 2");
        }
        Ok(LearningRateFinder { options, result: None })
    }

    /// The test's results, once it has run.
    pub fn result(&self) -> Option<&LrFinderResult> {
        self.result.as_ref()
    }

    /// The learning rate of step `k` (Lightning's `_ExponentialLR` / `_LinearLR`).
    fn lr_at(&self, k: usize) -> f64 {
        let (a, b, n) = (self.options.min_lr, self.options.max_lr, self.options.num_training_steps as f64);
        if k == 0 {
            return a;
        }
        let r = (k + 1) as f64 / n;
        match self.options.mode {
            LrFinderMode::Exponential => a * (b / a).powf(r),
            LrFinderMode::Linear => a + r * (b - a),
        }
    }

    pub(crate) fn run(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
        train: &DataLoader,
    ) -> Result<()> {
        let snapshot = TunerSnapshot::take(trainer, module)?;
        let saved_lrs: Vec<f64> = trainer
            .optimizer()
            .expect("configured")
            .param_groups()
            .iter()
            .map(|g| g.f64("lr"))
            .collect::<Result<_>>()?;
        module.module().train();
        let (beta, mut avg, mut best) = (0.98f64, 0.0f64, 0.0f64);
        let mut result = LrFinderResult::default();
        let mut step = 0usize;
        'outer: while step < self.options.num_training_steps {
            let mut any = false;
            for (i, batch) in train.iter()?.enumerate() {
                if step >= self.options.num_training_steps {
                    break 'outer;
                }
                any = true;
                let lr = self.lr_at(step);
                for g in trainer.optimizer_mut().expect("configured").param_groups_mut() {
                    g.set("lr", lr);
                }
                result.lrs.push(lr);
                let loss = trainer.raw_training_step(module, &batch?, i)?;
                step += 1;
                let Some(loss) = loss else {
                    result.losses.push(f64::NAN);
                    continue;
                };
                avg = beta * avg + (1.0 - beta) * loss;
                let smoothed = avg / (1.0 - beta.powi(step as i32 + 1));
                result.losses.push(smoothed);
                if let Some(t) = self.options.early_stop_threshold
                    && step > 1
                    && smoothed > t * best
                {
                    break 'outer;
                }
                if smoothed < best || step == 1 {
                    best = smoothed;
                }
            }
            if !any {
                bail!(Value, "LearningRateFinder: the training dataloader is empty");
            }
        }
        // Put everything back.
        snapshot.restore(trainer, module)?;
        let opt = trainer.optimizer_mut().expect("configured");
        for (g, lr) in opt.param_groups_mut().iter_mut().zip(saved_lrs) {
            g.set("lr", lr);
        }
        let suggestion = result.suggestion_index(10, 1);
        match suggestion {
            Some(i) => {
                let lr = result.lrs[i];
                if self.options.update_attr {
                    if module.set_learning_rate(lr)? {
                        let cfg = module.configure_optimizers()?;
                        *trainer.optimizer_config_mut().expect("configured") = cfg;
                    } else {
                        eprintln!("warning: LearningRateFinder suggests lr={lr:.3e}, but the module does not take a learning rate (implement `LightningModule::set_learning_rate`)");
                    }
                }
                eprintln!("Learning rate set to {lr:.3e}");
            }
            None => eprintln!(
                "Failed to compute suggestion for learning rate because there are not enough points. Increase the loop iteration limits or the size of your dataset/dataloader."
            ),
        }
        let path = self.options.plot_path.clone().unwrap_or_else(|| trainer.log_dir().join("lr_find"));
        if result.lrs.len() >= 2 {
            crate::plot::plot_lr_finder(&result.lrs, &result.losses, suggestion, &path)?;
        }
        self.result = Some(result);
        Ok(())
    }
}

impl Callback for LearningRateFinder {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suggestion_is_the_steepest_descent() {
        let losses: Vec<f64> =
            (0..30).map(|i| if i < 20 { 2.0 - 0.01 * (i as f64).powi(2) } else { 10.0 }).collect();
        let r = LrFinderResult { lrs: (0..30).map(|i| i as f64).collect(), losses };
        // Steepest drop (central difference) is at 18 (from 18 to 19 the loss still falls,
        // then it jumps up).
        assert_eq!(r.suggestion_index(10, 1), Some(18));
    }
}
