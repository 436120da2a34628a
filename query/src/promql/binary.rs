//! Binary operators: between scalars, between a vector and a scalar, between two vectors
//! with one-to-one matching (`on`/`ignoring`), and the set operators `and`, `or`, `unless`.
//!
//! Arithmetic drops the metric name, since the result no longer measures the metric; a
//! comparison filters (keeping the name and the vector's value) unless it has `bool`, which
//! gives 0 or 1 without the name.

use std::collections::HashMap;

use super::eval::{Labels, StepSeries, Value, drop_name, merge_same_labels};
use super::plan::{BinOp, METRIC_NAME, Matching};
use crate::error::{Error, Result};

/// `l op r`, and whether the sample is kept (a comparison that is false filters it out). A
/// comparison's value is its left side.
fn apply(op: BinOp, l: f64, r: f64) -> (f64, bool) {
    match op {
        BinOp::Add => (l + r, true),
        BinOp::Sub => (l - r, true),
        BinOp::Mul => (l * r, true),
        BinOp::Div => (l / r, true),
        BinOp::Mod => (l % r, true),
        BinOp::Pow => (l.powf(r), true),
        BinOp::Atan2 => (l.atan2(r), true),
        BinOp::Eq => (l, l == r),
        BinOp::Ne => (l, l != r),
        BinOp::Gt => (l, l > r),
        BinOp::Lt => (l, l < r),
        BinOp::Ge => (l, l >= r),
        BinOp::Le => (l, l <= r),
        // Set operators choose samples; they never combine values.
        BinOp::And | BinOp::Or | BinOp::Unless => (l, true),
    }
}

fn bool_value(keep: bool) -> f64 {
    if keep { 1.0 } else { 0.0 }
}

/// Evaluates `lhs op rhs` at every step.
pub(crate) fn binary(
    op: BinOp,
    lhs: Value,
    rhs: Value,
    matching: &Matching,
    return_bool: bool,
) -> Result<Value> {
    match (lhs, rhs) {
        (Value::Scalar(l), Value::Scalar(r)) => Ok(Value::Scalar(
            l.iter()
                .zip(&r)
                .map(|(a, b)| {
                    let (v, keep) = apply(op, *a, *b);
                    if op.is_comparison() {
                        bool_value(keep)
                    } else {
                        v
                    }
                })
                .collect(),
        )),
        (Value::Vector(v), Value::Scalar(s)) => vector_scalar(op, v, &s, false, return_bool),
        (Value::Scalar(s), Value::Vector(v)) => vector_scalar(op, v, &s, true, return_bool),
        (Value::Vector(l), Value::Vector(r)) if op.is_set() => set_operation(op, l, r, matching),
        (Value::Vector(l), Value::Vector(r)) => vector_vector(op, l, r, matching, return_bool),
        _ => Err(Error::bad_request(
            "binary expressions are only allowed between scalars and instant vectors",
        )),
    }
}

/// A vector and a scalar; `swapped` when the scalar is on the left.
fn vector_scalar(
    op: BinOp,
    mut series: Vec<StepSeries>,
    scalar: &[f64],
    swapped: bool,
    return_bool: bool,
) -> Result<Value> {
    let drops_name = !op.is_comparison() || return_bool;
    for s in &mut series {
        s.points.retain_mut(|(k, v)| {
            let sv = scalar.get(*k as usize).copied().unwrap_or(f64::NAN);
            let (mut out, keep) = if swapped {
                apply(op, sv, *v)
            } else {
                apply(op, *v, sv)
            };
            if op.is_comparison() {
                // The vector's value stays, whichever side it is on.
                out = *v;
            }
            if return_bool {
                *v = bool_value(keep);
                return true;
            }
            *v = out;
            keep
        });
        if drops_name {
            drop_name(&mut s.labels);
        }
    }
    if drops_name {
        series = merge_same_labels(series)?;
    }
    Ok(Value::Vector(series))
}

/// The labels two series are matched on.
fn signature(labels: &Labels, matching: &Matching) -> Labels {
    match matching {
        Matching::On(on) => labels
            .iter()
            .filter(|(k, _)| on.iter().any(|o| o == k))
            .cloned()
            .collect(),
        Matching::Ignoring(ignored) => labels
            .iter()
            .filter(|(k, _)| k != METRIC_NAME && !ignored.iter().any(|o| o == k))
            .cloned()
            .collect(),
        Matching::All => labels
            .iter()
            .filter(|(k, _)| k != METRIC_NAME)
            .cloned()
            .collect(),
    }
}

fn show(labels: &Labels) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{{{}}}", inner.join(", "))
}

