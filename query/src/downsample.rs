//! Downsampling one series (§e.4): spec parsing, epoch-aligned fixed buckets, calendar buckets in a
//! time zone, the `all` interval, and the fill policies.
//!
//! Strata differences (spec README exceptions): only points inside `[start, end]` (inclusive) are
//! aggregated, for every interval including `all` (#8). Kept from OpenTSDB: buckets align to the epoch
//! (or to civil time for calendar intervals), a bucket is reported at its start, and a bucket starting
//! before `start` is not emitted, so the points of a partial first bucket are dropped (§e.4 "edges").

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike};
use chrono_tz::Tz;

use strata_tsdb::{PointColumns, Value, ValueColumn};

use crate::aggregator::Aggregator;
use crate::error::{Error, Result};
use crate::num::{ExactSum, Extreme, Num, Point};
use crate::time::{local_to_utc_ms, parse_duration};

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

/// Bucket arithmetic: where the bucket holding `ts` starts, and where the next one starts.
#[derive(Debug, Clone, Copy)]
enum Buckets {
    Fixed(i64),
    Calendar {
        count: u32,
        unit: CalendarUnit,
        tz: Tz,
    },
}

impl Buckets {
    fn floor(self, ts: i64) -> i64 {
        match self {
            Buckets::Fixed(width) => ts.saturating_sub(ts.rem_euclid(width)),
            Buckets::Calendar { count, unit, tz } => {
                let local = tz
                    .timestamp_millis_opt(ts)
                    .earliest()
                    .map(|d| d.naive_local());
                let Some((l, start)) =
                    local.and_then(|l| Some((l, calendar_floor(l, count, unit)?)))
                else {
                    return ts;
                };
                // Keep the point's own UTC offset when the bucket start has it too, so a point in
                // the repeated hour of a DST fall-back lands in its own bucket.
                let same_offset = ts.saturating_sub((l - start).num_milliseconds());
                let local_of = |t: i64| {
                    tz.timestamp_millis_opt(t)
                        .earliest()
                        .map(|d| d.naive_local())
                };
                if local_of(same_offset) == Some(start) {
                    same_offset
                } else {
                    local_to_utc_ms(start, tz)
                }
            }
        }
    }

    /// The start of the bucket after the one starting at `start` (always > `start`).
    fn next(self, start: i64) -> i64 {
        let candidate = match self {
            Buckets::Fixed(width) => return start.saturating_add(width),
            Buckets::Calendar { count, unit, tz } => {
                let n = i64::from(count);
                let fixed = |secs: i64| start.saturating_add(secs.saturating_mul(n * 1000));
                let local = tz
                    .timestamp_millis_opt(start)
                    .earliest()
                    .map(|d| d.naive_local());
                let civil = |f: &dyn Fn(NaiveDateTime) -> Option<NaiveDateTime>| {
                    local
                        .and_then(f)
                        .map_or(i64::MAX, |l| local_to_utc_ms(l, tz))
                };
                match unit {
                    CalendarUnit::Second => fixed(1),
                    CalendarUnit::Minute => fixed(60),
                    CalendarUnit::Hour => fixed(3600),
                    CalendarUnit::Day => civil(&|l| l.checked_add_signed(Duration::days(n))),
                    CalendarUnit::Week => civil(&|l| l.checked_add_signed(Duration::weeks(n))),
                    CalendarUnit::Month => {
                        civil(&|l| l.checked_add_months(chrono::Months::new(count)))
                    }
                    CalendarUnit::Year => civil(&|l| {
                        l.checked_add_months(chrono::Months::new(count.saturating_mul(12)))
                    }),
                }
            }
        };
        // Re-align so a bucket count that does not divide its parent restarts at the parent.
        let aligned = self.floor(candidate);
        if aligned > start { aligned } else { candidate }
    }
}

