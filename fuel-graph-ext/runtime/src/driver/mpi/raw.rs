//! The MPI calls `MpiDriver` makes, through rsmpi's raw bindings: every
//! call's return code checked (the driver's communicators run under
//! `MPI_ERRORS_RETURN`, so a failing call returns here instead of aborting
//! the job), MPI's names for our element types and reduce ops, and the user
//! ops (`MPI_Op_create`) for f16 and bf16, which MPI has no type for.
//!
//! Pure routing (which MPI call serves which dtype and op) is in `route`;
//! this module only speaks MPI.

use super::route::Wire;
use crate::backend::cpu;
use crate::driver::prologue::{backend_error, lock};
use crate::driver::DriverError;
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::op::ReduceOp;
use mpi::ffi;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

/// `MPI_SUCCESS` as the calls return it.
const SUCCESS: c_int = ffi::MPI_SUCCESS as c_int;

/// MPI's text for an error code (`MPI_Error_string`).
fn error_text(code: c_int) -> String {
    let mut buf = vec![0u8; 512];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING (256 in Open MPI and
    // MPICH) bytes and more; MPI writes at most that many.
    let rc = unsafe { ffi::MPI_Error_string(code, buf.as_mut_ptr().cast(), &mut len) };
    if rc != SUCCESS {
        return format!("MPI error code {code}");
    }
    buf.truncate(usize::try_from(len).unwrap_or(0).min(512));
    format!("{} (MPI error code {code})", String::from_utf8_lossy(&buf))
}

/// The return code `code` of MPI call `call` as a result.
pub(super) fn check(call: &'static str, code: c_int) -> Result<(), DriverError> {
    if code == SUCCESS {
        Ok(())
    } else {
        Err(backend_error("mpi", call, error_text(code)))
    }
}

/// `n` as an MPI count (a C `int`), or an error naming the limit.
pub(super) fn count(call: &'static str, n: usize) -> Result<c_int, DriverError> {
    c_int::try_from(n).map_err(|_| {
        backend_error(
            "mpi",
            call,
            format!(
                "{n} elements is more than one MPI call takes ({} elements, a C int); split the tensor into smaller collectives",
                c_int::MAX
            ),
        )
    })
}

/// The MPI datatype that moves `dtype` elements unchanged (f16 and bf16
/// travel as 16-bit words, bool as bytes).
pub(super) fn move_type(dtype: DType) -> ffi::MPI_Datatype {
    // SAFETY: reading rsmpi's constants, set once when the library loads.
    unsafe {
        match dtype {
            DType::F32 => ffi::RSMPI_FLOAT,
            DType::F64 => ffi::RSMPI_DOUBLE,
            DType::F16 | DType::BF16 | DType::U16 => ffi::RSMPI_UINT16_T,
            DType::I8 => ffi::RSMPI_INT8_T,
            DType::I16 => ffi::RSMPI_INT16_T,
            DType::I32 => ffi::RSMPI_INT32_T,
            DType::I64 => ffi::RSMPI_INT64_T,
            DType::U8 | DType::Bool => ffi::RSMPI_UINT8_T,
            DType::U32 => ffi::RSMPI_UINT32_T,
            DType::U64 => ffi::RSMPI_UINT64_T,
        }
    }
}

/// MPI's own op for `op` on `dtype` (`Mean` is never passed: it is a sum
/// then a division, see `route`). Bool is a byte whose sum and max are
/// `MPI_LOR` and whose product and min are `MPI_LAND`.
pub(super) fn native_op(dtype: DType, op: ReduceOp) -> ffi::MPI_Op {
    // SAFETY: reading rsmpi's constants.
    unsafe {
        match (dtype, op) {
            (DType::Bool, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Mean) => ffi::RSMPI_LOR,
            (DType::Bool, ReduceOp::Product | ReduceOp::Min) => ffi::RSMPI_LAND,
            (_, ReduceOp::Sum | ReduceOp::Mean) => ffi::RSMPI_SUM,
            (_, ReduceOp::Product) => ffi::RSMPI_PROD,
            (_, ReduceOp::Max) => ffi::RSMPI_MAX,
            (_, ReduceOp::Min) => ffi::RSMPI_MIN,
        }
    }
}

/// The reduce ops of the user ops, in their table's order.
const USER_OPS: [ReduceOp; 4] = [
    ReduceOp::Sum,
    ReduceOp::Product,
    ReduceOp::Max,
    ReduceOp::Min,
];

/// The user op's body for `dtype` (0 f16, 1 bf16) and `USER_OPS[O]`:
/// `inout[i] = inout[i] op in[i]`, with the CPU backend's own fold, so each
/// pair rounds as the interpreter's fold rounds it.
unsafe extern "C" fn user_fold<const D: u8, const O: usize>(
    input: *mut c_void,
    inout: *mut c_void,
    len: *mut c_int,
    _datatype: *mut ffi::MPI_Datatype,
) {
    let dtype = if D == 0 { DType::F16 } else { DType::BF16 };
    let kind = USER_OPS[O].combiner();
    // SAFETY: MPI passes `*len` elements of the op's datatype (16-bit
    // words) in both buffers, which do not overlap.
    let (a, b) = unsafe {
        let n = usize::try_from(*len).unwrap_or(0) * 2;
        (
            std::slice::from_raw_parts(input as *const u8, n),
            std::slice::from_raw_parts_mut(inout as *mut u8, n),
        )
    };
    if !cpu::fold_bytes(dtype, kind, &[a], b, true) {
        // MPI's scratch buffers may be unaligned for 16-bit words: fold
        // aligned copies instead.
        let x: Vec<u16> = a
            .chunks(2)
            .map(|c| u16::from_ne_bytes([c[0], c[1]]))
            .collect();
        let mut y: Vec<u16> = b
            .chunks(2)
            .map(|c| u16::from_ne_bytes([c[0], c[1]]))
            .collect();
        // SAFETY: plain words viewed as bytes.
        let (xb, yb) = unsafe {
            (
                std::slice::from_raw_parts(x.as_ptr().cast::<u8>(), x.len() * 2),
                std::slice::from_raw_parts_mut(y.as_mut_ptr().cast::<u8>(), y.len() * 2),
            )
        };
        let _ = cpu::fold_bytes(dtype, kind, &[xb], yb, true);
        b.copy_from_slice(yb);
    }
}

/// An `MPI_Op` handle, shared between threads (MPI runs at
/// `MPI_THREAD_MULTIPLE`; an op is a read-only MPI object once made).
#[derive(Clone, Copy)]
struct Op(ffi::MPI_Op);
// SAFETY: see the type's doc.
unsafe impl Send for Op {}

/// The user ops, made on first use: `[f16, bf16][USER_OPS index]`, or why
/// `MPI_Op_create` failed.
static USER: Mutex<Option<Result<[[Op; 4]; 2], String>>> = Mutex::new(None);

/// The user op for `op` on f16 or bf16, or `None` when MPI could not make
/// one (the driver then falls back to gathering and folding; see `route`).
pub(super) fn user_op(dtype: DType, op: ReduceOp) -> Option<ffi::MPI_Op> {
    type F = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut ffi::MPI_Datatype);
    let mut table = lock(&USER);
    let made = table.get_or_insert_with(|| {
        let fns: [[F; 4]; 2] = [
            [
                user_fold::<0, 0>,
                user_fold::<0, 1>,
                user_fold::<0, 2>,
                user_fold::<0, 3>,
            ],
            [
                user_fold::<1, 0>,
                user_fold::<1, 1>,
                user_fold::<1, 2>,
                user_fold::<1, 3>,
            ],
        ];
        let mut out = [[Op(ffi::MPI_Op(std::ptr::null_mut())); 4]; 2];
        for (d, row) in fns.iter().enumerate() {
            for (o, f) in row.iter().enumerate() {
                let mut h = ffi::MPI_Op(std::ptr::null_mut());
                // SAFETY: `f` is a plain function that MPI calls with its
                // documented arguments; commute = 1 (all four ops commute).
                let rc = unsafe { ffi::MPI_Op_create(Some(*f), 1, &mut h) };
                check("MPI_Op_create", rc).map_err(|e| e.to_string())?;
                out[d][o] = Op(h);
            }
        }
        Ok(out)
    });
    let d = match dtype {
        DType::F16 => 0,
        DType::BF16 => 1,
        _ => return None,
    };
    let o = USER_OPS.iter().position(|x| *x == op)?;
    made.as_ref().ok().map(|t| t[d][o].0)
}

/// The datatype and op a reduction of `dtype` with `op` runs on, for the
/// wires that reduce inside MPI.
pub(super) fn reduction(
    wire: Wire,
    dtype: DType,
    op: ReduceOp,
) -> Option<(ffi::MPI_Datatype, ffi::MPI_Op)> {
    match wire {
        Wire::Native => Some((move_type(dtype), native_op(dtype, op))),
        Wire::User => user_op(dtype, op).map(|o| (move_type(dtype), o)),
    }
}

/// `MPI_ERRORS_RETURN` on `comm`, so its failures return as codes.
pub(super) fn errors_return(comm: ffi::MPI_Comm) -> Result<(), DriverError> {
    // SAFETY: `comm` is a live communicator; the handler is MPI's own.
    check("MPI_Comm_set_errhandler", unsafe {
        ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN)
    })
}
