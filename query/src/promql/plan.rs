//! Lowers promql-parser's AST into the expression tree Strata evaluates, refusing with a clear
//! error every part of PromQL that Strata does not evaluate (`docs/promql.md` lists what it
//! does). The parser has already checked PromQL's types (a range function gets a range vector,
//! arithmetic gets scalars and instant vectors), so lowering only decides what is supported.

use std::time::{Duration, SystemTime};

use promql_parser::label::{MatchOp, Matcher as ParsedMatcher};
use promql_parser::parser::{
    AtModifier, Expr as Ast, LabelModifier, Offset, VectorMatchCardinality, VectorSelector,
};

use crate::error::{Error, Result};

/// The label that holds a series' metric name.
pub(crate) const METRIC_NAME: &str = "__name__";

/// An expression Strata can evaluate.
#[derive(Debug, Clone)]
pub(crate) enum Expr {
    /// A number literal: a scalar.
    Number(f64),
    /// An instant vector selector: each series' newest sample within the lookback delta.
    Vector(Selector),
    /// A range vector selector, only as the whole of an instant query (`x[1h]`).
    Matrix(Selector),
    /// A function of a range vector (`rate(x[5m])`).
    Range {
        /// The function.
        func: RangeFunc,
        /// The range vector it reads.
        sel: Selector,
    },
    /// `histogram_quantile(phi, buckets)`.
    HistogramQuantile {
        /// The quantile, a scalar expression.
        phi: Box<Expr>,
        /// The bucket series (`le` labels).
        buckets: Box<Expr>,
    },
    /// An aggregation across series.
    Aggregate {
        /// The operator.
        op: AggOp,
        /// `k` of `topk`/`bottomk`.
        param: Option<Box<Expr>>,
        /// `by`/`without`.
        grouping: Grouping,
        /// The aggregated expression.
        inner: Box<Expr>,
    },
    /// A binary operation.
    Binary {
        /// The operator.
        op: BinOp,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand.
        rhs: Box<Expr>,
        /// How two vectors are matched (ignored when a side is a scalar).
        matching: Matching,
        /// `bool` on a comparison: 0/1 instead of filtering.
        return_bool: bool,
    },
    /// Unary minus.
    Neg(Box<Expr>),
    /// `time()`: each step's time in seconds, a scalar.
    Time,
    /// `vector(s)`: a series without labels holding the scalar.
    VectorOf(Box<Expr>),
    /// `scalar(v)`: the vector's only sample, NaN unless there is exactly one.
    ScalarOf(Box<Expr>),
}

impl Expr {
    /// Whether the expression is a scalar (every other supported expression is a vector).
    pub(crate) fn is_scalar(&self) -> bool {
        match self {
            Expr::Number(_) | Expr::Time | Expr::ScalarOf(_) => true,
            Expr::Neg(e) => e.is_scalar(),
            Expr::Binary { lhs, rhs, .. } => lhs.is_scalar() && rhs.is_scalar(),
            _ => false,
        }
    }
}

/// The series a selector picks and the time it looks at.
#[derive(Debug, Clone)]
pub(crate) struct Selector {
    /// Every matcher, the metric name as a `__name__` matcher among them.
    pub(crate) matchers: Vec<LabelMatcher>,
    /// The range of a range selector in ms; 0 for an instant selector.
    pub(crate) range_ms: i64,
    /// `offset`, in ms (negative looks ahead).
    pub(crate) offset_ms: i64,
    /// `@`: the time evaluated at instead of each step.
    pub(crate) at: Option<At>,
}

/// The `@` modifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum At {
    /// `@ start()`.
    Start,
    /// `@ end()`.
    End,
    /// `@ <time>`, in ms.
    Ms(i64),
}

/// One label matcher. Regular expressions are fully anchored, as in Prometheus.
#[derive(Debug, Clone)]
pub(crate) struct LabelMatcher {
    /// The label name.
    pub(crate) name: String,
    /// The operator and, for regexes, the compiled pattern.
    pub(crate) op: MatchKind,
    /// The value or pattern as written.
    pub(crate) value: String,
}

