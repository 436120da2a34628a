//! Rate of change of one series (OpenTSDB docs: `api_http/query (rate options)`), per second, with
//! OpenTSDB's counter options.
//!
//! Strata difference (`docs/compat.md` #3): there is no seed rate against the point (0, 0). The
//! first point of a series yields nothing, so a series has no value before its second point, and
//! the aggregation stage leaves it out there.

use crate::num::Point;
use strata_tsdb::Value;

/// Rate options (`rateOptions` JSON, `rate{counter,<max>,<reset>}` URI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateOptions {
    /// Treat the series as a monotonically increasing counter that may roll over.
    pub counter: bool,
    /// The counter's maximum, used to compute the rate across a rollover.
    pub counter_max: i64,
    /// When > 0, a rollover rate above this value is reported as 0.0.
    pub reset_value: i64,
    /// Drop the point of a counter reset instead of computing a rollover rate.
    pub drop_resets: bool,
}

impl Default for RateOptions {
    fn default() -> Self {
        RateOptions {
            counter: false,
            counter_max: i64::MAX,
            reset_value: 0,
            drop_resets: false,
        }
    }
}

/// The difference `b − a`: 64-bit integer arithmetic when both are integers (wrapping as Java's
/// long does), else doubles.
fn difference(a: Value, b: Value) -> f64 {
    match (a, b) {
        (Value::Int(a), Value::Int(b)) => b.wrapping_sub(a) as f64,
        _ => b.as_f64() - a.as_f64(),
    }
}

/// Converts a series (sorted by time, unique timestamps) to its per-second rate.
///
/// For consecutive points `(t0, v0), (t1, v1)` the output at `t1` is `(v1 − v0) / ((t1 − t0) /
/// 1000)`. With `counter`, a decrease is a rollover: with `drop_resets` no value is produced at
/// `t1` (the next rate starts from `t1`), otherwise the rate is `(counter_max − v0 + v1) / Δt`,
/// replaced by 0.0 when `reset_value > 0` and the rate exceeds it. Every output is a `Value::Float`.
pub fn rate(points: &[Point], options: &RateOptions) -> Vec<Point> {
    let mut out = Vec::with_capacity(points.len().saturating_sub(1));
    for pair in points.windows(2) {
        let [(t0, v0), (t1, v1)] = [pair[0], pair[1]];
        if t1 <= t0 {
            // Not expected (series are de-duplicated and sorted); never divide by zero.
            continue;
        }
        let seconds = (t1 - t0) as f64 / 1000.0;
        let mut diff = difference(v0, v1);
        let mut rollover = false;
        if options.counter && diff < 0.0 {
            if options.drop_resets {
                continue;
            }
            diff = match (v0, v1) {
                (Value::Int(a), Value::Int(b)) => {
                    options.counter_max.wrapping_sub(a).wrapping_add(b) as f64
                }
                _ => options.counter_max as f64 - v0.as_f64() + v1.as_f64(),
            };
            rollover = true;
        }
        let mut value = diff / seconds;
        if rollover && options.reset_value > 0 && value > options.reset_value as f64 {
            value = 0.0;
        }
        out.push((t1, Value::Float(value)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_356_998_400_000;
    const S30: i64 = 30_000;

    fn ints(values: &[i64]) -> Vec<Point> {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| (T + i as i64 * S30, Value::Int(v)))
            .collect()
    }

    fn counter(max: i64, reset: i64, drop: bool) -> RateOptions {
        RateOptions {
            counter: true,
            counter_max: max,
            reset_value: reset,
            drop_resets: drop,
        }
    }

    #[test]
    fn plain_rate_per_second() {
        // (75-45)/30 = 1.0; (15-75)/30 = -2.0 (non-counter negative rates are kept)
        let out = rate(&ints(&[45, 75, 15]), &RateOptions::default());
        assert_eq!(
            out,
            vec![
                (T + S30, Value::Float(1.0)),
                (T + 2 * S30, Value::Float(-2.0))
            ]
        );
    }

    #[test]
    fn millisecond_data_is_still_per_second() {
        // 10 over 500 ms = 20 per second
        let pts = vec![(T, Value::Float(1.5)), (T + 500, Value::Float(11.5))];
        assert_eq!(
            rate(&pts, &RateOptions::default()),
            vec![(T + 500, Value::Float(20.0))]
        );
    }

    #[test]
    fn counter_rollover_with_max() {
        // 45,75,5 max 100: 30/30 = 1.0, then (100-75+5)/30 = 30/30 = 1.0
        let out = rate(&ints(&[45, 75, 5]), &counter(100, 0, false));
        assert_eq!(
            out,
            vec![
                (T + S30, Value::Float(1.0)),
                (T + 2 * S30, Value::Float(1.0))
            ]
        );
    }

    #[test]
    fn counter_reset_value() {
        // 45,75,25 max 10000 reset 35: 1.0, then (10000-75+25)/30 = 331.67 > 35 -> 0.0
        let out = rate(&ints(&[45, 75, 25]), &counter(10_000, 35, false));
        assert_eq!(
            out,
            vec![
                (T + S30, Value::Float(1.0)),
                (T + 2 * S30, Value::Float(0.0))
            ]
        );
        // resetValue is not consulted for ordinary rates: 0 -> 3000 in 30 s = 100 > 35, kept
        let out = rate(&ints(&[0, 3000]), &counter(10_000, 35, false));
        assert_eq!(out, vec![(T + S30, Value::Float(100.0))]);
        // rollover rate below resetValue is kept: (100-90+20)/30 = 1.0 <= 35
        let out = rate(&ints(&[90, 20]), &counter(100, 35, false));
        assert_eq!(out, vec![(T + S30, Value::Float(1.0))]);
    }

    #[test]
    fn counter_drop_resets() {
        // 45,75,25,55 at T, T+30s, T+60s, T+90s: (75-45)/30 = 1.0 at T+30s; the reset to 25 at
        // T+60s is dropped; the next rate starts from it: (55-25)/30 = 1.0 at T+90s
        let out = rate(&ints(&[45, 75, 25, 55]), &counter(i64::MAX, 0, true));
        assert_eq!(
            out,
            vec![
                (T + S30, Value::Float(1.0)),
                (T + 3 * S30, Value::Float(1.0))
            ]
        );
    }

    #[test]
    fn counter_near_long_max_is_exact() {
        // MAX-55 -> MAX-25: 30/30 = 1.0; MAX-25 -> 5 rolls over: MAX-(MAX-25)+5 = 30 -> 1.0
        let out = rate(
            &ints(&[i64::MAX - 55, i64::MAX - 25, 5]),
            &counter(i64::MAX, 0, false),
        );
        assert_eq!(
            out,
            vec![
                (T + S30, Value::Float(1.0)),
                (T + 2 * S30, Value::Float(1.0))
            ]
        );
    }

    #[test]
    fn float_counter_rollover() {
        // 90.0 -> 10.0 with max 100: (100 - 90 + 10)/30 = 20/30
        let pts = vec![(T, Value::Float(90.0)), (T + S30, Value::Float(10.0))];
        let out = rate(&pts, &counter(100, 0, false));
        assert_eq!(out, vec![(T + S30, Value::Float(20.0 / 30.0))]);
    }

    #[test]
    fn single_point_and_empty_give_nothing() {
        // `docs/compat.md` #3: no seed rate against (0, 0)
        assert!(rate(&ints(&[42]), &RateOptions::default()).is_empty());
        assert!(rate(&[], &RateOptions::default()).is_empty());
    }
}
