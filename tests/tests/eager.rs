//! The eager shortcut (`DeviceGroup::all_reduce_now` and friends): correct
//! values every call, one compile per distinct collective and shard types
//! (counted, not timed), and the lazy path's errors for bad shards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::{DeviceGroup, EagerError};
use fuel_graph_ext::{Device, ReduceOp, Tensor};

fn cpus(n: u32) -> DeviceGroup {
    DeviceGroup::new((0..n).map(Device::cpu)).unwrap()
}

fn floats(v: &[f32]) -> Tensor {
    Tensor::from_slice(&[v.len()], v).unwrap()
}

#[test]
fn a_thousand_calls_compile_once() {
    let group = cpus(4);
    for step in 0..1000u32 {
        // New values every step, as a training loop's gradients.
        let s = step as f32;
        let mut shards: Vec<Tensor> = (0..4)
            .map(|r| floats(&[s + r as f32, 2.0 * s, -(r as f32)]))
            .collect();
        group.all_reduce_now(&mut shards, ReduceOp::Sum).unwrap();
        let want = [4.0 * s + 6.0, 8.0 * s, -6.0];
        for (r, t) in shards.iter().enumerate() {
            assert_eq!(t.to_vec::<f32>().unwrap(), want, "step {step} rank {r}");
        }
    }
    assert_eq!(group.eager_compiles(), 1);
    // A clone shares the cache; another op or shape compiles once more.
    let clone = group.clone();
    let mut shards: Vec<Tensor> = (0..4).map(|r| floats(&[r as f32; 3])).collect();
    clone.all_reduce_now(&mut shards, ReduceOp::Max).unwrap();
    assert_eq!(shards[0].to_vec::<f32>().unwrap(), [3.0; 3]);
    let mut shards: Vec<Tensor> = (0..4).map(|r| floats(&[r as f32; 5])).collect();
    clone.all_reduce_now(&mut shards, ReduceOp::Max).unwrap();
    clone.all_reduce_now(&mut shards, ReduceOp::Max).unwrap();
    assert_eq!(group.eager_compiles(), 3);
    // A group of its own has a cache of its own.
    assert_eq!(cpus(4).eager_compiles(), 0);
}

#[test]
fn the_other_collectives_run_eagerly() {
    let group = cpus(2);
    let mut t = vec![floats(&[1.0, 2.0]), floats(&[7.0, 8.0])];
    group.broadcast_now(&mut t, 1).unwrap();
    assert_eq!(t[0].to_vec::<f32>().unwrap(), [7.0, 8.0]);
    let mut t = vec![floats(&[1.0, 2.0]), floats(&[3.0])];
    group.all_gather_now(&mut t, 0).unwrap();
    assert_eq!(t[1].to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    let mut t = vec![
        floats(&[1.0, 2.0, 3.0, 4.0]),
        floats(&[10.0, 20.0, 30.0, 40.0]),
    ];
    group.reduce_scatter_now(&mut t, ReduceOp::Sum, 0).unwrap();
    assert_eq!(t[0].to_vec::<f32>().unwrap(), [11.0, 22.0]);
    assert_eq!(t[1].to_vec::<f32>().unwrap(), [33.0, 44.0]);
    let mut h = vec![
        Tensor::from_slice(&[1], &[fuel_graph_ext::half::f16::MAX]).unwrap(),
        Tensor::from_slice(&[1], &[fuel_graph_ext::half::f16::MAX]).unwrap(),
    ];
    group.all_reduce_now(&mut h, ReduceOp::Mean).unwrap();
    assert_eq!(
        h[0].to_vec::<fuel_graph_ext::half::f16>().unwrap(),
        [fuel_graph_ext::half::f16::MAX]
    );
    assert_eq!(group.eager_compiles(), 4);
}

#[test]
fn bad_shards_give_the_lazy_paths_errors() {
    let group = cpus(2);
    let mut one = vec![floats(&[1.0])];
    let e = group.all_reduce_now(&mut one, ReduceOp::Sum).unwrap_err();
    assert!(matches!(e, EagerError::Collective(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "`all_reduce` got 1 shard(s) for a group of 2 device(s); pass exactly one shard per device, or build a DeviceGroup of the devices that hold shards"
    );
    let mut mixed = vec![floats(&[1.0, 2.0]), floats(&[1.0])];
    let e = group.all_reduce_now(&mut mixed, ReduceOp::Sum).unwrap_err();
    assert_eq!(
        e.to_string(),
        "shard 1 has type f32[1] but shard 0 has f32[2]; every shard must have one shape (pad or reshape it first)"
    );
    let mut t = vec![floats(&[1.0]), floats(&[2.0])];
    let e = group.broadcast_now(&mut t, 2).unwrap_err();
    assert_eq!(
        e.to_string(),
        "root 2 is out of range for a group of 2 device(s); use a rank from 0 to 1"
    );
    // Nothing was compiled, and the shards are as they were.
    assert_eq!(group.eager_compiles(), 0);
    assert_eq!(mixed[1].to_vec::<f32>().unwrap(), [1.0]);
}
