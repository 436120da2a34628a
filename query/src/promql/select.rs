//! Selectors: from label matchers to series ids through the series index, and from one read
//! of each series to its value at every step.
//!
//! A matcher becomes a set of series by bitmap operations on the index's postings. Prometheus
//! reads an absent label as the empty value, so a matcher that accepts `""` also takes every
//! series without the label. Each series is read once, over the union of the windows of all
//! steps, and evaluated at every step as soon as it is decoded; large reads are split over
//! the cores like `/api/query`'s.

use roaring::RoaringBitmap;
use strata_tsdb::{Filter, FilterKind, Tsdb, UidKind, ValueColumn};

use super::eval::{Evaluator, Labels, RawSeries, StepSeries};
use super::functions::{Sample, range_function};
use super::names::{prom_name, stored_names};
use super::plan::{LabelMatcher, METRIC_NAME, MatchKind, RangeFunc, Selector};
use crate::error::{Error, Result};

/// A selector to read, with the evaluation it belongs to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SelectorRead<'a> {
    pub(crate) ev: &'a Evaluator<'a>,
    pub(crate) sel: &'a Selector,
}

/// Reads with fewer series-hours than this stay on the calling thread (as in `exec`).
const PARALLEL_MIN_SERIES_HOURS: u64 = 64;

/// The ids of the series that pass every matcher.
pub(crate) fn find_series(tsdb: &Tsdb, matchers: &[LabelMatcher]) -> Result<RoaringBitmap> {
    let name_matchers: Vec<&LabelMatcher> =
        matchers.iter().filter(|m| m.name == METRIC_NAME).collect();
    let metrics: Vec<String> = match name_matchers
        .iter()
        .find(|m| matches!(m.op, MatchKind::Equal))
    {
        Some(m) => stored_names(&m.value).iter().map(str::to_owned).collect(),
        None => tsdb.suggest(UidKind::Metric, "", usize::MAX),
    };
    let mut out = RoaringBitmap::new();
    'metrics: for metric in metrics {
        let shown = prom_name(&metric);
        if !name_matchers.iter().all(|m| m.matches(&shown)) {
            continue;
        }
        let Some(mut ids) = ids_of(tsdb, &metric, &[])? else {
            continue;
        };
        for m in matchers.iter().filter(|m| m.name != METRIC_NAME) {
            if ids.is_empty() {
                continue 'metrics;
            }
            ids &= matcher_ids(tsdb, &metric, m, &ids)?;
        }
        out |= ids;
    }
    Ok(out)
}

