//! A trial's config: a (possibly nested) map of values, read with types
//! (`config.get::<f64>("lr")`), paths joined with `/` for nested spaces.

use std::fmt;

use pyrite_core::{Error, ErrorKind, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A resolved configuration, as a trainable sees it.
///
/// ```
/// use pyrite_tune::Config;
/// let mut c = Config::default();
/// c.set("lr", 0.01.into());
/// c.set("model/width", 32.into());
/// assert_eq!(c.get::<f64>("lr").unwrap(), 0.01);
/// assert_eq!(c.get::<usize>("model/width").unwrap(), 32);
/// assert!(c.get::<f64>("momentum").unwrap_err().message().contains("no key 'momentum'"));
/// assert_eq!(c.to_string(), "lr=0.01, model/width=32");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Config(pub Map<String, Value>);

impl Config {
    /// The value at `path` (`"model/width"` for nested spaces), converted to `T`.
    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let v = self.value(path).ok_or_else(|| {
            Error::new(
                ErrorKind::Value,
                format!(
                    "the trial's config has no key '{path}' (it has: {})",
                    self.flat().iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(", ")
                ),
            )
        })?;
        T::deserialize(v).map_err(|e| {
            Error::new(ErrorKind::Value, format!("config '{path}' = {v} has the wrong type: {e}"))
        })
    }

    /// The raw value at `path`.
    pub fn value(&self, path: &str) -> Option<&Value> {
        let mut parts = path.split('/');
        let mut v = self.0.get(parts.next()?)?;
        for p in parts {
            v = v.as_object()?.get(p)?;
        }
        Some(v)
    }

    /// Sets the value at `path`, creating nested maps on the way.
    pub fn set(&mut self, path: &str, value: Value) {
        let mut parts: Vec<&str> = path.split('/').collect();
        let last = parts.pop().unwrap_or(path);
        let mut map = &mut self.0;
        for p in parts {
            let entry = map.entry(p.to_string()).or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            map = entry.as_object_mut().expect("an object");
        }
        map.insert(last.to_string(), value);
    }

    /// Every leaf value with its `/`-joined path, in order.
    pub fn flat(&self) -> Vec<(String, Value)> {
        fn walk(prefix: &str, m: &Map<String, Value>, out: &mut Vec<(String, Value)>) {
            for (k, v) in m {
                let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}/{k}") };
                match v {
                    Value::Object(inner) => walk(&path, inner, out),
                    v => out.push((path, v.clone())),
                }
            }
        }
        let mut out = Vec::new();
        walk("", &self.0, &mut out);
        out
    }
}

/// `lr=0.01, model/width=32` (floats with up to 6 significant digits, as Ray's table shows).
impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.flat().iter().map(|(k, v)| format!("{k}={}", short_value(v))).collect();
        f.write_str(&parts.join(", "))
    }
}

/// A value for tables: floats to 6 significant digits, strings without quotes.
pub fn short_value(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => short_float(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// A float to 6 significant digits, like Python's `{:.6g}`.
pub fn short_float(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let exp = x.abs().log10().floor() as i32;
    if !(-5..6).contains(&exp) {
        let s = format!("{x:.5e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = m.trim_end_matches('0').trim_end_matches('.');
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_floats_read_like_python_g_format() {
        assert_eq!(short_float(0.001234567), "0.00123457");
        assert_eq!(short_float(123.0), "123");
        assert_eq!(short_float(1.5e-7), "1.5e-07");
        assert_eq!(short_float(2.5e9), "2.5e+09");
        assert_eq!(short_float(0.1), "0.1");
    }
}
