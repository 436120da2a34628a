//! The read path: a [`ReadRequest`] names the series and the time range, `fetch.rs` finds their
//! rows, and each series' rows are decoded here, with `cell.rs` and `block.rs`, into pairs or
//! columns.

use roaring::RoaringBitmap;
use strata_engine::Cell;

use crate::block::{block_len, decode_block, decode_block_into_columns};
use crate::cell::{RowParts, decode_column, decode_row, decode_value};
use crate::error::{Error, Result};
use crate::fetch::{FoundRow, Plan, ROW_SPAN_MS};
use crate::filter::Filter;
use crate::point_columns::{ColumnKind, PointColumns};
use crate::rowkey::{ROW_SPAN_SECS, Tsuid, base_time_of};
#[cfg(test)]
use crate::series_index::SeriesIndex;
use crate::trees::DataView;
use crate::tsdb::{SeriesInfo, Tsdb};
use crate::value::Value;

/// The points of one series in a time range.
#[derive(Debug, Clone, PartialEq)]
pub struct Series<P> {
    /// Dense series id.
    pub id: u32,
    /// The TSUID.
    pub tsuid: Tsuid,
    /// Metric name.
    pub metric: String,
    /// Tags, in TSUID order (by tag-key UID).
    pub tags: Vec<(String, String)>,
    /// The points, in time order, one per instant.
    pub points: P,
}

/// A series' points as `(ts_ms, value)` pairs.
pub type SeriesPoints = Series<Vec<(i64, Value)>>;

/// A series' points as columns.
pub type SeriesColumns = Series<PointColumns>;

/// What to read: some series, and the points of a time range, `[start_ms, end_ms]` inclusive.
///
/// A series is returned when it has a row in one of the hours the range touches, even if
/// none of that row's points fall in the range (OpenTSDB returns such series with empty
/// `dps`). Series come in id order; unknown ids are ignored.
#[derive(Debug, Clone, Copy)]
pub struct ReadRequest<'a> {
    series: Selection<'a>,
    start_ms: i64,
    end_ms: i64,
    request_series_hours: u64,
}

/// Which series a [`ReadRequest`] reads.
#[derive(Debug, Clone, Copy)]
enum Selection<'a> {
    Ids(&'a RoaringBitmap),
    Metric(&'a str, &'a [Filter]),
}

impl<'a> ReadRequest<'a> {
    /// The series `ids`.
    pub fn ids(ids: &'a RoaringBitmap, start_ms: i64, end_ms: i64) -> Self {
        ReadRequest {
            series: Selection::Ids(ids),
            start_ms,
            end_ms,
            request_series_hours: 0,
        }
    }

    /// The series of `metric` that pass `filters` (as [`Tsdb::find_series`]).
    pub fn metric(metric: &'a str, filters: &'a [Filter], start_ms: i64, end_ms: i64) -> Self {
        ReadRequest {
            series: Selection::Metric(metric, filters),
            start_ms,
            end_ms,
            request_series_hours: 0,
        }
    }

    /// Marks the read as one of the reads of a request that reads `series_hours` series-hours
    /// in all (a query's sub-queries, or the parts of a split read). A read fills the block
    /// cache only if neither it nor its request reads more than a quarter of the cache: a large
    /// request would push out most of what other reads use, and would not stay in the cache
    /// anyway.
    pub fn in_request(mut self, series_hours: u64) -> Self {
        self.request_series_hours = series_hours;
        self
    }
}

impl Tsdb {
    /// Reads the series and points `req` selects.
    pub fn read(&self, req: &ReadRequest<'_>) -> Result<Vec<SeriesPoints>> {
        self.read_planned(req, Plan::Auto)
    }

