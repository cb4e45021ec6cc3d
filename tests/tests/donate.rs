//! Inputs handed over to a run (`Executable::run_donating`): an output may
//! be written into an input's bytes once the run holds them alone. Checked
//! on a lowered star all_reduce over two host arenas: rank 1's result goes
//! into rank 1's shard (nothing reads it after the fold), rank 0's into
//! rank 0's (the fold continues on it, its last read), a shard the caller
//! keeps a clone of is never written, every result is the interpreter's,
//! and a fault at every point leaves each input either untouched or empty
//! and leaks nothing. On a group with a Vulkan device (lavapipe; `SKIP:`
//! without it) the eager call stays right call after call.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::{text, Device, Graph, Tensor, Topology};
use fuel_runtime::exec::{self, Executable};
use fuel_test_support::{assert_no_leaks, fault_points, inputs_and_want};
use std::collections::BTreeMap;

const STAR: &str = "graph @star {
  %0 = input \"s0\" @cpu:0 : f32[1000]
  %1 = input \"s1\" @cpu:1 : f32[1000]
  %2 = copy %1 -> cpu:0 : f32[1000]
  %3 = add %0, %2 @cpu:0 : f32[1000]
  %4 = copy %3 -> cpu:1 : f32[1000]
  return %3, %4
}
";

fn setup() -> (Graph, Executable, BTreeMap<String, Tensor>, Vec<Tensor>) {
    let g = text::parse(STAR).unwrap();
    // As the eager calls compile it: each rank's result is written over a
    // shard of its own rather than shared with rank 0's.
    let options = exec::Options {
        share_host_outputs: false,
        ..Default::default()
    };
    let exe = exec::compile_with_options(&g, &[], &Topology::default(), options).unwrap();
    let (inputs, want) = inputs_and_want(&g);
    (g, exe, inputs, want.iter().map(Tensor::from_host).collect())
}

fn donate_by_rank() -> Vec<Option<String>> {
    vec![Some("s0".into()), Some("s1".into())]
}

#[test]
fn every_output_takes_its_rank_s_shard() {
    let (_, exe, mut inputs, want) = setup();
    let given: Vec<*const u8> = ["s0", "s1"].map(|n| inputs[n].bytes().as_ptr()).to_vec();
    let mut outputs = Vec::new();
    exe.run_donating(&mut inputs, &donate_by_rank(), &mut outputs)
        .unwrap();
    assert_eq!(outputs[0].bytes(), want[0].bytes());
    assert_eq!(outputs[1].bytes(), want[1].bytes());
    // Rank 1's result lies in rank 1's shard: the copy runs after the
    // fold, the shard's last reader. Rank 0's lies in rank 0's shard: the
    // fold continues on it, its last read.
    assert_eq!(outputs[1].bytes().as_ptr(), given[1]);
    assert_eq!(outputs[0].bytes().as_ptr(), given[0]);
    assert!(inputs["s0"].bytes().is_empty() && inputs["s1"].bytes().is_empty());
    assert_no_leaks(&exe);
}

#[test]
fn a_shard_the_caller_shares_is_never_written() {
    for kept_name in ["s0", "s1"] {
        let (_, exe, mut inputs, want) = setup();
        let kept = inputs[kept_name].clone();
        let before = kept.bytes().to_vec();
        let mut outputs = Vec::new();
        exe.run_donating(&mut inputs, &donate_by_rank(), &mut outputs)
            .unwrap();
        assert_eq!(outputs[0].bytes(), want[0].bytes(), "{kept_name} kept");
        assert_eq!(outputs[1].bytes(), want[1].bytes(), "{kept_name} kept");
        assert_eq!(
            kept.bytes(),
            &before[..],
            "the clone of {kept_name} kept its values"
        );
        assert!(outputs
            .iter()
            .all(|o| o.bytes().as_ptr() != kept.bytes().as_ptr()));
        assert_eq!(
            inputs[kept_name].bytes(),
            &before[..],
            "{kept_name} is back"
        );
        assert_no_leaks(&exe);
    }
}

#[test]
fn a_fault_anywhere_leaves_each_input_whole_or_empty() {
    let (g, exe, inputs, want) = setup();
    let mut checked = 0;
    for point in fault_points(&exe) {
        // Bytes of their own, so the run may take them.
        let mut given: BTreeMap<String, Tensor> = inputs
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    Tensor::from_bytes(v.ty().clone(), v.bytes().to_vec()).unwrap(),
                )
            })
            .collect();
        exe.inject_fault(point);
        let mut outputs = Vec::new();
        let e = exe.run_donating(&mut given, &donate_by_rank(), &mut outputs);
        assert!(e.is_err(), "{point:?}: the run succeeded");
        assert!(
            outputs.is_empty(),
            "{point:?}: a failed run returns no outputs"
        );
        for (name, t) in &given {
            assert!(
                t.bytes().is_empty() || t.bytes() == inputs[name].bytes(),
                "{point:?}: {name} is neither whole nor empty"
            );
        }
        assert_no_leaks(&exe);
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} faults");
    // And the run after the last fault is right.
    let mut given = inputs;
    let mut outputs = Vec::new();
    exe.run_donating(&mut given, &donate_by_rank(), &mut outputs)
        .unwrap();
    assert_eq!(outputs[0].bytes(), want[0].bytes());
    assert_eq!(outputs[1].bytes(), want[1].bytes());
    assert_eq!(interpret(&g, &deterministic_inputs(&g)).unwrap().len(), 2);
}

#[test]
fn the_same_runs_through_eager_all_reduce() {
    let group = fuel_collective::DeviceGroup::new((0..3).map(Device::cpu)).unwrap();
    let mut shards: Vec<Tensor> = (0..3)
        .map(|r| Tensor::from_slice(&[4096], &vec![r as f32 + 1.0; 4096]).unwrap())
        .collect();
    let given: Vec<*const u8> = shards.iter().map(|t| t.bytes().as_ptr()).collect();
    group
        .all_reduce_now(&mut shards, fuel_graph_ext::ReduceOp::Sum)
        .unwrap();
    for s in &shards {
        assert_eq!(s.to_vec::<f32>().unwrap(), vec![6.0; 4096]);
    }
    // Every rank but the star's root gets its result in its own shard.
    let in_place = shards
        .iter()
        .zip(&given)
        .filter(|(s, g)| s.bytes().as_ptr() == **g)
        .count();
    assert!(
        in_place >= 2,
        "{in_place} ranks' results were written over their shards"
    );
}

#[test]
fn a_group_with_a_gpu_reduces_right_call_after_call() {
    // The threaded runner takes no offer: every shard comes back to the
    // eager call, which keeps it for the next call's results.
    let devs = [Device::cpu(0), Device::vulkan(0)];
    if !fuel_test_support::devices_or_skip(
        "a_group_with_a_gpu_runs_threaded_and_writes_nothing_in_place",
        &devs,
    ) {
        return;
    }
    let group = fuel_collective::DeviceGroup::new(devs).unwrap();
    let mut shards: Vec<Tensor> = (0..2)
        .map(|r| Tensor::from_slice(&[4096], &vec![r as f32 + 1.0; 4096]).unwrap())
        .collect();
    for call in 0..3 {
        group
            .all_reduce_now(&mut shards, fuel_graph_ext::ReduceOp::Sum)
            .unwrap();
        let want = 3.0 * 2f32.powi(call);
        for s in &shards {
            assert_eq!(s.to_vec::<f32>().unwrap(), vec![want; 4096], "call {call}");
        }
    }
}
