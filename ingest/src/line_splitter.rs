//! Framing for the telnet protocol: cuts complete lines off a socket buffer.
//!
//! Lines end with `\n` or `\r\n`. A line longer than the limit (OpenTSDB: 1024 bytes, terminator
//! excluded) is an error and the connection should be closed, as OpenTSDB does; the splitter
//! also reports it as soon as the buffer holds more than the limit without a newline, so a client
//! cannot make the server buffer without bound.

use std::ops::Range;

use bytes::{Bytes, BytesMut};

use crate::config::DEFAULT_MAX_LINE_LEN;
use crate::error::LineTooLong;

/// Cuts complete lines off the front of a [`BytesMut`] that a socket reader fills.
#[derive(Debug, Clone)]
pub struct LineSplitter {
    max_len: usize,
    /// How many bytes at the front of the buffer are known to hold no `\n`.
    scanned: usize,
}

impl Default for LineSplitter {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_LINE_LEN)
    }
}

impl LineSplitter {
    /// A splitter that accepts lines of at most `max_len` bytes, terminator excluded.
    pub fn new(max_len: usize) -> Self {
        LineSplitter {
            max_len,
            scanned: 0,
        }
    }

    /// The maximum line length in bytes.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Takes the next complete line off the front of `buf`, without its `\n` or `\r\n`.
    /// Returns `Ok(None)` when `buf` holds no complete line yet (read more and call again).
    pub fn next_line(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, LineTooLong> {
        let start = self.scanned.min(buf.len());
        match memchr::memchr(b'\n', &buf[start..]) {
            Some(i) => {
                let end = start + i;
                self.scanned = 0;
                let mut line = buf.split_to(end + 1);
                line.truncate(end);
                if line.last() == Some(&b'\r') {
                    line.truncate(end - 1);
                }
                if line.len() > self.max_len {
                    return Err(LineTooLong { max: self.max_len });
                }
                Ok(Some(line.freeze()))
            }
            None => {
                self.scanned = buf.len();
                // One byte of slack for a `\r` whose `\n` has not arrived yet.
                if buf.len() > self.max_len.saturating_add(1) {
                    return Err(LineTooLong { max: self.max_len });
                }
                Ok(None)
            }
        }
    }

    /// Takes every complete line off the front of `buf` at once: returns them as one chunk,
    /// with each line's range in it (terminator excluded) in `lines` (cleared first), and the
    /// error [`LineSplitter::next_line`] would have given after them, if any.
    ///
    /// The same lines and error as calling [`LineSplitter::next_line`] until it returns
    /// `Ok(None)` or an error, for one reference count instead of one per line. (After an
    /// error `buf` differs: the line too long is left in it.)
    pub fn split(
        &mut self,
        buf: &mut BytesMut,
        lines: &mut Vec<Range<usize>>,
    ) -> (Bytes, Option<LineTooLong>) {
        lines.clear();
        let start = self.scanned.min(buf.len());
        let mut from = 0;
        let mut error = None;
        for nl in memchr::memchr_iter(b'\n', &buf[start..]) {
            let end = start + nl;
            let stop = if end > from && buf[end - 1] == b'\r' {
                end - 1
            } else {
                end
            };
            if stop - from > self.max_len {
                error = Some(LineTooLong { max: self.max_len });
                break;
            }
            lines.push(from..stop);
            from = end + 1;
        }
        // Past the first newline, everything was scanned anew.
        if !lines.is_empty() || error.is_some() {
            self.scanned = 0;
        }
        let chunk = buf.split_to(from).freeze();
        if error.is_none() {
            self.scanned = buf.len();
            // One byte of slack for a `\r` whose `\n` has not arrived yet.
            if buf.len() > self.max_len.saturating_add(1) {
                error = Some(LineTooLong { max: self.max_len });
            }
        }
        (chunk, error)
    }

    /// At end of stream: the final line if it has no terminator (clients may close right after
    /// their last line), or `None` when the buffer is empty. Call after `next_line` returns `None`.
    pub fn finish(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, LineTooLong> {
        if let Some(line) = self.next_line(buf)? {
            return Ok(Some(line));
        }
        self.scanned = 0;
        if buf.is_empty() {
            return Ok(None);
        }
        let mut line = buf.split();
        if line.last() == Some(&b'\r') {
            line.truncate(line.len() - 1);
        }
        if line.len() > self.max_len {
            return Err(LineTooLong { max: self.max_len });
        }
        Ok(Some(line.freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(chunks: &[&[u8]], max: usize) -> Result<Vec<Vec<u8>>, LineTooLong> {
        let mut sp = LineSplitter::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for c in chunks {
            buf.extend_from_slice(c);
            while let Some(l) = sp.next_line(&mut buf)? {
                out.push(l.to_vec());
            }
        }
        while let Some(l) = sp.finish(&mut buf)? {
            out.push(l.to_vec());
        }
        Ok(out)
    }

    #[test]
    fn splits_lf_and_crlf_across_chunks() {
        let got = lines(&[b"put a 1 2 h=x\r", b"\nver", b"sion\n\nexit"], 1024).unwrap();
        assert_eq!(
            got,
            vec![
                b"put a 1 2 h=x".to_vec(),
                b"version".to_vec(),
                b"".to_vec(),
                b"exit".to_vec()
            ]
        );
    }

    #[test]
    fn line_of_exactly_max_is_accepted() {
        let line = vec![b'a'; 16];
        let mut with_crlf = line.clone();
        with_crlf.extend_from_slice(b"\r");
        assert_eq!(lines(&[&with_crlf, b"\n"], 16).unwrap(), vec![line.clone()]);
        assert_eq!(lines(&[&line], 16).unwrap(), vec![line]);
    }

    #[test]
    fn long_line_is_an_error() {
        let line = vec![b'a'; 17];
        let err = lines(&[&line, b"\n"], 16).unwrap_err();
        assert_eq!(
            err.to_string(),
            "error: line too long: longer than 16 bytes"
        );
        // Without a newline the error comes as soon as the buffer passes the limit.
        let mut sp = LineSplitter::new(16);
        let mut buf = BytesMut::from(&[b'a'; 18][..]);
        assert_eq!(sp.next_line(&mut buf), Err(LineTooLong { max: 16 }));
        // At end of stream too.
        let mut sp = LineSplitter::new(16);
        let mut buf = BytesMut::from(&[b'a'; 17][..]);
        assert_eq!(sp.next_line(&mut buf), Ok(None));
        assert_eq!(sp.finish(&mut buf), Err(LineTooLong { max: 16 }));
    }

    /// `split` gives what `next_line` gives, chunk by chunk, for any stream, cut anywhere.
    #[test]
    fn split_agrees_with_next_line() {
        use proptest::prelude::*;
        let data = proptest::collection::vec(
            prop_oneof![Just(b'\n'), Just(b'\r'), Just(b'a'), any::<u8>()],
            0..300,
        );
        let cuts = proptest::collection::vec(any::<usize>(), 0..6);
        proptest!(|(data in data, cuts in cuts, max in 0usize..24)| {
            let mut points: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
            points.push(data.len());
            points.sort_unstable();
            let (mut one, mut all) = (LineSplitter::new(max), LineSplitter::new(max));
            let (mut buf1, mut buf2) = (BytesMut::new(), BytesMut::new());
            let mut ranges = Vec::new();
            let mut from = 0;
            for to in points {
                buf1.extend_from_slice(&data[from..to]);
                buf2.extend_from_slice(&data[from..to]);
                from = to;
                let mut expected = Vec::new();
                let expected_err = loop {
                    match one.next_line(&mut buf1) {
                        Ok(Some(l)) => expected.push(l),
                        Ok(None) => break None,
                        Err(e) => break Some(e),
                    }
                };
                let (chunk, err) = all.split(&mut buf2, &mut ranges);
                let got: Vec<Bytes> = ranges.iter().map(|r| chunk.slice(r.clone())).collect();
                prop_assert_eq!(&got, &expected);
                let failed = err.is_some();
                prop_assert_eq!(err, expected_err);
                if failed {
                    break;
                }
                prop_assert_eq!(&buf1, &buf2);
                prop_assert_eq!(one.scanned, all.scanned);
            }
        });
    }

    #[test]
    fn default_limit_is_opentsdbs() {
        assert_eq!(LineSplitter::default().max_len(), 1024);
    }
}
