//! Downsampling one series (OpenTSDB docs: `user_guide/query/downsampling`): spec parsing,
//! epoch-aligned fixed buckets, calendar buckets in a time zone, the `all` interval, and the fill
//! policies.
//!
//! Strata differences (`docs/compat.md`): only points inside `[start, end]` (inclusive) are
//! aggregated, for every interval including `all` (`docs/compat.md` #8). Kept from OpenTSDB:
//! buckets align to the epoch (or to civil time for calendar intervals), a bucket is reported at
//! its start, and a bucket starting before `start` is not emitted, so the points of a partial first
//! bucket are dropped (OpenTSDB docs: `user_guide/query/downsampling`).

use chrono_tz::Tz;

use strata_tsdb::{PointColumns, Value, ValueColumn};

use crate::aggregator::Aggregator;
use crate::error::{Error, Result};
use crate::num::Point;
use crate::time::parse_duration;

mod buckets;
mod fixed;

use buckets::{Bucket, Buckets};
pub(crate) use fixed::edge_buckets;
use fixed::{FixedFold, fold_all};

/// What an empty bucket becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillPolicy {
    /// Empty buckets are absent (the default).
    None,
    /// Empty buckets are NaN, serialized as `"NaN"`.
    Nan,
    /// Empty buckets are NaN, serialized as `null`.
    Null,
    /// Empty buckets are 0.0.
    Zero,
    /// Parses, but evaluating it fails (as in OpenTSDB 2.4).
    Scalar,
}

impl FillPolicy {
    /// Parses a fill policy name, case-insensitively.
    pub fn parse(name: &str) -> Result<FillPolicy> {
        match name.to_ascii_lowercase().as_str() {
            "none" => Ok(FillPolicy::None),
            "nan" => Ok(FillPolicy::Nan),
            "null" => Ok(FillPolicy::Null),
            "zero" => Ok(FillPolicy::Zero),
            "scalar" => Ok(FillPolicy::Scalar),
            _ => Err(Error::InvalidDownsample {
                spec: name.to_owned(),
                message: format!("Unrecognized fill policy: {name}"),
            }),
        }
    }
}

/// A civil-time unit for calendar downsampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CalendarUnit {
    /// Seconds.
    Second,
    /// Minutes.
    Minute,
    /// Hours.
    Hour,
    /// Days (local midnight).
    Day,
    /// Weeks starting on Sunday (OpenTSDB's en_US locale).
    Week,
    /// Months (`n`).
    Month,
    /// Years.
    Year,
}

/// The bucket width of a downsample spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    /// Fixed width in ms, buckets aligned to the epoch.
    Fixed(i64),
    /// One bucket over the whole query range (`0all`).
    All,
    /// `count` civil units in the query's time zone (`1dc`, or `useCalendar`).
    Calendar {
        /// Number of units per bucket (> 0).
        count: u32,
        /// The unit.
        unit: CalendarUnit,
    },
}

impl Interval {
    /// The nominal bucket width in ms (`n` = 30 days, `y` = 365 days); `None` for `all`.
    pub fn nominal_ms(self) -> Option<i64> {
        match self {
            Interval::Fixed(ms) => Some(ms),
            Interval::All => None,
            Interval::Calendar { count, unit } => {
                let unit_s: i64 = match unit {
                    CalendarUnit::Second => 1,
                    CalendarUnit::Minute => 60,
                    CalendarUnit::Hour => 3600,
                    CalendarUnit::Day => 86_400,
                    CalendarUnit::Week => 7 * 86_400,
                    CalendarUnit::Month => 30 * 86_400,
                    CalendarUnit::Year => 365 * 86_400,
                };
                Some(i64::from(count).saturating_mul(unit_s * 1000))
            }
        }
    }
}

/// A parsed downsample specifier `<interval>[c]-<function>[-<fill>]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownsampleSpec {
    /// Bucket width.
    pub interval: Interval,
    /// Function applied within a bucket (never `none`).
    pub function: Aggregator,
    /// Fill policy for empty buckets.
    pub fill: FillPolicy,
}

