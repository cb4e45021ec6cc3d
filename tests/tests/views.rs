//! Slices that are views (`exec::schedule::Work::View`): a `slice` whose
//! bytes are one contiguous run of its operand's holds a view of the
//! operand's buffer instead of a copy, on the host and on Vulkan
//! (lavapipe). The plan says which slices became views; a view allocates
//! nothing (the allocator counters show one buffer less per view); every
//! result equals the interpreter's bit for bit with views read by folds,
//! casts, other slices (views of views), concats, copies to the other side
//! and graph outputs; slices that are not one run still copy; and a fault
//! at every point, the view's own included, leaks nothing. Without Vulkan
//! the Vulkan half prints `SKIP: <reason>`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::{text, Device, Graph, Topology};
use fuel_runtime::exec::{self, Executable};
use fuel_test_support::{devices_or_skip, fail_at_every_point, runs_exactly};

/// Rows of 64 elements: 256 bytes of f32 or i32, a multiple of every
/// storage-buffer offset alignment Vulkan allows (at most 256), so every
/// whole-row slice on `vulkan:0` can be a view.
const ROW: usize = 64;

/// Slices on `dev`: %2, %3 (a view of %2), %6 and %9 are runs of rows;
/// %4 cuts columns (many runs) and stays a copy. The views are read by a
/// fold, a concat, a cast, a copy to `other` and as graph outputs.
fn graph(dtype: &str, to: &str, dev: Device, other: Device) -> String {
    let t = format!("{dtype}[16,{ROW}]");
    format!(
        "graph @views {{
  %0 = input \"a\" @{dev} : {t}
  %1 = add %0, %0 @{dev} : {t}
  %2 = slice %1 {{axis=0, len=6, start=4}} @{dev} : {dtype}[6,{ROW}]
  %3 = slice %2 {{axis=0, len=2, start=1}} @{dev} : {dtype}[2,{ROW}]
  %4 = slice %1 {{axis=1, len=3, start=5}} @{dev} : {dtype}[16,3]
  %5 = add %2, %2 @{dev} : {dtype}[6,{ROW}]
  %6 = slice %0 {{axis=0, len=3, start=13}} @{dev} : {dtype}[3,{ROW}]
  %7 = concat %3, %6, %2 {{axis=0}} @{dev} : {dtype}[11,{ROW}]
  %8 = copy %2 -> {other} : {dtype}[6,{ROW}]
  %9 = slice %5 {{axis=0, len=1, start=5}} @{dev} : {dtype}[1,{ROW}]
  %10 = cast %9 {{to={to}}} @{dev} : {to}[1,{ROW}]
  return %3, %4, %5, %7, %8, %9, %10
}}
"
    )
}

fn compiled(src: &str, devs: &[Device], options: exec::Options) -> (Graph, Executable) {
    let g = text::parse(src).unwrap();
    let exe = exec::compile_with_options(&g, devs, &Topology::default(), options).unwrap();
    (g, exe)
}

/// The `%` numbers of the slices `exe` runs as views, in order.
fn viewed(g: &Graph, exe: &Executable) -> Vec<usize> {
    let numbering = text::Numbering::new(g);
    let mut v: Vec<usize> = (exe.viewed_slices().into_iter())
        .filter_map(|n| numbering.number(n))
        .collect();
    v.sort();
    v
}

fn views_on(dev: Device, other: Device) {
    let devs = [dev, other];
    for (dtype, to) in [("f32", "f64"), ("i32", "u32")] {
        let src = graph(dtype, to, dev, other);
        let (g, on) = compiled(&src, &devs, exec::Options::default());
        let off_options = exec::Options {
            view_slices: false,
            ..Default::default()
        };
        let (_, off) = compiled(&src, &devs, off_options);
        let viewed = viewed(&g, &on);
        assert_eq!(viewed, [2, 3, 6, 9], "{dtype} on {dev}: viewed slices");
        assert!(off.viewed_slices().is_empty());
        let made_on = runs_exactly(&g, &on, dev, &format!("{dtype} on {dev}, views"));
        let made_off = runs_exactly(&g, &off, dev, &format!("{dtype} on {dev}, copies"));
        // Each view saves its slice's buffer.
        assert_eq!(
            made_off - made_on,
            viewed.len(),
            "{dtype}: {dev} made {made_on} buffers per run with views, {made_off} without"
        );
        let events = on.planned_events().unwrap();
        let mut copied = off.planned_events().unwrap();
        copied.allocs -= viewed.len();
        assert_eq!(events, copied, "{dtype} on {dev}: planned events");
        let checked = fail_at_every_point(&g, &devs);
        assert_eq!(checked, events.copies + events.kernels + events.allocs);
    }
}

