//! `Num`: one data point value, integer or floating point, as OpenTSDB keeps them apart.
//!
//! Stages take and return series as `&[(i64 /* ts ms */, Num)]`. Integers are kept as `i64` so that
//! counter rates near `i64::MAX` are exact (§e.5); aggregation computes in `f64` (exception #4) and
//! yields `Num::Int` only when the result is exactly integral and every input point was an integer.

/// A data point value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    /// A 64-bit signed integer value.
    Int(i64),
    /// A double value (may be NaN after fill policies).
    Float(f64),
}

impl Num {
    /// The value as `f64` (integers beyond 2^53 round).
    pub fn to_f64(self) -> f64 {
        match self {
            Num::Int(v) => v as f64,
            Num::Float(v) => v,
        }
    }

    /// Whether this is an integer value.
    pub fn is_int(self) -> bool {
        matches!(self, Num::Int(_))
    }

    /// The result of an aggregation: `Int` if `int_inputs` and `v` is an exactly integral `i64`,
    /// else `Float` (exception #4: no truncation, integers only when exact).
    pub fn from_result(v: f64, int_inputs: bool) -> Num {
        // 2^63 as f64; `v < 2^63` and `v >= -2^63` fit an i64 exactly when integral.
        const LIMIT: f64 = 9_223_372_036_854_775_808.0;
        if int_inputs && v.is_finite() && v.fract() == 0.0 && (-LIMIT..LIMIT).contains(&v) {
            Num::Int(v as i64)
        } else {
            Num::Float(v)
        }
    }
}

/// A series: points in ascending timestamp order (milliseconds).
pub type Point = (i64, Num);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_result_only_exact_integers() {
        assert_eq!(Num::from_result(3.0, true), Num::Int(3));
        // 301.5 stays a double: no truncation (exception #4).
        assert_eq!(Num::from_result(301.5, true), Num::Float(301.5));
        assert_eq!(Num::from_result(3.0, false), Num::Float(3.0));
        assert!(matches!(Num::from_result(f64::NAN, true), Num::Float(v) if v.is_nan()));
        assert_eq!(Num::from_result(1e300, true), Num::Float(1e300));
        assert_eq!(Num::Int(-4).to_f64(), -4.0);
    }
}
