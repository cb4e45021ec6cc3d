//! What an `extern` op means to the interpreter: the reference function
//! registered for its name.
//!
//! The host framework registers one function per kernel name
//! ([`register_reference`]), process-wide, so every caller of
//! [`super::interpret`] (the tests, `fuel-opt --run`, `check_lowering`)
//! sees it without new arguments. `matmul` is registered from the start:
//! `a[m, k] · b[k, n]` for floats, each sum taken in `f64` and rounded to
//! the dtype once, which the shipped kernels match exactly on the small
//! integer inputs the tests use.

use super::{HostTensor, InterpError};
use crate::op::ExternOp;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

/// A reference function: the op (its attributes and result type) and its
/// operands' values in; its result, or why it cannot be computed, out.
pub type ReferenceFn =
    Arc<dyn Fn(&ExternOp, &[&HostTensor]) -> Result<HostTensor, String> + Send + Sync>;

fn table() -> &'static RwLock<HashMap<String, ReferenceFn>> {
    static TABLE: OnceLock<RwLock<HashMap<String, ReferenceFn>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut m: HashMap<String, ReferenceFn> = HashMap::new();
        m.insert("matmul".into(), Arc::new(matmul_reference));
        RwLock::new(m)
    })
}

/// Registers `f` as what `extern "name"` computes, for every later
/// interpretation in this process (replacing an earlier one).
pub fn register_reference(
    name: &str,
    f: impl Fn(&ExternOp, &[&HostTensor]) -> Result<HostTensor, String> + Send + Sync + 'static,
) {
    if let Ok(mut t) = table().write() {
        t.insert(name.to_string(), Arc::new(f));
    }
}

/// Evaluates an extern op through its registered reference function.
pub(super) fn eval_extern(x: &ExternOp, args: &[&HostTensor]) -> Result<HostTensor, InterpError> {
    let f = table()
        .read()
        .ok()
        .and_then(|t| t.get(&x.name).cloned())
        .ok_or_else(|| InterpError::NoReference(x.name.clone()))?;
    let out = f(x, args).map_err(|message| InterpError::Extern {
        name: x.name.clone(),
        message,
    })?;
    if out.ty != x.ty || out.bytes().len() != x.ty.size_bytes() {
        return Err(InterpError::Extern {
            name: x.name.clone(),
            message: format!(
                "its reference function returned {} where the op declares {}",
                out.ty, x.ty
            ),
        });
    }
    Ok(out)
}

/// The shapes of a matmul's operands and result: `(m, k, n)`, or why they
/// do not fit `a[m, k] · b[k, n] -> [m, n]` of one float dtype.
pub fn matmul_shape(
    x: &ExternOp,
    a: &crate::TensorType,
    b: &crate::TensorType,
) -> Result<(usize, usize, usize), String> {
    let (&[m, k], &[k2, n]) = (a.shape.as_slice(), b.shape.as_slice()) else {
        return Err(format!("matmul takes two matrices, found {a} and {b}"));
    };
    if k != k2 || x.ty.shape.as_slice() != [m, n] || a.dtype != b.dtype || x.ty.dtype != a.dtype {
        return Err(format!(
            "matmul of {a} and {b} gives {}[{m}, {n}] when k agrees ({k} against {k2}); declare that type, or fix the operands",
            a.dtype
        ));
    }
    if !a.dtype.is_float() {
        return Err(format!("matmul takes floats, found {}", a.dtype));
    }
    Ok((m, k, n))
}

/// The reference `matmul`: `a[m, k] · b[k, n]`, each sum in `f64`,
/// rounded to the dtype once.
pub fn matmul_reference(x: &ExternOp, args: &[&HostTensor]) -> Result<HostTensor, String> {
    let [a, b] = args else {
        return Err(format!("matmul takes two operands, found {}", args.len()));
    };
    let (m, k, n) = matmul_shape(x, &a.ty, &b.ty)?;
    let (av, bv) = (a.to_f64(), b.to_f64());
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let aip = av[i * k + p];
            for j in 0..n {
                out[i * n + j] += aip * bv[p * n + j];
            }
        }
    }
    Ok(HostTensor::new(x.ty.clone(), out))
}
