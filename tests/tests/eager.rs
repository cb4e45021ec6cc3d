//! The eager shortcut (`DeviceGroup::all_reduce_now` and friends): correct
//! values every call, one compile per distinct collective and shard types
//! (counted, not timed), buffers handed over and reused between calls and
//! memory lent for a call (against the interpreter, every dtype), shapes
//! that change only where the signature says so, and the lazy path's
//! errors for bad shards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::{DeviceGroup, EagerError};
use fuel_graph_ext::interp::{deterministic_inputs, interpret, HostTensor};
use fuel_graph_ext::{DType, Device, Element, LazyGraph, ReduceOp, Tensor, TensorType};
use fuel_test_support::{assert_close, shards};

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
    // all_gather and reduce_scatter change shapes: the shards are read,
    // and the results are new tensors.
    let t = vec![floats(&[1.0, 2.0]), floats(&[3.0])];
    let g = group.all_gather_now(&t, 0).unwrap();
    assert_eq!(g[1].to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    assert_eq!(t[1].to_vec::<f32>().unwrap(), [3.0]);
    let t = vec![
        floats(&[1.0, 2.0, 3.0, 4.0]),
        floats(&[10.0, 20.0, 30.0, 40.0]),
    ];
    let r = group.reduce_scatter_now(&t, ReduceOp::Sum, 0).unwrap();
    assert_eq!(r[0].to_vec::<f32>().unwrap(), [11.0, 22.0]);
    assert_eq!(r[1].to_vec::<f32>().unwrap(), [33.0, 44.0]);
    assert_eq!(t[0].ty().shape.as_slice(), [4]);
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
fn an_uneven_reduce_scatter_is_asked_for() {
    let group = cpus(4);
    let t: Vec<Tensor> = (0..4).map(|r| floats(&[r as f32; 6])).collect();
    let e = group
        .reduce_scatter_now(&t, ReduceOp::Sum, 0)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "reduce_scatter axis 0 has extent 6, which 4 ranks cannot split evenly; pad it to a multiple of 4, or give each rank's extent with a split"
    );
    assert_eq!(group.eager_compiles(), 0);
    let r = group
        .reduce_scatter_split_now(&t, ReduceOp::Sum, 0, &[2, 2, 1, 1])
        .unwrap();
    let got: Vec<Vec<f32>> = r.iter().map(|x| x.to_vec().unwrap()).collect();
    assert_eq!(got, [vec![6.0, 6.0], vec![6.0, 6.0], vec![6.0], vec![6.0]]);
}

/// An all_reduce of `dtype[n]` over 3 CPUs by `op`, recorded lazily: the
/// graph, or `None` where the group refuses the dtype and op.
fn oracle(dtype: DType, op: ReduceOp) -> Option<fuel_graph_ext::Graph> {
    let devices = [Device::cpu(0), Device::cpu(1), Device::cpu(2)];
    let lg = LazyGraph::new("all_reduce");
    let group = DeviceGroup::new(devices).unwrap();
    let shards = shards(&lg, &devices, &TensorType::new(dtype, &[257]));
    for t in group.all_reduce(&shards, op).ok()? {
        lg.output(&t).unwrap();
    }
    Some(lg.snapshot())
}

/// What the interpreter gives for `g` over `shards` (inputs `s0`, `s1`, ...).
fn want(g: &fuel_graph_ext::Graph, shards: &[HostTensor]) -> Vec<HostTensor> {
    let inputs = shards
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("s{i}"), t.clone()))
        .collect();
    interpret(g, &inputs).unwrap()
}

/// `all_reduce_lent` over slices of `T` holding `shards`' values: the
/// slices' values after the call.
fn lent<T: Element>(group: &DeviceGroup, shards: &[HostTensor], op: ReduceOp) -> Vec<HostTensor> {
    let mut data: Vec<Vec<T>> = shards.iter().map(|s| s.to_vec::<T>().unwrap()).collect();
    let mut slices: Vec<&mut [T]> = data.iter_mut().map(Vec::as_mut_slice).collect();
    group.all_reduce_lent(&mut slices, op).unwrap();
    data.iter()
        .map(|d| HostTensor::from_slice(&[d.len()], d).unwrap())
        .collect()
}

