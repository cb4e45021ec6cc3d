//! A small JSON writer for the data a viewer page embeds, safe inside a
//! `<script>` element: `<`, `>` and `&` are written as `\u003c`, `\u003e`
//! and `\u0026`, so no user text (a graph name, an input name, a note) can
//! close the element or open a comment; control characters and the line
//! separators U+2028/U+2029 are escaped too. Lone surrogates cannot occur
//! (the input is a Rust `str`), so the output always parses as JSON.

use std::fmt::Write;

/// Appends `s` as a JSON string literal, quotes included.
pub fn push_str(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    crate::text::push_backslashed(out, s, |out, c| match c {
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c if (c as u32) < 0x20 || c == '\u{7f}' => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => out.push(c),
    });
    out.push('"');
}

/// Appends a finite number (`null` for NaN or an infinity, which JSON
/// cannot hold), with at most three decimals so the text is stable.
pub fn push_num(out: &mut String, v: f64) {
    if v.is_finite() {
        let r = (v * 1000.0).round() / 1000.0;
        if r.fract() == 0.0 && r.abs() < 1e15 {
            let _ = write!(out, "{}", r as i64);
        } else {
            let _ = write!(out, "{r}");
        }
    } else {
        out.push_str("null");
    }
}

/// Builds one JSON object or array by hand, with the commas in place.
pub struct Obj<'a> {
    out: &'a mut String,
    first: bool,
    close: char,
}

impl<'a> Obj<'a> {
    /// Opens an object.
    pub fn object(out: &'a mut String) -> Obj<'a> {
        out.push('{');
        Obj {
            out,
            first: true,
            close: '}',
        }
    }

    /// Opens an array.
    pub fn array(out: &'a mut String) -> Obj<'a> {
        out.push('[');
        Obj {
            out,
            first: true,
            close: ']',
        }
    }

    fn sep(&mut self) {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
    }

    /// Starts the next item of an array (or a key with [`Obj::key`]) and
    /// gives the output to write its value to.
    pub fn item(&mut self) -> &mut String {
        self.sep();
        self.out
    }

    /// Starts the value of `key` and gives the output to write it to.
    pub fn key(&mut self, key: &str) -> &mut String {
        self.sep();
        push_str(self.out, key);
        self.out.push(':');
        self.out
    }

    /// `key`: a string.
    pub fn str(&mut self, key: &str, v: &str) {
        push_str(self.key(key), v);
    }

    /// `key`: a number.
    pub fn num(&mut self, key: &str, v: f64) {
        push_num(self.key(key), v);
    }

    /// `key`: a boolean.
    pub fn bool(&mut self, key: &str, v: bool) {
        self.key(key).push_str(if v { "true" } else { "false" });
    }

    /// Closes the object or array.
    pub fn end(self) {
        self.out.push(self.close);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_closes_the_script_element() {
        let mut s = String::new();
        push_str(&mut s, "a\"b</script><!-- \u{0}\u{1b}\u{2028}\\");
        assert_eq!(
            s,
            "\"a\\\"b\\u003c/script\\u003e\\u003c!-- \\u0000\\u001b\\u2028\\\\\""
        );
        assert!(!s.contains('<') && !s.contains('>'));
    }

    #[test]
    fn numbers_are_stable_and_finite() {
        let mut s = String::new();
        for v in [1.0, 0.12345, f64::NAN, -2.5] {
            push_num(&mut s, v);
            s.push(' ');
        }
        assert_eq!(s, "1 0.123 null -2.5 ");
    }
}
