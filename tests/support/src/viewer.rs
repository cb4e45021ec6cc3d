//! Pages for the pass viewer's tests: a recording whose names and notes
//! are hostile (quotes, `</script>`, a comment, control characters, a line
//! separator, one 1 MB string), and a text-IR graph of about `n` nodes once
//! lowered, for the large-graph figure.

use fuel_collective::{viewer, DeviceGroup};
use fuel_graph_ext::html::Recording;
use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType, Topology};
use std::fmt::Write;
use std::sync::Arc;

/// A hostile name: quotes, the end of a script element, a comment, a
/// control character, a line separator.
pub const HOSTILE: &str =
    "x\"'</script><script>window.pwned=1</script><!--\u{0}\u{1b}[31m\u{2028}&amp;";

/// A graph whose name, input names and note are hostile, one of them 1 MB.
pub fn hostile_recording() -> Recording {
    let devices = [Device::cpu(0), Device::cpu(1)];
    let big = format!("{HOSTILE}{}", "</script>".repeat(1 << 17));
    let lazy = LazyGraph::new(HOSTILE);
    let ty = TensorType::new(DType::F32, &[4]);
    let a = lazy.input(&big, devices[0], ty.clone());
    let b = lazy.input(HOSTILE, devices[1], ty);
    let group = DeviceGroup::new(devices).unwrap();
    for t in group.all_reduce(&[a, b], ReduceOp::Sum).unwrap() {
        lazy.output(&t).unwrap();
    }
    let mut g = lazy.snapshot();
    g.add_note(big.clone());
    let (_, rec) = viewer::record(&g, "lower-collectives", Arc::new(Topology::default())).unwrap();
    rec
}

/// A graph in text IR: `rounds` all_reduce.sum over cpu:0..7, each
/// round's shards the last round's results plus one, so that the rounds
/// chain. Lowered with `star`, a round is about 23 nodes.
pub fn chained_all_reduces(rounds: usize) -> String {
    let mut s = String::from("graph @big {\n");
    let mut k = 0usize;
    let mut shards: Vec<String> = Vec::new();
    for d in 0..8 {
        let _ = writeln!(s, "  %{k} = input \"x{d}\" @cpu:{d} : f32[64]");
        shards.push(format!("%{k}"));
        k += 1;
    }
    for _ in 0..rounds {
        let r = k;
        let _ = writeln!(
            s,
            "  %{r}:8 = all_reduce.sum {} : f32[64]",
            shards.join(", ")
        );
        k += 1;
        shards.clear();
        for d in 0..8 {
            let _ = writeln!(s, "  %{k} = add %{r}#{d}, %{r}#{d} @cpu:{d} : f32[64]");
            shards.push(format!("%{k}"));
            k += 1;
        }
    }
    let _ = writeln!(s, "  return {}\n}}", shards.join(", "));
    s
}