/// Floors a civil time to its calendar bucket, following OpenTSDB's `previousInterval`: buckets
/// are stepped `count` units from a base, and the base is the top of the parent unit when `count`
/// divides it (60 s, 60 min, 24 h, one day) and otherwise the next larger one (seconds from the top
/// of the hour, minutes from the top of the day, hours from the first of the month, days from Jan 1).
/// Weeks start on Sunday (en_US) and, as in OpenTSDB, always floor to the current week; months count
/// from January; years floor to Jan 1 of the same year whatever the count.
fn calendar_floor(l: NaiveDateTime, count: u32, unit: CalendarUnit) -> Option<NaiveDateTime> {
    let n = count.max(1);
    let day = l.date();
    let midnight = day.and_hms_opt(0, 0, 0)?;
    let floor = |v: u32| v - v % n;
    let out = match unit {
        CalendarUnit::Second if 60 % n == 0 => {
            day.and_hms_opt(l.hour(), l.minute(), floor(l.second()))?
        }
        CalendarUnit::Second => {
            let secs = floor(l.minute() * 60 + l.second());
            day.and_hms_opt(l.hour(), secs / 60, secs % 60)?
        }
        CalendarUnit::Minute if 60 % n == 0 => day.and_hms_opt(l.hour(), floor(l.minute()), 0)?,
        CalendarUnit::Minute => {
            let mins = floor(l.hour() * 60 + l.minute());
            day.and_hms_opt(mins / 60, mins % 60, 0)?
        }
        CalendarUnit::Hour if 24 % n == 0 => day.and_hms_opt(floor(l.hour()), 0, 0)?,
        CalendarUnit::Hour => {
            let hours = floor((l.day() - 1) * 24 + l.hour());
            day.with_day(hours / 24 + 1)?
                .and_hms_opt(hours % 24, 0, 0)?
        }
        CalendarUnit::Day if n == 1 => midnight,
        CalendarUnit::Day => day
            .with_ordinal0(floor(day.ordinal0()))?
            .and_hms_opt(0, 0, 0)?,
        CalendarUnit::Week => {
            let back = i64::from(day.weekday().num_days_from_sunday());
            midnight.checked_sub_signed(Duration::days(back))?
        }
        CalendarUnit::Month => {
            NaiveDate::from_ymd_opt(l.year(), floor(l.month0()) + 1, 1)?.and_hms_opt(0, 0, 0)?
        }
        CalendarUnit::Year => NaiveDate::from_ymd_opt(l.year(), 1, 1)?.and_hms_opt(0, 0, 0)?,
    };
    Some(out)
}

/// One bucket's function, folded point by point where the function allows it (the values are
/// kept in the caller's buffer otherwise). Each fold gives what [`Aggregator::apply_nums`] gives
/// over the bucket's values in the same order, bit for bit.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    function: Aggregator,
    fold: Fold,
    sum: ExactSum,
    extreme: Extreme,
    /// Non-NaN values seen (for `count`), and whether a double was among all values.
    real: u64,
    any_float: bool,
    first: Num,
    last: Num,
    /// Any value seen.
    any: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fold {
    Sum,
    Min,
    Max,
    Count,
    Avg,
    First,
    Last,
    /// Kept in the buffer and given to `apply_nums`.
    Values,
}

impl Fold {
    fn of(function: Aggregator) -> Fold {
        match function {
            Aggregator::Sum | Aggregator::ZimSum | Aggregator::PfSum => Fold::Sum,
            Aggregator::Min | Aggregator::MimMin => Fold::Min,
            Aggregator::Max | Aggregator::MimMax => Fold::Max,
            Aggregator::Count => Fold::Count,
            Aggregator::Avg => Fold::Avg,
            Aggregator::First => Fold::First,
            Aggregator::Last => Fold::Last,
            _ => Fold::Values,
        }
    }
}

impl Bucket {
    fn new(function: Aggregator) -> Bucket {
        let fold = Fold::of(function);
        Bucket {
            function,
            fold,
            sum: ExactSum::default(),
            extreme: Extreme::new(fold == Fold::Max),
            real: 0,
            any_float: false,
            first: Num::Float(f64::NAN),
            last: Num::Float(f64::NAN),
            any: false,
        }
    }