/// Two vectors, one-to-one: at each step, each left sample pairs with the right sample whose
/// signature is the same. A signature held by two right samples at one step, or matched by
/// two left samples at one step, is an error, as in Prometheus. Memory stays in proportion to
/// the samples, not to signatures times steps.
fn vector_vector(
    op: BinOp,
    lhs: Vec<StepSeries>,
    rhs: Vec<StepSeries>,
    matching: &Matching,
    return_bool: bool,
) -> Result<Value> {
    // Per signature: the right samples (step, value, series index), in step order.
    let mut right: HashMap<Labels, Vec<(u32, f64, usize)>> = HashMap::new();
    for (i, s) in rhs.iter().enumerate() {
        right
            .entry(signature(&s.labels, matching))
            .or_default()
            .extend(s.points.iter().map(|&(k, v)| (k, v, i)));
    }
    for (sig, points) in &mut right {
        points.sort_by_key(|p| p.0);
        if let Some(w) = points.windows(2).find(|w| w[0].0 == w[1].0) {
            let (a, b) = (show(&rhs[w[0].2].labels), show(&rhs[w[1].2].labels));
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            return Err(Error::Execution(format!(
                "found duplicate series for the match group {} on the right hand-side of the \
                 operation: [{a}, {b}];many-to-many matching not allowed: matching labels must \
                 be unique on one side",
                show(sig)
            )));
        }
    }
    let drops_name = !op.is_comparison() || return_bool;
    // Per signature: the steps a left sample matched at.
    let mut matched: HashMap<&Labels, Vec<u32>> = HashMap::new();
    let mut out = Vec::new();
    for s in lhs {
        let sig = signature(&s.labels, matching);
        let Some((sig, slots)) = right.get_key_value(&sig) else {
            continue;
        };
        let seen = matched.entry(sig).or_default();
        let mut points = Vec::new();
        let mut j = 0;
        for &(k, lv) in &s.points {
            while j < slots.len() && slots[j].0 < k {
                j += 1;
            }
            let Some(&(_, rv, _)) = slots.get(j).filter(|r| r.0 == k) else {
                continue;
            };
            seen.push(k);
            let (v, keep) = apply(op, lv, rv);
            if return_bool {
                points.push((k, bool_value(keep)));
            } else if keep {
                points.push((k, v));
            }
        }
        let mut labels = s.labels;
        if drops_name {
            drop_name(&mut labels);
        }
        match matching {
            Matching::On(on) => labels.retain(|(k, _)| on.iter().any(|o| o == k)),
            Matching::Ignoring(ignored) => labels.retain(|(k, _)| !ignored.iter().any(|o| o == k)),
            Matching::All => {}
        }
        out.push(StepSeries { labels, points });
    }
    for steps in matched.values_mut() {
        steps.sort_unstable();
        if steps.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::Execution(
                "multiple matches for labels: many-to-one matching must be explicit \
                 (group_left/group_right)"
                    .to_owned(),
            ));
        }
    }
    Ok(Value::Vector(merge_same_labels(out)?))
}

