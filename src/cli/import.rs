//! `strata import FILE…`: bulk-loads OpenTSDB's text import format straight into the data
//! directory (no server involved).
//!
//! Each line is `metric timestamp value tag=v [tag=v…]`, a telnet `put` line without the
//! `put`, and is checked exactly as telnet checks it (same parser, same messages). A leading
//! `put ` is accepted too, so telnet captures import as they are. Blank lines and lines
//! starting with `#` are skipped. Files may be gzip-compressed (recognised by their magic
//! bytes, not their name); `-` reads standard input.
//!
//! Unlike OpenTSDB's `import`, which stops at the first bad line, a bad line is counted and
//! reported with its file and line number, and the import goes on. Points go to storage in
//! large batches. At the end every closed hour is row-compacted (unless `--no-compact`), so a
//! historical import ends up in its final, compacted form.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::ops::Range;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use strata_ingest::{ParseConfig, check_units, parse_put_line};

use strata_server::rejection_reason;

use super::progress::Bar;
use strata_server::{Config, StorageArgs};

/// `strata import` flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ImportArgs {
    #[command(flatten)]
    pub(crate) storage: StorageArgs,
    /// Files to import, plain or gzip; `-` is standard input.
    #[arg(required = true)]
    pub(crate) files: Vec<PathBuf>,
    /// Do not row-compact closed hours at the end (the server's background row compactor
    /// will do it later).
    #[arg(long)]
    pub(crate) no_compact: bool,
    /// Points per storage write.
    #[arg(long, default_value_t = DEFAULT_BATCH_POINTS)]
    pub(crate) batch_points: usize,
}

/// Points per storage write: large enough that per-batch costs (WAL record, lock, index
/// update) vanish, small enough that a batch's lines stay in a few MiB of memory.
const DEFAULT_BATCH_POINTS: usize = 50_000;

/// Longest line accepted. Telnet allows 1 KiB; files get more room, but a file with no
/// newlines must not be read into memory whole.
const MAX_LINE_BYTES: usize = 64 << 10;

/// How many line numbers each error reason keeps for the summary.
const EXAMPLES_PER_REASON: usize = 5;

/// Where a line came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineRef {
    /// The file as given on the command line.
    pub(crate) file: String,
    /// 1-based line number.
    pub(crate) line: u64,
}

/// Rejected lines of one reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ReasonErrors {
    /// How many lines.
    pub(crate) count: u64,
    /// The first few, with their message.
    pub(crate) first: Vec<(LineRef, String)>,
}

/// What an import did.
#[derive(Debug, Clone, Default)]
pub(crate) struct Summary {
    /// Points stored.
    pub(crate) points: u64,
    /// Non-blank, non-comment lines read.
    pub(crate) lines: u64,
    /// Rejected lines by reason.
    pub(crate) errors: BTreeMap<&'static str, ReasonErrors>,
    /// Wall time of reading, parsing and writing (compaction excluded).
    pub(crate) elapsed: Duration,
}

impl Summary {
    /// Rejected lines over every reason.
    pub(crate) fn rejected(&self) -> u64 {
        self.errors.values().map(|e| e.count).sum()
    }

    fn reject(&mut self, reason: &'static str, at: LineRef, message: String) {
        let e = self.errors.entry(reason).or_default();
        e.count += 1;
        if e.first.len() < EXAMPLES_PER_REASON {
            e.first.push((at, message));
        }
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.elapsed.as_secs_f64();
        let rate = if secs > 0.0 {
            self.points as f64 / secs
        } else {
            0.0
        };
        writeln!(
            f,
            "imported {} points from {} lines in {secs:.2} s ({rate:.0} points/s); {} lines \
             rejected",
            self.points,
            self.lines,
            self.rejected()
        )?;
        for (reason, e) in &self.errors {
            writeln!(f, "  {reason}: {} lines", e.count)?;
            for (at, message) in &e.first {
                writeln!(f, "    {}:{}: {message}", at.file, at.line)?;
            }
        }
        Ok(())
    }
}

/// Streams lines into batched storage writes.
pub(crate) struct Importer<'t> {
    tsdb: &'t strata_tsdb::Tsdb,
    cfg: ParseConfig,
    batch_points: usize,
    /// `put `-prefixed lines of the current batch, back to back.
    chunk: Vec<u8>,
    /// Each line's bytes in `chunk` and its line number; the file is `file`.
    lines: Vec<(Range<usize>, u64)>,
    file: String,
    summary: Summary,
    started: Instant,
    /// Shows the points imported so far, when given.
    bar: Option<&'t Bar>,
}

impl std::fmt::Debug for Importer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Importer")
            .field("file", &self.file)
            .field("summary", &self.summary)
            .finish_non_exhaustive()
    }
}

