//! Query time parsing (OpenTSDB docs: `user_guide/query/dates`): relative (`1h-ago`), `now`,
//! `<n>ms`, epoch seconds or milliseconds by digit count, and absolute `yyyy/MM/dd[-HH:mm[:ss]]`
//! dates in a time zone.
//!
//! The current time is a parameter, so results are deterministic. Durations (OpenTSDB docs:
//! `user_guide/query/dates`) are shared with downsample intervals.

use chrono::{NaiveDate, NaiveDateTime, TimeZone};
use chrono_tz::Tz;

use crate::error::{Error, Result};

/// Milliseconds per duration unit, keyed by the unit's (lower-case) letter.
fn unit_ms(unit: char) -> Option<i64> {
    const SEC: i64 = 1000;
    match unit {
        's' => Some(SEC),
        'm' => Some(60 * SEC),
        'h' => Some(3600 * SEC),
        'd' => Some(86_400 * SEC),
        'w' => Some(7 * 86_400 * SEC),
        'n' => Some(30 * 86_400 * SEC),
        'y' => Some(365 * 86_400 * SEC),
        _ => None,
    }
}

fn duration_error(input: &str, message: String) -> Error {
    Error::InvalidDuration {
        input: input.to_owned(),
        message,
    }
}

/// Parses an OpenTSDB duration (`30s`, `1h`, `500ms`, `2w`, `1n`, `1y`) into milliseconds.
///
/// Leading decimal digits (> 0), then the last character (case-insensitive) is the unit; `s`
/// preceded by a lower-case `m` means milliseconds. Characters between digits and the unit are
/// ignored, as in OpenTSDB (`5foom` is 5 minutes).
pub fn parse_duration(input: &str) -> Result<i64> {
    let digits = input.bytes().take_while(u8::is_ascii_digit).count();
    if digits == input.len() && digits > 0 {
        return Err(duration_error(
            input,
            format!("Invalid duration, must have an integer and unit: {input}"),
        ));
    }
    let interval: i64 = input[..digits]
        .parse()
        .map_err(|_| duration_error(input, format!("Invalid duration (number): {input}")))?;
    if interval <= 0 {
        return Err(duration_error(
            input,
            format!("Zero or negative duration: {input}"),
        ));
    }
    let mut chars = input.chars().rev();
    let last = chars.next().map(|c| c.to_ascii_lowercase());
    let prev = chars.next();
    let multiplier = match (last, prev) {
        (Some('s'), Some('m')) => 1,
        (Some(u), _) => unit_ms(u)
            .ok_or_else(|| duration_error(input, format!("Invalid duration (suffix): {input}")))?,
        (None, _) => {
            return Err(duration_error(
                input,
                format!("Invalid duration (number): {input}"),
            ));
        }
    };
    interval.checked_mul(multiplier).ok_or_else(|| {
        duration_error(
            input,
            format!("Duration must be < Long.MAX_VALUE ms: {input}"),
        )
    })
}

fn time_error(input: &str, message: String) -> Error {
    Error::InvalidTime {
        input: input.to_owned(),
        message,
    }
}

/// Parses a query start/end time into epoch milliseconds.
///
/// Returns `Ok(None)` for an empty string ("unset": the caller uses now for `end` and reports
/// `Missing start time` for `start`). `now_ms` is the current time; `tz` interprets absolute dates.
pub fn parse_time(input: &str, now_ms: i64, tz: Tz) -> Result<Option<i64>> {
    if input.is_empty() {
        return Ok(None);
    }
    if let Some(num) = input.strip_suffix("ms")
        && !num.is_empty()
        && num.bytes().all(|b| b.is_ascii_digit())
    {
        return parse_long(input, num).map(Some);
    }
    let lower = input.to_ascii_lowercase();
    if lower == "now" {
        return Ok(Some(now_ms));
    }
    if lower.ends_with("-ago") {
        let ago = parse_duration(&input[..input.len() - 4])?;
        return Ok(Some(now_ms.saturating_sub(ago)));
    }
    if input.contains('/') || input.contains(':') {
        return parse_absolute(input, tz).map(Some);
    }
    parse_epoch(input).map(Some)
}

