//! DeviceGroup and IdentityComm: what they record, and every refusal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_collective::{CollectiveError, Communicator, DeviceGroup, IdentityComm};
use fuel_graph_ext::{DType, Device, LazyGraph, Op, ReduceOp, TensorType};
use fuel_test_support::shards;

fn f32s(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape)
}

const TRIO: [Device; 3] = [Device::cpu(0), Device::cuda(0), Device::vulkan(0)];

#[test]
fn new_group_shape() {
    assert_eq!(
        DeviceGroup::new(Vec::new()).unwrap_err(),
        CollectiveError::EmptyGroup
    );
    assert!(CollectiveError::EmptyGroup
        .to_string()
        .contains("at least one device"));
    let g = DeviceGroup::new([Device::vulkan(0), Device::cpu(0), Device::vulkan(0)]).unwrap();
    assert_eq!(g.size(), 3);
    assert_eq!(g.leader(), Device::vulkan(0));
    assert_eq!(g.devices()[2], Device::vulkan(0));
}

#[test]
fn all_reduce_records_one_node_and_moves_nothing() {
    let lg = LazyGraph::new("ar");
    let group = DeviceGroup::new(TRIO).unwrap();
    let xs = shards(&lg, &TRIO, &f32s(&[8]));
    let before = lg.snapshot().node_count();
    let out = group.all_reduce(&xs, ReduceOp::Mean).unwrap();
    let g = lg.snapshot();
    assert_eq!(g.node_count(), before + 1, "exactly one collective node");
    assert_eq!(out.len(), 3);
    for (t, d) in out.iter().zip(TRIO) {
        assert_eq!(t.device(), Some(d), "result on its rank's device");
        assert_eq!(t.value().node, out[0].value().node);
    }
    let node = g.node(out[0].value().node).unwrap();
    assert_eq!(node.op, Op::AllReduce { op: ReduceOp::Mean });
    assert!(g.node_ids().all(|id| {
        let op = &g.node(id).unwrap().op;
        !op.is_transfer()
    }));
}

#[test]
fn every_kind_records_its_op() {
    let lg = LazyGraph::new("kinds");
    let group = DeviceGroup::new(TRIO).unwrap();
    let xs = shards(&lg, &TRIO, &f32s(&[6, 2]));
    let r = group.reduce(&xs, ReduceOp::Max, 2).unwrap();
    assert_eq!(r.device(), Some(Device::vulkan(0)));
    let b = group.broadcast(&xs[1], 1).unwrap();
    assert_eq!(
        b.iter().map(|t| t.device().unwrap()).collect::<Vec<_>>(),
        TRIO.to_vec()
    );
    let ag = group.all_gather(&xs, 1).unwrap();
    assert_eq!(ag[0].ty(), f32s(&[6, 6]));
    let rs = group.reduce_scatter(&xs, ReduceOp::Sum, 0).unwrap();
    assert_eq!(rs[2].ty(), f32s(&[2, 2]));
    assert_eq!(rs[2].device(), Some(Device::vulkan(0)));
}

#[test]
fn two_shards_on_one_device_are_legal() {
    let devs = [Device::cpu(0), Device::cpu(0)];
    let lg = LazyGraph::new("rep");
    let group = DeviceGroup::new(devs).unwrap();
    let out = group
        .all_reduce(&shards(&lg, &devs, &f32s(&[4])), ReduceOp::Sum)
        .unwrap();
    assert_eq!(out.len(), 2);
}

