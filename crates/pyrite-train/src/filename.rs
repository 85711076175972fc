//! [`format_filename`]: checkpoint file names from a template with Python format fields, such
//! as `"epoch={epoch:02}-val_loss={val_loss:.4f}.pt"`.
//!
//! A field is `{name}` or `{name:spec}`, where `name` is `epoch`, `step` or a metric passed to
//! the save, and `spec` is the part of Python's format mini-language that names need:
//! `[0][width][.precision][d|f|e]` (zero padding, minimum width, digits after the point, and
//! integer, fixed or exponent notation). `{{` and `}}` are literal braces. Without a spec, an
//! int prints as an int and a float as Python's `str(float)` does for ordinary values (`0.5`,
//! `2.0`). Unlike Lightning, metric names are not inserted automatically: write `epoch={epoch}`.

use pyrite_core::{bail, Result};

/// A value a field can show: `epoch` and `step` are ints, metrics are floats.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FieldValue {
    Int(i64),
    Float(f64),
}

/// Fills `template`'s fields from `values` (`name -> value`).
///
/// ```
/// use pyrite::train::filename::{format_filename, FieldValue};
/// let name = format_filename(
///     "epoch={epoch:02}-val_loss={val_loss:.4f}.pt",
///     &[("epoch", FieldValue::Int(3)), ("val_loss", FieldValue::Float(0.123456))],
/// )?;
/// assert_eq!(name, "epoch=03-val_loss=0.1235.pt");
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn format_filename(template: &str, values: &[(&str, FieldValue)]) -> Result<String> {
    let mut out = String::new();
    let mut chars = template.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '{' if chars.peek().map(|p| p.1) == Some('{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek().map(|p| p.1) == Some('}') => {
                chars.next();
                out.push('}');
            }
            '}' => bail!(
                Value,
                "checkpoint file name '{template}': single '}}' at byte {at} (write '}}}}' for a brace)"
            ),
            '{' => {
                let rest = &template[at + 1..];
                let Some(end) = rest.find('}') else {
                    bail!(Value, "checkpoint file name '{template}': '{{' at byte {at} is not closed");
                };
                let field = &rest[..end];
                for _ in 0..field.chars().count() + 1 {
                    chars.next();
                }
                let (name, spec) = field.split_once(':').unwrap_or((field, ""));
                let Some(value) = values.iter().find(|(n, _)| *n == name).map(|(_, v)| *v) else {
                    let known: Vec<&str> = values.iter().map(|(n, _)| *n).collect();
                    bail!(
                        Value,
                        "checkpoint file name '{template}': unknown field '{name}' (known: {})",
                        known.join(", ")
                    );
                };
                out.push_str(&format_value(value, spec).map_err(|e| {
                    pyrite_core::err!(Value, "checkpoint file name '{template}', field '{field}': {e}")
                })?);
            }
            c => out.push(c),
        }
    }
    if out.contains('/') || out.contains('\\') || out.is_empty() || out == "." || out == ".." {
        bail!(Value, "checkpoint file name '{out}' (from '{template}') must be a plain, non-empty file name");
    }
    Ok(out)
}

