//! Checks of the UID table (see `uid.rs` for its format).

use std::collections::{BTreeMap, HashMap};

use strata_engine::{Db, ScanOptions, Table};

use super::{FsckRemedy, FsckReport};
use crate::error::Result;
use crate::tsdb::UID_TABLE;
use crate::uid::{COUNTER_ROW, MAX_UID, Uid, UidKind};

/// The mappings that decode, per kind (indexed by `UidKind as usize`).
#[derive(Debug, Default)]
pub(super) struct UidMaps {
    by_name: [BTreeMap<String, Uid>; 3],
    by_uid: [HashMap<Uid, String>; 3],
}

impl UidMaps {
    /// Whether `uid` of `kind` has a name.
    pub(super) fn named(&self, kind: UidKind, uid: Uid) -> bool {
        self.by_uid[kind as usize].contains_key(&uid)
    }
}

/// Reads the UID table, reporting cells that do not decode and mappings that disagree.
pub(super) fn check(db: &Db, table: &Table, report: &mut FsckReport) -> Result<UidMaps> {
    let mut maps = UidMaps::default();
    let mut counters: [Option<Result<u32, &'static str>>; 3] = [None, None, None];
    let bad = |report: &mut FsckReport, row: &[u8], col: &[u8], detail: &str| {
        report.add(UID_TABLE, row, Some(col), detail, FsckRemedy::DeleteCell);
    };
    for row in db.scan(table, &ScanOptions::default())? {
        let row = row?;
        for cell in &row.cells {
            for kind in UidKind::ALL {
                let k = kind as usize;
                let col = &cell.column[..];
                if col == kind.id_column() {
                    let Some(name) = std::str::from_utf8(&row.key).ok().filter(|n| !n.is_empty())
                    else {
                        bad(report, &row.key, col, "the name is not UTF-8");
                        continue;
                    };
                    match Uid::from_bytes(&cell.value) {
                        Some(uid) => {
                            maps.by_name[k].insert(name.to_owned(), uid);
                        }
                        None => bad(report, &row.key, col, "the UID is not 3 bytes, or is 0"),
                    }
                } else if col == kind.name_column() {
                    let Some(uid) = Uid::from_bytes(&row.key) else {
                        bad(report, &row.key, col, "the row is not a 3-byte UID");
                        continue;
                    };
                    match std::str::from_utf8(&cell.value)
                        .ok()
                        .filter(|n| !n.is_empty())
                    {
                        Some(name) => {
                            maps.by_uid[k].insert(uid, name.to_owned());
                        }
                        None => bad(report, &row.key, col, "the name is empty or not UTF-8"),
                    }
                } else if col == kind.max_column() && row.key[..] == *COUNTER_ROW {
                    counters[k] = Some(
                        <[u8; 8]>::try_from(&cell.value[..])
                            .ok()
                            .map(u64::from_be_bytes)
                            .and_then(|n| u32::try_from(n).ok())
                            .filter(|n| *n <= MAX_UID)
                            .ok_or("the counter is not an 8-byte number up to 2^24 - 1"),
                    );
                }
            }
        }
    }
    for kind in UidKind::ALL {
        cross_check(kind, &maps, counters[kind as usize], report);
        report.counts.uids += maps.by_name[kind as usize].len() as u64;
    }
    Ok(maps)
}

/// The two directions of `kind` against each other and against the counter.
fn cross_check(
    kind: UidKind,
    maps: &UidMaps,
    counter: Option<Result<u32, &'static str>>,
    report: &mut FsckReport,
) {
    let (by_name, by_uid) = (&maps.by_name[kind as usize], &maps.by_uid[kind as usize]);
    let mut names_of: HashMap<Uid, usize> = HashMap::new();
    for uid in by_name.values() {
        *names_of.entry(*uid).or_default() += 1;
    }
    for (name, uid) in by_name {
        let detail = match by_uid.get(uid) {
            Some(back) if back == name => continue,
            Some(back) => format!("{kind} {name:?} has UID {uid}, whose name is {back:?}"),
            None => format!("{kind} {name:?} has UID {uid}, which has no name"),
        };
        let remedy = match by_uid.get(uid) {
            None if names_of.get(uid) == Some(&1) => FsckRemedy::AddUidName {
                kind,
                uid: *uid,
                name: name.clone(),
            },
            _ => FsckRemedy::None,
        };
        report.add(
            UID_TABLE,
            name.as_bytes(),
            Some(kind.id_column()),
            detail,
            remedy,
        );
    }
    for (uid, name) in by_uid {
        let detail = match by_name.get(name) {
            Some(there) if there == uid => continue,
            Some(there) => format!("{kind} UID {uid} is named {name:?}, whose UID is {there}"),
            None => format!("{kind} UID {uid} is named {name:?}, which has no UID"),
        };
        let taken = names_of.contains_key(uid);
        let remedy = match by_name.get(name) {
            None if !taken => FsckRemedy::AddUidId {
                kind,
                name: name.clone(),
                uid: *uid,
            },
            _ => FsckRemedy::None,
        };
        report.add(
            UID_TABLE,
            &uid.to_bytes(),
            Some(kind.name_column()),
            detail,
            remedy,
        );
    }
    let used = by_name
        .values()
        .chain(by_uid.keys())
        .map(|u| u.get())
        .max()
        .unwrap_or(0);
    let detail = match counter {
        Some(Ok(max)) if max >= used => return,
        Some(Ok(max)) => format!("{kind} UID {used} is in use, above the counter's {max}"),
        Some(Err(e)) => e.to_string(),
        None if used == 0 => return,
        None => format!("{kind} UIDs up to {used} are in use, but there is no counter"),
    };
    report.add(
        UID_TABLE,
        COUNTER_ROW,
        Some(kind.max_column()),
        detail,
        FsckRemedy::RaiseUidCounter { kind, to: used },
    );
}