#[test]
fn host_slices_of_one_run_are_views() {
    views_on(Device::cpu(0), Device::cpu(1));
}

#[test]
fn vulkan_slices_of_one_run_are_views() {
    let test = "vulkan_slices_of_one_run_are_views";
    if !devices_or_skip(test, &[Device::cpu(0), Device::vulkan(0)]) {
        return;
    }
    views_on(Device::vulkan(0), Device::cpu(0));
}

/// A view keeps the buffer it views alive after that buffer's own last
/// reader: here the fold's result %1 is read only by the slice %2, whose
/// view is a graph output. The output must still read the right bytes
/// after %1's slot is released, run after run.
#[test]
fn a_view_outlives_the_slot_it_views() {
    let src = "graph @outlive {
  %0 = input \"a\" @cpu:0 : f32[8,4]
  %1 = mul %0, %0 @cpu:0 : f32[8,4]
  %2 = slice %1 {axis=0, len=3, start=5} @cpu:0 : f32[3,4]
  return %2
}
";
    let (g, exe) = compiled(src, &[Device::cpu(0)], exec::Options::default());
    assert_eq!(exe.viewed_slices().len(), 1);
    runs_exactly(&g, &exe, Device::cpu(0), "outlive");
}

/// A Vulkan slice at an offset the device cannot bind (4 and 12 bytes in)
/// is still a view where only copies into host arenas read it: deferred
/// into a host fold (%2 into %4), or a plain copy (%6). It saves its
/// buffer, and the host reads the right bytes through the mapping (or the
/// transfer's offset), run after run, with a fault at every point leaking
/// nothing. A slice a Vulkan kernel reads (%7) stays a copy.
#[test]
fn vulkan_slices_read_on_the_host_are_views_at_any_offset() {
    let test = "vulkan_slices_read_on_the_host_are_views_at_any_offset";
    let devs = [Device::vulkan(0), Device::cpu(0)];
    if !devices_or_skip(test, &devs) {
        return;
    }
    let src = "graph @host_views {
  %0 = input \"a\" @vulkan:0 : f32[1024]
  %1 = input \"b\" @cpu:0 : f32[1000]
  %2 = slice %0 {axis=0, len=1000, start=3} @vulkan:0 : f32[1000]
  %3 = copy %2 -> cpu:0 : f32[1000]
  %4 = add %1, %3 @cpu:0 : f32[1000]
  %5 = slice %0 {axis=0, len=1000, start=1} @vulkan:0 : f32[1000]
  %6 = copy %5 -> cpu:0 : f32[1000]
  %7 = slice %0 {axis=0, len=1000, start=5} @vulkan:0 : f32[1000]
  %8 = mul %7, %7 @vulkan:0 : f32[1000]
  return %4, %6, %8
}
";
    let (g, on) = compiled(src, &devs, exec::Options::default());
    let made = viewed(&g, &on);
    assert_eq!(made, [2, 5], "the slices read only on the host are views");
    let off_options = exec::Options {
        view_slices: false,
        ..Default::default()
    };
    let (_, off) = compiled(src, &devs, off_options);
    let dev = Device::vulkan(0);
    let made_on = runs_exactly(&g, &on, dev, "host views");
    let made_off = runs_exactly(&g, &off, dev, "copies");
    assert_eq!(made_off - made_on, 2, "each view saves its slice's buffer");
    fail_at_every_point(&g, &devs);
}
