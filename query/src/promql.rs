//! PromQL: the read path of Prometheus' HTTP API, for Grafana's Prometheus data source.
//!
//! A query is parsed by promql-parser, lowered to the part of PromQL Strata evaluates (`plan`;
//! anything else is refused with an error that names it), and evaluated over the tsdb's
//! series index and read path (`eval`, `select`, `functions`, `aggregation`, `binary`) with
//! Prometheus' semantics: a 5-minute lookback for instant selectors, windows open on the left,
//! steps at `start + k * step`, extrapolated rates. Values are f64, as in Prometheus: stored
//! integers become floats. `api` answers the HTTP endpoints without HTTP types (status and
//! JSON body, in Prometheus' envelope), `json` writes results, and `metadata` serves labels
//! and series. `names` is where stored names and PromQL names meet.

mod aggregation;
mod api;
mod binary;
mod eval;
mod functions;
mod json;
mod metadata;
mod names;
mod plan;
mod select;

use strata_tsdb::Tsdb;

pub use api::{PromRequest, PromResponse, handle_prometheus, prometheus_claims};

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::model::QueryLimits;
use eval::{Evaluator, Steps, Value};
use plan::Expr;

/// Prometheus' default lookback delta: how far back an instant selector looks for a sample.
pub const DEFAULT_LOOKBACK_MS: i64 = 5 * 60 * 1000;

/// Most steps a range query may have per series, as in Prometheus.
const MAX_STEPS: i64 = 11_000;

/// A PromQL evaluation: an instant query is one with `start_ms == end_ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct PromQuery {
    /// The PromQL expression.
    pub query: String,
    /// First evaluation time, ms.
    pub start_ms: i64,
    /// Last evaluation time, ms (inclusive; the last step is at or before it).
    pub end_ms: i64,
    /// Step between evaluations, ms (> 0).
    pub step_ms: i64,
    /// Lookback delta of instant selectors, ms.
    pub lookback_ms: i64,
}

/// A result: labels are sorted by name, the metric name as `__name__`.
#[derive(Debug, Clone, PartialEq)]
pub enum PromValue {
    /// A scalar at the query's time.
    Scalar {
        /// Evaluation time, ms.
        time_ms: i64,
        /// The value.
        value: f64,
    },
    /// An instant vector (instant queries).
    Vector(Vec<PromSample>),
    /// A range vector: every range query, and an instant query of a range selector.
    Matrix(Vec<PromSeries>),
}

/// One sample of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub struct PromSample {
    /// Labels.
    pub labels: Vec<(String, String)>,
    /// Evaluation time, ms.
    pub time_ms: i64,
    /// The value.
    pub value: f64,
}

/// One series of a range vector.
#[derive(Debug, Clone, PartialEq)]
pub struct PromSeries {
    /// Labels.
    pub labels: Vec<(String, String)>,
    /// `(time ms, value)` in time order.
    pub points: Vec<(i64, f64)>,
}

/// Parses PromQL (bare dotted names allowed, see `names`) into promql-parser's AST. A panic
/// inside the parser, on input nobody foresaw, is a bad request rather than a dropped
/// connection.
fn parse_ast(query: &str) -> Result<promql_parser::parser::Expr> {
    let quoted = names::quote_dotted_names(query);
    std::panic::catch_unwind(|| promql_parser::parser::parse(&quoted))
        .unwrap_or_else(|_| Err("the query could not be parsed".to_owned()))
        .map_err(Error::bad_request)
}

/// Parses a PromQL expression and lowers it to what Strata evaluates. Errors are
/// `BadRequest` (not PromQL) or `Unsupported`.
fn parse(query: &str) -> Result<Expr> {
    plan::lower(&parse_ast(query)?)
}

/// Evaluates a PromQL query over `tsdb`. An instant query gives a vector, a scalar or (for a
/// range selector) a matrix; a range query gives a matrix.
pub fn promql_eval(tsdb: &Tsdb, q: &PromQuery, limits: &QueryLimits) -> Result<PromValue> {
    let deadline = Deadline::start(limits.timeout);
    let expr = parse(&q.query)?;
    let instant = q.start_ms == q.end_ms;
    if q.end_ms < q.start_ms {
        return Err(Error::bad_request(
            "end timestamp must not be before start time",
        ));
    }
    if q.step_ms <= 0 {
        return Err(Error::bad_request(
            "zero or negative query resolution step widths are not accepted. Try a positive integer",
        ));
    }
    if (q.end_ms - q.start_ms) / q.step_ms > MAX_STEPS {
        return Err(Error::bad_request(
            "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)",
        ));
    }
    if !instant && matches!(expr, Expr::Matrix(_)) {
        return Err(Error::bad_request(
            "invalid expression type \"range vector\" for range query, must be Scalar or instant Vector",
        ));
    }
    let count = usize::try_from((q.end_ms - q.start_ms) / q.step_ms).unwrap_or(0) + 1;
    let steps = Steps {
        start_ms: q.start_ms,
        step_ms: q.step_ms,
        count,
        end_ms: q.end_ms,
    };
    let ev = Evaluator {
        tsdb,
        steps,
        lookback_ms: q.lookback_ms,
        limits,
        deadline,
    };
    let value = ev.eval(&expr)?;
    let keeps_order = matches!(
        expr,
        Expr::Aggregate {
            op: plan::AggOp::Topk | plan::AggOp::Bottomk,
            ..
        }
    );
    Ok(finish(value, steps, instant, keeps_order))
}

/// The evaluated value as the API answers it.
fn finish(value: Value, steps: Steps, instant: bool, keeps_order: bool) -> PromValue {
    match value {
        Value::Scalar(v) if instant => PromValue::Scalar {
            time_ms: steps.start_ms,
            value: v.first().copied().unwrap_or(f64::NAN),
        },
        Value::Scalar(v) => PromValue::Matrix(vec![PromSeries {
            labels: Vec::new(),
            points: v
                .into_iter()
                .enumerate()
                .map(|(k, x)| (steps.at(k), x))
                .collect(),
        }]),
        Value::Vector(mut series) if instant => {
            if !keeps_order {
                series.sort_by(|a, b| a.labels.cmp(&b.labels));
            }
            PromValue::Vector(
                series
                    .into_iter()
                    .filter_map(|s| {
                        let (_, value) = *s.points.first()?;
                        Some(PromSample {
                            labels: s.labels,
                            time_ms: steps.start_ms,
                            value,
                        })
                    })
                    .collect(),
            )
        }
        Value::Vector(mut series) => {
            series.retain(|s| !s.points.is_empty());
            series.sort_by(|a, b| a.labels.cmp(&b.labels));
            PromValue::Matrix(
                series
                    .into_iter()
                    .map(|s| PromSeries {
                        labels: s.labels,
                        points: s
                            .points
                            .into_iter()
                            .map(|(k, v)| (steps.at(k as usize), v))
                            .collect(),
                    })
                    .collect(),
            )
        }
        Value::Matrix(series) => PromValue::Matrix(
            series
                .into_iter()
                .map(|s| PromSeries {
                    labels: s.labels,
                    points: s.points,
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests;
