//! Hyperparameter tuning with Ray Tune's API (`pyrite::tune`): search spaces, the `Tuner`,
//! search algorithms (grid and random, TPE) and trial schedulers (FIFO, ASHA, the median
//! stopping rule), with trials running in parallel threads and every step of the experiment
//! in an embedded SQLite database, so an interrupted experiment resumes where it stopped.
//!
//! ```
//! use pyrite_tune::schedulers::{AshaOptions, ASHAScheduler};
//! use pyrite_tune::search::{TpeOptions, TpeSearch};
//! use pyrite_tune::{loguniform, Mode, ParamSpace, RunConfig, TuneConfig, Tuner};
//! let dir = std::env::temp_dir().join(format!("tune_lib_doc_{}", std::process::id()));
//! let tuner = Tuner::new(
//!     |config, session| {
//!         let lr: f64 = config.get("lr")?;
//!         let mut loss = 1.0;
//!         for _ in 0..9 {
//!             loss *= 1.0 - (lr.log10() + 4.0) / 5.0; // lr near 0.1 learns fastest
//!             session.report([("loss", loss)], None)?;
//!         }
//!         Ok(())
//!     },
//!     ParamSpace::new().with("lr", loguniform(1e-4, 1e-1)),
//!     TuneConfig {
//!         metric: Some("loss".into()),
//!         mode: Some(Mode::Min),
//!         num_samples: 12,
//!         search_alg: Some(Box::new(TpeSearch::new(TpeOptions { seed: Some(0), ..Default::default() }))),
//!         scheduler: Some(Box::new(ASHAScheduler::new(AshaOptions { max_t: 9.0, grace_period: 1.0, reduction_factor: 3.0, seed: Some(0), ..Default::default() }).unwrap())),
//!         ..Default::default()
//!     },
//!     RunConfig { name: Some("lib_doc".into()), storage_path: Some(dir.clone()), verbose: Some(0), ..Default::default() },
//! );
//! let results = tuner.fit().unwrap();
//! let best = results.get_best_result(None, None).unwrap();
//! assert!(best.config.get::<f64>("lr").unwrap() > 1e-2);
//! std::fs::remove_dir_all(dir).unwrap();
//! ```

mod config;
pub mod integration;
pub mod plots;
mod process;
mod progress;
mod result_grid;
mod rng;
pub mod schedulers;
pub mod search;
mod session;
mod space;
pub mod storage;
mod trial;
mod tuner;

pub use config::Config;
pub use result_grid::{ResultGrid, TrialResult};
pub use rng::Rng;
pub use session::{Checkpoint, Session};
pub use space::{
    choice, grid_search, lograndint, loguniform, qlograndint, qloguniform, qrandint, qrandn, quniform,
    randint, randn, sample_from, uniform, Domain, ParamSpace, Sampler,
};
pub use trial::{Metrics, Mode, TrialStatus, TIMESTAMP, TIME_THIS_ITER_S, TIME_TOTAL_S, TRAINING_ITERATION};
pub use tuner::{
    CheckpointConfig, FailureConfig, Resources, RunConfig, Stop, Trainable, TrialExecutor, TuneConfig, Tuner,
};
