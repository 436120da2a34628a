use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn days(n: u64) -> Option<Duration> {
    Some(Duration::from_secs(n * 86_400))
}

#[test]
fn durations_parse_in_opentsdb_units() {
    assert_eq!(parse_retention("90d"), Ok(days(90)));
    assert_eq!(parse_retention("2w"), Ok(days(14)));
    assert_eq!(
        parse_retention("12h"),
        Ok(Some(Duration::from_secs(12 * 3600)))
    );
    assert_eq!(parse_retention("1y"), Ok(days(365)));
    assert_eq!(parse_retention("1n"), Ok(days(30)));
    assert_eq!(
        parse_retention("500ms"),
        Ok(Some(Duration::from_millis(500)))
    );
    for forever in ["0", "none", "NONE", "forever", "0d"] {
        assert_eq!(parse_retention(forever), Ok(None), "{forever}");
    }
    for bad in ["", "d", "90", "90x", "-1d", "1.5d", "99999999999999999999y"] {
        assert!(parse_retention(bad).is_err(), "{bad:?} parsed");
    }
}

#[test]
fn globs_match_star_and_question_mark() {
    assert!(glob_match("sys.cpu.*", "sys.cpu.user"));
    assert!(glob_match("sys.cpu.*", "sys.cpu."));
    assert!(!glob_match("sys.cpu.*", "sys.cpu"));
    assert!(glob_match("*", ""));
    assert!(glob_match("a?c", "abc"));
    assert!(!glob_match("a?c", "ac"));
    assert!(glob_match("*.user", "sys.cpu.user"));
    assert!(glob_match("s*u*r", "sys.cpu.user"));
    assert!(!glob_match("s*u*x", "sys.cpu.user"));
    assert!(glob_match("é?", "éü"));
}

#[test]
fn the_first_matching_rule_wins_and_the_global_covers_the_rest() {
    let r = Retention {
        global: days(90),
        rules: vec![
            RetentionRule {
                metric: "sys.cpu.*".into(),
                keep: days(7),
            },
            RetentionRule {
                metric: "sys.*".into(),
                keep: None,
            },
        ],
    };
    assert_eq!(r.for_metric("sys.cpu.user"), days(7));
    assert_eq!(r.for_metric("sys.mem"), None);
    assert_eq!(r.for_metric("app.hits"), days(90));
    assert_eq!(r.longest(), None);
    assert_eq!(r.shortest(), days(7));
    let mut catch_all = r.clone();
    catch_all.rules[1].metric = "*".into();
    catch_all.rules[1].keep = days(30);
    assert_eq!(catch_all.longest(), days(30));
    assert!(!r.is_forever());
    assert!(Retention::default().is_forever());
    assert_eq!(Retention::default().longest(), None);
    assert_eq!(Retention::default().shortest(), None);
    assert_eq!(r.to_string(), "global 90d, sys.cpu.* 1w, sys.* none");
}

/// A reference matcher: plain recursion over the pattern.
fn glob_model(p: &[char], n: &[char]) -> bool {
    match (p.first(), n.first()) {
        (None, _) => n.is_empty(),
        (Some('*'), _) => glob_model(&p[1..], n) || (!n.is_empty() && glob_model(p, &n[1..])),
        (Some('?'), Some(_)) => glob_model(&p[1..], &n[1..]),
        (Some(a), Some(b)) => a == b && glob_model(&p[1..], &n[1..]),
        (Some(_), None) => false,
    }
}

proptest! {
    #[test]
    fn glob_agrees_with_the_recursive_model(p in "[ab*?]{0,8}", n in "[ab]{0,10}") {
        let pc: Vec<char> = p.chars().collect();
        let nc: Vec<char> = n.chars().collect();
        prop_assert_eq!(glob_match(&p, &n), glob_model(&pc, &nc));
    }

    #[test]
    fn durations_round_trip(n in 1u64..100_000, unit in 0usize..8) {
        let units = ["ms", "s", "m", "h", "d", "w", "n", "y"];
        let d = parse_retention(&format!("{n}{}", units[unit])).map_err(TestCaseError::fail)?;
        prop_assert_eq!(parse_retention(&format_retention(d)), Ok(d));
    }
}
