//! The trajectory language's number syntax (`grammar/README.md`), below every
//! other module: the printer ([`crate::notation`]) writes numbers with it, and so
//! do the bundle's refusals ([`crate::bundle_integrity`]), which sit under the
//! printer in the layering.

/// A number in the language's syntax: integers without a fraction; other values in
/// the shortest form that reads back to the same `f64`, as a decimal between 1e-4
/// and 1e9 and in exponent form (`3e-6`, `1.25e20`) beyond.
pub fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    if (1e-4..1e9).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// A number that must read back as a float, not an integer (a syntax tree's float
/// as written, `229.0`): [`number`], with `.0` when that would read as an integer.
pub fn float(v: f64) -> String {
    let text = number(v);
    if text.contains(['.', 'e']) || !v.is_finite() {
        text
    } else {
        format!("{text}.0")
    }
}