#[test]
fn reused_and_lent_buffers_match_the_interpreter_on_every_dtype() {
    let group = cpus(3);
    let mut ran = 0;
    for dtype in DType::ALL {
        for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Mean] {
            let Some(g) = oracle(dtype, op) else {
                continue;
            };
            let inputs = deterministic_inputs(&g);
            let first: Vec<HostTensor> = (0..3).map(|i| inputs[&format!("s{i}")].clone()).collect();
            // In place, three calls in a row, each over the last one's
            // results: every rank's result lies in the bytes it was handed.
            let mut shards: Vec<Tensor> = first.iter().map(Tensor::from_host).collect();
            let handed: Vec<*const u8> = shards.iter().map(|t| t.bytes().as_ptr()).collect();
            let mut after = Vec::new();
            for call in 0..3 {
                let host: Vec<HostTensor> = shards.iter().map(Tensor::to_host).collect();
                group.all_reduce_now(&mut shards, op).unwrap();
                let got: Vec<HostTensor> = shards.iter().map(Tensor::to_host).collect();
                assert_close(
                    &got,
                    &want(&g, &host),
                    &format!("{dtype} {op:?} call {call}"),
                );
                after.push(
                    shards
                        .iter()
                        .map(|t| t.bytes().as_ptr())
                        .collect::<Vec<_>>(),
                );
            }
            assert_eq!(
                after[0], handed,
                "{dtype} {op:?}: every rank's result is written over its own shard"
            );
            assert_eq!(after[1], handed, "{dtype} {op:?}: the second call's results are written into the first call's shards");
            assert_eq!(
                after[2], after[0],
                "{dtype} {op:?}: the third call's into the first call's results"
            );
            // Lent: the caller's slices hold the results, twice in a row.
            let got =
                fuel_graph_ext::with_dtype_type!(dtype, T, bool => lent::<T>(&group, &first, op));
            assert_close(&got, &want(&g, &first), &format!("{dtype} {op:?} lent"));
            let again =
                fuel_graph_ext::with_dtype_type!(dtype, T, bool => lent::<T>(&group, &got, op));
            assert_close(
                &again,
                &want(&g, &got),
                &format!("{dtype} {op:?} lent again"),
            );
            ran += 1;
        }
    }
    // Every dtype has at least its sum and max.
    assert!(ran >= 2 * DType::ALL.len(), "only {ran} cases ran");
}

#[test]
fn a_kept_clone_keeps_its_values() {
    let group = cpus(2);
    let mut shards = vec![floats(&[1.0, 2.0]), floats(&[3.0, 4.0])];
    group.all_reduce_now(&mut shards, ReduceOp::Sum).unwrap();
    // The caller keeps the results; the next call must not write into them.
    let kept = shards.clone();
    group.all_reduce_now(&mut shards, ReduceOp::Sum).unwrap();
    group.all_reduce_now(&mut shards, ReduceOp::Sum).unwrap();
    assert_eq!(kept[0].to_vec::<f32>().unwrap(), [4.0, 6.0]);
    assert_eq!(shards[1].to_vec::<f32>().unwrap(), [16.0, 24.0]);
    // Lent slices of another length than the shards compile anew.
    let (mut a, mut b) = (vec![1.0f32], vec![2.0f32]);
    group
        .all_reduce_lent(&mut [&mut a, &mut b], ReduceOp::Max)
        .unwrap();
    assert_eq!((a, b), (vec![2.0], vec![2.0]));
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
    // `?` out of `main` prints Debug: the same message, and its code.
    assert_eq!(format!("{e:?}"), format!("{e} [E0403]"));
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