    /// As [`Tsdb::read`], handing each series to `f` as soon as it is decoded instead of
    /// collecting them: one series' points are in memory at a time, in a buffer `f` may take
    /// (`std::mem::take`) or leave to be reused for the next series. Series come in id order.
    /// An error of `f` stops the read and is returned as it is; the read's own errors are
    /// converted into the caller's error type.
    pub fn read_each<E: From<Error>>(
        &self,
        req: &ReadRequest<'_>,
        f: impl FnMut(&mut SeriesPoints) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.read_each_planned(req, Plan::Auto, f)
    }

    /// [`Tsdb::read_each`], handing each series' points over as columns.
    pub fn read_columns_each<E: From<Error>>(
        &self,
        req: &ReadRequest<'_>,
        f: impl FnMut(&mut SeriesColumns) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.read_each_planned(req, Plan::Auto, f)
    }

    pub(crate) fn read_planned(
        &self,
        req: &ReadRequest<'_>,
        plan: Plan,
    ) -> Result<Vec<SeriesPoints>> {
        let mut result = Vec::new();
        self.read_each_planned(req, plan, |s| {
            result.push(SeriesPoints {
                id: s.id,
                tsuid: s.tsuid.clone(),
                points: std::mem::take(&mut s.points),
                metric: std::mem::take(&mut s.metric),
                tags: std::mem::take(&mut s.tags),
            });
            Ok::<(), Error>(())
        })?;
        Ok(result)
    }

    /// Everything the index knows about series `id`.
    pub fn series_info(&self, id: u32) -> Result<Option<SeriesInfo>> {
        let (tsuid, mut last, exact) = {
            let index = self.index().read();
            match index.series.get(id as usize) {
                Some(s) => (s.tsuid.clone(), s.last, s.last_exact),
                None => return Ok(None),
            }
        };
        if !exact && let Some(known) = last {
            last = Some(self.refine_last(id, known)?);
        }
        if let (Some((ts, _)), Some(floor)) = (last, self.policy().floor_ms(tsuid.metric()))
            && ts < floor
        {
            last = None;
        }
        let (metric, tags) = self.names_of(&tsuid)?;
        Ok(Some(SeriesInfo {
            id,
            tsuid,
            metric,
            tags,
            last,
        }))
    }

    /// The newest point of series `id` when the index only has a lower bound `known` for it
    /// (after a restart): the newest point is in the row of `known`, so that row is read.
    fn refine_last(&self, id: u32, known: (i64, Value)) -> Result<(i64, Value)> {
        let row_start = i64::from(base_time_of(known.0)) * 1000;
        let row_end = row_start + i64::from(ROW_SPAN_SECS) * 1000 - 1;
        let mut ids = RoaringBitmap::new();
        ids.insert(id);
        let found = self
            .read(&ReadRequest::ids(&ids, row_start, row_end))?
            .into_iter()
            .find_map(|s| s.points.last().copied());
        let newest = match found {
            Some(p) if p.0 >= known.0 => p,
            _ => known,
        };
        let _state = self.store().writes.lock();
        let mut index = self.index().write();
        let Some(s) = index.series.get_mut(id as usize) else {
            return Ok(newest);
        };
        // Writes since the read above moved `s.last` forward only when newer (or as new: the
        // later write wins), and a delete sets it exactly; either way the larger is the newest.
        if !s.last_exact {
            match s.last {
                Some(cur) if cur.0 >= newest.0 => {}
                _ => s.last = Some(newest),
            }
            s.last_exact = true;
        }
        Ok(s.last.unwrap_or(newest))
    }

    /// The index with every newest point made exact, for tests that compare indexes.
    #[cfg(test)]
    pub(crate) fn index_snapshot(&self) -> Result<SeriesIndex> {
        // Every id, deleted series' too; the guard must be gone before `series_info` locks.
        let ids = self.index().read().len() as u32;
        for id in 0..ids {
            self.series_info(id)?;
        }
        Ok(self.index().read().clone())
    }

