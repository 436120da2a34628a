//! The write path: validation messages, per-point results, s/ms equivalence.

use strata_tsdb::{ErrorKind, Filter, FilterKind, PointRef, TsdbOptions, UidKind, Value};

use crate::open;

fn pt<'a>(
    metric: &'a str,
    tags: &'a [(&'a str, &'a str)],
    timestamp: i64,
    value: Value,
) -> PointRef<'a> {
    PointRef {
        metric,
        tags,
        timestamp,
        value,
    }
}

#[test]
fn per_point_results_in_opentsdb_order() -> crate::TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let host = [("host", "web01")];
    let none: [(&str, &str); 0] = [];
    let nine: Vec<(String, String)> = (0..9).map(|i| (format!("k{i}"), "v".to_string())).collect();
    let nine: Vec<(&str, &str)> = nine.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let points = [
        pt("sys.cpu", &host, 1356998400, Value::Int(42)),
        pt("sys.cpu", &host, 1356998400, Value::Float(f64::NAN)),
        pt("sys.cpu", &none, 1356998400, Value::Int(1)),
        pt("sys.cpu", &nine, 1356998400, Value::Int(1)),
        pt("sys cpu", &host, 1356998400, Value::Int(1)),
        pt("sys.cpu", &host, -5, Value::Int(1)),
        pt("sys.cpu", &host, 10_000_000_000_000, Value::Int(1)),
    ];
    let r = db.write(&points);
    let msgs: Vec<String> = r
        .iter()
        .map(|r| {
            r.as_ref()
                .err()
                .map(ToString::to_string)
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(msgs[0], "");
    assert_eq!(
        msgs[1],
        "value is NaN or Infinite: NaN for metric=sys.cpu timestamp=1356998400"
    );
    assert_eq!(msgs[2], "Need at least one tag (metric=sys.cpu, tags={})");
    assert!(msgs[3].starts_with("Too many tags: 9 maximum allowed: 8, tags: {k0=v"));
    assert_eq!(
        msgs[4],
        "Invalid metric name (\"sys cpu\"): illegal character:  "
    );
    assert_eq!(
        msgs[5],
        "negative  timestamp=-5 when trying to add value=[1]/0 to metric=sys.cpu, tags={host=web01}"
    );
    assert!(msgs[6].starts_with("bad timestamp=10000000000000 "));
    assert!(
        r[1..]
            .iter()
            .all(|r| r.as_ref().is_err_and(|e| e.kind() == ErrorKind::Client))
    );
    let s = db.stats();
    assert_eq!(s.points_written, 1);
    assert_eq!(s.rejected_bad_tags, 2);
    assert_eq!(s.rejected_not_finite, 1);
    assert_eq!(s.rejected_invalid_name, 1);
    assert_eq!(s.rejected_bad_timestamp, 2);
    assert_eq!(s.series_count, 1);
    Ok(())
}

#[test]
fn seconds_and_ms_share_a_cell_and_last_write_wins() -> crate::TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let tags = [("host", "a")];
    for r in db.write(&[pt("m", &tags, 1356998400, Value::Int(1))]) {
        r?;
    }
    for r in db.write_sync(&[pt("m", &tags, 1356998400000, Value::Float(2.5))]) {
        r?;
    }
    let got = db.read(&strata_tsdb::ReadRequest::metric(
        "m",
        &[],
        1356998400000,
        1356998400000,
    ))?;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].points, vec![(1356998400000, Value::Float(2.5))]);
    assert_eq!(got[0].tsuid.to_hex(), "000001000001000001");
    Ok(())
}

