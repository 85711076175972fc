//! Ray's default search: every grid combination, `num_samples` times, with the random domains
//! drawn independently for each trial.

use pyrite_core::Result;

use super::{SearchProperties, Searcher, Suggestion};
use crate::config::Config;
use crate::rng::Rng;
use crate::space::ParamSpace;

/// Options of [`BasicVariantGenerator`].
#[derive(Clone, Debug, Default)]
pub struct BasicVariantOptions {
    /// The seed of the random domains (`random_state`); `None` draws one from the clock.
    pub random_state: Option<u64>,
    /// Ray's `constant_grid_search`: draw the random domains once and reuse them for every grid
    /// combination of a sample.
    pub constant_grid_search: bool,
}

/// Grid x random search (`tune.search.BasicVariantGenerator`), the searcher used when none
/// is given.
///
/// ```
/// use pyrite_tune::search::{BasicVariantGenerator, SearchProperties, Searcher, Suggestion};
/// use pyrite_tune::{grid_search, uniform, Mode, ParamSpace};
/// let space = ParamSpace::new().with("a", grid_search([1, 2])).with("x", uniform(0.0, 1.0));
/// let mut s = BasicVariantGenerator::new(Default::default());
/// s.set_search_properties(&SearchProperties { metric: "loss", mode: Mode::Min, space: &space, num_samples: Some(3) }).unwrap();
/// let mut n = 0;
/// while let Suggestion::Config(_) = s.suggest(&n.to_string()).unwrap() { n += 1; }
/// assert_eq!(n, 6); // 2 grid values x 3 samples
/// ```
pub struct BasicVariantGenerator {
    options: BasicVariantOptions,
    rng: Rng,
    space: ParamSpace,
    /// Configs resolved for the current sample, handed out in order.
    queue: std::collections::VecDeque<Config>,
    samples_left: Option<usize>,
}

impl BasicVariantGenerator {
    /// A generator with these options.
    pub fn new(options: BasicVariantOptions) -> BasicVariantGenerator {
        let rng = options.random_state.map_or_else(Rng::from_entropy, Rng::seed_from);
        BasicVariantGenerator {
            options,
            rng,
            space: ParamSpace::new(),
            queue: Default::default(),
            samples_left: Some(1),
        }
    }
}

impl Searcher for BasicVariantGenerator {
    fn name(&self) -> String {
        "BasicVariantGenerator".into()
    }

    fn set_search_properties(&mut self, props: &SearchProperties<'_>) -> Result<()> {
        props.space.validate()?;
        self.space = props.space.clone();
        self.samples_left = props.num_samples;
        Ok(())
    }

    fn suggest(&mut self, _trial_id: &str) -> Result<Suggestion> {
        if self.queue.is_empty() {
            match &mut self.samples_left {
                Some(0) => return Ok(Suggestion::Finished),
                Some(n) => *n -= 1,
                None => {}
            }
            if self.options.constant_grid_search {
                // One draw of the random domains, shared by every grid combination.
                let base = self.space.resolve_with(&[], &mut self.rng)?;
                let grids = self.space.resolve_variants(&mut Rng::seed_from(0))?;
                for g in grids {
                    let mut c = base.clone();
                    for (path, d) in self.space.flatten() {
                        if let crate::space::Domain::Grid(_) = d {
                            c.set(&path, g.value(&path).cloned().unwrap_or_default());
                        }
                    }
                    self.queue.push_back(c);
                }
            } else {
                self.queue.extend(self.space.resolve_variants(&mut self.rng)?);
            }
        }
        Ok(self.queue.pop_front().map_or(Suggestion::Finished, Suggestion::Config))
    }

    fn handles_num_samples(&self) -> bool {
        true
    }
}
