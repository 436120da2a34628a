//! The series a telnet connection has sent, by their text.
//!
//! At a million series over a few connections this cache is one of the larger per-series
//! costs of the server, so the texts live in a few large chunks, not one allocation each, and
//! the hash index holds only series numbers: about 40 bytes per series besides the text, where
//! a map of shared byte strings took over 100.

use hashbrown::HashTable;
use strata_tsdb::SeriesHandle;
use xxhash_rust::xxh3::xxh3_64;

/// Series one connection remembers. A remembered series costs its text, a hash slot and a
/// handle: about 130 bytes with a devops-sized text, so this bounds a connection's cache near
/// 35 MB, enough for a relay that forwards a quarter of a million series on one connection.
/// Past it, a batch's new series go the full way, and the next batch starts with an empty
/// cache (see [`KnownSeries::start_batch`]).
const MAX_KNOWN_SERIES: usize = 1 << 18;

/// Bytes of series text one connection remembers, whatever the number of series: a bound
/// on the cache when the series' texts are long.
const MAX_KNOWN_TEXT_BYTES: usize = 64 << 20;

/// The largest text chunk. A text never spans two chunks; a longer one is not remembered.
/// Chunks start small and double up to this, so a connection with a few series (most
/// collectors) holds a few kB.
const CHUNK: usize = 64 << 10;
/// The first chunk's size.
const FIRST_CHUNK: usize = 4 << 10;

/// No series, in [`KnownSeries::next`] and [`KnownSeries::last`].
const NO_SERIES: u32 = u32::MAX;

/// Series a connection has sent: `metric ' ' tags`, as sent, to a handle.
///
/// Collectors send their series in the same order round after round, so the series that came
/// after a series last time is tried first: a comparison of its text, instead of copying,
/// hashing and looking up the line's.
///
/// Series numbers index `handles` and are handed out for one batch's points, so the cache is
/// only ever emptied between batches ([`KnownSeries::start_batch`]), never while a batch holds
/// numbers: when it is full, [`KnownSeries::add`] declines instead.
pub(super) struct KnownSeries {
    /// The [`strata_tsdb::Tsdb::series_epoch`] the handles were made in.
    pub(super) epoch: u64,
    /// Most series remembered: [`MAX_KNOWN_SERIES`], or less in tests.
    pub(super) max: usize,
    /// Most text bytes remembered: [`MAX_KNOWN_TEXT_BYTES`], or less in tests.
    max_text_bytes: usize,
    /// Series numbers, hashed by their text.
    index: HashTable<u32>,
    /// By series number: the handle, where its text is, and the number of the series that
    /// came next.
    pub(super) handles: Vec<SeriesHandle>,
    spans: Vec<Span>,
    next: Vec<u32>,
    /// The texts, back to back in chunks of at most [`CHUNK`] bytes that never grow past
    /// the size they were made with, so they never move.
    chunks: Vec<Vec<u8>>,
    /// The chunks' sizes, summed.
    text_bytes: usize,
    /// The number of the series of the last line found.
    last: u32,
}

/// Where a series' text is: chunk and offset, and its length.
#[derive(Clone, Copy)]
struct Span {
    chunk: u32,
    start: u32,
    len: u32,
}

impl Default for KnownSeries {
    fn default() -> Self {
        KnownSeries {
            epoch: 0,
            max: MAX_KNOWN_SERIES,
            max_text_bytes: MAX_KNOWN_TEXT_BYTES,
            index: HashTable::new(),
            handles: Vec::new(),
            spans: Vec::new(),
            next: Vec::new(),
            chunks: Vec::new(),
            text_bytes: 0,
            last: NO_SERIES,
        }
    }
}

impl std::fmt::Debug for KnownSeries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnownSeries")
            .field("epoch", &self.epoch)
            .field("series", &self.handles.len())
            .field("chunks", &self.chunks.len())
            .finish()
    }
}

