//! `fuel-opt --run` and `fuel-opt devices` as a user runs them, in child
//! processes, so that Vulkan can be hidden with `VK_ICD_FILENAMES` without
//! touching this process's environment.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::Device;
use fuel_test_support::graphs::pair_all_reduce;
use fuel_test_support::report::bench_once;
use fuel_test_support::{skip, Backend};
use std::process::Command;

/// The lowered all-reduce `--run` runs on two CPU devices.
fn ar() -> String {
    pair_all_reduce("add", "f32[1024]", Device::cpu(0), Device::cpu(1))
}

/// The same over cpu:0 and vulkan:0, folded by `max` on the host.
fn ar_vk() -> String {
    pair_all_reduce("max", "i32[1024]", Device::cpu(0), Device::vulkan(0))
}

fn fuel_opt(file_text: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let dir = std::env::temp_dir().join(format!("fuel-exec-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("g{}.fir", file_text.len()));
    std::fs::write(&path, file_text).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_fuel-opt"));
    c.arg(&path)
        .args(args)
        .env("FUEL_CACHE_DIR", dir.join("cache"));
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_prints_one_ok_line_per_result() {
    let (code, out, err) = fuel_opt(&ar(), &["--run", "--devices", "cpu:0,cpu:1"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("result 0 : f32[1024] @cpu:0 ok "), "{out}");
    assert!(out.contains("result 1 : f32[1024] @cpu:1 ok "), "{out}");
}

#[test]
fn run_on_vulkan_or_skip() {
    let (code, out, err) = fuel_opt(&ar_vk(), &["--run"], &[]);
    if code == 2 && err.contains("cannot open vulkan:0") {
        skip("run_on_vulkan_or_skip", Backend::Vulkan, &err);
        return;
    }
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("result 1 : i32[1024] @vulkan:0 ok "), "{out}");
}

/// `FUEL_VULKAN_MAPPED=0` forces the staging path (no mapped storage
/// buffers) in the whole process; results stay right.
#[test]
fn run_on_vulkan_through_staging_or_skip() {
    let (code, out, err) = fuel_opt(&ar_vk(), &["--run"], &[("FUEL_VULKAN_MAPPED", "0")]);
    if code == 2 && err.contains("cannot open vulkan:0") {
        skip(
            "run_on_vulkan_through_staging_or_skip",
            Backend::Vulkan,
            &err,
        );
        return;
    }
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("result 0 : i32[1024] @cpu:0 ok "), "{out}");
    assert!(out.contains("result 1 : i32[1024] @vulkan:0 ok "), "{out}");
}

#[test]
fn vulkan_without_a_driver_is_a_clear_error() {
    let hide = [
        ("VK_ICD_FILENAMES", "/nonexistent.json"),
        ("VK_DRIVER_FILES", "/nonexistent.json"),
    ];
    let (code, _, err) = fuel_opt(&ar_vk(), &["--run"], &hide);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot open vulkan:0"), "{err}");
    // Either the loader is missing or it found no driver; both say how to fix it.
    assert!(
        err.contains("ERROR_INCOMPATIBLE_DRIVER") || err.contains("no Vulkan loader"),
        "{err}"
    );
    assert!(
        err.contains("apt-get install mesa-vulkan-drivers libvulkan1"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_fuel-opt"))
        .arg("devices")
        .envs(hide)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("cpu:0"), "{text}");
    assert!(text.contains("vulkan     unavailable"), "{text}");
    assert!(text.contains("cuda"), "{text}");
}

#[test]
fn unlisted_device_is_an_input_error() {
    let (code, _, err) = fuel_opt(&ar(), &["--run", "--devices", "cpu:0"], &[]);
    assert_eq!(code, 2);
    assert!(
        err.contains("uses cpu:1, which is not in the device list"),
        "{err}"
    );
}

/// `bench --calibrate` writes a topology file that `--topology` reads back,
/// with the measured host-host link and CPU reduce figures in it.
#[test]
fn calibrate_writes_a_topology_the_bench_reads_back() {
    let dir = std::env::temp_dir().join(format!("fuel-calibrate-{}", std::process::id()));
    let out = dir.join("t.topo");
    let o = Command::new(env!("CARGO_BIN_EXE_fuel-opt"))
        .args(["bench", "--calibrate", "--devices", "cpu:0,cpu:1"])
        .args(["--iters", "1", "--warmup", "0", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("link host-host"), "{stdout}");
    assert!(stdout.contains("reduce cpu"), "{stdout}");
    let text = std::fs::read_to_string(&out).unwrap();
    let t = fuel_graph_ext::Topology::parse(&text).unwrap();
    assert_eq!(
        t.to_text(),
        text.lines()
            .skip(1)
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    let o = Command::new(env!("CARGO_BIN_EXE_fuel-opt"))
        .env(
            "FUEL_CACHE_DIR",
            std::env::temp_dir().join("fuel-exec-cli-no-cache"),
        )
        .args(bench_once("cpu:0,cpu:1", &["--topology"]))
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
