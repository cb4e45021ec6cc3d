//! Reading one line of text IR: the byte cursor and the parse error.
//!
//! A [`Cur`] walks one line by byte offset and reads the tokens every line
//! is made of (numbers, names, devices, quoted strings, types, `%N`
//! references). Errors carry the 1-based line and column and say what was
//! expected; positions stay byte offsets until an error is built, and only
//! then become columns (characters).

use super::excerpt;
use crate::device::Device;
use crate::dtype::{DType, TensorType};
use std::fmt;

/// A parse failure at a position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub col: usize,
    /// What went wrong, usually "expected X, found Y".
    pub message: String,
    /// The offending source line.
    pub source_line: String,
}

impl fmt::Display for ParseError {
    /// `line:col: message`, the source line and a caret under the column.
    /// Hidden characters in the line and the message are escaped and a
    /// long line is cut around the column ([`excerpt::window`]); ordinary
    /// input prints as it is.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (shown, caret) = excerpt::window(&self.source_line, self.col, excerpt::LINE_CHARS);
        let message = excerpt::escape(&self.message);
        writeln!(f, "{}:{}: {message}", self.line, self.col)?;
        writeln!(f, "  | {shown}")?;
        write!(f, "  | {}^", " ".repeat(caret))
    }
}

impl std::error::Error for ParseError {}

/// The 1-based column (in characters) of byte offset `pos` of `text`.
pub(super) fn col_at(text: &str, pos: usize) -> usize {
    text.get(..pos.min(text.len()))
        .map_or(0, |t| t.chars().count())
        + 1
}

/// An operand as written: `%N` or `%N#i`, with its line and the byte offset
/// of its `%`.
pub(super) struct Ref {
    pub number: usize,
    pub result: Option<u32>,
    pub line: usize,
    pub pos: usize,
}

/// One line being read.
pub(super) struct Cur<'a> {
    pub text: &'a str,
    pub pos: usize,
    pub line: usize,
}

