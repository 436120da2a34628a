//! Line protocol series resolved before, remembered by the line that named them: the series
//! section (measurement and tags, as sent) once, with the names of the fields seen under it.
//!
//! A line of several fields is several series under one series section. Keyed by the section,
//! a line is found with one hash of its section and one probe, and its fields are then compared
//! with the short names kept beside the section; keyed by section and field, each field would
//! hash the section again and reach its own key, each a cache miss on a large cache.
//!
//! Shared by every connection, as [`crate::KnownSeries`] is and for the same reasons.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use parking_lot::{RwLock, RwLockReadGuard};
use rustc_hash::FxBuildHasher;
use strata_tsdb::{SeriesHandle, Tsdb};

/// Series (fields) remembered at most. An entry costs its section (about 80 bytes for a
/// Telegraf line), its field names and a handle per field, so this bounds the cache near
/// 100 MB; past it the cache starts again empty.
const MAX_SERIES: usize = 1 << 20;

/// Fields with longer names are not remembered: a name is kept after a length byte.
const MAX_FIELD_BYTES: usize = u8::MAX as usize;

/// Series handles by series section and field name; see the module docs.
#[derive(Debug, Default)]
pub struct KnownLines {
    inner: RwLock<Lines>,
}

#[derive(Debug, Default)]
struct Lines {
    /// The [`Tsdb::series_epoch`] the handles were made in.
    epoch: u64,
    table: HashTable<LineEntry>,
    /// Fields remembered, across every entry.
    series: usize,
}

/// One series section and the fields seen under it.
#[derive(Debug)]
struct LineEntry {
    hash: u64,
    /// The series section, then each field's name after its length byte, in the order the
    /// fields were first remembered: one allocation, so a line's lookup reads it once.
    text: Box<[u8]>,
    section_len: usize,
    /// The handle of each field, in the order of `text`.
    handles: Vec<SeriesHandle>,
}

impl LineEntry {
    fn section(&self) -> &[u8] {
        &self.text[..self.section_len]
    }

    /// The field name at `at` in `text`, and where the next one starts.
    fn name_at(&self, at: usize) -> Option<(&[u8], usize)> {
        let len = usize::from(*self.text.get(at)?);
        let end = at + 1 + len;
        Some((self.text.get(at + 1..end)?, end))
    }

    /// The index of field `name`, scanning from the first.
    fn find(&self, name: &[u8]) -> Option<(usize, usize)> {
        let mut at = self.section_len;
        let mut k = 0;
        while let Some((n, next)) = self.name_at(at) {
            if n == name {
                return Some((k, next));
            }
            at = next;
            k += 1;
        }
        None
    }

    fn push(&mut self, name: &[u8], handle: SeriesHandle) {
        let mut text = std::mem::take(&mut self.text).into_vec();
        text.reserve_exact(1 + name.len());
        // The caller checked the length against MAX_FIELD_BYTES.
        text.push(name.len() as u8);
        text.extend_from_slice(name);
        self.text = text.into_boxed_slice();
        self.handles.push(handle);
    }
}

/// A read view of a [`KnownLines`], for the lookups of one request.
#[derive(Debug)]
pub(crate) struct LinesReader<'a> {
    guard: RwLockReadGuard<'a, Lines>,
    epoch: u64,
}

impl LinesReader<'_> {
    /// The fields known under `section`, if the section is known and its handles still right.
    pub(crate) fn line(&self, section: &[u8]) -> Option<KnownLine<'_>> {
        if self.guard.epoch != self.epoch {
            return None;
        }
        let hash = FxBuildHasher.hash_one(section);
        let entry = self
            .guard
            .table
            .find(hash, |e| e.hash == hash && e.section() == section)?;
        Some(KnownLine {
            entry,
            at: entry.section_len,
            next: 0,
        })
    }
}

/// The known fields of one line's series section.
#[derive(Debug)]
pub(crate) struct KnownLine<'a> {
    entry: &'a LineEntry,
    /// Where the field after the last one found starts in the entry's text, and its index:
    /// a line's fields mostly come in the order they were remembered.
    at: usize,
    next: usize,
}

impl<'a> KnownLine<'a> {
    /// The handle of the series of field `name` under this line's section, if known.
    pub(crate) fn field(&mut self, name: &[u8]) -> Option<&'a SeriesHandle> {
        let entry = self.entry;
        let (k, next) = match entry.name_at(self.at) {
            Some((n, next)) if n == name => (self.next, next),
            _ => entry.find(name)?,
        };
        self.at = next;
        self.next = k + 1;
        entry.handles.get(k)
    }
}