    /// Splits `ids` into at most `parts` non-empty sets to read in parallel. A salt bucket's
    /// series stay in one set, so that when the reads scan, each bucket is scanned by one read
    /// only; buckets go to the set with the fewest series so far, largest first. Ids the index
    /// does not know go with bucket 0.
    pub fn split_for_read(&self, ids: &RoaringBitmap, parts: usize) -> Vec<RoaringBitmap> {
        let buckets = usize::from(self.fetcher().buckets).max(1);
        let mut by_salt = vec![RoaringBitmap::new(); buckets];
        {
            let index = self.index().read();
            for id in ids {
                let salt = index.series.get(id as usize).map_or(0, |s| s.salt);
                if let Some(b) = by_salt.get_mut(usize::from(salt)) {
                    // Not `push`: see `series_index::add`.
                    b.insert(id);
                }
            }
        }
        by_salt.sort_by_key(|b| std::cmp::Reverse(b.len()));
        let mut out = vec![RoaringBitmap::new(); parts.max(1)];
        for b in by_salt.into_iter().filter(|b| !b.is_empty()) {
            if let Some(lightest) = out.iter_mut().min_by_key(|p| p.len()) {
                *lightest |= b;
            }
        }
        out.retain(|p| !p.is_empty());
        out
    }

    fn read_each_planned<P: PointSink, E: From<Error>>(
        &self,
        req: &ReadRequest<'_>,
        plan: Plan,
        mut f: impl FnMut(&mut Series<P>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let found;
        let ids = match req.series {
            Selection::Ids(ids) => ids,
            Selection::Metric(metric, filters) => {
                found = self.find_series(metric, filters)?;
                &found
            }
        };
        let (start_ms, end_ms) = (req.start_ms, req.end_ms);
        // Expired points are never returned: no row is read before the oldest data any metric
        // keeps, and each series' points start at its own metric's retention.
        let policy = self.policy();
        let fetch_start = policy
            .oldest_kept_ms()
            .map_or(start_ms, |f| start_ms.max(f));
        let fetch = |view: &DataView| {
            self.fetcher().fetch_rows(
                view,
                ids,
                fetch_start,
                end_ms,
                (plan, req.request_series_hours),
            )
        };
        let mut rows = match fetch(&self.store().data_view()) {
            // A replica that fell behind the writer's deletes reads from files that are gone:
            // it takes in the writer's newest files and reads again (the series index stays,
            // so `ids` name the same series).
            Err(e) if self.is_read_only() && is_missing_object(&e) => {
                self.catch_up_files()?;
                fetch(&self.store().data_view())?
            }
            other => other?,
        };
        // Group the rows by series, keeping each series' rows in the order they came (hour
        // order, from both plans), so every series is decoded into one exactly sized vector.
        rows.sort_by_key(|r| r.id);
        let nrows = rows.len() as u64;
        let mut npoints = 0u64;
        let mut points = P::take_buffer();
        for group in rows.chunk_by(|a, b| a.id == b.id) {
            let id = group[0].id;
            let Some(tsuid) = self
                .index()
                .read()
                .series
                .get(id as usize)
                .map(|s| s.tsuid.clone())
            else {
                continue;
            };
            let start_ms = policy
                .floor_ms(tsuid.metric())
                .map_or(start_ms, |f| start_ms.max(f));
            // Rows wholly before the series' retention are left out, and a series with no
            // other row is not returned at all.
            let live = |r: &&FoundRow| i64::from(r.base_time) * 1000 + ROW_SPAN_MS > start_ms;
            if !group.iter().any(|r| live(&r)) {
                continue;
            }
            let capacity: usize = group.iter().map(|r| row_len_hint(&r.row.cells)).sum();
            points.clear();
            points.reserve(capacity);
            // Each row's points are in order; the series is if every row starts after the last.
            let mut sorted = true;
            for r in group.iter().filter(live) {
                let before = points.len();
                let prev_last = before.checked_sub(1).map(|i| points.ts(i));
                points.append_row(r.base_time, &r.row.cells)?;
                if let Some(prev) = prev_last
                    && points.len() > before
                {
                    sorted &= prev < points.ts(before);
                }
                // Only the rows at the ends of the range hold points outside it.
                let row_start = i64::from(r.base_time) * 1000;
                if row_start < start_ms || row_start + ROW_SPAN_MS - 1 > end_ms {
                    points.trim(before, start_ms, end_ms);
                }
            }
            // Rows arrive in hour order; sort only if some did not.
            if !sorted {
                points.sort();
            }
            npoints += points.len() as u64;
            let (metric, tags) = self.names_of(&tsuid)?;
            let mut series = Series {
                id,
                tsuid,
                metric,
                tags,
                points: std::mem::take(&mut points),
            };
            f(&mut series)?;
            points = series.points;
        }
        self.counters().read(nrows, npoints);
        points.keep_buffer();
        Ok(())
    }
}

/// A series' points as a read collects them, as pairs or as columns.
trait PointSink: Default {
    fn len(&self) -> usize;
    fn clear(&mut self);
    fn reserve(&mut self, n: usize);
    /// The timestamp of point `i` (`i < len`).
    fn ts(&self, i: usize) -> i64;
    /// Appends the points of one data row, in time order.
    fn append_row(&mut self, base_time: u32, cells: &[Cell]) -> Result<()>;
    /// Keeps of the points from `from` on only those in `[start_ms, end_ms]` (they are sorted).
    fn trim(&mut self, from: usize, start_ms: i64, end_ms: i64);
    /// Sorts the points by time.
    fn sort(&mut self);
    /// A buffer for a read to start with.
    fn take_buffer() -> Self {
        Self::default()
    }
    /// Hands the buffer of a finished read back.
    fn keep_buffer(self) {}
}

impl PointSink for Vec<(i64, Value)> {
    fn len(&self) -> usize {
        self.len()
    }

