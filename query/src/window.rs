//! The scan window (OpenTSDB docs: `user_guide/query (order of operations)`): the whole-hour range
//! of data read around a query, so that interpolation, rates and downsampling have the neighbouring
//! points they need at the edges. Calendar intervals use the same fixed-ms arithmetic (`n` = 30
//! days, `y` = 365 days), as OpenTSDB does; `all` counts as no interval.

use crate::downsample::Interval;

const HOUR_S: i64 = 3600;

/// Returns the `[start, end]` range (ms, inclusive) to read for a query over `[start_ms, end_ms]`,
/// optionally downsampled with `interval`.
///
/// Start: floor to the downsample interval, then to the hour. End: one second past the end (in
/// seconds), then forward to the next interval boundary (always moving, even when aligned), then up
/// to the hour; without downsampling always to the *next* hour.
pub fn scan_window(start_ms: i64, end_ms: i64, interval: Option<Interval>) -> (i64, i64) {
    let width = interval.and_then(Interval::nominal_ms).filter(|w| *w > 0);
    let mut s = start_ms.div_euclid(1000);
    if let Some(w) = width {
        s -= s.saturating_mul(1000).rem_euclid(w) / 1000;
    }
    s -= s.rem_euclid(HOUR_S);
    let mut e = end_ms.div_euclid(1000).saturating_add(1);
    match width {
        Some(w) => {
            e = e.saturating_add((w - e.saturating_mul(1000).rem_euclid(w)) / 1000);
            if e.rem_euclid(HOUR_S) != 0 {
                e = e.saturating_add(HOUR_S - e.rem_euclid(HOUR_S));
            }
        }
        None => e = e.saturating_add(HOUR_S - e.rem_euclid(HOUR_S)),
    }
    (s.saturating_mul(1000), e.saturating_mul(1000))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::downsample::CalendarUnit;

    const MIN: i64 = 60_000;

    #[test]
    fn test_asserted_windows() {
        // 1m, [1356998400, 1357041600] -> [1356998400, 1357045200]:
        // end 1357041601 -> +59 = 1357041660 -> next hour 1357045200
        let w = scan_window(
            1_356_998_400_000,
            1_357_041_600_000,
            Some(Interval::Fixed(MIN)),
        );
        assert_eq!(w, (1_356_998_400_000, 1_357_045_200_000));
        // 15m, [1427372347, 1427415547]: start -247 -> 1427372100, -900 -> 1427371200;
        // end 1427415548 (+652) -> 1427416200 (+1800) -> 1427418000
        let (s, e) = (1_427_372_347_000, 1_427_415_547_000);
        let w = scan_window(s, e, Some(Interval::Fixed(15 * MIN)));
        assert_eq!(w, (1_427_371_200_000, 1_427_418_000_000));
        // 1d: start floors to 1427328000 (midnight); end 1427415548 -> 1427500800 (next midnight)
        let w = scan_window(s, e, Some(Interval::Fixed(1440 * MIN)));
        assert_eq!(w, (1_427_328_000_000, 1_427_500_800_000));
        // calendar 1dc uses the same arithmetic
        let day = Interval::Calendar {
            count: 1,
            unit: CalendarUnit::Day,
        };
        assert_eq!(
            scan_window(s, e, Some(day)),
            (1_427_328_000_000, 1_427_500_800_000)
        );
    }

    #[test]
    fn without_downsampling_end_goes_to_next_hour() {
        // [T, T+3600s]: start T; end T+3601 -> next hour T+7200
        let t = 1_356_998_400_000;
        assert_eq!(scan_window(t, t + 3_600_000, None), (t, t + 7_200_000));
        // `all` behaves like no interval; an unaligned start floors to the hour
        let w = scan_window(t + 1_234_567, t + 1000, Some(Interval::All));
        assert_eq!(w, (t, t + 3_600_000));
    }
}
