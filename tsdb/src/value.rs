//! A point's value: a 64-bit integer or a 64-bit float, as OpenTSDB stores them.

use std::cmp::Ordering;

/// The value of one data point.
///
/// Equality is exact: floats compare by their bit pattern, so `-0.0 != 0.0`, a NaN equals a NaN
/// with the same payload, and `Int(1) != Float(1.0)`. That is the equality a codec round trip must
/// keep, which is why `Value` is also `Eq`.
#[derive(Debug, Clone, Copy)]
pub enum Value {
    /// A signed 64-bit integer.
    Int(i64),
    /// An IEEE 754 double.
    Float(f64),
}

impl Value {
    /// Whether this is a float.
    pub fn is_float(&self) -> bool {
        matches!(self, Value::Float(_))
    }

    /// The value as an f64 (integers are converted, possibly rounding above 2^53).
    pub fn as_f64(&self) -> f64 {
        match *self {
            Value::Int(i) => i as f64,
            Value::Float(f) => f,
        }
    }

    /// Whether this is an integer.
    pub fn is_int(&self) -> bool {
        matches!(self, Value::Int(_))
    }

    /// Whether this is a NaN float.
    pub fn is_nan(&self) -> bool {
        matches!(self, Value::Float(v) if v.is_nan())
    }

    /// Orders two values by their exact numeric value (an integer against a float without
    /// rounding either); `None` when one is NaN.
    pub fn exact_cmp(self, other: Value) -> Option<Ordering> {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => Some(a.cmp(&b)),
            (Value::Float(a), Value::Float(b)) => a.partial_cmp(&b),
            (Value::Int(a), Value::Float(b)) => cmp_int_float(a, b),
            (Value::Float(a), Value::Int(b)) => cmp_int_float(b, a).map(Ordering::reverse),
        }
    }
}

/// `i` against `f`, exactly.
fn cmp_int_float(i: i64, f: f64) -> Option<Ordering> {
    // 2^63: doubles at or past it are beyond every i64.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if f.is_nan() {
        return None;
    }
    if f >= TWO_63 {
        return Some(Ordering::Less);
    }
    if f < -TWO_63 {
        return Some(Ordering::Greater);
    }
    // |floor(f)| <= 2^63 here, so it converts to i128 exactly.
    let whole = f.floor();
    match i128::from(i).cmp(&(whole as i128)) {
        Ordering::Equal if f > whole => Some(Ordering::Less),
        o => Some(o),
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Eq for Value {}

#[cfg(test)]
mod tests {
    use super::Value;

    #[test]
    fn float_equality_is_bitwise() {
        assert_ne!(Value::Float(0.0), Value::Float(-0.0));
        assert_eq!(Value::Float(f64::NAN), Value::Float(f64::NAN));
        assert_ne!(Value::Float(f64::NAN), Value::Float(-f64::NAN));
        assert_ne!(Value::Int(1), Value::Float(1.0));
        assert_eq!(Value::Int(i64::MIN), Value::Int(i64::MIN));
    }
}
