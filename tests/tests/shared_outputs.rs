//! Graph outputs that share one host buffer. A copy between host arenas is
//! a shared step even when its result is returned (`Work::Share`), so a
//! star's result on `cpu:0` and its copies on `cpu:1..3` come back as
//! tensors over one set of bytes, made once. These tests hold the three
//! things that makes safe: the values are the interpreter's, a write to one
//! returned tensor never shows in another (copy-on-write), and a later run
//! never writes into bytes a caller still holds. Sharing off
//! (`share_host_copies: false`) gives every output bytes of its own, which
//! the first test pins so the sharing cannot pass unseen.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::interp::HostTensor;
use fuel_graph_ext::{text::parse, DType, Device, ReduceOp, Topology};
use fuel_runtime::exec::{self, Executable, Tensor};
use fuel_test_support::{all_reduce_graph, assert_close, devices_or_skip, inputs_and_want, lower};
use std::collections::BTreeMap;
use std::sync::Arc;

/// An f32 all_reduce of `n` elements per rank over `devices`, lowered as a
/// star, compiled with `options`; its inputs and the interpreter's results.
fn star(
    devices: &[Device],
    n: usize,
    options: exec::Options,
) -> (Executable, BTreeMap<String, Tensor>, Vec<HostTensor>) {
    let g = all_reduce_graph(devices, DType::F32, n, ReduceOp::Sum);
    let lowered = lower(&g, &fuel_collective::pipeline_with("algorithm=star"));
    let exe = exec::compile_with_options(&lowered, devices, &Topology::default(), options).unwrap();
    let (inputs, want) = inputs_and_want(&g);
    (exe, inputs, want)
}

fn host(outs: &[Tensor]) -> Vec<HostTensor> {
    outs.iter().map(Tensor::to_host).collect()
}

/// Whether outputs `a` and `b` are tensors over one set of bytes.
fn same_bytes(outs: &[Tensor], a: usize, b: usize) -> bool {
    Arc::ptr_eq(&outs[a].shared(), &outs[b].shared())
}

#[test]
fn a_stars_host_outputs_are_one_buffer_and_sharing_off_copies_them() {
    let cpus: Vec<Device> = (0..4).map(Device::cpu).collect();
    let (exe, inputs, want) = star(&cpus, 1 << 14, exec::Options::default());
    let outs = exe.run(&inputs).unwrap();
    assert_close(&host(&outs), &want, "shared outputs");
    for k in 1..4 {
        assert!(same_bytes(&outs, 0, k), "output {k} was copied, not shared");
    }
    // The three shards into the root and the three results out.
    assert_eq!(
        exe.shared_copies().len(),
        6,
        "every copy of the star is a shared step"
    );

    let off = exec::Options {
        share_host_copies: false,
        ..Default::default()
    };
    let (exe, inputs, want) = star(&cpus, 1 << 14, off);
    let outs = exe.run(&inputs).unwrap();
    assert_close(&host(&outs), &want, "sharing off");
    for k in 1..4 {
        assert!(
            !same_bytes(&outs, 0, k),
            "sharing off: output {k} shares output 0's bytes"
        );
    }
}

#[test]
fn a_write_to_one_shared_output_leaves_the_others_and_the_next_run_alone() {
    let cpus: Vec<Device> = (0..4).map(Device::cpu).collect();
    let n = 1 << 12;
    let (exe, inputs, want) = star(&cpus, n, exec::Options::default());
    let mut outs = Vec::new();
    exe.run_into(&inputs, &mut outs).unwrap();
    let before = host(&outs);
    assert_close(&before, &want, "first run");
    // The caller overwrites output 2 in place: only it changes.
    outs[2].copy_from_slice(&vec![-7.0f32; n]).unwrap();
    assert_eq!(outs[2].to_vec::<f32>().unwrap(), vec![-7.0f32; n]);
    for k in [0, 1, 3] {
        assert_eq!(
            outs[k].to_host(),
            before[k],
            "output {k} changed with output 2"
        );
    }
    // A second run into the same tensors (some shared, one now its own):
    // every output is the sum again, and a clone the caller kept of the
    // first run's output 1 keeps its values.
    let kept = outs[1].clone();
    exe.run_into(&inputs, &mut outs).unwrap();
    assert_close(&host(&outs), &want, "second run");
    assert_eq!(kept.to_host(), before[1], "a kept clone was written into");
    // Runs that drop their outputs reuse bytes and stay right.
    for round in 0..3 {
        let outs = exe.run(&inputs).unwrap();
        assert_close(&host(&outs), &want, &format!("run {round}"));
    }
}