/// The most buckets a fill policy may emit for one series. A fill emits every bucket of the range,
/// so a tiny interval over a long range (`1ms-sum-zero` over a year) would otherwise allocate
/// without bound; 10 million doubles is far beyond any useful graph.
pub(crate) const MAX_FILL_BUCKETS: i64 = 10_000_000;

fn spec_error(spec: &str, message: String) -> Error {
    Error::InvalidDownsample {
        spec: spec.to_owned(),
        message,
    }
}

impl DownsampleSpec {
    /// Parses a specifier. `use_calendar` is JSON `useCalendar`, which makes a fixed interval
    /// calendar-aligned as the `c` suffix does.
    pub fn parse(spec: &str, use_calendar: bool) -> Result<DownsampleSpec> {
        let parts: Vec<&str> = spec.split('-').collect();
        match parts.len() {
            0 | 1 => {
                return Err(spec_error(
                    spec,
                    format!(
                        "Invalid downsampling specifier '{spec}': must provide at least interval \
                         and function"
                    ),
                ));
            }
            2 | 3 => {}
            _ => {
                return Err(spec_error(
                    spec,
                    format!(
                        "Invalid downsampling specifier '{spec}': must consist of interval, \
                         function, and optional fill policy"
                    ),
                ));
            }
        }
        let interval = parse_interval(parts[0], use_calendar)?;
        let function = match parts[1] {
            "none" => {
                return Err(spec_error(
                    spec,
                    "cannot use the NONE aggregator for downsampling".to_owned(),
                ));
            }
            name => Aggregator::from_name(name)
                .map_err(|_| spec_error(spec, format!("No such downsampling function: {name}")))?,
        };
        let fill = match parts.get(2) {
            Some(p) => FillPolicy::parse(p)?,
            None => FillPolicy::None,
        };
        Ok(DownsampleSpec {
            interval,
            function,
            fill,
        })
    }
}

fn parse_interval(text: &str, use_calendar: bool) -> Result<Interval> {
    if text.contains("all") {
        return Ok(Interval::All);
    }
    let (duration, calendar) = match text.strip_suffix('c') {
        Some(rest) => (rest, true),
        None => (text, use_calendar),
    };
    let ms = parse_duration(duration)?;
    let is_ms = duration.ends_with("ms");
    if !calendar || is_ms {
        return Ok(Interval::Fixed(ms));
    }
    let digits = duration.bytes().take_while(u8::is_ascii_digit).count();
    let count: u32 = duration[..digits]
        .parse()
        .map_err(|_| Error::InvalidDuration {
            input: duration.to_owned(),
            message: format!("Invalid duration (number): {duration}"),
        })?;
    let unit = match duration.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('s') => CalendarUnit::Second,
        Some('m') => CalendarUnit::Minute,
        Some('h') => CalendarUnit::Hour,
        Some('d') => CalendarUnit::Day,
        Some('w') => CalendarUnit::Week,
        Some('n') => CalendarUnit::Month,
        _ => CalendarUnit::Year,
    };
    Ok(Interval::Calendar { count, unit })
}

/// Downsamples one series (points sorted by time) over the query range `[start, end]` (ms).
///
/// A bucket's value is what [`Aggregator::apply_nums`] gives over its points, so integers stay
/// exact (`docs/compat.md` #14). Buckets are reported at their start; only bucket starts in
/// `[start, end]` are emitted, and only points in `[start, end]` are aggregated. With a fill policy
/// other than `none`, every bucket start in `[start, end]` is emitted, empty ones as NaN (`nan`,
/// `null`) or zero (`zero`: `0` in a series of integers, else `0.0`), provided the series has at
/// least one point at all. `all` emits one
/// value at `start` when some point is in range. `tz` is used by calendar intervals only.
pub fn downsample(
    points: &[Point],
    spec: &DownsampleSpec,
    start: i64,
    end: i64,
    tz: Tz,
) -> Result<Vec<Point>> {
    let mut out = Vec::new();
    downsample_into(
        points.iter().copied(),
        spec,
        (start, end),
        tz,
        &mut Vec::new(),
        &mut out,
    )?;
    Ok(out)
}