fn text_of(chunks: &[Vec<u8>], span: Span) -> &[u8] {
    let (start, len) = (span.start as usize, span.len as usize);
    chunks
        .get(span.chunk as usize)
        .and_then(|c| c.get(start..start + len))
        .unwrap_or_default()
}

impl KnownSeries {
    /// A cache that remembers nothing: every line takes the full path.
    pub(super) fn remembering_none() -> Self {
        KnownSeries {
            max: 0,
            ..KnownSeries::default()
        }
    }

    /// Readies the cache for a batch: forgets every series if their handles may be stale
    /// (`epoch` is the current [`strata_tsdb::Tsdb::series_epoch`]) or the cache is full.
    pub(super) fn start_batch(&mut self, epoch: u64) {
        if epoch != self.epoch || self.is_full() {
            self.clear();
            self.epoch = epoch;
        }
    }

    fn is_full(&self) -> bool {
        self.handles.len() >= self.max || self.text_bytes >= self.max_text_bytes
    }

    fn clear(&mut self) {
        self.index.clear();
        self.handles.clear();
        self.spans.clear();
        self.next.clear();
        self.chunks.clear();
        self.text_bytes = 0;
        self.last = NO_SERIES;
    }

    /// Whether nothing is remembered.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.handles.is_empty()
            && self.spans.is_empty()
            && self.next.is_empty()
            && self.chunks.is_empty()
            && self.index.is_empty()
    }

    /// The handle of series number `at`.
    pub(super) fn handle(&self, at: u32) -> &SeriesHandle {
        &self.handles[at as usize]
    }

    /// The number of the series of `metric` and `tags`, if known; `key` is scratch space,
    /// and holds `metric ' ' tags` whenever this returns `None`.
    pub(super) fn find(&mut self, metric: &[u8], tags: &[u8], key: &mut Vec<u8>) -> Option<u32> {
        let guess = self.next.get(self.last as usize).copied();
        let guessed = guess.and_then(|g| Some((g, *self.spans.get(g as usize)?)));
        let found = match guessed {
            Some((g, span)) if is_series_text(text_of(&self.chunks, span), metric, tags) => g,
            _ => {
                series_text(metric, tags, key);
                let (chunks, spans) = (&self.chunks, &self.spans);
                *self.index.find(xxh3_64(key), |&n| {
                    spans
                        .get(n as usize)
                        .is_some_and(|&s| text_of(chunks, s) == &key[..])
                })?
            }
        };
        self.follow(found);
        Some(found)
    }

    /// Notes that series `at` came after the last one.
    fn follow(&mut self, at: u32) {
        if let Some(n) = self.next.get_mut(self.last as usize) {
            *n = at;
        }
        self.last = at;
    }

    /// Remembers the series of `key` and returns its number, or `None` when the cache is full
    /// or the text longer than a chunk (the numbers already handed out in this batch must
    /// stay valid, so nothing is forgotten here).
    pub(super) fn add(&mut self, key: &[u8], handle: SeriesHandle) -> Option<u32> {
        if self.is_full() || key.len() > CHUNK {
            return None;
        }
        if self
            .chunks
            .last()
            .is_none_or(|c| c.len() + key.len() > c.capacity())
        {
            let size = self
                .chunks
                .last()
                .map_or(FIRST_CHUNK, |c| (c.capacity() * 2).min(CHUNK))
                .max(key.len());
            self.chunks.push(Vec::with_capacity(size));
            self.text_bytes += size;
        }
        let chunk = self.chunks.len() - 1;
        let text = &mut self.chunks[chunk];
        let span = Span {
            chunk: chunk as u32,
            start: text.len() as u32,
            len: key.len() as u32,
        };
        text.extend_from_slice(key);
        let at = self.handles.len() as u32;
        self.handles.push(handle);
        self.spans.push(span);
        self.next.push(NO_SERIES);
        let (chunks, spans) = (&self.chunks, &self.spans);
        self.index.insert_unique(xxh3_64(key), at, |&n| {
            spans
                .get(n as usize)
                .map_or(0, |&s| xxh3_64(text_of(chunks, s)))
        });
        self.follow(at);
        Some(at)
    }
}

