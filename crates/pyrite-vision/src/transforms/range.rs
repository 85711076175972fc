//! [`NumOrRange`]: a random transform's parameter given as one number or as `(min, max)`.

use pyrite_core::{bail, Result};

/// A parameter given as one number (meaning a range around a centre, e.g. `degrees=30` is
/// `(-30, 30)`, `brightness=0.4` is `(0.6, 1.4)`) or as an explicit `(min, max)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NumOrRange {
    Num(f64),
    Range(f64, f64),
}

impl From<f64> for NumOrRange {
    fn from(x: f64) -> NumOrRange {
        NumOrRange::Num(x)
    }
}

impl From<(f64, f64)> for NumOrRange {
    fn from((a, b): (f64, f64)) -> NumOrRange {
        NumOrRange::Range(a, b)
    }
}

impl NumOrRange {
    /// `(min, max)`: a number `x` becomes `(center - x, center + x)` (`x` must be
    /// non-negative); NaN is refused.
    pub(crate) fn around(self, center: f64, what: &str) -> Result<(f64, f64)> {
        let (a, b) = match self {
            NumOrRange::Num(x) => {
                if x.is_nan() || x < 0.0 {
                    bail!(Value, "{what}: if {what} is a single number, it must be non negative, got {x}");
                }
                (center - x, center + x)
            }
            NumOrRange::Range(a, b) => (a, b),
        };
        if a.is_nan() || b.is_nan() {
            bail!(Value, "{what}: values must not be NaN, got ({a}, {b})");
        }
        Ok((a, b))
    }
}