    fn reset(&mut self) {
        *self = Bucket::new(self.function);
    }

    #[inline]
    fn push(&mut self, v: Num, values: &mut Vec<Num>) {
        match self.fold {
            Fold::Values => values.push(v),
            Fold::First => {
                if !self.any {
                    self.first = v;
                }
            }
            Fold::Last => self.last = v,
            Fold::Sum | Fold::Avg => self.sum.add(v),
            Fold::Min | Fold::Max => self.extreme.add(v),
            Fold::Count => {
                self.any_float |= !v.is_int();
                self.real += u64::from(!v.is_nan());
            }
        }
        self.any = true;
    }

    fn finish(&self, values: &[Num]) -> Num {
        match self.fold {
            Fold::Values => self.function.apply_nums(values, false),
            Fold::First if self.any => self.first,
            Fold::Last if self.any => self.last,
            Fold::First | Fold::Last => Num::Float(f64::NAN),
            Fold::Sum => self.sum.sum(),
            Fold::Avg => self.sum.mean(),
            Fold::Min | Fold::Max => self.extreme.value(),
            Fold::Count if self.real == 0 => Num::Float(f64::NAN),
            Fold::Count if self.any_float => Num::Float(self.real as f64),
            Fold::Count => Num::Int(self.real as i64),
        }
    }
}