    fn clear(&mut self) {
        self.clear();
    }

    fn reserve(&mut self, n: usize) {
        self.reserve(n);
    }

    fn ts(&self, i: usize) -> i64 {
        self[i].0
    }

    fn append_row(&mut self, base_time: u32, cells: &[Cell]) -> Result<()> {
        append_row(base_time, cells, self)
    }

    fn trim(&mut self, from: usize, start_ms: i64, end_ms: i64) {
        let new = &self[from..];
        let lo = from + new.partition_point(|p| p.0 < start_ms);
        let hi = from + new.partition_point(|p| p.0 <= end_ms);
        self.truncate(hi);
        self.drain(from..lo);
    }

    fn sort(&mut self) {
        self.sort_by_key(|p| p.0);
    }

    fn take_buffer() -> Self {
        POINT_BUFFER.with(|b| std::mem::take(&mut *b.borrow_mut()))
    }

    fn keep_buffer(mut self) {
        if self.capacity() <= KEEP_POINT_BUFFER {
            self.clear();
            POINT_BUFFER.with(|b| *b.borrow_mut() = self);
        }
    }
}

impl PointSink for PointColumns {
    fn len(&self) -> usize {
        self.ts.len()
    }

    fn clear(&mut self) {
        PointColumns::clear(self);
    }

    fn reserve(&mut self, n: usize) {
        PointColumns::reserve(self, n);
    }

    fn ts(&self, i: usize) -> i64 {
        self.ts[i]
    }

    fn append_row(&mut self, base_time: u32, cells: &[Cell]) -> Result<()> {
        let Some(block) = RowParts::split(cells)?.lone_block() else {
            // Raw cells, or several parts to merge: through the pairs.
            let mut points = Vec::new();
            append_row(base_time, cells, &mut points)?;
            for (t, v) in points {
                self.push(t, v);
            }
            return Ok(());
        };
        let before = self.len();
        decode_block_into_columns(block, self)?;
        let ends = (self.ts.get(before).copied(), self.ts.last().copied());
        check_row_hour(base_time, ends).inspect_err(|_| self.truncate(before))
    }

