//! Sizes: shapes whose element count or byte size overflows are verify
//! errors, and a buffer a device cannot hold is an error that says what
//! fits, never an abort: in the typing rule, the verifier, the
//! interpreter's allocations and the executor's compile-time checks.
//! Nothing here allocates more than a few bytes: every refusal comes from
//! arithmetic, a fallible reservation, or what the device reports.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::DeviceGroup;
use fuel_graph_ext::interp::{interpret, try_deterministic_inputs, InterpError};
use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::{text, DType, Device, LazyGraph, TensorType, Topology};
use fuel_runtime::backend::limits;
use fuel_runtime::exec::{self, ExecError};
use std::collections::BTreeMap;

fn verify_text(src: &str) -> String {
    let g = text::parse(src).unwrap();
    match verify(&g, Level::Structural, &Topology::default()) {
        Ok(()) => String::new(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn overflowing_shapes_are_verify_errors() {
    // The case: a concat of two 2^63-long axes used to verify as
    // f32[18446744073709551615] (a saturated sum).
    let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : u8[4611686018427387904]\n  %1 = concat %0, %0 {axis=0} @cpu:0 : u8[9223372036854775807]\n  return %1\n}\n";
    let e = verify_text(src);
    assert!(
        e.contains("`concat` along axis 0 gives a result of more than 9223372036854775807 bytes (2^63 - 1)"),
        "{e}"
    );
    // Every declared type is checked, inputs included, and extents whose
    // product overflows usize are no exception.
    for ty in [
        "f32[4611686018427387904]",
        "u8[4294967296,4294967296]",
        "f64[18446744073709551615,0]",
    ] {
        let src = format!("graph @g {{\n  %0 = input \"a\" @cpu:0 : {ty}\n  return %0\n}}\n");
        let e = verify_text(&src);
        assert!(
            e.contains(&format!(
                "type {ty} takes more than 9223372036854775807 bytes (2^63 - 1), the most one tensor can address; use a smaller shape"
            )),
            "{e}"
        );
    }
    // all_gather multiplies an extent by the shard count.
    let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : u8[4611686018427387904]\n  %1 = input \"b\" @cpu:1 : u8[4611686018427387904]\n  %2:2 = all_gather %0, %1 {axis=0} : u8[0]\n  return %2#0\n}\n";
    let e = verify_text(src);
    assert!(
        e.contains("`all_gather` along axis 0 gives a result of more than"),
        "{e}"
    );
    // The same through DeviceGroup: the builder refuses with the typing
    // rule's words.
    let lazy = LazyGraph::new("g");
    let ty = TensorType::new(DType::U8, &[1 << 62]);
    let shards: Vec<_> = (0..4)
        .map(|i| lazy.input(&format!("s{i}"), Device::cpu(i), ty.clone()))
        .collect();
    let group = DeviceGroup::new((0..4).map(Device::cpu)).unwrap();
    let e = group.all_gather(&shards, 0).unwrap_err().to_string();
    assert!(e.contains("gives a result of more than"), "{e}");
}

#[test]
fn inputs_with_one_name_have_one_type() {
    let src = "graph @g {\n  %0 = input \"x\" @cpu:0 : f32[4]\n  %1 = input \"x\" @cpu:1 : f32[4]\n  %2 = input \"x\" @cpu:1 : i32[4]\n  return %0, %1, %2\n}\n";
    let e = verify_text(src);
    assert_eq!(e.matches("// ^ error:").count(), 1, "{e}");
    assert!(
        e.contains("input \"x\" is declared i32[4] here but f32[4] by %0; inputs with one name are one tensor, so give them one type or different names"),
        "{e}"
    );
}

#[test]
fn the_interpreter_refuses_what_the_host_cannot_hold() {
    // 2^60 f32s fit the verifier (2^62 bytes) but not the host.
    let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[1152921504606846976]\n  %1 = add %0, %0 @cpu:0 : f32[1152921504606846976]\n  return %1\n}\n";
    let g = text::parse(src).unwrap();
    assert_eq!(verify_text(src), "");
    let e = try_deterministic_inputs(&g).unwrap_err();
    assert!(matches!(e, InterpError::OutOfMemory { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.starts_with("the interpreter cannot hold input \"a\" (f32[1152921504606846976], 9223372036854775808 bytes (8 EiB) as it keeps them): "),
        "{text}"
    );
    // interpret checks room for each value before evaluating it, so even
    // without data it refuses for the size first.
    let e = interpret(&g, &BTreeMap::new()).unwrap_err();
    assert!(matches!(e, InterpError::OutOfMemory { .. }), "{e:?}");
}

#[test]
fn empty_tensors_with_many_rows_cost_nothing() {
    // 2^60 rows of nothing: the schedule and the interpreter must not loop
    // over them.
    let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : u8[1152921504606846976,4,0]\n  %1 = slice %0 {axis=1, len=2, start=1} @cpu:0 : u8[1152921504606846976,2,0]\n  %2 = concat %0, %1 {axis=1} @cpu:0 : u8[1152921504606846976,6,0]\n  return %2\n}\n";
    assert_eq!(verify_text(src), "");
    let g = text::parse(src).unwrap();
    let inputs = try_deterministic_inputs(&g).unwrap();
    let want = interpret(&g, &inputs).unwrap();
    let exe = exec::compile(&g, &[]).unwrap();
    let got = exe.run_host(&inputs).unwrap();
    assert_eq!(got, want);
}

#[test]
fn compile_refuses_values_the_host_cannot_hold() {
    let Some(host) = limits::host() else {
        println!(
            "SKIP: compile_refuses_values_the_host_cannot_hold: no /proc figures for the host"
        );
        return;
    };
    // One value larger than the host.
    let n = host.buffer.bytes / 4 + 1;
    let src = format!("graph @g {{\n  %0 = input \"a\" @cpu:0 : f32[{n}]\n  %1 = add %0, %0 @cpu:0 : f32[{n}]\n  return %1\n}}\n");
    let g = text::parse(&src).unwrap();
    let e = exec::compile(&g, &[]).err().expect("compile must refuse");
    assert!(matches!(e, ExecError::TooLarge { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("%0 (`input`, f32[{n}]) needs {} bytes", n * 4)),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "but cpu:0 holds at most {} in one buffer ({})",
            limits::Bytes(host.buffer.bytes),
            host.buffer.what
        )),
        "{text}"
    );
    // Values that each fit but not all at once, on host arenas that share
    // the host's memory.
    let part = host.total.bytes / 3 + 1;
    let src = format!("graph @g {{\n  %0 = input \"a\" @cpu:0 : u8[{part}]\n  %1 = input \"b\" @cpu:1 : u8[{part}]\n  %2 = input \"c\" @cpu:2 : u8[{part}]\n  %3 = copy %0 -> cpu:1 : u8[{part}]\n  %4 = max %1, %3 @cpu:1 : u8[{part}]\n  %5 = copy %2 -> cpu:1 : u8[{part}]\n  %6 = max %4, %5 @cpu:1 : u8[{part}]\n  return %6\n}}\n");
    let g = text::parse(&src).unwrap();
    let e = exec::compile(&g, &[]).err().expect("compile must refuse");
    assert!(matches!(e, ExecError::NotEnoughMemory { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("at once on the host (cpu:0, cpu:1, cpu:2) when its steps run one by one"),
        "{e}"
    );
}

#[test]
fn region_lists_the_host_cannot_hold_are_an_error() {
    // A slice of 2^38 rows on a Vulkan device: its byte-region list (one
    // per row) cannot be reserved. The schedule is built before any device
    // is opened, so this needs no GPU. (Where the kernel grants any
    // allocation, overcommit_memory=1, the reservation would succeed and
    // the list be written: skip there.)
    if std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|m| m.trim() == "1") {
        fuel_test_support::skip_line(format_args!(
            "SKIP: region_lists: vm.overcommit_memory=1 grants any reservation"
        ));
        return;
    }
    let src = "graph @g {\n  %0 = input \"a\" @vulkan:0 : f32[274877906944,2]\n  %1 = slice %0 {axis=1, len=1, start=0} @vulkan:0 : f32[274877906944,1]\n  return %1\n}\n";
    let g = text::parse(src).unwrap();
    let e = exec::compile(&g, &[]).err().expect("compile must refuse");
    assert!(
        e.to_string()
            .contains("the host cannot hold the list of byte regions to copy for it"),
        "{e}"
    );
}

#[test]
fn compile_refuses_a_kernel_buffer_past_the_vulkan_storage_range() {
    if !fuel_test_support::devices_or_skip("vulkan_storage_range", &[Device::vulkan(0)]) {
        return;
    }
    let inst = fuel_runtime::backend::vulkan::Instance::open().unwrap();
    let cap = inst.open_device(Device::vulkan(0)).unwrap().capacity();
    let range = cap.kernel_buffer.bytes;
    if range.saturating_add(4) > cap.buffer.bytes {
        fuel_test_support::skip_line(format_args!(
            "SKIP: vulkan_storage_range: this device binds every buffer it can allocate"
        ));
        return;
    }
    let n = range / 4 + 1;
    // A copy of that size is fine (no kernel binds it); an add is not.
    let copy = format!("graph @g {{\n  %0 = input \"a\" @cpu:0 : f32[{n}]\n  %1 = copy %0 -> vulkan:0 : f32[{n}]\n  return %1\n}}\n");
    assert!(exec::compile(&text::parse(&copy).unwrap(), &[]).is_ok());
    let add = format!("graph @g {{\n  %0 = input \"a\" @vulkan:0 : f32[{n}]\n  %1 = add %0, %0 @vulkan:0 : f32[{n}]\n  return %1\n}}\n");
    let e = exec::compile(&text::parse(&add).unwrap(), &[])
        .err()
        .expect("compile must refuse");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("%1 (`add`, f32[{n}]) needs")),
        "{text}"
    );
    assert!(
        text.contains("in one buffer a kernel binds (maxStorageBufferRange)"),
        "{text}"
    );
}