/// Downsamples one series (points sorted by time) over the query range `[start, end]` (ms).
///
/// A bucket's value is what [`Aggregator::apply_nums`] gives over its points, so integers stay
/// exact (exception #14). Buckets are reported at their start; only bucket starts in
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
    points: impl Iterator<Item = (i64, Num)>,
    spec: &DownsampleSpec,
    (start, end): (i64, i64),
    tz: Tz,
    values: &mut Vec<Num>,
    out: &mut Vec<Point>,
) -> Result<()> {
    let fill_value = match spec.fill {
        FillPolicy::None => None,
        FillPolicy::Nan | FillPolicy::Null => Some(Num::Float(f64::NAN)),
        FillPolicy::Zero => Some(Num::Float(0.0)),
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
        fill = Num::Int(0);
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
    at: impl Fn(&T) -> (i64, Num),
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
/// generic path costs about 2 ns a point, most of a long query's time.
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
        let points: Vec<Point> = ts.iter().zip(v).map(|(t, v)| (*t, to_num(*v))).collect();
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
        .filter_map(|i| cols.get(i).map(|(t, v)| (t, to_num(v))))
        .collect();
    let (before, after) = edge_buckets(&outside, |p| *p, spec, (start, end), tz, &mut Vec::new());
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

/// The query-side value of a stored one.
pub(crate) fn to_num(v: Value) -> Num {
    match v {
        Value::Int(i) => Num::Int(i),
        Value::Float(f) => Num::Float(f),
    }
}

/// Whether [`downsample_columns`] takes `spec`.
pub(crate) fn folds_by_columns(spec: &DownsampleSpec) -> bool {
    FixedFold::of(spec, 0).is_some()
}

/// A fixed-interval downsample that folds each bucket as it goes: no fill, and a sum, zimsum,
/// pfsum, min, mimmin, max, mimmax, count or avg.
#[derive(Debug, Clone, Copy)]
struct FixedFold {
    width: i64,
    fold: Fold,
    /// The first bucket at or after the range's start.
    first: i64,
}

impl FixedFold {
    fn of(spec: &DownsampleSpec, start: i64) -> Option<FixedFold> {
        let fold = Fold::of(spec.function);
        let width = match spec.interval {
            Interval::Fixed(width) if spec.fill == FillPolicy::None => width.max(1),
            _ => return None,
        };
        if !matches!(
            fold,
            Fold::Sum | Fold::Min | Fold::Max | Fold::Count | Fold::Avg
        ) {
            return None;
        }
        let mut first = Buckets::Fixed(width).floor(start);
        if first < start {
            first = first.saturating_add(width);
        }
        Some(FixedFold { width, fold, first })
    }

    /// Folds the doubles `vals` (their times sorted, all in emitted buckets, given by `ts`),
    /// as [`Bucket`] does: in order, NaNs skipped, NaN for a bucket of only NaNs.
    #[inline(always)]
    fn fold_floats(&self, ts: &impl Fn(usize) -> i64, vals: &[f64], out: &mut Vec<Point>) {
        // One loop per fold, so each inner loop is a plain accumulation. Sums and means start
        // from the `-0.0` of `Iterator::sum`, as `Bucket` does.
        let float = |value: Option<f64>| Num::Float(value.unwrap_or(f64::NAN));
        let bucket = |from: usize, to: usize| vals.get(from..to).unwrap_or_default();
        match self.fold {
            Fold::Sum => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let sum = fold_floats(bucket(from, to), -0.0, |a, v| a + v, true).0;
                out.push((b, float(sum)));
            }),
            Fold::Min => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let min = fold_floats(bucket(from, to), f64::INFINITY, f64::min, false).0;
                out.push((b, float(min)));
            }),
            Fold::Max => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let max = fold_floats(bucket(from, to), f64::NEG_INFINITY, f64::max, false).0;
                out.push((b, float(max)));
            }),
            Fold::Count => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let (any, real) = fold_floats(bucket(from, to), 0.0, |a, _| a, false);
                out.push((b, float(any.map(|_| real as f64))));
            }),
            _ => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let (sum, real) = fold_floats(bucket(from, to), -0.0, |a, v| a + v, true);
                out.push((b, float(sum.map(|sum| sum / real as f64))));
            }),
        }
    }

    /// Folds the integers `vals` (their times sorted, all in emitted buckets, given by `ts`)
    /// exactly, as [`Bucket`] does: sums without overflow, integer min, max and count, and a
    /// mean that is an integer only when the division is exact.
    #[inline(always)]
    fn fold_ints(&self, ts: &impl Fn(usize) -> i64, vals: &[i64], out: &mut Vec<Point>) {
        let bucket = |from: usize, to: usize| vals.get(from..to).unwrap_or_default();
        match self.fold {
            Fold::Sum => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                out.push((b, Num::from_i128(int_sum(bucket(from, to)))));
            }),
            Fold::Min => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let min = bucket(from, to).iter().copied().min();
                out.push((b, min.map_or(Num::Float(f64::NAN), Num::Int)));
            }),
            Fold::Max => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let max = bucket(from, to).iter().copied().max();
                out.push((b, max.map_or(Num::Float(f64::NAN), Num::Int)));
            }),
            Fold::Count => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                out.push((b, Num::Int((to - from) as i64)));
            }),
            _ => for_each_bucket(vals.len(), ts, self.width, |b, from, to| {
                let sum = ExactSum {
                    ints: int_sum(bucket(from, to)),
                    n_int: (to - from) as u64,
                    ..ExactSum::default()
                };
                out.push((b, sum.mean()));
            }),
        }
    }
}

/// The `all` bucket of [`downsample_all_folding`]: one bucket at `start` over the points in
/// `[start, end]`, none if there are none, folded by `acc` (a fresh [`Bucket`]); `first` and
/// `last` look at one point only.
fn fold_all<T>(
    points: &[T],
    at: &impl Fn(&T) -> (i64, Num),
    mut acc: Bucket,
    (start, end): (i64, i64),
    out: &mut Vec<Point>,
) -> bool {
    if acc.fold == Fold::Values {
        return false;
    }
    let lo = points.partition_point(|p| at(p).0 < start);
    let hi = points.partition_point(|p| at(p).0 <= end);
    let points = points.get(lo..hi).unwrap_or_default();
    let folded = match acc.fold {
        Fold::First => points.first().map(std::slice::from_ref),
        Fold::Last => points.last().map(std::slice::from_ref),
        _ => Some(points),
    };
    // No value buffer: only `Fold::Values` uses one.
    let mut values = Vec::new();
    for p in folded.unwrap_or_default() {
        acc.push(at(p).1, &mut values);
    }
    if acc.any {
        out.push((start, acc.finish(&values)));
    }
    true
}