impl<'t> Importer<'t> {
    /// An importer writing to `tsdb`; `bar` shows the points imported so far.
    pub(crate) fn new(
        tsdb: &'t strata_tsdb::Tsdb,
        batch_points: usize,
        bar: Option<&'t Bar>,
    ) -> Self {
        let now = Instant::now();
        Importer {
            tsdb,
            cfg: ParseConfig::new(),
            batch_points: batch_points.max(1),
            chunk: Vec::new(),
            lines: Vec::new(),
            file: String::new(),
            summary: Summary::default(),
            started: now,
            bar,
        }
    }

    /// Imports one file (plain or gzip); `name` labels its lines in errors.
    pub(crate) fn import(&mut self, name: &str, input: impl Read) -> anyhow::Result<()> {
        let mut plain = BufReader::with_capacity(256 << 10, input);
        let gzip = plain
            .fill_buf()
            .context("reading")?
            .starts_with(&[0x1f, 0x8b]);
        if gzip {
            let decoder = flate2::bufread::MultiGzDecoder::new(plain);
            self.import_lines(name, BufReader::with_capacity(256 << 10, decoder))
        } else {
            self.import_lines(name, plain)
        }
    }

    fn import_lines(&mut self, name: &str, mut input: impl BufRead) -> anyhow::Result<()> {
        self.flush_batch();
        self.file = name.to_string();
        let mut line = Vec::new();
        let mut number = 0u64;
        loop {
            line.clear();
            let status = read_line_capped(&mut input, &mut line, MAX_LINE_BYTES)
                .with_context(|| format!("reading {name} after line {number}"))?;
            number += 1;
            let text = match status {
                LineStatus::Eof => break,
                LineStatus::TooLong => {
                    self.summary.lines += 1;
                    let at = self.at(number);
                    self.summary.reject(
                        strata_server::reason::BAD_SYNTAX,
                        at,
                        format!("line longer than {MAX_LINE_BYTES} bytes"),
                    );
                    continue;
                }
                LineStatus::Line => trim_terminator(&line),
            };
            if text.iter().all(u8::is_ascii_whitespace) || text.first() == Some(&b'#') {
                continue;
            }
            self.summary.lines += 1;
            let start = self.chunk.len();
            if !text.starts_with(b"put ") {
                self.chunk.extend_from_slice(b"put ");
            }
            self.chunk.extend_from_slice(text);
            self.lines.push((start..self.chunk.len(), number));
            if self.lines.len() >= self.batch_points {
                self.flush_batch();
            }
        }
        self.flush_batch();
        Ok(())
    }

    fn at(&self, line: u64) -> LineRef {
        LineRef {
            file: self.file.clone(),
            line,
        }
    }

    /// Parses the batch's lines and writes their points in one storage write.
    fn flush_batch(&mut self) {
        if self.lines.is_empty() {
            return;
        }
        let mut parsed = Vec::with_capacity(self.lines.len());
        let mut numbers = Vec::with_capacity(self.lines.len());
        let mut rejects = Vec::new();
        for (range, number) in &self.lines {
            match parse_put_line(&self.chunk[range.clone()], &self.cfg).and_then(check_units) {
                Ok(p) => {
                    parsed.push(p);
                    numbers.push(*number);
                }
                Err(e) => rejects.push((
                    rejection_reason(e.rejection()),
                    *number,
                    message(&e.to_string()),
                )),
            }
        }
        let points: Vec<strata_tsdb::PointRef<'_>> = parsed.iter().map(|p| p.to_tsdb()).collect();
        for (r, number) in self.tsdb.write(&points).into_iter().zip(numbers) {
            match r {
                Ok(()) => self.summary.points += 1,
                Err(e) => rejects.push((rejection_reason(e.rejection()), number, e.to_string())),
            }
        }
        drop(points);
        drop(parsed);
        rejects.sort_by_key(|r| r.1);
        for (reason, number, msg) in rejects {
            let at = self.at(number);
            self.summary.reject(reason, at, msg);
        }
        self.chunk.clear();
        self.lines.clear();
        if let Some(bar) = self.bar {
            bar.set_message(&format!(
                "import: {} points, {} lines rejected",
                self.summary.points,
                self.summary.rejected()
            ));
        }
    }

    /// Flushes what is left and returns the totals.
    pub(crate) fn finish(mut self) -> Summary {
        self.flush_batch();
        self.summary.elapsed = self.started.elapsed();
        self.summary
    }
}

/// A reader that counts the bytes it reads on a progress bar.
struct Counted<'b, R>(R, &'b Bar);

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        self.1.advance(n as u64);
        Ok(n)
    }
}

/// A telnet error without its `put: ` prefix: the import format has no `put`.
fn message(telnet: &str) -> String {
    telnet.strip_prefix("put: ").unwrap_or(telnet).to_string()
}

fn trim_terminator(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[derive(Debug, PartialEq, Eq)]
enum LineStatus {
    Line,
    TooLong,
    Eof,
}

/// Reads one line (with its `\n`, if any) into `buf`, reading at most `max` bytes of it; the
/// rest of a longer line is skipped.
fn read_line_capped(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<LineStatus> {
    let n = input.by_ref().take(max as u64 + 1).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(LineStatus::Eof);
    }
    if buf.last() == Some(&b'\n') || buf.len() <= max {
        return Ok(LineStatus::Line);
    }
    // Skip to the end of the long line.
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            return Ok(LineStatus::TooLong);
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => {
                input.consume(i + 1);
                return Ok(LineStatus::TooLong);
            }
            None => {
                let len = chunk.len();
                input.consume(len);
            }
        }
    }
}