    fn trim(&mut self, from: usize, start_ms: i64, end_ms: i64) {
        let new = &self.ts[from..];
        let lo = from + new.partition_point(|&t| t < start_ms);
        let hi = from + new.partition_point(|&t| t <= end_ms);
        self.truncate(hi);
        self.ts.drain(from..lo);
        match self.kind {
            ColumnKind::Ints => drop(self.ints.drain(from..lo)),
            ColumnKind::Floats => drop(self.floats.drain(from..lo)),
            ColumnKind::Mixed => drop(self.mixed.drain(from..lo)),
        }
    }

    fn take_buffer() -> Self {
        COLUMN_BUFFER.with(|b| std::mem::take(&mut *b.borrow_mut()))
    }

    fn keep_buffer(mut self) {
        if self
            .ts
            .capacity()
            .max(self.ints.capacity())
            .max(self.floats.capacity())
            .max(self.mixed.capacity())
            <= KEEP_POINT_BUFFER
        {
            self.clear();
            COLUMN_BUFFER.with(|b| *b.borrow_mut() = self);
        }
    }

    fn sort(&mut self) {
        let mut order: Vec<usize> = (0..self.ts.len()).collect();
        order.sort_by_key(|&i| self.ts[i]);
        self.ts = order.iter().map(|&i| self.ts[i]).collect();
        match self.kind {
            ColumnKind::Ints => self.ints = order.iter().map(|&i| self.ints[i]).collect(),
            ColumnKind::Floats => self.floats = order.iter().map(|&i| self.floats[i]).collect(),
            ColumnKind::Mixed => self.mixed = order.iter().map(|&i| self.mixed[i]).collect(),
        }
    }
}

/// Points a thread's read buffer may keep between reads (a day of one 10 s series is 8,640).
const KEEP_POINT_BUFFER: usize = 1 << 16;

thread_local! {
    /// The point buffer of this thread's last read, kept for its next one: a fresh buffer of a
    /// few hundred kB per read is fresh memory from the OS each time (the allocator returns
    /// freed memory within milliseconds), whose pages the kernel zeroes again for every read.
    static POINT_BUFFER: std::cell::RefCell<Vec<(i64, Value)>> =
        const { std::cell::RefCell::new(Vec::new()) };

    /// The same for reads by columns.
    static COLUMN_BUFFER: std::cell::RefCell<PointColumns> =
        std::cell::RefCell::new(PointColumns::default());
}

/// The number of points a row holds, for sizing the output: the blocks' counts from their
/// headers plus the raw cells (an overestimate when later parts replace earlier points).
fn row_len_hint(cells: &[Cell]) -> usize {
    match RowParts::split(cells) {
        Ok(parts) => {
            parts
                .blocks()
                .map(|b| block_len(b).unwrap_or(0))
                .sum::<usize>()
                + parts.raw.len()
        }
        Err(_) => cells.len(),
    }
}

/// Appends the points of one data row to `out`, in time order: a lone block (the common case
/// after row compaction, or after a flush folded the row) decoded straight into `out`, the raw
/// cells when the row has no block, and `cell::decode_row`'s merge otherwise.
fn append_row(base_time: u32, cells: &[Cell], out: &mut Vec<(i64, Value)>) -> Result<()> {
    let parts = RowParts::split(cells)?;
    let base_ms = i64::from(base_time) * 1000;
    if let Some(block) = parts.lone_block() {
        let before = out.len();
        decode_block(block, out)?;
        let ends = (out.get(before).map(|p| p.0), out.last().map(|p| p.0));
        return check_row_hour(base_time, ends).inspect_err(|_| out.truncate(before));
    }
    match parts.block_count() {
        0 => {
            out.reserve(parts.raw.len());
            for cell in parts.raw {
                let off = decode_column(&cell.column)?;
                out.push((
                    base_ms + i64::from(off),
                    decode_value(&cell.column, &cell.value)?,
                ));
            }
        }
        _ => out.extend(decode_row(base_time, cells)?),
    }
    Ok(())
}

/// Fails if the points of a block decoded from the row at `base_time` leave the row's hour:
/// `ends` are its first and last timestamps (block timestamps strictly increase, so the ends
/// bound every point).
fn check_row_hour(base_time: u32, ends: (Option<i64>, Option<i64>)) -> Result<()> {
    let base_ms = i64::from(base_time) * 1000;
    let (Some(first), Some(last)) = ends else {
        return Ok(());
    };
    if first >= base_ms && last < base_ms + ROW_SPAN_MS {
        return Ok(());
    }
    let bad = if first < base_ms { first } else { last };
    Err(Error::corruption(
        "block",
        &base_time.to_be_bytes(),
        format!("point at {bad} ms lies outside the row's hour"),
    ))
}

/// Whether `e` is a read of an object the store no longer has (the engine's I/O error of
/// kind `NotFound`, not a missing table).
fn is_missing_object(e: &Error) -> bool {
    matches!(
        e,
        Error::Engine(strata_engine::Error::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound
    )
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::point::PointRef;
    use crate::point_columns::ValueColumn;
    use crate::tsdb::TsdbOptions;

    #[test]
    fn gets_and_scans_agree() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let db = Tsdb::open(dir.path(), TsdbOptions::default())?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let hosts: Vec<String> = (0..40).map(|i| format!("h{i}")).collect();
        for _ in 0..20 {
            let tags: Vec<[(&str, &str); 1]> = (0..100)
                .map(|_| [("host", hosts[rng.gen_range(0..hosts.len())].as_str())])
                .collect();
            let points: Vec<PointRef<'_>> = tags
                .iter()
                .map(|t| PointRef {
                    metric: "m",
                    tags: t,
                    timestamp: 1_356_998_400_000 + rng.gen_range(0..5 * 3_600_000),
                    value: Value::Int(rng.gen_range(0..1000)),
                })
                .collect();
            for r in db.write(&points) {
                r?;
            }
        }
        let all = db.find_series("m", &[])?;
        let some: RoaringBitmap = all.iter().step_by(7).collect();
        // A split part holds whole salt buckets: scans read those buckets without a filter.
        let parts = db.split_for_read(&all, 3);
        assert_eq!(parts.len(), 3);
        let mut seen = RoaringBitmap::new();
        for part in &parts {
            assert!(seen.is_disjoint(part));
            seen |= part;
        }
        assert_eq!(seen, all);
        let salt_of = |id: u32| db.index().read().series[id as usize].salt;
        for (i, part) in parts.iter().enumerate() {
            let salts: std::collections::BTreeSet<u8> = part.iter().map(salt_of).collect();
            for other in parts.iter().skip(i + 1) {
                assert!(other.iter().all(|id| !salts.contains(&salt_of(id))));
            }
        }
        // From the memtable, from level-0 files beside a memtable holding part of the rows
        // again (gets read those rows alone), and from compacted files (batched gets keep
        // one cursor per file).
        for stage in ["memtable", "flushed", "compacted"] {
            match stage {
                "flushed" => {
                    db.flush()?;
                    let tags = [("host", hosts[3].as_str())];
                    let p = PointRef {
                        metric: "m",
                        tags: &tags,
                        timestamp: 1_356_998_400_000 + 7_200_000,
                        value: Value::Int(5),
                    };
                    for r in db.write(&[p]) {
                        r?;
                    }
                }
                "compacted" => {
                    db.flush()?;
                    db.compact_all()?;
                }
                _ => {}
            }
            for ids in [&all, &some, &parts[0], &parts[2]] {
                for (a, b) in [
                    (1_356_990_000_000, 1_357_100_000_000),
                    (1_356_998_400_000 + 1_000_000, 1_356_998_400_000 + 9_000_000),
                ] {
                    let g = db.read_planned(&ReadRequest::ids(ids, a, b), Plan::Gets)?;
                    let s = db.read_planned(&ReadRequest::ids(ids, a, b), Plan::Scans)?;
                    assert_eq!(g, s, "{stage}");
                    assert_eq!(g.len() as u64, ids.len());
                }
            }
        }
        Ok(())
    }

    /// What a column read and a pair read must agree on: per series, the id, names, and every
    /// point with its value exactly as written (`Value`'s equality is bitwise for floats).
    type Digest = Vec<(u32, String, Vec<(i64, Value)>)>;

    fn digest_pairs(series: &[SeriesPoints]) -> Digest {
        series
            .iter()
            .map(|s| (s.id, format!("{} {:?}", s.metric, s.tags), s.points.clone()))
            .collect()
    }

    /// The column read's digest, and per series whether its values came as integers, floats or
    /// mixed (0, 1, 2).
    fn digest_columns(db: &Tsdb, ids: &RoaringBitmap, a: i64, b: i64) -> Result<(Digest, Vec<u8>)> {
        let mut out = Vec::new();
        let mut kinds = Vec::new();
        db.read_columns_each(&ReadRequest::ids(ids, a, b), |s: &mut SeriesColumns| {
            let c = &s.points;
            let (n, kind) = match c.values() {
                ValueColumn::Ints(v) => (v.len(), 0),
                ValueColumn::Floats(v) => (v.len(), 1),
                ValueColumn::Mixed(v) => (v.len(), 2),
            };
            assert_eq!(n, c.len());
            let points = (0..c.len()).filter_map(|i| c.get(i)).collect();
            out.push((s.id, format!("{} {:?}", s.metric, s.tags), points));
            kinds.push(kind);
            Ok::<(), Error>(())
        })?;
        Ok((out, kinds))
    }

    #[test]
    fn columns_read_the_same_points_as_pairs() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let db = Tsdb::open(dir.path(), TsdbOptions::default())?;
        let t0 = 1_356_998_400_000i64;
        // Integers, floats, integers then floats within an hour, and floats then integers in
        // a later hour: each series over three hours, unaligned to the query range.
        let write = |round: i64| -> Result<()> {
            for (host, kind) in [("ints", 0), ("floats", 1), ("mixed", 2), ("late", 3)] {
                let tags = [("host", host)];
                let points: Vec<PointRef<'_>> = (0..300)
                    .map(|i| {
                        let ts = t0 + i * 37_000 + round * 11_000;
                        let int = match kind {
                            0 => true,
                            1 => false,
                            2 => i % 3 != 0,
                            _ => ts < t0 + 3_600_000,
                        };
                        let v = if int && kind == 2 {
                            // Past 2^53: a conversion to f64 would lose the low bits.
                            Value::Int(i64::MAX - i * 7)
                        } else if int {
                            Value::Int(i * 7 - 500)
                        } else {
                            Value::Float(i as f64 / 4.0)
                        };
                        PointRef {
                            metric: "m",
                            tags: &tags,
                            timestamp: ts,
                            value: v,
                        }
                    })
                    .collect();
                for r in db.write(&points) {
                    r?;
                }
            }
            Ok(())
        };
        write(0)?;
        let all = db.find_series("m", &[])?;
        let ranges = [
            (t0 - 5_000, t0 + 20_000_000),
            (t0 + 1_000_000, t0 + 8_000_000),
            (t0 + 3_996_000, t0 + 3_996_000),
        ];
        // Raw cells in the memtable, blocks after row compaction, and blocks beside newer raw
        // cells of the same rows.
        for stage in ["raw", "compacted", "blocks and raw"] {
            match stage {
                "compacted" => {
                    db.flush()?;
                    db.rowcompact_all()?;
                }
                "blocks and raw" => write(1)?,
                _ => {}
            }
            for (a, b) in ranges {
                let pairs = digest_pairs(&db.read(&ReadRequest::ids(&all, a, b))?);
                assert!(pairs.iter().any(|s| !s.2.is_empty()), "{stage}");
                let (cols, kinds) = digest_columns(&db, &all, a, b)?;
                assert!(cols == pairs, "{stage} {a} {b}: the column read differs");
                // Each series reads in the narrowest column that holds its values as written.
                // (A row trimmed to the range may leave a series mixed with one kind left.)
                for ((_, _, points), kind) in pairs.iter().zip(&kinds) {
                    let floats = points.iter().filter(|p| p.1.is_float()).count();
                    match kind {
                        0 => assert_eq!(floats, 0, "{stage} {a} {b}"),
                        1 => assert_eq!(floats, points.len(), "{stage} {a} {b}"),
                        _ => {}
                    }
                }
                assert!(kinds.contains(&2), "{stage} {a} {b}: no mixed series");
            }
        }
        Ok(())
    }