/// Parses a query's `start` and optional `end` into `(start_ms, end_ms)`.
///
/// An empty start is `Missing start time`; an absent or empty end is `now_ms`; the end must be
/// after the start (`End time [..] must be greater than the start time [..]`).
pub fn parse_time_range(start: &str, end: Option<&str>, now_ms: i64, tz: Tz) -> Result<(i64, i64)> {
    let start_ms = parse_time(start, now_ms, tz)?.ok_or(Error::MissingStart)?;
    let end_ms = match end {
        Some(end) => parse_time(end, now_ms, tz)?.unwrap_or(now_ms),
        None => now_ms,
    };
    if end_ms <= start_ms {
        return Err(Error::EndBeforeStart { start_ms, end_ms });
    }
    Ok((start_ms, end_ms))
}

/// Parses digits like Java's `Tags.parseLong` (optional sign, at most 19 digits).
fn parse_long(input: &str, text: &str) -> Result<i64> {
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    if body.len() > 19 {
        return Err(time_error(
            input,
            format!("Invalid time: {input}. Value too long: {text}"),
        ));
    }
    if let Some(c) = body.chars().find(|c| !c.is_ascii_digit()) {
        return Err(time_error(
            input,
            format!("Invalid time: {input}. Invalid character '{c}' in {text}"),
        ));
    }
    text.parse::<i64>()
        .map_err(|_| time_error(input, format!("Invalid time: {input}. Overflow: {text}")))
}

/// Epoch seconds (≤ 10 characters) or milliseconds (longer), optionally `<10 digits>.<1-3 digits>`.
fn parse_epoch(input: &str) -> Result<i64> {
    let time = if input.contains('.') {
        let (secs, frac) = input.split_once('.').unwrap_or((input, ""));
        let valid = secs.len() == 10
            && secs.bytes().all(|b| b.is_ascii_digit())
            && (1..=3).contains(&frac.len())
            && frac.bytes().all(|b| b.is_ascii_digit());
        if !valid {
            return Err(time_error(
                input,
                format!(
                    "Invalid time: {input}. Millisecond timestamps must be in the format \
                     <seconds>.<ms> where the milliseconds are limited to 3 digits"
                ),
            ));
        }
        // [QUIRK] kept: the dot is deleted, so `1355961603.4` becomes 13559616034 ms.
        parse_long(input, &input.replace('.', ""))?
    } else {
        parse_long(input, input)?
    };
    if time < 0 {
        return Err(time_error(
            input,
            format!("Invalid time: {input}. Negative timestamps are not supported."),
        ));
    }
    if input.len() <= 10 {
        time.checked_mul(1000)
            .ok_or_else(|| time_error(input, format!("Invalid time: {input}. Overflow")))
    } else {
        Ok(time)
    }
}

/// Absolute dates, chosen by length: 10 `yyyy/MM/dd`, 16 `yyyy/MM/dd-HH:mm` or `yyyy/MM/dd HH:mm`,
/// 19 `yyyy/MM/dd-HH:mm:ss` or `yyyy/MM/dd HH:mm:ss`.
fn parse_absolute(input: &str, tz: Tz) -> Result<i64> {
    let sep = if input.len() > 10 && input.as_bytes().get(10) == Some(&b'-') {
        '-'
    } else {
        ' '
    };
    let naive = match input.len() {
        10 => NaiveDate::parse_from_str(input, "%Y/%m/%d").map(|d| d.and_time(Default::default())),
        16 => NaiveDateTime::parse_from_str(input, &format!("%Y/%m/%d{sep}%H:%M")),
        19 => NaiveDateTime::parse_from_str(input, &format!("%Y/%m/%d{sep}%H:%M:%S")),
        _ => return Err(time_error(input, format!("Invalid absolute date: {input}"))),
    }
    .map_err(|e| time_error(input, format!("Invalid date: {input}. {e}")))?;
    Ok(local_to_utc_ms(naive, tz))
}

