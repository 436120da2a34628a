//! Framing for the telnet protocol: cuts complete lines off a socket buffer.
//!
//! Lines end with `\n` or `\r\n`. A line longer than the limit (OpenTSDB: 1024 bytes, terminator
//! excluded) is an error and the connection should be closed, as OpenTSDB does; the splitter
//! also reports it as soon as the buffer holds more than the limit without a newline, so a client
//! cannot make the server buffer without bound.

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
        match buf[start..].iter().position(|&b| b == b'\n') {
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

    #[test]
    fn default_limit_is_opentsdbs() {
        assert_eq!(LineSplitter::default().max_len(), 1024);
    }
}
