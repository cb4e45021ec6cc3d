//! Arbitrary bytes into the text-IR parser: it must never panic or hang, and
//! whatever parses must print, re-parse and print byte-identically.
#![no_main]

use fuel_graph_ext::text::{parse, print};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let Ok(g) = parse(src) else { return };
    let text = print(&g);
    match parse(&text) {
        Ok(back) => assert_eq!(print(&back), text, "print -> parse -> print changed the text"),
        Err(e) => panic!("printed text does not parse: {e}\n{text}"),
    }
});
