//! Which characters a message must not show as themselves: those that
//! print nothing, or nothing a reader can tell from something else.
//!
//! Unicode's general categories Cc (controls), Cf (format characters: the
//! byte order mark, zero-width spaces and joiners, bidirectional controls,
//! tags), Zl and Zp (line and paragraph separators); the spaces other than
//! U+0020 (Zs: no-break, em, ideographic spaces, which look like a plain
//! space); the other default-ignorable characters (variation selectors,
//! Hangul fillers, the combining grapheme joiner); private-use characters,
//! which no font is bound to draw; and the noncharacters. The Cf list is
//! Unicode 15.1's. Unassigned code points (Cn) are not listed: that needs
//! the full character tables; they print as a replacement glyph, not as
//! nothing.

/// Ranges of invisible characters, sorted, inclusive, outside Cc.
const RANGES: &[(u32, u32)] = &[
    (0x00A0, 0x00A0),    // no-break space (Zs)
    (0x00AD, 0x00AD),    // soft hyphen (Cf)
    (0x034F, 0x034F),    // combining grapheme joiner
    (0x0600, 0x0605),    // Arabic number signs (Cf)
    (0x061C, 0x061C),    // Arabic letter mark (Cf)
    (0x06DD, 0x06DD),    // Arabic end of ayah (Cf)
    (0x070F, 0x070F),    // Syriac abbreviation mark (Cf)
    (0x0890, 0x0891),    // Arabic pound and piastre marks above (Cf)
    (0x08E2, 0x08E2),    // Arabic disputed end of ayah (Cf)
    (0x115F, 0x1160),    // Hangul fillers
    (0x1680, 0x1680),    // Ogham space mark (Zs)
    (0x17B4, 0x17B5),    // Khmer inherent vowels
    (0x180B, 0x180F),    // Mongolian variation selectors and vowel separator (Cf)
    (0x2000, 0x200F),    // spaces (Zs), zero-width space, joiners, direction marks (Cf)
    (0x2028, 0x202F), // line and paragraph separators (Zl, Zp), embeddings (Cf), narrow no-break space
    (0x205F, 0x206F), // medium mathematical space, word joiner, invisible operators, isolates (Cf)
    (0x3000, 0x3000), // ideographic space (Zs)
    (0x3164, 0x3164), // Hangul filler
    (0xE000, 0xF8FF), // private use (Co)
    (0xFDD0, 0xFDEF), // noncharacters
    (0xFE00, 0xFE0F), // variation selectors
    (0xFEFF, 0xFEFF), // byte order mark, zero-width no-break space (Cf)
    (0xFFA0, 0xFFA0), // halfwidth Hangul filler
    (0xFFF0, 0xFFFB), // unassigned specials and interlinear annotation (Cf)
    (0x110BD, 0x110BD), // Kaithi number sign (Cf)
    (0x110CD, 0x110CD), // Kaithi number sign above (Cf)
    (0x13430, 0x1343F), // Egyptian hieroglyph format controls (Cf)
    (0x1BCA0, 0x1BCA3), // shorthand format controls (Cf)
    (0x1D173, 0x1D17A), // musical symbol format controls (Cf)
    (0xE0000, 0xE0FFF), // tags (Cf) and variation selectors supplement
    (0xF0000, 0x10FFFF), // supplementary private use areas (Co)
];

/// Whether `c` is shown escaped in messages (see the module docs).
pub fn invisible(c: char) -> bool {
    let u = c as u32;
    if c.is_control() || (u & 0xFFFE) == 0xFFFE {
        return true;
    }
    let i = RANGES.partition_point(|&(_, hi)| hi < u);
    RANGES.get(i).is_some_and(|&(lo, _)| lo <= u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_and_format_characters_are_found_and_text_is_not() {
        for c in [
            '\u{0}',
            '\u{1b}',
            '\u{7f}',
            '\u{85}',
            '\u{a0}',
            '\u{ad}',
            '\u{200b}',
            '\u{200d}',
            '\u{202e}',
            '\u{2028}',
            '\u{2029}',
            '\u{2066}',
            '\u{3000}',
            '\u{feff}',
            '\u{fe0f}',
            '\u{e000}',
            '\u{fffe}',
            '\u{1fffe}',
            '\u{e0041}',
            '\u{10fffd}',
        ] {
            assert!(invisible(c), "{:x}", c as u32);
        }
        for c in [
            ' ',
            'a',
            'é',
            'ß',
            '中',
            '…',
            '→',
            '\u{2030}',
            '\u{fffd}',
            '😀',
            '\u{1f600}',
        ] {
            assert!(!invisible(c), "{:x}", c as u32);
        }
        assert!(
            RANGES.windows(2).all(|w| w[0].1 < w[1].0),
            "sorted and apart"
        );
    }
}