#[test]
fn no_shards() {
    let group = DeviceGroup::new(TRIO).unwrap();
    let e = group.all_reduce(&[], ReduceOp::Sum).unwrap_err();
    assert!(
        matches!(e, CollectiveError::NoShards { size: 3, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("one shard per device"), "{e}");
}

#[test]
fn more_shards_than_devices() {
    let lg = LazyGraph::new("more");
    let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1)]).unwrap();
    let xs = shards(
        &lg,
        &[Device::cpu(0), Device::cpu(1), Device::cpu(2)],
        &f32s(&[4]),
    );
    let e = group.all_gather(&xs, 0).unwrap_err();
    assert!(
        matches!(
            e,
            CollectiveError::ShardCount {
                shards: 3,
                size: 2,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("exactly one shard per device"),
        "{e}"
    );
}

#[test]
fn fewer_shards_than_devices() {
    let lg = LazyGraph::new("fewer");
    let group = DeviceGroup::new(TRIO).unwrap();
    let xs = shards(&lg, &TRIO[..2], &f32s(&[4]));
    let e = group.reduce(&xs, ReduceOp::Sum, 0).unwrap_err();
    assert!(
        matches!(
            e,
            CollectiveError::ShardCount {
                shards: 2,
                size: 3,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("build a DeviceGroup"), "{e}");
}

#[test]
fn shards_from_different_graphs() {
    let (a, b) = (LazyGraph::new("a"), LazyGraph::new("b"));
    let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1)]).unwrap();
    let xs = vec![
        a.input("x", Device::cpu(0), f32s(&[4])),
        b.input("y", Device::cpu(1), f32s(&[4])),
    ];
    let e = group.all_reduce(&xs, ReduceOp::Sum).unwrap_err();
    assert!(
        matches!(e, CollectiveError::MixedGraphs { index: 1, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("same LazyGraph"), "{e}");
}

#[test]
fn shapes_or_dtypes_that_differ() {
    let lg = LazyGraph::new("types");
    let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1)]).unwrap();
    let shape = vec![
        lg.input("x", Device::cpu(0), f32s(&[4])),
        lg.input("y", Device::cpu(1), f32s(&[5])),
    ];
    let e = group.all_reduce(&shape, ReduceOp::Sum).unwrap_err();
    assert!(
        matches!(e, CollectiveError::ShapeMismatch { index: 1, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("pad or reshape"), "{e}");
    let dtype = vec![
        lg.input("u", Device::cpu(0), f32s(&[4])),
        lg.input("v", Device::cpu(1), TensorType::new(DType::I32, &[4])),
    ];
    let e = group.all_reduce(&dtype, ReduceOp::Sum).unwrap_err();
    assert!(
        matches!(e, CollectiveError::DTypeMismatch { index: 1, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("one dtype"), "{e}");
}

#[test]
fn shard_not_on_its_ranks_device() {
    let lg = LazyGraph::new("place");
    let group = DeviceGroup::new(TRIO).unwrap();
    // Shards in the wrong order: rank 1 (cuda:0) gets the vulkan shard.
    let xs = shards(
        &lg,
        &[Device::cpu(0), Device::vulkan(0), Device::cuda(0)],
        &f32s(&[4]),
    );
    let e = group.all_reduce(&xs, ReduceOp::Sum).unwrap_err();
    assert!(
        matches!(e, CollectiveError::WrongDevice { index: 1, .. }),
        "{e}"
    );
    assert!(e.to_string().contains(".copy_to(cuda:0)"), "{e}");
    // Broadcast: the tensor must sit on the root's device.
    let e = group.broadcast(&xs[0], 2).unwrap_err();
    assert!(
        matches!(e, CollectiveError::WrongDevice { index: 2, .. }),
        "{e}"
    );
}

#[test]
fn root_out_of_range() {
    let lg = LazyGraph::new("root");
    let group = DeviceGroup::new(TRIO).unwrap();
    let xs = shards(&lg, &TRIO, &f32s(&[4]));
    for e in [
        group.reduce(&xs, ReduceOp::Sum, 3).unwrap_err(),
        group.broadcast(&xs[0], 7).unwrap_err(),
    ] {
        assert!(
            matches!(e, CollectiveError::RootOutOfRange { size: 3, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("from 0 to 2"), "{e}");
    }
}

#[test]
fn axis_out_of_range_and_uneven_scatter() {
    let lg = LazyGraph::new("axis");
    let group = DeviceGroup::new(TRIO).unwrap();
    let xs = shards(&lg, &TRIO, &f32s(&[4, 2]));
    for e in [
        group.all_gather(&xs, 2).unwrap_err(),
        group.reduce_scatter(&xs, ReduceOp::Sum, 5).unwrap_err(),
    ] {
        assert!(
            matches!(e, CollectiveError::AxisOutOfRange { rank: 2, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("use an axis below 2"), "{e}");
    }
    // 4 rows over 3 ranks: 1 each, and the remainder on the last rank.
    let rs = group.reduce_scatter(&xs, ReduceOp::Sum, 0).unwrap();
    let shapes: Vec<String> = rs.iter().map(|t| t.ty().to_string()).collect();
    assert_eq!(shapes, ["f32[1,2]", "f32[1,2]", "f32[2,2]"]);
    // A split of its own, with an empty share.
    let rs = group
        .reduce_scatter_split(&xs, ReduceOp::Sum, 0, &[3, 0, 1])
        .unwrap();
    let shapes: Vec<String> = rs.iter().map(|t| t.ty().to_string()).collect();
    assert_eq!(shapes, ["f32[3,2]", "f32[0,2]", "f32[1,2]"]);
    let text = fuel_graph_ext::text::print(&lg.snapshot());
    assert!(
        text.contains("{axis=0, split=[3, 0, 1]} : f32[3,2], f32[0,2], f32[1,2]"),
        "{text}"
    );
    // A split equal to the default partition prints as none.
    let eq = LazyGraph::new("eq");
    let ys = shards(&eq, &TRIO, &f32s(&[6]));
    group
        .reduce_scatter_split(&ys, ReduceOp::Sum, 0, &[2, 2, 2])
        .unwrap();
    let text = fuel_graph_ext::text::print(&eq.snapshot());
    assert!(
        text.contains("reduce_scatter.sum %0, %1, %2 {axis=0} : f32[2]"),
        "{text}"
    );
    for (split, want) in [
        (&[1, 3][..], "reduce_scatter split has 2 extent(s) for a group of 3 device(s); give one extent per rank"),
        (&[1, 1, 1][..], "reduce_scatter split adds up to 3 but axis 0 has extent 4; make the extents add up to 4"),
    ] {
        let e = group
            .reduce_scatter_split(&xs, ReduceOp::Sum, 0, split)
            .unwrap_err();
        assert_eq!(e.to_string(), want);
    }
    let e = group
        .reduce_scatter_split(&xs, ReduceOp::Sum, 0, &[usize::MAX, 2, 3])
        .unwrap_err();
    assert!(
        matches!(
            e,
            CollectiveError::SplitSum {
                sum: usize::MAX,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn identity_comm_is_a_world_of_one() {
    let lg = LazyGraph::new("spmd");
    let x = lg.input("x", Device::cuda(0), f32s(&[4]));
    let c = IdentityComm;
    assert_eq!((c.rank(), c.world_size()), (0, 1));
    for op in ReduceOp::ALL {
        assert_eq!(c.all_reduce(&x, op).unwrap().value(), x.value());
    }
    assert_eq!(c.broadcast(&x, 0).unwrap().value(), x.value());
    assert_eq!(c.all_gather(&x, 0).unwrap().value(), x.value());
    assert!(matches!(
        c.broadcast(&x, 1).unwrap_err(),
        CollectiveError::RootOutOfRange { root: 1, size: 1 }
    ));
    assert!(matches!(
        c.all_gather(&x, 1).unwrap_err(),
        CollectiveError::AxisOutOfRange { axis: 1, .. }
    ));
    assert_eq!(
        lg.snapshot().node_count(),
        1,
        "a world of one records nothing"
    );
}

#[test]
fn all_to_all_records_uneven_pieces_and_refuses_bad_shards() {
    let lg = LazyGraph::new("a2a");
    let group = DeviceGroup::new(TRIO).unwrap();
    let xs: Vec<_> = TRIO
        .iter()
        .zip([2usize, 0, 4])
        .enumerate()
        .map(|(i, (d, r))| lg.input(&format!("x{i}"), *d, f32s(&[r, 3])))
        .collect();
    // Rank 0 keeps 1 row and sends 1 to rank 2; rank 2 sends 4 to rank 0.
    let out = group
        .all_to_all(&xs, 0, Some(&[1, 0, 1, 0, 0, 0, 4, 0, 0]))
        .unwrap();
    let shapes: Vec<String> = out.iter().map(|t| t.ty().to_string()).collect();
    assert_eq!(shapes, ["f32[5,3]", "f32[0,3]", "f32[1,3]"]);
    let bad = [
        lg.input("a", TRIO[0], f32s(&[2, 3])),
        lg.input("b", TRIO[1], f32s(&[2, 4])),
        lg.input("c", TRIO[2], f32s(&[2, 3])),
    ];
    let e = group.all_to_all(&bad, 0, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "shard 1 has type f32[2,4] but shard 0 has f32[2,3]; the shards of `all_to_all` may differ only along axis 0 (pad or reshape the other dims first)"
    );
}