/// Converts a civil time in `tz` to epoch ms. An ambiguous time (DST fall-back) takes the earlier
/// instant; a time in a DST gap is read with the offset in force just before the gap, which moves
/// it forward like Java's lenient calendar.
pub(crate) fn local_to_utc_ms(naive: NaiveDateTime, tz: Tz) -> i64 {
    match tz.from_local_datetime(&naive).earliest() {
        Some(dt) => dt.timestamp_millis(),
        None => {
            let before = naive - chrono::Duration::hours(3);
            let offset = *tz.from_utc_datetime(&before).offset();
            let secs = chrono::Offset::fix(&offset).local_minus_utc();
            (naive - chrono::Duration::seconds(i64::from(secs)))
                .and_utc()
                .timestamp_millis()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::{America::New_York, UTC};

    // 2013-01-01T00:00:00Z
    const T_MS: i64 = 1_356_998_400_000;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(500));
        assert_eq!(parse_duration("30s"), Ok(30_000));
        assert_eq!(parse_duration("1m"), Ok(60_000));
        assert_eq!(parse_duration("1H"), Ok(3_600_000));
        assert_eq!(parse_duration("2d"), Ok(172_800_000));
        assert_eq!(parse_duration("1w"), Ok(604_800_000));
        // n = 30 days, y = 365 days
        assert_eq!(parse_duration("1n"), Ok(2_592_000_000));
        assert_eq!(parse_duration("1y"), Ok(31_536_000_000));
        // [QUIRK] the middle is ignored: 5 minutes
        assert_eq!(parse_duration("5foom"), Ok(300_000));
    }

    #[test]
    fn duration_errors_name_the_input() {
        let msg = |s: &str| parse_duration(s).unwrap_err().to_string();
        assert_eq!(
            msg("60"),
            "Invalid duration, must have an integer and unit: 60"
        );
        assert_eq!(msg("h"), "Invalid duration (number): h");
        assert_eq!(msg(""), "Invalid duration (number): ");
        assert_eq!(msg("0s"), "Zero or negative duration: 0s");
        assert_eq!(msg("1x"), "Invalid duration (suffix): 1x");
        assert_eq!(
            msg("9999999999999999y"),
            "Duration must be < Long.MAX_VALUE ms: 9999999999999999y"
        );
    }

    #[test]
    fn relative_and_now() {
        let now = T_MS;
        assert_eq!(parse_time("now", now, UTC), Ok(Some(now)));
        assert_eq!(parse_time("NOW", now, UTC), Ok(Some(now)));
        assert_eq!(parse_time("1h-ago", now, UTC), Ok(Some(now - 3_600_000)));
        assert_eq!(parse_time("2d-AGO", now, UTC), Ok(Some(now - 172_800_000)));
        assert_eq!(parse_time("100ms-ago", now, UTC), Ok(Some(now - 100)));
        assert_eq!(parse_time("", now, UTC), Ok(None));
        assert!(parse_time("xh-ago", now, UTC).is_err());
    }

    #[test]
    fn time_ranges() {
        let now = T_MS;
        // end defaults to now: [now-1h, now]
        assert_eq!(
            parse_time_range("1h-ago", None, now, UTC),
            Ok((now - 3_600_000, now))
        );
        assert_eq!(
            parse_time_range("1h-ago", Some(""), now, UTC),
            Ok((now - 3_600_000, now))
        );
        assert_eq!(
            parse_time_range("1356998400", Some("1356998460"), 0, UTC),
            Ok((T_MS, T_MS + 60_000))
        );
        assert_eq!(
            parse_time_range("", None, now, UTC),
            Err(Error::MissingStart)
        );
        assert_eq!(
            parse_time_range("1356998400", Some("1356998400"), 0, UTC)
                .unwrap_err()
                .to_string(),
            "End time [1356998400000] must be greater than the start time [1356998400000]"
        );
        assert!(parse_time_range("x", None, now, UTC).is_err());
    }

    #[test]
    fn epoch_by_digit_count() {
        // ≤ 10 chars: seconds
        assert_eq!(parse_time("1356998400", 0, UTC), Ok(Some(T_MS)));
        // 13 chars: ms
        assert_eq!(parse_time("1356998400000", 0, UTC), Ok(Some(T_MS)));
        // 11 digits: taken as ms
        assert_eq!(parse_time("13559616000", 0, UTC), Ok(Some(13_559_616_000)));
        assert_eq!(parse_time("123123ms", 0, UTC), Ok(Some(123_123)));
        // [QUIRK] dotted: the dot is removed and the length rule applies to the original string
        assert_eq!(parse_time("1355961603.4", 0, UTC), Ok(Some(13_559_616_034)));
        assert_eq!(
            parse_time("1355961603.41", 0, UTC),
            Ok(Some(135_596_160_341))
        );
        assert_eq!(
            parse_time("1355961603.418", 0, UTC),
            Ok(Some(1_355_961_603_418))
        );
    }

    #[test]
    fn epoch_errors() {
        let msg = |s: &str| parse_time(s, 0, UTC).unwrap_err().to_string();
        assert_eq!(
            msg("1355961603.4189"),
            "Invalid time: 1355961603.4189. Millisecond timestamps must be in the format \
             <seconds>.<ms> where the milliseconds are limited to 3 digits"
        );
        assert_eq!(
            msg("12x4"),
            "Invalid time: 12x4. Invalid character 'x' in 12x4"
        );
        assert_eq!(
            msg("-5"),
            "Invalid time: -5. Negative timestamps are not supported."
        );
        assert_eq!(
            msg("12345678901234567890"),
            "Invalid time: 12345678901234567890. Value too long: 12345678901234567890"
        );
    }

    #[test]
    fn absolute_dates_utc() {
        assert_eq!(parse_time("2013/01/01", 0, UTC), Ok(Some(T_MS)));
        assert_eq!(
            parse_time("2013/01/01-01:30", 0, UTC),
            Ok(Some(T_MS + 5_400_000))
        );
        assert_eq!(
            parse_time("2013/01/01 01:30", 0, UTC),
            Ok(Some(T_MS + 5_400_000))
        );
        assert_eq!(
            parse_time("2013/01/01-01:30:15", 0, UTC),
            Ok(Some(T_MS + 5_415_000))
        );
        assert_eq!(
            parse_time("2013/01/01 01:30:15", 0, UTC),
            Ok(Some(T_MS + 5_415_000))
        );
    }

    #[test]
    fn absolute_dates_in_zone() {
        // EST = UTC-5 in January: local midnight is 05:00Z = 1357016400000.
        assert_eq!(
            parse_time("2013/01/01", 0, New_York),
            Ok(Some(1_357_016_400_000))
        );
        // EDT = UTC-4 in July: 2013-07-01T00:00-04:00 = 1372651200000.
        assert_eq!(
            parse_time("2013/07/01-00:00", 0, New_York),
            Ok(Some(1_372_651_200_000))
        );
        // DST gap 2013-03-10 02:30 does not exist: read with EST (-5) => 07:30Z = 1362900600000.
        assert_eq!(
            parse_time("2013/03/10-02:30", 0, New_York),
            Ok(Some(1_362_900_600_000))
        );
    }

    #[test]
    fn absolute_errors() {
        let msg = |s: &str| parse_time(s, 0, UTC).unwrap_err().to_string();
        assert_eq!(msg("2013/01/1"), "Invalid absolute date: 2013/01/1");
        assert!(msg("2013/13/01").starts_with("Invalid date: 2013/13/01. "));
        assert!(msg("2013-01-01T00:00:00").starts_with("Invalid date: 2013-01-01T00:00:00"));
    }
}
