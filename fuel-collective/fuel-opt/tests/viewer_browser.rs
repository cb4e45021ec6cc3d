//! The pass viewer in a real browser: headless Chromium opens the page
//! `fuel-opt demo` writes (`index.html`), a script appended to a copy of
//! it (`viewer_driver.js`) clicks a pass, a node and an IR line through
//! the page's own handlers and writes what it then sees into the DOM,
//! which Chromium dumps and this test reads. It asserts the pass index,
//! that the highlight of a lowered node reaches the steps before and after
//! it, the decisions and the diff; takes a screenshot and checks it is not
//! blank; opens a page of hostile names; and opens a dump of over 10k nodes,
//! printing how long the page took to load as a figure (not a pass/fail
//! timing).
//!
//! Without Chromium (`chromium` on `PATH`, or `FUEL_CHROMIUM`) each test
//! prints `SKIP: <reason>`; where `CI` is set it fails instead.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_test_support::{chained_all_reduces, hostile_recording, HOSTILE};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DRIVER: &str = include_str!("viewer_driver.js");

/// Chromium's path, or why there is none (a failure under `CI`).
fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("FUEL_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
                .find(|p| p.is_file())
        });
    if found.is_none() {
        let why = "chromium not found (apt-get install chromium, or set FUEL_CHROMIUM)";
        assert!(
            std::env::var_os("CI").is_none(),
            "{why}: CI must run the browser tests"
        );
        fuel_test_support::skip_line(format_args!("SKIP: {why}"));
    }
    found
}

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("viewer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs headless Chromium on `url` with `args` (its own profile folder,
/// removed after; killed after two minutes) and returns its standard output.
fn run_chromium(bin: &Path, args: &[&str], url: &str) -> String {
    let profile = scratch("profile");
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1600,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).map(|_| s)
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish {url} in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&profile);
    reader.join().unwrap().unwrap()
}

