//! The typing rules' unit tests: collectives even and uneven, element-wise
//! ops and slices.

use super::*;
use crate::device::Device;
use crate::dtype::DType;
use crate::op::{ElementwiseOp, ReduceOp};

#[test]
fn collective_types() {
    let t = TensorType::new(DType::F32, &[6, 2]);
    let ops = [&t, &t, &t];
    assert_eq!(
        infer_type(&Op::AllGather { axis: 0 }, &ops)
            .unwrap()
            .to_string(),
        "f32[18,2]"
    );
    // Uneven shards (a zero extent too) gather to the sum of extents;
    // any other dim that differs is refused, naming the axis.
    let (a, b, z) = (
        TensorType::new(DType::F32, &[3, 2]),
        TensorType::new(DType::F32, &[5, 2]),
        TensorType::new(DType::F32, &[0, 2]),
    );
    assert_eq!(
        infer_type(&Op::AllGather { axis: 0 }, &[&a, &b, &z])
            .unwrap()
            .to_string(),
        "f32[8,2]"
    );
    assert_eq!(
        infer_type(&Op::AllGather { axis: 1 }, &[&a, &b])
            .unwrap_err()
            .to_string(),
        "operand 1 of `all_gather` has type f32[5,2], which does not match f32[3,2] outside axis 1; operands may differ only along axis 1 (pad or reshape the others first)"
    );
    let rs = Op::ReduceScatter {
        op: ReduceOp::Sum,
        axis: 0,
        split: None,
    };
    assert_eq!(infer_type(&rs, &ops).unwrap().to_string(), "f32[2,2]");
    assert_eq!(result_types(&rs, &ops).unwrap(), None);
    // 2 entries over 3 ranks: 0, 0 and the remainder, 2, on the last.
    let rs1 = Op::ReduceScatter {
        op: ReduceOp::Sum,
        axis: 1,
        split: None,
    };
    let each: Vec<String> = result_types(&rs1, &ops)
        .unwrap()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(each, ["f32[6,0]", "f32[6,0]", "f32[6,2]"]);
    let with = |split: &[usize]| Op::ReduceScatter {
        op: ReduceOp::Sum,
        axis: 0,
        split: Some(split.to_vec()),
    };
    let each: Vec<String> = result_types(&with(&[1, 0, 5]), &ops)
        .unwrap()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(each, ["f32[1,2]", "f32[0,2]", "f32[5,2]"]);
    assert_eq!(
        infer_type(&with(&[1, 5]), &ops).unwrap_err().to_string(),
        "reduce_scatter split has 2 extent(s) for 3 rank(s); give one extent per rank"
    );
    assert_eq!(
        infer_type(&with(&[1, 2, 4]), &ops).unwrap_err().to_string(),
        "reduce_scatter split adds up to 7 but axis 0 has extent 6; make the extents add up to 6"
    );
    assert!(matches!(
        infer_type(&with(&[usize::MAX, 2, 4]), &ops),
        Err(TypeError::SplitSum {
            sum: usize::MAX,
            ..
        })
    ));
    let r = Op::Reduce {
        op: ReduceOp::Max,
        root: 3,
    };
    assert!(infer_type(&r, &ops)
        .unwrap_err()
        .to_string()
        .contains("root 3 is out of range"));
}

#[test]
fn all_to_all_types() {
    let (a, b) = (
        TensorType::new(DType::F32, &[3, 2]),
        TensorType::new(DType::F32, &[1, 2]),
    );
    // Rank 0 sends 3 rows to rank 1; rank 1 keeps its 1 row.
    let op = Op::AllToAll {
        axis: 0,
        split: Some(vec![0, 3, 0, 1]),
    };
    let each: Vec<String> = result_types(&op, &[&a, &b])
        .unwrap()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(each, ["f32[0,2]", "f32[4,2]"]);
    // By default each operand is cut as reduce_scatter cuts it.
    let op = Op::AllToAll {
        axis: 0,
        split: None,
    };
    assert_eq!(
        all_to_all_pieces(None, 0, &[&a, &b]).unwrap(),
        vec![vec![1, 2], vec![0, 1]]
    );
    assert_eq!(infer_type(&op, &[&a, &b]).unwrap().to_string(), "f32[1,2]");
    let c = TensorType::new(DType::F32, &[3, 4]);
    assert!(infer_type(&op, &[&a, &c])
        .unwrap_err()
        .to_string()
        .contains("outside axis 0"));
}