/// The series of `metric` that pass `filters`; `None` for an unknown metric or tag key.
fn ids_of(tsdb: &Tsdb, metric: &str, filters: &[Filter]) -> Result<Option<RoaringBitmap>> {
    match tsdb.find_series(metric, filters) {
        Ok(ids) => Ok(Some(ids)),
        Err(strata_tsdb::Error::NoSuchName { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The series among `all` (the series of `metric`) that pass matcher `m`. Stored values are
/// never empty, so a series passes `""` exactly when it lacks the key; the series with the
/// key are looked up only when that decides something.
fn matcher_ids(
    tsdb: &Tsdb,
    metric: &str,
    m: &LabelMatcher,
    all: &RoaringBitmap,
) -> Result<RoaringBitmap> {
    let keys = stored_names(&m.name);
    // The series that have the key and pass `filter(key)`, over every stored form of the key.
    let find = |filter: &dyn Fn(&str) -> Result<Option<Filter>>| -> Result<RoaringBitmap> {
        let mut out = RoaringBitmap::new();
        for key in keys.iter() {
            if let Some(f) = filter(key)? {
                out |= ids_of(tsdb, metric, &[f])?.unwrap_or_default();
            }
        }
        Ok(out)
    };
    let with_key = || find(&|key| Ok(Some(Filter::new(FilterKind::Wildcard, key, "*", false)?)));
    // The series whose value matches the positive form of the matcher (`=`, `=~`).
    let positive = || -> Result<RoaringBitmap> {
        match &m.op {
            MatchKind::Equal | MatchKind::NotEqual => {
                let values = stored_names(&m.value);
                find(&|key| Ok(Some(literal_filter(key, values.iter())?)))
            }
            MatchKind::Regex(_) | MatchKind::NotRegex(_) => find(&|key| regex_filter(tsdb, key, m)),
        }
    };
    let empty_value = m.value.is_empty();
    Ok(match &m.op {
        MatchKind::Equal if empty_value => all - &with_key()?,
        MatchKind::NotEqual if empty_value => with_key()?,
        MatchKind::Equal => positive()?,
        MatchKind::NotEqual => all - &positive()?,
        MatchKind::Regex(_) if m.matches("") => positive()? | (all - &with_key()?),
        MatchKind::Regex(_) => positive()?,
        // `!~` passing "" means the regex does not match "": absent keys pass too.
        MatchKind::NotRegex(_) if m.matches("") => all - &positive()?,
        MatchKind::NotRegex(_) => &with_key()? - &positive()?,
    })
}

/// A filter on `key` that passes exactly the stored `values`.
fn literal_filter<'v>(key: &str, values: impl Iterator<Item = &'v str>) -> Result<Filter> {
    let values: Vec<&str> = values.collect();
    // A literal_or filter splits its expression at `|`; a value holding one needs a regex.
    let filter = if values.iter().any(|v| v.contains('|')) {
        let alternatives: Vec<String> = values.iter().map(|v| regex::escape(v)).collect();
        Filter::new(
            FilterKind::Regexp,
            key,
            &format!("^(?:{})$", alternatives.join("|")),
            false,
        )
    } else {
        Filter::new(FilterKind::LiteralOr, key, &values.join("|"), false)
    };
    Ok(filter?)
}

/// A filter on `key` that passes the stored values whose PromQL value matches the positive
/// form of regex matcher `m`; `None` when no value does. The regex runs in the index on the
/// stored values as they are unless one of them shows differently in PromQL (an escaped
/// value): then on the PromQL value of each of the key's values.
fn regex_filter(tsdb: &Tsdb, key: &str, m: &LabelMatcher) -> Result<Option<Filter>> {
    let (MatchKind::Regex(r) | MatchKind::NotRegex(r)) = &m.op else {
        return Ok(None);
    };
    let values = tsdb.tag_values(key)?;
    let mut matching = Vec::new();
    let mut escaped = false;
    for v in &values {
        let shown = prom_name(v);
        escaped |= matches!(shown, std::borrow::Cow::Owned(_));
        if r.is_match(&shown) {
            matching.push(v.as_str());
        }
    }
    if !escaped {
        return Ok(Some(Filter::new(
            FilterKind::Regexp,
            key,
            r.as_str(),
            false,
        )?));
    }
    if matching.is_empty() {
        return Ok(None);
    }
    literal_filter(key, matching.into_iter()).map(Some)
}

/// A series' labels: its metric as `__name__`, then its tags, sorted.
fn labels_of(metric: &str, tags: &[(String, String)]) -> Labels {
    let mut labels = Vec::with_capacity(tags.len() + 1);
    labels.push((METRIC_NAME.to_owned(), prom_name(metric).into_owned()));
    labels.extend(
        tags.iter()
            .map(|(k, v)| (prom_name(k).into_owned(), prom_name(v).into_owned())),
    );
    labels.sort();
    labels
}

impl SelectorRead<'_> {
    /// The reference time (offset applied) of step `k`.
    fn ref_time(&self, k: usize) -> i64 {
        self.ev.selector_time(self.sel.at, k) - self.sel.offset_ms
    }

    /// The time span every step's window falls in: `[first ref - span + 1, last ref]`.
    fn read_window(&self, span_ms: i64) -> (i64, i64) {
        let n = self.ev.steps.count;
        let (a, b) = (self.ref_time(0), self.ref_time(n.saturating_sub(1)));
        let (lo, hi) = (a.min(b), a.max(b));
        (lo.saturating_sub(span_ms).saturating_add(1), hi)
    }

    /// Finds the series, reads them over `[start, end]`, and maps each with `f` (series with
    /// nothing to give are left out), on several threads for a large read.
    fn read_each<T: Send>(
        &self,
        (start, end): (i64, i64),
        f: &(dyn Fn(&Labels, &[Sample]) -> Option<T> + Sync),
    ) -> Result<Vec<T>> {
        let ev = self.ev;
        let ids = find_series(ev.tsdb, &self.sel.matchers)?;
        if ev.limits.max_series > 0 && ids.len() > ev.limits.max_series as u64 {
            return Err(Error::LimitExceeded(format!(
                "the query selects {} series, more than the limit of {}",
                ids.len(),
                ev.limits.max_series
            )));
        }
        ev.deadline.check()?;
        if ids.is_empty() || start > end {
            return Ok(Vec::new());
        }
        let hours = u64::try_from((end - start) / 3_600_000).unwrap_or(0) + 1;
        let series_hours = ids.len().saturating_mul(hours);
        let read_part = |part: &RoaringBitmap| -> Result<Vec<T>> {
            let mut out = Vec::new();
            let mut samples: Vec<Sample> = Vec::new();
            ev.tsdb.read_columns_each(
                &strata_tsdb::ReadRequest::ids(part, start, end).in_request(series_hours),
                |s| {
                    ev.deadline.check()?;
                    samples.clear();
                    let ts = s.points.ts();
                    match s.points.values() {
                        ValueColumn::Floats(v) => {
                            samples.extend(ts.iter().copied().zip(v.iter().copied()));
                        }
                        // PromQL has only floats: integers become the nearest float.
                        ValueColumn::Ints(v) => {
                            samples.extend(ts.iter().copied().zip(v.iter().map(|i| *i as f64)));
                        }
                        ValueColumn::Mixed(v) => {
                            samples.extend(ts.iter().copied().zip(v.iter().map(|x| x.as_f64())));
                        }
                    }
                    // A row read may hold points just outside the range.
                    let lo = samples.partition_point(|p| p.0 < start);
                    let hi = samples.partition_point(|p| p.0 <= end);
                    if lo < hi {
                        let labels = labels_of(&s.metric, &s.tags);
                        out.extend(f(&labels, &samples[lo..hi]));
                    }
                    Ok::<(), Error>(())
                },
            )?;
            Ok(out)
        };
        let threads = match ev.limits.threads {
            0 => *CORES,
            n => n.min(*CORES),
        };
        if series_hours < PARALLEL_MIN_SERIES_HOURS || threads < 2 || ids.len() < 2 {
            return read_part(&ids);
        }
        let parts = ev.tsdb.split_for_read(&ids, threads);
        crate::exec::read_parts(&parts, read_part)
    }
}

/// The cores this process may use, read once.
static CORES: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
});

