//! [`BatchSizeFinder`]: the largest batch size that fits in memory, found at the start of
//! `fit` (Lightning's `BatchSizeFinder` callback). The search is [`crate::tuner`]'s.

use super::tuner_snapshot::TunerSnapshot;
use crate::callback::Callback;
use crate::module::LightningModule;
use crate::trainer::Trainer;
use crate::tuner::{run_trial, search, ScaleBatchSizeOptions, Trial};
use pyrite_core::{bail, Result};
use pyrite_data::{DataLoader, DataLoaderOptions};

/// Finds the largest batch size whose training steps fit in memory, at the start of `fit`,
/// and trains with it.
///
/// Each trial runs `steps_per_trial` training steps (the module's `training_step`, backward
/// and the optimizer's step, without callbacks or logging) on batches of the trial's size
/// from the training dataset, in order; a step that runs out of memory ends the trial (see
/// [`crate::tuner`] for the search). Afterwards the model's state_dict, the optimizer's
/// state and the global generator are put back as they were (Lightning saves and restores a
/// temporary checkpoint), the gradients are cleared, and the size found is
///
/// - handed to the module: [`LightningModule::set_batch_size`] with `batch_arg_name`
///   (Lightning sets `model.batch_size` or `model.hparams.batch_size`);
/// - used for the training loader of the rest of `fit`: the Trainer makes it from the loader
///   it was given with [`DataLoader::with_batch_size`] (same dataset, options and shuffling
///   generator, so the run equals one given that batch size from the start), as Lightning
///   rebuilds the module's `train_dataloader()`. The validation loader is left as given.
/// - kept in [`BatchSizeFinder::optimal_batch_size`].
///
/// It does not run when resuming from a checkpoint (the loader's position is for the batch
/// size of the first run) nor with `fast_dev_run`.
///
/// ```no_run
/// # use pyrite::train::{Trainer, TrainerOptions, FitOptions, LightningModule};
/// use pyrite::train::callbacks::BatchSizeFinder;
/// use pyrite::train::tuner::{BatchSizeMode, ScaleBatchSizeOptions};
/// # fn run(model: &mut dyn LightningModule, train: &pyrite::data::DataLoader) -> pyrite::Result<()> {
/// let finder = BatchSizeFinder::new(ScaleBatchSizeOptions { mode: BatchSizeMode::BinSearch, ..Default::default() })?;
/// let mut trainer = Trainer::new(TrainerOptions { callbacks: vec![Box::new(finder)], ..Default::default() })?;
/// trainer.fit(model, train, FitOptions::default())?;
/// let found = trainer.callback::<BatchSizeFinder>().and_then(|f| f.optimal_batch_size());
/// # Ok(()) }
/// ```
pub struct BatchSizeFinder {
    options: ScaleBatchSizeOptions,
    optimal_batch_size: Option<usize>,
    trials: Vec<Trial>,
    /// Stop `fit` once the size is found (set by the [`Tuner`](crate::tuner::Tuner)).
    pub(crate) early_exit: bool,
}

impl BatchSizeFinder {
    /// A finder; checks the options.
    pub fn new(options: ScaleBatchSizeOptions) -> Result<BatchSizeFinder> {
        options.check()?;
        Ok(BatchSizeFinder { options, optimal_batch_size: None, trials: vec![], early_exit: false })
    }

    pub fn options(&self) -> &ScaleBatchSizeOptions {
        &self.options
    }

    /// The batch size found by the latest search (`optimal_batch_size`).
    pub fn optimal_batch_size(&self) -> Option<usize> {
        self.optimal_batch_size
    }

    /// The latest search's trials, in order.
    pub fn trials(&self) -> &[Trial] {
        &self.trials
    }

    /// Runs the search; returns the size found (`None`: skipped).
    pub(crate) fn run(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
        train: &DataLoader,
    ) -> Result<Option<usize>> {
        if trainer.settings().fast_dev_run > 0 {
            eprintln!("warning: skipping batch size scaler since `fast_dev_run` is enabled.");
            return Ok(None);
        }
        let lo = train.options();
        if lo.batch_size.is_none() || lo.batch_sampler.is_some() {
            bail!(
                Value,
                "BatchSizeFinder: the training DataLoader must be built with a `batch_size` (not a `batch_sampler`, nor batch_size None)"
            );
        }
        let mut options = self.options.clone();
        if options.dataset_len.is_none() {
            options.dataset_len = Some(train.dataset().len());
        }
        options.check()?;

        // What the trials change, to put back.
        let snapshot = TunerSnapshot::take(trainer, module)?;
        let training = module.module().is_training();
        module.module().train();

        let steps = options.steps_per_trial;
        let mut trial = |bs: usize| -> Result<bool> {
            // The trial's loader: the dataset in order, in batches of `bs`.
            let loader = DataLoader::new(
                train.dataset().clone(),
                DataLoaderOptions {
                    batch_size: Some(bs),
                    shuffle: false,
                    sampler: None,
                    generator: None,
                    persistent_workers: false,
                    ..lo.clone()
                },
            )?;
            if loader.is_empty() {
                bail!(
                    Value,
                    "BatchSizeFinder: batch size {bs} gives no batches of a dataset of {} samples (drop_last)",
                    train.dataset().len()
                );
            }
            let mut it = loader.iter()?;
            let mut idx = 0usize;
            let mut step = |_bs: usize| -> Result<()> {
                let batch = match it.next() {
                    Some(b) => b?,
                    None => {
                        it = loader.iter()?;
                        idx = 0;
                        it.next().expect("the loader is not empty")?
                    }
                };
                trainer.raw_training_step(module, &batch, idx)?;
                idx += 1;
                Ok(())
            };
            let r = run_trial(&mut step, bs, steps);
            // The graph and gradients of a failed step go before the next trial.
            drop(it);
            if let Some(opt) = trainer.optimizer() {
                opt.zero_grad()?;
            }
            r
        };
        let result = search(&mut trial, &options);

        // Put everything back, whatever happened.
        let restored = (|| -> Result<()> {
            snapshot.restore(trainer, module)?;
            trainer.optimizer_mut().expect("configured").zero_grad()?;
            if !training {
                module.module().eval();
            }
            Ok(())
        })();
        drop(snapshot);
        pyrite_core::memory::empty_cache();
        let (found, trials) = result?;
        restored?;
        self.trials = trials;
        self.optimal_batch_size = Some(found);
        if !module.set_batch_size(&options.batch_arg_name, found)? {
            eprintln!(
                "note: BatchSizeFinder: the module does not take the batch size (implement `LightningModule::set_batch_size` to read `{}`); the Trainer trains with it",
                options.batch_arg_name
            );
        }
        eprintln!("Finished batch size finder, will continue with full run using batch size {found}");
        Ok(Some(found))
    }
}

impl Callback for BatchSizeFinder {}