#[test]
fn a_loop_of_runs_into_one_vector_folds_into_the_same_bytes() {
    // The training-loop shape: `run_into` one output vector again and again.
    // Outputs 1..3 are clones of output 0; once they let go of it, the next
    // run folds into output 0's bytes instead of fresh memory, which a
    // 16 MiB fold paid for in page faults on every run (issue 37).
    let cpus: Vec<Device> = (0..4).map(Device::cpu).collect();
    let (exe, inputs, want) = star(&cpus, 1 << 14, exec::Options::default());
    let mut outs = Vec::new();
    exe.run_into(&inputs, &mut outs).unwrap();
    let first = outs[0].shared();
    let at = first.as_ptr();
    drop(first);
    for round in 0..3 {
        exe.run_into(&inputs, &mut outs).unwrap();
        assert_close(&host(&outs), &want, &format!("run {round}"));
        assert_eq!(
            outs[0].shared().as_ptr(),
            at,
            "run {round} folded into new bytes"
        );
        assert!((1..4).all(|k| same_bytes(&outs, 0, k)));
    }
    // A clone the caller keeps pins those bytes: the next run leaves them.
    let kept = outs[2].clone();
    let before = kept.to_host();
    exe.run_into(&inputs, &mut outs).unwrap();
    assert_ne!(
        outs[0].shared().as_ptr(),
        at,
        "a kept clone's bytes were reused"
    );
    assert_eq!(kept.to_host(), before);
}

#[test]
fn one_value_returned_twice_is_one_buffer() {
    let src = "graph @g {\n  %0 = input \"x\" @cpu:0 : f32[4]\n  %1 = add %0, %0 @cpu:0 : f32[4]\n  %2 = copy %1 -> cpu:1 : f32[4]\n  return %1, %1, %2\n}\n";
    let g = parse(src).unwrap();
    let devices = [Device::cpu(0), Device::cpu(1)];
    let exe = exec::compile(&g, &devices).unwrap();
    let x = Tensor::from_slice(&[4], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let inputs = BTreeMap::from([("x".to_string(), x)]);
    for _ in 0..3 {
        let outs = exe.run(&inputs).unwrap();
        for o in &outs {
            assert_eq!(o.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0, 8.0]);
        }
        assert!(same_bytes(&outs, 0, 1) && same_bytes(&outs, 0, 2));
    }
}

#[test]
fn host_outputs_share_beside_a_vulkan_output_on_the_threaded_runner() {
    let devices = [Device::cpu(0), Device::cpu(1), Device::vulkan(0)];
    if !devices_or_skip("host_outputs_share_beside_a_vulkan_output", &devices) {
        return;
    }
    let (exe, inputs, want) = star(&devices, 1 << 14, exec::Options::default());
    for round in 0..3 {
        let outs = exe.run(&inputs).unwrap();
        assert_close(&host(&outs), &want, &format!("run {round}"));
        let on = exe.output_devices();
        let (a, b) = (
            on.iter().position(|d| *d == Device::cpu(0)).unwrap(),
            on.iter().position(|d| *d == Device::cpu(1)).unwrap(),
        );
        assert!(same_bytes(&outs, a, b), "the two host outputs were copied");
    }
}