impl KnownLines {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// A view for lookups against `tsdb`'s current series epoch.
    pub(crate) fn reader(&self, tsdb: &Tsdb) -> LinesReader<'_> {
        LinesReader {
            epoch: tsdb.series_epoch(),
            guard: self.inner.read(),
        }
    }

    /// Remembers the series of each series section and field name.
    pub(crate) fn insert<'k>(
        &self,
        entries: impl IntoIterator<Item = (&'k [u8], &'k [u8], SeriesHandle)>,
    ) {
        let mut entries = entries.into_iter().peekable();
        // Once every series is known, a request has nothing to add, and taking the write lock
        // anyway would stop every other connection's lookups.
        if entries.peek().is_none() {
            return;
        }
        let mut guard = self.inner.write();
        let lines = &mut *guard;
        for (section, field, handle) in entries {
            if field.is_empty() || field.len() > MAX_FIELD_BYTES {
                continue;
            }
            if handle.epoch() != lines.epoch {
                // As in `KnownSeries::insert`: an older handle is dropped, a newer one starts
                // the cache afresh.
                if handle.epoch() < lines.epoch {
                    continue;
                }
                lines.table.clear();
                lines.series = 0;
                lines.epoch = handle.epoch();
            }
            if lines.series >= MAX_SERIES {
                lines.table.clear();
                lines.series = 0;
            }
            let hash = FxBuildHasher.hash_one(section);
            let found = lines
                .table
                .find_mut(hash, |e| e.hash == hash && e.section() == section);
            match found {
                Some(entry) => match entry.find(field) {
                    Some((k, _)) => entry.handles[k] = handle,
                    None => {
                        entry.push(field, handle);
                        lines.series += 1;
                    }
                },
                None => {
                    let mut text = Vec::with_capacity(section.len() + 1 + field.len());
                    text.extend_from_slice(section);
                    let mut entry = LineEntry {
                        hash,
                        text: text.into_boxed_slice(),
                        section_len: section.len(),
                        handles: Vec::with_capacity(1),
                    };
                    entry.push(field, handle);
                    lines.table.insert_unique(hash, entry, |e| e.hash);
                    lines.series += 1;
                }
            }
        }
    }

    /// How many series (fields) are remembered.
    pub fn len(&self) -> usize {
        self.inner.read().series
    }

    /// Whether no series is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tsdb() -> (tempfile::TempDir, Tsdb) {
        let dir = tempfile::tempdir().unwrap();
        let tsdb = Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default()).unwrap();
        (dir, tsdb)
    }

    fn handle(tsdb: &Tsdb, metric: &str) -> SeriesHandle {
        tsdb.series_handle(metric, &[("host", "a")]).unwrap()
    }

    /// Fields are found in any order, under their own section only, and each gives its own
    /// series; a field added later to a known section is found beside the first.
    #[test]
    fn fields_are_found_by_section_and_name_in_any_order() {
        let (_dir, tsdb) = tsdb();
        let known = KnownLines::new();
        let (user, system, idle) = (
            handle(&tsdb, "cpu.user"),
            handle(&tsdb, "cpu.system"),
            handle(&tsdb, "cpu.idle"),
        );
        let used = handle(&tsdb, "mem.used");
        known.insert([
            (&b"cpu,host=a"[..], &b"user"[..], user.clone()),
            (b"cpu,host=a", b"system", system.clone()),
            (b"mem,host=a", b"used", used.clone()),
        ]);
        known.insert([(&b"cpu,host=a"[..], &b"idle"[..], idle.clone())]);
        assert_eq!(known.len(), 4);
        let reader = known.reader(&tsdb);
        // A handle shows its series' TSUID; nothing is written, so nothing else in it changes.
        let tsuid = |h: Option<&SeriesHandle>| h.map(|h| format!("{h:?}"));
        let mut line = reader.line(b"cpu,host=a").expect("section known");
        assert_eq!(tsuid(line.field(b"idle")), tsuid(Some(&idle)));
        assert_eq!(tsuid(line.field(b"user")), tsuid(Some(&user)));
        assert_eq!(tsuid(line.field(b"system")), tsuid(Some(&system)));
        assert_eq!(tsuid(line.field(b"user")), tsuid(Some(&user)));
        assert!(line.field(b"used").is_none(), "a field of another section");
        assert!(line.field(b"use").is_none(), "a prefix of a name");
        assert!(line.field(b"").is_none());
        let mut mem = reader.line(b"mem,host=a").expect("section known");
        assert_eq!(tsuid(mem.field(b"used")), tsuid(Some(&used)));
        assert!(reader.line(b"cpu,host=b").is_none());
        assert!(reader.line(b"cpu,host=").is_none(), "a prefix of a section");
    }

    /// A name too long for its length byte is not remembered, and nothing else is lost.
    #[test]
    fn long_field_names_are_not_remembered() {
        let (_dir, tsdb) = tsdb();
        let known = KnownLines::new();
        let long = vec![b'f'; MAX_FIELD_BYTES + 1];
        let h = handle(&tsdb, "cpu.user");
        known.insert([
            (&b"cpu,host=a"[..], long.as_slice(), h.clone()),
            (b"cpu,host=a", b"user", h.clone()),
        ]);
        assert_eq!(known.len(), 1);
        let reader = known.reader(&tsdb);
        let mut line = reader.line(b"cpu,host=a").expect("section known");
        assert!(line.field(&long).is_none());
        assert!(line.field(b"user").is_some());
        let longest = vec![b'g'; MAX_FIELD_BYTES];
        drop(reader);
        known.insert([(&b"cpu,host=a"[..], longest.as_slice(), h)]);
        let reader = known.reader(&tsdb);
        let mut line = reader.line(b"cpu,host=a").expect("section known");
        assert!(line.field(&longest).is_some());
        assert!(line.field(b"user").is_some());
    }
}
