//! Search spaces with Ray Tune's names: `choice`, `uniform`, `quniform`, `loguniform`,
//! `qloguniform`, `randint`, `qrandint`, `lograndint`, `qlograndint`, `randn`, `qrandn`,
//! `grid_search`, `sample_from`, constants and nested spaces.
//!
//! ```
//! use pyrite_tune::{choice, grid_search, loguniform, randint, sample_from, ParamSpace, Rng};
//! let space = ParamSpace::new()
//!     .with("lr", loguniform(1e-4, 1e-1))
//!     .with("optimizer", choice(["adam", "sgd"]))
//!     .with("model", ParamSpace::new().with("width", randint(16, 65)).with("depth", 2))
//!     .with("seed", grid_search([0, 1]))
//!     .with("wd", sample_from(|c| (c.get::<f64>("lr").unwrap() / 10.0).into()));
//! let configs = space.resolve_variants(&mut Rng::seed_from(0)).unwrap();
//! assert_eq!(configs.len(), 2); // one per grid value
//! let c = &configs[0];
//! assert!((1e-4..1e-1).contains(&c.get::<f64>("lr").unwrap()));
//! assert_eq!(c.get::<i64>("model/depth").unwrap(), 2);
//! assert_eq!(c.get::<f64>("wd").unwrap(), c.get::<f64>("lr").unwrap() / 10.0);
//! ```

use std::fmt;
use std::sync::Arc;

use pyrite_core::{Error, ErrorKind, Result};
use serde_json::Value;

use crate::config::Config;
use crate::rng::Rng;

/// How a float or integer domain draws its values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampler {
    /// Uniform between the bounds.
    Uniform,
    /// Uniform in the logarithm (`base` only changes nothing but the docs, as in Ray).
    LogUniform { base: f64 },
    /// Normal with a mean and a standard deviation (floats only, unbounded).
    Normal { mean: f64, sd: f64 },
}

/// A value computed from the rest of the config (`tune.sample_from`).
#[derive(Clone)]
pub struct SampleFn(pub Arc<dyn Fn(&Config) -> Value + Send + Sync>);

impl fmt::Debug for SampleFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sample_from(<fn>)")
    }
}

/// One entry of a search space.
#[derive(Clone, Debug)]
pub enum Domain {
    /// A float between `lower` and `upper` (`upper` excluded), optionally a multiple of `q`.
    Float { lower: f64, upper: f64, sampler: Sampler, q: Option<f64> },
    /// An integer in `lower..upper`, optionally a multiple of `q` (then `upper` is included
    /// unless `q` is 1, as Ray's `qrandint` says).
    Integer { lower: i64, upper: i64, sampler: Sampler, q: Option<i64> },
    /// One of these values, each equally likely.
    Categorical(Vec<Value>),
    /// Every one of these values, one trial (per sample) each.
    Grid(Vec<Value>),
    /// Computed from the resolved rest of the config.
    Function(SampleFn),
    /// A fixed value.
    Constant(Value),
    /// A nested space (`config.get("model/width")`).
    Space(ParamSpace),
}

