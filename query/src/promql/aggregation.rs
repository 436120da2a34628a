//! Aggregation operators across the series of an instant vector, at every step: `sum`, `avg`,
//! `min`, `max`, `count` (one output series per group) and `topk`/`bottomk` (the chosen input
//! series, labels unchanged).

use std::collections::HashMap;

use super::eval::{Labels, StepSeries, merge_same_labels};
use super::functions::KahanSum;
use super::plan::{AggOp, Grouping, METRIC_NAME};
use crate::error::{Error, Result};

/// The labels of the group a series with `labels` falls in.
fn group_labels(labels: &Labels, grouping: &Grouping) -> Labels {
    match grouping {
        Grouping::By(keep) => labels
            .iter()
            .filter(|(k, _)| keep.iter().any(|g| g == k))
            .cloned()
            .collect(),
        Grouping::Without(drop) => labels
            .iter()
            .filter(|(k, _)| k != METRIC_NAME && !drop.iter().any(|g| g == k))
            .cloned()
            .collect(),
    }
}

/// Aggregates `input` over `steps` steps; `param` is `k` of `topk`/`bottomk`, per step.
pub(crate) fn aggregate(
    op: AggOp,
    param: Option<&[f64]>,
    grouping: &Grouping,
    input: Vec<StepSeries>,
    steps: usize,
) -> Result<Vec<StepSeries>> {
    // Groups in order of first appearance.
    let mut index: HashMap<Labels, usize> = HashMap::new();
    let mut groups: Vec<(Labels, Vec<usize>)> = Vec::new();
    for (i, s) in input.iter().enumerate() {
        let key = group_labels(&s.labels, grouping);
        let g = *index.entry(key.clone()).or_insert_with(|| {
            groups.push((key, Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(i);
    }
    if matches!(op, AggOp::Topk | AggOp::Bottomk) {
        let k = param.ok_or_else(|| Error::bad_request("topk and bottomk need a parameter"))?;
        return top_k(op == AggOp::Topk, k, &groups, input);
    }
    let mut out = Vec::with_capacity(groups.len());
    let mut sum = vec![KahanSum::default(); steps];
    let mut acc = vec![0.0f64; steps];
    let mut count = vec![0u32; steps];
    for (labels, members) in groups {
        sum.iter_mut().for_each(|s| *s = KahanSum::default());
        acc.iter_mut().for_each(|a| *a = 0.0);
        count.iter_mut().for_each(|c| *c = 0);
        for &i in &members {
            for &(k, v) in &input[i].points {
                let k = k as usize;
                let (Some(c), Some(a), Some(s)) =
                    (count.get_mut(k), acc.get_mut(k), sum.get_mut(k))
                else {
                    continue;
                };
                match op {
                    AggOp::Sum | AggOp::Avg => s.add(v),
                    AggOp::Min => {
                        if *c == 0 || v < *a || a.is_nan() {
                            *a = v;
                        }
                    }
                    AggOp::Max => {
                        if *c == 0 || v > *a || a.is_nan() {
                            *a = v;
                        }
                    }
                    AggOp::Count | AggOp::Topk | AggOp::Bottomk => {}
                }
                *c += 1;
            }
        }
        let incremental = if op == AggOp::Avg {
            overflowed_means(&members, &input, &sum, &count, &mut acc)
        } else {
            Vec::new()
        };
        let points: Vec<(u32, f64)> = (0..steps)
            .filter(|k| count[*k] > 0)
            .map(|k| {
                let v = match op {
                    AggOp::Sum => sum[k].value(),
                    AggOp::Avg if incremental.get(k) == Some(&true) => acc[k],
                    AggOp::Avg => sum[k].value() / f64::from(count[k]),
                    AggOp::Count => f64::from(count[k]),
                    _ => acc[k],
                };
                (k as u32, v)
            })
            .collect();
        out.push(StepSeries { labels, points });
    }
    Ok(out)
}

/// Where the sum of an `avg` overflowed although no input was infinite, the mean is taken
/// incrementally instead, as Prometheus does: those steps are flagged, their means in `acc`.
fn overflowed_means(
    members: &[usize],
    input: &[StepSeries],
    sum: &[KahanSum],
    count: &[u32],
    acc: &mut [f64],
) -> Vec<bool> {
    let mut flagged: Vec<bool> = (0..sum.len())
        .map(|k| count[k] > 0 && sum[k].value().is_infinite())
        .collect();
    if !flagged.contains(&true) {
        return flagged;
    }
    let mut seen = vec![0u32; sum.len()];
    for &i in members {
        for &(k, v) in &input[i].points {
            let k = k as usize;
            if k >= seen.len() {
                continue;
            }
            seen[k] += 1;
            if v.is_infinite() {
                flagged[k] = false;
            }
            acc[k] += (v - acc[k]) / f64::from(seen[k]);
        }
    }
    flagged
}

/// `topk`/`bottomk`: at each step, the `k` largest (smallest) samples of each group; NaN
/// ranks last either way.
fn top_k(
    largest: bool,
    k_per_step: &[f64],
    groups: &[(Labels, Vec<usize>)],
    input: Vec<StepSeries>,
) -> Result<Vec<StepSeries>> {
    // Each member's samples by step, with its position in the input.
    let mut out_points: Vec<Vec<(u32, f64)>> = vec![Vec::new(); input.len()];
    let mut order: Vec<usize> = Vec::new();
    let mut candidates: Vec<(f64, usize)> = Vec::new();
    for (_, members) in groups {
        let mut cursors = vec![0usize; members.len()];
        for (step, &kf) in k_per_step.iter().enumerate() {
            if kf.is_nan() {
                return Err(Error::Execution("Parameter value is NaN".to_owned()));
            }
            if kf >= 9.223_372_036_854_775e18 {
                return Err(Error::Execution(format!(
                    "Scalar value {kf} overflows int64"
                )));
            }
            let k = kf.trunc();
            candidates.clear();
            for (m, &i) in members.iter().enumerate() {
                let pts = &input[i].points;
                let c = &mut cursors[m];
                while *c < pts.len() && (pts[*c].0 as usize) < step {
                    *c += 1;
                }
                if let Some(p) = pts.get(*c).filter(|p| p.0 as usize == step) {
                    candidates.push((p.1, i));
                }
            }
            if k < 1.0 || candidates.is_empty() {
                continue;
            }
            candidates.sort_by(|a, b| {
                let rank = |x: f64| if x.is_nan() { 1 } else { 0 };
                rank(a.0).cmp(&rank(b.0)).then_with(|| {
                    if largest {
                        b.0.total_cmp(&a.0)
                    } else {
                        a.0.total_cmp(&b.0)
                    }
                })
            });
            let take = if k >= candidates.len() as f64 {
                candidates.len()
            } else {
                k as usize
            };
            for &(v, i) in &candidates[..take] {
                if out_points[i].is_empty() {
                    order.push(i);
                }
                out_points[i].push((step as u32, v));
            }
        }
    }
    let mut input: Vec<Option<StepSeries>> = input.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(order.len());
    for i in order {
        if let Some(mut s) = input[i].take() {
            s.points = std::mem::take(&mut out_points[i]);
            out.push(s);
        }
    }
    if k_per_step.len() > 1 {
        return merge_same_labels(out);
    }
    Ok(out)
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

    /// aggregators.test's http_requests at 50m: job api-server/app-server, instance 0/1,
    /// group production/canary, values 100..800.
    fn requests() -> Vec<StepSeries> {
        let mut v = Vec::new();
        let mut value = 100.0;
        for job in ["api-server", "app-server"] {
            for group in ["production", "canary"] {
                for instance in ["0", "1"] {
                    v.push(s(
                        &[
                            ("__name__", "http_requests"),
                            ("job", job),
                            ("instance", instance),
                            ("group", group),
                        ],
                        &[(0, value)],
                    ));
                    value += 100.0;
                }
            }
        }
        v
    }

    fn by(labels: &[&str]) -> Grouping {
        Grouping::By(labels.iter().map(|s| s.to_string()).collect())
    }

    fn values(out: &[StepSeries]) -> Vec<(Vec<String>, f64)> {
        out.iter()
            .map(|s| {
                (
                    s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                    s.points[0].1,
                )
            })
            .collect()
    }

    #[test]
    fn sum_avg_count_min_max_by_job() {
        // api-server: 100, 200, 300, 400; app-server: 500, 600, 700, 800.
        let run = |op| aggregate(op, None, &by(&["job"]), requests(), 1).unwrap();
        let api = vec!["job=api-server".to_owned()];
        let app = vec!["job=app-server".to_owned()];
        assert_eq!(
            values(&run(AggOp::Sum)),
            vec![(api.clone(), 1000.0), (app.clone(), 2600.0)]
        );
        assert_eq!(
            values(&run(AggOp::Avg)),
            vec![(api.clone(), 250.0), (app.clone(), 650.0)]
        );
        assert_eq!(
            values(&run(AggOp::Count)),
            vec![(api.clone(), 4.0), (app.clone(), 4.0)]
        );
        assert_eq!(
            values(&run(AggOp::Min)),
            vec![(api.clone(), 100.0), (app.clone(), 500.0)]
        );
        assert_eq!(values(&run(AggOp::Max)), vec![(api, 400.0), (app, 800.0)]);
    }

    #[test]
    fn without_drops_the_name_and_the_listed_labels() {
        let out = aggregate(
            AggOp::Sum,
            None,
            &Grouping::Without(vec!["instance".to_owned()]),
            requests(),
            1,
        )
        .unwrap();
        // (job, group) pairs: 100+200, 300+400, 500+600, 700+800.
        let got: Vec<f64> = out.iter().map(|s| s.points[0].1).collect();
        assert_eq!(got, vec![300.0, 700.0, 1100.0, 1500.0]);
        assert_eq!(
            out[0].labels,
            vec![
                ("group".to_owned(), "production".to_owned()),
                ("job".to_owned(), "api-server".to_owned())
            ]
        );
        // No clause: one group with no labels.
        let all = aggregate(AggOp::Sum, None, &by(&[]), requests(), 1).unwrap();
        assert_eq!(values(&all), vec![(vec![], 3600.0)]);
    }

    #[test]
    fn min_max_skip_nan_and_steps_are_separate() {
        let input = vec![
            s(&[("a", "1")], &[(0, f64::NAN), (1, 5.0)]),
            s(&[("a", "2")], &[(0, 3.0), (2, 7.0)]),
        ];
        let max = aggregate(AggOp::Max, None, &by(&[]), input.clone(), 3).unwrap();
        assert_eq!(max[0].points, vec![(0, 3.0), (1, 5.0), (2, 7.0)]);
        let count = aggregate(AggOp::Count, None, &by(&[]), input, 3).unwrap();
        assert_eq!(count[0].points, vec![(0, 2.0), (1, 1.0), (2, 1.0)]);
    }

    #[test]
    fn avg_of_huge_values_does_not_overflow() {
        let input = vec![
            s(&[("a", "1")], &[(0, f64::MAX)]),
            s(&[("a", "2")], &[(0, f64::MAX)]),
        ];
        let avg = aggregate(AggOp::Avg, None, &by(&[]), input, 1).unwrap();
        assert_eq!(avg[0].points, vec![(0, f64::MAX)]);
    }

    #[test]
    fn topk_and_bottomk_keep_labels_and_rank_nan_last() {
        // aggregators.test: topk(3, http_requests) is 800, 700, 600, in that order.
        let top = aggregate(AggOp::Topk, Some(&[3.0]), &by(&[]), requests(), 1).unwrap();
        let got: Vec<f64> = top.iter().map(|s| s.points[0].1).collect();
        assert_eq!(got, vec![800.0, 700.0, 600.0]);
        assert_eq!(
            top[0].labels[0],
            ("__name__".to_owned(), "http_requests".to_owned())
        );
        // topk by (group) (1, ...): the largest of each group.
        let per = aggregate(AggOp::Topk, Some(&[1.0]), &by(&["group"]), requests(), 1).unwrap();
        let got: Vec<f64> = per.iter().map(|s| s.points[0].1).collect();
        assert_eq!(got, vec![600.0, 800.0]);
        let bottom = aggregate(AggOp::Bottomk, Some(&[2.0]), &by(&[]), requests(), 1).unwrap();
        let got: Vec<f64> = bottom.iter().map(|s| s.points[0].1).collect();
        assert_eq!(got, vec![100.0, 200.0]);
        let nan = vec![
            s(&[("a", "1")], &[(0, f64::NAN)]),
            s(&[("a", "2")], &[(0, 1.0)]),
        ];
        for op in [AggOp::Topk, AggOp::Bottomk] {
            let out = aggregate(op, Some(&[1.0]), &by(&[]), nan.clone(), 1).unwrap();
            assert_eq!(out[0].points, vec![(0, 1.0)]);
        }
        // k < 1 selects nothing; k beyond the group takes all; NaN k fails.
        assert!(
            aggregate(AggOp::Topk, Some(&[0.5]), &by(&[]), requests(), 1)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            aggregate(AggOp::Topk, Some(&[99.0]), &by(&[]), requests(), 1)
                .unwrap()
                .len(),
            8
        );
        assert!(aggregate(AggOp::Topk, Some(&[f64::NAN]), &by(&[]), requests(), 1).is_err());
    }
}
