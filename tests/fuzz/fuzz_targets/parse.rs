//! Arbitrary bytes into the text-IR parser: it must never panic or hang;
//! its errors must quote the input safely (no raw control character, a
//! bounded length however long the line); and whatever parses must print,
//! re-parse and print byte-identically, verify without panicking, draw as
//! DOT, keep every verified type addressable (no size overflows), and, when
//! its values are small, interpret without panicking. `parse.dict` seeds
//! the tokens that reach the size checks (huge extents, concat,
//! all_gather).
#![no_main]

use fuel_graph_ext::interp::{interpret, try_deterministic_inputs};
use fuel_graph_ext::text::{excerpt, parse, print};
use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::{dot, Topology};
use libfuzzer_sys::fuzz_target;

/// Interpret only graphs whose values take at most this many bytes in all.
const SMALL: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let g = match parse(src) {
        Ok(g) => g,
        Err(e) => {
            let text = e.to_string();
            // The message, the shown line (a window) and the caret line.
            assert!(
                text.len() <= 8 * excerpt::LINE_CHARS + 1024,
                "a parse error of {} bytes for {} bytes of input",
                text.len(),
                src.len()
            );
            assert!(
                !text.chars().any(|c| c.is_control() && c != '\n'),
                "a raw control character in a parse error: {text:?}"
            );
            return;
        }
    };
    let text = print(&g);
    match parse(&text) {
        Ok(back) => assert_eq!(print(&back), text, "print -> parse -> print changed the text"),
        Err(e) => panic!("printed text does not parse: {e}\n{text}"),
    }
    let _ = dot::to_dot(&g);
    if verify(&g, Level::Structural, &Topology::default()).is_err() {
        return;
    }
    let mut bytes = 0usize;
    for id in g.node_ids() {
        let Some(n) = g.node(id) else { continue };
        assert!(n.ty.fits(), "a verified graph holds {}, which does not fit:\n{text}", n.ty);
        bytes = bytes.saturating_add(n.ty.size_bytes());
    }
    if bytes <= SMALL {
        if let Ok(inputs) = try_deterministic_inputs(&g) {
            let _ = interpret(&g, &inputs);
        }
    }
});