/// `and`, `or`, `unless` at each step: the left samples whose signature the right side has
/// (`and`) or lacks (`unless`) at that step; for `or`, every left sample and the right
/// samples whose signature the left side lacks. Labels stay as they are.
fn set_operation(
    op: BinOp,
    lhs: Vec<StepSeries>,
    rhs: Vec<StepSeries>,
    matching: &Matching,
) -> Result<Value> {
    fn steps_by_signature(series: &[StepSeries], matching: &Matching) -> HashMap<Labels, Vec<u32>> {
        let mut out: HashMap<Labels, Vec<u32>> = HashMap::new();
        for s in series {
            out.entry(signature(&s.labels, matching))
                .or_default()
                .extend(s.points.iter().map(|p| p.0));
        }
        for steps in out.values_mut() {
            steps.sort_unstable();
            steps.dedup();
        }
        out
    }
    let has = |sigs: &HashMap<Labels, Vec<u32>>, sig: &Labels, k: u32| {
        sigs.get(sig)
            .is_some_and(|steps| steps.binary_search(&k).is_ok())
    };
    let right = steps_by_signature(&rhs, matching);
    let left = if op == BinOp::Or {
        steps_by_signature(&lhs, matching)
    } else {
        HashMap::new()
    };
    let mut out = Vec::with_capacity(lhs.len() + rhs.len());
    for mut s in lhs {
        if op != BinOp::Or {
            let sig = signature(&s.labels, matching);
            let keep_matched = op == BinOp::And;
            s.points.retain(|p| has(&right, &sig, p.0) == keep_matched);
        }
        out.push(s);
    }
    if op == BinOp::Or {
        for mut s in rhs {
            let sig = signature(&s.labels, matching);
            s.points.retain(|p| !has(&left, &sig, p.0));
            out.push(s);
        }
    }
    Ok(Value::Vector(merge_same_labels(out)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(labels: &[(&str, &str)], points: &[(u32, f64)]) -> StepSeries {
        let mut labels: Labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        labels.sort();
        StepSeries {
            labels,
            points: points.to_vec(),
        }
    }

    fn vector(v: Value) -> Vec<StepSeries> {
        match v {
            Value::Vector(v) => v,
            other => panic!("not a vector: {other:?}"),
        }
    }

    #[test]
    fn scalar_arithmetic_and_comparison() {
        let v = binary(
            BinOp::Add,
            Value::Scalar(vec![1.0, 2.0]),
            Value::Scalar(vec![1.0, 3.0]),
            &Matching::All,
            false,
        )
        .unwrap();
        assert_eq!(v, Value::Scalar(vec![2.0, 5.0]));
        let v = binary(
            BinOp::Gt,
            Value::Scalar(vec![1.0, 4.0]),
            Value::Scalar(vec![2.0, 3.0]),
            &Matching::All,
            true,
        )
        .unwrap();
        assert_eq!(v, Value::Scalar(vec![0.0, 1.0]));
        // Go's math.Mod: the sign of the dividend.
        assert_eq!(apply(BinOp::Mod, -7.0, 3.0).0, -1.0);
        assert_eq!(apply(BinOp::Pow, 2.0, 10.0).0, 1024.0);
    }

    #[test]
    fn vector_scalar_drops_the_name_for_arithmetic_only() {
        let x = || vec![s(&[("__name__", "x"), ("a", "1")], &[(0, 1.0), (1, 5.0)])];
        let sc = || Value::Scalar(vec![2.0, 2.0]);
        let out =
            vector(binary(BinOp::Mul, Value::Vector(x()), sc(), &Matching::All, false).unwrap());
        assert_eq!(out, vec![s(&[("a", "1")], &[(0, 2.0), (1, 10.0)])]);
        // 2 - x: the scalar on the left.
        let out =
            vector(binary(BinOp::Sub, sc(), Value::Vector(x()), &Matching::All, false).unwrap());
        assert_eq!(out[0].points, vec![(0, 1.0), (1, -3.0)]);
        // x > 2 filters and keeps the name; 2 < x keeps the vector's value too.
        let out =
            vector(binary(BinOp::Gt, Value::Vector(x()), sc(), &Matching::All, false).unwrap());
        assert_eq!(out, vec![s(&[("__name__", "x"), ("a", "1")], &[(1, 5.0)])]);
        let out =
            vector(binary(BinOp::Lt, sc(), Value::Vector(x()), &Matching::All, false).unwrap());
        assert_eq!(out[0].points, vec![(1, 5.0)]);
        let out =
            vector(binary(BinOp::Gt, Value::Vector(x()), sc(), &Matching::All, true).unwrap());
        assert_eq!(out, vec![s(&[("a", "1")], &[(0, 0.0), (1, 1.0)])]);
        // Two series that only differ by name collide once the name is gone.
        let two = vec![
            s(&[("__name__", "x"), ("a", "1")], &[(0, 1.0)]),
            s(&[("__name__", "y"), ("a", "1")], &[(0, 1.0)]),
        ];
        let e = binary(BinOp::Add, Value::Vector(two), sc(), &Matching::All, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "vector cannot contain metrics with the same labelset"
        );
    }

    #[test]
    fn vectors_match_one_to_one() {
        // operators.test style: a / b by instance.
        let a = vec![
            s(
                &[("__name__", "a"), ("i", "0"), ("j", "x")],
                &[(0, 10.0), (1, 20.0)],
            ),
            s(&[("__name__", "a"), ("i", "1"), ("j", "x")], &[(0, 30.0)]),
        ];
        let b = vec![
            s(
                &[("__name__", "b"), ("i", "0"), ("j", "y")],
                &[(0, 2.0), (1, 4.0)],
            ),
            s(&[("__name__", "b"), ("i", "2"), ("j", "y")], &[(0, 1.0)]),
        ];
        // Without a modifier nothing matches: j differs.
        let none = vector(
            binary(
                BinOp::Div,
                Value::Vector(a.clone()),
                Value::Vector(b.clone()),
                &Matching::All,
                false,
            )
            .unwrap(),
        );
        assert!(none.is_empty());
        let on = vector(
            binary(
                BinOp::Div,
                Value::Vector(a.clone()),
                Value::Vector(b.clone()),
                &Matching::On(vec!["i".to_owned()]),
                false,
            )
            .unwrap(),
        );
        assert_eq!(on, vec![s(&[("i", "0")], &[(0, 5.0), (1, 5.0)])]);
        let ignoring = vector(
            binary(
                BinOp::Div,
                Value::Vector(a.clone()),
                Value::Vector(b.clone()),
                &Matching::Ignoring(vec!["j".to_owned()]),
                false,
            )
            .unwrap(),
        );
        assert_eq!(ignoring, vec![s(&[("i", "0")], &[(0, 5.0), (1, 5.0)])]);
        // A comparison keeps the left side's name and value.
        let cmp = vector(
            binary(
                BinOp::Gt,
                Value::Vector(a.clone()),
                Value::Vector(b),
                &Matching::On(vec!["i".to_owned()]),
                false,
            )
            .unwrap(),
        );
        assert_eq!(cmp[0].points, vec![(0, 10.0), (1, 20.0)]);
        // Two right series with one signature at one step: an error naming the group.
        let dup = vec![
            s(&[("__name__", "b"), ("i", "0"), ("j", "y")], &[(0, 2.0)]),
            s(&[("__name__", "b"), ("i", "0"), ("j", "z")], &[(0, 2.0)]),
        ];
        let e = binary(
            BinOp::Add,
            Value::Vector(a.clone()),
            Value::Vector(dup),
            &Matching::On(vec!["i".to_owned()]),
            false,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("found duplicate series for the match group {i=\"0\"}"),
            "{e}"
        );
        // Two left series matching one right sample at one step.
        let left = vec![
            s(&[("__name__", "a"), ("i", "0"), ("j", "x")], &[(0, 1.0)]),
            s(&[("__name__", "a"), ("i", "0"), ("j", "w")], &[(0, 1.0)]),
        ];
        let right = vec![s(&[("i", "0")], &[(0, 1.0)])];
        let e = binary(
            BinOp::Add,
            Value::Vector(left),
            Value::Vector(right),
            &Matching::On(vec!["i".to_owned()]),
            false,
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with("multiple matches for labels"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod set_tests {
    use super::*;

    fn s(labels: &[(&str, &str)], points: &[(u32, f64)]) -> StepSeries {
        let mut labels: Labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        labels.sort();
        StepSeries {
            labels,
            points: points.to_vec(),
        }
    }

    #[test]
    fn and_or_unless_pick_samples_by_signature_and_step() {
        // operators.test style: left a{i=0} at steps 0-2, a{i=1} at 0; right b{i=0} at step 1.
        let l = || {
            vec![
                s(
                    &[("__name__", "a"), ("i", "0")],
                    &[(0, 1.0), (1, 2.0), (2, 3.0)],
                ),
                s(&[("__name__", "a"), ("i", "1")], &[(0, 9.0)]),
            ]
        };
        let r = || {
            vec![
                s(&[("__name__", "b"), ("i", "0")], &[(1, 5.0)]),
                s(&[("__name__", "b"), ("i", "2")], &[(0, 7.0)]),
            ]
        };
        let run = |op| match binary(
            op,
            Value::Vector(l()),
            Value::Vector(r()),
            &Matching::All,
            false,
        )
        .unwrap()
        {
            Value::Vector(v) => v,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            run(BinOp::And),
            vec![s(&[("__name__", "a"), ("i", "0")], &[(1, 2.0)])]
        );
        assert_eq!(
            run(BinOp::Unless),
            vec![
                s(&[("__name__", "a"), ("i", "0")], &[(0, 1.0), (2, 3.0)]),
                s(&[("__name__", "a"), ("i", "1")], &[(0, 9.0)]),
            ]
        );
        // or: every left sample; b{i=0} only where a{i=0} has none (never), b{i=2} kept.
        assert_eq!(
            run(BinOp::Or),
            vec![
                s(
                    &[("__name__", "a"), ("i", "0")],
                    &[(0, 1.0), (1, 2.0), (2, 3.0)]
                ),
                s(&[("__name__", "a"), ("i", "1")], &[(0, 9.0)]),
                s(&[("__name__", "b"), ("i", "2")], &[(0, 7.0)]),
            ]
        );
        // on (): every sample has the empty signature.
        let on = Matching::On(Vec::new());
        let v = binary(
            BinOp::And,
            Value::Vector(l()),
            Value::Vector(r()),
            &on,
            false,
        )
        .unwrap();
        let Value::Vector(v) = v else { panic!() };
        assert_eq!(v[0].points, vec![(0, 1.0), (1, 2.0)]);
    }
}
