//! Evaluates an [`Expr`] over all the steps of a query at once.
//!
//! An instant query is a range query of one step. Each node yields its value at every step:
//! a scalar is one number per step, an instant vector a set of series, each with the steps it
//! has a sample at. Selectors read each series once for the whole query and evaluate every
//! step from that read (see `select`), so a query reads each raw point once.

use strata_tsdb::Tsdb;

use super::aggregation::aggregate;
use super::binary::binary;
use super::functions::bucket_quantile;
use super::plan::{At, Expr, METRIC_NAME};
use super::select::{SelectorRead, read_instant, read_matrix, read_range_function};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::model::QueryLimits;

/// A series' labels, sorted by name, the metric name as `__name__`.
pub(crate) type Labels = Vec<(String, String)>;

/// A series of an instant vector over the steps: `(step index, value)` in step order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StepSeries {
    pub(crate) labels: Labels,
    pub(crate) points: Vec<(u32, f64)>,
}

/// A series of a range vector: raw samples `(time ms, value)`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawSeries {
    pub(crate) labels: Labels,
    pub(crate) points: Vec<(i64, f64)>,
}

/// The value of an expression at every step.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// One number per step.
    Scalar(Vec<f64>),
    /// An instant vector.
    Vector(Vec<StepSeries>),
    /// A range vector (the whole of an instant query only).
    Matrix(Vec<RawSeries>),
}

/// The evaluation times: `start + k * step` for `k` in `0..count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Steps {
    pub(crate) start_ms: i64,
    pub(crate) step_ms: i64,
    pub(crate) count: usize,
    /// The query's end, which `@ end()` means (the last step may come before it).
    pub(crate) end_ms: i64,
}

impl Steps {
    /// The time of step `k`.
    pub(crate) fn at(&self, k: usize) -> i64 {
        self.start_ms + k as i64 * self.step_ms
    }
}

/// What evaluation needs besides the expression.
#[derive(Debug)]
pub(crate) struct Evaluator<'a> {
    pub(crate) tsdb: &'a Tsdb,
    pub(crate) steps: Steps,
    /// How far back an instant selector looks for a sample (Prometheus' lookback delta).
    pub(crate) lookback_ms: i64,
    pub(crate) limits: &'a QueryLimits,
    pub(crate) deadline: Deadline,
}