impl<'a> Cur<'a> {
    pub fn col_at(&self, pos: usize) -> usize {
        col_at(self.text, pos)
    }
    pub fn err_at(&self, pos: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            line: self.line,
            col: self.col_at(pos),
            message: message.into(),
            source_line: self.text.to_string(),
        }
    }
    pub fn err(&self, message: impl Into<String>) -> ParseError {
        self.err_at(self.pos, message)
    }
    pub fn rest(&self) -> &'a str {
        self.text.get(self.pos..).unwrap_or("")
    }
    /// Skips whitespace as `str::trim_start` does, ASCII without decoding.
    #[inline]
    pub fn skip_ws(&mut self) {
        let r = self.rest();
        let ascii = r
            .bytes()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'))
            .count();
        self.pos += ascii;
        if r.as_bytes().get(ascii).is_some_and(|b| !b.is_ascii()) {
            let r = self.rest();
            self.pos += r.len() - r.trim_start().len();
        }
    }
    /// True at end of line or at a trailing `//` comment.
    #[inline]
    pub fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.rest().is_empty() || self.rest().starts_with("//")
    }
    pub fn found(&mut self) -> String {
        self.skip_ws();
        match self.rest().chars().next() {
            None => "end of line".into(),
            Some(_) if self.rest().starts_with("//") => "a comment".into(),
            Some(c) => format!("`{c}`"),
        }
    }
    #[inline]
    pub fn eat(&mut self, tok: &str) -> bool {
        self.skip_ws();
        if self.starts_with(tok) {
            self.pos += tok.len();
            true
        } else {
            false
        }
    }
    #[inline]
    pub fn expect(&mut self, tok: &str, what: &str) -> Result<(), ParseError> {
        if self.eat(tok) {
            Ok(())
        } else {
            let found = self.found();
            Err(self.err(format!("expected {what}, found {found}")))
        }
    }
    #[inline]
    pub fn peek(&mut self, tok: &str) -> bool {
        self.skip_ws();
        self.starts_with(tok)
    }
    /// `rest().starts_with(tok)`, compared inline: tokens are a few bytes,
    /// too short to pay for a call to `memcmp`.
    #[inline]
    pub fn starts_with(&self, tok: &str) -> bool {
        let rest = self.rest().as_bytes();
        rest.len() >= tok.len() && rest.iter().zip(tok.as_bytes()).all(|(a, b)| a == b)
    }
    /// Takes the longest run of bytes that satisfy `f`. `f` accepts ASCII
    /// bytes only, so the run ends on a character boundary.
    pub fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let r = self.rest();
        let n = r.bytes().take_while(|b| b.is_ascii() && f(*b)).count();
        self.pos += n;
        r.get(..n).unwrap_or("")
    }
    pub fn number(&mut self, what: &str) -> Result<u64, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let mut value = Some(0u64);
        let mut len = 0;
        for b in self.rest().bytes() {
            if !b.is_ascii_digit() {
                break;
            }
            value = value.and_then(|n| n.checked_mul(10)?.checked_add(u64::from(b - b'0')));
            len += 1;
        }
        if len == 0 {
            let found = self.found();
            return Err(self.err(format!("expected {what}, found {found}")));
        }
        self.pos += len;
        value.ok_or_else(|| {
            let digits = self.text.get(start..self.pos).unwrap_or("");
            self.err_at(
                start,
                format!(
                    "{what} `{}` is too large (at most {})",
                    excerpt::token(digits),
                    u64::MAX
                ),
            )
        })
    }
    pub fn ident(&mut self, what: &str) -> Result<&'a str, ParseError> {
        self.skip_ws();
        let id = self.take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if id.is_empty() {
            let found = self.found();
            return Err(self.err(format!("expected {what}, found {found}")));
        }
        Ok(id)
    }
    pub fn device(&mut self) -> Result<Device, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let text = self.take_while(|b| b.is_ascii_alphanumeric() || b == b':');
        if let Some(device) = Device::parse_plain(text) {
            return Ok(device);
        }
        text.parse::<Device>().map_err(|e| {
            if text.is_empty() {
                let found = self.found();
                self.err(format!("expected a device such as `cpu:0`, found {found}"))
            } else {
                self.err_at(start, e.to_string())
            }
        })
    }
    pub fn string(&mut self) -> Result<String, ParseError> {
        self.expect("\"", "a quoted input name")?;
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 1;
                    return Ok(out);
                }
                '\\' => {
                    let esc_at = self.pos + i;
                    match chars.next() {
                        Some((_, '"')) => out.push('"'),
                        Some((_, '\\')) => out.push('\\'),
                        Some((_, 'n')) => out.push('\n'),
                        Some((_, 't')) => out.push('\t'),
                        Some((j, 'u')) => {
                            let body = &self.rest()[j + 1..];
                            let ch = body
                                .strip_prefix('{')
                                .and_then(|b| b.split_once('}'))
                                .and_then(|(hex, _)| {
                                    u32::from_str_radix(hex, 16).ok().map(|v| (hex.len(), v))
                                })
                                .and_then(|(len, v)| char::from_u32(v).map(|c| (len, c)));
                            let Some((len, ch)) = ch else {
                                return Err(self.err_at(
                                    esc_at,
                                    "expected `\\u{HEX}` with a valid code point",
                                ));
                            };
                            out.push(ch);
                            for _ in 0..len + 2 {
                                chars.next();
                            }
                        }
                        _ => {
                            return Err(self.err_at(
                                esc_at,
                                "expected one of the escapes \\\" \\\\ \\n \\t \\u{HEX}",
                            ))
                        }
                    }
                }
                c => out.push(c),
            }
        }
        self.pos = self.text.len();
        Err(self.err("expected a closing `\"`, found end of line"))
    }
    pub fn tensor_type(&mut self) -> Result<TensorType, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let name = self.take_while(|b| b.is_ascii_alphanumeric());
        let dtype: DType = name.parse().map_err(|e: String| {
            if name.is_empty() {
                self.err("expected a type such as `f32[1024]`")
            } else {
                self.err_at(start, e)
            }
        })?;
        self.expect("[", "`[` after the dtype")?;
        let mut shape = crate::dtype::Shape::new();
        if !self.eat("]") {
            loop {
                let d = self.number("an extent")?;
                shape.push(usize::try_from(d).map_err(|_| self.err("extent is too large"))?);
                if self.eat("]") {
                    break;
                }
                self.expect(",", "`,` or `]` in the shape")?;
            }
        }
        Ok(TensorType { dtype, shape })
    }
    /// The number right after `marker` (no space between), and the byte
    /// offset where it starts, if `marker` comes next: `#1` in `%3#1`, `:2`
    /// in `%3:2`.
    #[inline]
    pub fn suffix(&mut self, marker: u8, what: &str) -> Result<Option<(u64, usize)>, ParseError> {
        if self.rest().as_bytes().first() != Some(&marker) {
            return Ok(None);
        }
        self.pos += 1;
        let at = self.pos;
        Ok(Some((self.number(what)?, at)))
    }
    pub fn value_ref(&mut self) -> Result<Ref, ParseError> {
        self.skip_ws();
        let pos = self.pos;
        self.expect("%", "a value such as `%3`")?;
        let number = self.number("a value number after `%`")? as usize;
        let result = match self.suffix(b'#', "a result index after `#`")? {
            // `as u32` would wrap a huge index around to a valid one.
            Some((ix, at)) => Some(u32::try_from(ix).map_err(|_| {
                self.err_at(
                    at,
                    format!("result index `{ix}` is too large (at most {})", u32::MAX),
                )
            })?),
            None => None,
        };
        Ok(Ref {
            number,
            result,
            line: self.line,
            pos,
        })
    }
}