/// An instant selector at every step: each series' newest sample in
/// `(ref - lookback, ref]`.
pub(crate) fn read_instant(r: &SelectorRead<'_>) -> Result<Vec<StepSeries>> {
    let n = r.ev.steps.count;
    let lookback = r.ev.lookback_ms;
    let refs: Vec<i64> = (0..n).map(|k| r.ref_time(k)).collect();
    let at_each = |labels: &Labels, samples: &[Sample]| {
        let mut points = Vec::new();
        for (k, &t) in refs.iter().enumerate() {
            let i = samples.partition_point(|p| p.0 <= t);
            if let Some(p) = i.checked_sub(1).map(|i| samples[i])
                && p.0 > t - lookback
            {
                points.push((k as u32, p.1));
            }
        }
        (!points.is_empty()).then(|| StepSeries {
            labels: labels.clone(),
            points,
        })
    };
    r.read_each(r.read_window(lookback), &at_each)
}

/// A range function at every step over each series' window `(ref - range, ref]`.
pub(crate) fn read_range_function(
    r: &SelectorRead<'_>,
    func: RangeFunc,
) -> Result<Vec<StepSeries>> {
    let n = r.ev.steps.count;
    let range = r.sel.range_ms;
    let refs: Vec<i64> = (0..n).map(|k| r.ref_time(k)).collect();
    let each = |labels: &Labels, samples: &[Sample]| {
        let mut points = Vec::new();
        for_each_window(samples, &refs, range, |k, window| {
            if let Some(v) = range_function(func, window, refs[k], range) {
                points.push((k as u32, v));
            }
        });
        if points.is_empty() {
            return None;
        }
        let mut labels = labels.clone();
        if !func.keeps_name() {
            labels.retain(|(k, _)| k != METRIC_NAME);
        }
        Some(StepSeries { labels, points })
    };
    r.read_each(r.read_window(range), &each)
}