impl Evaluator<'_> {
    /// The time a selector looks at for step `k` (its reference time, before the offset).
    pub(crate) fn selector_time(&self, at: Option<At>, k: usize) -> i64 {
        match at {
            None => self.steps.at(k),
            Some(At::Start) => self.steps.start_ms,
            Some(At::End) => self.steps.end_ms,
            Some(At::Ms(t)) => t,
        }
    }

    /// Evaluates `expr` at every step.
    pub(crate) fn eval(&self, expr: &Expr) -> Result<Value> {
        self.deadline.check()?;
        let n = self.steps.count;
        match expr {
            Expr::Number(v) => Ok(Value::Scalar(vec![*v; n])),
            Expr::Vector(sel) => Ok(Value::Vector(read_instant(&self.read(sel))?)),
            Expr::Matrix(sel) => Ok(Value::Matrix(read_matrix(&self.read(sel))?)),
            Expr::Range { func, sel } => {
                let out = read_range_function(&self.read(sel), *func)?;
                Ok(Value::Vector(merge_same_labels(out)?))
            }
            Expr::HistogramQuantile { phi, buckets } => {
                let phi = self.scalar(phi)?;
                let buckets = self.vector(buckets)?;
                Ok(Value::Vector(histogram_quantile(&phi, buckets)?))
            }
            Expr::Aggregate {
                op,
                param,
                grouping,
                inner,
            } => {
                let param = match param {
                    Some(p) => Some(self.scalar(p)?),
                    None => None,
                };
                let inner = self.vector(inner)?;
                Ok(Value::Vector(aggregate(
                    *op,
                    param.as_deref(),
                    grouping,
                    inner,
                    n,
                )?))
            }
            Expr::Binary {
                op,
                lhs,
                rhs,
                matching,
                return_bool,
            } => {
                let l = self.eval(lhs)?;
                let r = self.eval(rhs)?;
                binary(*op, l, r, matching, *return_bool)
            }
            Expr::Time => Ok(Value::Scalar(
                (0..n).map(|k| self.steps.at(k) as f64 / 1000.0).collect(),
            )),
            Expr::VectorOf(e) => {
                let v = self.scalar(e)?;
                Ok(Value::Vector(vec![StepSeries {
                    labels: Vec::new(),
                    points: v
                        .into_iter()
                        .enumerate()
                        .map(|(k, x)| (k as u32, x))
                        .collect(),
                }]))
            }
            Expr::ScalarOf(e) => {
                let mut only = vec![(0u32, f64::NAN); n];
                for s in self.vector(e)? {
                    for &(k, v) in &s.points {
                        if let Some(slot) = only.get_mut(k as usize) {
                            *slot = (slot.0 + 1, v);
                        }
                    }
                }
                Ok(Value::Scalar(
                    only.into_iter()
                        .map(|(count, v)| if count == 1 { v } else { f64::NAN })
                        .collect(),
                ))
            }
            Expr::Neg(e) => match self.eval(e)? {
                Value::Scalar(mut v) => {
                    v.iter_mut().for_each(|x| *x = -*x);
                    Ok(Value::Scalar(v))
                }
                Value::Vector(mut series) => {
                    for s in &mut series {
                        drop_name(&mut s.labels);
                        s.points.iter_mut().for_each(|p| p.1 = -p.1);
                    }
                    Ok(Value::Vector(merge_same_labels(series)?))
                }
                Value::Matrix(_) => Err(Error::bad_request(
                    "unary expression only allowed on expressions of type scalar or instant vector",
                )),
            },
        }
    }

    fn read<'s>(&'s self, sel: &'s super::plan::Selector) -> SelectorRead<'s> {
        SelectorRead { ev: self, sel }
    }

    fn scalar(&self, e: &Expr) -> Result<Vec<f64>> {
        match self.eval(e)? {
            Value::Scalar(v) => Ok(v),
            _ => Err(Error::bad_request("expected a scalar expression")),
        }
    }

    fn vector(&self, e: &Expr) -> Result<Vec<StepSeries>> {
        match self.eval(e)? {
            Value::Vector(v) => Ok(v),
            Value::Scalar(_) => Err(Error::bad_request(
                "expected an instant vector expression, got a scalar",
            )),
            Value::Matrix(_) => Err(Error::bad_request(
                "expected an instant vector expression, got a range vector",
            )),
        }
    }
}

/// Removes the metric name from `labels`.
pub(crate) fn drop_name(labels: &mut Labels) {
    labels.retain(|(k, _)| k != METRIC_NAME);
}

/// The value of label `name` (`""` when absent, as Prometheus reads it).
pub(crate) fn label<'l>(labels: &'l Labels, name: &str) -> &'l str {
    labels
        .iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

/// Joins series with the same labels (which dropping the metric name can give), failing as
/// Prometheus does when two of them have a sample at the same step.
pub(crate) fn merge_same_labels(mut series: Vec<StepSeries>) -> Result<Vec<StepSeries>> {
    series.retain(|s| !s.points.is_empty());
    series.sort_by(|a, b| a.labels.cmp(&b.labels));
    let mut out: Vec<StepSeries> = Vec::with_capacity(series.len());
    for s in series {
        match out.last_mut() {
            Some(prev) if prev.labels == s.labels => {
                let mut merged = Vec::with_capacity(prev.points.len() + s.points.len());
                let (mut a, mut b) = (prev.points.iter().peekable(), s.points.iter().peekable());
                loop {
                    match (a.peek(), b.peek()) {
                        (Some(x), Some(y)) if x.0 == y.0 => {
                            return Err(Error::Execution(
                                "vector cannot contain metrics with the same labelset".to_owned(),
                            ));
                        }
                        (Some(x), Some(y)) => {
                            if x.0 < y.0 {
                                merged.push(**x);
                                a.next();
                            } else {
                                merged.push(**y);
                                b.next();
                            }
                        }
                        (Some(x), None) => {
                            merged.push(**x);
                            a.next();
                        }
                        (None, Some(y)) => {
                            merged.push(**y);
                            b.next();
                        }
                        (None, None) => break,
                    }
                }
                prev.points = merged;
            }
            _ => out.push(s),
        }
    }
    Ok(out)
}