/// Whether `text` is `metric ' ' tags`.
fn is_series_text(text: &[u8], metric: &[u8], tags: &[u8]) -> bool {
    text.len() == metric.len() + 1 + tags.len()
        && text.starts_with(metric)
        && text[metric.len()] == b' '
        && text.ends_with(tags)
}

/// `metric ' ' tags` into `out`: a series' text, without the timestamp and value between.
fn series_text(metric: &[u8], tags: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(metric);
    out.push(b' ');
    out.extend_from_slice(tags);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(tsdb: &strata_tsdb::Tsdb, metric: &str, host: &str) -> SeriesHandle {
        tsdb.series_handle(metric, &[("host", host)])
            .expect("a valid series")
    }

    /// Texts fill chunk after chunk and stay findable, through the index and the guesses,
    /// across every chunk boundary; a text too long for a chunk is not remembered, and
    /// does not make the cache full.
    #[test]
    fn texts_across_chunks_stay_findable() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
        let mut known = KnownSeries::default();
        let mut key = Vec::new();
        let h = handle(&tsdb, "m", "a");
        // Tags of varying length, so that chunk boundaries fall anywhere.
        let tags: Vec<String> = (0..6000)
            .map(|i| format!("host=h{i} pad={}", "x".repeat(i % 97)))
            .collect();
        for (i, t) in tags.iter().enumerate() {
            assert_eq!(known.find(b"metric", t.as_bytes(), &mut key), None);
            assert_eq!(known.add(&key, h.clone()), Some(i as u32));
        }
        assert!(known.chunks.len() > 3, "{} chunks", known.chunks.len());
        assert!(known.chunks.iter().all(|c| c.len() <= c.capacity()));
        assert!(known.chunks.iter().all(|c| c.capacity() <= CHUNK));
        for round in 0..2 {
            for (i, t) in tags.iter().enumerate().rev() {
                let found = known.find(b"metric", t.as_bytes(), &mut key);
                assert_eq!(found, Some(i as u32), "round {round}, {t}");
            }
        }
        let long = vec![b'y'; CHUNK - 6];
        assert_eq!(known.find(b"metric", &long, &mut key), None);
        assert_eq!(known.add(&key, h.clone()), None);
        known.start_batch(known.epoch);
        assert_eq!(known.handles.len(), tags.len(), "not emptied");
        Ok(())
    }

    /// Past its text bound the cache declines new series for the rest of the batch, keeps
    /// the ones it has, and is emptied at the next batch.
    #[test]
    fn the_text_bound_is_kept() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
        let mut known = KnownSeries {
            max_text_bytes: 2 * CHUNK,
            ..KnownSeries::default()
        };
        let mut key = Vec::new();
        let h = handle(&tsdb, "m", "a");
        let mut added = 0u32;
        let mut declined = 0;
        for i in 0..20_000 {
            let t = format!("host=h{i:05} rack=r{i:05}");
            if known.find(b"metric.name", t.as_bytes(), &mut key).is_some() {
                continue;
            }
            match known.add(&key, h.clone()) {
                Some(n) => {
                    assert_eq!(n, added);
                    added += 1;
                }
                None => declined += 1,
            }
        }
        assert!(
            declined > 0 && added > 0,
            "{added} added, {declined} declined"
        );
        assert!(
            known.text_bytes <= 2 * CHUNK + CHUNK,
            "{} bytes",
            known.text_bytes
        );
        let first = "host=h00000 rack=r00000";
        assert_eq!(
            known.find(b"metric.name", first.as_bytes(), &mut key),
            Some(0)
        );
        known.start_batch(known.epoch);
        assert!(known.is_empty());
        Ok(())
    }
}
