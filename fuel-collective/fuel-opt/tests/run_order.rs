//! `fuel-opt --run` where a lowering folds an f16 sum in another order
//! than the interpreter's rank order (issue 38, class 1): the run is
//! correct, so it exits 0, and each result says how many elements owe
//! their bits to the fold order (docs/lowering.md, "Fold order").

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// Four CPU ranks; the shards of ranks 0 and 2 are raised to powers, so
/// that f16 rounds their sums differently in different orders.
const F16_SUM: &str = "graph @order {
  %0 = input \"a\" @cpu:0 : f16[16]
  %1 = input \"b\" @cpu:1 : f16[16]
  %2 = input \"c\" @cpu:2 : f16[16]
  %3 = input \"d\" @cpu:3 : f16[16]
  %4 = mul %0, %0, %0, %0, %0, %0 @cpu:0 : f16[16]
  %5 = mul %2, %2, %2 @cpu:2 : f16[16]
  %6:4 = all_reduce.sum %4, %1, %5, %3 : f16[16]
  return %6#0, %6#1, %6#2, %6#3
}
";

fn fuel_opt(file_text: &str, args: &[&str]) -> (i32, String, String) {
    let dir = std::env::temp_dir().join(format!("fuel-run-order-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("g.fir");
    std::fs::write(&path, file_text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fuel-opt"))
        .arg(&path)
        .args(args)
        .env("FUEL_CACHE_DIR", dir.join("cache"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_accepts_an_f16_sum_folded_in_another_order() {
    for alg in ["ring", "tree", "hierarchical", "star"] {
        let pipeline = format!("lower-collectives{{algorithm={alg}}}");
        let (code, out, err) = fuel_opt(F16_SUM, &["--passes", &pipeline, "--run"]);
        assert_eq!(code, 0, "{alg}: {err}\n{out}");
        assert!(!out.contains("MISMATCH"), "{alg}: {out}");
        assert_eq!(out.matches(" ok ").count(), 4, "{alg}: {out}");
        // Ring and tree fold out of rank order here; star folds in it.
        let reordered = out.contains("folded in another order than rank order");
        assert_eq!(reordered, alg == "ring" || alg == "tree", "{alg}: {out}");
    }
}
