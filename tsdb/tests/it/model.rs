//! Random writes, reads, deletes, flushes (which fold rows into partial blocks), row
//! compactions and reopens against a `BTreeMap` model.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use roaring::RoaringBitmap;
use strata_tsdb::{PointRef, Tsdb, Value};

use crate::{TestResult, open};

type SeriesKey = (String, Vec<(String, String)>);
type Model = BTreeMap<SeriesKey, BTreeMap<i64, Value>>;

const T0: i64 = 1_356_998_400_000;

fn random_series(rng: &mut StdRng) -> SeriesKey {
    let metric = format!("m{}", rng.gen_range(0..3));
    let mut tags = vec![("host".to_string(), format!("h{}", rng.gen_range(0..6)))];
    if rng.gen_bool(0.5) {
        tags.push(("dc".to_string(), format!("d{}", rng.gen_range(0..2))));
    }
    tags.sort();
    (metric, tags)
}

fn random_value(rng: &mut StdRng) -> Value {
    match rng.gen_range(0..4) {
        0 => Value::Int(rng.gen_range(-200..200)),
        1 => Value::Int(rng.r#gen()),
        2 => Value::Float(f64::from(rng.gen_range(-100i32..100)) / 4.0),
        _ => Value::Float(rng.gen_range(-1e9..1e9)),
    }
}

fn check_reads(db: &Tsdb, model: &Model, rng: &mut StdRng) -> TestResult {
    for metric in ["m0", "m1", "m2"] {
        let a = T0 + rng.gen_range(-3_600_000..12 * 3_600_000);
        let b = a + rng.gen_range(0..8 * 3_600_000);
        let got = match db.read(&strata_tsdb::ReadRequest::metric(metric, &[], a, b)) {
            Ok(g) => g,
            Err(e) if e.kind() == strata_tsdb::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let mut got: BTreeMap<SeriesKey, Vec<(i64, Value)>> = got
            .into_iter()
            .map(|s| {
                let mut tags = s.tags;
                tags.sort();
                ((s.metric, tags), s.points)
            })
            .filter(|(_, p)| !p.is_empty())
            .collect();
        for (k, pts) in model.iter().filter(|(k, _)| k.0 == metric) {
            let want: Vec<(i64, Value)> = pts.range(a..=b).map(|(t, v)| (*t, *v)).collect();
            let have = got.remove(k).unwrap_or_default();
            assert_eq!(have, want, "series {k:?} in [{a}, {b}]");
        }
        assert!(got.is_empty(), "extra series {got:?}");
    }
    // Last points equal the model's.
    for id in 0..db.series_count() as u32 {
        let info = db.series_info(id)?.ok_or("missing series")?;
        let mut tags = info.tags.clone();
        tags.sort();
        let want = model
            .get(&(info.metric.clone(), tags))
            .and_then(|p| p.last_key_value().map(|(t, v)| (*t, *v)));
        assert_eq!(info.last, want, "last point of {info:?}");
    }
    Ok(())
}

#[test]
fn random_ops_match_model() -> TestResult {
    for seed in crate::test_seeds(&[0x7_5db, 0x7_5dc, 0x7_5dd, 0x7_5de])? {
        eprintln!("model seed {seed} (STRATA_TEST_SEED={seed} replays it)");
        run_model(seed).map_err(|e| format!("seed {seed}: {e}"))?;
    }
    Ok(())
}

fn run_model(seed: u64) -> TestResult {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir()?;
    let mut db = open(dir.path())?;
    let mut model = Model::new();
    for step in 0..100 {
        match rng.gen_range(0..12) {
            0 => {
                drop(db);
                db = open(dir.path())?;
            }
            // A flush folds each row's raw cells into a partial block; later writes to the same
            // rows and instants must still win over it.
            2 => db.flush()?,
            // Every hour written is long closed: this folds every dirty row.
            3 => {
                db.rowcompact_all()?;
            }
            1 => {
                // Delete a range of one metric's series.
                let metric = format!("m{}", rng.gen_range(0..3));
                let a = T0 + rng.gen_range(0..10 * 3_600_000);
                let b = a + rng.gen_range(0..3 * 3_600_000);
                let ids = db
                    .find_series(&metric, &[])
                    .unwrap_or_else(|_| RoaringBitmap::new());
                let n = db.delete(&ids, a, b)?;
                let mut want = 0;
                for (_, pts) in model.iter_mut().filter(|(k, _)| k.0 == metric) {
                    let doomed: Vec<i64> = pts.range(a..=b).map(|(t, _)| *t).collect();
                    want += doomed.len() as u64;
                    for t in doomed {
                        pts.remove(&t);
                    }
                }
                assert_eq!(n, want, "step {step}: deleted points");
            }
            _ => {
                let n = rng.gen_range(1..200);
                let mut owned = Vec::with_capacity(n);
                for _ in 0..n {
                    let key = random_series(&mut rng);
                    // A fifth of the points hit a few instants, so duplicates are common.
                    let mut ts = if rng.gen_bool(0.2) {
                        T0 + rng.gen_range(0..50) * 1000
                    } else {
                        T0 + rng.gen_range(0..10 * 3_600_000)
                    };
                    if rng.gen_bool(0.5) {
                        ts -= ts % 1000;
                    }
                    let value = random_value(&mut rng);
                    owned.push((key, ts, value));
                }
                let tag_refs: Vec<Vec<(&str, &str)>> = owned
                    .iter()
                    .map(|((_, t), _, _)| t.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect())
                    .collect();
                let points: Vec<PointRef<'_>> = owned
                    .iter()
                    .zip(&tag_refs)
                    .map(|(((m, _), ts, v), tags)| PointRef {
                        metric: m,
                        tags,
                        // Whole seconds go out as seconds half of the time.
                        timestamp: if ts % 1000 == 0 && rng.gen_bool(0.5) {
                            ts / 1000
                        } else {
                            *ts
                        },
                        value: *v,
                    })
                    .collect();
                for r in db.write(&points) {
                    r?;
                }
                for (key, ts, v) in owned {
                    model.entry(key).or_default().insert(ts, v);
                }
            }
        }
        check_reads(&db, &model, &mut rng)?;
    }
    drop(db);
    let db = open(dir.path())?;
    check_reads(&db, &model, &mut rng)?;
    Ok(())
}