/// Calls `f(bucket start, from, to)` for each bucket of the points `0..n` (sorted, all inside
/// the emitted range, given by their times `ts`), with `from..to` the bucket's points. The
/// next point usually falls in the next bucket, so the bucket start is only recomputed (a
/// division) when it does not.
#[inline(always)]
fn for_each_bucket(
    n: usize,
    ts: &impl Fn(usize) -> i64,
    width: i64,
    mut f: impl FnMut(i64, usize, usize),
) {
    let mut i = 0;
    let mut b = i64::MIN;
    // The previous bucket's point count: at a regular interval, the next bucket holds as
    // many, which two probes confirm.
    let mut last_len = 0;
    while i < n {
        let t = ts(i);
        let next = b.saturating_add(width);
        b = if t >= next && t < next.saturating_add(width) {
            next
        } else {
            Buckets::Fixed(width).floor(t)
        };
        let next = b.saturating_add(width);
        let from = i;
        let guess = from + last_len;
        i = if last_len > 0
            && guess <= n
            && ts(guess - 1) < next
            && (guess == n || ts(guess) >= next)
        {
            guess
        } else {
            bucket_end(ts, from, n, next)
        };
        last_len = i - from;
        f(b, from, i);
    }
}

/// The end of the bucket that starts with point `from` (`ts(from) < next`) among the sorted
/// points `0..n`: the first point at or after `next`, found by a galloping search, so that a
/// bucket of `k` points costs about `2 log2 k` probes instead of `k`.
#[inline(always)]
fn bucket_end(ts: &impl Fn(usize) -> i64, from: usize, n: usize, next: i64) -> usize {
    // Every point in `from..lo` is before `next`.
    let mut lo = from + 1;
    let mut step = 1;
    while lo + step <= n && ts(lo + step - 1) < next {
        lo += step;
        step *= 2;
    }
    // The end lies in `lo..=hi`: point `hi` is at or after `next`, or `hi` is `n`.
    let mut hi = (lo + step - 1).min(n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ts(mid) < next {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The non-NaN values of `v` folded with `add` from `init`, and their count; `None` for the
/// fold when there is no such value. With `sums`, `add` is `+`.
#[inline(always)]
fn fold_floats(
    v: &[f64],
    init: f64,
    add: impl Fn(f64, f64) -> f64,
    sums: bool,
) -> (Option<f64>, u64) {
    let (acc, real) = if sums {
        // A plain sum is NaN only when some value is NaN (or infinities cancel, which the
        // NaN-skipping fold gives as well): only then is that needed.
        let sum = v.iter().fold(init, |a, &x| a + x);
        if sum.is_nan() {
            fold_values(v, init, &add)
        } else {
            (sum, v.len() as u64)
        }
    } else if v.iter().fold(false, |nan, x| nan | x.is_nan()) {
        // Not `any`: without an early exit the test is a few vector instructions.
        fold_values(v, init, &add)
    } else {
        // With no branch in the loop, the running value stays in a register.
        (v.iter().copied().fold(init, &add), v.len() as u64)
    };
    ((real > 0).then_some(acc), real)
}

/// Folds `values`, skipping NaNs.
#[inline(always)]
fn fold_values(values: &[f64], init: f64, add: &impl Fn(f64, f64) -> f64) -> (f64, u64) {
    let (mut acc, mut real) = (init, 0u64);
    for &v in values {
        if !v.is_nan() {
            real += 1;
            acc = add(acc, v);
        }
    }
    (acc, real)
}

/// The exact sum of `ints`. When the magnitudes cannot carry an i64 sum past its range it is
/// summed as i64s, which vectorizes: with `n` values each in `[-2^(k-1), 2^(k-1))`, where
/// `n <= 2^(63-k)`, the magnitudes add up to less than 2^62; adding 2^(k-1) maps that range
/// onto `[0, 2^k)`, which the OR of the results shows. Otherwise as i128s.
#[inline(always)]
fn int_sum(ints: &[i64]) -> i128 {
    let n = ints.len() as u64;
    // The smallest power of two at least `n`, as an exponent.
    let log = 64 - n.saturating_sub(1).leading_zeros();
    if let Some(k) = 62u32.checked_sub(log).filter(|&k| k >= 1) {
        let half = 1i64 << (k - 1);
        let (mut sum, mut bits) = (0i64, 0u64);
        for &v in ints {
            sum = sum.wrapping_add(v);
            bits |= v.wrapping_add(half) as u64;
        }
        if bits >> k == 0 {
            return i128::from(sum);
        }
    }
    ints.iter().map(|&v| i128::from(v)).sum()
}

/// The buckets just outside the emitted range of one series, for the later stages only.
///
/// OpenTSDB downsamples the whole scan window (whole hour rows around the query), computes rates
/// and interpolates across series over it, and only then drops what lies outside `[start, end]`
/// (§e.2 step 3, §e.8). So the first emitted rate is taken against the bucket before `start`, and
/// a series without a bucket at some `t` near an edge is interpolated towards its bucket beyond
/// the edge. Strata's emitted buckets aggregate only points in `[start, end]` (difference #8),
/// but to give the same rates and interpolation it also computes, from `points` (sorted, the
/// scan window):
/// - `before`: the last non-empty bucket that starts before the first emitted bucket, over all
///   of its points;
/// - `after`: the first non-empty bucket that starts after `end`, over all of its points.
///
/// The caller places them around [`downsample_into`]'s output and drops them after aggregation.
/// `all` has no neighbours. Fill policies do not apply to these buckets.
pub(crate) fn edge_buckets<T>(
    points: &[T],
    at: impl Fn(&T) -> (i64, Num),
    spec: &DownsampleSpec,
    (start, end): (i64, i64),
    tz: Tz,
    values: &mut Vec<Num>,
) -> (Option<Point>, Option<Point>) {
    let buckets = match spec.interval {
        Interval::All => return (None, None),
        Interval::Fixed(width) => Buckets::Fixed(width.max(1)),
        Interval::Calendar { count, unit } => Buckets::Calendar { count, unit, tz },
    };
    if end < start {
        return (None, None);
    }
    let mut first = buckets.floor(start);
    if first < start {
        first = buckets.next(first);
    }
    let whole_bucket = |b: i64, from: usize, values: &mut Vec<Num>| -> Point {
        let mut acc = Bucket::new(spec.function);
        values.clear();
        for p in &points[from..] {
            let (ts, v) = at(p);
            if buckets.floor(ts) != b {
                break;
            }
            acc.push(v, values);
        }
        (b, acc.finish(values))
    };
    // Points before the first emitted bucket: the bucket of the last of them.
    let ts_of = |p: &T| at(p).0;
    let below = points.partition_point(|p| ts_of(p) < first);
    let before = below.checked_sub(1).map(|last| {
        let b = buckets.floor(ts_of(&points[last]));
        let from = points[..below].partition_point(|p| buckets.floor(ts_of(p)) < b);
        whole_bucket(b, from, values)
    });
    // Points after `end` that belong to no emitted bucket: the bucket of the first of them.
    let above = points.partition_point(|p| ts_of(p) <= end);
    let after = points[above..]
        .iter()
        .position(|p| buckets.floor(ts_of(p)) > end)
        .map(|i| {
            let from = above + i;
            whole_bucket(buckets.floor(ts_of(&points[from])), from, values)
        });
    (before, after)
}

#[cfg(test)]
#[path = "downsample/tests.rs"]
mod tests;