/// `tune.uniform(lower, upper)`.
pub fn uniform(lower: f64, upper: f64) -> Domain {
    Domain::Float { lower, upper, sampler: Sampler::Uniform, q: None }
}
/// `tune.quniform(lower, upper, q)`: uniform, rounded to a multiple of `q`.
pub fn quniform(lower: f64, upper: f64, q: f64) -> Domain {
    Domain::Float { lower, upper, sampler: Sampler::Uniform, q: Some(q) }
}
/// `tune.loguniform(lower, upper)`: uniform in log space.
pub fn loguniform(lower: f64, upper: f64) -> Domain {
    Domain::Float { lower, upper, sampler: Sampler::LogUniform { base: 10.0 }, q: None }
}
/// `tune.qloguniform(lower, upper, q)`.
pub fn qloguniform(lower: f64, upper: f64, q: f64) -> Domain {
    Domain::Float { lower, upper, sampler: Sampler::LogUniform { base: 10.0 }, q: Some(q) }
}
/// `tune.randn(mean, sd)`.
pub fn randn(mean: f64, sd: f64) -> Domain {
    Domain::Float {
        lower: f64::NEG_INFINITY,
        upper: f64::INFINITY,
        sampler: Sampler::Normal { mean, sd },
        q: None,
    }
}
/// `tune.qrandn(mean, sd, q)`.
pub fn qrandn(mean: f64, sd: f64, q: f64) -> Domain {
    Domain::Float {
        lower: f64::NEG_INFINITY,
        upper: f64::INFINITY,
        sampler: Sampler::Normal { mean, sd },
        q: Some(q),
    }
}
/// `tune.randint(lower, upper)`: `lower` included, `upper` excluded.
pub fn randint(lower: i64, upper: i64) -> Domain {
    Domain::Integer { lower, upper, sampler: Sampler::Uniform, q: None }
}
/// `tune.qrandint(lower, upper, q)`: the multiples of `q` from `lower` to `upper` (included,
/// except for `q = 1`).
pub fn qrandint(lower: i64, upper: i64, q: i64) -> Domain {
    Domain::Integer { lower, upper, sampler: Sampler::Uniform, q: Some(q) }
}
/// `tune.lograndint(lower, upper)`: log-uniform, `upper` excluded.
pub fn lograndint(lower: i64, upper: i64) -> Domain {
    Domain::Integer { lower, upper, sampler: Sampler::LogUniform { base: 10.0 }, q: None }
}
/// `tune.qlograndint(lower, upper, q)`.
pub fn qlograndint(lower: i64, upper: i64, q: i64) -> Domain {
    Domain::Integer { lower, upper, sampler: Sampler::LogUniform { base: 10.0 }, q: Some(q) }
}
/// `tune.choice(categories)`.
pub fn choice<V: Into<Value>>(categories: impl IntoIterator<Item = V>) -> Domain {
    Domain::Categorical(categories.into_iter().map(Into::into).collect())
}
/// `tune.grid_search(values)`: every value is tried (times `num_samples`).
pub fn grid_search<V: Into<Value>>(values: impl IntoIterator<Item = V>) -> Domain {
    Domain::Grid(values.into_iter().map(Into::into).collect())
}
/// `tune.sample_from(fn)`: a value computed from the rest of the resolved config.
pub fn sample_from(f: impl Fn(&Config) -> Value + Send + Sync + 'static) -> Domain {
    Domain::Function(SampleFn(Arc::new(f)))
}

macro_rules! constant_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Domain {
            fn from(v: $t) -> Domain {
                Domain::Constant(Value::from(v))
            }
        }
    )*};
}
constant_from!(f64, f32, i64, i32, u32, usize, bool, &str, String);

impl From<Value> for Domain {
    fn from(v: Value) -> Domain {
        Domain::Constant(v)
    }
}

impl From<ParamSpace> for Domain {
    fn from(s: ParamSpace) -> Domain {
        Domain::Space(s)
    }
}

fn value_err(msg: String) -> Error {
    Error::new(ErrorKind::Value, msg)
}