/// A matcher's operator.
#[derive(Debug, Clone)]
pub(crate) enum MatchKind {
    /// `=`
    Equal,
    /// `!=`
    NotEqual,
    /// `=~`, the anchored pattern.
    Regex(regex::Regex),
    /// `!~`, the anchored pattern.
    NotRegex(regex::Regex),
}

impl LabelMatcher {
    /// Whether a series whose label has `value` passes; an absent label has the value `""`.
    pub(crate) fn matches(&self, value: &str) -> bool {
        match &self.op {
            MatchKind::Equal => self.value == value,
            MatchKind::NotEqual => self.value != value,
            MatchKind::Regex(r) => r.is_match(value),
            MatchKind::NotRegex(r) => !r.is_match(value),
        }
    }
}

/// The functions of a range vector that Strata evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeFunc {
    Rate,
    Irate,
    Increase,
    Delta,
    AvgOverTime,
    MinOverTime,
    MaxOverTime,
    SumOverTime,
    CountOverTime,
    LastOverTime,
}

impl RangeFunc {
    fn from_name(name: &str) -> Option<RangeFunc> {
        Some(match name {
            "rate" => RangeFunc::Rate,
            "irate" => RangeFunc::Irate,
            "increase" => RangeFunc::Increase,
            "delta" => RangeFunc::Delta,
            "avg_over_time" => RangeFunc::AvgOverTime,
            "min_over_time" => RangeFunc::MinOverTime,
            "max_over_time" => RangeFunc::MaxOverTime,
            "sum_over_time" => RangeFunc::SumOverTime,
            "count_over_time" => RangeFunc::CountOverTime,
            "last_over_time" => RangeFunc::LastOverTime,
            _ => return None,
        })
    }

    /// Whether the result keeps the metric name: `last_over_time` picks a sample, like an
    /// offset; every other function changes what the value means.
    pub(crate) fn keeps_name(self) -> bool {
        self == RangeFunc::LastOverTime
    }
}

/// The aggregation operators Strata evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AggOp {
    Sum,
    Avg,
    Min,
    Max,
    Count,
    Topk,
    Bottomk,
}

/// `by (...)` or `without (...)`; no clause is `by ()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Grouping {
    /// Keep only these labels.
    By(Vec<String>),
    /// Drop these labels and the metric name.
    Without(Vec<String>),
}

/// The binary operators Strata evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Atan2,
    Eq,
    Ne,
    Gt,
    Lt,
    Ge,
    Le,
    And,
    Or,
    Unless,
}

impl BinOp {
    fn from_token(token: &str) -> Option<BinOp> {
        Some(match token {
            "+" => BinOp::Add,
            "-" => BinOp::Sub,
            "*" => BinOp::Mul,
            "/" => BinOp::Div,
            "%" => BinOp::Mod,
            "^" => BinOp::Pow,
            "atan2" => BinOp::Atan2,
            "==" => BinOp::Eq,
            "!=" => BinOp::Ne,
            ">" => BinOp::Gt,
            "<" => BinOp::Lt,
            ">=" => BinOp::Ge,
            "<=" => BinOp::Le,
            "and" => BinOp::And,
            "or" => BinOp::Or,
            "unless" => BinOp::Unless,
            _ => return None,
        })
    }

    /// Whether the operator is a set operator (`and`, `or`, `unless`).
    pub(crate) fn is_set(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or | BinOp::Unless)
    }

    /// Whether the operator compares (filters, or gives 0/1 with `bool`).
    pub(crate) fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Gt | BinOp::Lt | BinOp::Ge | BinOp::Le
        )
    }
}

/// How the series of two vectors pair up: by all labels but the metric name, by only the
/// `on` labels, or by all but the `ignoring` labels (and the metric name).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Matching {
    /// No modifier.
    #[default]
    All,
    /// `on (...)`.
    On(Vec<String>),
    /// `ignoring (...)`.
    Ignoring(Vec<String>),
}

