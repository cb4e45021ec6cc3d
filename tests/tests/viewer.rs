//! The pass viewer's page (`fuel_graph_ext::html`, recorded by
//! `fuel_collective::viewer`): its embedded data is pinned for the demo's
//! graph and pipeline (structure, not pixels; times zeroed), the page is
//! byte-identical from one recording to the next, lowered nodes link back
//! to their collective, and hostile names and notes (quotes, `</script>`,
//! control characters, 1 MB strings) cannot leave the strings they are in.
//! `fuel-opt/tests/viewer_browser.rs` opens the page in Chromium.
//!
//! Bless the golden with `UPDATE_GOLDEN=1 cargo test -p fuel-tests --test
//! viewer`, after reading the diff.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::{viewer, DEFAULT_PIPELINE};
use fuel_graph_ext::html::Recording;
use fuel_graph_ext::Topology;
use fuel_test_support::{demo_graph, golden_dir, hostile_recording};
use std::sync::Arc;

fn demo_recording() -> Recording {
    let (_, mut rec) = viewer::record(
        &demo_graph(4098),
        DEFAULT_PIPELINE,
        Arc::new(Topology::default()),
    )
    .unwrap();
    rec.without_times();
    rec
}

/// JSON with a line per value down to depth 4, so a golden diff reads.
fn pretty(json: &str) -> String {
    let mut out = String::new();
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for c in json.chars() {
        out.push(c);
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '[' | '{' => depth += 1,
            ']' | '}' => depth = depth.saturating_sub(1),
            ',' if depth <= 4 => {
                out.push('\n');
                out.push_str(&" ".repeat(depth));
            }
            _ => {}
        }
    }
    out.push('\n');
    out
}

#[test]
fn the_demo_pages_data_matches_its_golden() {
    let got = pretty(&demo_recording().data(false));
    let path = golden_dir().join("viewer/demo.data.json");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if got != want {
        let diff = similar::TextDiff::from_lines(&want, &got);
        panic!(
            "{} differs (bless with UPDATE_GOLDEN=1 cargo test -p fuel-tests --test viewer):\n{}",
            path.display(),
            diff.unified_diff().context_radius(2)
        );
    }
}

#[test]
fn the_page_is_the_same_bytes_every_time_and_links_lowered_nodes() {
    let a = demo_recording();
    let html = a.to_html();
    assert_eq!(html, demo_recording().to_html());
    assert!(html.starts_with("<!DOCTYPE html>"));
    // Offline: nothing is fetched.
    for bad in ["http://", "https://", "src=\"", "<link", "@import"] {
        let outside_svg_ns = html.replace("http://www.w3.org/2000/svg", "");
        assert!(!outside_svg_ns.contains(bad), "the page refers to `{bad}`");
    }
    // lower-collectives made every collective's copies and recorded them.
    let lower = a
        .steps
        .iter()
        .position(|s| s.name == "lower-collectives")
        .unwrap();
    assert!(a.steps[lower].changed);
    // simplify-collectives folded the demo's all_gather of its
    // reduce_scatter into the all_reduce of the same shards, so one
    // collective is left to lower, and its page says the fold happened.
    let simplify = a
        .steps
        .iter()
        .position(|s| s.name == "simplify-collectives")
        .unwrap();
    assert!(a.steps[simplify].changed);
    assert_eq!(
        a.decisions.len(),
        1,
        "the all_reduce the others were folded into"
    );
    let made: std::collections::BTreeSet<_> = a.links.iter().map(|l| l.from).collect();
    assert_eq!(made.len(), 1, "the one collective made nodes: {made:?}");
    for l in &a.links {
        assert_eq!(l.step, lower);
        let from = a.steps[lower - 1].graph.node(l.from).unwrap();
        assert!(from.op.is_collective(), "{:?}", from.op);
        assert!(a.steps[lower].graph.contains(l.node));
    }
    assert!(a
        .decisions
        .iter()
        .all(|d| d.candidates.iter().any(|c| c.picked)));
}

#[test]
fn hostile_names_and_notes_stay_inside_their_strings() {
    let html = hostile_recording().to_html();
    let lower = html.to_ascii_lowercase();
    assert_eq!(
        lower.matches("<script").count(),
        2,
        "the data and the script"
    );
    assert_eq!(lower.matches("</script").count(), 2);
    assert_eq!(lower.matches("<!--").count(), 0);
    assert!(!html.contains("pwned=1</"));
    assert!(
        !html
            .chars()
            .any(|c| (c.is_control() && c != '\n') || c == '\u{2028}'),
        "a raw control character or line separator reached the page"
    );
    // The 1 MB name is in the IR of each of the 2 steps and the note; the
    // pictures and labels cut it.
    assert!(html.len() < 16 << 20, "{} bytes", html.len());
}