#[test]
fn lowering_huge_tensors_neither_allocates_nor_overflows() {
    // Found by the `lower` fuzzer: the cost model summed the bytes of two
    // 2^62-byte transfers in a usize. Types this large fit the verifier, so
    // every pass and the cost model must handle them without allocating.
    for algorithm in ["auto", "star", "ring", "tree", "hierarchical"] {
        let lazy = LazyGraph::new("g");
        let ty = TensorType::new(DType::Bool, &[2, 1 << 61]);
        let devices = [Device::cpu(2), Device::vulkan(2)];
        let shards: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(i, d)| lazy.input(&format!("s{i}"), *d, ty.clone()))
            .collect();
        let group = DeviceGroup::new(devices).unwrap();
        for t in group
            .all_reduce(&shards, fuel_graph_ext::ReduceOp::Max)
            .unwrap()
        {
            lazy.output(&t).unwrap();
        }
        let mut g = lazy.snapshot();
        let pipeline = if algorithm == "auto" {
            fuel_collective::DEFAULT_PIPELINE.to_string()
        } else {
            fuel_collective::pipeline_with(&format!("algorithm={algorithm}"))
        };
        let cx = fuel_graph_ext::PassContext {
            topology: std::sync::Arc::new(Topology::default()),
        };
        fuel_graph_ext::PassManager::new(
            &fuel_collective::registry(),
            &pipeline,
            cx,
            fuel_graph_ext::DebugOptions::verifying(),
        )
        .unwrap()
        .run(&mut g)
        .unwrap_or_else(|e| panic!("{algorithm}: {e}"));
        for id in g.node_ids() {
            assert!(g.node(id).unwrap().ty.fits(), "{algorithm}");
        }
    }
}
