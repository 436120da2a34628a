//! The series index: postings survive a reopen, filters agree with a brute-force evaluator.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use roaring::RoaringBitmap;
use strata_tsdb::{Filter, FilterKind, PointRef, Tsdb, UidKind, Value};

use crate::{TestResult, open};

type Tags = Vec<(String, String)>;

fn write_random_series(db: &Tsdb, rng: &mut StdRng, n: usize) -> TestResult {
    let keys = ["host", "dc", "cpu", "Env"];
    let vals = [
        "web01", "web02", "Web03", "db01", "db-1", "x", "webdb", "a.b",
    ];
    for i in 0..n {
        let mut tags: Tags = Vec::new();
        for k in keys {
            if rng.gen_bool(0.6) {
                tags.push((
                    k.to_string(),
                    vals[rng.gen_range(0..vals.len())].to_string(),
                ));
            }
        }
        if tags.is_empty() {
            tags.push(("host".into(), "web01".into()));
        }
        let refs: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let metric = if i % 3 == 0 { "m.b" } else { "m.a" };
        let p = PointRef {
            metric,
            tags: &refs,
            timestamp: 1_356_998_400 + i as i64,
            value: Value::Int(i as i64),
        };
        for r in db.write(&[p]) {
            r?;
        }
    }
    Ok(())
}

/// Every series' metric and tags, by id.
fn all_series(db: &Tsdb) -> Result<BTreeMap<u32, (String, Tags)>, strata_tsdb::Error> {
    let mut out = BTreeMap::new();
    for id in 0..db.series_count() as u32 {
        if let Some(s) = db.series_info(id)? {
            out.insert(id, (s.metric, s.tags));
        }
    }
    Ok(out)
}

fn random_filter(rng: &mut StdRng) -> Result<Filter, strata_tsdb::Error> {
    let keys = ["host", "dc", "cpu", "Env"];
    let kind = FilterKind::ALL[rng.gen_range(0..FilterKind::ALL.len())];
    let exprs: &[&str] = match kind {
        FilterKind::LiteralOr
        | FilterKind::ILiteralOr
        | FilterKind::NotLiteralOr
        | FilterKind::NotILiteralOr => &["web01", "web01|db01", "WEB03|x", "nope", "a.b|webdb"],
        FilterKind::Wildcard | FilterKind::IWildcard => {
            &["web*", "*01", "*", "*eb*", "w*b*1", "WEB*", "*b-*"]
        }
        FilterKind::Regexp => &["eb0", "^db", "[0-9]$", "."],
        FilterKind::NotKey => &[""],
    };
    Filter::new(
        kind,
        keys[rng.gen_range(0..keys.len())],
        exprs[rng.gen_range(0..exprs.len())],
        rng.gen_bool(0.5),
    )
}

/// The brute-force meaning of a filter list: literal_or filters on one key are unioned, every
/// other filter must hold.
fn brute_force(
    series: &BTreeMap<u32, (String, Tags)>,
    metric: &str,
    filters: &[Filter],
) -> RoaringBitmap {
    let mut out = RoaringBitmap::new();
    for (id, (m, tags)) in series {
        if m != metric {
            continue;
        }
        let mut literal: BTreeMap<&str, bool> = BTreeMap::new();
        let mut ok = true;
        for f in filters {
            if f.kind() == FilterKind::LiteralOr {
                *literal.entry(f.tagk()).or_default() |= f.matches_tags(tags);
            } else {
                ok &= f.matches_tags(tags);
            }
        }
        if ok && literal.values().all(|&b| b) {
            out.insert(*id);
        }
    }
    out
}

#[test]
fn filters_match_brute_force() -> TestResult {
    let seed = 0xf117e5_u64;
    eprintln!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    write_random_series(&db, &mut rng, 300)?;
    let series = all_series(&db)?;
    for round in 0..400 {
        let n = rng.gen_range(0..4);
        let filters = (0..n)
            .map(|_| random_filter(&mut rng))
            .collect::<Result<Vec<_>, _>>()?;
        let metric = if rng.gen_bool(0.5) { "m.a" } else { "m.b" };
        let got = db.find_series(metric, &filters)?;
        assert_eq!(
            got,
            brute_force(&series, metric, &filters),
            "round {round}: {filters:?}"
        );
        let any = db.find_series_any_metric(&filters)?;
        let mut want = brute_force(&series, "m.a", &filters);
        want |= brute_force(&series, "m.b", &filters);
        assert_eq!(any, want, "round {round}, any metric: {filters:?}");
    }
    Ok(())
}

#[test]
fn two_literal_filters_on_one_key_are_unioned() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    for h in ["web01", "web02", "web03"] {
        let tags = [("host", h)];
        for r in db.write(&[PointRef {
            metric: "m",
            tags: &tags,
            timestamp: 1,
            value: Value::Int(1),
        }]) {
            r?;
        }
    }
    let f1 = Filter::new(FilterKind::LiteralOr, "host", "web01", true)?;
    let f2 = Filter::new(FilterKind::LiteralOr, "host", "web02", true)?;
    assert_eq!(db.find_series("m", &[f1, f2])?.len(), 2);
    Ok(())
}

#[test]
fn index_survives_reopen() -> TestResult {
    let mut rng = StdRng::seed_from_u64(7);
    let dir = tempfile::tempdir()?;
    let (before, postings_before, suggest_before) = {
        let db = open(dir.path())?;
        write_random_series(&db, &mut rng, 200)?;
        let postings = postings(&db)?;
        let s = db.suggest(UidKind::Tagv, "", 100);
        (all_series_with_last(&db)?, postings, s)
    };
    let db = open(dir.path())?;
    assert_eq!(all_series_with_last(&db)?, before);
    assert_eq!(postings(&db)?, postings_before);
    assert_eq!(db.suggest(UidKind::Tagv, "", 100), suggest_before);
    // New series continue the dense ids.
    let n = db.series_count() as u32;
    for r in db.write(&[PointRef {
        metric: "new",
        tags: &[("k", "v")],
        timestamp: 5,
        value: Value::Int(1),
    }]) {
        r?;
    }
    assert_eq!(
        db.find_series("new", &[])?.iter().collect::<Vec<_>>(),
        vec![n]
    );
    Ok(())
}

fn all_series_with_last(db: &Tsdb) -> Result<Vec<strata_tsdb::SeriesInfo>, strata_tsdb::Error> {
    (0..db.series_count() as u32)
        .filter_map(|id| db.series_info(id).transpose())
        .collect()
}

/// Postings per metric, per tag key (not_key complement) and per (key, value).
fn postings(db: &Tsdb) -> Result<Vec<(String, RoaringBitmap)>, strata_tsdb::Error> {
    let mut out = Vec::new();
    for m in db.suggest(UidKind::Metric, "", 100) {
        out.push((m.clone(), db.find_series(&m, &[])?));
        for k in db.suggest(UidKind::Tagk, "", 100) {
            let f = Filter::new(FilterKind::NotKey, &k, "", false)?;
            out.push((format!("{m} !{k}"), db.find_series(&m, &[f])?));
            for v in db.suggest(UidKind::Tagv, "", 100) {
                let f = Filter::new(FilterKind::LiteralOr, &k, &v, false)?;
                out.push((format!("{m} {k}={v}"), db.find_series(&m, &[f])?));
            }
        }
    }
    Ok(out)
}