/// Opens a copy of `page` with the driver appended; returns what the
/// driver wrote, by key.
fn drive(bin: &Path, page: &Path) -> BTreeMap<String, String> {
    let html = std::fs::read_to_string(page).unwrap();
    let driven = page.with_extension("driven.html");
    let tail = "</body></html>";
    let at = html.rfind(tail).expect("the page ends its body");
    let with = format!(
        "{}<script>\n{DRIVER}</script>\n{}",
        &html[..at],
        &html[at..]
    );
    std::fs::write(&driven, with).unwrap();
    let dom = run_chromium(
        bin,
        &["--dump-dom"],
        &format!("file://{}", driven.display()),
    );
    let start = dom
        .rfind("<pre id=\"driver-result\">")
        .unwrap_or_else(|| panic!("no driver result in:\n{}", &dom[..dom.len().min(3000)]));
    let body = &dom[start..];
    let body = &body[..body.find("</pre>").unwrap()];
    body.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn fuel_opt(args: &[&str], cache: &Path) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_fuel-opt"))
        .args(args)
        .env_remove("FUEL_PRINT_AFTER")
        .env_remove("FUEL_DUMP_DIR")
        .env("FUEL_CACHE_DIR", cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fuel-opt {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn num(r: &BTreeMap<String, String>, k: &str) -> f64 {
    r.get(k)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{k} in {r:?}"))
}

/// A PNG's width and height, from its header.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(png.get(..8), Some(&b"\x89PNG\r\n\x1a\n"[..]), "not a PNG");
    let be = |i: usize| u32::from_be_bytes(png[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn the_demo_page_steps_through_the_pipeline_in_chromium() {
    let Some(bin) = chromium() else { return };
    let dir = scratch("demo");
    let out = dir.join("out");
    fuel_opt(
        &[
            "demo",
            "--elements",
            "4096",
            "--runs",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
        &scratch("cache"),
    );
    let page = out.join("index.html");
    let r = drive(&bin, &page);
    println!("driver: {r:?}");
    let names = "input,simplify-collectives,combine-collectives,lower-collectives,insert-cross-device-copies,split-cross-vendor-copies,cse,dce";
    assert_eq!(r["names"], names);
    assert_eq!(
        r["results"],
        "input,changed,unchanged,changed,unchanged,unchanged,unchanged,unchanged"
    );
    assert_eq!(r["current"], "3", "clicking a pass selects it");
    assert_ne!(
        r["clicked"], "none",
        "a node lowered from a collective is drawn"
    );
    assert!(num(&r, "hl_here") >= 1.0);
    // The highlight reaches every step: the collective it came from before
    // the lowering, the node itself after it.
    let badges: Vec<u32> = r["badges"].split(',').map(|b| b.parse().unwrap()).collect();
    assert_eq!(badges.len(), 8);
    assert!(badges.iter().all(|b| *b >= 1), "badges {badges:?}");
    assert!(
        num(&r, "marked_in_input") >= 1.0,
        "the source collective is marked in the input's picture"
    );
    assert!(num(&r, "ir_marked_in_input") >= 1.0, "and in its IR");
    assert!(num(&r, "hl_last") >= 1.0);
    assert_eq!(r["ir_click_selects"], "true");
    // simplify-collectives folded the demo's three collectives into one.
    assert_eq!(num(&r, "decisions"), 1.0);
    assert_eq!(num(&r, "picked"), 1.0);
    assert_eq!(r["diff_shown"], "true");
    assert!(num(&r, "diff_marked") > 10.0);
    assert!(num(&r, "hood_nodes") >= 2.0);
    assert!(
        num(&r, "timeline_bars") >= 6.0,
        "the demo's run is on the timeline"
    );
    // A screenshot of the lowering step with that node selected.
    let shot = dir.join("viewer.png");
    let url = format!("file://{}#step=3&v={}", page.display(), r["clicked"]);
    run_chromium(&bin, &[&format!("--screenshot={}", shot.display())], &url);
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(png_size(&png), (1600, 1000));
    // A blank 1600x1000 page compresses to about 7 KB.
    assert!(
        png.len() > 60_000,
        "the screenshot looks blank: {} bytes",
        png.len()
    );
    println!("screenshot: {} ({} bytes)", shot.display(), png.len());
}

#[test]
fn hostile_names_stay_text_in_chromium() {
    let Some(bin) = chromium() else { return };
    let page = scratch("hostile").join("hostile.html");
    hostile_recording().write(&page).unwrap();
    let r = drive(&bin, &page);
    assert_eq!(r["pwned"], "undefined", "a name ran as script");
    assert_eq!(r["scripts"], "3", "the data, the viewer and the driver");
    assert_eq!(
        num(&r, "title_chars"),
        HOSTILE.encode_utf16().count() as f64
    );
    assert_eq!(r["rows"], "2");
}

#[test]
fn a_10k_node_dump_opens_and_reports_its_load_time() {
    let Some(bin) = chromium() else { return };
    let dir = scratch("large");
    let fir = dir.join("big.fir");
    std::fs::write(&fir, chained_all_reduces(440)).unwrap();
    let page = dir.join("big.html");
    let made = Instant::now();
    let out = fuel_opt(
        &[
            fir.to_str().unwrap(),
            "--passes",
            "lower-collectives{algorithm=star},cse,dce",
            "--dump-html",
            page.to_str().unwrap(),
        ],
        &scratch("cache-large"),
    );
    let write_s = made.elapsed().as_secs_f64();
    let nodes = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(" = "))
        .count();
    assert!(nodes >= 10_000, "{nodes} nodes");
    let bytes = std::fs::metadata(&page).unwrap().len();
    let opened = Instant::now();
    let r = drive(&bin, &page);
    let wall = opened.elapsed().as_secs_f64();
    assert!(num(&r, "collapsed_bands") >= 8.0, "{r:?}");
    assert!(
        num(&r, "pictured_nodes") >= 1000.0,
        "an opened band draws its nodes: {r:?}"
    );
    assert!(
        num(&r, "hood_nodes") >= 2.0 && num(&r, "hood_nodes") < 200.0,
        "{r:?}"
    );
    println!(
        "REPORT: {nodes}-node dump: {:.1} MB page (written by fuel-opt, debug build, in {write_s:.1} s); \
         headless Chromium: viewer ready {} ms after navigation start, a device band opened in {} ms, \
         neighbourhood view in {} ms; chromium's whole run (start, load, driver, dump) {wall:.1} s",
        bytes as f64 / 1e6,
        r["ready_ms"],
        r["open_band_ms"],
        r["hood_ms"]
    );
}

#[test]
fn dump_html_into_a_missing_folder_is_a_clear_error() {
    let dir = scratch("missing");
    let fir = dir.join("g.fir");
    std::fs::write(&fir, chained_all_reduces(1)).unwrap();
    let page = dir.join("no/such/folder/page.html");
    let out = Command::new(env!("CARGO_BIN_EXE_fuel-opt"))
        .args([
            fir.to_str().unwrap(),
            "--passes",
            "lower-collectives",
            "--dump-html",
        ])
        .arg(&page)
        .env("FUEL_CACHE_DIR", scratch("cache-missing"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--dump-html: cannot write"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