    #[test]
    fn large_reads_leave_the_block_cache_as_it_is() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let opts = || {
            let mut opts = TsdbOptions::default();
            // 16 shards of 64 KiB; a quarter of it is 256 KiB, about 440 rows.
            opts.db.block_cache_bytes = 1 << 20;
            opts
        };
        {
            let db = Tsdb::open(dir.path(), opts())?;
            let hosts: Vec<String> = (0..600).map(|i| format!("h{i:03}")).collect();
            for h in &hosts {
                let tags = [("host", h.as_str())];
                let points: Vec<PointRef<'_>> = (0..360)
                    .map(|i| PointRef {
                        metric: "m",
                        tags: &tags,
                        timestamp: 1_356_998_400_000 + i * 10_000,
                        value: Value::Int(i),
                    })
                    .collect();
                for r in db.write(&points) {
                    r?;
                }
            }
            db.flush()?;
        }
        let (a, b) = (1_356_998_400_000, 1_356_998_400_000 + 3_599_000);
        for plan in [Plan::Gets, Plan::Scans] {
            // Each plan starts from an empty cache.
            let db = Tsdb::open(dir.path(), opts())?;
            let misses = || db.engine_stats().cache_misses;
            let all = db.find_series("m", &[])?;
            let one: RoaringBitmap = all.iter().take(1).collect();
            // 600 rows: the second read misses again.
            db.read_planned(&ReadRequest::ids(&all, a, b), plan)?;
            let before = misses();
            db.read_planned(&ReadRequest::ids(&all, a, b), plan)?;
            assert!(misses() > before, "{plan:?}: a large read filled the cache");
            // One row: cached by the first read.
            db.read_planned(&ReadRequest::ids(&one, a, b), plan)?;
            let before = misses();
            db.read_planned(&ReadRequest::ids(&one, a, b), plan)?;
            assert_eq!(misses(), before, "{plan:?}: a small read was not cached");
        }
        Ok(())
    }

    #[test]
    fn index_equals_itself_after_reopen() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let before = {
            let db = Tsdb::open(dir.path(), TsdbOptions::default())?;
            for i in 0..50i64 {
                let h = format!("h{}", i % 13);
                let c = format!("c{}", i % 4);
                let tags = [("host", h.as_str()), ("cpu", c.as_str())];
                let p = PointRef {
                    metric: "m",
                    tags: &tags,
                    timestamp: 1_000 + i,
                    value: Value::Int(i),
                };
                for r in db.write(&[p]) {
                    r?;
                }
            }
            db.delete(&db.find_series("m", &[])?, 1_040_000, 1_060_000)?;
            db.index_snapshot()?
        };
        let db = Tsdb::open(dir.path(), TsdbOptions::default())?;
        // `index_snapshot` makes every last point exact, as `series_info` does on demand.
        assert_eq!(db.index_snapshot()?, before);
        Ok(())
    }
}