fn unsupported(what: impl Into<String>) -> Error {
    Error::Unsupported(what.into())
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Lowers a parsed PromQL expression, refusing what Strata does not evaluate.
pub(crate) fn lower(ast: &Ast) -> Result<Expr> {
    match ast {
        Ast::NumberLiteral(n) => Ok(Expr::Number(n.val)),
        Ast::Paren(p) => lower(&p.expr),
        Ast::Unary(u) => Ok(Expr::Neg(Box::new(lower(&u.expr)?))),
        Ast::VectorSelector(vs) => Ok(Expr::Vector(selector(vs, 0)?)),
        Ast::MatrixSelector(ms) => Ok(Expr::Matrix(selector(&ms.vs, millis(ms.range))?)),
        Ast::StringLiteral(_) => Err(unsupported(
            "unsupported expression: a string literal is only allowed as a function argument",
        )),
        Ast::Subquery(_) => Err(unsupported("unsupported expression: subquery")),
        Ast::Extension(_) => Err(unsupported("unsupported expression: extension")),
        Ast::Call(call) => lower_call(call),
        Ast::Aggregate(agg) => lower_aggregate(agg),
        Ast::Binary(bin) => lower_binary(bin),
    }
}

fn lower_call(call: &promql_parser::parser::Call) -> Result<Expr> {
    let name = call.func.name;
    let args = &call.args.args;
    if let Some(func) = RangeFunc::from_name(name) {
        return match args.first().map(|a| a.as_ref()) {
            Some(Ast::MatrixSelector(ms)) if args.len() == 1 => Ok(Expr::Range {
                func,
                sel: selector(&ms.vs, millis(ms.range))?,
            }),
            Some(Ast::Subquery(_)) => Err(unsupported(format!(
                "unsupported expression: subquery as the argument of {name}"
            ))),
            _ => Err(unsupported(format!(
                "unsupported argument of {name}: expected a range vector selector"
            ))),
        };
    }
    match (name, args.as_slice()) {
        ("time", []) => return Ok(Expr::Time),
        ("vector", [arg]) => {
            let arg = lower(arg)?;
            if !arg.is_scalar() {
                return Err(Error::bad_request("vector() takes a scalar"));
            }
            return Ok(Expr::VectorOf(Box::new(arg)));
        }
        ("scalar", [arg]) => return Ok(Expr::ScalarOf(Box::new(lower(arg)?))),
        _ => {}
    }
    if name == "histogram_quantile" {
        let [phi, buckets] = args.as_slice() else {
            return Err(Error::bad_request("histogram_quantile takes two arguments"));
        };
        let phi = lower(phi)?;
        if !phi.is_scalar() {
            return Err(unsupported(
                "unsupported argument of histogram_quantile: the quantile must be a scalar",
            ));
        }
        return Ok(Expr::HistogramQuantile {
            phi: Box::new(phi),
            buckets: Box::new(lower(buckets)?),
        });
    }
    Err(unsupported(format!("unsupported function \"{name}\"")))
}

fn lower_aggregate(agg: &promql_parser::parser::AggregateExpr) -> Result<Expr> {
    let token = agg.op.to_string();
    let op = match token.as_str() {
        "sum" => AggOp::Sum,
        "avg" => AggOp::Avg,
        "min" => AggOp::Min,
        "max" => AggOp::Max,
        "count" => AggOp::Count,
        "topk" => AggOp::Topk,
        "bottomk" => AggOp::Bottomk,
        other => return Err(unsupported(format!("unsupported aggregation \"{other}\""))),
    };
    let grouping = match &agg.modifier {
        None => Grouping::By(Vec::new()),
        Some(LabelModifier::Include(l)) => Grouping::By(l.labels.clone()),
        Some(LabelModifier::Exclude(l)) => Grouping::Without(l.labels.clone()),
    };
    let param = match (&agg.param, op) {
        (Some(p), AggOp::Topk | AggOp::Bottomk) => {
            let p = lower(p)?;
            if !p.is_scalar() {
                return Err(unsupported(format!(
                    "unsupported parameter of {token}: k must be a scalar"
                )));
            }
            Some(Box::new(p))
        }
        (None, AggOp::Topk | AggOp::Bottomk) => {
            return Err(Error::bad_request(format!("{token} needs a parameter k")));
        }
        _ => None,
    };
    Ok(Expr::Aggregate {
        op,
        param,
        grouping,
        inner: Box::new(lower(&agg.expr)?),
    })
}

fn lower_binary(bin: &promql_parser::parser::BinaryExpr) -> Result<Expr> {
    let token = bin.op.to_string();
    let Some(op) = BinOp::from_token(&token) else {
        return Err(unsupported(format!(
            "unsupported binary operator \"{token}\""
        )));
    };
    let mut matching = Matching::All;
    let mut return_bool = false;
    if let Some(m) = &bin.modifier {
        match &m.card {
            VectorMatchCardinality::OneToOne => {}
            VectorMatchCardinality::ManyToOne(_) => {
                return Err(unsupported("unsupported vector matching \"group_left\""));
            }
            VectorMatchCardinality::OneToMany(_) => {
                return Err(unsupported("unsupported vector matching \"group_right\""));
            }
            VectorMatchCardinality::ManyToMany if op.is_set() => {}
            VectorMatchCardinality::ManyToMany => {
                return Err(unsupported(format!(
                    "unsupported vector matching of \"{token}\""
                )));
            }
        }
        if m.fill_values.lhs.is_some() || m.fill_values.rhs.is_some() {
            return Err(unsupported("unsupported vector matching modifier \"fill\""));
        }
        matching = match &m.matching {
            None => Matching::All,
            Some(LabelModifier::Include(l)) => Matching::On(l.labels.clone()),
            Some(LabelModifier::Exclude(l)) => Matching::Ignoring(l.labels.clone()),
        };
        return_bool = m.return_bool;
    }
    Ok(Expr::Binary {
        op,
        lhs: Box::new(lower(&bin.lhs)?),
        rhs: Box::new(lower(&bin.rhs)?),
        matching,
        return_bool,
    })
}

fn selector(vs: &VectorSelector, range_ms: i64) -> Result<Selector> {
    if !vs.matchers.or_matchers.is_empty() {
        return Err(unsupported(
            "unsupported selector: \"or\" between label matchers",
        ));
    }
    let mut matchers = Vec::with_capacity(vs.matchers.matchers.len() + 1);
    if let Some(name) = &vs.name {
        matchers.push(LabelMatcher {
            name: METRIC_NAME.to_owned(),
            op: MatchKind::Equal,
            value: name.clone(),
        });
    }
    for m in &vs.matchers.matchers {
        matchers.push(label_matcher(m));
    }
    let offset_ms = match &vs.offset {
        None => 0,
        Some(Offset::Pos(d)) => millis(*d),
        Some(Offset::Neg(d)) => -millis(*d),
    };
    let at = match &vs.at {
        None => None,
        Some(AtModifier::Start) => Some(At::Start),
        Some(AtModifier::End) => Some(At::End),
        Some(AtModifier::At(t)) => Some(At::Ms(system_time_ms(*t))),
    };
    Ok(Selector {
        matchers,
        range_ms,
        offset_ms,
        at,
    })
}

fn system_time_ms(t: SystemTime) -> i64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => millis(d),
        Err(e) => -millis(e.duration()),
    }
}

fn label_matcher(m: &ParsedMatcher) -> LabelMatcher {
    let op = match &m.op {
        MatchOp::Equal => MatchKind::Equal,
        MatchOp::NotEqual => MatchKind::NotEqual,
        MatchOp::Re(r) => MatchKind::Regex(r.clone()),
        MatchOp::NotRe(r) => MatchKind::NotRegex(r.clone()),
    };
    LabelMatcher {
        name: m.name.clone(),
        op,
        value: m.value.clone(),
    }
}
