//! Quoting input in messages: hidden characters escaped, long text cut.
//!
//! Every error message that repeats something a user wrote (a source line,
//! a token, an input name, a device or pass name, an environment variable's
//! value) shows it through this module, so a terminal escape sequence in a
//! `.fir` file is printed as `\u{1b}` instead of being obeyed, and a 20 MB
//! line costs a few hundred bytes of message instead of 20 MB. Ordinary
//! text (printable, short) comes back unchanged, byte for byte, which keeps
//! the parser's caret rendering and the error catalogue as they were.
//!
//! Escaping is idempotent: its output has no hidden characters, so text that
//! passes through twice (a token quoted in a message, then the message
//! escaped when printed) is escaped once.

use std::borrow::Cow;
use std::fmt::Write;

/// The most characters of one token (a name, a number, a device) a message
/// quotes before cutting it.
pub const TOKEN_CHARS: usize = 64;

/// The most characters of one source line a message shows.
pub const LINE_CHARS: usize = 400;

/// Whether `c` is shown escaped: control, format and separator
/// characters and the others that print nothing a reader can see
/// ([`super::invisible`]: a byte order mark, a zero-width space, the
/// bidirectional controls that reorder text on a terminal).
fn hidden(c: char) -> bool {
    super::invisible::invisible(c)
}

/// Appends `c` as a message shows it.
fn push_shown(out: &mut String, c: char) {
    match c {
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        c if hidden(c) => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        c => out.push(c),
    }
}

/// How many characters `c` takes when shown.
fn shown_width(c: char) -> usize {
    match c {
        '\t' | '\n' | '\r' => 2,
        // `\u{` + hex digits + `}`.
        c if hidden(c) => 4 + format!("{:x}", c as u32).len(),
        _ => 1,
    }
}

/// `s` with every hidden character escaped (`\t`, `\n`, `\r`, `\u{1b}`);
/// borrowed when there is none.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(hidden) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_shown(&mut out, c);
    }
    Cow::Owned(out)
}

/// `s` escaped and cut to at most `max` shown characters; a cut one ends
/// with `… (N more characters)`, counting the characters of `s` left out.
pub fn excerpt(s: &str, max: usize) -> String {
    let mut out = String::new();
    let mut width = 0;
    for (i, c) in s.char_indices() {
        let w = shown_width(c);
        if width + w > max {
            let rest = s.get(i..).map_or(0, |r| r.chars().count());
            let _ = write!(out, "… ({rest} more character{})", plural(rest));
            return out;
        }
        width += w;
        push_shown(&mut out, c);
    }
    out
}

/// A token as a message quotes it: [`excerpt`] at [`TOKEN_CHARS`].
pub fn token(s: &str) -> String {
    excerpt(s, TOKEN_CHARS)
}

/// An input name in double quotes, escaped as the printer writes it and
/// cut like a [`token`]: `"x"`, `"a\u{1b}b"`.
pub fn name(s: &str) -> String {
    let mut printed = String::with_capacity(s.len() + 2);
    super::print::push_escaped(&mut printed, s);
    let mut out = String::with_capacity(printed.len().min(TOKEN_CHARS) + 2);
    out.push('"');
    out.push_str(&excerpt(&printed, TOKEN_CHARS));
    out.push('"');
    out
}

/// A source line as an error shows it, and the column (0-based, in shown
/// characters) of the character that 1-based column `col` points at.
///
/// Short printable lines come back unchanged with the column `col - 1`.
/// Hidden characters are escaped (the column moves past their escapes),
/// and a line longer than `max` shown characters is cut to a window around
/// the column, marked `…` where text is left out and followed by
/// `(N characters cut)`.
pub fn window(line: &str, col: usize, max: usize) -> (String, usize) {
    let at = col.saturating_sub(1);
    let widths: Vec<usize> = line.chars().map(shown_width).collect();
    let total: usize = widths.iter().sum();
    let ordinary = total == widths.len();
    if total <= max {
        if ordinary {
            return (line.to_string(), at);
        }
        let caret = widths.iter().take(at).sum::<usize>() + at.saturating_sub(widths.len());
        return (escape(line).into_owned(), caret);
    }
    // Characters [start, end) are shown: up to half the window before the
    // column, and as many after it as fit.
    let n = widths.len();
    let at_char = at.min(n);
    let mut start = at_char;
    let mut width = 0;
    while start > 0 && width + widths[start - 1] <= max / 2 {
        start -= 1;
        width += widths[start];
    }
    let mut end = at_char;
    while end < n && width + widths[end] <= max {
        width += widths[end];
        end += 1;
    }
    while start > 0 && width + widths[start - 1] <= max {
        start -= 1;
        width += widths[start];
    }
    let mut out = String::new();
    let mut caret = 0;
    if start > 0 {
        out.push('…');
        caret += 1;
    }
    for (k, c) in line.chars().enumerate().take(end).skip(start) {
        if k < at_char {
            caret += widths[k];
        }
        push_shown(&mut out, c);
    }
    caret += at - at_char;
    let cut = n - (end - start);
    if end < n {
        out.push('…');
    }
    let _ = write!(out, " ({cut} character{} cut)", plural(cut));
    (out, caret)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_text_is_unchanged() {
        assert!(matches!(escape("%0 = input \"a\""), Cow::Borrowed(_)));
        assert_eq!(excerpt("cpu:0", 64), "cpu:0");
        assert_eq!(token("é日本"), "é日本");
        assert_eq!(name("a\"b"), "\"a\\\"b\"");
        let line = "  %1 = frob %0 @cpu:0 : f32[4]";
        assert_eq!(window(line, 8, LINE_CHARS), (line.to_string(), 7));
        // A column past the end (end of line) keeps its offset.
        assert_eq!(window("ab", 3, LINE_CHARS), ("ab".to_string(), 2));
    }

    #[test]
    fn hidden_characters_are_escaped_once() {
        let evil = "a\u{1b}[31mb\u{202e}c\td";
        let shown = escape(evil);
        assert_eq!(shown, "a\\u{1b}[31mb\\u{202e}c\\td");
        assert_eq!(escape(&shown), shown, "escaping is idempotent");
        assert_eq!(name("x\u{7}"), "\"x\\u{7}\"");
        // The caret moves past the escape before it.
        let (l, c) = window("\u{1b}x", 2, LINE_CHARS);
        assert_eq!((l.as_str(), c), ("\\u{1b}x", 6));
    }

    #[test]
    fn long_text_is_cut_and_says_how_much() {
        let long = "x".repeat(1000);
        assert_eq!(
            excerpt(&long, 10),
            format!("{}… (990 more characters)", "x".repeat(10))
        );
        let line = format!("{}^{}", "a".repeat(20_000_000), "b".repeat(5_000));
        let (shown, caret) = window(&line, 20_000_001, 100);
        assert!(shown.len() < 200, "{}", shown.len());
        assert!(
            shown.ends_with(" (20004901 characters cut)"),
            "{}",
            &shown[shown.len() - 40..]
        );
        assert_eq!(shown.chars().nth(caret), Some('^'), "{shown}");
        assert!(shown.starts_with('…'));
        // A long line cut at its start only.
        let (shown, caret) = window(&"z".repeat(500), 1, 100);
        assert_eq!(caret, 0);
        assert!(shown.starts_with("zzz") && shown.ends_with("… (400 characters cut)"));
    }
}