/// Calls `f(k, window)` for each reference time `refs[k]` with the samples in
/// `(refs[k] - range, refs[k]]`. One pass over `samples` while the times ascend (steps do,
/// and `@` holds them still), a search per time otherwise.
pub(crate) fn for_each_window(
    samples: &[Sample],
    refs: &[i64],
    range: i64,
    mut f: impl FnMut(usize, &[Sample]),
) {
    let monotonic = refs.windows(2).all(|w| w[0] <= w[1]);
    let (mut lo, mut hi) = (0usize, 0usize);
    for (k, &t) in refs.iter().enumerate() {
        if monotonic {
            while hi < samples.len() && samples[hi].0 <= t {
                hi += 1;
            }
            while lo < hi && samples[lo].0 <= t - range {
                lo += 1;
            }
        } else {
            hi = samples.partition_point(|p| p.0 <= t);
            lo = samples.partition_point(|p| p.0 <= t - range).min(hi);
        }
        f(k, &samples[lo..hi]);
    }
}

/// A range selector as the result of an instant query: each series' raw samples in
/// `(ref - range, ref]`.
pub(crate) fn read_matrix(r: &SelectorRead<'_>) -> Result<Vec<RawSeries>> {
    let t = r.ref_time(0);
    let range = r.sel.range_ms;
    let each = |labels: &Labels, samples: &[Sample]| {
        let lo = samples.partition_point(|p| p.0 <= t - range);
        let hi = samples.partition_point(|p| p.0 <= t);
        (lo < hi).then(|| RawSeries {
            labels: labels.clone(),
            points: samples[lo..hi].to_vec(),
        })
    };
    let mut out = r.read_each(r.read_window(range), &each)?;
    out.sort_by(|a, b| a.labels.cmp(&b.labels));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The one-pass windows are the brute-force filter of each window.
        #[test]
        fn windows_are_the_samples_in_each_range(
            gaps in proptest::collection::vec(1i64..5_000, 0..200),
            start in -10_000i64..10_000,
            step in 1i64..7_000,
            steps in 1usize..60,
            range in 1i64..30_000,
            shuffle in any::<bool>(),
        ) {
            let mut t = 0;
            let samples: Vec<Sample> = gaps.iter().map(|g| { t += g; (t, t as f64) }).collect();
            let mut refs: Vec<i64> = (0..steps).map(|k| start + k as i64 * step).collect();
            if shuffle {
                refs.reverse();
            }
            let mut got = Vec::new();
            for_each_window(&samples, &refs, range, |k, w| got.push((k, w.to_vec())));
            let want: Vec<(usize, Vec<Sample>)> = refs
                .iter()
                .enumerate()
                .map(|(k, &r)| {
                    (k, samples.iter().copied().filter(|s| s.0 > r - range && s.0 <= r).collect())
                })
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