#[test]
fn vulkan_shares_of_a_host_result_come_back_as_its_clones() {
    // A star at cpu:0 over two Vulkan devices that import host memory:
    // each Vulkan result, which only the caller reads, holds cpu:0's
    // result buffer (`Schedule::share_returned_imports`), so the three
    // outputs are one set of bytes (`plan::ReadOut::CloneOf`), not
    // downloaded each, and that buffer is the first output's tensor from
    // one run to the next (written in place, not copied out).
    let devices = [Device::vulkan(0), Device::vulkan(1), Device::cpu(0)];
    if !devices_or_skip("vulkan_imports_of_a_host_result", &devices) {
        return;
    }
    let g = all_reduce_graph(&devices, DType::F32, 1 << 14, ReduceOp::Sum);
    let lowered = lower(
        &g,
        &fuel_collective::pipeline_with("algorithm=star, reduce_at=cpu:0"),
    );
    let exe = exec::compile(&lowered, &devices).unwrap();
    let (inputs, want) = inputs_and_want(&g);
    let shared = exe.shared_copies().len();
    assert!(exe.imported_copies().is_empty());
    let mut outs = Vec::new();
    let mut at = Vec::new();
    for round in 0..3 {
        exe.run_into(&inputs, &mut outs).unwrap();
        assert_close(&host(&outs), &want, &format!("run {round}"));
        if shared == 2 {
            assert!(
                same_bytes(&outs, 0, 1) && same_bytes(&outs, 0, 2),
                "a shared result was downloaded on its own"
            );
            at.push(outs[0].shared().as_ptr());
        } else {
            println!("SKIP: the sharing check: this Vulkan device imports no host memory ({shared} shared)");
        }
    }
    if let [_, a, b] = at[..] {
        assert_eq!(a, b, "the result moved to new bytes between runs");
    }
    // Copy-on-write: a caller's write to one output shows in no other,
    // and the next run is right again.
    outs[0].copy_from_slice(&vec![-7.0f32; 1 << 14]).unwrap();
    assert_eq!(outs[0].to_vec::<f32>().unwrap(), vec![-7.0f32; 1 << 14]);
    assert_close(&host(&outs[1..]), &want[1..], "the clones after a write");
    exe.run_into(&inputs, &mut outs).unwrap();
    assert_close(&host(&outs), &want, "the run after a write");
}

#[test]
fn a_broadcast_roots_input_read_in_place_by_vulkan_comes_back_as_its_clones() {
    // A broadcast from cpu:0's input to two Vulkan devices whose memory is
    // the host's: each result, which only the caller reads, holds the
    // caller's bytes where they lie, so every output is those bytes
    // (`plan::ReadOut::CloneOf`). The runner used to
    // download each Vulkan output into new bytes instead, which at 16 MiB
    // took 15 ms a run (docs/performance.md).
    let devices = [Device::cpu(0), Device::vulkan(0), Device::vulkan(1)];
    if !devices_or_skip("a_broadcast_roots_input_read_in_place", &devices) {
        return;
    }
    let n = 1 << 14;
    let src = format!(
        "graph @g {{\n  %0 = input \"x\" @cpu:0 : f32[{n}]\n  %1:3 = broadcast %0 -> [cpu:0, vulkan:0, vulkan:1] : f32[{n}]\n  return %1#0, %1#1, %1#2\n}}\n"
    );
    let lowered = lower(&parse(&src).unwrap(), fuel_collective::DEFAULT_PIPELINE);
    let exe = exec::compile(&lowered, &devices).unwrap();
    let xs: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let x = Tensor::from_slice(&[n], &xs).unwrap();
    let inputs = BTreeMap::from([("x".to_string(), x.clone())]);
    let shared = exe.shared_copies().len();
    let mut outs = Vec::new();
    for round in 0..3 {
        exe.run_into(&inputs, &mut outs).unwrap();
        for (k, o) in outs.iter().enumerate() {
            assert_eq!(o.to_vec::<f32>().unwrap(), xs, "run {round}, output {k}");
        }
        if shared == 2 {
            assert!(
                same_bytes(&outs, 0, 1) && same_bytes(&outs, 0, 2),
                "run {round}: a Vulkan output that reads the caller's bytes was downloaded"
            );
            assert!(Arc::ptr_eq(&outs[0].shared(), &x.shared()), "run {round}");
        } else {
            println!("SKIP: the sharing check: the Vulkan devices read no caller bytes in place ({shared} shared)");
        }
    }
    // Copy-on-write: a write to one output leaves the caller's input and
    // the other outputs alone.
    outs[1].copy_from_slice(&vec![-1.0f32; n]).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), xs);
    assert_eq!(outs[2].to_vec::<f32>().unwrap(), xs);
}
