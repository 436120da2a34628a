//! The exact arithmetic the stages use on tsdb's `Value` (integer or floating point, as OpenTSDB
//! keeps them apart).
//!
//! Stages take and return series as `&[(i64 /* ts ms */, Value)]`. A point keeps the type it was
//! written with and all its bits (`docs/compat.md` #14). Over integers, sums are exact (an `i128`
//! accumulator), and min, max, first, last and count pick or count values without converting
//! them; a result that fits an `i64` is an integer, a sum past it a double. Floats are summed in
//! order as doubles, as OpenTSDB does. Averages, deviations, percentiles and interpolated values
//! are doubles, and become integers only when that is exact (`docs/compat.md` #4). A rounded double
//! is never labelled an integer.

use std::cmp::Ordering;

use strata_tsdb::Value;

/// 2^53: every integer of at most this magnitude is exactly a double, and so is every double
/// result of integer inputs that stays within it only if no step rounded.
const EXACT_F64_INT: f64 = 9_007_199_254_740_992.0;

/// An exact integer result: an `Int` when it fits an `i64`, else the nearest double.
pub(crate) fn from_i128(v: i128) -> Value {
    match i64::try_from(v) {
        Ok(i) => Value::Int(i),
        Err(_) => Value::Float(v as f64),
    }
}

/// A double computed from values that were all integers (`int_inputs`): an `Int` only when it
/// is integral and within 2^53, where no integer result can have been rounded to it from a
/// neighbour; otherwise a `Float` (`docs/compat.md` #4: no truncation, integers only when
/// exact).
pub(crate) fn from_result(v: f64, int_inputs: bool) -> Value {
    if int_inputs && v.fract() == 0.0 && v.abs() <= EXACT_F64_INT {
        Value::Int(v as i64)
    } else {
        Value::Float(v)
    }
}

/// `i + f` with one rounding at the end (nearly: the integer's split is exact, and the two
/// halves are added with an error-free sum), so an integer far past 2^53 keeps its low bits
/// until the double result is formed.
pub(crate) fn add_int_to_float(i: i128, f: f64) -> f64 {
    let hi = i as f64;
    if !f.is_finite() || !hi.is_finite() {
        return hi + f;
    }
    // `hi` is integral and below 2^127, so the remainder is exact and small.
    let lo = (i - hi as i128) as f64;
    let s = hi + f;
    // Knuth's two-sum: `err` is exactly what `s` lost.
    let bb = s - hi;
    let err = (hi - (s - bb)) + (f - bb);
    s + (err + lo)
}

/// A sum of values kept exactly where it can be: integers in an `i128` (no i64 sum can
/// overflow it), doubles in order as doubles (starting from `-0.0`, as `Iterator::sum` does,
/// so a sum of doubles is bit for bit the plain one). NaNs are skipped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ExactSum {
    pub(crate) ints: i128,
    pub(crate) floats: f64,
    pub(crate) n_int: u64,
    pub(crate) n_float: u64,
}

impl Default for ExactSum {
    fn default() -> Self {
        ExactSum {
            ints: 0,
            floats: std::iter::empty::<f64>().sum(),
            n_int: 0,
            n_float: 0,
        }
    }
}

impl ExactSum {
    /// Adds a value (a NaN is skipped).
    #[inline]
    pub(crate) fn add(&mut self, v: Value) {
        match v {
            Value::Int(i) => {
                self.ints += i128::from(i);
                self.n_int += 1;
            }
            Value::Float(f) if !f.is_nan() => {
                self.floats += f;
                self.n_float += 1;
            }
            Value::Float(_) => {}
        }
    }

    /// The values added (NaNs not counted).
    pub(crate) fn count(&self) -> u64 {
        self.n_int + self.n_float
    }

    /// The sum: an integer when every value was one and it fits an `i64`; NaN for no value.
    pub(crate) fn sum(&self) -> Value {
        match (self.n_int, self.n_float) {
            (0, 0) => Value::Float(f64::NAN),
            (_, 0) => from_i128(self.ints),
            (0, _) => Value::Float(self.floats),
            _ => Value::Float(add_int_to_float(self.ints, self.floats)),
        }
    }

    /// The mean: an integer only when every value was one and the division is exact.
    pub(crate) fn mean(&self) -> Value {
        let n = self.count();
        match (self.n_int, self.n_float) {
            (0, 0) => Value::Float(f64::NAN),
            (_, 0) if self.ints % i128::from(n) == 0 => from_i128(self.ints / i128::from(n)),
            (_, 0) => Value::Float(self.ints as f64 / n as f64),
            (0, _) => Value::Float(self.floats / n as f64),
            _ => Value::Float(add_int_to_float(self.ints, self.floats) / n as f64),
        }
    }
}

/// The smallest or largest of values, NaNs skipped: doubles folded with `f64::min`/`f64::max`
/// as before, integers compared as integers, and the two winners compared exactly. The
/// result is the winning value as it was given.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Extreme {
    max: bool,
    int: Option<i64>,
    float: Option<f64>,
}

impl Extreme {
    pub(crate) fn new(max: bool) -> Extreme {
        Extreme {
            max,
            int: None,
            float: None,
        }
    }

    #[inline]
    pub(crate) fn add(&mut self, v: Value) {
        match v {
            Value::Int(i) => {
                self.int = Some(match self.int {
                    Some(b) if self.max => b.max(i),
                    Some(b) => b.min(i),
                    None => i,
                });
            }
            Value::Float(f) if !f.is_nan() => {
                self.float = Some(match self.float {
                    Some(b) if self.max => b.max(f),
                    Some(b) => b.min(f),
                    None => f,
                });
            }
            Value::Float(_) => {}
        }
    }