#[test]
fn unknown_names_without_auto_create() -> crate::TestResult {
    let dir = tempfile::tempdir()?;
    let opts = TsdbOptions {
        auto_create_metrics: false,
        ..TsdbOptions::default()
    };
    let db = strata_tsdb::Tsdb::open(dir.path(), opts)?;
    let r = db.write(&[pt("m", &[("host", "a")], 1, Value::Int(1))]);
    let e = r[0].as_ref().err().map(ToString::to_string);
    assert_eq!(e.as_deref(), Some("No such name for 'metrics': 'm'"));
    db.assign_uid(UidKind::Metric, "m")?;
    assert!(db.assign_uid(UidKind::Metric, "m").is_err());
    assert!(db.write(&[pt("m", &[("host", "a")], 1, Value::Int(1))])[0].is_ok());
    assert_eq!(db.suggest(UidKind::Tagk, "h", 10), vec!["host"]);
    let f = Filter::new(FilterKind::LiteralOr, "nokey", "x", false)?;
    let e = db.find_series("m", &[f]).err().map(|e| e.kind());
    assert_eq!(e, Some(ErrorKind::NotFound));
    Ok(())
}

#[test]
fn owned_points_and_duplicate_pairs() -> crate::TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let p = strata_tsdb::Point {
        metric: "m".into(),
        tags: vec![
            ("b".into(), "2".into()),
            ("a".into(), "1".into()),
            ("a".into(), "1".into()),
        ],
        timestamp: 3600,
        value: Value::Int(-7),
    };
    for r in db.write(&[p.as_ref()]) {
        r?;
    }
    let got = db.read(&strata_tsdb::ReadRequest::metric("m", &[], 0, 10_000_000))?;
    assert_eq!(
        got[0].tags,
        vec![
            ("b".to_string(), "2".to_string()),
            ("a".to_string(), "1".to_string())
        ]
    );
    assert_eq!(got[0].points, vec![(3_600_000, Value::Int(-7))]);
    let info = db.series_info(0)?.ok_or("no series 0")?;
    assert_eq!(info.last, Some((3_600_000, Value::Int(-7))));
    Ok(())
}

#[test]
fn concurrent_writers_share_uids_and_dense_series_ids() -> crate::TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    std::thread::scope(|s| {
        for t in 0..4 {
            let db = db.clone();
            s.spawn(move || {
                for i in 0..100 {
                    let host = format!("h{}", (i * 7 + t) % 50);
                    let tags = [("host", host.as_str())];
                    for r in db.write(&[pt("m", &tags, 1_000 + i, Value::Int(t))]) {
                        assert!(r.is_ok(), "{r:?}");
                    }
                }
            });
        }
    });
    assert_eq!(db.series_count(), 50);
    let ids: Vec<u32> = db.find_series("m", &[])?.iter().collect();
    assert_eq!(ids, (0..50).collect::<Vec<u32>>());
    let before: Vec<_> = (0..50)
        .map(|id| db.series_info(id))
        .collect::<Result<_, _>>()?;
    drop(db);
    let db = open(dir.path())?;
    let after: Vec<_> = (0..50)
        .map(|id| db.series_info(id))
        .collect::<Result<_, _>>()?;
    assert_eq!(before, after);
    let mut uids: Vec<u32> = (0..50)
        .map(|i| db.uid(UidKind::Tagv, &format!("h{i}")).map(|u| u.get()))
        .collect::<Result<_, _>>()?;
    uids.sort_unstable();
    assert_eq!(uids, (1..=50).collect::<Vec<u32>>());
    Ok(())
}

#[test]
fn integers_wider_than_32_bits_survive_a_flush() -> crate::TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let tags = [("host", "a")];
    let want: Vec<(i64, Value)> = (0..50i64)
        .map(|i| {
            (
                (1_700_000_000 + i * 10) * 1000,
                Value::Int(i * 1_000_000_007),
            )
        })
        .collect();
    let points: Vec<PointRef<'_>> = want
        .iter()
        .map(|(ms, v)| pt("m", &tags, ms / 1000, *v))
        .collect();
    assert!(db.write(&points).iter().all(Result::is_ok));
    let read = |db: &strata_tsdb::Tsdb| {
        db.read(&strata_tsdb::ReadRequest::metric(
            "m",
            &[],
            1_699_999_000_000,
            1_800_000_000_000,
        ))
    };
    assert_eq!(read(&db)?[0].points, want, "from the memtable");
    db.flush()?;
    assert_eq!(read(&db)?[0].points, want, "after the flush");
    Ok(())
}
