//! Where buckets fall (fixed widths aligned to the epoch, or calendar units in a time zone), and
//! one bucket's aggregation, folded point by point.

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike};
use chrono_tz::Tz;

use super::CalendarUnit;
use crate::aggregator::Aggregator;
use crate::num::{ExactSum, Extreme};
use crate::time::local_to_utc_ms;
use strata_tsdb::Value;

/// Bucket arithmetic: where the bucket holding `ts` starts, and where the next one starts.
#[derive(Debug, Clone, Copy)]
pub(super) enum Buckets {
    Fixed(i64),
    Calendar {
        count: u32,
        unit: CalendarUnit,
        tz: Tz,
    },
}

impl Buckets {
    pub(super) fn floor(self, ts: i64) -> i64 {
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
    pub(super) fn next(self, start: i64) -> i64 {
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
pub(super) fn calendar_floor(
    l: NaiveDateTime,
    count: u32,
    unit: CalendarUnit,
) -> Option<NaiveDateTime> {
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
pub(super) struct Bucket {
    pub(super) function: Aggregator,
    pub(super) fold: Fold,
    pub(super) sum: ExactSum,
    pub(super) extreme: Extreme,
    /// Non-NaN values seen (for `count`), and whether a double was among all values.
    pub(super) real: u64,
    pub(super) any_float: bool,
    pub(super) first: Value,
    pub(super) last: Value,
    /// Any value seen.
    pub(super) any: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fold {
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
    pub(super) fn of(function: Aggregator) -> Fold {
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
    pub(super) fn new(function: Aggregator) -> Bucket {
        let fold = Fold::of(function);
        Bucket {
            function,
            fold,
            sum: ExactSum::default(),
            extreme: Extreme::new(fold == Fold::Max),
            real: 0,
            any_float: false,
            first: Value::Float(f64::NAN),
            last: Value::Float(f64::NAN),
            any: false,
        }
    }

    pub(super) fn reset(&mut self) {
        *self = Bucket::new(self.function);
    }

    #[inline]
    pub(super) fn push(&mut self, v: Value, values: &mut Vec<Value>) {
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

    pub(super) fn finish(&self, values: &[Value]) -> Value {
        match self.fold {
            Fold::Values => self.function.apply_nums(values, false),
            Fold::First if self.any => self.first,
            Fold::Last if self.any => self.last,
            Fold::First | Fold::Last => Value::Float(f64::NAN),
            Fold::Sum => self.sum.sum(),
            Fold::Avg => self.sum.mean(),
            Fold::Min | Fold::Max => self.extreme.value(),
            Fold::Count if self.real == 0 => Value::Float(f64::NAN),
            Fold::Count if self.any_float => Value::Float(self.real as f64),
            Fold::Count => Value::Int(self.real as i64),
        }
    }
}