/// [`downsample`] over `(ts, value)` pairs sorted by time, appending to `out` and using `values`
/// as scratch space, so a caller can run it over many series without allocating per series or
/// per bucket.
pub(crate) fn downsample_into(
    points: impl Iterator<Item = (i64, Value)>,
    spec: &DownsampleSpec,
    (start, end): (i64, i64),
    tz: Tz,
    values: &mut Vec<Value>,
    out: &mut Vec<Point>,
) -> Result<()> {
    let fill_value = match spec.fill {
        FillPolicy::None => None,
        FillPolicy::Nan | FillPolicy::Null => Some(Value::Float(f64::NAN)),
        FillPolicy::Zero => Some(Value::Float(0.0)),
        FillPolicy::Scalar => return Err(Error::UnsupportedFill),
    };
    let (mut any_point, mut all_int) = (false, true);
    let in_range = points
        .inspect(|(_, v)| {
            any_point = true;
            all_int &= v.is_int();
        })
        .filter(|(ts, _)| (start..=end).contains(ts));
    values.clear();
    let buckets = match spec.interval {
        Interval::All => {
            let mut acc = Bucket::new(spec.function);
            for (_, v) in in_range {
                acc.push(v, values);
            }
            if acc.any {
                out.push((start, acc.finish(values)));
            }
            return Ok(());
        }
        Interval::Fixed(width) => Buckets::Fixed(width.max(1)),
        Interval::Calendar { count, unit } => Buckets::Calendar { count, unit, tz },
    };
    if end < start {
        return Ok(());
    }
    let mut first = buckets.floor(start);
    if first < start {
        first = buckets.next(first);
    }
    let mut acc = Bucket::new(spec.function);
    // Without a fill, buckets go straight to `out`; with one, to `present` and are merged with
    // the empty buckets below.
    let mut present: Vec<Point> = Vec::new();
    let sink = if fill_value.is_some() {
        &mut present
    } else {
        &mut *out
    };
    // The open bucket: its start, and where the next one starts for fixed widths (the start
    // itself for calendar ones, whose floors are always computed), so a point in the same fixed
    // bucket needs no floor.
    let mut open: Option<(i64, i64)> = None;
    for (ts, v) in in_range {
        if let Some((b, next)) = open
            && ts >= b
            && ts < next
        {
            acc.push(v, values);
            continue;
        }
        let b = buckets.floor(ts);
        if b < first {
            continue;
        }
        if let Some((ob, _)) = open {
            if ob == b {
                acc.push(v, values);
                continue;
            }
            sink.push((ob, acc.finish(values)));
        }
        values.clear();
        acc.reset();
        acc.push(v, values);
        let next = match buckets {
            Buckets::Fixed(width) => b.saturating_add(width),
            Buckets::Calendar { .. } => b,
        };
        open = Some((b, next));
    }
    if let Some((ob, _)) = open {
        sink.push((ob, acc.finish(values)));
    }
    let Some(mut fill) = fill_value else {
        return Ok(());
    };
    if !any_point {
        return Ok(());
    }
    // The zero of an integer series is an integer, so its buckets keep one type.
    if spec.fill == FillPolicy::Zero && all_int {
        fill = Value::Int(0);
    }
    // Refuse before allocating (nominal widths; calendar months and DST days vary a little).
    if let Some(width) = spec.interval.nominal_ms().filter(|w| *w > 0) {
        let count = end.saturating_sub(first) / width + 1;
        if count > MAX_FILL_BUCKETS {
            return Err(Error::TooManyBuckets {
                buckets: count,
                limit: MAX_FILL_BUCKETS,
            });
        }
    }
    let base = out.len();
    let mut present = present.into_iter().peekable();
    let mut b = first;
    while b <= end {
        if (out.len() - base) as i64 >= MAX_FILL_BUCKETS {
            return Err(Error::TooManyBuckets {
                buckets: MAX_FILL_BUCKETS + 1,
                limit: MAX_FILL_BUCKETS,
            });
        }
        // Calendar floors may fall off the stepped grid (weeks, years with count > 1): emit them.
        while let Some(bucket) = present.next_if(|(pb, _)| *pb < b) {
            out.push(bucket);
        }
        match present.next_if(|(pb, _)| *pb == b) {
            Some(bucket) => out.push(bucket),
            None => out.push((b, fill)),
        }
        let next = buckets.next(b);
        if next <= b {
            break;
        }
        b = next;
    }
    out.extend(present);
    Ok(())
}