impl Domain {
    /// Checks the bounds (Ray's assertions, as errors).
    pub fn validate(&self, name: &str) -> Result<()> {
        match self {
            Domain::Float { lower, upper, sampler, q } => {
                if let Sampler::Normal { sd, .. } = sampler {
                    if *sd <= 0.0 || !sd.is_finite() {
                        return Err(value_err(format!("{name}: randn needs sd > 0, got {sd}")));
                    }
                } else if lower.partial_cmp(upper) != Some(std::cmp::Ordering::Less)
                    || !lower.is_finite()
                    || !upper.is_finite()
                {
                    return Err(value_err(format!(
                        "{name}: the lower bound {lower} must be below the upper bound {upper}"
                    )));
                }
                if matches!(sampler, Sampler::LogUniform { .. }) && *lower <= 0.0 {
                    return Err(value_err(format!(
                        "{name}: LogUniform needs a lower bound greater than 0, got {lower}"
                    )));
                }
                if let Some(q) = q {
                    if *q <= 0.0 {
                        return Err(value_err(format!("{name}: q must be positive, got {q}")));
                    }
                    if lower.is_finite()
                        && grid_index(*upper, *q, f64::floor) < grid_index(*lower, *q, f64::ceil)
                    {
                        return Err(value_err(format!(
                            "{name}: there is no multiple of the quantization factor q={q} between the bounds {lower} and {upper} of this domain, so it has no values to sample"
                        )));
                    }
                }
            }
            Domain::Integer { lower, upper, sampler, q } => {
                let q = q.unwrap_or(1);
                if q <= 0 {
                    return Err(value_err(format!("{name}: q must be positive, got {q}")));
                }
                let (lo, hi) = self.integer_range().unwrap_or((0, -1));
                if q == 1 && lower >= upper {
                    return Err(value_err(format!(
                        "{name}: randint's lower bound {lower} must be below its (excluded) upper bound {upper}"
                    )));
                }
                if hi < lo {
                    return Err(value_err(format!(
                        "{name}: there is no multiple of the quantization factor q={q} between the bounds {lower} and {upper} of this domain, so it has no values to sample"
                    )));
                }
                if matches!(sampler, Sampler::LogUniform { .. }) && *lower <= 0 {
                    return Err(value_err(format!(
                        "{name}: LogUniform needs a lower bound greater than 0, got {lower}"
                    )));
                }
            }
            Domain::Categorical(v) | Domain::Grid(v) if v.is_empty() => {
                return Err(value_err(format!("{name}: needs at least one value")));
            }
            Domain::Space(s) => {
                for (k, d) in &s.entries {
                    d.validate(&format!("{name}/{k}"))?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// An integer domain's possible values as an inclusive range `(first, last)` of
    /// multiples of `q` (for `q > 1`) or of integers.
    pub fn integer_range(&self) -> Option<(i64, i64)> {
        match *self {
            Domain::Integer { lower, upper, q, .. } => {
                let q = q.unwrap_or(1);
                if q == 1 {
                    Some((lower, upper - 1))
                } else {
                    let lo = (lower as f64 / q as f64).ceil() as i64 * q;
                    let hi = (upper as f64 / q as f64).floor() as i64 * q;
                    Some((lo, hi))
                }
            }
            _ => None,
        }
    }

    /// Draws one value (grid and function entries are resolved by the space, not here).
    pub fn sample(&self, rng: &mut Rng) -> Value {
        match self {
            Domain::Float { lower, upper, sampler, q } => {
                let (lo, hi) = match q {
                    Some(q) if lower.is_finite() => {
                        (grid_index(*lower, *q, f64::ceil) * q, grid_index(*upper, *q, f64::floor) * q)
                    }
                    _ => (*lower, *upper),
                };
                let x = match sampler {
                    Sampler::Uniform => rng.uniform_in(lo, hi),
                    Sampler::LogUniform { .. } => rng.uniform_in(lo.ln(), hi.ln()).exp(),
                    Sampler::Normal { mean, sd } => mean + sd * rng.normal(),
                };
                let x = match q {
                    Some(q) => {
                        let v = (x / q).round() * q;
                        if lo.is_finite() {
                            v.clamp(lo, hi)
                        } else {
                            v
                        }
                    }
                    None => x,
                };
                Value::from(x)
            }
            Domain::Integer { sampler, q, .. } => {
                let (lo, hi) = self.integer_range().expect("an integer domain");
                let q = q.unwrap_or(1);
                let (ilo, ihi) = (lo / q, hi / q); // indices of the multiples, inclusive
                let idx = match sampler {
                    Sampler::LogUniform { .. } => {
                        // Log-uniform over the values, then back to the nearest index.
                        let (a, b) = ((lo.max(1)) as f64, (hi + if q == 1 { 1 } else { 0 }) as f64);
                        let x = rng.uniform_in(a.ln(), b.ln()).exp();
                        let i = if q == 1 { x.floor() as i64 } else { (x / q as f64).round() as i64 };
                        i.clamp(ilo, ihi)
                    }
                    _ => ilo + rng.below((ihi - ilo + 1) as u64) as i64,
                };
                Value::from(idx * q)
            }
            Domain::Categorical(v) => v[rng.below(v.len() as u64) as usize].clone(),
            Domain::Constant(v) => v.clone(),
            Domain::Grid(v) => v[0].clone(),
            Domain::Function(_) | Domain::Space(_) => Value::Null,
        }
    }
}

/// `bound`'s index on the grid of multiples of `q`, rounded inwards (Ray's `_grid_index`).
fn grid_index(bound: f64, q: f64, round: fn(f64) -> f64) -> f64 {
    let scaled = bound / q;
    let nearest = scaled.round();
    if (scaled - nearest).abs() <= 1e-9 * scaled.abs().max(1.0) {
        nearest
    } else {
        round(scaled)
    }
}

/// A search space: named domains, in the order given, possibly nested.
#[derive(Clone, Debug, Default)]
pub struct ParamSpace {
    entries: Vec<(String, Domain)>,
}

impl ParamSpace {
    /// An empty space.
    pub fn new() -> ParamSpace {
        ParamSpace::default()
    }

    /// Adds (or replaces) an entry: a domain, a constant, or a nested `ParamSpace`.
    pub fn with(mut self, name: impl Into<String>, domain: impl Into<Domain>) -> ParamSpace {
        let name = name.into();
        let domain = domain.into();
        match self.entries.iter_mut().find(|(k, _)| *k == name) {
            Some(e) => e.1 = domain,
            None => self.entries.push((name, domain)),
        }
        self
    }

    /// The entries in order.
    pub fn entries(&self) -> &[(String, Domain)] {
        &self.entries
    }

    /// Every entry of this space and the nested ones, with `/`-joined paths, in order.
    pub fn flatten(&self) -> Vec<(String, Domain)> {
        let mut out = Vec::new();
        fn walk(prefix: &str, s: &ParamSpace, out: &mut Vec<(String, Domain)>) {
            for (k, d) in &s.entries {
                let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}/{k}") };
                match d {
                    Domain::Space(inner) => walk(&path, inner, out),
                    d => out.push((path, d.clone())),
                }
            }
        }
        walk("", self, &mut out);
        out
    }

    /// Checks every domain's bounds.
    pub fn validate(&self) -> Result<()> {
        for (k, d) in self.flatten() {
            d.validate(&k)?;
        }
        Ok(())
    }

    /// The number of grid combinations (1 without `grid_search`).
    pub fn grid_size(&self) -> usize {
        self.flatten().iter().map(|(_, d)| if let Domain::Grid(v) = d { v.len() } else { 1 }).product()
    }

    /// One config per grid combination, in Ray's order (the first grid entry varies fastest),
    /// with the random domains drawn and the `sample_from` entries computed last.
    pub fn resolve_variants(&self, rng: &mut Rng) -> Result<Vec<Config>> {
        self.validate()?;
        let flat = self.flatten();
        let grids: Vec<(usize, &Vec<Value>)> = flat
            .iter()
            .enumerate()
            .filter_map(|(i, (_, d))| if let Domain::Grid(v) = d { Some((i, v)) } else { None })
            .collect();
        let total = self.grid_size();
        let mut out = Vec::with_capacity(total);
        for n in 0..total {
            let mut fixed: Vec<(String, Value)> = Vec::new();
            let mut rest = n;
            for (i, values) in &grids {
                fixed.push((flat[*i].0.clone(), values[rest % values.len()].clone()));
                rest /= values.len();
            }
            out.push(self.resolve_with(&fixed, rng)?);
        }
        Ok(out)
    }

    /// A config with the given `(path, value)` pairs fixed and every other domain drawn;
    /// `sample_from` entries are computed last, in order, each seeing the ones before it.
    pub fn resolve_with(&self, fixed: &[(String, Value)], rng: &mut Rng) -> Result<Config> {
        let flat = self.flatten();
        let mut config = Config::default();
        let mut functions = Vec::new();
        for (path, d) in &flat {
            if let Some((_, v)) = fixed.iter().find(|(p, _)| p == path) {
                config.set(path, v.clone());
                continue;
            }
            match d {
                Domain::Function(f) => {
                    config.set(path, Value::Null);
                    functions.push((path.clone(), f.clone()));
                }
                d => config.set(path, d.sample(rng)),
            }
        }
        for (path, f) in functions {
            let v = (f.0)(&config);
            config.set(&path, v);
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_domain_stays_in_its_bounds_and_quantizes() {
        let mut rng = Rng::seed_from(3);
        for _ in 0..2000 {
            let x = quniform(0.0, 1.0, 0.25).sample(&mut rng).as_f64().unwrap();
            assert!([0.0, 0.25, 0.5, 0.75, 1.0].contains(&x), "{x}");
            let x = loguniform(1e-4, 1e-1).sample(&mut rng).as_f64().unwrap();
            assert!((1e-4..1e-1).contains(&x));
            let i = randint(3, 6).sample(&mut rng).as_i64().unwrap();
            assert!((3..6).contains(&i));
            // qrandint: upper included for q > 1.
            let i = qrandint(2, 10, 4).sample(&mut rng).as_i64().unwrap();
            assert!([4, 8].contains(&i), "{i}");
            let i = qrandint(1, 5, 1).sample(&mut rng).as_i64().unwrap();
            assert!((1..5).contains(&i));
            let i = lograndint(1, 100).sample(&mut rng).as_i64().unwrap();
            assert!((1..100).contains(&i), "{i}");
            let x = qrandn(0.0, 1.0, 0.5).sample(&mut rng).as_f64().unwrap();
            assert_eq!((x / 0.5).fract(), 0.0);
        }
        let all: std::collections::BTreeSet<i64> =
            (0..500).map(|_| qrandint(2, 10, 4).sample(&mut rng).as_i64().unwrap()).collect();
        assert_eq!(all.into_iter().collect::<Vec<_>>(), vec![4, 8]);
    }

    #[test]
    fn bad_bounds_are_errors_with_ray_s_messages() {
        let e = loguniform(0.0, 1.0).validate("lr").unwrap_err();
        assert!(e.message().contains("LogUniform needs a lower bound greater than 0"), "{e}");
        let e = qrandint(1, 3, 5).validate("n").unwrap_err();
        assert!(e.message().contains("no multiple of the quantization factor q=5"), "{e}");
        assert!(uniform(2.0, 1.0).validate("x").is_err());
        assert!(choice(Vec::<i64>::new()).validate("c").is_err());
    }

    #[test]
    fn grid_search_expands_with_the_first_entry_varying_fastest() {
        let space = ParamSpace::new()
            .with("a", grid_search([1, 2]))
            .with("b", grid_search(["x", "y", "z"]))
            .with("c", uniform(0.0, 1.0));
        let configs = space.resolve_variants(&mut Rng::seed_from(0)).unwrap();
        let pairs: Vec<(i64, String)> =
            configs.iter().map(|c| (c.get("a").unwrap(), c.get("b").unwrap())).collect();
        let expect = [(1, "x"), (2, "x"), (1, "y"), (2, "y"), (1, "z"), (2, "z")];
        assert_eq!(pairs, expect.map(|(a, b)| (a, b.to_string())));
    }
}
