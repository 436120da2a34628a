//! A small pull reader for the JSON of `/api/put` bodies.
//!
//! serde_json cannot read the non-standard tokens `NaN`, `Infinity`, `+Infinity` and
//! `-Infinity` that Python's `json` module writes and that OpenTSDB accepts (Jackson's
//! `ALLOW_NON_NUMERIC_NUMBERS`), so this reader handles them as numbers and hands every number
//! back as its raw text, which is what OpenTSDB keeps for the `value` field. Strings without
//! escapes are borrowed from the input. Nesting deeper than [`MAX_DEPTH`] is an error, so hostile
//! bodies cannot exhaust the stack.

use std::borrow::Cow;

/// The deepest nesting of arrays and objects accepted.
pub(crate) const MAX_DEPTH: usize = 64;

/// A malformed document: the message names the problem and the byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JsonError(pub(crate) String);

pub(crate) type JsonResult<T> = Result<T, JsonError>;

/// A JSON value that is not an array or an object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar<'a> {
    Null,
    Bool(bool),
    /// The number's text as written, e.g. `1.50`, `-3e2`, `NaN`, `-Infinity`.
    Num(&'a str),
    Str(Cow<'a, str>),
}

/// A cursor over a UTF-8 document.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Reader { src, pos: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.src.as_bytes()
    }

    pub(crate) fn error<T>(&self, what: &str) -> JsonResult<T> {
        Err(JsonError(format!("{what} at byte offset {}", self.pos)))
    }

    /// Skips whitespace and returns the next byte without consuming it.
    pub(crate) fn peek(&mut self) -> Option<u8> {
        while let Some(&b) = self.bytes().get(self.pos) {
            if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                self.pos += 1;
            } else {
                return Some(b);
            }
        }
        None
    }

    pub(crate) fn expect(&mut self, want: u8) -> JsonResult<()> {
        if self.peek() == Some(want) {
            self.pos += 1;
            Ok(())
        } else {
            self.error(&format!("expected '{}'", want as char))
        }
    }

    /// Only whitespace may follow the document.
    pub(crate) fn end(&mut self) -> JsonResult<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => self.error("unexpected content after the end of the document"),
        }
    }

    fn literal(&mut self, word: &str) -> bool {
        if self.src[self.pos..].starts_with(word) {
            self.pos += word.len();
            true
        } else {
            false
        }
    }

    /// Reads a string; the cursor is on its opening quote.
    pub(crate) fn string(&mut self) -> JsonResult<Cow<'a, str>> {
        self.expect(b'"')?;
        let start = self.pos;
        loop {
            match self.bytes().get(self.pos) {
                None => return self.error("unterminated string"),
                Some(b'"') => {
                    let s = &self.src[start..self.pos];
                    self.pos += 1;
                    return Ok(Cow::Borrowed(s));
                }
                Some(b'\\') => break,
                Some(&b) if b < 0x20 => return self.error("control character in string"),
                Some(_) => self.pos += 1,
            }
        }
        let mut out = String::from(&self.src[start..self.pos]);
        loop {
            let rest = &self.src[self.pos..];
            let Some(c) = rest.chars().next() else {
                return self.error("unterminated string");
            };
            self.pos += c.len_utf8();
            match c {
                '"' => return Ok(Cow::Owned(out)),
                '\\' => {
                    let Some(&e) = self.bytes().get(self.pos) else {
                        return self.error("unterminated escape");
                    };
                    self.pos += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return self.error("invalid escape"),
                    }
                }
                c if (c as u32) < 0x20 => return self.error("control character in string"),
                c => out.push(c),
            }
        }
    }

    fn hex4(&mut self) -> JsonResult<u32> {
        let Some(h) = self.src.get(self.pos..self.pos + 4) else {
            return self.error("short \\u escape");
        };
        if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return self.error("invalid \\u escape");
        }
        self.pos += 4;
        u32::from_str_radix(h, 16).or_else(|_| self.error("invalid \\u escape"))
    }

    /// After `\u`: one code unit, or a surrogate pair. Lone surrogates become U+FFFD.
    fn unicode_escape(&mut self) -> JsonResult<char> {
        let hi = self.hex4()?;
        if (0xD800..0xDC00).contains(&hi) && self.src[self.pos..].starts_with("\\u") {
            let save = self.pos;
            self.pos += 2;
            let lo = self.hex4()?;
            if (0xDC00..0xE000).contains(&lo) {
                let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                return Ok(char::from_u32(c).unwrap_or('\u{FFFD}'));
            }
            self.pos = save;
        }
        Ok(char::from_u32(hi).unwrap_or('\u{FFFD}'))
    }

    /// Reads a number (JSON grammar, or `NaN`/`Infinity`/`+Infinity`/`-Infinity`) as raw text.
    fn number(&mut self) -> JsonResult<&'a str> {
        let start = self.pos;
        for word in ["NaN", "Infinity", "+Infinity", "-Infinity"] {
            if self.literal(word) {
                return Ok(&self.src[start..self.pos]);
            }
        }
        let b = self.bytes();
        let digits = |pos: &mut usize| {
            let s = *pos;
            while b.get(*pos).is_some_and(u8::is_ascii_digit) {
                *pos += 1;
            }
            *pos - s
        };
        let mut pos = self.pos;
        if b.get(pos) == Some(&b'-') {
            pos += 1;
        }
        let int_start = pos;
        let n = digits(&mut pos);
        if n == 0 {
            return self.error("invalid number");
        }
        if n > 1 && b[int_start] == b'0' {
            return self.error("leading zeroes are not allowed");
        }
        if b.get(pos) == Some(&b'.') {
            pos += 1;
            if digits(&mut pos) == 0 {
                self.pos = pos;
                return self.error("expected a digit after the decimal point");
            }
        }
        if matches!(b.get(pos), Some(b'e' | b'E')) {
            pos += 1;
            if matches!(b.get(pos), Some(b'+' | b'-')) {
                pos += 1;
            }
            if digits(&mut pos) == 0 {
                self.pos = pos;
                return self.error("expected a digit in the exponent");
            }
        }
        self.pos = pos;
        Ok(&self.src[start..pos])
    }

    /// Reads a scalar; an array or object here is an error naming `field`.
    pub(crate) fn scalar(&mut self, field: &str) -> JsonResult<Scalar<'a>> {
        match self.peek() {
            Some(b'"') => self.string().map(Scalar::Str),
            Some(b'n') if self.literal("null") => Ok(Scalar::Null),
            Some(b't') if self.literal("true") => Ok(Scalar::Bool(true)),
            Some(b'f') if self.literal("false") => Ok(Scalar::Bool(false)),
            Some(b'{' | b'[') => self.error(&format!("expected a string or number for '{field}'")),
            Some(_) => self.number().map(Scalar::Num),
            None => self.error("unexpected end of input"),
        }
    }

    /// Skips any value, nested at most [`MAX_DEPTH`] levels below `depth`.
    pub(crate) fn skip_value(&mut self, depth: usize) -> JsonResult<()> {
        if depth > MAX_DEPTH {
            return self.error("nesting too deep");
        }
        match self.peek() {
            Some(b'{') => self.object(|r, _| r.skip_value(depth + 1)),
            Some(b'[') => self.array(|r| r.skip_value(depth + 1)),
            _ => self.scalar("value").map(drop),
        }
    }

    /// Reads an object, calling `field` with the reader on each value and its key.
    pub(crate) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, Cow<'a, str>) -> JsonResult<()>,
    ) -> JsonResult<()> {
        self.expect(b'{')?;
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            if self.peek() != Some(b'"') {
                return self.error("expected a field name");
            }
            let key = self.string()?;
            self.expect(b':')?;
            field(self, key)?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return self.error("expected ',' or '}'"),
            }
        }
    }

    /// Reads an array, calling `elem` with the reader on each element.
    pub(crate) fn array(
        &mut self,
        mut elem: impl FnMut(&mut Self) -> JsonResult<()>,
    ) -> JsonResult<()> {
        self.expect(b'[')?;
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            elem(self)?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return self.error("expected ',' or ']'"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(src: &str) -> JsonResult<Scalar<'_>> {
        let mut r = Reader::new(src);
        let v = r.scalar("v")?;
        r.end()?;
        Ok(v)
    }

    #[test]
    fn numbers_keep_their_text() {
        for n in [
            "0",
            "-0",
            "1.50",
            "-3e2",
            "2E+5",
            "1e-3",
            "NaN",
            "Infinity",
            "-Infinity",
            "+Infinity",
        ] {
            assert_eq!(scalar(n), Ok(Scalar::Num(n)), "{n}");
        }
        for bad in ["01", "1.", ".5", "-", "1e", "+1", "nan", "inf", "1x", "--1"] {
            assert!(scalar(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(scalar(r#""abc""#), Ok(Scalar::Str(Cow::Borrowed("abc"))));
        assert_eq!(
            scalar(r#""a\"b\\c\/\n\u00e9\ud83d\ude00""#),
            Ok(Scalar::Str("a\"b\\c/\né😀".into()))
        );
        assert_eq!(scalar(r#""\ud800x""#), Ok(Scalar::Str("\u{FFFD}x".into())));
        assert!(scalar("\"a\u{1}\"").is_err());
        assert!(scalar(r#""\q""#).is_err());
        assert!(scalar(r#""abc"#).is_err());
        assert!(scalar(r#""\u12""#).is_err());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = "[".repeat(100_000);
        let mut r = Reader::new(&deep);
        assert!(r.skip_value(0).is_err());
        let ok = format!("{}{}", "[".repeat(10), "]".repeat(10));
        let mut r = Reader::new(&ok);
        assert_eq!(r.skip_value(0), Ok(()));
    }

    #[test]
    fn skips_everything() {
        let mut r = Reader::new(r#" {"a":[1,{"b":null},true,false,"x",NaN],"c":{}} "#);
        assert_eq!(r.skip_value(0), Ok(()));
        assert_eq!(r.end(), Ok(()));
    }
}