    /// The winner; NaN when no value was added. An integer and a double of equal value give
    /// the integer.
    pub(crate) fn value(&self) -> Value {
        match (self.int, self.float) {
            (None, None) => Value::Float(f64::NAN),
            (Some(i), None) => Value::Int(i),
            (None, Some(f)) => Value::Float(f),
            (Some(i), Some(f)) => {
                let (i, f) = (Value::Int(i), Value::Float(f));
                match i.exact_cmp(f) {
                    Some(Ordering::Less) if self.max => f,
                    Some(Ordering::Greater) if !self.max => f,
                    _ => i,
                }
            }
        }
    }
}

/// A series: points in ascending timestamp order (milliseconds).
pub type Point = (i64, Value);

/// Points as (time, is an integer, bits): equal only when types and bits are.
#[cfg(test)]
pub(crate) fn typed_bits(points: &[Point]) -> Vec<(i64, bool, u64)> {
    points
        .iter()
        .map(|(t, n)| match n {
            Value::Int(i) => (*t, true, *i as u64),
            Value::Float(f) => (*t, false, f.to_bits()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_result_only_exact_integers() {
        assert_eq!(from_result(3.0, true), Value::Int(3));
        // 301.5 stays a double: no truncation (`docs/compat.md` #4).
        assert_eq!(from_result(301.5, true), Value::Float(301.5));
        assert_eq!(from_result(3.0, false), Value::Float(3.0));
        assert!(matches!(from_result(f64::NAN, true), Value::Float(v) if v.is_nan()));
        assert_eq!(from_result(1e300, true), Value::Float(1e300));
        // Past 2^53 an integral double may be a rounded integer: it stays a double.
        assert_eq!(
            from_result(9_007_199_254_740_994.0, true),
            Value::Float(9_007_199_254_740_994.0)
        );
        assert_eq!(Value::Int(-4).as_f64(), -4.0);
    }

    #[test]
    fn integer_sums_are_exact_and_wide() {
        let mut s = ExactSum::default();
        s.add(Value::Int(i64::MAX));
        s.add(Value::Int(i64::MAX));
        assert_eq!(s.sum(), Value::Float(2.0 * 9_223_372_036_854_775_807.0));
        s.add(Value::Int(i64::MIN));
        s.add(Value::Int(i64::MIN));
        assert_eq!(s.sum(), Value::Int(-2));
        let mut s = ExactSum::default();
        s.add(Value::Int(9_007_199_254_740_993));
        s.add(Value::Float(f64::NAN));
        assert_eq!(s.sum(), Value::Int(9_007_199_254_740_993));
        assert_eq!(s.mean(), Value::Int(9_007_199_254_740_993));
        s.add(Value::Int(0));
        assert!(matches!(s.mean(), Value::Float(_)));
        assert!(ExactSum::default().sum().as_f64().is_nan());
    }

    #[test]
    fn mixed_sums_round_once() {
        // 2^53 + 1 + 0.5 = 9007199254740993.5: the nearest double is 2^53 + 2; adding the
        // rounded integer first would give 2^53.
        let mut s = ExactSum::default();
        s.add(Value::Int(9_007_199_254_740_993));
        s.add(Value::Float(0.5));
        assert_eq!(s.sum(), Value::Float(9_007_199_254_740_994.0));
        assert_eq!(add_int_to_float(1, 2.5), 3.5);
        assert_eq!(add_int_to_float(0, -0.0), 0.0);
        assert!(add_int_to_float(5, f64::NAN).is_nan());
        assert_eq!(add_int_to_float(5, f64::INFINITY), f64::INFINITY);
    }

    #[test]
    fn exact_comparison() {
        let big = Value::Int(9_007_199_254_740_993);
        let near = Value::Float(9_007_199_254_740_992.0);
        assert_eq!(big.exact_cmp(near), Some(Ordering::Greater));
        assert_eq!(near.exact_cmp(big), Some(Ordering::Less));
        assert_eq!(
            Value::Int(2).exact_cmp(Value::Float(2.5)),
            Some(Ordering::Less)
        );
        assert_eq!(
            Value::Int(-3).exact_cmp(Value::Float(-2.5)),
            Some(Ordering::Less)
        );
        assert_eq!(
            Value::Int(2).exact_cmp(Value::Float(2.0)),
            Some(Ordering::Equal)
        );
        assert_eq!(
            Value::Int(i64::MAX).exact_cmp(Value::Float(9.3e18)),
            Some(Ordering::Less)
        );
        assert_eq!(
            Value::Int(i64::MIN).exact_cmp(Value::Float(-9.3e18)),
            Some(Ordering::Greater)
        );
        assert_eq!(Value::Int(1).exact_cmp(Value::Float(f64::NAN)), None);
    }

    #[test]
    fn extremes_keep_the_winner_as_given() {
        let mut max = Extreme::new(true);
        let mut min = Extreme::new(false);
        for v in [
            Value::Int(9_007_199_254_740_993),
            Value::Float(9_007_199_254_740_992.0),
            Value::Float(f64::NAN),
            Value::Int(-7),
            Value::Float(-6.5),
        ] {
            max.add(v);
            min.add(v);
        }
        assert_eq!(max.value(), Value::Int(9_007_199_254_740_993));
        assert_eq!(min.value(), Value::Int(-7));
        assert!(Extreme::new(true).value().is_nan());
    }
}