/// One value under a spec `[0][width][.precision][type]`.
fn format_value(value: FieldValue, spec: &str) -> Result<String> {
    let (mut zero, mut rest) = (false, spec);
    if let Some(r) = rest.strip_prefix('0') {
        zero = true;
        rest = r;
    }
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let width: usize = if digits > 0 { rest[..digits].parse().unwrap_or(0) } else { 0 };
    rest = &rest[digits..];
    let mut precision = None;
    if let Some(r) = rest.strip_prefix('.') {
        let d = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        if d == 0 {
            bail!(Value, "format spec '{spec}': '.' needs a precision");
        }
        precision = Some(r[..d].parse::<usize>().unwrap_or(0).min(40));
        rest = &r[d..];
    }
    let kind = match rest {
        "" => None,
        "d" | "f" | "e" => rest.chars().next(),
        _ => bail!(Value, "format spec '{spec}' is not supported (use [0][width][.precision][d|f|e])"),
    };
    let body = match (value, kind, precision) {
        (FieldValue::Int(_), _, Some(_)) if kind != Some('f') && kind != Some('e') => {
            bail!(Value, "format spec '{spec}': precision not allowed in integer format specifier")
        }
        (FieldValue::Int(v), None | Some('d'), None) => v.to_string(),
        (FieldValue::Float(_), Some('d'), _) => {
            bail!(Value, "format spec '{spec}': unknown format code 'd' for a float")
        }
        (v, Some('e'), p) => exponent(as_f64(v), p.unwrap_or(6)),
        (v, Some('f'), p) => format!("{:.*}", p.unwrap_or(6), as_f64(v)),
        (FieldValue::Float(v), None, Some(p)) => format!("{v:.p$}"),
        (FieldValue::Float(v), None, None) => python_str(v),
        (FieldValue::Int(v), _, _) => v.to_string(),
        (FieldValue::Float(v), _, _) => python_str(v), // not reached: `kind` is d, f, e or none
    };
    let (sign, digits) = match body.strip_prefix('-') {
        Some(d) => ("-", d.to_string()),
        None => ("", body),
    };
    let len = sign.len() + digits.len();
    Ok(if len >= width {
        format!("{sign}{digits}")
    } else if zero {
        format!("{sign}{}{digits}", "0".repeat(width - len))
    } else {
        // Numbers align right, as in Python.
        format!("{}{sign}{digits}", " ".repeat(width - len))
    })
}

fn as_f64(v: FieldValue) -> f64 {
    match v {
        FieldValue::Int(i) => i as f64,
        FieldValue::Float(f) => f,
    }
}

/// Python's `'{:.{p}e}'`: a mantissa and a signed exponent of at least two digits.
fn exponent(v: f64, p: usize) -> String {
    if !v.is_finite() {
        return python_str(v);
    }
    let s = format!("{v:.p$e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', e),
            };
            format!("{m}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

/// `str(v)` for a Python float, for the values metrics take (shortest round-trip digits).
fn python_str(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{v}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(t: &str, v: FieldValue) -> String {
        format_filename(t, &[("x", v)]).unwrap()
    }

    #[test]
    fn specs_match_python() {
        // Expected values are what Python's str.format prints.
        use FieldValue::{Float, Int};
        assert_eq!(f("{x}", Int(3)), "3");
        assert_eq!(f("{x:02}", Int(3)), "03");
        assert_eq!(f("{x:03d}", Int(-4)), "-04");
        assert_eq!(f("{x:4}", Int(7)), "   7");
        assert_eq!(f("{x:02}", Int(123)), "123");
        assert_eq!(f("{x}", Float(0.5)), "0.5");
        assert_eq!(f("{x}", Float(2.0)), "2.0");
        assert_eq!(f("{x:.4f}", Float(0.123456)), "0.1235");
        assert_eq!(f("{x:.2f}", Int(3)), "3.00");
        assert_eq!(f("{x:08.3f}", Float(-1.5)), "-001.500");
        assert_eq!(f("{x:.2e}", Float(12345.0)), "1.23e+04");
        assert_eq!(f("{x:.1e}", Float(0.00012)), "1.2e-04");
        assert_eq!(f("{x:f}", Float(0.25)), "0.250000");
        assert_eq!(f("{x}", Float(f64::NAN)), "nan");
        assert_eq!(f("a{{x}}b", Int(1)), "a{x}b");
    }

    #[test]
    fn bad_templates_are_errors() {
        let v = [("x", FieldValue::Int(1))];
        for t in ["{y}", "{x", "x}", "{x:.f}", "{x:>4}", "{x:.2d}", "../{x}", "{x}/a", ""] {
            assert!(format_filename(t, &v).is_err(), "{t}");
        }
        assert!(format_filename("{x:d}", &[("x", FieldValue::Float(1.0))]).is_err());
    }
}