/// [`downsample_into`] for `all` with a function that folds as it goes (sum, zimsum, pfsum,
/// min, mimmin, max, mimmax, count, avg, first, last; fill policies do not apply to `all`), in
/// one loop over the stored points. Returns false, having done nothing, for any other spec.
/// Gives exactly what [`downsample_into`] gives (a test compares them). Fixed intervals have
/// their own fast path over columns, [`downsample_columns`].
pub(crate) fn downsample_all_folding<T>(
    points: &[T],
    at: impl Fn(&T) -> (i64, Value),
    spec: &DownsampleSpec,
    range: (i64, i64),
    out: &mut Vec<Point>,
) -> bool {
    spec.interval == Interval::All && fold_all(points, &at, Bucket::new(spec.function), range, out)
}

/// [`downsample_into`] for the common fixed-interval cases, over a series' points as columns
/// and in one tight loop per bucket: no fill, and a function that folds as it goes (sum,
/// zimsum, pfsum, min, mimmin, max, mimmax, count, avg). The buckets beside the range that
/// [`edge_buckets`] gives are placed around the emitted ones. A series that mixes integers and
/// doubles goes through those two as pairs. Returns false, having done nothing, for any other
/// spec. Gives exactly what those two give (a test compares them); it exists because the
/// generic path's work per point is most of a long query's time.
pub(crate) fn downsample_columns(
    cols: &PointColumns,
    spec: &DownsampleSpec,
    (start, end): (i64, i64),
    tz: Tz,
    out: &mut Vec<Point>,
) -> Result<bool> {
    let Some(fixed) = FixedFold::of(spec, start) else {
        return Ok(false);
    };
    let ts = cols.ts();
    if let ValueColumn::Mixed(v) = cols.values() {
        let points: Vec<Point> = ts.iter().zip(v).map(|(t, v)| (*t, *v)).collect();
        let mut values = Vec::new();
        let (before, after) = edge_buckets(&points, |p| *p, spec, (start, end), tz, &mut values);
        out.extend(before);
        downsample_into(
            points.iter().copied(),
            spec,
            (start, end),
            tz,
            &mut values,
            out,
        )?;
        out.extend(after);
        return Ok(true);
    }
    let lo = ts.partition_point(|&t| t < fixed.first);
    let hi = ts.partition_point(|&t| t <= end).max(lo);
    // The edge buckets only look at points outside the emitted buckets: those alone give
    // them.
    let outside: Vec<Point> = (0..lo)
        .chain(hi..ts.len())
        .filter_map(|i| cols.get(i))
        .collect();
    let (before, after) = edge_buckets(&outside, |p| *p, spec, (start, end), tz, &mut Vec::new());
    // Room for every bucket at once (one per interval that has points, and the two edges):
    // grown bucket by bucket, the vector's reallocations cost more than the folding itself.
    let spanned = ts[lo..hi].last().map_or(0, |&t| {
        usize::try_from(t.saturating_sub(fixed.first) / fixed.width)
            .map_or(usize::MAX, |n| n.saturating_add(1))
    });
    out.reserve(spanned.min(hi - lo).saturating_add(2));
    out.extend(before);
    if end >= start {
        let ts = &ts[lo..hi];
        let at = |i: usize| ts[i];
        match cols.values() {
            ValueColumn::Ints(v) => fixed.fold_ints(&at, &v[lo..hi], out),
            ValueColumn::Floats(v) => fixed.fold_floats(&at, &v[lo..hi], out),
            ValueColumn::Mixed(_) => {}
        }
    }
    out.extend(after);
    Ok(true)
}

/// Whether [`downsample_columns`] takes `spec`.
pub(crate) fn folds_by_columns(spec: &DownsampleSpec) -> bool {
    FixedFold::of(spec, 0).is_some()
}

#[cfg(test)]
#[path = "downsample/tests.rs"]
mod tests;