/// Runs `strata import`.
pub(crate) fn run(args: &ImportArgs) -> anyhow::Result<()> {
    let config = Config::resolve_storage(&args.storage)?;
    let (_lock, tsdb) = super::open::open_locked(&config)?;
    // The bar counts bytes read from the files (compressed bytes for gzip), whose sizes are
    // known up front; standard input adds none to the total.
    let bar = Bar::bytes("import");
    let total: u64 = args
        .files
        .iter()
        .filter(|p| p.as_os_str() != "-")
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    bar.set_total(total);
    let mut importer = Importer::new(&tsdb, args.batch_points, Some(&bar));
    for path in &args.files {
        let name = path.display().to_string();
        if name == "-" {
            importer.import("<stdin>", Counted(std::io::stdin().lock(), &bar))?;
        } else {
            let file = std::fs::File::open(path).with_context(|| format!("opening {name}"))?;
            importer
                .import(&name, Counted(file, &bar))
                .with_context(|| format!("importing {name}"))?;
        }
    }
    let summary = importer.finish();
    bar.finish();
    tsdb.sync().context("syncing the WAL")?;
    print!("{summary}");
    if !args.no_compact {
        let started = Instant::now();
        let spinner = Bar::spinner("row-compacting the import");
        let rows = tsdb.rowcompact_all().context("row-compacting the import")?;
        tsdb.flush().context("flushing after row compaction")?;
        spinner.finish();
        println!(
            "row-compacted {} rows ({} cells folded) in {:.2} s",
            rows.rows_compacted,
            rows.cells_folded,
            started.elapsed().as_secs_f64()
        );
    }
    let rejected = summary.rejected();
    anyhow::ensure!(rejected == 0, "{rejected} lines were rejected (see above)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(data: &[u8]) -> anyhow::Result<Vec<u8>> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(data)?;
        Ok(enc.finish()?)
    }

    #[test]
    fn plain_and_gzip_lines_are_stored_and_bad_lines_reported() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let tsdb = strata_tsdb::Tsdb::open(dir.path(), strata_tsdb::TsdbOptions::default())?;
        let text = b"# a comment\n\
            sys.cpu 1356998400 1 host=a\r\n\
            \n\
            sys.cpu 1356998401 x host=a\n\
            put sys.cpu 1356998402 3 host=a\n\
            sys.cpu 1356998403 4\n\
            sys.cpu 1356998404 5.5 host=a";
        // A batch size of 2 makes batches end mid-file.
        let mut imp = Importer::new(&tsdb, 2, None);
        imp.import("a.txt", &text[..])?;
        imp.import("b.txt.gz", &gzip(b"sys.cpu 1356998405 6 host=b\n")?[..])?;
        let summary = imp.finish();
        assert_eq!(summary.points, 4, "{summary}");
        assert_eq!(summary.lines, 6);
        assert_eq!(summary.rejected(), 2);
        let value = &summary.errors["bad_value"];
        assert_eq!(
            value.first[0].0,
            LineRef {
                file: "a.txt".into(),
                line: 4
            }
        );
        assert_eq!(
            value.first[0].1,
            "invalid value: Invalid character 'x' in x"
        );
        let tags = &summary.errors["bad_syntax"];
        assert_eq!(tags.first[0].0.line, 6);
        let text = summary.to_string();
        assert!(text.contains("a.txt:4: invalid value"), "{text}");
        let got = tsdb.read(&strata_tsdb::ReadRequest::metric(
            "sys.cpu",
            &[],
            0,
            i64::MAX / 2,
        ))?;
        let mut n: Vec<usize> = got.iter().map(|s| s.points.len()).collect();
        n.sort();
        assert_eq!(n, vec![1, 3]);
        Ok(())
    }

    #[test]
    fn long_lines_are_skipped_without_reading_them_whole() -> anyhow::Result<()> {
        let mut data = vec![b'x'; 100];
        data.extend_from_slice(b"\nok\nlast");
        let mut input = &data[..];
        let mut buf = Vec::new();
        assert_eq!(
            read_line_capped(&mut input, &mut buf, 10)?,
            LineStatus::TooLong
        );
        buf.clear();
        assert_eq!(
            read_line_capped(&mut input, &mut buf, 10)?,
            LineStatus::Line
        );
        assert_eq!(buf, b"ok\n");
        buf.clear();
        assert_eq!(
            read_line_capped(&mut input, &mut buf, 10)?,
            LineStatus::Line
        );
        assert_eq!(buf, b"last");
        buf.clear();
        assert_eq!(read_line_capped(&mut input, &mut buf, 10)?, LineStatus::Eof);
        Ok(())
    }
}
