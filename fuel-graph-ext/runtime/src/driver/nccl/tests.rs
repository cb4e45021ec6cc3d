//! Unit tests of the NCCL driver that need no GPU: the dtype and reduce-op
//! tables and the checks made before any NCCL call.

use super::*;

#[test]
fn elem_mapping_covers_nccl_types_and_refuses_the_rest() {
    use sys::ncclDataType_t as T;
    let table = [
        (DType::F16, T::ncclFloat16),
        (DType::BF16, T::ncclBfloat16),
        (DType::F32, T::ncclFloat32),
        (DType::F64, T::ncclFloat64),
        (DType::I8, T::ncclInt8),
        (DType::I32, T::ncclInt32),
        (DType::I64, T::ncclInt64),
        (DType::U8, T::ncclUint8),
        (DType::U32, T::ncclUint32),
        (DType::U64, T::ncclUint64),
    ];
    for (e, t) in table {
        assert_eq!(nccl_data_type(e).unwrap(), t, "{e}");
        assert_eq!(elem_bytes(t), e.size_bytes(), "{e}");
    }
    for e in [DType::Bool, DType::I16, DType::U16] {
        let err = nccl_data_type(e).unwrap_err().to_string();
        assert!(err.contains(e.as_str()) && err.contains("nccl"), "{err}");
    }
}

#[test]
fn reduce_ops_map_and_mean_is_avg() {
    use sys::ncclRedOp_t as R;
    assert_eq!(nccl_red_op(ReduceOp::Sum), R::ncclSum);
    assert_eq!(nccl_red_op(ReduceOp::Product), R::ncclProd);
    assert_eq!(nccl_red_op(ReduceOp::Max), R::ncclMax);
    assert_eq!(nccl_red_op(ReduceOp::Min), R::ncclMin);
    assert_eq!(nccl_red_op(ReduceOp::Mean), R::ncclAvg);
}

#[test]
fn data_type_checks_whole_elements() {
    let (t, n) = NcclDriver::data_type(DType::BF16, 64).unwrap();
    assert_eq!((t, n), (sys::ncclDataType_t::ncclBfloat16, 32));
    let e = NcclDriver::data_type(DType::F32, 6)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a whole number"), "{e}");
}