#[test]
fn elementwise_needs_equal_types() {
    let a = TensorType::new(DType::F32, &[4]);
    let b = TensorType::new(DType::I32, &[4]);
    let add = Op::Elementwise {
        kind: ElementwiseOp::Add,
        device: Device::cpu(0),
    };
    assert!(infer_type(&add, &[&a])
        .unwrap_err()
        .to_string()
        .contains("two or more"));
    assert!(infer_type(&add, &[&a, &b])
        .unwrap_err()
        .to_string()
        .contains("operand 1"));
    let s = Op::Slice {
        axis: 0,
        start: 3,
        len: 2,
        device: Device::cpu(0),
    };
    assert!(infer_type(&s, &[&a])
        .unwrap_err()
        .to_string()
        .contains("does not fit"));
}

#[test]
fn uneven_comm_types_follow_this_ranks_part_of_the_split() {
    let t = TensorType::new(DType::F32, &[3, 2]);
    let a2a = CommOp::AllToAll { axis: 0 };
    // Rank 1 sends row 1 (2 + 1 = 3 rows) and gets column 1 (0 + 1 + 4).
    let split = [1, 0, 0, 2, 1, 0, 0, 4, 9];
    let out = comm_split_type(&a2a, 3, Some(1), Some(&split), &t).unwrap();
    assert_eq!(out.to_string(), "f32[5,2]");
    let gather = CommOp::AllGather { axis: 0 };
    let out = comm_split_type(&gather, 3, Some(2), Some(&[0, 4, 3]), &t).unwrap();
    assert_eq!(out.to_string(), "f32[7,2]");
    let scatter = CommOp::ReduceScatter {
        op: ReduceOp::Sum,
        axis: 0,
    };
    let out = comm_split_type(&scatter, 3, Some(0), Some(&[0, 1, 2]), &t).unwrap();
    assert_eq!(out.to_string(), "f32[0,2]");
    assert!(matches!(
        comm_split_type(&a2a, 3, None, Some(&split), &t),
        Err(TypeError::CommSplitRank {
            has_split: true,
            ..
        })
    ));
    assert!(matches!(
        comm_split_type(&a2a, 3, Some(3), Some(&split), &t),
        Err(TypeError::CommRankOutOfRange { rank: 3, .. })
    ));
    assert!(matches!(
        comm_split_type(&CommOp::Broadcast { root: 0 }, 3, Some(0), Some(&[1]), &t),
        Err(TypeError::CommSplitUnsupported { .. })
    ));
    assert!(matches!(
        comm_split_type(&gather, 2, Some(0), Some(&[3, usize::MAX]), &t),
        Err(TypeError::TooLarge { .. })
    ));
}

/// `eq` compares exactly two operands of one type, and gives their type.
#[test]
fn eq_takes_exactly_two_operands_of_one_type() {
    let eq = Op::Elementwise {
        kind: ElementwiseOp::Eq,
        device: Device::cpu(0),
    };
    let t = TensorType::new(DType::BF16, &[3]);
    assert_eq!(infer_type(&eq, &[&t, &t]).unwrap(), t);
    for n in [1, 3] {
        assert_eq!(
            infer_type(&eq, &vec![&t; n]).unwrap_err().to_string(),
            format!("`eq` needs exactly two operands, found {n} operand(s)")
        );
    }
    let u = TensorType::new(DType::F32, &[3]);
    assert!(matches!(
        infer_type(&eq, &[&t, &u]),
        Err(TypeError::Mismatch { .. })
    ));
    // Printed and parsed as any element-wise op.
    let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : bf16[3]\n  %1 = input \"b\" @cpu:0 : bf16[3]\n  %2 = eq %0, %1 @cpu:0 : bf16[3]\n  return %2\n}\n";
    let g = crate::text::parse(src).unwrap();
    assert_eq!(crate::text::print(&g), src);
}