/// `histogram_quantile(phi, buckets)` at every step: the series of one histogram are those
/// with the same labels but `le`; series whose `le` is not a number are left out. The result
/// has the histogram's labels without `le` and the metric name.
fn histogram_quantile(phi: &[f64], buckets: Vec<StepSeries>) -> Result<Vec<StepSeries>> {
    use std::collections::HashMap;
    let mut groups: HashMap<Labels, Vec<(u32, f64, f64)>> = HashMap::new();
    for s in buckets {
        let Some(le) = parse_le(label(&s.labels, "le")) else {
            continue;
        };
        let mut key = s.labels;
        key.retain(|(k, _)| k != "le");
        let g = groups.entry(key).or_default();
        g.extend(s.points.iter().map(|(k, v)| (*k, le, *v)));
    }
    let mut out = Vec::with_capacity(groups.len());
    for (mut labels, mut points) in groups {
        drop_name(&mut labels);
        points.sort_by_key(|p| p.0);
        let mut result = Vec::new();
        let mut buckets = Vec::new();
        for run in points.chunk_by(|a, b| a.0 == b.0) {
            let k = run[0].0;
            buckets.clear();
            buckets.extend(run.iter().map(|p| (p.1, p.2)));
            let q = phi.get(k as usize).copied().unwrap_or(f64::NAN);
            result.push((k, bucket_quantile(q, &mut buckets)));
        }
        out.push(StepSeries {
            labels,
            points: result,
        });
    }
    merge_same_labels(out)
}

/// An `le` label's bound, read as Prometheus reads it (`+Inf` included).
fn parse_le(le: &str) -> Option<f64> {
    le.trim().parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(labels: &[(&str, &str)], points: &[(u32, f64)]) -> StepSeries {
        StepSeries {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            points: points.to_vec(),
        }
    }

    #[test]
    fn same_labels_merge_unless_they_share_a_step() {
        let merged = merge_same_labels(vec![
            s(&[("a", "1")], &[(0, 1.0), (2, 3.0)]),
            s(&[("a", "0")], &[(0, 9.0)]),
            s(&[("a", "1")], &[(1, 2.0)]),
            s(&[("a", "2")], &[]),
        ])
        .unwrap();
        assert_eq!(
            merged,
            vec![
                s(&[("a", "0")], &[(0, 9.0)]),
                s(&[("a", "1")], &[(0, 1.0), (1, 2.0), (2, 3.0)]),
            ]
        );
        let e = merge_same_labels(vec![s(&[], &[(0, 1.0)]), s(&[], &[(0, 2.0)])]).unwrap_err();
        assert!(matches!(e, Error::Execution(_)), "{e}");
    }

    #[test]
    fn le_parses_like_prometheus() {
        assert_eq!(parse_le("+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_le("Inf"), Some(f64::INFINITY));
        assert_eq!(parse_le("0.25"), Some(0.25));
        assert_eq!(parse_le("1e3"), Some(1000.0));
        assert_eq!(parse_le(""), None);
        assert_eq!(parse_le("x"), None);
    }

    #[test]
    fn histogram_quantile_groups_by_all_labels_but_le() {
        // Two histograms (job a, b) over two steps; b's step 1 has no +Inf bucket.
        let series = vec![
            s(
                &[("__name__", "h"), ("job", "a"), ("le", "0.1")],
                &[(0, 50.0), (1, 0.0)],
            ),
            s(
                &[("__name__", "h"), ("job", "a"), ("le", "0.2")],
                &[(0, 70.0), (1, 10.0)],
            ),
            s(
                &[("__name__", "h"), ("job", "a"), ("le", "+Inf")],
                &[(0, 100.0), (1, 10.0)],
            ),
            s(
                &[("__name__", "h"), ("job", "b"), ("le", "1")],
                &[(0, 1.0), (1, 1.0)],
            ),
            s(
                &[("__name__", "h"), ("job", "b"), ("le", "+Inf")],
                &[(0, 2.0)],
            ),
            s(&[("__name__", "h"), ("job", "b"), ("le", "x")], &[(0, 7.0)]),
        ];
        let out = histogram_quantile(&[0.6, 0.5], series).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].labels, vec![("job".to_owned(), "a".to_owned())]);
        assert!((out[0].points[0].1 - 0.15).abs() < 1e-12);
        // Step 1 of a: all 10 observations in (0.1, 0.2]: rank 5 halfway.
        assert!((out[0].points[1].1 - 0.15).abs() < 1e-12);
        // b, step 0: rank 1.2 of 2 lies in the +Inf bucket: the largest finite bound.
        assert_eq!(out[1].points[0], (0, 1.0));
        assert!(out[1].points[1].1.is_nan());
    }
}
